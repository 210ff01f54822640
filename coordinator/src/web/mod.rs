//! What the native API ([`crate::api`]) and the Mesos API ([`crate::mesos`]) share, below
//! both: the [`Route`] of the route table, the [`auth`] middleware and [`auth::Caller`]
//! extractor, the error body ([`error::ApiError`]), wire requests validated into the books'
//! inputs ([`input`]), and registering a framework ([`register`]), which both APIs do.
//!
//! - [`auth`]: the middleware (415 on non-JSON bodies; with credentials, 401 / 403 by token
//!   and route) and the ownership checks handlers run.
//! - [`error`]: [`error::ApiError`], every failure as a status and an error body.
//! - [`input`]: wire requests converted to the registry's domain inputs, validated.
//! - [`register`]: registering (or re-registering) a framework.
//! - [`requests`]: the middleware that counts requests by route, for `/metrics`.

pub mod auth;
pub mod error;
pub mod input;
pub mod register;
pub mod requests;

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::MethodRouter;

use crate::runtime::Coordinator;

/// One route of the API: a method, axum's path pattern (`{id}` a parameter, `{*path}` the rest
/// of the path) and the handler of that method there.
pub struct Route {
    /// The method (a `GET` route answers `HEAD` too).
    pub method: Method,
    /// axum's path pattern, e.g. `/api/v1/frameworks/{id}/accept`.
    pub path: &'static str,
    /// The handler, for [`Route::method`] only.
    pub(crate) handler: MethodRouter<Coordinator>,
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
