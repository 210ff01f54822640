//! The operator API: outstanding offers and their live stream, the cluster state and its parts,
//! the role tree (and run-time weights), why a framework is not offered, metrics and health.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use protocol::messages::{Empty, FrameworkExplanation, OfferList, RoleNode, SetWeight};
use protocol::{AgentId, FrameworkId, RolePath};

use super::auth::Caller;
use super::error::ApiError;
use super::extract::{Body, Id};
use super::sse;
use crate::runtime::Coordinator;
use crate::state::task_list_json;

/// The operator routes, `/metrics` and `/health` (the dashboard's are in [`super::ui`]).
pub fn router() -> Router<Coordinator> {
    Router::new()
        .route("/api/v1/offers", get(offers))
        .route("/api/v1/offers/events", get(offer_events))
        .route("/api/v1/state", get(state))
        .route("/api/v1/tasks", get(tasks))
        .route("/api/v1/roles", get(roles))
        .route("/api/v1/frameworks/{id}/explain", get(explain))
        .route("/api/v1/roles/{*path}", put(set_weight))
        .route("/metrics", get(metrics))
        .route("/health", get(health))
}

/// Parses an optional id query parameter.
pub(super) fn id_param<T: std::str::FromStr>(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, ApiError> {
    query
        .get(name)
        .map(|raw| {
            raw.parse::<T>().map_err(|_| {
                ApiError::BadQuery(format!("{name}={raw:?} is not a valid id (a UUID)"))
            })
        })
        .transpose()
}

pub(super) fn check_query(
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
    allowed: &[&str],
) -> Result<HashMap<String, String>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    if let Some(unknown) = query.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::BadQuery(format!(
            "unknown parameter {unknown:?}; allowed: {}",
            allowed.join(", ")
        )));
    }
    Ok(query)
}

async fn offers(
    State(c): State<Coordinator>,
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<OfferList>, ApiError> {
    let query = check_query(query, &["framework_id", "agent_id"])?;
    let framework: Option<FrameworkId> = id_param(&query, "framework_id")?;
    let agent: Option<AgentId> = id_param(&query, "agent_id")?;
    Ok(Json(OfferList {
        offers: c.read(|s| s.offers(framework, agent)),
    }))
}

async fn offer_events(State(c): State<Coordinator>) -> Response {
    sse::offer_stream(&c).into_response()
}

async fn explain(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
) -> Result<Json<FrameworkExplanation>, ApiError> {
    let now = c.now();
    c.read(|s| {
        caller.framework(s, id)?;
        Ok(Json(s.explain(id, &now)?))
    })
}

/// The books are copied under the lock (tasks as cached JSON, see `State::tasks_json`), then
/// written out off the async workers: a cluster of 100,000 tasks is tens of megabytes.
async fn state(State(c): State<Coordinator>) -> Result<Response, ApiError> {
    let snapshot = c.read(|s| s.cluster_snapshot());
    let body = tokio::task::spawn_blocking(move || snapshot.to_json())
        .await
        .map_err(|_| ApiError::Internal)?
        .map_err(|e| {
            tracing::error!(error = %e, "cannot serialize the cluster state");
            ApiError::Internal
        })?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn tasks(
    State(c): State<Coordinator>,
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let query = check_query(query, &["framework_id", "state"])?;
    let framework: Option<FrameworkId> = id_param(&query, "framework_id")?;
    let state = query
        .get("state")
        .map(|raw| raw.parse::<protocol::TaskState>())
        .transpose()
        .map_err(|e| ApiError::BadQuery(format!("state: {e}")))?;
    let body = task_list_json(&c.read(|s| s.tasks_json_in(framework, state)));
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn roles(State(c): State<Coordinator>) -> Json<RoleNode> {
    Json(c.read(|s| s.roles()))
}

async fn set_weight(
    State(c): State<Coordinator>,
    Path(path): Path<String>,
    Body(req): Body<SetWeight>,
) -> Result<Json<Empty>, ApiError> {
    let role = RolePath::new(path).map_err(|e| ApiError::BadPath(e.to_string()))?;
    // Written first, applied once durable (see `run_write_first`). Weight, guarantee and limit
    // are checked together: a refusal changes none of them.
    let plan = req.clone();
    c.run_write_first(
        |s, _| Ok::<_, ApiError>((role.clone(), s.plan_role_update(&role, &plan)?)),
        move |s, role, _, fx| {
            s.apply_role_update(&role, &req, fx);
            Ok(())
        },
    )
    .await?;
    Ok(Json(Empty {}))
}

async fn metrics(State(c): State<Coordinator>) -> Response {
    let gauges = c.read(|s| s.gauges());
    let text = c.metrics().render(&gauges);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// `{"role": "leader" | "follower" | "standalone", "leader": URL | null}`.
async fn health(State(c): State<Coordinator>) -> Json<serde_json::Value> {
    let (role, leader) = c.ha_status().get();
    Json(serde_json::json!({ "role": role.as_str(), "leader": leader }))
}
