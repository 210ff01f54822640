//! The framework (scheduler) API: register, the event stream, accept, decline, suppress,
//! revive, kill, acknowledge, reconcile, and removal.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::messages::{
    AcceptBatch, AcceptBatchResponse, AcceptRequest, AcceptResponse, AcceptResult,
    AcknowledgeBatch, AcknowledgeBatchResponse, AcknowledgeRequest, DeclineRequest, Empty,
    FrameworkList, FrameworkRegistered, KillRequest, ReconcileRequest, RegisterFramework,
    RequestLimits, ReviveRequest,
};
use protocol::FrameworkId;

use super::auth::Caller;
use super::error::ApiError;
use super::extract::{Body, Id};
use super::input;
use super::params::FrameworkPath;
use super::sse;
use super::Route;
use crate::runtime::Coordinator;
pub use crate::web::register::{register_framework, Registered};

/// Routes under `/api/v1/frameworks`.
pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/frameworks", register),
        Route::get("/api/v1/frameworks", list),
        Route::delete("/api/v1/frameworks/{id}", remove),
        Route::get("/api/v1/frameworks/{id}/events", events),
        Route::post("/api/v1/frameworks/{id}/accept", accept),
        Route::post("/api/v1/frameworks/{id}/accepts", accept_many),
        Route::post("/api/v1/frameworks/{id}/gang-accepts", gang_accept),
        Route::post("/api/v1/frameworks/{id}/decline", decline),
        Route::post("/api/v1/frameworks/{id}/suppress", suppress),
        Route::post("/api/v1/frameworks/{id}/revive", revive),
        Route::post("/api/v1/frameworks/{id}/kill", kill),
        Route::post("/api/v1/frameworks/{id}/acknowledge", acknowledge),
        Route::post("/api/v1/frameworks/{id}/acknowledgements", acknowledge_many),
        Route::post("/api/v1/frameworks/{id}/reconcile", reconcile),
    ]
}

type Ok200 = Result<Json<Empty>, ApiError>;

#[utoipa::path(post, path = "/api/v1/frameworks", tag = "frameworks", operation_id = "register_framework",
    summary = "Register (or re-register) a framework",
    request_body = RegisterFramework,
    responses(
        (status = 201, description = "A new framework", body = FrameworkRegistered),
        (status = 200, description = "Re-registered within its failover timeout", body = FrameworkRegistered),
    ))]
async fn register(
    State(c): State<Coordinator>,
    caller: Caller,
    Body(req): Body<RegisterFramework>,
) -> Result<Response, ApiError> {
    let registered = register_framework(&c, &caller, req).await?;
    let status = if registered.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(FrameworkRegistered {
            framework_id: registered.framework_id,
            heartbeat_interval_s: registered.heartbeat_interval_s,
            limits: Some(request_limits(c.config())),
        }),
    )
        .into_response())
}

#[utoipa::path(get, path = "/api/v1/frameworks", tag = "frameworks", operation_id = "list_frameworks",
    summary = "List the frameworks",
    responses((status = 200, description = "Every registered framework", body = FrameworkList)))]
async fn list(State(c): State<Coordinator>) -> Json<FrameworkList> {
    Json(FrameworkList {
        frameworks: c.read(|s| s.frameworks()),
    })
}

#[utoipa::path(get, path = "/api/v1/frameworks/{id}/events", tag = "frameworks",
    summary = "The framework's event stream",
    description = "Server-sent events: `subscribed` first, then `offers`, `rescind`, `update`, `preemption`, `error` and `heartbeat`; each `data` line is the JSON of the event named by its `event` line.",
    params(FrameworkPath),
    responses((status = 200, description = "The stream, until the client disconnects", content_type = "text/event-stream", body = String)))]
async fn events(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
) -> Result<Response, ApiError> {
    // The owner of a registered framework never changes, so checking before subscribing is
    // as good as checking under the same lock.
    c.read(|s| caller.framework(s, id))?;
    let (rx, generation) = c.subscribe(id)?;
    Ok(sse::framework_stream(c, id, rx, generation).into_response())
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/accept", tag = "frameworks",
    summary = "Accept offers, launching tasks",
    params(FrameworkPath),
    request_body = AcceptRequest,
    responses((status = 200, description = "The tasks sent to the agent", body = AcceptResponse)))]
async fn accept(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<AcceptRequest>,
) -> Result<Json<AcceptResponse>, ApiError> {
    let req = input::accept(req)?;
    let launched = c.run(|s, now, fx| {
        caller.framework(s, id)?;
        Ok::<_, ApiError>(s.accept(id, req, now, fx)?)
    })?;
    Ok(Json(AcceptResponse { launched }))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/accepts", tag = "frameworks",
    summary = "Accept offers of several agents in one call",
    params(FrameworkPath),
    request_body = AcceptBatch,
    responses((status = 200, description = "One result per accept, in order: the tasks sent, or why that accept changed nothing", body = AcceptBatchResponse)))]
async fn accept_many(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<AcceptBatch>,
) -> Result<Json<AcceptBatchResponse>, ApiError> {
    // A malformed accept refuses the whole call; an offer gone since (the race every accept
    // can lose) refuses only its own accept.
    let pending = req.pending_tasks;
    let accepts = input::accept_batch(req)?;
    let results = c.run(|s, now, fx| {
        caller.framework(s, id)?;
        let results = s.accept_many(id, accepts, now, fx)?;
        if pending.is_some() {
            s.want_tasks(id, pending, fx)?;
        }
        Ok::<_, ApiError>(results)
    })?;
    let results = results
        .into_iter()
        .map(|r| match r {
            Ok(launched) => AcceptResult {
                status: 200,
                launched,
                error: None,
            },
            Err(e) => {
                let e = ApiError::from(e);
                AcceptResult {
                    status: e.status().as_u16(),
                    launched: Vec::new(),
                    error: Some(e.detail()),
                }
            }
        })
        .collect();
    Ok(Json(AcceptBatchResponse { results }))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/gang-accepts", tag = "frameworks",
    summary = "Launch a gang from offers of several agents, all or none",
    params(FrameworkPath),
    request_body = protocol::gang::GangAccept,
    responses((status = 200, description = "Every member was sent to its agent; the members end together (`gang_failed`)", body = AcceptResponse)))]
async fn gang_accept(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<protocol::gang::GangAccept>,
) -> Result<Json<AcceptResponse>, ApiError> {
    let (gang_id, accepts) = input::gang_accept(req)?;
    let launched = c.run(|s, now, fx| {
        caller.framework(s, id)?;
        Ok::<_, ApiError>(s.accept_together(id, gang_id, accepts, now, fx)?)
    })?;
    Ok(Json(AcceptResponse { launched }))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/decline", tag = "frameworks",
    summary = "Decline offers",
    params(FrameworkPath),
    request_body = DeclineRequest,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn decline(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<DeclineRequest>,
) -> Ok200 {
    let pending = req.pending_tasks;
    let req = input::decline(req)?;
    c.run(|s, now, fx| {
        caller.framework(s, id)?;
        s.decline(id, req, now, fx)?;
        if pending.is_some() {
            s.want_tasks(id, pending, fx)?;
        }
        Ok::<_, ApiError>(())
    })?;
    Ok(Json(Empty {}))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/suppress", tag = "frameworks",
    summary = "Stop receiving offers",
    params(FrameworkPath),
    request_body = Empty,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn suppress(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(_): Body<Empty>,
) -> Ok200 {
    c.run(|s, _, _| {
        caller.framework(s, id)?;
        Ok::<_, ApiError>(s.suppress(id)?)
    })?;
    Ok(Json(Empty {}))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/revive", tag = "frameworks",
    summary = "Receive offers again, clearing decline filters",
    params(FrameworkPath),
    request_body = ReviveRequest,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn revive(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<ReviveRequest>,
) -> Ok200 {
    c.run(|s, now, fx| {
        caller.framework(s, id)?;
        s.revive(id, req.demand, now, fx)?;
        Ok::<_, ApiError>(s.want_tasks(id, req.pending_tasks, fx)?)
    })?;
    Ok(Json(Empty {}))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/kill", tag = "frameworks",
    summary = "Kill a task",
    params(FrameworkPath),
    request_body = KillRequest,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn kill(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<KillRequest>,
) -> Ok200 {
    c.run(|s, _, fx| {
        caller.framework(s, id)?;
        Ok::<_, ApiError>(s.kill(id, req.task_id, fx)?)
    })?;
    Ok(Json(Empty {}))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/acknowledge", tag = "frameworks",
    summary = "Acknowledge a status update",
    params(FrameworkPath),
    request_body = AcknowledgeRequest,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn acknowledge(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<AcknowledgeRequest>,
) -> Ok200 {
    c.run(|s, _, _| {
        caller.framework(s, id)?;
        Ok::<_, ApiError>(s.acknowledge(id, req.task_id, req.update_id)?)
    })?;
    Ok(Json(Empty {}))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/acknowledgements", tag = "frameworks",
    summary = "Acknowledge several status updates",
    params(FrameworkPath),
    request_body = AcknowledgeBatch,
    responses((status = 200, description = "How many were recorded, and the unknown ones", body = AcknowledgeBatchResponse)))]
async fn acknowledge_many(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<AcknowledgeBatch>,
) -> Result<Json<AcknowledgeBatchResponse>, ApiError> {
    let total = req.acknowledgements.len();
    let acks = req
        .acknowledgements
        .into_iter()
        .map(|a| (a.task_id, a.update_id))
        .collect();
    let unknown = c.run(|s, _, _| {
        caller.framework(s, id)?;
        Ok::<_, ApiError>(s.acknowledge_many(id, acks)?)
    })?;
    Ok(Json(AcknowledgeBatchResponse {
        acknowledged: total - unknown.len(),
        unknown: unknown
            .into_iter()
            .map(|(task_id, update_id)| AcknowledgeRequest { task_id, update_id })
            .collect(),
    }))
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/reconcile", tag = "frameworks",
    summary = "Ask for the latest status of tasks",
    params(FrameworkPath),
    request_body = ReconcileRequest,
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn reconcile(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<ReconcileRequest>,
) -> Ok200 {
    c.run(|s, _, fx| {
        caller.framework(s, id)?;
        Ok::<_, ApiError>(s.reconcile(id, req.task_ids, fx)?)
    })?;
    Ok(Json(Empty {}))
}

#[utoipa::path(delete, path = "/api/v1/frameworks/{id}", tag = "frameworks", operation_id = "remove_framework",
    summary = "Remove a framework, killing its tasks",
    params(FrameworkPath),
    responses((status = 200, description = "Done: `{}`", body = Empty)))]
async fn remove(State(c): State<Coordinator>, caller: Caller, Id(id): Id<FrameworkId>) -> Ok200 {
    // Written first, applied once durable: killed tasks cannot be revived if the write fails.
    c.run_write_first(
        |s, _| {
            caller.framework(s, id)?;
            Ok::<_, ApiError>(((), vec![s.plan_removal(id)?]))
        },
        move |s, (), _, fx| Ok(s.remove_written_framework(id, "deleted by request", fx)?),
    )
    .await?;
    Ok(Json(Empty {}))
}

/// What this coordinator accepts in one request, as a registration answer tells it.
fn request_limits(config: &crate::Config) -> RequestLimits {
    RequestLimits {
        max_body_bytes: config.max_body_bytes as u64,
        max_accepts_per_call: AcceptBatch::MAX as u32,
        max_reconcile_tasks: u32::try_from(config.max_stream_queue).unwrap_or(u32::MAX),
    }
}
