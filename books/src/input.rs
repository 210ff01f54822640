//! Domain inputs: what the books' operations take, already converted from the wire
//! requests and validated at the API edge (the coordinator's `api` module). The books check
//! what only they can tell (unknown ids, offers of another framework, tasks that do not fit),
//! not the shape of a request.

use super::AgentToken;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use protocol::{AgentId, FrameworkId, OfferId, Resources, RolePath, TaskSpec, TaskStatus};

/// A framework registering, or re-registering with its id.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameworkRegistration {
    /// Its id when re-registering.
    pub framework_id: Option<FrameworkId>,
    /// A non-empty name.
    pub name: String,
    /// Its role.
    pub role: RolePath,
    /// Seconds (finite, from 0 to one year); `None` for the configured default.
    pub failover_timeout_s: Option<f64>,
    /// A demand hint.
    pub demand: Option<Resources>,
    /// The principal registering it (with credentials configured); it then owns the framework
    /// id. `None` keeps the current owner.
    pub owner: Option<Arc<str>>,
    /// It declared the `gpu_resources` capability (offered agents with GPUs under gating).
    pub gpu_resources: bool,
    /// Its partition timeout in seconds when it declared the `partition_aware` capability
    /// (checked: more than 0, at most a week); `None`: not partition-aware.
    pub partition_timeout_s: Option<f64>,
}

/// An agent registering, or re-registering with its id and the tasks it still runs.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRegistration {
    /// Its id when re-registering (required when `tasks` is not empty).
    pub agent_id: Option<AgentId>,
    /// The node's hostname.
    pub hostname: String,
    /// Its base URL, without a trailing `/`.
    pub endpoint: String,
    /// Its total resources (not empty).
    pub resources: Resources,
    /// Its attributes.
    pub attributes: BTreeMap<String, String>,
    /// Its GPUs, as it listed them (checked: one per `gpus` it counts).
    pub gpu_devices: Vec<protocol::gpu::GpuDevice>,
    /// The tasks it still runs (or ran while the coordinator was away).
    pub tasks: Vec<TaskStatus>,
    /// The token the coordinator presents when it calls the agent.
    pub api_token: Option<AgentToken>,
    /// Its static reservations: well formed, their sum within `resources`.
    pub reservations: Vec<protocol::reservation::Reservation>,
}

/// Offers of one agent accepted for tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct Accept {
    /// The offers.
    pub offer_ids: Vec<OfferId>,
    /// The tasks, each well formed (command, resources, name, duration checked).
    pub tasks: Vec<TaskSpec>,
    /// How long the unused rest stays filtered for the framework; `None` for the default.
    pub refuse: Option<Duration>,
}

/// Offers declined.
#[derive(Debug, Clone, PartialEq)]
pub struct Decline {
    /// The offers.
    pub offer_ids: Vec<OfferId>,
    /// How long their resources stay filtered for the framework; `None` for the default.
    pub refuse: Option<Duration>,
}
