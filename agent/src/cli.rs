//! The `agent` binary's command line ([`Cli`], clap derive) and its settings ([`Settings`], one
//! struct that is both the TOML file form and the flags), here in the library so that the
//! references (`docs/src/reference/cli/agent.md`, `docs/man/agent.1`,
//! `docs/src/reference/agent-config.md`) are generated from them.
//!
//! Settings come from three layers, later ones winning: the defaults ([`Settings::defaults`]),
//! a TOML file (`--config FILE`), and flags or their environment variables
//! ([`Settings::over`] stacks them).

use std::path::{Path, PathBuf};

use clap::Parser;
use observe::settings_file::SettingsFileError;
use serde::{Deserialize, Serialize};

/// A Parley agent: advertises this node's resources and runs the tasks the coordinator sends.
#[derive(Debug, Parser)]
#[command(name = "agent", version)]
pub struct Cli {
    /// TOML file with the settings below (file key = flag name with `_` for `-`); a flag or
    /// its environment variable wins over the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The settings, each overriding the file's.
    #[command(flatten)]
    pub settings: Settings,
    /// How log lines are written.
    #[command(flatten)]
    pub log: observe::logging::LogArgs,
}

/// The agent's settings, all optional: one layer over the defaults, either the TOML config file
/// or the command line with its environment variables (the same struct is deserialized from the
/// file and parsed from the flags, so the two cannot drift).
///
/// Each field is one setting, named once: its file key is the field's name, its flag the name
/// with `-` for `_` (`--work-dir`), its environment variable `PARLEY_` and the name in capitals
/// (`PARLEY_WORK_DIR`). The exceptions: `reserve`, repeatable on the command line, is a list in
/// the file; `api_token` is read from `PARLEY_AGENT_API_TOKEN`, the name it had before the file
/// existed. An unknown file key is an error.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Base URL of the coordinator; or several, separated by commas (the coordinators of a
    /// highly available cluster: the agent follows the leader among them).
    #[arg(long, value_name = "URL[,URL...]", env = "PARLEY_COORDINATOR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<String>,
    /// Bearer token for the coordinator (an agent principal's secret; needed when the
    /// coordinator has a credentials file).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PARLEY_TOKEN",
        hide_env_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Address to serve the agent API on (port 0 picks a free one). Loopback by default: give
    /// the node's address (or 0.0.0.0) for a coordinator on another machine.
    #[arg(long, value_name = "ADDR", env = "PARLEY_LISTEN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Resources to advertise, e.g. cpus=4,mem=8192,gpus=1 (mem and disk in MiB); detected
    /// from the machine when absent.
    #[arg(
        long,
        value_name = "RESOURCES",
        env = "PARLEY_RESOURCES",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<String>,
    /// Attributes, e.g. rack=r1,zone=a.
    #[arg(long, value_name = "NAME=VALUE,...", env = "PARLEY_ATTRIBUTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<String>,
    /// Reserve resources for a role's subtree, e.g. eng:cpus=4,mem=8192 (repeatable; a list in
    /// the file; the role must exist on the coordinator, the sum must fit in resources).
    #[arg(long, value_name = "ROLE:RESOURCES", env = "PARLEY_RESERVE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<Vec<String>>,
    /// With simulate: the fraction of the simulated agents (0 to 1, spread evenly) that send
    /// the reserve reservations.
    #[arg(
        long,
        value_name = "F",
        env = "PARLEY_RESERVE_FRACTION",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_fraction: Option<f64>,
    /// Directory for the journal, the agent id, the API token, task sandboxes and the image
    /// cache.
    #[arg(long, value_name = "DIR", env = "PARLEY_WORK_DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<PathBuf>,
    /// Hostname to advertise (default: the machine's).
    #[arg(long, value_name = "NAME", env = "PARLEY_HOSTNAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// URL the coordinator uses to reach this agent (default: derived from listen).
    #[arg(long, value_name = "URL", env = "PARLEY_ADVERTISE_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise_url: Option<String>,
    /// A delegated cgroup v2 directory for per-task cgroups (default: found at start, see
    /// isolation).
    #[arg(long, value_name = "DIR", env = "PARLEY_CGROUP_ROOT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup_root: Option<PathBuf>,
    /// Seconds between SIGTERM and SIGKILL when a task is killed.
    #[arg(
        long,
        value_name = "SECS",
        env = "PARLEY_KILL_GRACE_S",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_grace_s: Option<f64>,
    /// Seconds a finished task's sandbox is kept before it is deleted.
    #[arg(
        long,
        value_name = "SECS",
        env = "PARLEY_SANDBOX_RETENTION_S",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_retention_s: Option<f64>,
    /// Run this many simulated agents in this process instead of one real agent.
    #[arg(
        long,
        value_name = "N",
        env = "PARLEY_SIMULATE",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulate: Option<u32>,
    /// With simulate: spread the simulated agents' first registrations over this many seconds.
    #[arg(
        long,
        value_name = "SECS",
        env = "PARLEY_STAGGER_S",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stagger_s: Option<f64>,
    /// Serve the agent API over HTTPS with this PEM certificate chain (needs tls_key).
    #[arg(long, value_name = "FILE", env = "PARLEY_TLS_CERT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of tls_cert.
    #[arg(long, value_name = "FILE", env = "PARLEY_TLS_KEY")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// Trust only the CAs in this PEM file when calling an https:// coordinator (default: the
    /// built-in Mozilla roots).
    #[arg(long, value_name = "FILE", env = "PARLEY_CA_FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The token the coordinator must present on launches, kills and output reads (16 to 512
    /// visible ASCII characters); generated at first start and kept in WORK_DIR/api_token
    /// (0600) when not given.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PARLEY_AGENT_API_TOKEN",
        hide_env_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_token: Option<String>,
    /// Run tasks as this user (NAME, UID or UID:GID); needed when the agent runs as root.
    #[arg(long, value_name = "USER", env = "PARLEY_TASK_USER")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_user: Option<String>,
    /// Let tasks name images (isolation.image) under this directory: OCI image layouts and
    /// root filesystem tarballs, unpacked once into WORK_DIR/images (advertised as the
    /// attribute image_root).
    #[arg(long, value_name = "DIR", env = "PARLEY_IMAGE_ROOT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_root: Option<PathBuf>,
    /// Let an agent running as root run tasks as root (without task_user); the flag alone
    /// means true.
    #[arg(
        long,
        value_name = "BOOL",
        env = "PARLEY_ALLOW_ROOT_TASKS",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_root_tasks: Option<bool>,
    /// Task isolation: auto (a cgroup, v1 or v2, and pid/mount/ipc/uts namespaces per task,
    /// where the agent runs as root and finds cgroups) or none (RLIMIT_AS only).
    #[arg(long, value_name = "auto|none", env = "PARLEY_ISOLATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation: Option<String>,
    /// pids.max of an isolated task that does not set isolation.pids.
    #[arg(
        long,
        value_name = "N",
        env = "PARLEY_DEFAULT_PIDS",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_pids: Option<u64>,
    /// GPUs: auto (every NVIDIA device NVML finds; none found: no gpus resource), none, or
    /// device indices like 0,2. Simulated agents take gpus=N from resources instead.
    #[arg(
        long,
        value_name = "auto|none|0,2",
        env = "PARLEY_GPUS",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<String>,
}

impl Settings {
    /// The defaults of the `agent` binary, every setting that has one set (the others stay
    /// unset: detected, derived or off).
    pub fn defaults() -> Settings {
        Settings {
            coordinator: Some("http://127.0.0.1:5050".into()),
            listen: Some("127.0.0.1:5051".into()),
            attributes: Some(String::new()),
            reserve: Some(Vec::new()),
            reserve_fraction: Some(1.0),
            work_dir: Some("./parley-agent".into()),
            kill_grace_s: Some(5.0),
            sandbox_retention_s: Some(crate::config::DEFAULT_SANDBOX_RETENTION.as_secs_f64()),
            stagger_s: Some(1.0),
            allow_root_tasks: Some(false),
            isolation: Some("auto".into()),
            default_pids: Some(crate::isolation::DEFAULT_PIDS),
            gpus: Some("auto".into()),
            ..Settings::default()
        }
    }

    /// These settings over `base`: each setting set here wins, the others are `base`'s.
    pub fn over(self, base: Settings) -> Settings {
        let over = self;
        observe::layer_settings!(
            Settings,
            over,
            base,
            coordinator,
            token,
            listen,
            resources,
            attributes,
            reserve,
            reserve_fraction,
            work_dir,
            hostname,
            advertise_url,
            cgroup_root,
            kill_grace_s,
            sandbox_retention_s,
            simulate,
            stagger_s,
            tls_cert,
            tls_key,
            ca_file,
            api_token,
            task_user,
            image_root,
            allow_root_tasks,
            isolation,
            default_pids,
            gpus,
        )
    }

    /// Parses a TOML settings file's text. An unknown key or a value of the wrong type is an
    /// error naming the key (and its line); the message is one line.
    pub fn from_toml(text: &str) -> Result<Settings, SettingsFileError> {
        observe::settings_file::from_toml(text)
    }

    /// Reads and parses the TOML settings file `path`; the error names the file.
    pub fn from_file(path: &Path) -> Result<Settings, SettingsFileError> {
        observe::settings_file::from_file(path)
    }
}
