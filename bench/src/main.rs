//! `parley-bench`: starts a coordinator and simulated agents from release binaries, drives many
//! SDK frameworks against them and prints one markdown table. Run with:
//!
//! ```sh
//! cargo build --release -p parley -p parley-agent -p parley-bench
//! target/release/parley-bench --agents 1000 --frameworks 100 --tasks 20000
//! target/release/parley-bench --soak 60m --rate 2000          # steady load, drift per window
//! target/release/parley-bench failover --leader-lease-s 3      # SIGKILL of the HA leader
//! ```
//!
//! With `--real-agents` the agents are real `agent` processes that run each task's
//! `--task-command` (as root: isolated, a cgroup and namespaces per task), e.g. one agent
//! starting 2,000 `/bin/true` tasks:
//!
//! ```sh
//! sudo target/release/parley-bench --real-agents --agents 1 --frameworks 1 --tasks 2000 \
//!     --task-command /bin/true --task-resources cpus=0.1,mem=32 \
//!     --agent-resources cpus=16,mem=16384 --state-tasks 0
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
use parley_bench::failover::{self, FailoverConfig};
use parley_bench::ha::{HaCluster, HaSpec};
use parley_bench::soak::{self, SoakConfig};
use parley_bench::{Cluster, ClusterSpec, Launch, RunConfig};
use protocol::Resources;

/// Flags of `parley-bench`.
#[derive(Debug, Parser)]
#[command(
    about = "End-to-end benchmark of a Parley coordinator with simulated agents and SDK frameworks",
    args_conflicts_with_subcommands = true
)]
struct Args {
    /// Another benchmark than the default phases.
    #[command(subcommand)]
    mode: Option<Mode>,
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
    /// Real agents (one `agent` process each, running the tasks as processes; isolated when
    /// run as root) instead of simulated ones; their work directories go under the log
    /// directory. Needs `--task-command`.
    #[arg(long, requires = "task_command")]
    real_agents: bool,
    /// The shell command of each throughput task, for `--real-agents` (`--task-duration-s`
    /// is then not used).
    #[arg(long, requires = "real_agents")]
    task_command: Option<String>,
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
    /// Instead of the phases, keep the cluster busy at `--rate` for this long (`90s`, `60m`,
    /// `2h`) and print the coordinator's figures per window and their drift.
    #[arg(long, value_name = "DURATION", value_parser = soak::parse_duration)]
    soak: Option<Duration>,
    /// With --soak: the launches per second aimed at.
    #[arg(long, default_value_t = 2000.0)]
    rate: f64,
    /// With --soak: how long each task runs, in seconds (rate × this many tasks are in flight).
    #[arg(long, default_value_t = 10.0)]
    soak_task_s: f64,
    /// With --soak: task lengths spread over `--soak-task-s × (1 ± this)` (0 to 0.9), so the
    /// tasks start out of step instead of ending in waves (default 0: all alike).
    #[arg(long, default_value_t = 0.0)]
    soak_task_spread: f64,
    /// With --soak: what each task needs.
    #[arg(long, default_value = "cpus=1,mem=1024")]
    soak_task_resources: Resources,
    /// With --soak: the window (default 10m, or 1m for a soak shorter than 30m).
    #[arg(long, value_name = "DURATION", value_parser = soak::parse_duration)]
    soak_window: Option<Duration>,
}

/// The benchmarks other than the default phases.
#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Three coordinators on etcd, simulated agents and SDK frameworks given all three URLs;
    /// once every task runs the leader is SIGKILLed and the recovery timed and checked.
    Failover(FailoverArgs),
}

/// Flags of `parley-bench failover`.
#[derive(Debug, clap::Args)]
struct FailoverArgs {
    /// Simulated agents (one agent process).
    #[arg(long, default_value_t = 10_000)]
    agents: usize,
    /// SDK frameworks with tasks (run in this process).
    #[arg(long, default_value_t = 1000)]
    frameworks: usize,
    /// Long-running tasks, shared evenly between the frameworks.
    #[arg(long, default_value_t = 10_000)]
    tasks: usize,
    /// What each task needs.
    #[arg(long, default_value = "cpus=0.1,mem=32")]
    task_resources: Resources,
    /// What each simulated agent has.
    #[arg(long, default_value = "cpus=24,mem=65536")]
    agent_resources: Resources,
    /// Frameworks that only ask for offers (declining them), so the new leader's first offer
    /// is due at once.
    #[arg(long, default_value_t = 1)]
    probes: usize,
    /// Coordinators (`--etcd`), at least 2.
    #[arg(long, default_value_t = 3)]
    coordinators: usize,
    /// The coordinators' `--leader-lease-s` (1 to 3600).
    #[arg(long, default_value_t = 3)]
    leader_lease_s: u64,
    /// The coordinators' `--reregister-grace-s`: how long a new leader waits for the agents
    /// before offering.
    #[arg(long, default_value_t = 2)]
    reregister_grace_s: u64,
    /// The coordinators' `--agent-heartbeat-interval` in seconds (their default: 15): agents
    /// move to the new leader at their next heartbeat.
    #[arg(long)]
    agent_heartbeat_s: Option<f64>,
    /// The coordinator binary (default: `coordinator` next to this executable).
    #[arg(long)]
    coordinator_bin: Option<PathBuf>,
    /// The agent binary (default: `agent` next to this executable).
    #[arg(long)]
    agent_bin: Option<PathBuf>,
    /// The etcd binary.
    #[arg(long, default_value = "/usr/bin/etcd")]
    etcd_bin: PathBuf,
    /// Where the children's logs go (default: a fresh directory under the temp dir).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Seconds etcd, the first leader and the agents may take to come up.
    #[arg(long, default_value_t = 300.0)]
    startup_timeout_s: f64,
    /// The launch fails when no task starts running for this many seconds.
    #[arg(long, default_value_t = 60.0)]
    stall_timeout_s: f64,
    /// Seconds after the kill the cluster may take to recover before the figures are printed
    /// as they are.
    #[arg(long, default_value_t = 60.0)]
    recovery_timeout_s: f64,
    /// Seconds between progress lines on stderr.
    #[arg(long, default_value_t = 5.0)]
    progress_s: f64,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A spread of task lengths: a fraction from 0 to 0.9.
fn spread(flag: &str, v: f64) -> anyhow::Result<f64> {
    if (0.0..=0.9).contains(&v) {
        Ok(v)
    } else {
        anyhow::bail!("{flag}: {v} is not a fraction from 0 to 0.9")
    }
}

fn seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v).with_context(|| format!("{flag} {v}: expected seconds >= 0"))
}

fn next_to_me(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding this executable")?;
    let dir = me.parent().context("this executable has no directory")?;
    Ok(dir.join(name))
}

/// The coordinator and agent binaries: as given, or next to this executable; both must exist.
fn binaries(
    coordinator_bin: Option<PathBuf>,
    agent_bin: Option<PathBuf>,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let coordinator_bin = match coordinator_bin {
        Some(p) => p,
        None => next_to_me("coordinator")?,
    };
    let agent_bin = match agent_bin {
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
    Ok((coordinator_bin, agent_bin))
}

fn log_dir(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("parley-bench-{}", std::process::id()))
    })
}

fn write_json<T: serde::Serialize>(path: Option<PathBuf>, value: &T) -> anyhow::Result<()> {
    if let Some(path) = path {
        let json = serde_json::to_string_pretty(value)?;
        std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `parley-bench failover`; `Ok(false)` when a task was lost or launched twice.
async fn failover_main(args: FailoverArgs) -> anyhow::Result<bool> {
    let (coordinator_bin, agent_bin) = binaries(args.coordinator_bin, args.agent_bin)?;
    if !(1..=3600).contains(&args.leader_lease_s) {
        anyhow::bail!(
            "--leader-lease-s {}: expected 1 to 3600",
            args.leader_lease_s
        );
    }
    let mut coordinator_args = Vec::new();
    if let Some(s) = args.agent_heartbeat_s {
        seconds("--agent-heartbeat-s", s)?;
        coordinator_args.extend(["--agent-heartbeat-interval".to_owned(), s.to_string()]);
    }
    let log_dir = log_dir(args.log_dir);
    let spec = HaSpec {
        coordinator_bin,
        agent_bin,
        etcd_bin: args.etcd_bin,
        log_dir: log_dir.clone(),
        coordinators: args.coordinators,
        agents: args.agents,
        agent_resources: args.agent_resources,
        lease_s: args.leader_lease_s,
        reregister_grace_s: args.reregister_grace_s,
        coordinator_args,
        startup_timeout: seconds("--startup-timeout-s", args.startup_timeout_s)?,
    };
    let config = FailoverConfig {
        frameworks: args.frameworks,
        tasks: args.tasks,
        task_resources: args.task_resources,
        probes: args.probes,
        lease_s: args.leader_lease_s,
        stall_timeout: seconds("--stall-timeout-s", args.stall_timeout_s)?,
        recovery_timeout: seconds("--recovery-timeout-s", args.recovery_timeout_s)?,
        progress_every: seconds("--progress-s", args.progress_s)?,
    };
    eprintln!(
        "[parley-bench] failover: etcd, {} coordinators, {} agents; logs in {}",
        args.coordinators,
        args.agents,
        log_dir.display()
    );
    let mut cluster = HaCluster::start(&spec).await?;
    let report = failover::failover(&config, &mut cluster, args.agents).await;
    cluster.shutdown().await;
    let report = report?;
    println!("{}", report.markdown());
    write_json(args.json, &report)?;
    match report.check() {
        Ok(()) => Ok(true),
        Err(e) => {
            eprintln!("parley-bench: failover lost or duplicated tasks: {e}");
            Ok(false)
        }
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colours only to a terminal: a benchmark's stderr usually goes to a file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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

/// Raises this process' open-file limit, which the coordinator, agents and etcd it starts
/// inherit: as root, soft and hard to the kernel's most (`fs.nr_open`, at most 2^20), else the
/// soft one to the hard one. One machine then holds what a real cluster spreads over many: the
/// coordinator's connections from 50,000 agents and 1,500 frameworks reached 20,000 at once.
fn raise_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let most = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(hard)
        .min(1 << 20);
    let target = if nix::unistd::geteuid().is_root() {
        most.max(hard)
    } else {
        hard
    };
    if target > soft && setrlimit(Resource::RLIMIT_NOFILE, target, target).is_err() {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    if let Ok((now, _)) = getrlimit(Resource::RLIMIT_NOFILE) {
        eprintln!("[parley-bench] open-file limit for this process and its children: {now}");
    }
}

/// Runs the benchmark; `Ok(false)` when it ran but a task is not accounted for.
async fn real_main() -> anyhow::Result<bool> {
    let args = Args::parse();
    raise_open_files();
    if let Some(Mode::Failover(failover)) = args.mode {
        return failover_main(failover).await;
    }
    let (coordinator_bin, agent_bin) = binaries(args.coordinator_bin, args.agent_bin)?;
    let log_dir = log_dir(args.log_dir);
    let spec = ClusterSpec {
        launch: Launch::Processes {
            coordinator_bin,
            agent_bin,
            agents_per_process: args.agents_per_process,
            log_dir: log_dir.clone(),
            real_agents: args.real_agents.then(|| log_dir.join("work")),
        },
        agents: args.agents,
        agent_resources: args.agent_resources,
        startup_timeout: seconds("--startup-timeout-s", args.startup_timeout_s)?,
    };
    let config = RunConfig {
        frameworks: args.frameworks,
        tasks: args.tasks,
        task_duration_s: args.task_duration_s,
        task_command: args.task_command,
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
    if let Some(duration) = args.soak {
        let window = args
            .soak_window
            .unwrap_or(if duration < Duration::from_secs(1800) {
                Duration::from_secs(60)
            } else {
                Duration::from_secs(600)
            });
        let soak_config = SoakConfig {
            duration,
            window,
            rate: args.rate,
            frameworks: args.frameworks,
            task_duration_s: seconds("--soak-task-s", args.soak_task_s)?.as_secs_f64(),
            task_spread: spread("--soak-task-spread", args.soak_task_spread)?,
            task_resources: args.soak_task_resources,
            stall_timeout: config.stall_timeout,
        };
        let report = soak::soak(&soak_config, &mut cluster).await;
        let stopped = cluster.shutdown().await;
        let report = report?;
        stopped?;
        println!("{}", report.markdown());
        write_json(args.json, &report)?;
        return Ok(report.books_balance() && report.released);
    }
    let report = parley_bench::run(&config, &mut cluster).await;
    let stopped = cluster.shutdown().await;
    let report = report?;
    stopped?;
    println!("{}", report.markdown());
    write_json(args.json, &report)?;
    match report.accounting.check() {
        Ok(()) => Ok(true),
        Err(e) => {
            eprintln!("parley-bench: not every task is accounted for: {e}");
            Ok(false)
        }
    }
}
