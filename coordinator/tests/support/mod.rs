//! Test support: a coordinator on loopback, fake agents (small axum servers that record
//! launches and kills), an SSE client for framework streams, and `wait_for` polling helpers.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use coordinator::Config;
use futures::StreamExt;
use protocol::messages::{AgentInfo, FrameworkInfo, LaunchTasks, TaskInfo};
use protocol::{AgentId, FrameworkEvent, FrameworkId, Offer, OfferId, TaskState, TaskStatus};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// Polls `cond` every 10 ms until it holds; panics naming `what` after [`DEADLINE`].
pub async fn wait_for<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if cond().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
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

/// A framework's event stream, read by a background task into a channel.
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<FrameworkEvent>,
    token: CancellationToken,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl EventStream {
    pub async fn open(client: &reqwest::Client, url: &str) -> Self {
        let resp = client.get(url).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "GET {url}");
        let (tx, rx) = mpsc::unbounded_channel();
        let token = CancellationToken::new();
        let stop = token.clone();
        tokio::spawn(async move {
            let mut bytes = resp.bytes_stream();
            let mut buf = String::new();
            loop {
                let chunk = tokio::select! {
                    _ = stop.cancelled() => return,
                    c = bytes.next() => c,
                };
                let Some(Ok(chunk)) = chunk else { return };
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let frame: String = buf.drain(..end + 2).collect();
                    if let Some(ev) = parse_frame(&frame) {
                        if tx.send(ev).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Self { rx, token }
    }

    /// The next event, heartbeats included; `None` when the stream ended. Panics after the
    /// deadline.
    pub async fn next(&mut self) -> Option<FrameworkEvent> {
        tokio::time::timeout(DEADLINE, self.rx.recv())
            .await
            .expect("no event before the deadline")
    }

    /// Skips events until one matches; panics if the stream ends or the deadline passes.
    pub async fn wait_for(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&FrameworkEvent) -> bool,
    ) -> FrameworkEvent {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let ev = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
                .unwrap_or_else(|| panic!("stream ended while waiting for {what}"));
            if pred(&ev) {
                return ev;
            }
        }
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

    /// Waits until the stream ends (events before the end are skipped).
    pub async fn ended(&mut self) -> Vec<FrameworkEvent> {
        let mut seen = Vec::new();
        loop {
            match tokio::time::timeout(DEADLINE, self.rx.recv()).await {
                Ok(Some(ev)) => seen.push(ev),
                Ok(None) => return seen,
                Err(_) => panic!("stream did not end; saw {seen:?}"),
            }
        }
    }
}

fn parse_frame(frame: &str) -> Option<FrameworkEvent> {
    let mut event = None;
    let mut data = String::new();
    for line in frame.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim_start().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    let event = event?;
    Some(
        FrameworkEvent::from_sse(&event, &data)
            .unwrap_or_else(|e| panic!("bad event {event}: {e}")),
    )
}

/// What a fake agent received.
#[derive(Default)]
pub struct Received {
    pub launches: Vec<LaunchTasks>,
    pub kills: Vec<String>,
}

/// A fake agent: an axum server recording launches and kills (answering 202).
pub struct FakeAgent {
    pub endpoint: String,
    pub received: Arc<Mutex<Received>>,
    pub id: Arc<Mutex<Option<AgentId>>>,
    token: CancellationToken,
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

impl FakeAgent {
    pub async fn start() -> Self {
        let received = Arc::new(Mutex::new(Received::default()));
        let app = Router::new()
            .route(
                "/api/v1/tasks",
                post(|State(r): State<Arc<Mutex<Received>>>, Json(body): Json<LaunchTasks>| async move {
                    r.lock().unwrap().launches.push(body);
                    (StatusCode::ACCEPTED, Json(json!({})))
                }),
            )
            .route(
                "/api/v1/tasks/{id}/kill",
                post(|State(r): State<Arc<Mutex<Received>>>, Path(id): Path<String>| async move {
                    r.lock().unwrap().kills.push(id);
                    (StatusCode::ACCEPTED, Json(json!({})))
                }),
            )
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let token = CancellationToken::new();
        let stop = token.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Self {
            endpoint: format!("http://{addr}"),
            received,
            id: Arc::default(),
            token,
        }
    }

    pub fn launched_task_ids(&self) -> Vec<String> {
        self.received
            .lock()
            .unwrap()
            .launches
            .iter()
            .flat_map(|l| l.tasks.iter().map(|t| t.task_id.to_string()))
            .collect()
    }

    pub fn kills(&self) -> Vec<String> {
        self.received.lock().unwrap().kills.clone()
    }
}

/// Heartbeats an agent every 50 ms until the returned token is cancelled (or dropped with the
/// test).
pub fn keep_alive(c: &TestCoordinator, agent: AgentId) -> CancellationToken {
    let token = CancellationToken::new();
    let stop = token.clone();
    let (client, url) = (
        c.client.clone(),
        format!("{}/api/v1/agents/{agent}/heartbeat", c.base),
    );
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => { let _ = client.post(&url).json(&json!({})).send().await; }
            }
        }
    });
    token
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
