//! [`run`]: the benchmark's phases against a started [`Cluster`].
//!
//! 1. **Throughput.** `frameworks` SDK frameworks register (roles `bench/g0` … `bench/g9`) and
//!    share `tasks` short simulated tasks. The phase ends when every framework has seen each of
//!    its tasks end. The coordinator's `/metrics` and `/proc` times are read before and after.
//! 2. **Accounting.** Every task launched, ran and finished; the coordinator lists none as
//!    not terminal and its books release every resource.
//! 3. **State.** With `state_tasks > 0`, frameworks launch that many long-running tasks; once
//!    all run, `GET /api/v1/state` is timed a few times. The frameworks are then removed (their
//!    tasks killed) and the books must release everything again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use framework_sdk::{Driver, DriverConfig};
use protocol::messages::{AgentList, FrameworkList, TaskList};
use protocol::{FrameworkId, Resources};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::framework::{BenchFramework, FrameworkOutcome, Progress, Workload};
use crate::measure::{self, Buckets};
use crate::report::{Accounting, Percentiles, Report, StateFigure};

/// The coordinator's default `max_completed_tasks_per_framework`: with more tasks per
/// framework it forgets the oldest completed ones, so the exact task count is not checked.
const COMPLETED_TASKS_KEPT: usize = 1000;

/// How many times `GET /api/v1/state` is timed.
const STATE_CALLS: usize = 5;

/// The fine allocation histogram this project's coordinator serves, and the coarse one older
/// coordinators serve.
const FINE_HISTOGRAM: &str = "parley_allocation_run_fine_seconds";

/// How long freed resources waited for their offer, inside the coordinator.
const OFFER_WAIT_HISTOGRAM: &str = "parley_offer_wait_seconds";
const COARSE_HISTOGRAM: &str = "parley_allocation_run_seconds";

/// What to run against the cluster.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Frameworks of the throughput phase (and at most this many in the state phase).
    pub frameworks: usize,
    /// Tasks of the throughput phase, shared evenly between the frameworks.
    pub tasks: usize,
    /// Each task's `duration_s`.
    pub task_duration_s: f64,
    /// Each task's shell command, for real agents (then `task_duration_s` is not sent).
    pub task_command: Option<String>,
    /// What each task needs.
    pub task_resources: Resources,
    /// Long-running tasks for the `GET /api/v1/state` figure; 0 skips it.
    pub state_tasks: usize,
    /// What each of those needs (small, so many fit: the figure is about the books' size).
    pub state_task_resources: Resources,
    /// Give every framework the same task ids (`t0`, `t1`, …), as the API allows, instead of
    /// ids unique across frameworks; see `start_frameworks` for why that is not the default.
    pub shared_task_ids: bool,
    /// A phase fails when no task changes state for this long.
    pub stall_timeout: Duration,
    /// How often a progress line goes to stderr.
    pub progress_every: Duration,
}

/// Runs the phases and returns what they measured. Fails when tasks stop progressing, a
/// framework's driver fails, or a part of the cluster dies; an accounting mismatch is in the
/// report (see [`Accounting::check`]), not an error.
pub async fn run(config: &RunConfig, cluster: &mut Cluster) -> anyhow::Result<Report> {
    if config.frameworks == 0 || config.tasks < config.frameworks {
        bail!("need at least one framework and one task per framework");
    }
    let mut report = Report {
        frameworks: config.frameworks,
        tasks: config.tasks,
        task_duration_s: config.task_duration_s,
        task_resources: config.task_resources.to_string(),
        agents_registered_s: cluster.agents_registered_in.as_secs_f64(),
        ..Report::default()
    };
    let agents: AgentList = cluster.get("/api/v1/agents").await?;
    report.agents = agents.agents.len();
    if let Some(a) = agents.agents.first() {
        report.agent_resources = a.resources.to_string();
    }

    // Throughput.
    let metrics_before = cluster.get_text("/metrics").await?;
    let cpu_before = CpuTimes::read(cluster);
    let started = Instant::now();
    let progress = Arc::new(Progress::default());
    let workloads = split(config.tasks, config.frameworks, |tasks| Workload {
        tasks,
        id_prefix: String::new(),
        resources: config.task_resources.clone(),
        duration_s: config
            .task_command
            .is_none()
            .then_some(config.task_duration_s),
        command: config.task_command.clone(),
        stop_when_done: true,
        max_in_flight: None,
        hold_demand: false,
        duration_spread: 0.0,
    });
    let (drivers, _stops) = start_frameworks(
        &cluster.url,
        "bench",
        workloads,
        &progress,
        false,
        config.shared_task_ids,
    )?;
    let outcomes = wait_done(cluster, drivers, &progress, config, "throughput").await?;
    report.phase_s = started.elapsed().as_secs_f64();
    if let (n, Some(last)) = progress.registered() {
        if n as usize >= config.frameworks {
            report.frameworks_registered_s = Some(last.duration_since(started).as_secs_f64());
        }
    }
    let cpu_after = CpuTimes::read(cluster);
    let metrics_after = cluster.get_text("/metrics").await?;
    fill_throughput(&mut report, &outcomes, &progress);
    fill_allocation(&mut report, &metrics_before, &metrics_after);
    fill_cpu(&mut report, &cpu_before, &cpu_after, config.tasks);

    // Accounting.
    report.accounting = account(cluster, &outcomes, &progress, config).await?;

    // State.
    if config.state_tasks > 0 {
        report.state = Some(state_phase(cluster, config).await?);
    }
    report.coordinator_peak_rss_mib = cluster
        .coordinator_pid()
        .and_then(|pid| measure::peak_rss(pid).ok())
        .map(|b| b as f64 / (1024.0 * 1024.0));
    Ok(report)
}

/// `total` split into `parts` near-equal shares, each made into a workload.
pub(crate) fn split(total: usize, parts: usize, make: impl Fn(usize) -> Workload) -> Vec<Workload> {
    (0..parts)
        .map(|i| make(total / parts + usize::from(i < total % parts)))
        .collect()
}

pub(crate) type Drivers = JoinSet<(usize, Result<BenchFramework, framework_sdk::SdkError>)>;

/// Starts one driver per workload on this runtime. Each framework's task ids start with its own
/// prefix (`{prefix}{i}-t…`): the API makes task ids unique only within a framework, but the
/// agents (real and simulated) key tasks by task id alone, so frameworks sharing ids collide on
/// an agent (the second launch ends `error`, "task … already exists on this agent").
fn start_frameworks(
    url: &str,
    prefix: &str,
    workloads: Vec<Workload>,
    progress: &Arc<Progress>,
    unregister_on_stop: bool,
    shared_task_ids: bool,
) -> anyhow::Result<(Drivers, Vec<CancellationToken>)> {
    start_frameworks_with(url, prefix, workloads, progress, shared_task_ids, |c| {
        c.unregister_on_stop = unregister_on_stop;
    })
}

/// As `start_frameworks`, with `tweak` applied to each driver's settings (which start with a
/// 60 s request timeout).
pub(crate) fn start_frameworks_with(
    url: &str,
    prefix: &str,
    workloads: Vec<Workload>,
    progress: &Arc<Progress>,
    shared_task_ids: bool,
    tweak: impl Fn(&mut DriverConfig),
) -> anyhow::Result<(Drivers, Vec<CancellationToken>)> {
    let mut set = JoinSet::new();
    let mut stops = Vec::new();
    for (i, mut work) in workloads.into_iter().enumerate() {
        if !shared_task_ids {
            work.id_prefix = format!("{prefix}{i}");
        }
        let role = format!("bench/g{}", i % 10)
            .parse()
            .map_err(|e| anyhow::anyhow!("role: {e}"))?;
        let mut config = DriverConfig::new(url, format!("{prefix}-{i}"), role);
        config.request_timeout = Duration::from_secs(60);
        tweak(&mut config);
        let driver = Driver::new(config, BenchFramework::new(work, progress.clone()))?;
        stops.push(driver.stop_token());
        set.spawn(async move { (i, driver.run().await) });
    }
    Ok((set, stops))
}

/// Tracks stalls and prints progress lines while waiting; `Ok(true)` once `done` holds.
struct Watch {
    last_seen: (u64, u64),
    last_change: Instant,
    last_line: Instant,
    started: Instant,
}

impl Watch {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            last_seen: (0, 0),
            last_change: now,
            last_line: now,
            started: now,
        }
    }

    fn tick(
        &mut self,
        cluster: &mut Cluster,
        progress: &Progress,
        config: &RunConfig,
        phase: &str,
        want: usize,
    ) -> anyhow::Result<()> {
        cluster.check_alive()?;
        let seen = (progress.running(), progress.ended());
        if seen != self.last_seen {
            self.last_seen = seen;
            self.last_change = Instant::now();
        }
        if self.last_change.elapsed() >= config.stall_timeout {
            bail!(
                "{phase} phase stalled: no task changed state for {:?} \
                 ({} of {want} tasks reached running, {} ended)",
                config.stall_timeout,
                seen.0,
                seen.1
            );
        }
        if self.last_line.elapsed() >= config.progress_every {
            self.last_line = Instant::now();
            eprintln!(
                "[parley-bench] {phase}: {}/{want} running, {} ended, {} refused accepts, {:.0} s",
                seen.0,
                seen.1,
                progress.failed_launches(),
                self.started.elapsed().as_secs_f64()
            );
        }
        Ok(())
    }
}

/// Waits for every driver to stop by itself (each after its tasks ended).
async fn wait_done(
    cluster: &mut Cluster,
    mut drivers: Drivers,
    progress: &Progress,
    config: &RunConfig,
    phase: &str,
) -> anyhow::Result<Vec<FrameworkOutcome>> {
    let mut outcomes = Vec::new();
    let mut watch = Watch::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            joined = drivers.join_next() => {
                let Some(joined) = joined else { break };
                let (i, result) = joined.context("a framework task panicked")?;
                let framework = result.with_context(|| format!("framework {i} failed"))?;
                outcomes.push(framework.outcome());
            }
            _ = tick.tick() => {
                watch.tick(cluster, progress, config, phase, config.tasks)?;
            }
        }
    }
    Ok(outcomes)
}

fn fill_throughput(report: &mut Report, outcomes: &[FrameworkOutcome], progress: &Progress) {
    let mut running_at: Vec<Instant> = outcomes
        .iter()
        .flat_map(|o| o.running_at.iter().copied())
        .collect();
    report.launches_per_s_sustained = measure::sustained_rate(&mut running_at);
    report.launches_per_s_overall = match (running_at.first(), running_at.last()) {
        (Some(first), Some(last)) if last > first => {
            Some((running_at.len() - 1) as f64 / last.duration_since(*first).as_secs_f64())
        }
        _ => None,
    };
    let mut launch: Vec<Duration> = outcomes
        .iter()
        .flat_map(|o| o.launch_latencies.iter().copied())
        .collect();
    report.launch_latency = percentiles(&mut launch);
    let (mut offer, unmatched) = progress.offer_latencies();
    report.offer_latency = percentiles(&mut offer);
    report.offer_latency_unmatched = unmatched;
}

pub(crate) fn percentiles(samples: &mut [Duration]) -> Percentiles {
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
    Percentiles {
        p50_ms: ms(measure::percentile(samples, 0.5)),
        p99_ms: ms(measure::percentile(samples, 0.99)),
        samples: samples.len() as u64,
    }
}

fn fill_allocation(report: &mut Report, before: &str, after: &str) {
    let (name, after_h) = match measure::histogram(after, FINE_HISTOGRAM) {
        Some(h) => (FINE_HISTOGRAM, h),
        None => match measure::histogram(after, COARSE_HISTOGRAM) {
            Some(h) => (COARSE_HISTOGRAM, h),
            None => return,
        },
    };
    let before_h: Option<Buckets> = measure::histogram(before, name);
    let delta = measure::histogram_delta(before_h.as_ref(), &after_h);
    let ms = |q| measure::histogram_quantile(&delta, q).map(|s| s * 1e3);
    report.allocation_histogram = name.into();
    report.allocation_run = Percentiles {
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        samples: delta.last().map_or(0, |b| b.1),
    };
    if let Some(after_h) = measure::histogram(after, OFFER_WAIT_HISTOGRAM) {
        let before_h: Option<Buckets> = measure::histogram(before, OFFER_WAIT_HISTOGRAM);
        let delta = measure::histogram_delta(before_h.as_ref(), &after_h);
        let ms = |q| measure::histogram_quantile(&delta, q).map(|s| s * 1e3);
        report.offer_wait = Percentiles {
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            samples: delta.last().map_or(0, |b| b.1),
        };
    }
}

/// CPU used so far by the coordinator, the agent processes and this process.
struct CpuTimes {
    coordinator: Option<Duration>,
    agents: Option<Duration>,
    harness: Option<Duration>,
}

impl CpuTimes {
    fn read(cluster: &Cluster) -> Self {
        let pids = cluster.agent_pids();
        let agents = (!pids.is_empty())
            .then(|| {
                pids.iter()
                    .map(|p| measure::cpu_time(*p).ok())
                    .sum::<Option<Duration>>()
            })
            .flatten();
        Self {
            coordinator: cluster
                .coordinator_pid()
                .and_then(|p| measure::cpu_time(p).ok()),
            agents,
            harness: measure::cpu_time(std::process::id()).ok(),
        }
    }
}

fn fill_cpu(report: &mut Report, before: &CpuTimes, after: &CpuTimes, tasks: usize) {
    let delta =
        |a: Option<Duration>, b: Option<Duration>| Some(b?.saturating_sub(a?).as_secs_f64());
    report.coordinator_cpu_s = delta(before.coordinator, after.coordinator);
    report.coordinator_cpu_s_per_1000_tasks =
        report.coordinator_cpu_s.map(|s| s * 1000.0 / tasks as f64);
    report.agents_cpu_s = delta(before.agents, after.agents);
    report.harness_cpu_s = delta(before.harness, after.harness);
}

/// Checks the throughput phase's books against the coordinator's.
async fn account(
    cluster: &mut Cluster,
    outcomes: &[FrameworkOutcome],
    progress: &Progress,
    config: &RunConfig,
) -> anyhow::Result<Accounting> {
    let mut a = Accounting {
        tasks: config.tasks,
        failed_launches: progress.failed_launches(),
        ..Accounting::default()
    };
    let ids: Vec<FrameworkId> = outcomes.iter().filter_map(|o| o.framework_id).collect();
    let mut every_share_kept = true;
    for o in outcomes {
        a.launched += o.launched;
        a.running += o.running;
        a.finished += o.finished;
        a.ended_otherwise_count += o.ended_otherwise.len();
        let room = 10usize.saturating_sub(a.ended_otherwise.len());
        a.ended_otherwise
            .extend(o.ended_otherwise.iter().take(room).cloned());
        every_share_kept &= o.tasks <= COMPLETED_TASKS_KEPT;
    }
    let tasks: TaskList = cluster.get("/api/v1/tasks").await?;
    let ours = tasks.tasks.iter().filter(|t| ids.contains(&t.framework_id));
    for t in ours {
        a.coordinator_tasks += 1;
        a.coordinator_tasks_not_terminal += usize::from(!t.state.is_terminal());
    }
    a.coordinator_tasks_expected = every_share_kept.then_some(a.launched);
    a.books_released = books_released(cluster, config.stall_timeout).await?;
    Ok(a)
}

/// Polls until no agent and no framework counts resources as used; false at the deadline.
pub(crate) async fn books_released(
    cluster: &mut Cluster,
    within: Duration,
) -> anyhow::Result<bool> {
    let deadline = Instant::now() + within;
    loop {
        cluster.check_alive()?;
        let agents: AgentList = cluster.get("/api/v1/agents").await?;
        let frameworks: FrameworkList = cluster.get("/api/v1/frameworks").await?;
        if agents.agents.iter().all(|a| a.used.is_empty())
            && frameworks.frameworks.iter().all(|f| f.used.is_empty())
        {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Launches the state tasks, times `GET /api/v1/state`, and removes the frameworks.
async fn state_phase(cluster: &mut Cluster, config: &RunConfig) -> anyhow::Result<StateFigure> {
    let n = config.state_tasks;
    let frameworks = config.frameworks.min(n);
    let progress = Arc::new(Progress::default());
    let workloads = split(n, frameworks, |tasks| Workload {
        tasks,
        id_prefix: String::new(),
        resources: config.state_task_resources.clone(),
        duration_s: None,
        command: None,
        stop_when_done: false,
        max_in_flight: None,
        hold_demand: false,
        duration_spread: 0.0,
    });
    let started = Instant::now();
    let (mut drivers, stops) = start_frameworks(
        &cluster.url,
        "state",
        workloads,
        &progress,
        true,
        config.shared_task_ids,
    )?;
    let mut watch = Watch::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    while progress.running() < n as u64 {
        tokio::select! {
            joined = drivers.join_next() => {
                let Some(joined) = joined else { break };
                let (i, result) = joined.context("a framework task panicked")?;
                result.with_context(|| format!("state framework {i} failed"))?;
                bail!("state framework {i} stopped before its tasks were running");
            }
            _ = tick.tick() => {
                watch.tick(cluster, &progress, config, "state", n)?;
            }
        }
    }
    let launch_s = started.elapsed().as_secs_f64();
    let rss_mib = |cluster: &Cluster| {
        cluster
            .coordinator_pid()
            .and_then(|pid| measure::rss(pid).ok())
            .map(|b| b as f64 / (1024.0 * 1024.0))
    };
    let mut figure = StateFigure {
        running_tasks: n,
        launch_s,
        rss_running_mib: rss_mib(cluster),
        ..StateFigure::default()
    };
    for _ in 0..STATE_CALLS {
        let t = Instant::now();
        let body = cluster.get_text("/api/v1/state").await?;
        figure.calls_ms.push(t.elapsed().as_secs_f64() * 1e3);
        figure.bytes = body.len();
        let state: serde_json::Value =
            serde_json::from_str(&body).context("GET /api/v1/state: decoding")?;
        figure.snapshot_tasks = state
            .get("tasks")
            .and_then(|t| t.as_array())
            .map_or(0, Vec::len);
    }
    let mut sorted = figure.calls_ms.clone();
    sorted.sort_by(f64::total_cmp);
    figure.median_ms = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    figure.rss_after_calls_mib = rss_mib(cluster);

    for stop in &stops {
        stop.cancel();
    }
    while let Some(joined) = drivers.join_next().await {
        let (i, result) = joined.context("a framework task panicked")?;
        result.with_context(|| format!("state framework {i} failed to stop"))?;
    }
    figure.released = books_released(cluster, config.stall_timeout).await?;
    Ok(figure)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn split_shares_evenly_and_keeps_every_task() {
        let shares: Vec<usize> = split(10, 4, |tasks| Workload {
            tasks,
            id_prefix: String::new(),
            resources: Resources::new(),
            duration_s: None,
            command: None,
            stop_when_done: true,
            max_in_flight: None,
            hold_demand: false,
            duration_spread: 0.0,
        })
        .iter()
        .map(|w| w.tasks)
        .collect();
        assert_eq!(shares, vec![3, 3, 2, 2]);
    }
}
