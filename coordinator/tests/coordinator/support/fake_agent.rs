//! [`FakeAgent`]: a small axum server standing in for an agent — it records the launches and
//! kills the coordinator sends (answering 202) — and [`keep_alive`], which heartbeats for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use protocol::messages::{KillTask, LaunchTasks};
use protocol::task::REASON_AGENT_PARTITIONED;
use protocol::AgentId;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::TestCoordinator;

/// What a fake agent received.
#[derive(Default)]
pub struct Received {
    pub launches: Vec<LaunchTasks>,
    pub kills: Vec<String>,
    /// The kills sent as fences (reason `agent_partitioned`), by task id.
    pub fences: Vec<String>,
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
                post(
                    |State(r): State<Arc<Mutex<Received>>>,
                     Path(id): Path<String>,
                     Json(body): Json<KillTask>| async move {
                        let mut r = r.lock().unwrap();
                        if body.reason.as_deref() == Some(REASON_AGENT_PARTITIONED) {
                            r.fences.push(id.clone());
                        }
                        r.kills.push(id);
                        (StatusCode::ACCEPTED, Json(json!({})))
                    },
                ),
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

    /// The kills sent as fences (reason `agent_partitioned`).
    pub fn fences(&self) -> Vec<String> {
        self.received.lock().unwrap().fences.clone()
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
