//! A coordinator restarted on its registry awaits the agents it knew until they register
//! again. Meanwhile it cannot tell a task it does not know from one running on such an
//! agent: a reconcile naming one is answered `409 task_not_yet_known` (not `404`, which a
//! framework reads as lost and may run again), and the books do not change. Once the agents
//! are back, the same call answers from the books.

#![allow(clippy::unwrap_used)]

use crate::agent_api::status_json;
use crate::support::{fast_config, Api, Rest};
use protocol::{AgentId, TaskState};
use serde_json::json;

/// An endpoint nothing listens on (the router-only coordinator calls no agent).
const NOWHERE: &str = "http://127.0.0.1:9";

fn open(registry: &std::path::Path) -> Api {
    Api::new(coordinator::Config {
        registry: Some(registry.to_path_buf()),
        ..fast_config()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_on_an_agent_not_yet_back_is_not_yet_known_rather_than_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let agent = AgentId::new();
    let agent_body = |fw| {
        json!({"hostname": "back-later", "endpoint": NOWHERE, "resources": {"cpus": 4},
               "agent_id": agent, "tasks": [status_json(agent, fw, "t1", "running")]})
    };
    let api = open(&path);
    let fw = api.register_framework("f", "eng").await;
    let (status, body) = api.post("/api/v1/agents", agent_body(fw)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(api.task("t1").await.unwrap().state, TaskState::Running);
    api.coordinator.close_registry();
    drop(api);

    // Restarted: the framework comes back first; its task's agent is still awaited.
    let api = open(&path);
    let (status, body) = api
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "eng", "framework_id": fw}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let reconcile = |ids: &[&str]| json!({ "task_ids": ids });
    let path_of = format!("/api/v1/frameworks/{fw}/reconcile");
    for ids in [&["t1"][..], &["ghost"], &["t1", "ghost"]] {
        let (status, body) = api.post(&path_of, reconcile(ids)).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("task_not_yet_known")),
            "{ids:?}: {body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("1 agent(s)"), "{message}");
    }
    assert!(
        api.tasks().await.is_empty(),
        "a refused reconcile adds nothing"
    );

    // The agent registers again with its task: the same calls answer from the books.
    let (status, body) = api.post("/api/v1/agents", agent_body(fw)).await;
    assert!(status == 200 || status == 201, "{status}: {body}");
    let (status, body) = api.post(&path_of, reconcile(&["t1"])).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.post(&path_of, reconcile(&["ghost"])).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("task_not_found")),
        "{body}"
    );
}
