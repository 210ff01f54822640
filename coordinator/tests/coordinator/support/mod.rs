//! Test support for the coordinator's API tests.
//!
//! - [`rest::Rest`]: the REST helpers (get, post, offers, tasks, register, accept, book checks)
//!   shared by both ways to reach a coordinator:
//! - [`TestCoordinator`]: a coordinator serving real HTTP on loopback ([`coordinator::Served`],
//!   the in-process coordinator the end-to-end harness `tests::Cluster` runs too), for tests of
//!   streams, agents and background loops, with [`EventStream`] (a framework's stream, read
//!   with `testkit`'s SSE reader). It has no agents: the tests play them ([`FakeAgent`]).
//! - [`oneshot::Api`]: the coordinator's router called in process (`Router::oneshot`), for
//!   tests that only send requests and read answers.
//! - [`fake_agent`]: [`FakeAgent`] (an axum server recording launches and kills) and
//!   [`keep_alive`].
//! - [`wait_for`]: `testkit`'s polling wait with this suite's [`DEADLINE`].

#![allow(clippy::unwrap_used)]

pub mod fake_agent;
pub mod oneshot;
pub mod rest;

use std::time::Duration;

use axum::http::Method;
use coordinator::Config;
use protocol::{AgentId, FrameworkEvent, FrameworkId, Offer, TaskState, TaskStatus};
use serde_json::Value;
use testkit::{deadline_in, SseError, SseEvent, SseReader};

pub use fake_agent::{keep_alive, FakeAgent};
pub use oneshot::Api;
pub use rest::Rest;

/// How long any wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// Short intervals so every test finishes in a few seconds.
pub fn fast_config() -> Config {
    Config {
        allocation_interval: Duration::from_millis(50),
        allocation_batch_delay: Duration::from_millis(2),
        offer_timeout: Duration::from_secs(30),
        // Long enough that agents without heartbeats are not lost mid-test; the agent-loss
        // tests shorten it.
        agent_heartbeat_interval: Duration::from_secs(10),
        max_missed_heartbeats: 5,
        framework_heartbeat_interval: Duration::from_millis(100),
        default_failover_timeout: Duration::from_secs(30),
        default_refuse_seconds: Duration::from_secs(5),
        update_resend_interval: Duration::from_millis(100),
        agent_request_timeout: Duration::from_secs(2),
        ..Config::default()
    }
}

/// Polls `cond` until it holds; panics naming `what` after [`DEADLINE`].
pub async fn wait_for<F, Fut>(what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if let Err(e) = testkit::wait_for(DEADLINE, what, cond).await {
        panic!("{e}");
    }
}

/// A coordinator serving on `127.0.0.1:0`; shut down when dropped.
pub struct TestCoordinator {
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub base: String,
    /// A client for its API.
    pub client: reqwest::Client,
    /// Stops it when dropped.
    _served: coordinator::Served,
}

impl TestCoordinator {
    /// Starts a coordinator with `config` on a free loopback port.
    pub async fn start(config: Config) -> Self {
        let served = coordinator::Served::bind(config, ([127, 0, 0, 1], 0).into())
            .await
            .unwrap();
        Self {
            base: format!("http://{}", served.addr()),
            client: reqwest::Client::new(),
            _served: served,
        }
    }

    /// Registers an agent served by `agent` with `resources` (e.g. `{"cpus": 4}`).
    pub async fn register_agent(&self, agent: &FakeAgent, resources: Value) -> AgentId {
        let id = self.register_agent_at(&agent.endpoint, resources).await;
        agent.id.lock().unwrap().replace(id);
        id
    }

    /// Opens the framework's event stream; the first event must be `subscribed`.
    pub async fn subscribe(&self, fw: FrameworkId) -> EventStream {
        let mut s = EventStream::open(
            &self.client,
            &format!("{}/api/v1/frameworks/{fw}/events", self.base),
        )
        .await;
        match s.next().await {
            Some(FrameworkEvent::Subscribed(r)) => assert_eq!(r.framework_id, fw),
            other => panic!("first event must be subscribed, got {other:?}"),
        }
        s
    }

    /// Registers and subscribes a framework.
    pub async fn framework(&self, name: &str, role: &str) -> (FrameworkId, EventStream) {
        let fw = self.register_framework(name, role).await;
        let s = self.subscribe(fw).await;
        (fw, s)
    }
}

impl Rest for TestCoordinator {
    async fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> (u16, Vec<u8>) {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let resp = request.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.bytes().await.unwrap().to_vec())
    }
}

/// A framework's event stream, read with `testkit`'s [`SseReader`]; each read waits at most
/// [`DEADLINE`]. Dropping it closes the connection.
pub struct EventStream {
    reader: SseReader,
}

impl EventStream {
    pub async fn open(client: &reqwest::Client, url: &str) -> Self {
        let reader = SseReader::open(client, url)
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        Self { reader }
    }

    /// The next event, heartbeats included; `None` when the stream ended. Panics after the
    /// deadline.
    pub async fn next(&mut self) -> Option<FrameworkEvent> {
        match self.reader.next_event(deadline_in(DEADLINE)).await {
            Ok(event) => Some(event),
            Err(SseError::Ended | SseError::Transport(_)) => None,
            Err(e) => panic!("{e}"),
        }
    }

    /// Skips events until one matches; panics if the stream ends or the deadline passes.
    pub async fn wait_for(
        &mut self,
        what: &str,
        pred: impl FnMut(&FrameworkEvent) -> bool,
    ) -> FrameworkEvent {
        self.reader
            .next_matching(deadline_in(DEADLINE), pred)
            .await
            .unwrap_or_else(|e| panic!("waiting for {what}: {e}"))
    }

    /// Waits for the next `offers` event and returns its offers.
    pub async fn offers(&mut self) -> Vec<Offer> {
        match self
            .wait_for("offers", |e| matches!(e, FrameworkEvent::Offers { .. }))
            .await
        {
            FrameworkEvent::Offers { offers } => offers,
            _ => unreachable!(),
        }
    }

    /// Waits for an update of `task` in `state`.
    pub async fn update(&mut self, task: &str, state: TaskState) -> TaskStatus {
        match self
            .wait_for(&format!("update {task} {state}"), |e| {
                matches!(e, FrameworkEvent::Update { status }
                    if status.task_id.as_str() == task && status.state == state)
            })
            .await
        {
            FrameworkEvent::Update { status } => status,
            _ => unreachable!(),
        }
    }

    /// Waits until the stream ends; returns the events before the end.
    pub async fn ended(&mut self) -> Vec<FrameworkEvent> {
        let deadline = deadline_in(DEADLINE);
        let mut seen = Vec::new();
        loop {
            match self.reader.next_frame(deadline).await {
                Ok(frame) => seen.push(
                    FrameworkEvent::from_frame(&frame).unwrap_or_else(|e| panic!("{frame:?}: {e}")),
                ),
                Err(SseError::Ended | SseError::Transport(_)) => return seen,
                Err(e) => panic!("stream did not end ({e}); saw {seen:?}"),
            }
        }
    }
}

/// A fresh status update (new update id, now) of `task` on `agent`.
pub fn status_of(agent: AgentId, fw: FrameworkId, task: &str, state: TaskState) -> TaskStatus {
    TaskStatus {
        task_id: task.parse().unwrap(),
        framework_id: fw,
        agent_id: agent,
        state,
        message: None,
        exit_code: None,
        update_id: protocol::UpdateId::new(),
        timestamp: protocol::now(),
        resources: None,
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}
