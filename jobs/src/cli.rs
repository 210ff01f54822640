//! The `parley-jobs` binary's command line: its flags and their `PARLEY_*` environment
//! variables, in the library so that the generated reference (`docs/src/reference/cli/`) and
//! man page are made from the same definition.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use framework_sdk::{BearerToken, RolePath};

/// parley-jobs: a jobs service for Parley. Submit job specs to its API (or with `parleyctl
/// run FILE`); it runs them as one framework.
#[derive(Debug, Parser)]
#[command(name = "parley-jobs", version, about)]
pub struct Args {
    /// The coordinator's base URL; or several, separated by commas (it follows the leader).
    #[arg(
        long,
        env = "PARLEY_COORDINATOR",
        default_value = "http://127.0.0.1:5050"
    )]
    pub coordinator: String,
    /// A PEM file of the CA to trust for an https:// coordinator.
    #[arg(long, env = "PARLEY_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// The role the jobs' tasks run under.
    #[arg(long, default_value = "default")]
    pub role: RolePath,
    /// The framework's name.
    #[arg(long, default_value = "parley-jobs")]
    pub name: String,
    /// The framework principal's token, for a coordinator with credentials.
    #[arg(long, env = "PARLEY_TOKEN", hide_env_values = true)]
    pub token: Option<BearerToken>,
    /// The token clients of this service's API must present (default: the API is open, so
    /// it should listen on loopback only).
    #[arg(long, env = "PARLEY_JOBS_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
    /// A users file (TOML, `[[user]]` entries with `name`, `secret_sha256` and an optional
    /// `max_running`): every API request must then carry one user's token, its jobs are that
    /// user's, and a user may change only its own. Replaces --api-token.
    #[arg(long, env = "PARLEY_JOBS_USERS", value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// The most tasks the jobs of one user may run at once, over all of them, for a user
    /// without a `max_running` of its own (and for everyone without a users file).
    #[arg(long, env = "PARLEY_JOBS_MAX_RUNNING_PER_USER", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_running_per_user: Option<u32>,
    /// The API's TLS certificate (PEM, the server's first): HTTPS instead of HTTP. Needs
    /// --tls-key.
    #[arg(long, env = "PARLEY_JOBS_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The API's TLS private key (PEM). Needs --tls-cert.
    #[arg(long, env = "PARLEY_JOBS_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Where the API listens.
    #[arg(long, default_value = "127.0.0.1:5070")]
    pub listen: SocketAddr,
    /// Where the service keeps its state (`jobs.redb`).
    #[arg(long, default_value = "./data/jobs")]
    pub data_dir: PathBuf,
    /// The jobs page's URL, registered as the framework's web UI (the coordinator's dashboard
    /// links to it); default `http(s)://LISTEN/`, none when listening on every interface.
    #[arg(long, value_name = "URL")]
    pub webui_url: Option<String>,
    /// How jobs of the same priority share the queue: `fifo` (first submitted first) or `fair`
    /// (each next task to the job running the fewest).
    #[arg(long, default_value = "fifo", value_parser = ["fifo", "fair"])]
    pub queue_order: String,
    /// Seconds for a queued job to gain one point of priority.
    #[arg(long, default_value_t = 60.0)]
    pub aging_s: f64,
    /// How long the jobs' tasks survive while this service is away, in seconds.
    #[arg(long, default_value_t = framework_sdk::DEFAULT_FAILOVER_TIMEOUT.as_secs_f64())]
    pub failover_timeout_s: f64,
    /// How log lines are written.
    #[command(flatten)]
    pub log: observe::logging::LogArgs,
}
