//! The jobs service's settings, each defined once as a field of [`parley_jobs::cli::Settings`]:
//! these tests check that a field's flag, environment variable and file key are all its name,
//! that the three give the same setting, that `--config FILE` is read and flags win over it,
//! and that the book's reference page (`docs/src/reference/jobs-config.md`) and the Debian
//! package's commented settings file (`packaging/etc/jobs.toml`) are generated from the
//! definitions (`PARLEY_BLESS=1` regenerates them).

#![allow(clippy::unwrap_used)]

use std::process::Command;

use clap::Args as _;
use parley_jobs::cli::Settings;
use testkit::settings::{EnvChild, FileKey};

/// The settings as a command of their own (the same definition `parley_jobs::cli::Args`
/// flattens).
fn command() -> clap::Command {
    Settings::augment_args(clap::Command::new("parley-jobs"))
}

/// The settings Parley's other clients share, read from `PARLEY_` and the name in capitals; the
/// service's own are `PARLEY_JOBS_` and the name.
const SHARED_VARIABLES: [&str; 3] = ["coordinator", "ca_file", "token"];

const CHILD: EnvChild = EnvChild {
    test: "settings::every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key",
    marker: "JOBS_SETTINGS_CHILD",
};

#[test]
fn every_setting_is_named_after_its_field() {
    let env = |key: &str| {
        if SHARED_VARIABLES.contains(&key) {
            format!("PARLEY_{}", key.to_uppercase())
        } else {
            format!("PARLEY_JOBS_{}", key.to_uppercase())
        }
    };
    testkit::settings::check_named_after_fields(&command(), env, &[], Settings::from_toml);
}

#[test]
fn every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key() {
    if CHILD.is_child() {
        return CHILD.print::<Settings>(command());
    }
    testkit::settings::check_flag_variable_and_file_agree(command, CHILD, &[], Settings::from_toml);
}

#[test]
fn the_file_is_read_a_flag_wins_over_it_and_an_unknown_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.toml");
    let config = file.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut jobs = Command::new(env!("CARGO_BIN_EXE_parley-jobs"));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("PARLEY_") {
                jobs.env_remove(name);
            }
        }
        let out = jobs.args(args).output().unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    std::fs::write(&file, "aging_s = -1\nlisten = \"127.0.0.1:0\"\n").unwrap();
    let (code, stderr) = run(&["--config", config]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("aging_s is -1"), "{stderr}");
    let (code, stderr) = run(&[
        "--config",
        config,
        "--aging-s",
        "5",
        "--queue-order",
        "lifo",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("queue_order \"lifo\""), "{stderr}");
    std::fs::write(&file, "listen = \"127.0.0.1:0\"\nqueue = \"fair\"\n").unwrap();
    let (code, stderr) = run(&["--config", config]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("queue") && stderr.contains("line 2") && stderr.contains(config),
        "{stderr}"
    );
}

/// Every setting as a key of the settings file, with its default from [`Settings::defaults`].
fn file_keys() -> Vec<FileKey> {
    let defaults = toml::Table::try_from(Settings::defaults()).unwrap();
    testkit::settings::file_keys(&command(), |arg| {
        match defaults.get(arg.get_id().as_str()) {
            Some(value) => (value.to_string(), Some(value.to_string())),
            None => match arg.get_id().as_str() {
                "ca_file" => ("the built-in roots".into(), None),
                "api_token" => ("none (an open API)".into(), None),
                "tls_cert" | "tls_key" => ("none (plain HTTP)".into(), None),
                "webui_url" => ("derived from listen".into(), None),
                _ => ("none".into(), None),
            },
        }
    })
}

/// The page's prose before the generated table.
const INTRO: &str = r##"# Jobs service settings

Settings of `parley-jobs` come from three layers, later ones winning: the defaults, a TOML file
(`parley-jobs --config FILE`), and command-line flags or their environment variables (a flag
wins over its variable). An unknown key in the file is an error naming it and its line.

```toml
coordinator = "https://coord-1:5050,https://coord-2:5050"
listen = "127.0.0.1:5070"
data_dir = "/var/lib/parley/jobs"
role = "batch"
queue_order = "fair"
```

Each setting is defined once, in `jobs/src/cli.rs` (`Settings`): its file key is the field's
name, its flag the same with `-` for `_`, and its environment variable `PARLEY_JOBS_` and the
name in capitals, except the three Parley's clients share: `PARLEY_COORDINATOR`,
`PARLEY_CA_FILE` and `PARLEY_TOKEN`. The table below is generated from those definitions; the
Debian package installs every setting, commented out with its default, in
`/etc/parley/jobs.toml` ([Install](../getting-started/install.md)).

"##;

#[test]
fn the_jobs_settings_reference_is_fresh() {
    let table = testkit::settings::reference_table(&file_keys());
    let expected = "| `data_dir` | `--data-dir DIR` | `PARLEY_JOBS_DATA_DIR` | `\"./data/jobs\"` |";
    assert!(table.contains(expected), "no {expected} in\n{table}");
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("docs/src/reference/jobs-config.md"),
        format!("{INTRO}{table}").as_bytes(),
        "cargo test -p parley-jobs --test jobs settings::",
    );
}

#[test]
fn the_packaged_settings_file_is_fresh_and_sets_only_the_install_paths() {
    let text = testkit::settings::commented_toml(
        "/etc/parley/jobs.toml: the settings of the Parley jobs service (parley-jobs.service).\n\n\
         Every setting is listed, commented out, with its flag, environment variable and \
         default; a flag or variable wins over this file. Set coordinator when it is not on \
         this machine's port 5050, then: systemctl enable --now parley-jobs. Reference: \
         /usr/share/man/man1/parley-jobs.1.gz and the book's Jobs service settings page.",
        &file_keys(),
        &[("data_dir", "\"/var/lib/parley/jobs\"")],
    );
    let expected = Settings {
        data_dir: Some("/var/lib/parley/jobs".into()),
        ..Settings::default()
    };
    assert_eq!(Settings::from_toml(&text).unwrap(), expected);
    testkit::settings::check_each_line_uncommented_loads(&text, Settings::from_toml);
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("packaging/etc/jobs.toml"),
        text.as_bytes(),
        "cargo test -p parley-jobs --test jobs settings::",
    );
}
