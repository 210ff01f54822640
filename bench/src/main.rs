//! `parley-bench`: starts a coordinator and simulated agents from release binaries, drives many
//! SDK frameworks against them and prints one markdown table. Run with:
//!
//! ```sh
//! cargo build --release -p parley -p parley-agent -p parley-bench
//! target/release/parley-bench --agents 1000 --frameworks 100 --tasks 20000
//! ```

/// mimalloc, as in the coordinator and agent binaries: the harness runs every framework's driver
/// in this process, and with glibc's malloc a third of its CPU went to `malloc`/`free` (it shares
/// the machine with what it measures).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use parley_bench::{Cluster, ClusterSpec, Launch, RunConfig};
use protocol::Resources;

/// Flags of `parley-bench`.
#[derive(Debug, Parser)]
#[command(
    about = "End-to-end benchmark of a Parley coordinator with simulated agents and SDK frameworks"
)]
struct Args {
    /// Simulated agents.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// SDK frameworks (run in this process, one tokio runtime).
    #[arg(long, default_value_t = 100)]
    frameworks: usize,
    /// Short tasks of the throughput phase, shared evenly between the frameworks.
    #[arg(long, default_value_t = 20_000)]
    tasks: usize,
    /// How long each simulated task runs, in seconds.
    #[arg(long, default_value_t = 1.0)]
    task_duration_s: f64,
    /// What each task needs. The default fits 6 on a default agent, so 20,000 tasks on 1,000
    /// agents take several waves and freed resources are offered again.
    #[arg(long, default_value = "cpus=4,mem=8192")]
    task_resources: Resources,
    /// What each simulated agent has.
    #[arg(long, default_value = "cpus=24,mem=65536")]
    agent_resources: Resources,
    /// Simulated agents per agent process.
    #[arg(long, default_value_t = 1000)]
    agents_per_process: usize,
    /// Long-running tasks started after the throughput phase, for the `GET /api/v1/state`
    /// figure (0: skip it).
    #[arg(long, default_value_t = 10_000)]
    state_tasks: usize,
    /// What each state task needs.
    #[arg(long, default_value = "cpus=0.1,mem=32")]
    state_task_resources: Resources,
    /// The coordinator binary (default: `coordinator` next to this executable).
    #[arg(long)]
    coordinator_bin: Option<PathBuf>,
    /// The agent binary (default: `agent` next to this executable).
    #[arg(long)]
    agent_bin: Option<PathBuf>,
    /// Where the children's logs go (default: a fresh directory under the temp dir).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Seconds the cluster may take to come up.
    #[arg(long, default_value_t = 120.0)]
    startup_timeout_s: f64,
    /// Give every framework the same task ids (t0, t1, …), as the API allows; by default they
    /// are unique across frameworks, because agents key tasks by task id alone and two
    /// frameworks' tasks of one id on one agent collide (the second ends `error`).
    #[arg(long)]
    shared_task_ids: bool,
    /// A phase fails when no task changes state for this many seconds.
    #[arg(long, default_value_t = 60.0)]
    stall_timeout_s: f64,
    /// Seconds between progress lines on stderr.
    #[arg(long, default_value_t = 5.0)]
    progress_s: f64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v).with_context(|| format!("{flag} {v}: expected seconds >= 0"))
}

fn next_to_me(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding this executable")?;
    let dir = me.parent().context("this executable has no directory")?;
    Ok(dir.join(name))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match real_main().await {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(2),
        Err(e) => {
            eprintln!("parley-bench: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs the benchmark; `Ok(false)` when it ran but a task is not accounted for.
async fn real_main() -> anyhow::Result<bool> {
    let args = Args::parse();
    let coordinator_bin = match args.coordinator_bin {
        Some(p) => p,
        None => next_to_me("coordinator")?,
    };
    let agent_bin = match args.agent_bin {
        Some(p) => p,
        None => next_to_me("agent")?,
    };
    for (flag, bin) in [
        ("--coordinator-bin", &coordinator_bin),
        ("--agent-bin", &agent_bin),
    ] {
        if !bin.is_file() {
            anyhow::bail!(
                "{} does not exist; build it (cargo build --release -p parley -p parley-agent) or give {flag}",
                bin.display()
            );
        }
    }
    let log_dir = args.log_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("parley-bench-{}", std::process::id()))
    });
    let spec = ClusterSpec {
        launch: Launch::Processes {
            coordinator_bin,
            agent_bin,
            agents_per_process: args.agents_per_process,
            log_dir: log_dir.clone(),
        },
        agents: args.agents,
        agent_resources: args.agent_resources,
        startup_timeout: seconds("--startup-timeout-s", args.startup_timeout_s)?,
    };
    let config = RunConfig {
        frameworks: args.frameworks,
        tasks: args.tasks,
        task_duration_s: args.task_duration_s,
        task_resources: args.task_resources,
        state_tasks: args.state_tasks,
        state_task_resources: args.state_task_resources,
        shared_task_ids: args.shared_task_ids,
        stall_timeout: seconds("--stall-timeout-s", args.stall_timeout_s)?,
        progress_every: seconds("--progress-s", args.progress_s)?,
    };
    eprintln!(
        "[parley-bench] starting {} agents; logs in {}",
        args.agents,
        log_dir.display()
    );
    let mut cluster = Cluster::start(&spec).await?;
    eprintln!("[parley-bench] cluster up at {}", cluster.url);
    let report = parley_bench::run(&config, &mut cluster).await;
    let stopped = cluster.shutdown().await;
    let report = report?;
    stopped?;
    println!("{}", report.markdown());
    if let Some(path) = args.json {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    match report.accounting.check() {
        Ok(()) => Ok(true),
        Err(e) => {
            eprintln!("parley-bench: not every task is accounted for: {e}");
            Ok(false)
        }
    }
}
