//! Dynamic reservations: `POST /api/v1/frameworks/{id}/reserve` and
//! `POST /api/v1/frameworks/{id}/unreserve`, each `{"offer_id", "resources"}` on an offer the
//! framework holds, answered with `{"role", "reserved"}` (the agent's dynamic reservation for
//! the framework's role afterwards). The rules are in `crate::state` (`reservations.rs`).

use axum::extract::State;
use axum::Json;
use protocol::reservation::{ReserveRequest, ReserveResponse};
use protocol::FrameworkId;

use super::auth::Caller;
use super::error::ApiError;
use super::extract::{Body, Id};
use super::params::FrameworkPath;
use super::Route;
use crate::runtime::Coordinator;
use crate::state::ReservationOp;

/// The reserve / unreserve routes (part of the framework API).
pub fn routes() -> Vec<Route> {
    vec![
        Route::post("/api/v1/frameworks/{id}/reserve", reserve),
        Route::post("/api/v1/frameworks/{id}/unreserve", unreserve),
    ]
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/reserve", tag = "frameworks",
    summary = "Reserve part of an offer for the framework's role",
    params(FrameworkPath),
    request_body = ReserveRequest,
    responses((status = 200, description = "The agent's dynamic reservation for the role afterwards", body = ReserveResponse)))]
async fn reserve(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<ReserveRequest>,
) -> Result<Json<ReserveResponse>, ApiError> {
    operate(c, caller, id, req, ReservationOp::Reserve).await
}

#[utoipa::path(post, path = "/api/v1/frameworks/{id}/unreserve", tag = "frameworks",
    summary = "Give back part of a dynamic reservation on an offer",
    params(FrameworkPath),
    request_body = ReserveRequest,
    responses((status = 200, description = "The agent's dynamic reservation for the role afterwards", body = ReserveResponse)))]
async fn unreserve(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<ReserveRequest>,
) -> Result<Json<ReserveResponse>, ApiError> {
    operate(c, caller, id, req, ReservationOp::Unreserve).await
}

/// Written first, applied once durable (see `Coordinator::run_write_first`): a `200` means the
/// reservation survives a coordinator crash.
async fn operate(
    c: Coordinator,
    caller: Caller,
    id: FrameworkId,
    req: ReserveRequest,
    op: ReservationOp,
) -> Result<Json<ReserveResponse>, ApiError> {
    let out = c
        .run_write_first(
            |s, _| {
                caller.framework(s, id)?;
                let plan = s.plan_reservation(id, &req, op)?;
                let change = plan.change();
                Ok::<_, ApiError>((plan, vec![change]))
            },
            |s, plan, now, fx| Ok(s.commit_reservation(plan, now, fx)?),
        )
        .await?;
    Ok(Json(out))
}
