//! [`Metrics`]: counters of one coordinator instance, and the `prometheus-client` registry that
//! serves them on `/metrics` together with gauges read from the books at each scrape and this
//! process' figures.
//!
//! The counters are plain atomics owned by the instance, and each coordinator has its own
//! [`Registry`] rather than a global one: tests run several coordinators in one process, and
//! each must report its own. Every family is written through [`observe::Scrape`], which takes
//! its type and help from [`METRICS`] (or `observe::process::METRICS`), the table the book's
//! reference is generated from: no metric can be served undocumented.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use observe::process::{BuildInfo, ProcessCollector};
use observe::prometheus_client::collector::Collector;
use observe::prometheus_client::encoding::DescriptorEncoder;
use observe::prometheus_client::registry::Registry;
use observe::Scrape;
use protocol::events::OfferEvent;

use crate::auth::Denial;
use crate::request_counts::RouteCounters;
use crate::state::{Gauges, ResourceUse};

pub use observe::{Kind, Metric};

/// Every metric of the coordinator's own, in the reference's order (the process' figures
/// and `parley_build_info`, shared with the agent, are `observe::process::METRICS`). Each
/// family is written with the type and help found here; a test checks that every one here is
/// written.
pub const METRICS: [Metric; 48] = [
    Metric {
        name: "parley_offers_created_total",
        kind: Kind::Counter,
        label: None,
        help: "Offers made.",
        mesos: "none (Mesos counts calls, not offers)",
    },
    Metric {
        name: "parley_offers_accepted_total",
        kind: Kind::Counter,
        label: None,
        help: "Offers accepted.",
        mesos: "closest: `master/messages_launch_tasks` (accept calls)",
    },
    Metric {
        name: "parley_offers_declined_total",
        kind: Kind::Counter,
        label: None,
        help: "Offers declined.",
        mesos: "closest: `master/messages_decline_offers` (decline calls)",
    },
    Metric {
        name: "parley_offers_rescinded_total",
        kind: Kind::Counter,
        label: None,
        help: "Offers rescinded.",
        mesos: "none",
    },
    Metric {
        name: "parley_offers_expired_total",
        kind: Kind::Counter,
        label: None,
        help: "Offers expired unanswered.",
        mesos: "none (`--offer_timeout` rescinds silently)",
    },
    Metric {
        name: "parley_outstanding_offers",
        kind: Kind::Gauge,
        label: None,
        help: "Offers not yet answered.",
        mesos: "`master/outstanding_offers`",
    },
    Metric {
        name: "parley_resources_total",
        kind: Kind::Counter,
        label: Some("resource"),
        help: "Resources of the active agents.",
        mesos: "`master/cpus_total`, `master/mem_total`, `master/disk_total`, `master/gpus_total`",
    },
    Metric {
        name: "parley_resources_used",
        kind: Kind::Gauge,
        label: Some("resource"),
        help: "Resources held by non-terminal tasks.",
        mesos: "`master/cpus_used`, `master/mem_used`, ...",
    },
    Metric {
        name: "parley_resources_offered",
        kind: Kind::Gauge,
        label: Some("resource"),
        help: "Resources held by outstanding offers.",
        mesos: "part of `allocator/mesos/resources/cpus/offered_or_allocated`",
    },
    Metric {
        name: "parley_resources_used_percent",
        kind: Kind::Gauge,
        label: Some("resource"),
        help: "Resources held by non-terminal tasks, in percent of the active agents' total.",
        mesos: "`master/cpus_percent`, `master/mem_percent`, ... (Mesos: a fraction)",
    },
    Metric {
        name: "parley_tasks",
        kind: Kind::Gauge,
        label: Some("state"),
        help: "Tasks by state.",
        mesos: "`master/tasks_staging`, `master/tasks_running`, `master/tasks_finished`, `master/tasks_failed`, `master/tasks_killed`, `master/tasks_lost`, `master/tasks_error` (Mesos: terminal ones are counters)",
    },
    Metric {
        name: "parley_tasks_unhealthy",
        kind: Kind::Gauge,
        label: None,
        help: "Tasks not ended whose health check reports them unhealthy.",
        mesos: "none (Mesos: `TaskStatus.healthy` per task)",
    },
    Metric {
        name: "parley_agents",
        kind: Kind::Gauge,
        label: Some("state"),
        help: "Agents by state.",
        mesos: "`master/slaves_active`, `master/slaves_unreachable`",
    },
    Metric {
        name: "parley_frameworks",
        kind: Kind::Gauge,
        label: Some("state"),
        help: "Frameworks by state.",
        mesos: "`master/frameworks_connected`, `master/frameworks_disconnected`",
    },
    Metric {
        name: "parley_frameworks_stalled",
        kind: Kind::Gauge,
        label: None,
        help: "Frameworks stalled now: connected, not suppressed, wanting tasks, holding no offer and sent none for `stall_after` while an agent has room they could be offered (checked about once a second; `explain` names the reason).",
        mesos: "none",
    },
    Metric {
        name: "parley_role_dominant_share",
        kind: Kind::Gauge,
        label: Some("role"),
        help: "Dominant share of each role's allocation.",
        mesos: "`allocator/mesos/roles/<role>/shares/dominant`",
    },
    Metric {
        name: "parley_allocation_run_seconds",
        kind: Kind::Histogram,
        label: None,
        help: "Duration of allocation runs.",
        mesos: "`allocator/mesos/allocation_run_ms` (and `allocator/mesos/allocation_runs` as its count)",
    },
    Metric {
        name: "parley_allocation_run_fine_seconds",
        kind: Kind::Histogram,
        label: None,
        help: "Duration of allocation runs, in buckets 2^(1/4) apart (for percentiles).",
        mesos: "`allocator/mesos/allocation_run_ms/p50`, `/p99`, ...",
    },
    Metric {
        name: "parley_offer_wait_seconds",
        kind: Kind::Histogram,
        label: None,
        help: "From resources returning to the pool (a task ended, an offer declined or expired, an accept's unused rest) to the offer the next allocation run made of them.",
        mesos: "closest: `allocator/mesos/allocation_run_latency_ms`",
    },
    Metric {
        name: "parley_registry_write_errors_total",
        kind: Kind::Counter,
        label: None,
        help: "Changes the durable registry failed to write.",
        mesos: "none (closest: `registrar/state_store_ms`, its timing)",
    },
    Metric {
        name: "parley_streams_overflowed_total",
        kind: Kind::Counter,
        label: None,
        help: "Framework streams closed because their reader stopped: it took nothing from a full queue for two heartbeats.",
        mesos: "none",
    },
    Metric {
        name: "parley_launch_window_wait_seconds_total",
        kind: Kind::Counter,
        label: None,
        help: "Time allocation runs waited for room in the launch window (`launch_window`): tasks launched and not yet reported, with outstanding offers, filled it.",
        mesos: "none",
    },
    Metric {
        name: "parley_http_requests_total",
        kind: Kind::Counter,
        label: Some("route"),
        help: "Requests answered, by route: its method and path pattern (`POST /api/v1/agents/{id}/status`), or `other` for requests no route matched.",
        mesos: "none (Mesos counts some endpoints' calls, such as `master/messages_*`)",
    },
    Metric {
        name: "parley_http_request_seconds_total",
        kind: Kind::Counter,
        label: Some("route"),
        help: "Seconds spent answering each route's requests, from the request reaching the route to its response's head (an event stream counts its setup); divided by `parley_http_requests_total`, the mean.",
        mesos: "none",
    },
    Metric {
        name: "parley_http_requests_too_large_total",
        kind: Kind::Counter,
        label: Some("route"),
        help: "Requests refused for their size (`413 body_too_large`: over `max_body_bytes`), by route. Clients of the SDK split their batches to fit the limits the coordinator tells them at registration, so any here come from other clients, or from a limit lowered since they registered.",
        mesos: "none",
    },
    Metric {
        name: "parley_books_lock_waits_total",
        kind: Kind::Counter,
        label: None,
        help: "Times a request or the allocation loop found the books' lock held and waited for it.",
        mesos: "none (Mesos' master is one actor: `master/event_queue_messages` is the closest)",
    },
    Metric {
        name: "parley_books_lock_wait_seconds_total",
        kind: Kind::Counter,
        label: None,
        help: "Seconds spent waiting for the books' lock; against `parley_books_lock_waits_total`, the mean wait, and against wall time, how contended the coordinator's one lock is.",
        mesos: "none",
    },
    Metric {
        name: "parley_rate_limited_total",
        kind: Kind::Counter,
        label: None,
        help: "Requests refused (429) by the per-client rate limit.",
        mesos: "none (Mesos' `--rate_limits` queue rather than refuse)",
    },
    Metric {
        name: "parley_auth_denied_total",
        kind: Kind::Counter,
        label: Some("reason"),
        help: "Requests refused: 401 (missing, invalid) and 403 (kind, not_owner, role, quota).",
        mesos: "none (Mesos logs them)",
    },
    Metric {
        name: "parley_loop_panics_total",
        kind: Kind::Counter,
        label: Some("loop"),
        help: "Panics of a background loop (it was restarted).",
        mesos: "none",
    },
    Metric {
        name: "parley_ledger_mismatches_total",
        kind: Kind::Counter,
        label: None,
        help: "Disagreements found in the books (offered/used vs the allocator): always a bug.",
        mesos: "none",
    },
    Metric {
        name: "parley_drain_kills_total",
        kind: Kind::Counter,
        label: None,
        help: "Tasks killed because their agent's drain deadline passed (reason agent_drained).",
        mesos: "none",
    },
    Metric {
        name: "parley_tasks_fenced_total",
        kind: Kind::Counter,
        label: None,
        help: "Kills ordered of tasks reported lost or gone that their returning agent still ran (reason agent_partitioned).",
        mesos: "none",
    },
    Metric {
        name: "parley_preemptions_total",
        kind: Kind::Counter,
        label: None,
        help: "Preemption plans made toward fair share (each names tasks of roles above theirs).",
        mesos: "none (Mesos has no fair-share preemption)",
    },
    Metric {
        name: "parley_tasks_preempted_total",
        kind: Kind::Counter,
        label: None,
        help: "Tasks killed by preemption at their deadline (reason preempted).",
        mesos: "none",
    },
    Metric {
        name: "parley_starved_roles",
        kind: Kind::Gauge,
        label: None,
        help: "Roles with demand below their fair share or guarantee (preemption on).",
        mesos: "none",
    },
    Metric {
        name: "parley_tasks_memory_limit_total",
        kind: Kind::Counter,
        label: None,
        help: "Tasks the kernel killed at their memory limit (reason memory_limit).",
        mesos: "none (Mesos: a status reason only)",
    },
    Metric {
        name: "parley_tasks_measured_total",
        kind: Kind::Counter,
        label: None,
        help: "Ended isolated tasks whose usage their agent measured.",
        mesos: "none",
    },
    Metric {
        name: "parley_task_cpu_seconds_total",
        kind: Kind::Counter,
        label: None,
        help: "CPU time used by measured tasks, counted when each ended.",
        mesos: "closest: the agent's `/monitor/statistics` `cpus_user_time_secs`, `cpus_throttled_time_secs`, per container",
    },
    Metric {
        name: "parley_task_throttled_seconds_total",
        kind: Kind::Counter,
        label: None,
        help: "Time measured tasks were held back by their CPU quota, counted when each ended.",
        mesos: "closest: the agent's `/monitor/statistics` `cpus_user_time_secs`, `cpus_throttled_time_secs`, per container",
    },
    Metric {
        name: "parley_task_peak_memory_bytes_total",
        kind: Kind::Counter,
        label: None,
        help: "Sum over measured tasks of each one's peak memory (divide by parley_tasks_measured_total).",
        mesos: "closest: `/monitor/statistics` `mem_rss_bytes`",
    },
    Metric {
        name: "parley_agent_gpus",
        kind: Kind::Gauge,
        label: Some("agent"),
        help: "GPUs of each active agent that has any.",
        mesos: "closest: `master/gpus_total`, `master/gpus_used` (cluster-wide only)",
    },
    Metric {
        name: "parley_agent_gpus_used",
        kind: Kind::Gauge,
        label: Some("agent"),
        help: "GPUs of each active agent held by non-terminal tasks.",
        mesos: "closest: `master/gpus_total`, `master/gpus_used` (cluster-wide only)",
    },
    Metric {
        name: "parley_tasks_gpu_measured_total",
        kind: Kind::Counter,
        label: None,
        help: "Ended GPU tasks whose GPU usage their agent read from NVML.",
        mesos: "none",
    },
    Metric {
        name: "parley_task_gpu_memory_bytes_total",
        kind: Kind::Counter,
        label: None,
        help: "Sum over GPU-measured tasks of each one's peak GPU memory (divide by parley_tasks_gpu_measured_total).",
        mesos: "none",
    },
    Metric {
        name: "parley_task_gpu_utilization_percent_total",
        kind: Kind::Counter,
        label: None,
        help: "Sum over GPU-measured tasks of each one's mean GPU utilisation (divide by parley_tasks_gpu_measured_total).",
        mesos: "none",
    },
    Metric {
        name: "parley_leader",
        kind: Kind::Gauge,
        label: None,
        help: "1 while this coordinator serves the API (the leader with high availability, always without); 0 while it follows.",
        mesos: "`master/elected`",
    },
    Metric {
        name: "parley_tasks_terminal_total",
        kind: Kind::Counter,
        label: Some("state"),
        help: "Tasks that reached each terminal state since this coordinator started (it starts again at 0 on restart or on taking over as leader).",
        mesos: "`master/tasks_finished`, `master/tasks_failed`, `master/tasks_killed`, `master/tasks_lost`, `master/tasks_error`, `master/tasks_gone`",
    },
];

/// The metrics reference as a Markdown table: metric (with its labels), type, meaning and the
/// closest Mesos metric; the coordinator's own, then the process' figures.
pub fn reference_table() -> String {
    observe::table::reference_table(METRICS.iter().chain(&observe::process::METRICS))
}

/// A duration in whole microseconds, for the counters kept in them (saturating).
fn micros_of(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Upper bounds (seconds) of the allocation-run histogram's buckets.
const RUN_BUCKETS: [f64; 10] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0,
];

/// The fine allocation-run histogram's buckets: the first ends at [`FINE_FIRST_BOUND`] seconds,
/// each next one is 2^(1/4) (about 19 %) wider, up to about 134 s; a quantile read from it is
/// within one bucket, so within about 19 %, of the true value.
const FINE_BUCKETS: usize = 109;

/// Upper bound (seconds) of the fine histogram's first bucket: one microsecond.
const FINE_FIRST_BOUND: f64 = 1e-6;

/// Upper bound (seconds) of fine bucket `i`.
fn fine_bound(i: usize) -> f64 {
    FINE_FIRST_BOUND * 2f64.powf(i as f64 / 4.0)
}

/// Counts per bucket (not cumulative) of the fine allocation-run histogram, read by
/// benchmarks (`parley-bench`) for percentiles; the coarse one stays for dashboards.
#[derive(Debug)]
struct FineHistogram {
    /// `counts[i]` counts runs in `(fine_bound(i - 1), fine_bound(i)]`; the last one also
    /// counts everything longer.
    counts: Vec<AtomicU64>,
}

impl Default for FineHistogram {
    fn default() -> Self {
        Self {
            counts: (0..FINE_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl FineHistogram {
    fn observe(&self, secs: f64) {
        // Bucket i holds (bound(i-1), bound(i)]: i = ceil(4 * log2(secs / first)).
        let index = if secs <= FINE_FIRST_BOUND {
            0
        } else {
            let exact = 4.0 * (secs / FINE_FIRST_BOUND).log2();
            let mut i = exact.ceil() as usize;
            // Guard against rounding at a bound: move to the bucket that really holds secs.
            while i > 0 && secs <= fine_bound(i - 1) {
                i -= 1;
            }
            while i + 1 < FINE_BUCKETS && secs > fine_bound(i) {
                i += 1;
            }
            i.min(FINE_BUCKETS - 1)
        };
        if let Some(count) = self.counts.get(index) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counters of one coordinator.
#[derive(Debug, Default)]
pub struct Metrics {
    offers_created: AtomicU64,
    offers_accepted: AtomicU64,
    offers_declined: AtomicU64,
    offers_rescinded: AtomicU64,
    offers_expired: AtomicU64,
    allocation_runs: AtomicU64,
    allocation_micros: AtomicU64,
    allocation_buckets: [AtomicU64; RUN_BUCKETS.len()],
    allocation_fine: FineHistogram,
    offer_wait: FineHistogram,
    offer_wait_micros: AtomicU64,
    registry_write_errors: AtomicU64,
    auth_denied: [AtomicU64; Denial::ALL.len()],
    /// Panics of the background loops, by loop ([`LOOPS`] order).
    loop_panics: [AtomicU64; LOOPS.len()],
    streams_overflowed: AtomicU64,
    window_wait_micros: AtomicU64,
    rate_limited: AtomicU64,
    /// Isolated tasks' ends with usage, and their sums (micro-units).
    tasks_measured: AtomicU64,
    tasks_memory_limit: AtomicU64,
    task_cpu_micros: AtomicU64,
    task_throttled_micros: AtomicU64,
    task_peak_memory_bytes: AtomicU64,
    /// GPU tasks' ends with GPU usage, and their sums (utilisation in
    /// micro-percent).
    tasks_gpu_measured: AtomicU64,
    task_gpu_memory_bytes: AtomicU64,
    task_gpu_utilization_micros: AtomicU64,
    /// Waits for the books' lock, and their time.
    lock_waits: AtomicU64,
    lock_wait_micros: AtomicU64,
    /// Requests by route, once the router is built ([`Metrics::set_routes`]).
    routes: std::sync::OnceLock<RouteCounters>,
}

/// The supervised background loops, as named in `parley_loop_panics_total{loop=...}`.
pub const LOOPS: [&str; 3] = ["allocation", "maintenance", "history"];

impl Metrics {
    /// Counts an offer's creation or end.
    pub fn count_offer_event(&self, event: &OfferEvent) {
        let counter = match event {
            OfferEvent::OfferCreated(_) => &self.offers_created,
            OfferEvent::OfferAccepted(_) => &self.offers_accepted,
            OfferEvent::OfferDeclined(_) => &self.offers_declined,
            OfferEvent::OfferRescinded(_) => &self.offers_rescinded,
            OfferEvent::OfferExpired(_) => &self.offers_expired,
            // Not an offer's end (drains are counted by `parley_agents{state}` and
            // `parley_drain_kills_total`).
            OfferEvent::AgentDraining(_) => return,
            // Counted by `parley_preemptions_total` from the books.
            OfferEvent::Preemption(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The offer counters so far (for the history ring).
    pub fn offer_counts(&self) -> crate::history::OfferCounts {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        crate::history::OfferCounts {
            created: load(&self.offers_created),
            accepted: load(&self.offers_accepted),
            declined: load(&self.offers_declined),
            rescinded: load(&self.offers_rescinded),
            expired: load(&self.offers_expired),
        }
    }

    /// Counts a failed write to the durable registry.
    pub fn count_registry_write_error(&self) {
        self.registry_write_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request refused by authentication or authorization.
    pub fn count_auth_denied(&self, denial: Denial) {
        if let Some(c) = self.auth_denied.get(denial.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a panic of the background loop `name` (one of [`LOOPS`]).
    pub fn count_loop_panic(&self, name: &str) {
        if let Some(i) = LOOPS.iter().position(|l| *l == name) {
            self.loop_panics[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Panics of the background loop `name` so far.
    pub fn loop_panics(&self, name: &str) -> u64 {
        LOOPS
            .iter()
            .position(|l| *l == name)
            .map_or(0, |i| self.loop_panics[i].load(Ordering::Relaxed))
    }

    /// Counts time an allocation run waited for room in the launch window.
    pub fn count_window_wait(&self, waited: Duration) {
        let micros = micros_of(waited);
        self.window_wait_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Counts a framework stream closed because its queue overflowed.
    pub fn count_stream_overflow(&self) {
        self.streams_overflowed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts the end of a task as its agent measured it: its `usage` (isolated tasks) and a
    /// `memory_limit` reason. Call once per task, for its first terminal status.
    pub fn count_task_end(&self, status: &protocol::TaskStatus) {
        if status.reason.as_deref() == Some(protocol::task::REASON_MEMORY_LIMIT) {
            self.tasks_memory_limit.fetch_add(1, Ordering::Relaxed);
        }
        let Some(u) = &status.usage else {
            return;
        };
        let micros = |s: Option<f64>| (s.unwrap_or(0.0).max(0.0) * 1e6) as u64;
        let gpu = u.gpu_memory_bytes.is_some() || u.gpu_utilization_percent.is_some();
        if gpu {
            self.tasks_gpu_measured.fetch_add(1, Ordering::Relaxed);
            self.task_gpu_memory_bytes
                .fetch_add(u.gpu_memory_bytes.unwrap_or(0), Ordering::Relaxed);
            self.task_gpu_utilization_micros
                .fetch_add(micros(u.gpu_utilization_percent), Ordering::Relaxed);
        }
        let cgroup = u.peak_memory_bytes.is_some()
            || u.cpu_seconds.is_some()
            || u.throttled_seconds.is_some();
        if gpu && !cgroup {
            // GPU usage only (a task that was not isolated): not a cgroup measurement.
            return;
        }
        self.tasks_measured.fetch_add(1, Ordering::Relaxed);
        self.task_cpu_micros
            .fetch_add(micros(u.cpu_seconds), Ordering::Relaxed);
        self.task_throttled_micros
            .fetch_add(micros(u.throttled_seconds), Ordering::Relaxed);
        self.task_peak_memory_bytes
            .fetch_add(u.peak_memory_bytes.unwrap_or(0), Ordering::Relaxed);
    }

    /// Counts one wait for the books' lock that took `waited`.
    pub fn count_lock_wait(&self, waited: Duration) {
        self.lock_waits.fetch_add(1, Ordering::Relaxed);
        let micros = micros_of(waited);
        self.lock_wait_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Counts a request refused by the rate limit.
    pub fn count_rate_limited(&self) {
        self.rate_limited.fetch_add(1, Ordering::Relaxed);
    }

    /// Records how long one allocation run took.
    pub fn observe_allocation(&self, took: Duration) {
        self.allocation_runs.fetch_add(1, Ordering::Relaxed);
        let micros = micros_of(took);
        self.allocation_micros.fetch_add(micros, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        for (bound, bucket) in RUN_BUCKETS.iter().zip(&self.allocation_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.allocation_fine.observe(secs);
    }

    /// Records how long freed resources waited for the offer that an allocation run made of
    /// them (see `State::take_offer_waits`).
    pub fn observe_offer_wait(&self, waited: Duration) {
        let micros = micros_of(waited);
        self.offer_wait_micros.fetch_add(micros, Ordering::Relaxed);
        self.offer_wait.observe(waited.as_secs_f64());
    }

    /// Counts requests by route from now on, for the routes of `table` (the first call sets
    /// them; a router built again for the same coordinator has the same table).
    pub fn set_routes(&self, table: RouteCounters) {
        let _ = self.routes.set(table);
    }

    /// The requests' counters by route, once the router is built.
    pub fn routes(&self) -> Option<&RouteCounters> {
        self.routes.get()
    }

    /// A registry of these counters, the gauges `source` reads at each scrape, and this
    /// process' figures: what `/metrics` serves.
    pub fn registry(self: &Arc<Self>, source: Source) -> Registry {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Collected {
            metrics: Arc::clone(self),
            source,
        }));
        registry.register_collector(Box::new(ProcessCollector::new(BuildInfo::new(env!(
            "CARGO_PKG_VERSION"
        )))));
        registry
    }

    /// Prometheus text of the counters and the given gauges, as a leader's `/metrics` (tests).
    pub fn render(self: &Arc<Self>, g: &Gauges) -> String {
        let gauges = g.clone();
        let source: Source = Box::new(move || {
            Some(Scraped {
                gauges: gauges.clone(),
                leader: true,
            })
        });
        observe::encode(&self.registry(source))
    }

    /// Writes every family of [`METRICS`]: the counters, and the gauges of `scraped`.
    fn write(&self, s: &mut Scrape<'_>, scraped: &Scraped) -> fmt::Result {
        let g = &scraped.gauges;
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counters = [
            ("parley_offers_created_total", load(&self.offers_created)),
            ("parley_offers_accepted_total", load(&self.offers_accepted)),
            ("parley_offers_declined_total", load(&self.offers_declined)),
            (
                "parley_offers_rescinded_total",
                load(&self.offers_rescinded),
            ),
            ("parley_offers_expired_total", load(&self.offers_expired)),
            (
                "parley_registry_write_errors_total",
                load(&self.registry_write_errors),
            ),
            (
                "parley_streams_overflowed_total",
                load(&self.streams_overflowed),
            ),
            ("parley_rate_limited_total", load(&self.rate_limited)),
            ("parley_books_lock_waits_total", load(&self.lock_waits)),
            (
                "parley_tasks_memory_limit_total",
                load(&self.tasks_memory_limit),
            ),
            ("parley_tasks_measured_total", load(&self.tasks_measured)),
            (
                "parley_task_peak_memory_bytes_total",
                load(&self.task_peak_memory_bytes),
            ),
            (
                "parley_tasks_gpu_measured_total",
                load(&self.tasks_gpu_measured),
            ),
            (
                "parley_task_gpu_memory_bytes_total",
                load(&self.task_gpu_memory_bytes),
            ),
            ("parley_ledger_mismatches_total", g.ledger_mismatches),
            ("parley_drain_kills_total", g.drain_kills),
            ("parley_tasks_fenced_total", g.fences),
            ("parley_preemptions_total", g.preemptions),
            ("parley_tasks_preempted_total", g.tasks_preempted),
        ];
        for (name, v) in counters {
            s.counter(name, v)?;
        }
        for (name, micros) in [
            (
                "parley_launch_window_wait_seconds_total",
                load(&self.window_wait_micros),
            ),
            (
                "parley_books_lock_wait_seconds_total",
                load(&self.lock_wait_micros),
            ),
            ("parley_task_cpu_seconds_total", load(&self.task_cpu_micros)),
            (
                "parley_task_throttled_seconds_total",
                load(&self.task_throttled_micros),
            ),
            (
                "parley_task_gpu_utilization_percent_total",
                load(&self.task_gpu_utilization_micros),
            ),
        ] {
            s.counter_f64(name, micros as f64 / 1e6)?;
        }
        s.counters(
            "parley_auth_denied_total",
            "reason",
            Denial::ALL
                .iter()
                .zip(&self.auth_denied)
                .map(|(d, c)| (d.label(), load(c))),
        )?;
        s.counters(
            "parley_loop_panics_total",
            "loop",
            LOOPS
                .iter()
                .zip(&self.loop_panics)
                .map(|(l, c)| (*l, load(c))),
        )?;
        s.counters(
            "parley_tasks_terminal_total",
            "state",
            g.tasks_terminal.iter().map(|(state, n)| (*state, *n)),
        )?;
        let requests = self
            .routes()
            .map(RouteCounters::figures)
            .unwrap_or_default();
        s.counters(
            "parley_http_requests_total",
            "route",
            requests.iter().map(|f| (f.route, f.requests)),
        )?;
        s.counters_f64(
            "parley_http_request_seconds_total",
            "route",
            requests.iter().map(|f| (f.route, f.seconds)),
        )?;
        s.counters(
            "parley_http_requests_too_large_total",
            "route",
            requests.iter().map(|f| (f.route, f.too_large)),
        )?;
        s.gauge("parley_outstanding_offers", g.outstanding_offers as f64)?;
        s.gauge("parley_tasks_unhealthy", g.tasks_unhealthy as f64)?;
        s.gauge("parley_starved_roles", g.starved_roles as f64)?;
        s.gauge("parley_frameworks_stalled", g.frameworks_stalled as f64)?;
        s.gauge("parley_leader", if scraped.leader { 1.0 } else { 0.0 })?;
        let labelled = [
            ("parley_tasks", &g.tasks_by_state),
            ("parley_agents", &g.agents_by_state),
            ("parley_frameworks", &g.frameworks_by_state),
        ];
        for (name, map) in labelled {
            s.gauges(name, "state", map.iter().map(|(k, n)| (*k, *n as f64)))?;
        }
        s.gauges(
            "parley_role_dominant_share",
            "role",
            g.role_shares.iter().map(|(r, share)| (r.as_str(), *share)),
        )?;
        write_resources(s, g)?;
        let runs = load(&self.allocation_runs);
        let mut below = 0;
        let coarse: Vec<(f64, u64)> = RUN_BUCKETS
            .iter()
            .zip(&self.allocation_buckets)
            .map(|(bound, bucket)| {
                // The buckets count cumulatively; the encoder wants each bucket alone.
                let cumulative = load(bucket);
                let alone = cumulative.saturating_sub(below);
                below = cumulative;
                (*bound, alone)
            })
            .collect();
        let sum = load(&self.allocation_micros) as f64 / 1e6;
        s.histogram("parley_allocation_run_seconds", sum, runs, &coarse)?;
        write_fine(
            s,
            "parley_allocation_run_fine_seconds",
            &self.allocation_fine,
            load(&self.allocation_micros),
        )?;
        write_fine(
            s,
            "parley_offer_wait_seconds",
            &self.offer_wait,
            load(&self.offer_wait_micros),
        )
    }
}

/// What a scrape reads from the books (once, under their lock) and from the HA status.
#[derive(Debug, Clone, Default)]
pub struct Scraped {
    /// The books' gauges.
    pub gauges: Gauges,
    /// Whether this coordinator serves the API (standalone, or the HA leader).
    pub leader: bool,
}

/// Reads [`Scraped`] at each scrape; `None` once the coordinator is gone.
pub type Source = Box<dyn Fn() -> Option<Scraped> + Send + Sync>;

/// The collector of [`Metrics::registry`]: the counters and what its source reads.
struct Collected {
    metrics: Arc<Metrics>,
    source: Source,
}

impl fmt::Debug for Collected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collected").finish_non_exhaustive()
    }
}

impl Collector for Collected {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let scraped = (self.source)().unwrap_or_default();
        self.metrics
            .write(&mut Scrape::new(encoder, &METRICS), &scraped)
    }
}

/// Writes the resource gauges: total, used and offered per resource on the active agents, and
/// used as a percentage of total (Mesos' `master/cpus_percent`, ...).
fn write_resources(s: &mut Scrape<'_>, g: &Gauges) -> fmt::Result {
    /// One gauge: its name and how to read it from a resource's use.
    type Gauge = (&'static str, fn(&ResourceUse) -> f64);
    let kinds: [Gauge; 3] = [
        ("parley_resources_used", |r| r.used),
        ("parley_resources_offered", |r| r.offered),
        ("parley_resources_used_percent", |r| {
            if r.total > 0.0 {
                100.0 * r.used / r.total
            } else {
                0.0
            }
        }),
    ];
    // `parley_resources_total` has always been typed a counter; kept so for dashboards.
    s.counters_f64(
        "parley_resources_total",
        "resource",
        g.resources.iter().map(|(k, r)| (k.as_str(), r.total)),
    )?;
    for (name, value) in kinds {
        s.gauges(
            name,
            "resource",
            g.resources.iter().map(|(k, r)| (k.as_str(), value(r))),
        )?;
    }
    write_agent_gpus(s, g)
}

/// Writes the per-agent GPU gauges (agents with GPUs only, capped: see
/// [`crate::state::MAX_AGENT_GPU_SERIES`]).
fn write_agent_gpus(s: &mut Scrape<'_>, g: &Gauges) -> fmt::Result {
    let ids: Vec<String> = g.agent_gpus.iter().map(|a| a.0.to_string()).collect();
    s.gauges(
        "parley_agent_gpus",
        "agent",
        ids.iter()
            .zip(&g.agent_gpus)
            .map(|(id, a)| (id.as_str(), a.1)),
    )?;
    s.gauges(
        "parley_agent_gpus_used",
        "agent",
        ids.iter()
            .zip(&g.agent_gpus)
            .map(|(id, a)| (id.as_str(), a.2)),
    )
}

/// Writes one fine histogram.
fn write_fine(s: &mut Scrape<'_>, name: &str, h: &FineHistogram, sum_micros: u64) -> fmt::Result {
    let buckets: Vec<(f64, u64)> = h
        .counts
        .iter()
        .enumerate()
        .map(|(i, c)| (fine_bound(i), c.load(Ordering::Relaxed)))
        .collect();
    let count = buckets.iter().map(|b| b.1).sum();
    s.histogram(name, sum_micros as f64 / 1e6, count, &buckets)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every metric of the table is written, once, with its type; nothing else is.
    #[test]
    fn render_writes_exactly_the_documented_metrics() {
        let text = Arc::new(Metrics::default()).render(&Gauges::default());
        let typed: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_once(' '))
            .collect();
        let documented: Vec<(&str, &str)> = METRICS
            .iter()
            .chain(&observe::process::METRICS)
            .map(|m| (m.name, m.kind.as_str()))
            .collect();
        let mut a = typed.clone();
        let mut b = documented.clone();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "written (left) and documented (right) differ");
        assert_eq!(
            typed.len(),
            METRICS.len() + observe::process::METRICS.len(),
            "a metric is written twice"
        );
        let table = reference_table();
        assert!(
            table.contains("| `parley_tasks{state}` | gauge |"),
            "{table}"
        );
    }

    #[test]
    fn renders_counters_histogram_and_gauges() {
        let m = Arc::new(Metrics::default());
        m.observe_allocation(Duration::from_micros(300));
        m.observe_allocation(Duration::from_secs(2));
        m.count_lock_wait(Duration::from_millis(3));
        m.count_lock_wait(Duration::from_millis(1));
        let mut g = Gauges {
            outstanding_offers: 3,
            ledger_mismatches: 1,
            tasks_unhealthy: 4,
            ..Gauges::default()
        };
        g.tasks_by_state.insert("running", 2);
        g.role_shares.push(("eng".into(), 0.5));
        g.resources.insert(
            "cpus".into(),
            ResourceUse {
                total: 8.0,
                used: 2.0,
                offered: 1.5,
            },
        );
        let gpu_agent = protocol::AgentId(uuid::Uuid::from_u128(7));
        g.agent_gpus.push((gpu_agent, 2.0, 1.0));
        let text = m.render(&g);
        assert!(text.contains("parley_books_lock_waits_total 2\n"), "{text}");
        assert!(
            text.contains("parley_books_lock_wait_seconds_total 0.004\n"),
            "{text}"
        );
        assert!(
            text.contains("parley_resources_total{resource=\"cpus\"} 8\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("parley_agent_gpus{{agent=\"{gpu_agent}\"}} 2\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "parley_agent_gpus_used{{agent=\"{gpu_agent}\"}} 1\n"
            )),
            "{text}"
        );
        assert!(
            text.contains("parley_resources_used{resource=\"cpus\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("parley_resources_offered{resource=\"cpus\"} 1.5\n"),
            "{text}"
        );
        assert!(
            text.contains("parley_resources_used_percent{resource=\"cpus\"} 25\n"),
            "{text}"
        );
        assert!(text.contains("parley_outstanding_offers 3"), "{text}");
        assert!(text.contains("parley_tasks_unhealthy 4\n"), "{text}");
        assert!(text.contains("parley_tasks{state=\"running\"} 2"), "{text}");
        assert!(
            text.contains("parley_role_dominant_share{role=\"eng\"} 0.5"),
            "{text}"
        );
        assert!(
            text.contains("parley_allocation_run_seconds_bucket{le=\"0.0005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("parley_allocation_run_seconds_count 2"),
            "{text}"
        );
        assert!(text.contains("parley_offers_created_total 0"), "{text}");
        assert!(text.contains("parley_ledger_mismatches_total 1"), "{text}");
        assert!(
            text.contains("parley_allocation_run_fine_seconds_count 2"),
            "{text}"
        );
    }

    /// The cumulative count of the fine bucket whose bound is closest to `secs`.
    fn fine_count_at(text: &str, secs: f64) -> u64 {
        text.lines()
            .filter_map(|l| l.strip_prefix("parley_allocation_run_fine_seconds_bucket{le=\""))
            .filter_map(|l| l.split_once("\"} "))
            .filter_map(|(le, n)| Some((le.parse::<f64>().ok()?, n.parse::<u64>().ok()?)))
            .min_by(|a, b| (a.0 - secs).abs().total_cmp(&(b.0 - secs).abs()))
            .map(|(_, n)| n)
            .unwrap()
    }

    #[test]
    fn fine_histogram_puts_each_run_in_the_bucket_that_holds_it() {
        let m = Arc::new(Metrics::default());
        // 1 µs is the first bound itself; 300 µs lies between bound 32 (2^8 = 256 µs) and
        // bound 33 (2^8.25 ≈ 304.4 µs); 1000 s is past the last bound and lands in the last
        // bucket.
        for d in [
            Duration::from_micros(1),
            Duration::from_micros(300),
            Duration::from_secs(1000),
        ] {
            m.observe_allocation(d);
        }
        let text = m.render(&Gauges::default());
        assert_eq!(fine_count_at(&text, 1e-6), 1, "{text}");
        assert_eq!(fine_count_at(&text, 256e-6), 1, "{text}");
        assert_eq!(fine_count_at(&text, 304.4e-6), 2, "{text}");
        assert_eq!(fine_count_at(&text, fine_bound(FINE_BUCKETS - 2)), 2);
        assert_eq!(fine_count_at(&text, fine_bound(FINE_BUCKETS - 1)), 3);
        assert!(
            text.contains("parley_allocation_run_fine_seconds_bucket{le=\"+Inf\"} 3"),
            "{text}"
        );
        // Every bound is 2^(1/4) times the one before.
        for i in 1..FINE_BUCKETS {
            let ratio = fine_bound(i) / fine_bound(i - 1);
            assert!((ratio - 2f64.powf(0.25)).abs() < 1e-9);
        }
    }

    #[test]
    fn gpu_usage_is_counted_apart_from_cgroup_usage() {
        let m = Arc::new(Metrics::default());
        let end = |usage: serde_json::Value| -> protocol::TaskStatus {
            serde_json::from_value(serde_json::json!({
                "task_id": "t", "framework_id": protocol::FrameworkId::new(),
                "agent_id": protocol::AgentId::new(), "state": "finished",
                "update_id": protocol::UpdateId::new(), "timestamp": "2026-01-01T00:00:00Z",
                "usage": usage, "gpu_devices": ["GPU-a"]
            }))
            .unwrap()
        };
        // A plain GPU task (not isolated): GPU usage only.
        m.count_task_end(&end(
            serde_json::json!({"gpu_memory_bytes": 1000, "gpu_utilization_percent": 50.0}),
        ));
        // An isolated GPU task: both.
        m.count_task_end(&end(
            serde_json::json!({"cpu_seconds": 1.0, "gpu_memory_bytes": 500,
            "gpu_utilization_percent": 25.5}),
        ));
        let text = m.render(&Gauges::default());
        for line in [
            "parley_tasks_gpu_measured_total 2",
            "parley_task_gpu_memory_bytes_total 1500",
            "parley_task_gpu_utilization_percent_total 75.5",
            "parley_tasks_measured_total 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
    }
}
