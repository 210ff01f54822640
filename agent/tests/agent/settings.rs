//! The agent's settings, each defined once as a field of [`agent::cli::Settings`]: these tests
//! check that a field's flag, environment variable and file key are all its name, that the
//! three give the same setting, that the layers stack (defaults, then `--config FILE`, then
//! flags and variables), and that the book's reference page
//! (`docs/src/reference/agent-config.md`) and the Debian package's commented settings file
//! (`packaging/etc/agent.toml`) are generated from the definitions (`PARLEY_BLESS=1`
//! regenerates them).

#![allow(clippy::unwrap_used)]

use std::process::Command;

use agent::cli::Settings;
use clap::Args as _;
use testkit::settings::{EnvChild, FileKey};

/// The settings as a command of their own (the same definition `agent::cli::Cli` flattens).
fn command() -> clap::Command {
    Settings::augment_args(clap::Command::new("agent"))
}

/// Settings whose environment variable is not `PARLEY_` and the name in capitals: the name each
/// had before the settings file existed.
const OTHER_VARIABLE_NAMES: [(&str, &str); 1] = [("api_token", "PARLEY_AGENT_API_TOKEN")];

/// Settings whose sample value has a form of its own: `(key, flag text, file text)`.
const SAMPLES: [(&str, &str, &str); 1] =
    [("reserve", "eng:cpus=1", "reserve = [\"eng:cpus=1\"]\n")];

const CHILD: EnvChild = EnvChild {
    test: "settings::every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key",
    marker: "AGENT_SETTINGS_CHILD",
};

#[test]
fn every_setting_is_named_after_its_field() {
    let env = |key: &str| {
        OTHER_VARIABLE_NAMES
            .iter()
            .find(|(k, _)| *k == key)
            .map_or_else(
                || format!("PARLEY_{}", key.to_uppercase()),
                |(_, v)| (*v).into(),
            )
    };
    testkit::settings::check_named_after_fields(&command(), env, &SAMPLES, Settings::from_toml);
    assert!(command().get_arguments().count() >= 25);
}

#[test]
fn every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key() {
    if CHILD.is_child() {
        return CHILD.print::<Settings>(command());
    }
    testkit::settings::check_flag_variable_and_file_agree(
        command,
        CHILD,
        &SAMPLES,
        Settings::from_toml,
    );
}

#[test]
fn the_bare_allow_root_tasks_flag_still_means_true() {
    let flags: Settings = testkit::settings::from_flags(command(), &["--allow-root-tasks".into()]);
    assert_eq!(flags.allow_root_tasks, Some(true));
    let flags: Settings = testkit::settings::from_flags(
        command(),
        &[
            "--allow-root-tasks".into(),
            "--isolation".into(),
            "none".into(),
        ],
    );
    assert_eq!(flags.allow_root_tasks, Some(true));
    assert_eq!(flags.isolation.as_deref(), Some("none"));
}

#[test]
fn an_unknown_or_mistyped_file_key_is_an_error_naming_it_and_its_line() {
    let e = Settings::from_toml("work_dir = \"/x\"\nkill_grace = 5\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("kill_grace") && e.contains("line 2"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    let e = Settings::from_toml("default_pids = \"many\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 1") && e.contains("expected u64"), "{e}");
}

/// Runs the `agent` binary with `args` and `vars`, the environment's `PARLEY_*` variables
/// removed; its exit code and standard error.
fn run_agent(args: &[&str], vars: &[(&str, &str)]) -> (i32, String) {
    let mut agent = Command::new(env!("CARGO_BIN_EXE_agent"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PARLEY_") {
            agent.env_remove(name);
        }
    }
    let out = agent
        .args(args)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_file_wins_over_the_defaults_and_flags_and_variables_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent.toml");
    let work_dir = dir.path().join("work");
    // Two bad values: the first one checked (kill_grace_s) is reported, named as the file
    // spells it; set by a flag or a variable, the file's value is gone and the next one
    // (default_pids) is reported.
    std::fs::write(
        &file,
        format!(
            "work_dir = {:?}\nlisten = \"127.0.0.1:0\"\nkill_grace_s = -1\ndefault_pids = 0\n",
            work_dir.to_str().unwrap()
        ),
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let (code, stderr) = run_agent(&["--config", config], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("kill_grace_s (in {config}) -1")),
        "{stderr}"
    );
    for (args, vars) in [
        (&["--config", config, "--kill-grace-s", "2"][..], &[][..]),
        (&["--config", config], &[("PARLEY_KILL_GRACE_S", "2")][..]),
    ] {
        let (code, stderr) = run_agent(args, vars);
        assert_eq!(code, 2, "{args:?} {vars:?}: {stderr}");
        assert!(
            stderr.contains(&format!("default_pids (in {config}) 0")),
            "{args:?} {vars:?}: {stderr}"
        );
    }
    // A flag is named as a flag.
    let (code, stderr) = run_agent(&["--config", config, "--kill-grace-s", "-3"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--kill-grace-s -3"), "{stderr}");
    // An unknown key: one line naming it, and nothing started (no work dir made).
    std::fs::write(&file, "listen = \"127.0.0.1:0\"\nwork-dir = \"/tmp/x\"\n").unwrap();
    let (code, stderr) = run_agent(&["--config", config], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("work-dir") && stderr.contains("line 2") && stderr.contains(config),
        "{stderr}"
    );
    let (code, stderr) = run_agent(&["--config", "/nonexistent/agent.toml"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/agent.toml"), "{stderr}");
    assert!(!work_dir.exists());
}

/// Every setting as a key of the settings file, with its default from
/// [`Settings::defaults`] (as TOML, and in words).
fn file_keys() -> Vec<FileKey> {
    let defaults = toml::Table::try_from(Settings::defaults()).unwrap();
    testkit::settings::file_keys(&command(), |arg| {
        let key = arg.get_id().as_str();
        match defaults.get(key) {
            Some(value) => (value.to_string(), Some(value.to_string())),
            None => {
                let words = match key {
                    "resources" => "detected from the machine",
                    "hostname" => "the machine's",
                    "advertise_url" => "derived from listen",
                    "cgroup_root" => "none (found at start)",
                    "tls_cert" | "tls_key" => "none (plain HTTP)",
                    "ca_file" => "the built-in roots",
                    "api_token" => "generated, kept in WORK_DIR/api_token",
                    "task_user" => "the agent's own user",
                    _ => "none",
                };
                (words.to_owned(), None)
            }
        }
    })
}

/// The page's prose before the generated table.
const INTRO: &str = r##"# Agent settings

Settings of the agent come from three layers, later ones winning: the defaults, a TOML file
(`agent --config FILE`), and command-line flags or their environment variables (a flag wins over
its variable). The result is checked once, before anything starts; a bad value is a one-line
error naming the setting as its layer spells it (`kill_grace_s (in /etc/parley/agent.toml)`, or
`--kill-grace-s`), and an unknown key in the file is an error naming it and its line.

```toml
coordinator = "https://coord-1:5050,https://coord-2:5050"
listen = "10.0.0.5:5051"
resources = "cpus=16,mem=65536,disk=500000"
attributes = "rack=r1,zone=a"
reserve = ["eng:cpus=4,mem=8192"]
work_dir = "/var/lib/parley/agent"
task_user = "parley-task"
```

Each setting is defined once, in `agent/src/cli.rs` (`Settings`): its file key is the field's
name, its flag the same with `-` for `_`, and its environment variable `PARLEY_` and the name in
capitals, except `api_token`, read from `PARLEY_AGENT_API_TOKEN`. `reserve` is repeatable on the
command line and a list in the file. The table below is generated from those definitions; the
Debian package installs every setting, commented out with its default, in
`/etc/parley/agent.toml` ([Install](../getting-started/install.md)).

"##;

#[test]
fn the_agent_settings_reference_is_fresh() {
    let table = testkit::settings::reference_table(&file_keys());
    for text in [
        "| `work_dir` | `--work-dir DIR` | `PARLEY_WORK_DIR` | `\"./parley-agent\"` |",
        "| `api_token` | `--api-token TOKEN` | `PARLEY_AGENT_API_TOKEN` |",
    ] {
        assert!(table.contains(text), "no {text} in\n{table}");
    }
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("docs/src/reference/agent-config.md"),
        format!("{INTRO}{table}").as_bytes(),
        "cargo test -p parley-agent --test agent settings::",
    );
}

/// What the package's settings file sets: the paths an installed agent uses, and the user its
/// tasks run as (the agent runs as root, and refuses to run tasks as root).
const INSTALLED: [(&str, &str); 2] = [
    ("work_dir", "\"/var/lib/parley/agent\""),
    ("task_user", "\"parley-task\""),
];

/// The Debian package's `/etc/parley/agent.toml`: every setting, commented out, but
/// [`INSTALLED`].
fn packaged_file() -> String {
    testkit::settings::commented_toml(
        "/etc/parley/agent.toml: the settings of the Parley agent (parley-agent.service).\n\n\
         Every setting is listed, commented out, with its flag, environment variable and \
         default; a flag or variable wins over this file. Set at least coordinator (and listen, \
         for a coordinator on another machine), then: systemctl enable --now parley-agent. \
         Reference: /usr/share/man/man1/parley-agent.1.gz and the book's Agent settings page.",
        &file_keys(),
        &INSTALLED,
    )
}

#[test]
fn the_packaged_settings_file_is_fresh_and_sets_only_the_install_paths() {
    let text = packaged_file();
    let file = Settings::from_toml(&text).unwrap();
    let expected = Settings {
        work_dir: Some("/var/lib/parley/agent".into()),
        task_user: Some("parley-task".into()),
        ..Settings::default()
    };
    assert_eq!(file, expected);
    // Uncommenting any one line gives a file that still loads.
    testkit::settings::check_each_line_uncommented_loads(&text, Settings::from_toml);
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("packaging/etc/agent.toml"),
        text.as_bytes(),
        "cargo test -p parley-agent --test agent settings::",
    );
}
