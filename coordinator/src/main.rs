//! The `coordinator` binary: command line and config file only; everything else is the library.
//!
//! ```text
//! coordinator --listen 127.0.0.1:5050 [--config parley.toml] [--offer-timeout 60] ...
//! ```
//!
//! The durable registry is `--data-dir`/registry.redb (default `data/registry.redb`) unless
//! `--in-memory`. Settings: defaults, then the TOML file, then flags. A bad flag or setting is a one-line
//! error naming it, before anything starts. Ctrl-C or SIGTERM shut down gracefully.

/// mimalloc instead of the system allocator: the request path allocates many small objects
/// (JSON, ids, headers), and glibc's malloc took a fifth of the coordinator's CPU under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use coordinator::config::seconds;
use coordinator::Config;
use protocol::{RolePath, Weight};

/// Parley coordinator: offers cluster resources to frameworks with hierarchical DRF.
#[derive(Debug, Parser)]
#[command(name = "coordinator", version)]
struct Args {
    /// Address to listen on (default 127.0.0.1:5050).
    #[arg(long, env = "PARLEY_LISTEN")]
    listen: Option<SocketAddr>,
    /// TOML file with the settings below and the initial role tree (`[roles]` path = weight).
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Seconds between allocation runs (default 1).
    #[arg(long, value_name = "SECS")]
    allocation_interval: Option<f64>,
    /// Seconds to batch changes before an early allocation run (default 0.005).
    #[arg(long, value_name = "SECS")]
    allocation_batch_delay: Option<f64>,
    /// Seconds before an unanswered offer is rescinded (default 60).
    #[arg(long, value_name = "SECS")]
    offer_timeout: Option<f64>,
    /// Seconds between agent heartbeats (default 15).
    #[arg(long, value_name = "SECS")]
    agent_heartbeat_interval: Option<f64>,
    /// Missed heartbeats before an agent is lost (default 5).
    #[arg(long, value_name = "N")]
    max_missed_heartbeats: Option<u32>,
    /// Seconds between heartbeat events on framework streams (default 15).
    #[arg(long, value_name = "SECS")]
    framework_heartbeat_interval: Option<f64>,
    /// Failover timeout of frameworks that give none, in seconds (default 60).
    #[arg(long, value_name = "SECS")]
    default_failover_timeout: Option<f64>,
    /// Decline filter length when a framework gives none, in seconds (default 5).
    #[arg(long, value_name = "SECS")]
    default_refuse_seconds: Option<f64>,
    /// Seconds between re-sends of unacknowledged task updates (default 10).
    #[arg(long, value_name = "SECS")]
    update_resend_interval: Option<f64>,
    /// Timeout of requests to agents, in seconds (default 10).
    #[arg(long, value_name = "SECS")]
    agent_request_timeout: Option<f64>,
    /// Largest request body in bytes (default 1048576).
    #[arg(long, value_name = "BYTES")]
    max_body_bytes: Option<usize>,
    /// Completed (terminal, acknowledged) tasks kept per framework before the oldest is
    /// forgotten (default 1000).
    #[arg(long, value_name = "N")]
    max_completed_tasks_per_framework: Option<usize>,
    /// A role weight, e.g. `--role eng/batch=2` (repeatable; overrides the file).
    #[arg(long = "role", value_name = "PATH=WEIGHT", value_parser = parse_role)]
    roles: Vec<(RolePath, Weight)>,
    /// Also run local agents in this process (a single-node cluster for trying Parley out).
    #[arg(long)]
    dev: bool,
    /// With --dev: how many local agents share this machine's resources (default 2).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    dev_agents: u16,
    /// Where the coordinator keeps its durable registry (`DIR/registry.redb`) and, with --dev,
    /// the local agents their ids, journals and task sandboxes (`DIR/agent-N`).
    #[arg(long, value_name = "DIR", default_value = "data")]
    data_dir: std::path::PathBuf,
    /// Keep the books in memory only: a restart forgets frameworks and run-time role weights
    /// (agents and their tasks still come back by re-registering).
    #[arg(long)]
    in_memory: bool,
}

fn parse_role(s: &str) -> Result<(RolePath, Weight), String> {
    let (path, weight) = s
        .split_once('=')
        .ok_or("expected PATH=WEIGHT, e.g. eng/batch=2")?;
    let path = RolePath::new(path.trim()).map_err(|e| e.to_string())?;
    let weight: f64 = weight
        .trim()
        .parse()
        .map_err(|_| format!("weight {weight:?} is not a number"))?;
    let weight = Weight::new(weight).map_err(|e| e.to_string())?;
    Ok((path, weight))
}

/// Builds the config from defaults, the file and the flags; validates it.
fn load(args: &Args) -> anyhow::Result<(Config, SocketAddr)> {
    let mut config = Config::default();
    let mut listen: SocketAddr = "127.0.0.1:5050".parse()?;
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let file = Config::parse_file(&text)?;
        config.apply_file(&file)?;
        if let Some(l) = &file.listen {
            listen = l
                .parse()
                .with_context(|| format!("invalid listen {l:?} in config file"))?;
        }
    }
    let flags = [
        (
            "--allocation-interval",
            args.allocation_interval,
            &mut config.allocation_interval,
            false,
        ),
        (
            "--allocation-batch-delay",
            args.allocation_batch_delay,
            &mut config.allocation_batch_delay,
            true,
        ),
        (
            "--offer-timeout",
            args.offer_timeout,
            &mut config.offer_timeout,
            false,
        ),
        (
            "--agent-heartbeat-interval",
            args.agent_heartbeat_interval,
            &mut config.agent_heartbeat_interval,
            false,
        ),
        (
            "--framework-heartbeat-interval",
            args.framework_heartbeat_interval,
            &mut config.framework_heartbeat_interval,
            false,
        ),
        (
            "--default-failover-timeout",
            args.default_failover_timeout,
            &mut config.default_failover_timeout,
            true,
        ),
        (
            "--default-refuse-seconds",
            args.default_refuse_seconds,
            &mut config.default_refuse_seconds,
            true,
        ),
        (
            "--update-resend-interval",
            args.update_resend_interval,
            &mut config.update_resend_interval,
            false,
        ),
        (
            "--agent-request-timeout",
            args.agent_request_timeout,
            &mut config.agent_request_timeout,
            false,
        ),
    ];
    for (name, value, slot, allow_zero) in flags {
        if let Some(v) = value {
            *slot = seconds(name, v, allow_zero)?;
        }
    }
    if let Some(n) = args.max_missed_heartbeats {
        config.max_missed_heartbeats = n;
    }
    if let Some(n) = args.max_body_bytes {
        config.max_body_bytes = n;
    }
    if let Some(n) = args.max_completed_tasks_per_framework {
        config.max_completed_tasks_per_framework = n;
    }
    for (role, weight) in &args.roles {
        config.set_role(role.clone(), *weight);
    }
    if let Some(l) = args.listen {
        listen = l;
    }
    config.validate()?;
    if !args.in_memory {
        config.registry = Some(args.data_dir.join("registry.redb"));
    }
    Ok((config, listen))
}

/// Resolves on Ctrl-C or SIGTERM.
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
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments");
            eprintln!("{line}");
            return ExitCode::from(2);
        }
    };
    let (config, listen) = match load(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        if args.dev {
            let options = coordinator::dev::DevOptions {
                agents: usize::from(args.dev_agents),
                data_dir: args.data_dir.clone(),
            };
            coordinator::dev::run(config, listener, options, shutdown_signal()).await
        } else {
            coordinator::serve(config, listener, shutdown_signal()).await
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
