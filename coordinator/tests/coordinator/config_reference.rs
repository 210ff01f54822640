//! The coordinator's settings, each defined once as a field of [`coordinator::Overrides`]: these
//! tests check that a field's flag, environment variable and file key are all its name, that
//! the three give the same setting, and that the book's reference page
//! (`docs/src/reference/config.md`) is generated from the definitions (`PARLEY_BLESS=1`
//! regenerates it).

#![allow(clippy::unwrap_used)]

use clap::Args as _;
use coordinator::config::{default_text, reference_table, DEPRECATED_KEYS};
use coordinator::Overrides;
use testkit::settings::{EnvChild, FileKey};

/// The page's prose before the generated table.
const INTRO: &str = r##"# Settings and flags

## The coordinator

Settings come from three layers, later ones winning: the defaults, a TOML file
(`coordinator --config FILE`), and command-line flags or their environment variables (a flag
wins over its variable). The result is checked once, before
anything starts; a bad value is a one-line error naming the setting. Unknown keys in the file are
errors.

```toml
listen = "127.0.0.1:5050"
allocation_interval = 1
offer_timeout = 60
tls_cert = "/etc/parley/coordinator.crt"
tls_key = "/etc/parley/coordinator.key"
agent_ca_file = "/etc/parley/ca.pem"
credentials = "/etc/parley/credentials.toml"
[roles]
"eng" = 2
"eng/batch" = 1
"sci" = 1
```

Durations are seconds (fractions allowed), more than 0 unless the table says 0 is allowed, and at
most ten years. Each setting is defined once, in `coordinator/src/config.rs` (`Overrides`; the
defaults are `Config`'s): its file key is the field's name, its flag the same with `-` for `_`,
and its environment variable `PARLEY_` and the name in capitals. The table below is generated
from those definitions. Keys marked deprecated are the names earlier versions used; they still
load, but setting one together with its new key is an error.

"##;

/// The page's prose after the generated table: the binary's own flags, the agent's, and the
/// environment variables of every binary.
const OUTRO: &str = r##"
Flags of the `coordinator` binary only (no file key):

| flag | default | meaning |
|---|---|---|
| `--config FILE` | none | the TOML file above |
| `--data-dir DIR` | `data` | the durable registry `DIR/registry.redb`; with `--dev`, the local agents' work dirs `DIR/agent-N` |
| `--in-memory` | off | keep the books in memory only |
| `--dev` | off | also run local agents in this process ([The `--dev` cluster](../getting-started/dev.md)) |
| `--dev-agents N` | 2 | with `--dev`: how many local agents (1–64) |
| `--etcd URL[,URL...]` | none | [high availability](../operating/ha.md): the registry and the leader election in etcd |
| `--etcd-prefix P` | `/parley` | with `--etcd`: the key prefix of this cluster |
| `--advertise-url URL` | required with `--etcd` | how the others and clients reach this coordinator |
| `--leader-lease-s N` | 10 | with `--etcd`: the leader lease; failover takes about this long when the leader's machine is gone (a crashed leader is noticed sooner: `--leader-probe-ms`) |
| `--leader-renew-deadline-ms MS` | 2/3 of the lease | with `--etcd`: a leader whose last renewal is older steps down |
| `--leader-probe-ms MS` | 100 | with `--etcd`: how often a follower probes the leader's address; a leader seen alive that then refuses three connections in a row has its lease revoked, so a crash fails over at once (0: wait for the lease) |
| `--reregister-grace-s N` | 10 | with `--etcd` and a quota set: how long a new leader waits for known agents before offering (without quotas it offers each agent once it is back) |

## The agent and the jobs service

The agent and `parley-jobs` read settings the same way (defaults, `--config FILE`, flags and
variables; one definition per setting), on pages of their own generated from those definitions:
[Agent settings](agent-config.md) and [Jobs service settings](jobs-config.md). The Debian
package installs each binary's settings file, every setting commented out with its default, in
`/etc/parley/` ([Install](../getting-started/install.md)).

## Environment variables

| variable | read by |
|---|---|
| `PARLEY_LISTEN` | `coordinator --listen` |
| `PARLEY_<SETTING>` | `coordinator`: every setting in the first table, e.g. `PARLEY_OFFER_TIMEOUT` |
| `PARLEY_<SETTING>` | `agent`: every setting of [Agent settings](agent-config.md), e.g. `PARLEY_WORK_DIR` |
| `PARLEY_JOBS_<SETTING>` | `parley-jobs`: its own settings ([Jobs service settings](jobs-config.md)), e.g. `PARLEY_JOBS_LISTEN` |
| `PARLEY_COORDINATOR` | `agent`, `parley-jobs`, `parleyctl` and the examples: `--coordinator` |
| `PARLEY_TOKEN` | `agent`, `parley-jobs`, `parleyctl` and the examples: `--token` |
| `PARLEY_AGENT_API_TOKEN` | `agent --api-token` |
| `PARLEY_CA_FILE` | `agent`, `parley-jobs` and the examples: `--ca-file` |
| `RUST_LOG` | every binary's log filter (`tracing-subscriber`), e.g. `RUST_LOG=coordinator=debug` |
"##;

/// The settings as a command of their own (`Overrides` is a flattened `clap::Args`, so it has
/// no `CommandFactory`; this is the same definition the `coordinator` binary flattens).
fn command() -> clap::Command {
    Overrides::augment_args(clap::Command::new("coordinator"))
}

/// Environment variables that other flags of Parley's binaries read; no setting may take one.
const OTHER_VARIABLES: [&str; 10] = [
    "PARLEY_LISTEN",
    "PARLEY_COORDINATOR",
    "PARLEY_TOKEN",
    "PARLEY_CA_FILE",
    "PARLEY_AGENT_API_TOKEN",
    "PARLEY_JOBS_URL",
    "PARLEY_JOBS_TOKEN",
    "PARLEY_JOBS_API_TOKEN",
    "PARLEY_JOBS_TLS_CERT",
    "PARLEY_BLESS",
];

/// Settings whose sample value has a form of its own: `(key, flag text, file text)`.
const SAMPLES: [(&str, &str, &str); 4] = [
    // The repeatable `--role PATH=WEIGHT`; in the file a `[roles]` table.
    ("roles", "eng=2", "[roles]\n\"eng\" = 2\n"),
    // `on` / `off` on the command line, a TOML boolean in the file.
    ("gpu_gating", "off", "gpu_gating = false\n"),
    // A comma-separated list; in the file an array.
    (
        "known_resources",
        "fpga,ssd",
        "known_resources = [\"fpga\", \"ssd\"]\n",
    ),
    // `text` or `json`; not the default, so that it is seen to change something.
    ("log_format", "json", "log_format = \"json\"\n"),
];

/// A sample value for the argument, different from the default.
fn sample(arg: &clap::Arg) -> testkit::settings::Sample {
    testkit::settings::sample(arg, &SAMPLES)
}

/// Runs [`every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key`] again in a child
/// process that parses the settings from its environment alone.
const CHILD: EnvChild = EnvChild {
    test: "config_reference::every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key",
    marker: "CONFIG_REFERENCE_CHILD",
};

/// The file's text parsed, the error as text.
fn from_toml(text: &str) -> Result<Overrides, String> {
    Overrides::from_toml(text).map_err(|e| e.to_string())
}

#[test]
fn every_setting_is_named_after_its_field() {
    let command = command();
    let mut variables = Vec::new();
    for arg in command.get_arguments() {
        let key = arg.get_id().as_str();
        let long = if key == "roles" {
            "role".to_owned()
        } else {
            key.replace('_', "-")
        };
        assert_eq!(arg.get_long(), Some(long.as_str()), "{key}: its flag");
        let env = format!("PARLEY_{}", key.to_uppercase());
        assert_eq!(
            arg.get_env().map(|e| e.to_string_lossy().into_owned()),
            Some(env.clone()),
            "{key}: its environment variable"
        );
        assert!(
            !OTHER_VARIABLES.contains(&env.as_str()),
            "{env} is read by another flag"
        );
        assert!(!variables.contains(&env), "{env} twice");
        variables.push(env);
        // The file key is the field's name: the sample file line is `key = value`.
        let file = Overrides::from_toml(&sample(arg).toml)
            .unwrap_or_else(|e| panic!("{key}: the file key {key} is not read: {e}"));
        assert_ne!(
            file,
            Overrides::default(),
            "{key}: the file key sets nothing"
        );
        assert!(
            arg.get_help().is_some_and(|h| !h.to_string().is_empty()),
            "{key}: no help for the reference"
        );
    }
    assert!(variables.len() > 25, "only {variables:?}");
}

#[test]
fn every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key() {
    if CHILD.is_child() {
        return CHILD.print::<Overrides>(command());
    }
    testkit::settings::check_flag_variable_and_file_agree(command, CHILD, &SAMPLES, from_toml);
}

#[test]
fn deprecated_keys_still_load_as_their_new_ones() {
    for (old, new) in DEPRECATED_KEYS {
        let from_old = Overrides::from_toml(&format!("{old} = 7\n"))
            .unwrap_or_else(|e| panic!("{old} no longer loads: {e}"));
        let from_new = Overrides::from_toml(&format!("{new} = 7\n")).unwrap();
        assert_ne!(from_new, Overrides::default(), "{new}");
        assert_eq!(from_old, from_new, "{old} is not {new}");
    }
    // A file written for the previous version, every old key at once.
    let text: String = DEPRECATED_KEYS
        .iter()
        .map(|(old, _)| format!("{old} = 2\n"))
        .collect();
    let config = coordinator::Config::from_layers(
        Some(&Overrides::from_toml(&text).unwrap()),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(config.offer_timeout, std::time::Duration::from_secs(2));
}

#[test]
fn the_config_reference_is_fresh() {
    let table = reference_table();
    for text in [
        "| `offer_timeout`<br>(deprecated: `offer_timeout_s`) | `--offer-timeout SECS` | `PARLEY_OFFER_TIMEOUT` | 60 |",
        "`PARLEY_ROLES`",
        "| `max_missed_heartbeats` | `--max-missed-heartbeats N` | `PARLEY_MAX_MISSED_HEARTBEATS` | 5 |",
    ] {
        assert!(table.contains(text), "no {text} in\n{table}");
    }
    let page = format!("{INTRO}{table}{OUTRO}");
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("docs/src/reference/config.md"),
        page.as_bytes(),
        "cargo test -p coordinator --test coordinator config_reference::",
    );
}

/// Every key of the settings file: the settings (their defaults from
/// [`coordinator::Config::default`], as the reference shows them), `listen`, and the `[roles]`
/// table.
fn file_keys() -> Vec<FileKey> {
    let mut keys = vec![FileKey {
        key: "listen".into(),
        help: "Address to listen on.".into(),
        flag: "--listen ADDR".into(),
        env: "PARLEY_LISTEN".into(),
        default: "\"127.0.0.1:5050\"".into(),
        value: "\"127.0.0.1:5050\"".into(),
        table: false,
    }];
    keys.extend(testkit::settings::file_keys(&command(), |arg| {
        let words = default_text(arg.get_id().as_str());
        let toml = match arg.get_id().as_str() {
            "gpu_gating" => Some("true".to_owned()),
            // A list: none declared.
            "known_resources" => Some("[]".to_owned()),
            "log_format" => Some("\"text\"".to_owned()),
            _ => words.parse::<f64>().is_ok().then(|| words.clone()),
        };
        (words, toml)
    }));
    for key in keys.iter_mut().filter(|k| k.key == "roles") {
        key.table = true;
        key.value = "[roles]\n\"eng\" = 2\n\"eng/batch\" = 1".into();
    }
    keys
}

#[test]
fn the_packaged_settings_file_is_fresh_and_sets_nothing_but_loads() {
    let text = testkit::settings::commented_toml(
        "/etc/parley/coordinator.toml: the settings of the Parley coordinator \
         (parley-coordinator.service, which keeps its registry in /var/lib/parley/coordinator).\n\n\
         Every setting is listed, commented out, with its flag, environment variable and \
         default; a flag or variable wins over this file. The [roles] table comes last. Set \
         listen (and credentials, tls_cert and tls_key) for clients on other machines, then: \
         systemctl enable --now parley-coordinator. Reference: \
         /usr/share/man/man1/parley-coordinator.1.gz and the book's Settings and flags page.",
        &file_keys(),
        &[],
    );
    assert_eq!(Overrides::from_toml(&text).unwrap(), Overrides::default());
    // Each commented-out setting uncommented still parses (its value may still need filling
    // in, such as a file's path).
    // A table's entries (`#"eng" = 2`) are uncommented with its header (`#[roles]`).
    for line in text
        .lines()
        .filter(|l| l.len() > 1 && l.starts_with('#') && !l.starts_with("# "))
        .filter(|l| !l.starts_with("#\""))
    {
        let mut uncommented = text.replacen(line, &line[1..], 1);
        if line.starts_with("#[") {
            uncommented = uncommented.replace("\n#\"", "\n\"");
        }
        Overrides::from_toml(&uncommented).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    assert!(text.contains("\n#offer_timeout = 60\n"), "{text}");
    testkit::docs::fresh_or_bless(
        &testkit::docs::repository().join("packaging/etc/coordinator.toml"),
        text.as_bytes(),
        "cargo test -p parley-coordinator --test coordinator config_reference::",
    );
}
