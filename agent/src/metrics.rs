//! The agent's `/metrics` (Prometheus text): its counters, what its books hold at each scrape,
//! and the process' figures and build shared with the coordinator (`observe::process`).
//!
//! [`METRICS`] is the one table the page is written from and the book's reference generated
//! from (`docs/src/reference/metrics.md`, agent section), so no metric is served undocumented.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use observe::process::{BuildInfo, ProcessCollector};
use observe::prometheus_client::collector::Collector;
use observe::prometheus_client::encoding::DescriptorEncoder;
use observe::prometheus_client::registry::Registry;
use observe::{Kind, Metric, Scrape};
use protocol::{TaskState, TaskStatus};

/// Every metric of the agent's own (the process' figures and `parley_build_info` are
/// `observe::process::METRICS`), in the reference's order.
pub const METRICS: [Metric; 5] = [
    Metric {
        name: "parley_agent_registered",
        kind: Kind::Gauge,
        label: None,
        help: "1 while the agent is registered with a coordinator (heartbeating), 0 while it registers again.",
        mesos: "`slave/registered`",
    },
    Metric {
        name: "parley_agent_tasks_running",
        kind: Kind::Gauge,
        label: None,
        help: "Tasks of this agent whose latest state is running.",
        mesos: "`slave/tasks_running`",
    },
    Metric {
        name: "parley_agent_tasks_launched_total",
        kind: Kind::Counter,
        label: None,
        help: "Tasks this agent accepted for launch since it started.",
        mesos: "closest: `slave/tasks_staging` + `slave/tasks_starting` over time",
    },
    Metric {
        name: "parley_agent_launch_failures_total",
        kind: Kind::Counter,
        label: None,
        help: "Launches this agent could not record (sandbox or journal errors: answered 500).",
        mesos: "closest: `slave/container_launch_errors`",
    },
    Metric {
        name: "parley_agent_tasks_terminal_total",
        kind: Kind::Counter,
        label: Some("state"),
        help: "Tasks of this agent that reached each terminal state since it started (it starts again at 0 on restart).",
        mesos: "`slave/tasks_finished`, `slave/tasks_failed`, `slave/tasks_killed`, `slave/tasks_lost`",
    },
];

/// The agent's counters.
#[derive(Debug, Default)]
pub struct AgentMetrics {
    launched: AtomicU64,
    launch_failures: AtomicU64,
    /// Tasks ended, by state in [`TaskState::ALL`] order (only terminal states count).
    terminal: [AtomicU64; TaskState::ALL.len()],
}

impl AgentMetrics {
    /// Counts `n` tasks accepted for launch.
    pub fn count_launched(&self, n: usize) {
        self.launched.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts a launch that could not be recorded.
    pub fn count_launch_failure(&self) {
        self.launch_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `status` if it is terminal. Call once per status, when it is journaled (each
    /// task's terminal status is journaled once).
    pub fn count_status(&self, status: &TaskStatus) {
        if !status.state.is_terminal() {
            return;
        }
        if let Some(i) = TaskState::ALL.iter().position(|s| *s == status.state) {
            self.terminal[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What a scrape reads from a live agent (the real agent's shell implements it).
pub(crate) trait Source: Send + Sync + 'static {
    /// Whether the agent is registered, and how many of its tasks are running.
    fn scrape(&self) -> (bool, usize);
    /// The agent's counters.
    fn metrics(&self) -> &AgentMetrics;
}

/// The agent's registry: its counters and books, read at each scrape, and the process'
/// figures. Holds the agent weakly (the agent owns its router).
pub(crate) fn registry<A: Source>(agent: &Arc<A>) -> Registry {
    let mut registry = Registry::default();
    let agent: Weak<A> = Arc::downgrade(agent);
    registry.register_collector(Box::new(AgentCollector(agent)));
    registry.register_collector(Box::new(ProcessCollector::new(BuildInfo::new(env!(
        "CARGO_PKG_VERSION"
    )))));
    registry
}

/// Writes [`METRICS`] from a live agent.
struct AgentCollector<A>(Weak<A>);

impl<A> fmt::Debug for AgentCollector<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentCollector").finish_non_exhaustive()
    }
}

impl<A: Source> Collector for AgentCollector<A> {
    fn encode(&self, encoder: DescriptorEncoder) -> fmt::Result {
        let Some(agent) = self.0.upgrade() else {
            return Ok(());
        };
        let (registered, running) = agent.scrape();
        let m = agent.metrics();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut s = Scrape::new(encoder, &METRICS);
        s.gauge(
            "parley_agent_registered",
            if registered { 1.0 } else { 0.0 },
        )?;
        s.gauge("parley_agent_tasks_running", running as f64)?;
        s.counter("parley_agent_tasks_launched_total", load(&m.launched))?;
        s.counter(
            "parley_agent_launch_failures_total",
            load(&m.launch_failures),
        )?;
        s.counters(
            "parley_agent_tasks_terminal_total",
            "state",
            TaskState::ALL
                .iter()
                .zip(&m.terminal)
                .filter(|(state, _)| state.is_terminal())
                .map(|(state, c)| (state.as_str(), load(c))),
        )
    }
}

/// The agent's metrics reference as a Markdown table: its own, then the process' figures.
pub fn reference_table() -> String {
    observe::table::reference_table(METRICS.iter().chain(&observe::process::METRICS))
}
