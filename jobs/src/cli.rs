//! The `parley-jobs` binary's command line ([`Args`]) and its settings ([`Settings`], one struct
//! that is both the TOML file form and the flags with their `PARLEY_*` environment variables),
//! in the library so that the generated references (`docs/src/reference/cli/`, the man page,
//! `docs/src/reference/jobs-config.md`) are made from the same definition.
//!
//! Settings come from three layers, later ones winning: the defaults ([`Settings::defaults`]),
//! a TOML file (`--config FILE`), and flags or their environment variables.

use std::path::{Path, PathBuf};

use clap::Parser;
use observe::settings_file::SettingsFileError;
use serde::{Deserialize, Serialize};

/// parley-jobs: a jobs service for Parley. Submit job specs to its API (or with `parleyctl
/// run FILE`); it runs them as one framework.
#[derive(Debug, Parser)]
#[command(name = "parley-jobs", version, about)]
pub struct Args {
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

/// The service's settings, all optional: one layer over the defaults, either the TOML config
/// file or the command line with its environment variables (the same struct is deserialized
/// from the file and parsed from the flags, so the two cannot drift).
///
/// Each field is one setting, named once: its file key is the field's name, its flag the name
/// with `-` for `_`. Its environment variable is `PARLEY_JOBS_` and the name in capitals
/// (`PARLEY_JOBS_LISTEN`), except for the three it shares with Parley's other clients:
/// `PARLEY_COORDINATOR`, `PARLEY_CA_FILE` and `PARLEY_TOKEN`. An unknown file key is an error.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The coordinator's base URL; or several, separated by commas (it follows the leader).
    #[arg(long, value_name = "URL[,URL...]", env = "PARLEY_COORDINATOR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<String>,
    /// A PEM file of the CA to trust for an https:// coordinator.
    #[arg(long, env = "PARLEY_CA_FILE", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// The role the jobs' tasks run under.
    #[arg(long, value_name = "ROLE", env = "PARLEY_JOBS_ROLE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The framework's name.
    #[arg(long, value_name = "NAME", env = "PARLEY_JOBS_NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The framework principal's token, for a coordinator with credentials.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PARLEY_TOKEN",
        hide_env_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The token clients of this service's API must present (default: the API is open, so
    /// it should listen on loopback only).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PARLEY_JOBS_API_TOKEN",
        hide_env_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_token: Option<String>,
    /// A users file (TOML, `[[user]]` entries with `name`, `secret_sha256` and an optional
    /// `max_running`): every API request must then carry one user's token, its jobs are that
    /// user's, and a user may change only its own. Replaces api_token.
    #[arg(long, env = "PARLEY_JOBS_USERS", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<PathBuf>,
    /// The most tasks the jobs of one user may run at once, over all of them, for a user
    /// without a `max_running` of its own (and for everyone without a users file).
    #[arg(long, env = "PARLEY_JOBS_MAX_RUNNING_PER_USER", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_running_per_user: Option<u32>,
    /// The API's TLS certificate (PEM, the server's first): HTTPS instead of HTTP. Needs
    /// tls_key.
    #[arg(long, env = "PARLEY_JOBS_TLS_CERT", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// The API's TLS private key (PEM). Needs tls_cert.
    #[arg(long, env = "PARLEY_JOBS_TLS_KEY", value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// Where the API listens.
    #[arg(long, value_name = "ADDR", env = "PARLEY_JOBS_LISTEN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Where the service keeps its state (`jobs.redb`).
    #[arg(long, value_name = "DIR", env = "PARLEY_JOBS_DATA_DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// The jobs page's URL, registered as the framework's web UI (the coordinator's dashboard
    /// links to it); default `http(s)://LISTEN/`, none when listening on every interface.
    #[arg(long, value_name = "URL", env = "PARLEY_JOBS_WEBUI_URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webui_url: Option<String>,
    /// How jobs of the same priority share the queue: `fifo` (first submitted first) or `fair`
    /// (each next task to the job running the fewest).
    #[arg(long, value_name = "fifo|fair", env = "PARLEY_JOBS_QUEUE_ORDER")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_order: Option<String>,
    /// Seconds for a queued job to gain one point of priority.
    #[arg(
        long,
        value_name = "SECS",
        env = "PARLEY_JOBS_AGING_S",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aging_s: Option<f64>,
    /// How long the jobs' tasks survive while this service is away, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        env = "PARLEY_JOBS_FAILOVER_TIMEOUT_S",
        allow_hyphen_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failover_timeout_s: Option<f64>,
}

impl Settings {
    /// The defaults of the `parley-jobs` binary, every setting that has one set.
    pub fn defaults() -> Settings {
        Settings {
            coordinator: Some("http://127.0.0.1:5050".into()),
            role: Some("default".into()),
            name: Some("parley-jobs".into()),
            listen: Some(format!("127.0.0.1:{}", crate::DEV_PORT)),
            data_dir: Some("./data/jobs".into()),
            queue_order: Some("fifo".into()),
            aging_s: Some(60.0),
            failover_timeout_s: Some(framework_sdk::DEFAULT_FAILOVER_TIMEOUT.as_secs_f64()),
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
            ca_file,
            role,
            name,
            token,
            api_token,
            users,
            max_running_per_user,
            tls_cert,
            tls_key,
            listen,
            data_dir,
            webui_url,
            queue_order,
            aging_s,
            failover_timeout_s,
        )
    }

    /// Parses a TOML settings file's text. An unknown key or a value of the wrong type is an
    /// error naming the key and its line; the message is one line.
    pub fn from_toml(text: &str) -> Result<Settings, SettingsFileError> {
        observe::settings_file::from_toml(text)
    }

    /// Reads and parses the TOML settings file `path`; the error names the file.
    pub fn from_file(path: &Path) -> Result<Settings, SettingsFileError> {
        observe::settings_file::from_file(path)
    }
}
