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
//! - [`session`]: the dashboard's login and logout (an `HttpOnly` cookie carrying the token).
//! - [`ui`]: the dashboard page and the reads it polls (history, agent pages, detail views).
//! - [`sse`]: the two event streams.
//! - [`extract`]: JSON body and path-id extractors with API error bodies.
//! - [`input`]: wire requests converted to the registry's domain inputs, validated.
//! - [`limit`]: the per-client request rate limit (429 with `Retry-After`).
//! - [`error`]: [`error::ApiError`], every failure as a status and an error body.
//! - [`openapi`]: the OpenAPI 3.1 document of these routes, served at
//!   `GET /api/v1/openapi.json`.
//!
//! The router is built from one table, [`routes`]: each [`Route`] is a method, a path and its
//! handler, and the OpenAPI document must list the same (method, path) pairs (the
//! `coordinator/tests/coordinator/openapi.rs` suite compares the two).

pub mod agents;
pub mod auth;
pub mod drain;
pub mod error;
pub mod extract;
pub mod frameworks;
pub mod input;
pub mod limit;
pub mod openapi;
pub mod operator;
pub mod output;
pub mod reservations;
pub mod session;
pub mod sse;
pub mod ui;

use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;

use crate::runtime::Coordinator;
use error::ApiError;

/// One route of the API: a method, axum's path pattern (`{id}` a parameter, `{*path}` the rest
/// of the path) and the handler of that method there.
pub struct Route {
    /// The method (a `GET` route answers `HEAD` too).
    pub method: Method,
    /// axum's path pattern, e.g. `/api/v1/frameworks/{id}/accept`.
    pub path: &'static str,
    /// The handler, for [`Route::method`] only.
    handler: MethodRouter<Coordinator>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

impl Route {
    /// `GET path`.
    pub fn get<H: Handler<T, Coordinator>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::with(Method::GET, path, axum::routing::get(handler))
    }

    /// `POST path`.
    pub fn post<H: Handler<T, Coordinator>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::with(Method::POST, path, axum::routing::post(handler))
    }

    /// `PUT path`.
    pub fn put<H: Handler<T, Coordinator>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::with(Method::PUT, path, axum::routing::put(handler))
    }

    /// `DELETE path`.
    pub fn delete<H: Handler<T, Coordinator>, T: 'static>(path: &'static str, handler: H) -> Self {
        Self::with(Method::DELETE, path, axum::routing::delete(handler))
    }

    /// A route whose handler is already a method router of `method` alone (one with a state
    /// of its own, as the Mesos API's).
    pub fn with(method: Method, path: &'static str, handler: MethodRouter<Coordinator>) -> Self {
        Self {
            method,
            path,
            handler,
        }
    }
}

/// Every route of the API, the one table [`app`] builds the router from.
pub fn routes(coordinator: &Coordinator) -> Vec<Route> {
    [
        frameworks::routes(),
        agents::routes(),
        drain::routes(),
        reservations::routes(),
        operator::routes(),
        output::routes(),
        ui::routes(),
        session::routes(),
        // The Mesos v1 scheduler API, on the same books: see `crate::mesos`.
        crate::mesos::routes(coordinator.clone()),
        openapi::routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

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
    // Two routes of one path with different methods merge into one method router.
    let router = routes(&coordinator)
        .into_iter()
        .fold(Router::new(), |router, r| router.route(r.path, r.handler))
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
