//! The `parley-jobs` binary: flags (or `PARLEY_*` environment variables), logging, and the
//! service until Ctrl-C or SIGTERM.
//!
//! Run with:
//!
//! ```text
//! cargo run -p parley-jobs -- --coordinator http://127.0.0.1:5050 --listen 127.0.0.1:5070
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use framework_sdk::{BearerToken, RolePath};
use parley_jobs::ServiceConfig;

/// parley-jobs: a jobs service for Parley. Submit job specs to its API (or with `parleyctl
/// run FILE`); it runs them as one framework.
#[derive(Debug, Parser)]
#[command(name = "parley-jobs", version, about)]
struct Args {
    /// The coordinator's base URL; or several, separated by commas (it follows the leader).
    #[arg(
        long,
        env = "PARLEY_COORDINATOR",
        default_value = "http://127.0.0.1:5050"
    )]
    coordinator: String,
    /// A PEM file of the CA to trust for an https:// coordinator.
    #[arg(long, env = "PARLEY_CA_FILE", value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// The role the jobs' tasks run under.
    #[arg(long, default_value = "default")]
    role: RolePath,
    /// The framework's name.
    #[arg(long, default_value = "parley-jobs")]
    name: String,
    /// The framework principal's token, for a coordinator with credentials.
    #[arg(long, env = "PARLEY_TOKEN", hide_env_values = true)]
    token: Option<BearerToken>,
    /// The token clients of this service's API must present (default: the API is open, so
    /// it should listen on loopback only).
    #[arg(long, env = "PARLEY_JOBS_API_TOKEN", hide_env_values = true)]
    api_token: Option<String>,
    /// The API's TLS certificate (PEM, the server's first): HTTPS instead of HTTP. Needs
    /// --tls-key.
    #[arg(long, env = "PARLEY_JOBS_TLS_CERT", value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The API's TLS private key (PEM). Needs --tls-cert.
    #[arg(long, env = "PARLEY_JOBS_TLS_KEY", value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Where the API listens.
    #[arg(long, default_value = "127.0.0.1:5070")]
    listen: SocketAddr,
    /// Where the service keeps its state (`jobs.redb`).
    #[arg(long, default_value = "./data/jobs")]
    data_dir: PathBuf,
    /// The jobs page's URL, registered as the framework's web UI (the coordinator's dashboard
    /// links to it); default `http(s)://LISTEN/`, none when listening on every interface.
    #[arg(long, value_name = "URL")]
    webui_url: Option<String>,
    /// How jobs of the same priority share the queue: `fifo` (first submitted first) or `fair`
    /// (each next task to the job running the fewest).
    #[arg(long, default_value = "fifo", value_parser = ["fifo", "fair"])]
    queue_order: String,
    /// Seconds for a queued job to gain one point of priority.
    #[arg(long, default_value_t = 60.0)]
    aging_s: f64,
    /// How long the jobs' tasks survive while this service is away, in seconds.
    #[arg(long, default_value_t = framework_sdk::DEFAULT_FAILOVER_TIMEOUT.as_secs_f64())]
    failover_timeout_s: f64,
}

fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        value.is_finite() && (0.001..=1e9).contains(&value),
        "{flag} is {value}; use a number of seconds between 0.001 and 1e9"
    );
    Ok(Duration::from_secs_f64(value))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

async fn main_async(args: Args) -> anyhow::Result<()> {
    if args.api_token.is_none() && !args.listen.ip().is_loopback() {
        tracing::warn!(listen = %args.listen, "the jobs API is open (no --api-token) and not on loopback");
    }
    let mut config = ServiceConfig::new(&args.coordinator, args.role, &args.data_dir);
    config.ca_file = args.ca_file;
    config.name = args.name;
    config.token = args.token;
    config.api_token = args.api_token;
    config.tls =
        parley_tls::ServerTls::from_options(args.tls_cert.as_deref(), args.tls_key.as_deref())
            .context("--tls-cert / --tls-key")?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    config.aging = seconds("--aging-s", args.aging_s)?;
    config.order = if args.queue_order == "fair" {
        parley_jobs::book::QueueOrder::Fair
    } else {
        parley_jobs::book::QueueOrder::Fifo
    };
    config.failover_timeout = seconds("--failover-timeout-s", args.failover_timeout_s)?;
    if let Some(url) = &args.webui_url {
        framework_sdk::protocol::messages::check_webui_url(url)
            .map_err(|e| anyhow::anyhow!("--webui-url: {e}"))?;
    }
    config.webui_url = args.webui_url;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    println!(
        "parley-jobs: API on {scheme}://{}/api/v1/jobs",
        listener.local_addr()?
    );
    parley_jobs::run(config, listener, shutdown_signal()).await?;
    Ok(())
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("parley-jobs: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parley-jobs: {e:#}");
            ExitCode::FAILURE
        }
    }
}
