//! Test support for the coordinator's API tests.
//!
//! - [`TestCoordinator`]: a coordinator serving real HTTP on loopback, for tests of streams,
//!   agents and background loops, with [`EventStream`] (a framework's stream, read with
//!   `testkit`'s SSE reader).
//! - [`oneshot::Api`]: the coordinator's router called in process (`Router::oneshot`), for
//!   tests that only send requests and read answers.
//! - [`fake_agent`]: [`FakeAgent`] (an axum server recording launches and kills) and
//!   [`keep_alive`].
//! - [`wait_for`]: `testkit`'s polling wait with this suite's [`DEADLINE`].

#![allow(dead_code, unused_imports, clippy::unwrap_used)]

pub mod fake_agent;
pub mod oneshot;

use std::time::Duration;

use coordinator::Config;
use protocol::messages::{AgentInfo, FrameworkInfo, TaskInfo};
use protocol::{AgentId, FrameworkEvent, FrameworkId, Offer, OfferId, TaskState, TaskStatus};
use serde_json::{json, Value};
use testkit::{deadline_in, SseError, SseEvent, SseReader};
use tokio_util::sync::CancellationToken;

pub use fake_agent::{keep_alive, FakeAgent, Received};
pub use oneshot::Api;

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
    pub base: String,
    pub client: reqwest::Client,
    token: CancellationToken,
}

impl Drop for TestCoordinator {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl TestCoordinator {
    pub async fn start(config: Config) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let token = CancellationToken::new();
        tokio::spawn(coordinator::serve(
            config,
            listener,
            token.clone().cancelled_owned(),
        ));
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            token,
        }
    }

    pub async fn get(&self, path: &str) -> Value {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
        resp.json().await.unwrap()
    }

    /// POSTs JSON; returns the status and the JSON answer.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// POSTs raw bytes (for malformed bodies).
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn offers(&self) -> Vec<Offer> {
        serde_json::from_value(self.get("/api/v1/offers").await["offers"].clone()).unwrap()
    }

    pub async fn tasks(&self) -> Vec<TaskInfo> {
        serde_json::from_value(self.get("/api/v1/tasks").await["tasks"].clone()).unwrap()
    }

    pub async fn agents(&self) -> Vec<AgentInfo> {
        serde_json::from_value(self.get("/api/v1/agents").await["agents"].clone()).unwrap()
    }

    pub async fn frameworks(&self) -> Vec<FrameworkInfo> {
        serde_json::from_value(self.get("/api/v1/frameworks").await["frameworks"].clone()).unwrap()
    }

    pub async fn task(&self, id: &str) -> Option<TaskInfo> {
        self.tasks()
            .await
            .into_iter()
            .find(|t| t.task_id.as_str() == id)
    }

    /// Waits until the coordinator lists task `id` in `state`; returns its record.
    pub async fn wait_for_task_state(&self, id: &str, state: TaskState) -> TaskInfo {
        let what = format!("task {id} {state}");
        testkit::wait_until(DEADLINE, &what, || async {
            self.task(id).await.filter(|t| t.state == state)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Registers an agent served by `agent` with `resources` (e.g. `{"cpus": 4}`).
    pub async fn register_agent(&self, agent: &FakeAgent, resources: Value) -> AgentId {
        let (status, body) = self
            .post(
                "/api/v1/agents",
                json!({"hostname": "fake", "endpoint": agent.endpoint, "resources": resources}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        let id: AgentId = serde_json::from_value(body["agent_id"].clone()).unwrap();
        agent.id.lock().unwrap().replace(id);
        id
    }

    pub async fn register_framework(&self, name: &str, role: &str) -> FrameworkId {
        self.register_framework_with(json!({"name": name, "role": role}))
            .await
    }

    pub async fn register_framework_with(&self, body: Value) -> FrameworkId {
        let (status, body) = self.post("/api/v1/frameworks", body).await;
        assert_eq!(status, 201, "{body}");
        serde_json::from_value(body["framework_id"].clone()).unwrap()
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

    /// Posts a task status as the agent would.
    pub async fn post_status(
        &self,
        agent: AgentId,
        fw: FrameworkId,
        task: &str,
        state: TaskState,
    ) -> TaskStatus {
        let status = status_of(agent, fw, task, state);
        let (code, body) = self
            .post(
                &format!("/api/v1/agents/{agent}/status"),
                serde_json::to_value(&status).unwrap(),
            )
            .await;
        assert_eq!(code, 200, "{body}");
        status
    }

    /// Accepts one offer with one task of `resources` running `sleep 100`.
    pub async fn accept_one(
        &self,
        fw: FrameworkId,
        offer: &Offer,
        task: &str,
        resources: Value,
    ) -> (u16, Value) {
        self.post(
            &format!("/api/v1/frameworks/{fw}/accept"),
            json!({
                "offer_ids": [offer.offer_id],
                "tasks": [{"task_id": task, "name": task, "agent_id": offer.agent_id,
                           "resources": resources, "command": {"shell": "sleep 100"}}],
                "refuse_seconds": 0,
            }),
        )
        .await
    }

    /// Checks invariants 2 and 3 through the REST API: offered + used <= total on every agent,
    /// and the outstanding offers on each agent sum to its `offered`. Reads one snapshot
    /// (`/api/v1/state`): an allocation between two separate reads would make them disagree.
    pub async fn assert_books_consistent(&self) {
        let body = self.get("/api/v1/state").await;
        let state: protocol::messages::ClusterState =
            serde_json::from_value(body).expect("a ClusterState");
        let offers = state.offers;
        for a in state.agents {
            let in_use = a.used.add(&a.offered);
            assert!(
                in_use.fits_in(&a.resources) || in_use.is_empty(),
                "overcommitted: {a:?}"
            );
            let mut sum = protocol::Resources::new();
            for o in offers.iter().filter(|o| o.agent_id == a.agent_id) {
                sum.add_assign(&o.resources);
            }
            assert_eq!(
                sum, a.offered,
                "offers on agent {} do not sum to offered",
                a.agent_id
            );
        }
        let mut ids: Vec<OfferId> = offers.iter().map(|o| o.offer_id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), offers.len(), "an offer id is listed twice");
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
    }
}
