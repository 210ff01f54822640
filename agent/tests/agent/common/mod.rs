//! A small fake coordinator for the agent's tests: it implements the coordinator's agent API
//! (`POST /api/v1/agents`, `/agents/{id}/heartbeat`, `/agents/{id}/status` and `/statuses`), records what it
//! gets, can be told to fail updates or to forget agents, and can be stopped and restarted on
//! the same port. Plus `wait_for`, `testkit`'s polling wait with a panic on timeout.

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use protocol::messages::{AgentRegistered, RegisterAgent, StatusBatch};
use protocol::{AgentId, TaskState, TaskStatus};
use tokio_util::sync::CancellationToken;

/// An HTTP client that presents `token` as the coordinator does (`Authorization: Bearer`).
pub fn client_with_token(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {token}").parse().unwrap();
    headers.insert(reqwest::header::AUTHORIZATION, value);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// What the fake coordinator has seen, and how it behaves.
#[derive(Default)]
pub struct Books {
    pub registrations: Vec<RegisterAgent>,
    pub heartbeats: HashMap<AgentId, usize>,
    pub statuses: Vec<TaskStatus>,
    pub known: HashMap<AgentId, ()>,
    /// The id given to each endpoint.
    pub ids_by_endpoint: HashMap<String, AgentId>,
    /// Answer 500 to status updates.
    pub fail_statuses: bool,
    /// Refuse (422) any update, or batch of updates, of this task.
    pub refuse_task: Option<String>,
    /// How many updates each accepted status request carried.
    pub batch_sizes: Vec<usize>,
}

#[derive(Clone)]
pub struct Fake {
    pub books: Arc<Mutex<Books>>,
    pub heartbeat_interval_s: f64,
}

impl Fake {
    pub fn new(heartbeat_interval_s: f64) -> Self {
        Self {
            books: Arc::default(),
            heartbeat_interval_s,
        }
    }

    pub fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap()
    }

    /// A client presenting the API token of the first registration, as the coordinator does.
    pub fn agent_client(&self) -> reqwest::Client {
        let token = self.books().registrations[0].api_token.clone().unwrap();
        client_with_token(&token)
    }

    /// The states received for one task, in order.
    pub fn states_of(&self, task_id: &str) -> Vec<TaskState> {
        self.books()
            .statuses
            .iter()
            .filter(|s| s.task_id.as_str() == task_id)
            .map(|s| s.state)
            .collect()
    }

    pub fn status_of(&self, task_id: &str, state: TaskState) -> Option<TaskStatus> {
        self.books()
            .statuses
            .iter()
            .find(|s| s.task_id.as_str() == task_id && s.state == state)
            .cloned()
    }

    /// Waits (up to 8 s) until `state` was received for `task_id`.
    pub async fn wait_state(&self, task_id: &str, state: TaskState) {
        let what = format!("{task_id} {state}");
        wait_for(&what, Duration::from_secs(8), || {
            self.states_of(task_id).contains(&state)
        })
        .await;
    }

    /// Waits (up to 8 s) until an agent registered.
    pub async fn wait_registered(&self) {
        wait_for("registration", Duration::from_secs(8), || {
            !self.books().registrations.is_empty()
        })
        .await;
    }

    /// A coordinator restart that lost its books: every agent is unknown (404) from now on.
    pub fn forget_agents(&self) {
        self.books().known.clear();
    }

    fn router(&self) -> Router {
        Router::new()
            .route("/api/v1/agents", post(register))
            .route("/api/v1/agents/{id}/heartbeat", post(heartbeat))
            .route("/api/v1/agents/{id}/status", post(status))
            .route("/api/v1/agents/{id}/statuses", post(statuses))
            .with_state(self.clone())
    }
}

async fn register(
    State(fake): State<Fake>,
    Json(req): Json<RegisterAgent>,
) -> (StatusCode, Json<AgentRegistered>) {
    let mut books = fake.books();
    let (code, id) = match req.agent_id {
        Some(id) if books.known.contains_key(&id) => (StatusCode::OK, id),
        Some(id) => (StatusCode::CREATED, id),
        None => (StatusCode::CREATED, AgentId::new()),
    };
    books.known.insert(id, ());
    books.ids_by_endpoint.insert(req.endpoint.clone(), id);
    books.registrations.push(req);
    (
        code,
        Json(AgentRegistered {
            agent_id: id,
            heartbeat_interval_s: fake.heartbeat_interval_s,
            agent_timeout_s: None,
        }),
    )
}

async fn heartbeat(State(fake): State<Fake>, Path(id): Path<AgentId>) -> StatusCode {
    let mut books = fake.books();
    if !books.known.contains_key(&id) {
        return StatusCode::NOT_FOUND;
    }
    *books.heartbeats.entry(id).or_default() += 1;
    StatusCode::OK
}

async fn status(
    State(fake): State<Fake>,
    Path(id): Path<AgentId>,
    Json(s): Json<TaskStatus>,
) -> (StatusCode, Json<serde_json::Value>) {
    record_statuses(&fake, id, vec![s])
}

async fn statuses(
    State(fake): State<Fake>,
    Path(id): Path<AgentId>,
    Json(batch): Json<StatusBatch>,
) -> (StatusCode, Json<serde_json::Value>) {
    record_statuses(&fake, id, batch.statuses)
}

/// Records updates as the coordinator would: all of them, or none with an error.
fn record_statuses(
    fake: &Fake,
    id: AgentId,
    statuses: Vec<TaskStatus>,
) -> (StatusCode, Json<serde_json::Value>) {
    let mut books = fake.books();
    if books.fail_statuses {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(serde_json::json!({"error": {"code": "internal", "message": "try again"}})),
        );
    }
    if !books.known.contains_key(&id) {
        return (
            StatusCode::NOT_FOUND,
            Json(
                serde_json::json!({"error": {"code": "agent_not_found", "message": "register again"}}),
            ),
        );
    }
    if let Some(bad) = &books.refuse_task {
        if statuses.iter().any(|s| s.task_id.as_str() == bad) {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(serde_json::json!({"error": {"code": "refused", "message": "not this one"}})),
            );
        }
    }
    books.batch_sizes.push(statuses.len());
    books.statuses.extend(statuses);
    (StatusCode::OK, Json(serde_json::json!({})))
}

/// A running fake coordinator.
pub struct Server {
    pub addr: SocketAddr,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start(fake: &Fake) -> Server {
        Self::start_on(fake, "127.0.0.1:0".parse().unwrap()).await
    }

    pub async fn start_on(fake: &Fake, addr: SocketAddr) -> Server {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let s = stop.clone();
        let app = fake.router();
        let handle = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(s.cancelled_owned())
                .await
                .unwrap();
        });
        Server { addr, stop, handle }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving; connections are refused until started again.
    pub async fn stop(self) {
        self.stop.cancel();
        self.handle.await.unwrap();
    }
}

/// Polls `cond` until it holds; panics with `what` after `timeout` (`testkit`'s wait).
pub async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    wait_for_async(what, timeout, || std::future::ready(cond())).await;
}

/// Like [`wait_for`], for an async condition.
pub async fn wait_for_async<F, Fut>(what: &str, timeout: Duration, cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    if let Err(e) = testkit::wait_for(timeout, what, cond).await {
        panic!("{e}");
    }
}
