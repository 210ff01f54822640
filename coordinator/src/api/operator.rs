//! The operator API: outstanding offers and their live stream, the cluster state and its parts,
//! the role tree (and run-time weights), why a framework is not offered, the registry's backup
//! document, metrics and health.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::messages::{
    ClusterState, Empty, FrameworkExplanation, OfferList, RoleNode, SetWeight, TaskList,
};
use protocol::{AgentId, FrameworkId, RolePath};

use super::answers::Health;
use super::auth::Caller;
use super::error::ApiError;
use super::extract::{Body, Id};
use super::params::{FrameworkPath, OffersQuery, RolePathParam, TasksQuery};
use super::sse;
use super::Route;
use crate::runtime::Coordinator;
use crate::state::task_list_json;

/// The operator routes, `/metrics` and `/health` (the dashboard's are in [`super::ui`]).
pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/api/v1/offers", offers),
        Route::get("/api/v1/offers/events", offer_events),
        Route::get("/api/v1/state", state),
        Route::get("/api/v1/tasks", tasks),
        Route::get("/api/v1/roles", roles),
        Route::get("/api/v1/frameworks/{id}/explain", explain),
        Route::put("/api/v1/roles/{*path}", set_weight),
        Route::get("/api/v1/registry/backup", backup),
        Route::get("/metrics", metrics),
        Route::get("/health", health),
    ]
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

#[utoipa::path(get, path = "/api/v1/offers", tag = "operator",
    summary = "The outstanding offers",
    params(OffersQuery),
    responses((status = 200, description = "The offers, filtered by the parameters given", body = OfferList)))]
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

#[utoipa::path(get, path = "/api/v1/offers/events", tag = "operator",
    summary = "The live stream of offers made and ended",
    description = "Server-sent events: `offered`, `accepted`, `declined`, `rescinded`, `expired` and `preemption`, each with its JSON on the `data` line.",
    responses((status = 200, description = "The stream, until the client disconnects", content_type = "text/event-stream", body = String)))]
async fn offer_events(State(c): State<Coordinator>) -> Response {
    sse::offer_stream(&c).into_response()
}

#[utoipa::path(get, path = "/api/v1/frameworks/{id}/explain", tag = "operator",
    summary = "Why a framework is, or is not, getting offers",
    params(FrameworkPath),
    responses((status = 200, description = "The allocator's view of the framework", body = FrameworkExplanation)))]
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
#[utoipa::path(get, path = "/api/v1/state", tag = "operator",
    summary = "The whole cluster state, from one snapshot",
    responses((status = 200, description = "Agents, frameworks, tasks, roles and offers", body = ClusterState)))]
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

#[utoipa::path(get, path = "/api/v1/tasks", tag = "operator",
    summary = "The tasks",
    params(TasksQuery),
    responses((status = 200, description = "The tasks, filtered by the parameters given", body = TaskList)))]
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

#[utoipa::path(get, path = "/api/v1/registry/backup", tag = "operator",
    summary = "Every record of the durable registry, as a backup document",
    description = "The document `coordinator backup` writes and `coordinator restore` reads: \
        format and schema versions, the time, the backend, and every framework, removed \
        framework id, role weight and quota, agent and reservation, read behind every change \
        answered before. Admin operators only (it holds the principals owning frameworks). \
        `409 no_registry` on a coordinator with its books in memory only.",
    responses((status = 200, description = "The backup document", content_type = "application/json", body = Object)))]
async fn backup(State(c): State<Coordinator>) -> Result<Response, ApiError> {
    let read = c.read_registry().ok_or(ApiError::NoRegistry)?;
    let (snapshot, source) = read
        .await
        .map_err(|_| ApiError::Unavailable)?
        .map_err(|e| {
            tracing::error!(error = %e, "cannot read the registry for a backup");
            ApiError::Unavailable
        })?;
    let body = crate::store::backup::Backup::new(&snapshot, source).to_json();
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

#[utoipa::path(get, path = "/api/v1/roles", tag = "operator",
    summary = "The role tree",
    responses((status = 200, description = "The root role and its subtree", body = RoleNode)))]
async fn roles(State(c): State<Coordinator>) -> Json<RoleNode> {
    Json(c.read(|s| s.roles()))
}

#[utoipa::path(put, path = "/api/v1/roles/{path}", tag = "operator",
    summary = "Set a role's weight, guarantee or limit",
    params(RolePathParam),
    request_body = SetWeight,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
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

#[utoipa::path(get, path = "/metrics", tag = "meta",
    summary = "Prometheus metrics",
    responses((status = 200, description = "The Prometheus text format, version 0.0.4", content_type = "text/plain", body = String)))]
async fn metrics(State(c): State<Coordinator>) -> Response {
    let text = c.render_metrics();
    ([(header::CONTENT_TYPE, observe::CONTENT_TYPE)], text).into_response()
}

/// `{"role": "leader" | "follower" | "standalone", "leader": URL | null}`.
#[utoipa::path(get, path = "/health", tag = "meta",
    summary = "Liveness, and this coordinator's part in high availability",
    responses((status = 200, description = "Its role and the leader it knows", body = Health)))]
async fn health(State(c): State<Coordinator>) -> Json<serde_json::Value> {
    let (role, leader) = c.ha_status().get();
    Json(serde_json::json!({ "role": role.as_str(), "leader": leader }))
}
