//! Dynamic reservations: `POST /api/v1/frameworks/{id}/reserve` and
//! `POST /api/v1/frameworks/{id}/unreserve`, each `{"offer_id", "resources"}` on an offer the
//! framework holds, answered with `{"role", "reserved"}` (the agent's dynamic reservation for
//! the framework's role afterwards). The rules are in `crate::state` (`reservations.rs`).

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use protocol::reservation::{ReserveRequest, ReserveResponse};
use protocol::FrameworkId;

use super::auth::Caller;
use super::error::ApiError;
use super::extract::{Body, Id};
use crate::runtime::Coordinator;
use crate::state::ReservationOp;

/// The reserve / unreserve routes (merged into the framework API).
pub fn router() -> Router<Coordinator> {
    Router::new()
        .route("/api/v1/frameworks/{id}/reserve", post(reserve))
        .route("/api/v1/frameworks/{id}/unreserve", post(unreserve))
}

async fn reserve(
    State(c): State<Coordinator>,
    caller: Caller,
    Id(id): Id<FrameworkId>,
    Body(req): Body<ReserveRequest>,
) -> Result<Json<ReserveResponse>, ApiError> {
    operate(c, caller, id, req, ReservationOp::Reserve).await
}

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
