//! An operator's kill of one task: `POST /api/v1/frameworks/{id}/tasks/{task_id}/kill` (an
//! empty body, or `{}`), for admin operators. It goes the way a framework's own kill goes (the
//! books send the kill to the task's agent, whose update reaches the framework as usual), but
//! also for a framework that is disconnected or has not registered since its tasks were
//! adopted.
//!
//! Answers `200` with the task as it was when the kill was sent ([`TaskInfo`]; the outcome
//! arrives as an update), `404 framework_not_found` or `404 task_not_found` naming the id,
//! `409 task_terminal` naming the task and its state when it has already ended, and
//! `400 invalid_path` for an id that is not one. A refused call changes nothing. The rules are
//! the books' (`State::operator_kill`).

use axum::extract::State;
use axum::Json;
use protocol::messages::{Empty, TaskInfo};

use super::error::ApiError;
use super::extract::{Body, TaskPath};
use super::params::OutputPath;
use super::Route;
use crate::runtime::Coordinator;

/// The operator's task routes.
pub fn routes() -> Vec<Route> {
    vec![Route::post(
        "/api/v1/frameworks/{id}/tasks/{task_id}/kill",
        kill_task,
    )]
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/tasks/{task_id}/kill", tag = "operator",
    summary = "Kill one task (operators)",
    description = "Admin operators only. The kill is sent to the task's agent as a framework's \
        own kill would be; its outcome reaches the framework as a status update. \
        `404 framework_not_found` / `task_not_found` for an unknown id, \
        `409 task_terminal` when the task has already ended.",
    params(OutputPath),
    request_body = Empty,
    responses((status = 200, description = "The task as it was when the kill was sent", body = TaskInfo)))]
async fn kill_task(
    State(c): State<Coordinator>,
    TaskPath(framework, task): TaskPath,
    Body(_): Body<Empty>,
) -> Result<Json<TaskInfo>, ApiError> {
    Ok(Json(
        c.run(|s, _, fx| s.operator_kill(framework, task, fx))?,
    ))
}
