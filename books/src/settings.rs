//! [`Settings`]: the part of the coordinator's configuration the books read (timeouts, bounds,
//! the initial role tree), as a plain struct. The coordinator converts its `Config` into it;
//! tests build it directly. Its defaults are the coordinator's documented defaults.

use std::time::Duration;

use protocol::{RolePath, Weight};

/// What the books need to know of the configuration. Each field means what the coordinator
/// setting of the same name means (see its `Config`).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// How often allocation runs even when nothing changed; a decline filter lasts at least
    /// this long.
    pub allocation_interval: Duration,
    /// How long an offer stays outstanding before it is rescinded as expired.
    pub offer_timeout: Duration,
    /// How often agents are told to heartbeat.
    pub agent_heartbeat_interval: Duration,
    /// An agent missing this many heartbeats in a row is lost.
    pub max_missed_heartbeats: u32,
    /// How often a framework stream carries a `heartbeat` event.
    pub framework_heartbeat_interval: Duration,
    /// Failover timeout of a framework that registers without one.
    pub default_failover_timeout: Duration,
    /// Decline filter of a decline or accept without `refuse_seconds`.
    pub default_refuse_seconds: Duration,
    /// How often an unacknowledged task update is sent again.
    pub update_resend_interval: Duration,
    /// How many completed tasks each framework keeps in the books.
    pub max_completed_tasks_per_framework: usize,
    /// The most distinct resource names the cluster may use.
    pub max_resource_kinds: usize,
    /// The most frameworks the books hold.
    pub max_frameworks: usize,
    /// The most roles in the role tree.
    pub max_roles: usize,
    /// The longest failover timeout a framework may ask for.
    pub max_failover_timeout: Duration,
    /// The most placeholder frameworks (for tasks of frameworks the books do not know).
    pub max_placeholder_frameworks: usize,
    /// How many removed framework ids are remembered.
    pub max_removed_frameworks: usize,
    /// The most unacknowledged task updates kept per framework.
    pub max_pending_updates_per_framework: usize,
    /// How long a lost agent is remembered.
    pub lost_agent_retention: Duration,
    /// The most events queued on one framework stream; also the most task ids one
    /// `reconcile` may name.
    pub max_stream_queue: usize,
    /// The initial role tree: roles and their weights.
    pub roles: Vec<(RolePath, Weight)>,
    /// Offers from agents with GPUs go only to frameworks that declared `gpu_resources`.
    pub gpu_gating: bool,
    /// Preemption toward fair share: `None` never preempts.
    pub preemption_grace: Option<Duration>,
    /// Resource names a quota may name before any agent offers them, besides the standard
    /// ones ([`STANDARD_RESOURCES`]).
    pub known_resources: Vec<protocol::ResourceName>,
    /// How long a framework that wants tasks may go without an offer, while some agent has
    /// room it could be offered, before it is reported stalled (`stall.rs`).
    pub stall_after: Duration,
}

/// The resources every cluster knows, so that quotas on them can be set before agents join.
pub const STANDARD_RESOURCES: [&str; 4] = ["cpus", "mem", "disk", "gpus"];

impl Default for Settings {
    fn default() -> Self {
        Self {
            allocation_interval: Duration::from_secs(1),
            offer_timeout: Duration::from_secs(60),
            agent_heartbeat_interval: Duration::from_secs(15),
            max_missed_heartbeats: 5,
            framework_heartbeat_interval: Duration::from_secs(15),
            default_failover_timeout: Duration::from_secs(60),
            default_refuse_seconds: Duration::from_secs(5),
            update_resend_interval: Duration::from_secs(10),
            max_completed_tasks_per_framework: 1000,
            max_resource_kinds: allocator::DEFAULT_MAX_KINDS,
            max_frameworks: 10_000,
            max_roles: 1000,
            max_failover_timeout: Duration::from_secs(7 * 24 * 3600),
            max_placeholder_frameworks: 1000,
            max_removed_frameworks: 100_000,
            max_pending_updates_per_framework: 100_000,
            lost_agent_retention: Duration::from_secs(24 * 3600),
            max_stream_queue: 10_000,
            roles: Vec::new(),
            gpu_gating: true,
            preemption_grace: None,
            known_resources: Vec::new(),
            stall_after: Duration::from_secs(30),
        }
    }
}
