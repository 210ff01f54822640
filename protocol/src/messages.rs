//! Request and response bodies of the HTTP API (`docs/src/reference/api.md`), grouped by API.
//!
//! Request types are strict where a typo would silently change behaviour
//! (`deny_unknown_fields` on bodies whose fields are all optional).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    AgentId, ErrorDetail, FrameworkId, Offer, OfferId, Resources, RolePath, TaskId, TaskSpec,
    TaskState, TaskStatus, Timestamp, UpdateId, Weight,
};

// ---------------------------------------------------------------------------------------------
// Framework API
// ---------------------------------------------------------------------------------------------

/// `POST /api/v1/frameworks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterFramework {
    /// A human-readable name.
    pub name: String,
    /// The role the framework runs under, e.g. `eng/batch`.
    pub role: RolePath,
    /// How long its tasks survive a lost stream; default chosen by the coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_timeout_s: Option<f64>,
    /// Set to re-register an existing framework within its failover timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    /// The resources of a typical next task: an agent whose free resources cannot hold it is not
    /// offered to this framework.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Resources>,
    /// What the framework can handle, as Mesos' capabilities: `gpu_resources` lets it be offered
    /// agents with GPUs while GPU gating is on. Unknown strings are ignored
    /// (see [`crate::capability`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// For a framework that declares `partition_aware`: how long its tasks stay `unreachable`
    /// on an agent the coordinator cannot reach before they are `gone` (default
    /// [`crate::partition::DEFAULT_PARTITION_TIMEOUT_S`]). Refused without the capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_timeout_s: Option<f64>,
    /// The URL of the framework's own web UI, as Mesos' `FrameworkInfo.webui_url`: the
    /// dashboard's frameworks table links to it. An `http://` or `https://` URL of at most
    /// [`MAX_WEBUI_URL_LEN`] bytes ([`check_webui_url`]); a re-registration states it anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webui_url: Option<String>,
}

/// The longest [`RegisterFramework::webui_url`], in bytes.
pub const MAX_WEBUI_URL_LEN: usize = 2048;

/// Checks a framework's `webui_url`: `http://` or `https://`, something after the scheme, at
/// most [`MAX_WEBUI_URL_LEN`] bytes, no whitespace or control characters.
pub fn check_webui_url(url: &str) -> Result<(), WebUiUrlError> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let url = || url.to_string();
    match rest {
        None => Err(WebUiUrlError::NotHttp { url: url() }),
        Some("") => Err(WebUiUrlError::NoHost { url: url() }),
        Some(_) if url().len() > MAX_WEBUI_URL_LEN => Err(WebUiUrlError::TooLong),
        Some(_) if url().chars().any(|c| c.is_whitespace() || c.is_control()) => {
            Err(WebUiUrlError::BadCharacters { url: url() })
        }
        Some(_) => Ok(()),
    }
}

/// Why a `webui_url` is refused (the caller names the field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebUiUrlError {
    /// Not `http://` or `https://`.
    #[error("{url:?} is not an http:// or https:// URL")]
    NotHttp {
        /// The value given.
        url: String,
    },
    /// Nothing after the scheme.
    #[error("{url:?} names no host")]
    NoHost {
        /// The value given.
        url: String,
    },
    /// Longer than [`MAX_WEBUI_URL_LEN`].
    #[error("is longer than {MAX_WEBUI_URL_LEN} bytes")]
    TooLong,
    /// Whitespace or control characters.
    #[error("{url:?} holds whitespace or control characters")]
    BadCharacters {
        /// The value given.
        url: String,
    },
}

/// Answer to [`RegisterFramework`], and the `subscribed` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FrameworkRegistered {
    /// The framework's id (the same one on re-registration).
    pub framework_id: FrameworkId,
    /// How often the stream carries a `heartbeat` event.
    pub heartbeat_interval_s: f64,
    /// What the coordinator accepts in one request, so a framework never sends one it must
    /// refuse (absent from an older coordinator, and from the `subscribed` event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RequestLimits>,
}

/// The most the coordinator accepts in one request, told to a framework when it registers. A
/// client splits its batches to fit: a request over any of these is refused whole (`413
/// body_too_large`, or `400 invalid_body` naming the list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RequestLimits {
    /// The largest request body, in bytes (the coordinator's `max_body_bytes`).
    pub max_body_bytes: u64,
    /// The most accepts in one [`AcceptBatch`] ([`AcceptBatch::MAX`]).
    pub max_accepts_per_call: u32,
    /// The most task ids in one [`ReconcileRequest`] (the coordinator's `max_stream_queue`:
    /// each is one event on the stream).
    pub max_reconcile_tasks: u32,
}

impl RequestLimits {
    /// The limits of a coordinator that says none: the defaults of the coordinator's
    /// settings (1 MiB bodies, 10,000 task ids per reconcile).
    pub const DEFAULT: RequestLimits = RequestLimits {
        max_body_bytes: 1024 * 1024,
        max_accepts_per_call: AcceptBatch::MAX as u32,
        max_reconcile_tasks: 10_000,
    };
}

/// `POST /api/v1/frameworks/{id}/accept`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AcceptRequest {
    /// Offers to use; all of one agent.
    pub offer_ids: Vec<OfferId>,
    /// Tasks to launch on that agent; their resources must sum within the offers.
    #[serde(default)]
    pub tasks: Vec<TaskSpec>,
    /// Filter the unused rest of the offers for this long (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refuse_seconds: Option<f64>,
}

/// Answer to [`AcceptRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcceptResponse {
    /// The task ids sent to the agent.
    pub launched: Vec<TaskId>,
}

/// `POST /api/v1/frameworks/{id}/accepts`: several accepts in one call, each on its own
/// agent, so a framework answers a whole batch of offers over one connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AcceptBatch {
    /// The accepts, each as [`AcceptRequest`]; at most [`AcceptBatch::MAX`].
    pub accepts: Vec<AcceptRequest>,
    /// After these accepts: how many more tasks of its demand hint the framework wants
    /// launched, counting none it has already accepted (absent: say nothing, and the last
    /// count stands). See [`DeclineRequest::pending_tasks`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_tasks: Option<u32>,
}

impl AcceptBatch {
    /// The most accepts one call may carry.
    pub const MAX: usize = 1_000;
}

/// Answer to [`AcceptBatch`]: one result per accept, in the order they were sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcceptBatchResponse {
    /// `results[i]` answers `accepts[i]`.
    pub results: Vec<AcceptResult>,
}

/// How one accept of an [`AcceptBatch`] went: the tasks launched, or why it changed nothing
/// (the code and message the single accept would have answered with).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcceptResult {
    /// The HTTP status the accept alone would have been answered with: 200 when carried out.
    pub status: u16,
    /// The task ids sent to the agent; empty when the accept was refused.
    #[serde(default)]
    pub launched: Vec<TaskId>,
    /// Why the accept was refused; absent when it was carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// `POST /api/v1/frameworks/{id}/decline`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DeclineRequest {
    /// Offers to give back.
    pub offer_ids: Vec<OfferId>,
    /// Do not offer these resources again for this long (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refuse_seconds: Option<f64>,
    /// After this decline: how many more tasks of its demand hint the framework wants
    /// launched, counting none it has already accepted (absent: say nothing, and the last
    /// count stands). While its outstanding offers hold that many tasks it is offered nothing
    /// more, so it is not sent agents it would only decline. Without a demand hint each offer
    /// counts as one task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_tasks: Option<u32>,
}

/// `POST /api/v1/frameworks/{id}/revive`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReviveRequest {
    /// A new demand hint, replacing the old one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Resources>,
    /// How many tasks of its demand hint the framework wants launched (see
    /// [`DeclineRequest::pending_tasks`]). Unlike on an answer, absent here means no bound:
    /// offers go on until the framework suppresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_tasks: Option<u32>,
}

/// `POST /api/v1/frameworks/{id}/kill`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KillRequest {
    /// The task to kill.
    pub task_id: TaskId,
}

/// `POST /api/v1/frameworks/{id}/acknowledge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AcknowledgeRequest {
    /// The task of the update.
    pub task_id: TaskId,
    /// The update acknowledged.
    pub update_id: UpdateId,
}

/// `POST /api/v1/frameworks/{id}/acknowledgements`: several
/// acknowledgements in one call, each as [`AcknowledgeRequest`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AcknowledgeBatch {
    /// The acknowledgements, in any order.
    pub acknowledgements: Vec<AcknowledgeRequest>,
}

/// The answer to [`AcknowledgeBatch`]: how many were recorded, and the ones the coordinator did
/// not know (an update of a task already forgotten, or never sent): they changed nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcknowledgeBatchResponse {
    /// Acknowledgements recorded.
    pub acknowledged: usize,
    /// Acknowledgements of unknown tasks or updates.
    #[serde(default)]
    pub unknown: Vec<AcknowledgeRequest>,
}

/// `POST /api/v1/frameworks/{id}/reconcile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReconcileRequest {
    /// Tasks to report; empty means all of the framework's tasks.
    #[serde(default)]
    pub task_ids: Vec<TaskId>,
}

/// An empty JSON object, `{}`: the body of many answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Empty {}

// ---------------------------------------------------------------------------------------------
// Agent API, on the coordinator
// ---------------------------------------------------------------------------------------------

/// `POST /api/v1/agents`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterAgent {
    /// The node's hostname.
    pub hostname: String,
    /// Base URL where the coordinator reaches the agent, e.g. `http://10.0.0.5:5051`.
    pub endpoint: String,
    /// The agent's total resources.
    pub resources: Resources,
    /// Attributes such as `rack` or `zone`.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Set to re-register.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    /// On re-registration: the latest status of each task the agent still knows.
    #[serde(default)]
    pub tasks: Vec<TaskStatus>,
    /// The secret the coordinator must present (`Authorization: Bearer …`) on every call to
    /// this agent. A known `agent_id` registered with a token may only
    /// register again with the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_token: Option<String>,
    /// The agent's GPUs, one entry per device its `gpus` resource counts (optional; empty, and
    /// absent on the wire, for an agent without GPUs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_devices: Vec<crate::gpu::GpuDevice>,
    /// Static reservations, from the agent's `--reserve ROLE:resources` flags (optional; empty, and
    /// absent on the wire, without any): their sum must fit in `resources`, each role must exist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<crate::reservation::Reservation>,
}

/// Answer to [`RegisterAgent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentRegistered {
    /// The agent's id (the same one on re-registration).
    pub agent_id: AgentId,
    /// How often to heartbeat.
    pub heartbeat_interval_s: f64,
    /// How long the coordinator waits for a heartbeat before it declares the agent lost
    /// (`heartbeat_interval_s × max missed heartbeats`). The agent kills its tasks itself a
    /// little before that when it cannot reach the coordinator (see [`crate::partition`]);
    /// absent from older coordinators, and then it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_timeout_s: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// Agent's own API
// ---------------------------------------------------------------------------------------------

/// `POST {agent}/api/v1/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LaunchTasks {
    /// The framework the tasks belong to.
    pub framework_id: FrameworkId,
    /// The tasks.
    pub tasks: Vec<TaskSpec>,
    /// The framework's partition timeout when it is partition-aware: its tasks may run this
    /// much longer than the agent timeout while the agent cannot reach the coordinator. Absent:
    /// the agent kills them a little before the agent timeout (see [`crate::partition`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_timeout_s: Option<f64>,
}

/// `POST {agent}/api/v1/tasks/{id}/kill`: an empty object, or the framework the task belongs
/// to. Without it the agent kills the task only if one framework has a
/// task of that id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KillTask {
    /// The framework of the task to kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    /// Why, in one word, when the task's end should carry it as its `reason`:
    /// `agent_partitioned` when the framework was already told the task is `lost` or `gone`
    /// (the agent then also journals that the task must not run again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `POST /api/v1/agents/{id}/statuses`: several status updates of one
/// agent, applied in order, all or none (`200 {}` once every one is recorded).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusBatch {
    /// The updates, oldest first.
    pub statuses: Vec<TaskStatus>,
}

/// `GET {agent}/api/v1/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskStatusList {
    /// The latest status of each task the agent knows.
    pub tasks: Vec<TaskStatus>,
}

// ---------------------------------------------------------------------------------------------
// Operator API
// ---------------------------------------------------------------------------------------------

/// `GET /api/v1/offers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OfferList {
    /// The outstanding offers.
    pub offers: Vec<Offer>,
}

/// `PUT /api/v1/roles/{path}`: any of weight, guarantee and limit (at least one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetWeight {
    /// The new weight; absent: the weight stays as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<Weight>,
    /// Quota: the role's guarantee. Absent: unchanged; `null`: cleared.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub guarantee: Option<Option<Resources>>,
    /// Quota: the most the role's subtree may hold (allocations plus outstanding
    /// offers). Absent: unchanged; `null`: cleared.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub limit: Option<Option<Resources>>,
}

/// A field that is present (`Some`, holding `None` for `null`); absent fields get the default.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A node of the role tree, as `GET /api/v1/roles` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoleNode {
    /// The role's path; empty for the root.
    pub path: String,
    /// Its weight.
    pub weight: f64,
    /// What its frameworks hold (running tasks and outstanding offers), summed over the subtree
    /// (a sum over agents: read up to [`crate::resources::MAX_SUM_UNITS`]).
    #[serde(deserialize_with = "crate::resources::deserialize_sum")]
    pub allocated: Resources,
    /// Dominant share of `allocated` against the cluster's capacity.
    pub dominant_share: f64,
    /// Child roles.
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub children: Vec<RoleNode>,
    /// Frameworks registered directly under this role.
    pub frameworks: Vec<FrameworkId>,
    /// Quota: what the role is guaranteed, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Resources>,
    /// Quota: the most its subtree may hold (allocated above counts offers), if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Resources>,
    /// Why the guarantee cannot be met now (it exceeds the cluster's capacity), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee_unmet: Option<String>,
    /// Reservations: what agents reserve for this role itself, summed over the
    /// agents (absent when nothing is).
    #[serde(
        default,
        skip_serializing_if = "Resources::is_empty",
        deserialize_with = "crate::resources::deserialize_sum"
    )]
    pub reserved: Resources,
}

/// An agent, as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentInfo {
    /// Its id.
    pub agent_id: AgentId,
    /// Its hostname.
    pub hostname: String,
    /// Where the coordinator reaches it.
    pub endpoint: String,
    /// Total capacity.
    pub resources: Resources,
    /// Held by running tasks.
    pub used: Resources,
    /// Held by outstanding offers.
    pub offered: Resources,
    /// Attributes.
    pub attributes: BTreeMap<String, String>,
    /// `active`, `lost`, `draining` or `drained` (see [`crate::maintenance`]).
    pub state: String,
    /// When it (last) registered.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub registered_at: Timestamp,
    /// When it last heartbeated.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub last_heartbeat_at: Timestamp,
    /// Its GPUs, as it registered them (empty, and absent on the wire, without GPUs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_devices: Vec<crate::gpu::GpuDevice>,
    /// While draining or drained: when its remaining tasks are (were) killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub drain_deadline: Option<Timestamp>,
    /// Its reservations, static and dynamic (empty, and absent on the wire,
    /// without any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<crate::reservation::AgentReservation>,
}

/// A framework, as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FrameworkInfo {
    /// Its id.
    pub framework_id: FrameworkId,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: RolePath,
    /// `connected` or `disconnected` (stream gone, within its failover timeout).
    pub state: String,
    /// True while suppressed.
    pub suppressed: bool,
    /// How many more tasks it last said it wants (`pending_tasks` on a revive, an accept or a
    /// decline); absent when it never said, or its last revive set no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_tasks: Option<u32>,
    /// Its failover timeout.
    pub failover_timeout_s: f64,
    /// Its demand hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Resources>,
    /// Held by running tasks (a sum over agents: read up to
    /// [`crate::resources::MAX_SUM_UNITS`]).
    #[serde(deserialize_with = "crate::resources::deserialize_sum")]
    pub used: Resources,
    /// Held by outstanding offers (a sum over agents, as `used`).
    #[serde(deserialize_with = "crate::resources::deserialize_sum")]
    pub offered: Resources,
    /// Dominant share of `used + offered` against the cluster's capacity.
    pub dominant_share: f64,
    /// Tasks not yet terminal.
    pub active_tasks: usize,
    /// When it registered.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub registered_at: Timestamp,
    /// The capabilities it declared that the coordinator knows (`gpu_resources`,
    /// `partition_aware`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Its partition timeout, when it is partition-aware (see [`crate::partition`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_timeout_s: Option<f64>,
    /// Its own web UI, as it registered it ([`RegisterFramework::webui_url`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webui_url: Option<String>,
}

/// A task, as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskInfo {
    /// Its id.
    pub task_id: TaskId,
    /// Its name.
    pub name: String,
    /// Its framework.
    pub framework_id: FrameworkId,
    /// Its agent.
    pub agent_id: AgentId,
    /// Its latest state.
    pub state: TaskState,
    /// What it uses.
    pub resources: Resources,
    /// The latest status message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The exit code, once it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why it is in its latest state, in one word for programs, when known (the latest
    /// status's `reason`: `memory_limit`, `agent_drained`, `preempted`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the state last changed.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub updated_at: Timestamp,
    /// The GPUs its agent gave it (UUIDs), when it asked for `gpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_devices: Option<Vec<String>>,
    /// The latest health its agent reported, for a task with a health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// `GET /api/v1/agents`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentList {
    /// The agents.
    pub agents: Vec<AgentInfo>,
}

/// `GET /api/v1/frameworks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FrameworkList {
    /// The frameworks.
    pub frameworks: Vec<FrameworkInfo>,
}

/// `GET /api/v1/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskList {
    /// The tasks.
    pub tasks: Vec<TaskInfo>,
}

/// `GET /api/v1/frameworks/{id}/explain`: why a framework is, or is not,
/// getting offers, from the allocator's own data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FrameworkExplanation {
    /// The framework.
    pub framework_id: FrameworkId,
    /// Its role.
    pub role: RolePath,
    /// `connected` or `disconnected`.
    pub state: String,
    /// Whether it suppressed offers.
    pub suppressed: bool,
    /// Whether its outstanding offers already hold every task it said it still wants
    /// (`pending_tasks`): it is offered nothing more until it answers them or wants more.
    #[serde(default)]
    pub sated: bool,
    /// Its demand hint, if it gave one.
    pub demand: Option<Resources>,
    /// Its H-DRF dominant share.
    pub dominant_share: f64,
    /// How many offers it holds now.
    pub outstanding_offers: usize,
    /// The active agents, counted by what they are for this framework now.
    pub agents: ExplainAgents,
    /// Seconds until the soonest of its decline filters ends, if any blocks an agent.
    pub next_filter_ends_in_s: Option<f64>,
    /// Resource kinds its demand hint asks for that no active agent has at all (e.g. `gpus` on
    /// a cluster without GPUs): waiting will not help.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_agent_offers: Vec<String>,
    /// Quota: what holds it back, one entry per role, e.g. `limit of role a` or
    /// `guarantee of role g`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_back_by: Vec<String>,
    /// Preemption toward fair share, when on: its role starved since when and when
    /// preemption may start, and its own tasks marked for preemption.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemption: Vec<String>,
    /// Set when it is stalled: seconds since it was last sent an offer (or registered,
    /// subscribed or revived, if later), while it wants tasks (`pending_tasks` unknown or
    /// above zero), holds no offer, and some active agent has room it could be offered, for at
    /// least the coordinator's `stall_after`. The summary then starts with `stalled:` and the
    /// most likely reason. Absent when it is not stalled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_for_s: Option<f64>,
    /// One sentence: the main reason, and what to do about it.
    pub summary: String,
}

/// Active agents by what they are for one framework. Each agent is counted once, under the first
/// that applies, in this order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExplainAgents {
    /// Active agents in all.
    pub active: usize,
    /// Agents where the framework holds an outstanding offer.
    pub offered_to_it: usize,
    /// Agents with nothing free (all used by tasks or offered to other frameworks).
    pub nothing_free: usize,
    /// Agents it declined whose filter still covers what is free there.
    pub filtered: usize,
    /// Agents whose free resources do not hold its demand hint.
    pub demand_does_not_fit: usize,
    /// Agents with GPUs held back from it by GPU gating (it did not declare `gpu_resources`).
    #[serde(default)]
    pub gpu_gated: usize,
    /// Agents it could be offered: H-DRF picks it there when it has the lowest share among the
    /// frameworks that can use the agent.
    pub eligible: usize,
    /// Agents being drained or drained: they make no offers until reactivated
    /// (not counted in `active`).
    #[serde(default)]
    pub draining: usize,
    /// Quota: agents held back because a limit on its role (or an ancestor) has no
    /// headroom left in a resource they offer.
    #[serde(default)]
    pub limit_reached: usize,
    /// Quota: agents that go first to another role below its guarantee.
    #[serde(default)]
    pub guarantee_first: usize,
    /// Reservations: agents whose free resources are all reserved for roles it is
    /// not in.
    #[serde(default)]
    pub reserved_for_others: usize,
}

/// `GET /api/v1/state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterState {
    /// The agents.
    pub agents: Vec<AgentInfo>,
    /// The frameworks.
    pub frameworks: Vec<FrameworkInfo>,
    /// The tasks.
    pub tasks: Vec<TaskInfo>,
    /// The role tree.
    pub roles: RoleNode,
    /// The outstanding offers, from the same snapshot as `agents`, so a
    /// reader can check that each agent's `offered` is the sum of its offers.
    #[serde(default)]
    pub offers: Vec<Offer>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webui_url_is_an_http_url_of_sane_length() {
        assert!(check_webui_url("http://127.0.0.1:5070/").is_ok());
        assert!(check_webui_url("https://jobs.example/ui").is_ok());
        for bad in [
            "",
            "ftp://x/",
            "http://",
            "javascript:alert(1)",
            "http://a b/",
            "http://x/\n",
        ] {
            assert!(check_webui_url(bad).is_err(), "{bad:?}");
        }
        let long = format!("http://x/{}", "a".repeat(MAX_WEBUI_URL_LEN));
        assert!(check_webui_url(&long).is_err());
        // Optional and additive: a registration without it reads as before.
        let r: RegisterFramework =
            serde_json::from_str(r#"{"name": "f", "role": "default"}"#).unwrap();
        assert_eq!(r.webui_url, None);
    }

    #[test]
    fn register_framework_minimal_and_strict() {
        let r: RegisterFramework =
            serde_json::from_str(r#"{"name": "hello", "role": "eng/batch"}"#).unwrap();
        assert_eq!(r.role.as_str(), "eng/batch");
        assert!(r.framework_id.is_none());
        let err = serde_json::from_str::<RegisterFramework>(
            r#"{"name": "hello", "role": "eng", "rol": "x"}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field `rol`"), "{err}");
        assert!(
            serde_json::from_str::<RegisterFramework>(r#"{"name": "x", "role": "Bad Role"}"#)
                .is_err()
        );
    }

    /// Found by the hostile suite: a framework holding offers of an agent of 1e9 cpus and of
    /// another agent made `GET /api/v1/state` unreadable with these types (its `offered` and its
    /// role's `allocated` were over the per-amount bound of requests).
    #[test]
    fn sums_over_agents_may_exceed_the_request_bound() {
        let role = r#"{"path": "", "weight": 1, "allocated": {"cpus": 1000000014},
                "dominant_share": 1, "children": [], "frameworks": []}"#;
        let node: RoleNode = serde_json::from_str(role).unwrap();
        assert_eq!(node.allocated.units("cpus"), 1_000_000_014.0);
        let framework = format!(
            r#"{{"framework_id": "{}", "name": "f", "role": "eng", "state": "connected",
                "suppressed": false, "failover_timeout_s": 1, "used": {{"mem": 2e9}},
                "offered": {{"cpus": 1.5e9}}, "dominant_share": 1, "active_tasks": 0,
                "registered_at": "2026-01-01T00:00:00Z"}}"#,
            FrameworkId::new()
        );
        let info: FrameworkInfo = serde_json::from_str(&framework).unwrap();
        assert_eq!(info.offered.units("cpus"), 1.5e9);
        assert_eq!(info.used.units("mem"), 2e9);
        // Requests keep the strict bound, and sums have one too.
        let err = serde_json::from_str::<RegisterFramework>(
            r#"{"name": "x", "role": "eng", "demand": {"cpus": 1.5e9}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("larger than the maximum"), "{err}");
        let huge = role.replace("1000000014", "1e16");
        assert!(serde_json::from_str::<RoleNode>(&huge).is_err());
    }

    #[test]
    fn reconcile_defaults_to_all() {
        let r: ReconcileRequest = serde_json::from_str("{}").unwrap();
        assert!(r.task_ids.is_empty());
    }
}
