//! The middleware that counts every request by its route into the coordinator's
//! [`RouteCounters`](crate::request_counts::RouteCounters) (see [`crate::request_counts`]).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::runtime::Coordinator;

/// The middleware that counts every request by its route (see the module docs).
pub async fn count(State(c): State<Coordinator>, req: Request, next: Next) -> Response {
    let Some(routes) = c.metrics().routes() else {
        return next.run(req).await;
    };
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let slot = routes.slot(req.method(), path);
    let started = Instant::now();
    let response = next.run(req).await;
    let too_large = response.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE;
    routes.count(slot, started.elapsed(), too_large);
    response
}
