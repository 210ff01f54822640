//! The native API's part of the OpenAPI 3.1 document (`crate::router::openapi` assembles the
//! whole): [`NativeDoc`], every annotated handler of this module's routes, in the order of the
//! book's API reference; the parameter lists of the annotations (path and query parameters, as
//! [`utoipa::IntoParams`] structs); and the schemas of answers the handlers write without one
//! Rust type (the dashboard's views, the history samples, `/health`).

use std::collections::BTreeMap;

use protocol::messages::{AgentInfo, FrameworkInfo, TaskInfo};
use protocol::{AgentId, FrameworkId, Offer, TaskState};
use serde::Serialize;
use utoipa::{IntoParams, OpenApi, ToSchema};

/// The native API's operations, in the order of the book's API reference.
#[derive(OpenApi)]
#[openapi(paths(
    super::frameworks::register,
    super::frameworks::list,
    super::frameworks::remove,
    super::frameworks::events,
    super::frameworks::accept,
    super::frameworks::accept_many,
    super::frameworks::gang_accept,
    super::frameworks::decline,
    super::frameworks::suppress,
    super::frameworks::revive,
    super::frameworks::kill,
    super::frameworks::acknowledge,
    super::frameworks::acknowledge_many,
    super::frameworks::reconcile,
    super::reservations::reserve,
    super::reservations::unreserve,
    super::agents::register,
    super::agents::list,
    super::agents::heartbeat,
    super::agents::status,
    super::agents::statuses,
    super::drain::drain,
    super::drain::reactivate,
    super::operator::offers,
    super::operator::offer_events,
    super::operator::state,
    super::operator::tasks,
    super::operator::roles,
    super::operator::explain,
    super::operator::set_weight,
    super::operator::backup,
    super::operator::metrics,
    super::operator::health,
    super::output::output,
    super::task_kill::kill_task,
    super::ui::page,
    super::ui::script,
    super::ui::style,
    super::ui::history,
    super::ui::agent_page,
    super::ui::agent_view,
    super::ui::framework_view,
    super::session::login,
    super::session::logout,
))]
pub struct NativeDoc;

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/// A framework in the path.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct FrameworkPath {
    /// The framework's id.
    pub id: FrameworkId,
}

/// An agent in the path.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AgentPath {
    /// The agent's id.
    pub id: AgentId,
}

/// A role in the path (`PUT /api/v1/roles/{path}`).
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RolePathParam {
    /// The role's path, e.g. `eng/batch` (its slashes are part of the path).
    pub path: String,
}

/// A task of a framework in the path.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct OutputPath {
    /// The framework's id.
    pub id: FrameworkId,
    /// The task's id.
    pub task_id: String,
}

/// `GET /api/v1/offers`' filters.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OffersQuery {
    /// Only this framework's offers.
    pub framework_id: Option<FrameworkId>,
    /// Only offers of this agent.
    pub agent_id: Option<AgentId>,
}

/// `GET /api/v1/tasks`' filters.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TasksQuery {
    /// Only this framework's tasks.
    pub framework_id: Option<FrameworkId>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
}

/// `GET /api/v1/history`'s parameter.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Only samples numbered above this (default 0: all).
    pub after: Option<u64>,
}

/// `GET /api/v1/dashboard/agents`' page.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AgentPageQuery {
    /// Agents to skip (default 0).
    pub offset: Option<u64>,
    /// Agents in the page, 1 to 500 (default 50).
    pub limit: Option<u64>,
}

/// `GET /api/v1/frameworks/{id}/tasks/{task_id}/output`'s parameters.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutputQuery {
    /// `stdout` (the default) or `stderr`.
    pub file: Option<String>,
    /// Where to start reading, in bytes (default: the last `limit` bytes).
    pub offset: Option<u64>,
    /// The most bytes to read (default and at most 1 MiB).
    pub limit: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// Answers without a Rust type of their own
// ---------------------------------------------------------------------------------------------

/// `GET /health`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `leader`, `follower` or `standalone`.
    pub role: String,
    /// The leader's URL, when one is known.
    pub leader: Option<String>,
}

/// `GET /api/v1/dashboard/agents`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentPage {
    /// Agents in all.
    pub total: usize,
    /// The offset asked for.
    pub offset: usize,
    /// The page.
    pub agents: Vec<AgentInfo>,
}

/// `GET /api/v1/dashboard/agents/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    /// The agent.
    pub agent: AgentInfo,
    /// Its tasks in all.
    pub task_count: usize,
    /// Its tasks, the first 500.
    pub tasks: Vec<TaskInfo>,
    /// Its outstanding offers.
    pub offers: Vec<Offer>,
}

/// `GET /api/v1/dashboard/frameworks/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FrameworkView {
    /// The framework.
    pub framework: FrameworkInfo,
    /// Its tasks in all.
    pub task_count: usize,
    /// Its tasks, the first 500.
    pub tasks: Vec<TaskInfo>,
    /// Its outstanding offers.
    pub offers: Vec<Offer>,
}

/// One sample of `GET /api/v1/history` (`crate::history::Sample`).
#[derive(Debug, Serialize, ToSchema)]
pub struct HistorySample {
    /// Increases by one per sample, from 1.
    pub seq: u64,
    /// When it was taken, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Offers created and ended since the coordinator started.
    pub offers: HistoryOffers,
    /// Outstanding offers.
    pub outstanding_offers: usize,
    /// Tasks by state name.
    pub tasks: BTreeMap<String, usize>,
    /// Agents by state.
    pub agents: BTreeMap<String, usize>,
    /// Each resource across the active agents: its total, used and offered amounts.
    #[schema(value_type = BTreeMap<String, Object>)]
    pub resources: BTreeMap<String, serde_json::Value>,
    /// Dominant share per role path (the root is `""`), the largest.
    pub roles: BTreeMap<String, f64>,
    /// Dominant share per framework id, the largest.
    pub frameworks: BTreeMap<String, f64>,
}

/// The offer counters of a [`HistorySample`] (`crate::history::OfferCounts`).
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryOffers {
    /// Offers made.
    pub created: u64,
    /// Offers accepted.
    pub accepted: u64,
    /// Offers declined.
    pub declined: u64,
    /// Offers rescinded.
    pub rescinded: u64,
    /// Offers expired unanswered.
    pub expired: u64,
}
