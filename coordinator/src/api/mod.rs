//! The HTTP API (`docs/src/reference/api.md`), on axum: one router per API, merged in [`app`].
//!
//! Handlers only translate: they extract and validate the request (bad input is a 4xx with the
//! error body, see [`error::ApiError`]), call one registry operation through the
//! [`Coordinator`] handle, and turn the result into a response.
//!
//! - [`auth`]: the middleware (415 on non-JSON bodies; with credentials, 401 / 403 by token
//!   and route) and the ownership checks handlers run.
//! - [`frameworks`]: the framework (scheduler) API and its SSE stream.
//! - [`agents`]: the agent API on the coordinator.
//! - [`drain`]: draining and reactivating agents, for admin operators.
//! - [`reservations`]: a framework's dynamic reserve / unreserve on an offer it
//!   holds.
//! - [`output`]: a task's stdout / stderr, read from its agent for operators.
//! - [`operator`]: offers, offer events, state, roles, metrics, health.
//! - [`ui`]: the dashboard page and the reads it polls (history, agent pages, detail views).
//! - [`sse`]: the two event streams.
//! - [`extract`]: JSON body and path-id extractors with API error bodies.
//! - [`input`]: wire requests converted to the registry's domain inputs, validated.
//! - [`limit`]: the per-client request rate limit (429 with `Retry-After`).
//! - [`error`]: [`error::ApiError`], every failure as a status and an error body.

pub mod agents;
pub mod auth;
pub mod drain;
pub mod error;
pub mod extract;
pub mod frameworks;
pub mod input;
pub mod limit;
pub mod operator;
pub mod output;
pub mod reservations;
pub mod sse;
pub mod ui;

use axum::extract::DefaultBodyLimit;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;

use crate::runtime::Coordinator;
use error::ApiError;

/// The whole API for one coordinator. Request bodies are limited to the configured
/// `max_body_bytes` (413 beyond); with `rate_limit_per_s` set, each client's request rate too
/// (429 beyond, see [`limit`]).
pub fn app(coordinator: Coordinator) -> Router {
    let limit = coordinator.config().max_body_bytes;
    let rate = coordinator.config().rate_limit_per_s;
    let limiter = (rate > 0.0).then(|| {
        std::sync::Arc::new(limit::RateLimiter::new(
            rate,
            coordinator.config().rate_limit_burst,
        ))
    });
    let router = Router::new()
        .merge(frameworks::router())
        .merge(agents::router())
        .merge(drain::router())
        .merge(reservations::router())
        .merge(operator::router())
        .merge(output::router())
        .merge(ui::router())
        // The Mesos v1 scheduler API, on the same books: see `crate::mesos`.
        .merge(crate::mesos::router(coordinator.clone()))
        .fallback(|uri: Uri| async move { ApiError::NoRoute(uri.path().to_owned()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::middleware::from_fn_with_state(
            coordinator.clone(),
            auth::guard,
        ))
        .layer(DefaultBodyLimit::max(limit))
        .layer(CatchPanicLayer::custom(panic_response));
    let router = match limiter {
        Some(limiter) => router.layer(axum::middleware::from_fn_with_state(
            (coordinator.clone(), limiter),
            limit::limit,
        )),
        None => router,
    };
    // HA: a follower redirects to the leader before anything else runs.
    let router = router.layer(axum::middleware::from_fn_with_state(
        coordinator.clone(),
        crate::ha::redirect::redirect,
    ));
    router.with_state(coordinator)
}

/// A handler panicked (a bug): log it and answer 500 with the error body; the process lives on.
fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(panic = %what, "handler panicked");
    ApiError::Internal.into_response()
}
