//! The coordinator's settings, each defined once as a field of [`coordinator::Overrides`]: these
//! tests check that a field's flag, environment variable and file key are all its name, that
//! the three give the same setting, and that the book's reference page
//! (`docs/src/reference/config.md`) is generated from the definitions (`PARLEY_BLESS=1`
//! regenerates it).

#![allow(clippy::unwrap_used)]

use std::any::TypeId;
use std::path::PathBuf;
use std::process::Command;

use clap::{Args as _, FromArgMatches as _};
use coordinator::config::{reference_table, DEPRECATED_KEYS};
use coordinator::Overrides;

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
| `--leader-lease-s N` | 10 | with `--etcd`: the leader lease; failover takes about this long |
| `--leader-renew-deadline-ms MS` | 2/3 of the lease | with `--etcd`: a leader whose last renewal is older steps down |
| `--reregister-grace-s N` | 10 | with `--etcd`: how long a new leader waits for known agents before offering |

## The agent

The agent takes flags only (`agent --help`); the source of truth is `agent/src/main.rs` and
`agent/src/config.rs`.

| flag | default | meaning |
|---|---|---|
| `--coordinator URL[,URL...]` (env `PARLEY_COORDINATOR`) | `http://127.0.0.1:5050` | the coordinator, or several (the agent follows the leader) |
| `--token T` (env `PARLEY_TOKEN`) | none | an agent principal's token, when the coordinator has credentials |
| `--listen ADDR` | `127.0.0.1:5051` | where the agent API is served (port 0 picks one); give the node's address for a coordinator on another machine |
| `--advertise-url URL` | derived from `--listen` | how the coordinator reaches this agent |
| `--resources R` | detected | e.g. `cpus=4,mem=8192,gpus=1` (mem and disk in MiB) |
| `--attributes A` | none | e.g. `rack=r1,zone=a` |
| `--reserve ROLE:R` (repeatable) | none | a static [reservation](../operating/reservations.md), e.g. `eng:cpus=4,mem=8192` |
| `--work-dir DIR` | `./parley-agent` | journal, agent id, API token, sandboxes, image cache |
| `--hostname H` | the machine's | the hostname to advertise |
| `--kill-grace-s S` | 5 | between SIGTERM and SIGKILL when a task is killed |
| `--sandbox-retention-s S` | 86400 | how long a finished task's sandbox is kept |
| `--tls-cert FILE`, `--tls-key FILE` | none | serve the agent API over HTTPS |
| `--ca-file FILE` | built-in roots | CAs to trust for an `https://` coordinator |
| `--api-token T` (env `PARLEY_AGENT_API_TOKEN`) | generated, kept in `WORK_DIR/api_token` | the token the coordinator must present (16–512 visible ASCII characters) |
| `--isolation auto\|none` | `auto` | a cgroup and namespaces per task where possible ([Isolation](../operating/isolation.md)) |
| `--cgroup-root DIR` | none | a delegated cgroup v2 directory |
| `--default-pids N` | 4096 | `pids.max` of an isolated task that does not set `isolation.pids` |
| `--task-user USER` | the agent's user | run tasks as `NAME`, `UID` or `UID:GID`; required when the agent runs as root |
| `--allow-root-tasks` | off | let an agent running as root run tasks as root |
| `--image-root DIR` | none | where tasks' [images](../operating/images.md) live |
| `--gpus auto\|none\|0,2` | `auto` | which [GPUs](../operating/gpus.md) to use |
| `--simulate N` | off | run N simulated agents in this process instead of one real agent |
| `--stagger-s S` | 1 | with `--simulate`: spread first registrations over this long |
| `--reserve-fraction F` | 1 | with `--simulate`: the fraction of agents (0–1, spread evenly) that send `--reserve` |

## Environment variables

| variable | read by |
|---|---|
| `PARLEY_LISTEN` | `coordinator --listen` |
| `PARLEY_<SETTING>` | `coordinator`: every setting in the first table, e.g. `PARLEY_OFFER_TIMEOUT` |
| `PARLEY_COORDINATOR` | `agent`, `parleyctl` and the examples: `--coordinator` |
| `PARLEY_TOKEN` | `agent`, `parleyctl` and the examples: `--token` |
| `PARLEY_AGENT_API_TOKEN` | `agent --api-token` |
| `PARLEY_CA_FILE` | the examples: `--ca-file` |
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

/// One sample value of a setting, as a flag or environment variable takes it and as the file
/// takes it (a whole `key = value` line, or a table).
struct Sample {
    text: String,
    toml: String,
}

/// A sample value for the argument, different from the default (every setting defaults to
/// unset), from the type its value parser produces; the few settings with a type of their own
/// are in the table of exceptions.
fn sample(arg: &clap::Arg) -> Sample {
    let key = arg.get_id().as_str();
    let exceptions = [
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
    if let Some((_, text, toml)) = exceptions.iter().find(|(k, _, _)| *k == key) {
        return Sample {
            text: (*text).into(),
            toml: (*toml).into(),
        };
    }
    let ty = arg.get_value_parser().type_id();
    let (text, value) = if ty == TypeId::of::<f64>() {
        ("7.5", "7.5".to_owned())
    } else if ty == TypeId::of::<u32>() || ty == TypeId::of::<usize>() {
        ("7", "7".to_owned())
    } else if ty == TypeId::of::<PathBuf>() || ty == TypeId::of::<String>() {
        ("/etc/parley/sample", "\"/etc/parley/sample\"".to_owned())
    } else if ty == TypeId::of::<bool>() {
        ("true", "true".to_owned())
    } else {
        panic!("{key}: no sample for its type; add it to the exceptions");
    };
    Sample {
        text: text.into(),
        toml: format!("{key} = {value}\n"),
    }
}

/// The settings parsed from the command line `args`, ignoring the environment: the command's
/// arguments are rewritten without their variables, so a `PARLEY_*` variable set where the
/// tests run cannot change the result.
fn from_flags(args: &[String]) -> Overrides {
    let command = command().mut_args(|a| a.env(None));
    let matches = command
        .try_get_matches_from(std::iter::once("coordinator".to_owned()).chain(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    Overrides::from_arg_matches(&matches).unwrap()
}

/// What the child process of [`from_environment`] prints before the settings it parsed.
const CHILD_MARK: &str = "parsed from the environment: ";

/// The settings parsed from the environment with no flags, in a child process: clap reads
/// variables from the process's environment at parse time, and setting one in this process
/// (`std::env::set_var`) would race the other tests of the binary, which run in parallel
/// threads. So the test binary runs this very test again in a child process ([`CHILD_ENV`]
/// set, `PARLEY_*` variables of this process removed and `vars` set), which prints the settings
/// as their `Debug` text instead of testing.
fn from_environment(vars: &[(&str, &str)]) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child.args([
        "--exact",
        "config_reference::every_setting_is_the_same_as_a_flag_a_variable_and_a_file_key",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PARLEY_") {
            child.env_remove(name);
        }
    }
    child.env(CHILD_ENV, "1").envs(vars.iter().copied());
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{vars:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once(CHILD_MARK).map(|(_, settings)| settings))
        .unwrap_or_else(|| panic!("{vars:?}: no settings in {stdout}"))
        .to_owned()
}

/// Set in the child process of [`from_environment`].
const CHILD_ENV: &str = "CONFIG_REFERENCE_CHILD";

/// In the child process of [`from_environment`]: prints the settings parsed from this process's
/// environment alone.
fn print_settings_from_the_environment() {
    let matches = command().try_get_matches_from(["coordinator"]).unwrap();
    let settings = Overrides::from_arg_matches(&matches).unwrap();
    println!("{CHILD_MARK}{settings:?}");
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
    if std::env::var_os(CHILD_ENV).is_some() {
        return print_settings_from_the_environment();
    }
    for arg in command().get_arguments() {
        let key = arg.get_id().as_str();
        let sample = sample(arg);
        let flag = from_flags(&[format!("--{}={}", arg.get_long().unwrap(), sample.text)]);
        let file = Overrides::from_toml(&sample.toml).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_ne!(flag, Overrides::default(), "{key}: the flag sets nothing");
        assert_eq!(flag, file, "{key}: the flag and the file key differ");
        let env = arg.get_env().unwrap().to_string_lossy().into_owned();
        let from_env = from_environment(&[(env.as_str(), sample.text.as_str())]);
        assert_eq!(
            from_env,
            format!("{flag:?}"),
            "{key}: the flag and {env} differ"
        );
    }
    // With no variables set, the child parses the defaults: the comparison above is not
    // vacuous.
    assert_eq!(from_environment(&[]), format!("{:?}", Overrides::default()));
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
