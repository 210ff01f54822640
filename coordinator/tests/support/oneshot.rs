//! [`Api`]: the coordinator's whole router (`coordinator::api::app`) called in process with
//! tower's `ServiceExt::oneshot`: no socket, no port, no background loops (so no allocation
//! runs and no offers are made). For tests that send a request and check the answer and the
//! books: validation errors, 404s, registrations, operator views.

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use coordinator::{Config, Coordinator};
use protocol::messages::{AgentInfo, TaskInfo};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

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
        let router = coordinator::api::app(coordinator.clone());
        Self {
            router,
            coordinator,
            token,
        }
    }

    /// Sends one request; returns the status and the raw answer.
    pub async fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> (u16, Vec<u8>) {
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

    /// Sends JSON (or nothing); returns the status and the JSON answer (`null` if none).
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| serde_json::to_vec(&b).expect("JSON"));
        let (status, bytes) = self.send(method, path, body).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// GETs `path`, which must answer 2xx; returns the JSON answer.
    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(Method::GET, path, None).await;
        assert!((200..300).contains(&status), "GET {path}: {status} {body}");
        body
    }

    /// GETs `path`; returns the status and the answer as text.
    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let (status, bytes) = self.send(Method::GET, path, None).await;
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// POSTs JSON; returns the status and the JSON answer.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    /// PUTs JSON; returns the status and the JSON answer.
    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// The agent list.
    pub async fn agents(&self) -> Vec<AgentInfo> {
        serde_json::from_value(self.get("/api/v1/agents").await["agents"].clone()).unwrap()
    }

    /// The task list.
    pub async fn tasks(&self) -> Vec<TaskInfo> {
        serde_json::from_value(self.get("/api/v1/tasks").await["tasks"].clone()).unwrap()
    }
}
