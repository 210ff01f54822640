//! The `parley-jobs` binary: flags (or `PARLEY_*` environment variables), logging, and the
//! service until Ctrl-C or SIGTERM.
//!
//! Run with:
//!
//! ```text
//! cargo run -p parley-jobs -- --coordinator http://127.0.0.1:5050 --listen 127.0.0.1:5070
//! ```

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use parley_jobs::cli::Args;
use parley_jobs::ServiceConfig;

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
    if args.api_token.is_none() && args.users.is_none() && !args.listen.ip().is_loopback() {
        tracing::warn!(listen = %args.listen, "the jobs API is open (no --api-token) and not on loopback");
    }
    let mut config = ServiceConfig::new(&args.coordinator, args.role, &args.data_dir);
    config.ca_file = args.ca_file;
    config.name = args.name;
    config.token = args.token;
    config.api_token = args.api_token;
    config.users = match &args.users {
        Some(path) => Some(parley_jobs::users::Users::load(path)?),
        None => None,
    };
    config.max_running_per_user = args.max_running_per_user;
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
    let args = Args::parse();
    observe::logging::init(args.log.log_format, observe::logging::Stream::Stderr);
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
