//! `parley-jobs-bench`: the jobs service under load. It starts a coordinator and simulated
//! agents from release binaries (the same [`Cluster`] as `parley-bench`), then the
//! `parley-jobs` binary, submits one array through the service's REST API and prints what it
//! measured, one markdown table:
//!
//! - `throughput`: an array of `--tasks` short simulated tasks (the spec's `duration_s`) on
//!   `--agents` agents; tasks per second from the submission to the job's success, and the
//!   service's and the coordinator's CPU and peak memory.
//! - `queue`: an array of `--tasks` tasks that no agent can fit (each asks for more cpus than an
//!   agent has), so all stay queued while the service answers offers; the service's memory.
//!
//! ```sh
//! cargo build --release -p parley -p parley-agent -p parley-jobs -p parley-bench
//! target/release/parley-jobs-bench throughput --agents 1000 --tasks 100000
//! target/release/parley-jobs-bench queue --tasks 1000000
//! ```

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use parley_bench::cluster::{free_port, spawn, stop_child};
use parley_bench::measure;
use parley_bench::{Cluster, ClusterSpec, Launch};
use protocol::Resources;
use serde_json::Value;
use tokio::process::Command;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Tasks per second of one array, end to end.
    Throughput,
    /// The service's memory with one array queued.
    Queue,
}

/// Flags of `parley-jobs-bench`.
#[derive(Debug, Parser)]
#[command(about = "The Parley jobs service under load: array throughput, or a queue's memory")]
struct Args {
    /// What to measure.
    mode: Mode,
    /// Simulated agents (default: 1,000 for `throughput`, 1 for `queue`).
    #[arg(long)]
    agents: Option<usize>,
    /// The array's size (default: 100,000 for `throughput`, 1,000,000 for `queue`).
    #[arg(long)]
    tasks: Option<u64>,
    /// How long each simulated task runs, in seconds.
    #[arg(long, default_value_t = 0.5)]
    task_duration_s: f64,
    /// Cpus of each task (`queue` asks for more than an agent has, whatever this says).
    #[arg(long, default_value_t = 1.0)]
    task_cpus: f64,
    /// Memory of each task, in MiB.
    #[arg(long, default_value_t = 64.0)]
    task_mem: f64,
    /// What each simulated agent has.
    #[arg(long, default_value = "cpus=24,mem=65536")]
    agent_resources: Resources,
    /// Simulated agents per agent process.
    #[arg(long, default_value_t = 1000)]
    agents_per_process: usize,
    /// `queue`: seconds the service answers offers with everything queued before its memory is
    /// read.
    #[arg(long, default_value_t = 10.0)]
    settle_s: f64,
    /// The coordinator binary (default: `coordinator` next to this executable).
    #[arg(long)]
    coordinator_bin: Option<PathBuf>,
    /// The agent binary (default: `agent` next to this executable).
    #[arg(long)]
    agent_bin: Option<PathBuf>,
    /// The jobs service binary (default: `parley-jobs` next to this executable).
    #[arg(long)]
    jobs_bin: Option<PathBuf>,
    /// Where the children's logs and the service's data go (default: a fresh directory under
    /// the temp dir).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Fail when no task succeeds for this many seconds.
    #[arg(long, default_value_t = 60.0)]
    stall_timeout_s: f64,
}

fn binary(given: Option<PathBuf>, name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let path = match given {
        Some(p) => p,
        None => {
            let me = std::env::current_exe().context("finding this executable")?;
            me.parent()
                .context("this executable has no directory")?
                .join(name)
        }
    };
    if !path.is_file() {
        bail!(
            "{} does not exist; build it (cargo build --release -p {package}) or give its flag",
            path.display()
        );
    }
    Ok(path)
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
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parley-jobs-bench: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn real_main() -> anyhow::Result<()> {
    let args = Args::parse();
    let coordinator_bin = binary(args.coordinator_bin.clone(), "coordinator", "parley")?;
    let agent_bin = binary(args.agent_bin.clone(), "agent", "agent")?;
    let jobs_bin = binary(args.jobs_bin.clone(), "parley-jobs", "parley-jobs")?;
    let (agents, tasks) = match args.mode {
        Mode::Throughput => (args.agents.unwrap_or(1000), args.tasks.unwrap_or(100_000)),
        Mode::Queue => (args.agents.unwrap_or(1), args.tasks.unwrap_or(1_000_000)),
    };
    let log_dir = args.log_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("parley-jobs-bench-{}", std::process::id()))
    });
    let spec = ClusterSpec {
        launch: Launch::Processes {
            coordinator_bin,
            agent_bin,
            agents_per_process: args.agents_per_process,
            log_dir: log_dir.clone(),
            real_agents: None,
        },
        agents,
        agent_resources: args.agent_resources.clone(),
        startup_timeout: Duration::from_secs(120),
    };
    eprintln!(
        "[parley-jobs-bench] starting {agents} agents; logs in {}",
        log_dir.display()
    );
    let mut cluster = Cluster::start(&spec).await?;
    let addr = free_port()?;
    let jobs = spawn(
        Command::new(&jobs_bin)
            .arg("--coordinator")
            .arg(&cluster.url)
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--data-dir")
            .arg(log_dir.join("jobs-data")),
        &log_dir.join("jobs.log"),
    )
    .with_context(|| format!("starting {}", jobs_bin.display()))?;
    let bench = Bench {
        base: format!("http://{addr}/api/v1/jobs"),
        http: cluster.http().clone(),
        jobs_pid: jobs.id().context("the jobs service has no pid")?,
        coordinator_pid: cluster.coordinator_pid(),
    };
    let outcome = match args.mode {
        Mode::Throughput => bench.throughput(&args, &mut cluster, tasks).await,
        Mode::Queue => bench.queue(&args, tasks).await,
    };
    stop_child(jobs).await;
    let stopped = cluster.shutdown().await;
    let table = outcome?;
    stopped?;
    println!("{table}");
    Ok(())
}

/// The service under test.
struct Bench {
    base: String,
    http: reqwest::Client,
    jobs_pid: u32,
    coordinator_pid: Option<u32>,
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// A process's resident set size now, in bytes (`VmRSS`).
/// The CPU time of every simulated agent process together.
fn agents_cpu(cluster: &Cluster) -> anyhow::Result<Duration> {
    cluster
        .agent_pids()
        .into_iter()
        .map(measure::cpu_time)
        .sum::<anyhow::Result<Duration>>()
}

fn rss(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let kib = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|l| l.trim().strip_suffix("kB"))
        .and_then(|l| l.trim().parse::<u64>().ok())
        .with_context(|| format!("{path}: no VmRSS line"))?;
    Ok(kib * 1024)
}

impl Bench {
    /// Waits until the service answers, then submits `spec`; the time the answer took.
    async fn submit(&self, spec: &Value) -> anyhow::Result<Duration> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.http.get(&self.base).send().await.is_err() {
            if Instant::now() > deadline {
                bail!("the jobs service did not answer within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let started = Instant::now();
        let r = self
            .http
            .post(&self.base)
            .header("content-type", "application/json")
            .body(spec.to_string())
            .send()
            .await
            .context("submitting")?;
        let took = started.elapsed();
        if r.status().as_u16() != 201 {
            bail!("submitting: {}: {}", r.status(), r.text().await?);
        }
        Ok(took)
    }

    /// The job's summary, from the list: `GET /api/v1/jobs/bench` would also copy every
    /// running attempt, under the lock the scheduler needs.
    async fn job(&self) -> anyhow::Result<Value> {
        let r = self
            .http
            .get(&self.base)
            .send()
            .await
            .context("GET the jobs")?;
        let list: Value = r.json().await?;
        list["jobs"]
            .as_array()
            .and_then(|jobs| jobs.iter().find(|j| j["name"] == "bench"))
            .cloned()
            .context("the job is not listed")
    }

    fn spec(args: &Args, tasks: u64, cpus: f64) -> Value {
        serde_json::json!({
            "name": "bench",
            "command": "true",
            "count": tasks,
            "duration_s": args.task_duration_s,
            "resources": {"cpus": cpus, "mem": args.task_mem},
        })
    }

    async fn throughput(
        &self,
        args: &Args,
        cluster: &mut Cluster,
        tasks: u64,
    ) -> anyhow::Result<String> {
        let jobs_cpu = measure::cpu_time(self.jobs_pid)?;
        let coordinator_cpu = match self.coordinator_pid {
            Some(pid) => Some(measure::cpu_time(pid)?),
            None => None,
        };
        let agents_before = agents_cpu(cluster)?;
        let started = Instant::now();
        let submit = self
            .submit(&Self::spec(args, tasks, args.task_cpus))
            .await?;
        let stall = Duration::from_secs_f64(args.stall_timeout_s);
        let (mut last, mut last_change, mut last_print) = (0, Instant::now(), Instant::now());
        let view = loop {
            let view = self.job().await?;
            let done = view["tasks"]["succeeded"].as_u64().unwrap_or(0);
            match view["state"].as_str() {
                Some("succeeded") => break view,
                Some("failed" | "stopped") => bail!("the job ended {}: {view}", view["state"]),
                _ => {}
            }
            if done != last {
                (last, last_change) = (done, Instant::now());
            } else if last_change.elapsed() > stall {
                bail!("no task succeeded for {stall:?}; {done} of {tasks} did");
            }
            if last_print.elapsed() > Duration::from_secs(5) {
                last_print = Instant::now();
                eprintln!(
                    "[parley-jobs-bench] {:.0} s: {done}/{tasks} succeeded, {} running",
                    started.elapsed().as_secs_f64(),
                    view["tasks"]["running"]
                );
            }
            cluster.check_alive()?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let elapsed = started.elapsed();
        // The service's own clock: from its submission to the job's end.
        let inside_ms = view["ended_ms"]
            .as_u64()
            .zip(view["submitted_ms"].as_u64())
            .map(|(end, start)| end.saturating_sub(start));
        let mut table = String::from("| figure | value |\n|---|---|\n");
        let mut row = |k: &str, v: String| table.push_str(&format!("| {k} | {v} |\n"));
        row(
            "array",
            format!(
                "{tasks} tasks of {} s on {} agents",
                args.task_duration_s,
                args.agents.unwrap_or(1000)
            ),
        );
        row("submission answered in", format!("{submit:.1?}"));
        row(
            "end to end (submission to success, polled)",
            format!(
                "{:.2} s: **{:.0} tasks/s**",
                elapsed.as_secs_f64(),
                tasks as f64 / elapsed.as_secs_f64()
            ),
        );
        if let Some(ms) = inside_ms {
            row(
                "the service's own clock (submitted to ended)",
                format!(
                    "{:.2} s: {:.0} tasks/s",
                    ms as f64 / 1000.0,
                    tasks as f64 * 1000.0 / ms.max(1) as f64
                ),
            );
        }
        let used = measure::cpu_time(self.jobs_pid)?.saturating_sub(jobs_cpu);
        row(
            "jobs service CPU",
            format!(
                "{:.2} s ({:.3} s per 1,000 tasks)",
                used.as_secs_f64(),
                used.as_secs_f64() * 1000.0 / tasks as f64
            ),
        );
        row(
            "jobs service peak RSS",
            mib(measure::peak_rss(self.jobs_pid)?),
        );
        if let (Some(pid), Some(before)) = (self.coordinator_pid, coordinator_cpu) {
            let used = measure::cpu_time(pid)?.saturating_sub(before);
            row(
                "coordinator CPU",
                format!(
                    "{:.2} s ({:.3} s per 1,000 tasks)",
                    used.as_secs_f64(),
                    used.as_secs_f64() * 1000.0 / tasks as f64
                ),
            );
            row("coordinator peak RSS", mib(measure::peak_rss(pid)?));
        }
        let used = agents_cpu(cluster)?.saturating_sub(agents_before);
        row(
            "simulated agents CPU",
            format!(
                "{:.2} s ({:.3} s per 1,000 tasks)",
                used.as_secs_f64(),
                used.as_secs_f64() * 1000.0 / tasks as f64
            ),
        );
        Ok(table)
    }

    async fn queue(&self, args: &Args, tasks: u64) -> anyhow::Result<String> {
        let before = rss(self.jobs_pid)?;
        // More cpus than any agent has: every task stays queued.
        let cpus = args.agent_resources.units("cpus").max(1.0) * 2.0;
        let submit = self.submit(&Self::spec(args, tasks, cpus)).await?;
        let settle = Instant::now() + Duration::from_secs_f64(args.settle_s);
        let mut queued = 0;
        while Instant::now() < settle {
            let view = self.job().await?;
            queued = view["tasks"]["queued"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if queued != tasks {
            bail!("{queued} of {tasks} tasks are queued; expected all");
        }
        let after = rss(self.jobs_pid)?;
        let mut table = String::from("| figure | value |\n|---|---|\n");
        table.push_str(&format!(
            "| array | {tasks} tasks, all queued ({} s of offers) |\n",
            args.settle_s
        ));
        table.push_str(&format!("| submission answered in | {submit:.1?} |\n"));
        table.push_str(&format!("| jobs service RSS before | {} |\n", mib(before)));
        table.push_str(&format!(
            "| jobs service RSS queued | **{}** |\n",
            mib(after)
        ));
        table.push_str(&format!(
            "| jobs service peak RSS | {} |\n",
            mib(measure::peak_rss(self.jobs_pid)?)
        ));
        Ok(table)
    }
}
