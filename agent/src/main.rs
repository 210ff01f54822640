//! The `agent` binary: parses the command line, binds the listener, and runs one real agent or
//! a fleet of simulated ones until Ctrl-C or SIGTERM.
//!
//! ```text
//! agent --coordinator http://127.0.0.1:5050 --listen 127.0.0.1:0 --resources cpus=4,mem=8192,gpus=1 \
//!       --attributes rack=r1,zone=a --work-dir DIR
//! agent --coordinator https://coord:5050 --ca-file ca.pem --tls-cert agent.crt --tls-key agent.key
//! agent --simulate 1000 --resources cpus=24,mem=4096 --coordinator http://127.0.0.1:5050
//! ```

/// mimalloc instead of the system allocator: the request path allocates many small objects
/// (JSON, ids, headers), and glibc's malloc took a fifth of the coordinator's CPU under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use agent::cli::Cli;
use agent::{AgentConfig, SimConfig, Timing, TlsFiles};
use anyhow::Context;
use clap::Parser;
use protocol::Resources;

fn main() {
    // The isolated launcher the task wrapper re-executes (see agent::isolation::launch).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == agent::isolation::launch::LAUNCH_ARG)
    {
        std::process::exit(agent::isolation::launch::main(&args[2..]));
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                e.exit()
            }
            // One line, naming the bad value; clap's usage hints follow on later lines.
            _ => fail(
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("invalid arguments")
                    .trim_start_matches("error: "),
            ),
        },
    };
    observe::logging::init(cli.log.log_format, observe::logging::Stream::Stderr);
    let plan = match plan(cli) {
        Ok(plan) => plan,
        Err(e) => fail(&format!("{e:#}")),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail(&format!("cannot start the runtime: {e}")),
    };
    if let Err(e) = runtime.block_on(serve(plan)) {
        fail(&format!("{e:#}"));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("agent: {message}");
    std::process::exit(2)
}

/// What to run, with every flag checked.
enum Plan {
    Real(AgentConfig, String),
    Simulated(SimConfig, String),
}

fn plan(cli: Cli) -> anyhow::Result<Plan> {
    let coordinator =
        agent::config::parse_coordinator_urls(&cli.coordinator).context("--coordinator")?;
    let resources: Option<Resources> = cli
        .resources
        .as_deref()
        .map(str::parse)
        .transpose()
        .context("--resources")?;
    let attributes = agent::config::parse_attributes(&cli.attributes).context("--attributes")?;
    let reservations = cli
        .reserve
        .iter()
        .map(|r| {
            r.parse::<protocol::reservation::Reservation>()
                .with_context(|| format!("--reserve {r:?}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let reserve_fraction: f64 = cli
        .reserve_fraction
        .parse()
        .ok()
        .filter(|f: &f64| (0.0..=1.0).contains(f))
        .with_context(|| {
            format!(
                "--reserve-fraction {:?}: expected a number from 0 to 1",
                cli.reserve_fraction
            )
        })?;
    let gpus: agent::gpu::GpuChoice = cli.gpus.parse()?;
    let kill_grace = seconds(&cli.kill_grace_s).context("--kill-grace-s")?;
    let stagger = seconds(&cli.stagger_s).context("--stagger-s")?;
    let sandbox_retention = seconds(&cli.sandbox_retention_s).context("--sandbox-retention-s")?;
    cli.listen
        .parse::<std::net::SocketAddr>()
        .with_context(|| {
            format!(
                "--listen {:?}: expected HOST:PORT, e.g. 127.0.0.1:5051",
                cli.listen
            )
        })?;
    let timing = Timing {
        kill_grace,
        ..Timing::default()
    };
    let tls = match (cli.tls_cert, cli.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None) => None,
        (Some(_), None) => anyhow::bail!("--tls-cert needs --tls-key"),
        (None, Some(_)) => anyhow::bail!("--tls-key needs --tls-cert"),
    };

    if let Some(count) = cli.simulate {
        let count: usize = count.parse().ok().filter(|n| *n > 0).with_context(|| {
            format!("--simulate {count:?}: expected a number of agents, at least 1")
        })?;
        let resources = match resources {
            Some(r) => r,
            None => {
                agent::resources::detect(&std::env::temp_dir()).context("detecting resources")?
            }
        };
        let mut config = SimConfig::new(coordinator, count, resources);
        config.attributes = attributes;
        config.reservations = reservations;
        config.reserve_fraction = reserve_fraction;
        config.advertise_url = cli.advertise_url;
        config.stagger = stagger;
        config.timing = timing;
        config.tls = tls;
        config.ca_file = cli.ca_file;
        config.token = cli.token;
        config.api_token = cli.api_token;
        if let Some(h) = cli.hostname {
            config.hostname_prefix = h;
        }
        return Ok(Plan::Simulated(config, cli.listen));
    }
    let mut config = AgentConfig::new(coordinator, cli.work_dir);
    config.resources = resources;
    config.attributes = attributes;
    config.reservations = reservations;
    config.hostname = cli.hostname;
    config.advertise_url = cli.advertise_url;
    config.cgroup_root = cli.cgroup_root;
    config.sandbox_retention = sandbox_retention;
    config.timing = timing;
    config.tls = tls;
    config.ca_file = cli.ca_file;
    config.token = cli.token;
    if let Some(token) = &cli.api_token {
        agent::auth::check_form(token).context("--api-token")?;
    }
    config.api_token = cli.api_token;
    config.task_user = cli
        .task_user
        .as_deref()
        .map(agent::task_user::TaskUser::parse)
        .transpose()
        .context("--task-user")?;
    config.allow_root_tasks = cli.allow_root_tasks;
    config.image_root = cli.image_root;
    config.isolation = cli.isolation.parse().map_err(anyhow::Error::msg)?;
    config.gpus = gpus;
    config.default_pids = cli
        .default_pids
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=protocol::isolation::MAX_PIDS as u64).contains(n))
        .with_context(|| {
            format!(
                "--default-pids {:?}: expected a number from 1 to {}",
                cli.default_pids,
                protocol::isolation::MAX_PIDS
            )
        })?;
    Ok(Plan::Real(config, cli.listen))
}

fn seconds(text: &str) -> anyhow::Result<Duration> {
    text.parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .with_context(|| format!("{text:?} is not a non-negative number of seconds"))
}

async fn serve(plan: Plan) -> anyhow::Result<()> {
    match plan {
        Plan::Real(config, listen) => {
            let listener = bind(&listen).await?;
            Ok(agent::run(config, listener, shutdown_signal()).await?)
        }
        Plan::Simulated(config, listen) => {
            let listener = bind(&listen).await?;
            Ok(agent::run_simulated(config, listener, shutdown_signal()).await?)
        }
    }
}

async fn bind(listen: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("--listen {listen}: cannot bind"))?;
    tracing::info!(addr = %listener.local_addr()?, "listening");
    Ok(listener)
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down");
}
