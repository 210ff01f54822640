//! [`Rest`]: the coordinator's REST API as these tests call it — the same helpers over real
//! HTTP ([`super::TestCoordinator`]) and in process ([`super::Api`]); an implementation only
//! sends a request.

use axum::http::Method;
use protocol::messages::{AgentInfo, FrameworkInfo, TaskInfo};
use protocol::{AgentId, FrameworkId, Offer, OfferId, TaskState, TaskStatus};
use serde_json::{json, Value};

use super::{status_of, DEADLINE};

/// Requests to a coordinator, and the helpers built on them.
#[allow(async_fn_in_trait)]
pub trait Rest {
    /// Sends one request (a body is sent as `application/json`); returns the status and the
    /// raw answer.
    async fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> (u16, Vec<u8>);

    /// Sends JSON (or nothing); returns the status and the JSON answer (`null` if none).
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| serde_json::to_vec(&b).unwrap());
        let (status, bytes) = self.send(method, path, body).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// GETs `path`, which must answer 2xx with JSON; returns it.
    async fn get(&self, path: &str) -> Value {
        let (status, bytes) = self.send(Method::GET, path, None).await;
        assert!((200..300).contains(&status), "GET {path}: {status}");
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// GETs `path`; returns the status and the answer as text.
    async fn get_text(&self, path: &str) -> (u16, String) {
        let (status, bytes) = self.send(Method::GET, path, None).await;
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// POSTs JSON; returns the status and the JSON answer.
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    /// POSTs raw bytes as JSON (for malformed bodies).
    async fn post_raw(&self, path: &str, body: impl Into<Vec<u8>>) -> (u16, Value) {
        let (status, bytes) = self.send(Method::POST, path, Some(body.into())).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// PUTs JSON; returns the status and the JSON answer.
    async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    async fn offers(&self) -> Vec<Offer> {
        serde_json::from_value(self.get("/api/v1/offers").await["offers"].clone()).unwrap()
    }

    async fn tasks(&self) -> Vec<TaskInfo> {
        serde_json::from_value(self.get("/api/v1/tasks").await["tasks"].clone()).unwrap()
    }

    async fn agents(&self) -> Vec<AgentInfo> {
        serde_json::from_value(self.get("/api/v1/agents").await["agents"].clone()).unwrap()
    }

    async fn frameworks(&self) -> Vec<FrameworkInfo> {
        serde_json::from_value(self.get("/api/v1/frameworks").await["frameworks"].clone()).unwrap()
    }

    async fn task(&self, id: &str) -> Option<TaskInfo> {
        self.tasks()
            .await
            .into_iter()
            .find(|t| t.task_id.as_str() == id)
    }

    /// Waits until the coordinator lists task `id` in `state`; returns its record.
    async fn wait_for_task_state(&self, id: &str, state: TaskState) -> TaskInfo {
        let what = format!("task {id} {state}");
        testkit::wait_until(DEADLINE, &what, || async {
            self.task(id).await.filter(|t| t.state == state)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn register_framework(&self, name: &str, role: &str) -> FrameworkId {
        self.register_framework_with(json!({"name": name, "role": role}))
            .await
    }

    async fn register_framework_with(&self, body: Value) -> FrameworkId {
        let (status, body) = self.post("/api/v1/frameworks", body).await;
        assert_eq!(status, 201, "{body}");
        serde_json::from_value(body["framework_id"].clone()).unwrap()
    }

    /// Posts a task status as the agent would.
    async fn post_status(
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
    async fn accept_one(
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
    async fn assert_books_consistent(&self) {
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

    /// Registers an agent at `endpoint` with `resources` (e.g. `{"cpus": 4}`); returns its id.
    async fn register_agent_at(&self, endpoint: &str, resources: Value) -> AgentId {
        let (status, body) = self
            .post(
                "/api/v1/agents",
                json!({"hostname": "fake", "endpoint": endpoint, "resources": resources}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        serde_json::from_value(body["agent_id"].clone()).unwrap()
    }
}
