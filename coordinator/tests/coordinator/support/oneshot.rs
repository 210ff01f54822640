//! [`Api`]: the coordinator's whole router (`coordinator::router::app`) called in process with
//! tower's `ServiceExt::oneshot`: no socket, no port, no background loops (so no allocation
//! runs and no offers are made). For tests that send a request and check the answer and the
//! books: validation errors, 404s, registrations, operator views. Its helpers are [`Rest`]'s.

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use coordinator::{Config, Coordinator};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::Rest;

/// Bodies larger than this are not read back (the API's answers are far smaller).
const MAX_ANSWER: usize = 16 << 20;

/// A coordinator's router, called request by request; its shutdown token is cancelled on drop.
pub struct Api {
    router: Router,
    /// The coordinator behind the router.
    pub coordinator: Coordinator,
    token: CancellationToken,
}

impl Drop for Api {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl Api {
    /// A coordinator with `config` (empty books) and its router.
    pub fn new(config: Config) -> Self {
        let token = CancellationToken::new();
        let coordinator = Coordinator::new(config, token.clone()).expect("a coordinator");
        let router = coordinator::router::app(coordinator.clone());
        Self {
            router,
            coordinator,
            token,
        }
    }
}

impl Api {
    /// Sends a request as built (headers included); returns the status, headers and body.
    pub async fn request(&self, request: Request<Body>) -> (u16, axum::http::HeaderMap, Vec<u8>) {
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .expect("an answer body");
        (status, headers, bytes.to_vec())
    }
}

impl Rest for Api {
    async fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> (u16, Vec<u8>) {
        let mut request = Request::builder().method(method).uri(path);
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(body.map_or_else(Body::empty, Body::from))
            .expect("a request");
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .expect("an answer body");
        (status, bytes.to_vec())
    }
}
