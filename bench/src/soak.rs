//! [`soak`]: the cluster kept busy at a steady launch rate for a long time, watched window by
//! window for drift.
//!
//! Each framework keeps a fixed number of tasks of a fixed length in flight (launching one
//! when one ends), `rate × task length` in all, so launches go on at about `rate` per second
//! for as long as the cluster keeps up (a little below it: a task's launch and offer latency
//! add to its length). After a warm-up (until that many tasks ran), every window records the
//! coordinator's RSS, the offer wait p99 (its `parley_offer_wait_seconds` histogram over the
//! window), launches per second (tasks whose `running` arrived), the coordinator's CPU per
//! 1,000 launches and the offers it made per launch. At the end: the first window against the
//! last (10 % bound), the framework streams the SDK gave up on (silent for two heartbeat
//! intervals, or broken), and whether the books balance: in one `GET /api/v1/state` snapshot
//! the agents' used resources add up to the non-terminal tasks' resources, and
//! `parley_ledger_mismatches_total` did not grow.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use protocol::messages::ClusterState;
use protocol::Resources;
use serde::Serialize;

use crate::cluster::Cluster;
use crate::framework::{Progress, Workload};
use crate::measure::{self, Buckets};
use crate::run::{books_released, start_frameworks_with, Drivers};

/// The coordinator's histogram of how long freed resources waited for their offer.
const OFFER_WAIT: &str = "parley_offer_wait_seconds";

/// The coordinator's count of offers made.
const OFFERS_CREATED: &str = "parley_offers_created_total";

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// How long to measure, after the warm-up.
    pub duration: Duration,
    /// The length of one window.
    pub window: Duration,
    /// The launch rate aimed at, per second.
    pub rate: f64,
    /// How many frameworks share the work.
    pub frameworks: usize,
    /// How long each task runs, in seconds.
    pub task_duration_s: f64,
    /// Each task runs `task_duration_s` times a factor from `1 ± task_spread` (see
    /// [`Workload::duration_spread`]); 0: all alike.
    pub task_spread: f64,
    /// What each task needs.
    pub task_resources: Resources,
    /// The run fails when no task starts running for this long.
    pub stall_timeout: Duration,
}

/// One window's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Window {
    /// Seconds from the end of the warm-up to the end of the window.
    pub end_s: f64,
    /// The coordinator's resident set at the window's end, in MiB.
    pub rss_mib: Option<f64>,
    /// The offer wait p99 over the window, in ms.
    pub offer_wait_p99_ms: Option<f64>,
    /// Tasks that reached `running` in the window, per second.
    pub launches_per_s: f64,
    /// Coordinator CPU seconds per 1,000 of those launches.
    pub cpu_s_per_1000_tasks: Option<f64>,
    /// Offers made per launch in the window: most of the coordinator's work is offers, and
    /// most are declined, so CPU per task follows this.
    pub offers_per_launch: Option<f64>,
}

/// What the soak measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SoakReport {
    /// Simulated agents.
    pub agents: usize,
    /// Frameworks.
    pub frameworks: usize,
    /// The launch rate aimed at.
    pub rate: f64,
    /// Each task's length in seconds.
    pub task_duration_s: f64,
    /// The spread of task lengths (`1 ± this` times `task_duration_s`).
    pub task_spread: f64,
    /// Tasks each framework keeps in flight.
    pub in_flight_per_framework: usize,
    /// Seconds the warm-up took.
    pub warm_up_s: f64,
    /// The windows, in order.
    pub windows: Vec<Window>,
    /// One entry per stream the SDK gave up on: the framework's id.
    pub streams_lost: Vec<String>,
    /// Growth of the coordinator's `parley_streams_overflowed_total` over the run.
    pub streams_overflowed: Option<f64>,
    /// Growth of `parley_ledger_mismatches_total` over the run.
    pub ledger_mismatches: Option<f64>,
    /// The agents' used resources in the final snapshot.
    pub agents_used: String,
    /// The non-terminal tasks' resources in the same snapshot.
    pub tasks_resources: String,
    /// Non-terminal tasks in that snapshot.
    pub tasks_active: usize,
    /// Whether the books released everything once the frameworks left.
    pub released: bool,
}

impl SoakReport {
    /// Whether the books balance: the snapshot's two sums agree and no ledger mismatch.
    pub fn books_balance(&self) -> bool {
        self.agents_used == self.tasks_resources && self.ledger_mismatches.unwrap_or(0.0) == 0.0
    }

    /// The first window against the last: (figure, first, last, change in %, within 10 %).
    pub fn drift(&self) -> Vec<(&'static str, f64, f64, f64, bool)> {
        let (Some(first), Some(last)) = (self.windows.first(), self.windows.last()) else {
            return Vec::new();
        };
        // For each figure, whether higher is worse.
        let figures: [(&str, Option<f64>, Option<f64>, bool); 4] = [
            ("coordinator RSS (MiB)", first.rss_mib, last.rss_mib, true),
            (
                "offer wait p99 (ms)",
                first.offer_wait_p99_ms,
                last.offer_wait_p99_ms,
                true,
            ),
            (
                "launches/s",
                Some(first.launches_per_s),
                Some(last.launches_per_s),
                false,
            ),
            (
                "coordinator CPU s per 1,000 tasks",
                first.cpu_s_per_1000_tasks,
                last.cpu_s_per_1000_tasks,
                true,
            ),
        ];
        figures
            .into_iter()
            .filter_map(|(name, a, b, higher_is_worse)| {
                let (a, b) = (a?, b?);
                let change = if a == 0.0 { 0.0 } else { (b - a) / a * 100.0 };
                let within = if higher_is_worse {
                    b <= a * 1.1
                } else {
                    b >= a * 0.9
                };
                Some((name, a, b, change, within))
            })
            .collect()
    }

    /// The report as markdown.
    pub fn markdown(&self) -> String {
        let opt = |v: Option<f64>, digits: usize| {
            v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
        };
        let mut out = format!(
            "## parley-bench soak: {} agents, {} frameworks, {:.0} launches/s aimed at, \
             tasks of {} s ± {:.0} % ({} in flight per framework)\n\n\
             | window end | coordinator RSS (MiB) | offer wait p99 (ms) | launches/s | \
             coordinator CPU s per 1,000 tasks | offers per launch |\n|---|---|---|---|---|---|\n",
            self.agents,
            self.frameworks,
            self.rate,
            self.task_duration_s,
            self.task_spread * 100.0,
            self.in_flight_per_framework
        );
        for w in &self.windows {
            out.push_str(&format!(
                "| {:.0} s | {} | {} | {:.0} | {} | {} |\n",
                w.end_s,
                opt(w.rss_mib, 1),
                opt(w.offer_wait_p99_ms, 1),
                w.launches_per_s,
                opt(w.cpu_s_per_1000_tasks, 3),
                opt(w.offers_per_launch, 2)
            ));
        }
        out.push_str("\n| first window → last | first | last | change | within 10 % |\n|---|---|---|---|---|\n");
        for (name, a, b, change, within) in self.drift() {
            out.push_str(&format!(
                "| {name} | {a:.3} | {b:.3} | {change:+.1} % | {} |\n",
                if within { "yes" } else { "no" }
            ));
        }
        let mut lost: Vec<&String> = self.streams_lost.iter().collect();
        lost.sort();
        lost.dedup();
        out.push_str(&format!(
            "\nWarm-up {:.1} s. Streams the SDK gave up on (silent two heartbeats or broken): {} \
             ({}); streams the coordinator closed for overflow: {}.\n\
             Books: agents' used {} / non-terminal tasks' {} ({} tasks), ledger mismatches {}: {}; \
             everything released after the frameworks left: {}.\n",
            self.warm_up_s,
            self.streams_lost.len(),
            if lost.is_empty() {
                "none".to_owned()
            } else {
                lost.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            opt(self.streams_overflowed, 0),
            self.agents_used,
            self.tasks_resources,
            self.tasks_active,
            opt(self.ledger_mismatches, 0),
            if self.books_balance() {
                "balanced"
            } else {
                "NOT balanced"
            },
            self.released
        ));
        out
    }
}

/// Runs the soak against a started cluster.
pub async fn soak(config: &SoakConfig, cluster: &mut Cluster) -> anyhow::Result<SoakReport> {
    if config.frameworks == 0
        || !config.rate.is_finite()
        || config.rate <= 0.0
        || config.window.is_zero()
    {
        bail!("the soak needs a framework, a rate above 0 and a window above 0");
    }
    let in_flight = (config.rate * config.task_duration_s).ceil() as usize;
    let per_framework = in_flight.div_ceil(config.frameworks).max(1);
    let mut report = SoakReport {
        agents: cluster
            .get::<protocol::messages::AgentList>("/api/v1/agents")
            .await?
            .agents
            .len(),
        frameworks: config.frameworks,
        rate: config.rate,
        task_duration_s: config.task_duration_s,
        task_spread: config.task_spread,
        in_flight_per_framework: per_framework,
        ..SoakReport::default()
    };
    let metrics_start = cluster.get_text("/metrics").await?;
    let progress = Arc::new(Progress::default());
    let workloads = (0..config.frameworks)
        .map(|_| Workload {
            tasks: u32::MAX as usize,
            id_prefix: String::new(),
            resources: config.task_resources.clone(),
            duration_s: Some(config.task_duration_s),
            stop_when_done: false,
            max_in_flight: Some(per_framework),
            hold_demand: false,
            duration_spread: config.task_spread,
            command: None,
        })
        .collect();
    let (mut drivers, stops) =
        start_frameworks_with(&cluster.url, "soak", workloads, &progress, false, |c| {
            c.missed_heartbeats = 2;
            c.unregister_on_stop = true;
        })?;
    let warm = Instant::now();
    let want = (per_framework * config.frameworks) as u64;
    watch(cluster, &mut drivers, &progress, config, None, || {
        progress.running() >= want
    })
    .await?;
    report.warm_up_s = warm.elapsed().as_secs_f64();
    eprintln!(
        "[parley-bench] soak: warm after {:.1} s; measuring for {:?} in windows of {:?}",
        report.warm_up_s, config.duration, config.window
    );

    let started = Instant::now();
    let mut before = Sample::take(cluster, &progress).await?;
    while started.elapsed() < config.duration {
        let end = (started + config.window * (report.windows.len() as u32 + 1))
            .min(started + config.duration);
        watch(cluster, &mut drivers, &progress, config, Some(end), || {
            false
        })
        .await?;
        let after = Sample::take(cluster, &progress).await?;
        let window = before.window(&after, started.elapsed().as_secs_f64());
        eprintln!(
            "[parley-bench] soak window to {:.0} s: RSS {:?} MiB, offer wait p99 {:?} ms, \
             {:.0} launches/s, CPU {:?} s per 1,000 tasks, {:?} offers per launch",
            window.end_s,
            window.rss_mib,
            window.offer_wait_p99_ms,
            window.launches_per_s,
            window.cpu_s_per_1000_tasks,
            window.offers_per_launch
        );
        report.windows.push(window);
        before = after;
    }

    balance(cluster, &metrics_start, &mut report).await?;
    report.streams_lost = progress.disconnects();
    for stop in &stops {
        stop.cancel();
    }
    while let Some(joined) = drivers.join_next().await {
        let (i, result) = joined.context("a framework task panicked")?;
        result.with_context(|| format!("soak framework {i} failed to stop"))?;
    }
    report.released = books_released(cluster, config.stall_timeout).await?;
    Ok(report)
}

/// Checks the cluster every 500 ms until `done` holds or `until` passes; fails when a
/// framework stops, a process dies or no task starts running for the stall timeout.
async fn watch(
    cluster: &mut Cluster,
    drivers: &mut Drivers,
    progress: &Progress,
    config: &SoakConfig,
    until: Option<Instant>,
    done: impl Fn() -> bool,
) -> anyhow::Result<()> {
    let (mut last, mut last_change) = (progress.running(), Instant::now());
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        if done() || until.is_some_and(|t| Instant::now() >= t) {
            return Ok(());
        }
        tokio::select! {
            joined = drivers.join_next() => {
                let Some(joined) = joined else { bail!("every soak framework stopped") };
                let (i, result) = joined.context("a framework task panicked")?;
                result.with_context(|| format!("soak framework {i} failed"))?;
                bail!("soak framework {i} stopped by itself");
            }
            _ = tick.tick() => {
                cluster.check_alive()?;
                let running = progress.running();
                if running != last {
                    (last, last_change) = (running, Instant::now());
                }
                if last_change.elapsed() >= config.stall_timeout {
                    bail!("soak stalled: no task started running for {:?}", config.stall_timeout);
                }
            }
        }
    }
}

/// What a window's figures are differences of.
struct Sample {
    at: Instant,
    launches: u64,
    cpu: Option<Duration>,
    rss: Option<u64>,
    offer_wait: Option<Buckets>,
    offers: Option<f64>,
}

impl Sample {
    async fn take(cluster: &Cluster, progress: &Progress) -> anyhow::Result<Self> {
        let metrics = cluster.get_text("/metrics").await?;
        let pid = cluster.coordinator_pid();
        Ok(Self {
            at: Instant::now(),
            launches: progress.running(),
            cpu: pid.and_then(|p| measure::cpu_time(p).ok()),
            rss: pid.and_then(|p| measure::rss(p).ok()),
            offer_wait: measure::histogram(&metrics, OFFER_WAIT),
            offers: measure::sample(&metrics, OFFERS_CREATED),
        })
    }

    fn window(&self, after: &Sample, end_s: f64) -> Window {
        let launches = after.launches.saturating_sub(self.launches);
        let secs = after.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let cpu = match (self.cpu, after.cpu) {
            (Some(a), Some(b)) if launches > 0 => {
                Some(b.saturating_sub(a).as_secs_f64() * 1000.0 / launches as f64)
            }
            _ => None,
        };
        let offer_wait = after.offer_wait.as_ref().and_then(|b| {
            let delta = measure::histogram_delta(self.offer_wait.as_ref(), b);
            measure::histogram_quantile(&delta, 0.99).map(|s| s * 1e3)
        });
        let offers_per_launch = match (self.offers, after.offers) {
            (Some(a), Some(b)) if launches > 0 => Some((b - a).max(0.0) / launches as f64),
            _ => None,
        };
        Window {
            end_s,
            rss_mib: after.rss.map(|b| b as f64 / (1024.0 * 1024.0)),
            offer_wait_p99_ms: offer_wait,
            launches_per_s: launches as f64 / secs,
            cpu_s_per_1000_tasks: cpu,
            offers_per_launch,
        }
    }
}

/// One `/api/v1/state` snapshot's sums, and the ledger and overflow counters' growth.
async fn balance(
    cluster: &Cluster,
    metrics_start: &str,
    report: &mut SoakReport,
) -> anyhow::Result<()> {
    let state: ClusterState = cluster.get("/api/v1/state").await?;
    let mut used = Resources::new();
    for a in &state.agents {
        used.add_assign(&a.used);
    }
    let mut tasks = Resources::new();
    for t in state.tasks.iter().filter(|t| !t.state.is_terminal()) {
        tasks.add_assign(&t.resources);
        report.tasks_active += 1;
    }
    report.agents_used = used.to_string();
    report.tasks_resources = tasks.to_string();
    let metrics_end = cluster.get_text("/metrics").await?;
    let grew = |name: &str| {
        let end = measure::sample(&metrics_end, name)?;
        Some(end - measure::sample(metrics_start, name).unwrap_or(0.0))
    };
    report.ledger_mismatches = grew("parley_ledger_mismatches_total");
    report.streams_overflowed = grew("parley_streams_overflowed_total");
    Ok(())
}

/// Why a soak length does not parse; the message quotes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a whole number followed by `s`, `m` or `h`.
    #[error("{raw:?}: expected a whole number and s, m or h, like 60m")]
    Form {
        /// The text given (trimmed).
        raw: String,
    },
    /// Zero.
    #[error("{raw:?}: must be above 0")]
    Zero {
        /// The text given (trimmed).
        raw: String,
    },
}

/// Parses a soak length: a whole number with `s`, `m` or `h` (`90s`, `60m`, `2h`).
pub fn parse_duration(raw: &str) -> Result<Duration, DurationError> {
    let raw = raw.trim();
    let bad = || DurationError::Form {
        raw: raw.to_string(),
    };
    let Some((last, _)) = raw.char_indices().last() else {
        return Err(bad());
    };
    let (digits, unit) = raw.split_at(last);
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(bad)?;
    if secs == 0 {
        return Err(DurationError::Zero {
            raw: raw.to_string(),
        });
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn soak_lengths_parse_and_bad_ones_say_why() {
        assert_eq!(parse_duration("60m"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "m", "60", "1.5h", "-1m", "0m", "10d", "5µ"] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{:?}", bad.trim())), "{e}");
        }
    }

    fn window(rss: f64, p99: f64, rate: f64, cpu: f64) -> Window {
        Window {
            end_s: 60.0,
            rss_mib: Some(rss),
            offer_wait_p99_ms: Some(p99),
            launches_per_s: rate,
            cpu_s_per_1000_tasks: Some(cpu),
            offers_per_launch: Some(5.0),
        }
    }

    #[test]
    fn drift_holds_each_figure_to_ten_percent_in_its_bad_direction() {
        let report = SoakReport {
            windows: vec![
                window(100.0, 10.0, 2000.0, 0.2),
                window(105.0, 9.0, 1700.0, 0.23),
            ],
            ..SoakReport::default()
        };
        let within: Vec<(&str, bool)> = report
            .drift()
            .into_iter()
            .map(|(name, _, _, _, ok)| (name, ok))
            .collect();
        assert_eq!(
            within,
            vec![
                ("coordinator RSS (MiB)", true),
                ("offer wait p99 (ms)", true),
                ("launches/s", false),
                ("coordinator CPU s per 1,000 tasks", false),
            ]
        );
        assert!(SoakReport::default().drift().is_empty());
    }

    #[test]
    fn books_balance_needs_equal_sums_and_no_ledger_mismatch() {
        let mut r = SoakReport {
            agents_used: "cpus=2".into(),
            tasks_resources: "cpus=2".into(),
            ledger_mismatches: Some(0.0),
            ..SoakReport::default()
        };
        assert!(r.books_balance());
        r.ledger_mismatches = Some(1.0);
        assert!(!r.books_balance());
        r.ledger_mismatches = None;
        r.tasks_resources = "cpus=1".into();
        assert!(!r.books_balance());
    }
}
