//! The `parley-jobs` binary: settings (defaults, then `--config FILE`, then flags or their
//! `PARLEY_*` environment variables), logging, and the service until Ctrl-C or SIGTERM.
//!
//! Run with:
//!
//! ```text
//! cargo run -p parley-jobs -- --coordinator http://127.0.0.1:5050 --listen 127.0.0.1:5070
//! parley-jobs --config /etc/parley/jobs.toml
//! ```

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use framework_sdk::{BearerToken, RolePath};
use parley_jobs::cli::{Args, Settings};
use parley_jobs::ServiceConfig;

// mimalloc, as the coordinator and the agent: the service allocates per update and per offer,
// and glibc's allocator was a fifth of its profile under a 100,000-task array.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn seconds(name: &str, value: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        value.is_finite() && (0.001..=1e9).contains(&value),
        "{name} is {value}; use a number of seconds between 0.001 and 1e9"
    );
    Ok(Duration::from_secs_f64(value))
}

/// The defaults, then the file's settings (if `--config`), then the flags' and variables'.
fn layers(args: &Args) -> anyhow::Result<Settings> {
    let mut settings = Settings::defaults();
    if let Some(path) = &args.config {
        settings = Settings::from_file(path)
            .map_err(anyhow::Error::msg)?
            .over(settings);
    }
    Ok(args.settings.clone().over(settings))
}

async fn main_async(s: Settings) -> anyhow::Result<()> {
    // Every setting with a default has one after the layering: the fallbacks are never used.
    let listen_text = s.listen.unwrap_or_default();
    let listen: SocketAddr = listen_text
        .parse()
        .with_context(|| format!("listen {listen_text:?}: expected HOST:PORT"))?;
    let role_text = s.role.unwrap_or_default();
    let role = RolePath::new(&role_text).with_context(|| format!("role {role_text:?}"))?;
    if s.api_token.is_none() && s.users.is_none() && !listen.ip().is_loopback() {
        tracing::warn!(%listen, "the jobs API is open (no api_token) and not on loopback");
    }
    let data_dir = s.data_dir.unwrap_or_default();
    let mut config = ServiceConfig::new(s.coordinator.unwrap_or_default(), role, &data_dir);
    config.ca_file = s.ca_file;
    config.name = s.name.unwrap_or_default();
    config.token = s.token.map(BearerToken::new);
    config.api_token = s.api_token;
    config.users = match &s.users {
        Some(path) => Some(parley_jobs::users::Users::load(path)?),
        None => None,
    };
    config.max_running_per_user = match s.max_running_per_user {
        Some(0) => anyhow::bail!("max_running_per_user is 0: give at least 1"),
        n => n,
    };
    config.tls = parley_tls::ServerTls::from_options(s.tls_cert.as_deref(), s.tls_key.as_deref())
        .context("tls_cert / tls_key")?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    config.aging = seconds("aging_s", s.aging_s.unwrap_or(60.0))?;
    config.order = match s.queue_order.as_deref().unwrap_or("fifo") {
        "fifo" => parley_jobs::book::QueueOrder::Fifo,
        "fair" => parley_jobs::book::QueueOrder::Fair,
        other => anyhow::bail!("queue_order {other:?}: expected fifo or fair"),
    };
    let failover = s
        .failover_timeout_s
        .unwrap_or(framework_sdk::DEFAULT_FAILOVER_TIMEOUT.as_secs_f64());
    config.failover_timeout = seconds("failover_timeout_s", failover)?;
    if let Some(url) = &s.webui_url {
        framework_sdk::protocol::messages::check_webui_url(url)
            .map_err(|e| anyhow::anyhow!("webui_url: {e}"))?;
    }
    config.webui_url = s.webui_url;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!(
        "parley-jobs: API on {scheme}://{}/api/v1/jobs",
        listener.local_addr()?
    );
    parley_jobs::run(config, listener, observe::shutdown_signal()).await?;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    observe::logging::init(args.log.log_format, observe::logging::Stream::Stderr);
    observe::limits::raise_open_file_limit_logged();
    let settings = match layers(&args) {
        Ok(s) => s,
        Err(e) => {
            // Exit code 2, as for a bad flag: a restart cannot fix it.
            eprintln!("parley-jobs: {e:#}");
            return ExitCode::from(2);
        }
    };
    // One worker thread: the service's work goes through one driver and one book lock anyway,
    // and a second worker only adds cross-thread wake-ups for every chunk of the event
    // stream (a fifth of its CPU under a 40,000-task array on 2 cores; 0.12 s per 1,000 tasks
    // with the default two workers, 0.09 s with one). Blocking calls still get their own pool.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("parley-jobs: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(main_async(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parley-jobs: {e:#}");
            ExitCode::FAILURE
        }
    }
}
