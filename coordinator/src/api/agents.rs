//! The agent API on the coordinator: register (and re-register), heartbeat, status updates.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::messages::{AgentList, AgentRegistered, Empty, RegisterAgent, StatusBatch};
use protocol::{AgentId, TaskStatus};

use super::auth::Caller;
use super::error::ApiError;
use super::extract::{Body, Id};
use super::input;
use super::params::AgentPath;
use super::Route;
use crate::runtime::Coordinator;

/// Routes under `/api/v1/agents`.
pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/agents", register),
        Route::get("/api/v1/agents", list),
        Route::post("/api/v1/agents/{id}/heartbeat", heartbeat),
        Route::post("/api/v1/agents/{id}/status", status),
        Route::post("/api/v1/agents/{id}/statuses", statuses),
    ]
}

#[utoipa::path(post, path = "/api/v1/agents", tag = "agents", operation_id = "register_agent",
    summary = "Register (or re-register) an agent",
    request_body = RegisterAgent,
    responses(
        (status = 201, description = "A new agent", body = AgentRegistered),
        (status = 200, description = "Re-registered", body = AgentRegistered),
    ))]
async fn register(
    State(c): State<Coordinator>,
    caller: Caller,
    Body(req): Body<RegisterAgent>,
) -> Result<Response, ApiError> {
    let req = input::agent_registration(req)?;
    let (agent_id, created, heartbeat_interval_s, agent_timeout_s) = c.run(|s, now, fx| {
        let owner = caller.register_agent(s, req.agent_id)?;
        let kept = req.agent_id.and_then(|id| s.kept_agent(id));
        let (id, new) = s.register_agent(req, now, fx)?;
        if let Some(owner) = owner {
            s.set_agent_owner(id, owner);
        }
        // Kept so that an agent that never comes back after a restart or failover is
        // reported lost (see `crate::store`); written only when it changed.
        if let Some(change) = s.stored_agent(id, kept.as_ref(), now) {
            fx.push(crate::state::Effect::Persist(change));
        }
        Ok::<_, ApiError>((id, new, s.agent_heartbeat_s(), s.agent_timeout_s()))
    })?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(AgentRegistered {
            agent_id,
            heartbeat_interval_s,
            agent_timeout_s: Some(agent_timeout_s),
        }),
    )
        .into_response())
}

#[utoipa::path(get, path = "/api/v1/agents", tag = "agents", operation_id = "list_agents",
    summary = "List the agents",
    responses((status = 200, description = "Every known agent", body = AgentList)))]
async fn list(State(c): State<Coordinator>) -> Json<AgentList> {
    Json(AgentList {
        agents: c.read(|s| s.agents()),
    })
}

#[utoipa::path(post, path = "/api/v1/agents/{id}/heartbeat", tag = "agents",
    summary = "An agent's heartbeat",
    params(AgentPath),
    request_body = Empty,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn heartbeat(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<AgentId>,
    Body(_): Body<Empty>,
) -> Result<Json<Empty>, ApiError> {
    c.run(|s, now, _| {
        caller.agent(s, id)?;
        Ok::<_, ApiError>(s.agent_heartbeat(id, now)?)
    })?;
    Ok(Json(Empty {}))
}

#[utoipa::path(post, path = "/api/v1/agents/{id}/status", tag = "agents",
    summary = "One task status update from the agent",
    params(AgentPath),
    request_body = TaskStatus,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn status(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<AgentId>,
    Body(status): Body<TaskStatus>,
) -> Result<Json<Empty>, ApiError> {
    let ended = c.run(|s, now, fx| {
        caller.agent(s, id)?;
        let ended = s.first_ends(std::slice::from_ref(&status));
        s.agent_status(id, status, now, fx)?;
        Ok::<_, ApiError>(ended)
    })?;
    ended.iter().for_each(|st| c.metrics().count_task_end(st));
    Ok(Json(Empty {}))
}

#[utoipa::path(post, path = "/api/v1/agents/{id}/statuses", tag = "agents",
    summary = "Several task status updates from the agent, all or none",
    params(AgentPath),
    request_body = StatusBatch,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn statuses(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<AgentId>,
    Body(batch): Body<StatusBatch>,
) -> Result<Json<Empty>, ApiError> {
    let ended = c.run(|s, now, fx| {
        caller.agent(s, id)?;
        let ended = s.first_ends(&batch.statuses);
        s.agent_statuses(id, batch.statuses, now, fx)?;
        Ok::<_, ApiError>(ended)
    })?;
    ended.iter().for_each(|st| c.metrics().count_task_end(st));
    Ok(Json(Empty {}))
}
