//! Drain and maintenance routes (issue #17), for admin operators:
//! `POST /api/v1/agents/{id}/drain` (`{"deadline_s": N}`) and
//! `POST /api/v1/agents/{id}/reactivate` (`{}`). Both answer the agent's state afterwards
//! ([`AgentMaintenance`]); an unknown agent is 404 `agent_not_found`, a bad deadline 400
//! `invalid_field` naming `deadline_s`, and a refused call changes nothing. Reactivating an
//! agent that is not draining is 200 and changes nothing (idempotent, as a retry should be).
//! The rules are the registry's (`State::drain_agent`).

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use protocol::maintenance::{AgentMaintenance, DrainAgent};
use protocol::messages::Empty;
use protocol::AgentId;

use super::error::ApiError;
use super::extract::{Body, Id};
use crate::runtime::Coordinator;

/// The drain and reactivate routes.
pub fn router() -> Router<Coordinator> {
    Router::new()
        .route("/api/v1/agents/{id}/drain", post(drain))
        .route("/api/v1/agents/{id}/reactivate", post(reactivate))
}

async fn drain(
    State(c): State<Coordinator>,
    Id(id): Id<AgentId>,
    Body(req): Body<DrainAgent>,
) -> Result<Json<AgentMaintenance>, ApiError> {
    req.validate().map_err(|reason| ApiError::InvalidField {
        field: DrainAgent::FIELD,
        reason,
    })?;
    let answer = c.run(|s, now, fx| s.drain_agent(id, req.deadline_s, now, fx))?;
    Ok(Json(answer))
}

async fn reactivate(
    State(c): State<Coordinator>,
    Id(id): Id<AgentId>,
    Body(_): Body<Empty>,
) -> Result<Json<AgentMaintenance>, ApiError> {
    Ok(Json(c.run(|s, _, fx| s.reactivate_agent(id, fx))?))
}
