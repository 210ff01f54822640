//! The native API's path and query parameters, as [`utoipa::IntoParams`] structs: the handlers
//! extract them and their OpenAPI annotations ([`super::openapi`]) list them.

use protocol::{AgentId, FrameworkId, TaskState};
use utoipa::IntoParams;

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
