//! The native HTTP API (`docs/src/reference/api.md`), on axum: one route list per part, joined
//! in [`routes`]; `crate::router` adds the Mesos API's routes and builds the router.
//!
//! Handlers only translate: they extract and validate the request (bad input is a 4xx with the
//! error body, see [`error::ApiError`]), call one registry operation through the
//! [`Coordinator`](crate::runtime::Coordinator) handle, and turn the result into a response.
//!
//! - [`frameworks`]: the framework (scheduler) API and its SSE stream.
//! - [`agents`]: the agent API on the coordinator.
//! - [`drain`]: draining and reactivating agents, for admin operators.
//! - [`reservations`]: a framework's dynamic reserve / unreserve on an offer it
//!   holds.
//! - [`output`]: a task's stdout / stderr, read from its agent for operators.
//! - [`task_kill`]: an admin operator's kill of one task.
//! - [`operator`]: offers, offer events, state, roles, metrics, health.
//! - [`session`]: the dashboard's login and logout (an `HttpOnly` cookie carrying the token).
//! - [`ui`]: the dashboard page and the reads it polls (history, agent pages, detail views).
//! - [`sse`]: the two event streams.
//! - [`extract`]: JSON body and path-id extractors with API error bodies.
//! - [`limit`]: the per-client request rate limit (429 with `Retry-After`).
//! - [`openapi`]: this API's operations for the OpenAPI document (`crate::router::openapi`
//!   assembles and serves it); [`params`]: the path and query parameters the handlers extract
//!   and the document lists; [`answers`]: the schemas of answers without a Rust type of their
//!   own.
//! - [`auth`], [`error`], [`input`] and [`Route`]: shared with the Mesos API, so they live in
//!   `crate::web` and are re-exported here under their old paths.
//!
//! Each [`Route`] is a method, a path and its handler, and the OpenAPI document must list the
//! same (method, path) pairs as the router (the `coordinator/tests/coordinator/openapi.rs`
//! suite compares the two).

pub mod agents;
pub mod answers;
pub mod drain;
pub mod extract;
pub mod frameworks;
pub mod limit;
pub mod openapi;
pub mod operator;
pub mod output;
pub mod params;
pub mod reservations;
pub mod session;
pub mod sse;
pub mod task_kill;
pub mod ui;

pub use crate::web::{auth, error, input, Route};

/// Every route of the native API (the Mesos API's and the OpenAPI document's are added by
/// `crate::router::routes`).
pub fn routes() -> Vec<Route> {
    [
        frameworks::routes(),
        agents::routes(),
        drain::routes(),
        reservations::routes(),
        operator::routes(),
        output::routes(),
        task_kill::routes(),
        ui::routes(),
        session::routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
