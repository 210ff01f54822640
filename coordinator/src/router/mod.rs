//! The coordinator's whole router: the native API ([`crate::api`]), the Mesos API
//! ([`crate::mesos`]) and the OpenAPI document of both ([`openapi`]), in one route table,
//! [`routes`], from which [`app`] builds the router with the middleware in front of every route.
//!
//! - [`openapi`]: the OpenAPI 3.1 document of the routes, served at `GET /api/v1/openapi.json`.

pub mod openapi;

use axum::extract::DefaultBodyLimit;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;

use crate::api::limit;
use crate::request_counts::RouteCounters;
use crate::runtime::Coordinator;
use crate::web::error::ApiError;
use crate::web::requests;
use crate::web::{auth, Route};

/// Every route of the coordinator, the one table [`app`] builds the router from: the native
/// API's, the Mesos API's (on the same books) and the OpenAPI document's.
pub fn routes(coordinator: &Coordinator) -> Vec<Route> {
    [
        crate::api::routes(),
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
    let table = routes(&coordinator);
    coordinator.metrics().set_routes(RouteCounters::new(
        table.iter().map(|r| (r.method.clone(), r.path)),
    ));
    // Two routes of one path with different methods merge into one method router.
    let router = table
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
    // Outermost: every request is counted by its route, redirects and refusals included.
    let router = router.layer(axum::middleware::from_fn_with_state(
        coordinator.clone(),
        requests::count,
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
