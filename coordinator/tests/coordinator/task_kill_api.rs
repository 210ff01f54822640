//! An operator's kill of one task, `POST /api/v1/frameworks/{id}/tasks/{task_id}/kill`:
//! through real HTTP with a fake agent (the kill reaches the task's agent, its outcome the
//! framework, and a second kill of the ended task is 409), and in process (`Router::oneshot`)
//! for what only answers: unknown and malformed ids, and who may call it. Every refusal
//! changes nothing.

#![allow(clippy::unwrap_used)]

use crate::drain_api::{call, secured, ADMIN, NODES, READER, TEAM};
use crate::support::{fast_config, wait_for, Api, FakeAgent, Rest, TestCoordinator};
use axum::http::Method;
use coordinator::Config;
use protocol::{FrameworkId, TaskState};
use serde_json::{json, Value};

fn kill_path(fw: FrameworkId, task: &str) -> String {
    format!("/api/v1/frameworks/{fw}/tasks/{task}/kill")
}

#[tokio::test]
async fn an_operator_kill_reaches_the_agent_and_the_framework_and_an_ended_task_is_409() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("f", "eng").await;
    let agent = FakeAgent::start().await;
    let agent_id = c
        .register_agent(&agent, json!({"cpus": 2, "mem": 100}))
        .await;
    wait_for("an offer", || async { !c.offers().await.is_empty() }).await;
    let offer = c.offers().await.remove(0);
    let (status, body) = c.accept_one(fw, &offer, "t1", json!({"cpus": 1})).await;
    assert_eq!(status, 200, "{body}");
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    let _ = events.update("t1", TaskState::Running).await;

    // Without a body, as parleyctl sends it: the task as it is, and the kill sent.
    let (status, body) = c.send(Method::POST, &kill_path(fw, "t1"), None).await;
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["task_id"], &body["state"], &body["agent_id"]),
        (&json!("t1"), &json!("running"), &json!(agent_id))
    );
    wait_for("the agent to get the kill", || async {
        agent.kills() == ["t1"]
    })
    .await;
    // The agent reports it killed: the framework hears it, as of its own kill.
    c.post_status(agent_id, fw, "t1", TaskState::Killed).await;
    let killed = events.update("t1", TaskState::Killed).await;
    assert_eq!(killed.framework_id, fw);

    // Ended: nothing to kill, and nothing is sent again.
    let (status, body) = c.post(&kill_path(fw, "t1"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "task_terminal");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("t1") && message.contains("killed"),
        "{message}"
    );
    assert_eq!(agent.kills(), ["t1"]);
}

#[tokio::test]
async fn unknown_and_malformed_ids_are_refused_by_name_and_change_nothing() {
    let api = Api::new(Config::default());
    let fw = api.register_framework("f", "eng").await;
    let before = (
        api.get("/api/v1/tasks").await,
        api.get("/api/v1/frameworks").await,
    );
    let unknown = FrameworkId::new();
    let cases = [
        (kill_path(fw, "nope"), 404, "task_not_found", "nope"),
        (
            kill_path(unknown, "t1"),
            404,
            "framework_not_found",
            &*unknown.to_string(),
        ),
        (
            "/api/v1/frameworks/not-a-uuid/tasks/t1/kill".to_owned(),
            400,
            "invalid_path",
            "not-a-uuid",
        ),
        (kill_path(fw, "-dash"), 400, "invalid_path", "task_id"),
    ];
    for (path, want, code, named) in cases {
        let (status, body) = api.post(&path, json!({})).await;
        assert_eq!(status, want, "{path}: {body}");
        assert_eq!(body["error"]["code"], code, "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{path}: {message}");
    }
    // A body that is not JSON is refused before the books are asked.
    let (status, body) = api.post_raw(&kill_path(fw, "nope"), "not json").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_body")),
        "{body}"
    );
    let (status, _) = api.send(Method::GET, &kill_path(fw, "t1"), None).await;
    assert_eq!(status, 405);
    let after = (
        api.get("/api/v1/tasks").await,
        api.get("/api/v1/frameworks").await,
    );
    assert_eq!(before, after);
}

#[tokio::test]
async fn only_admin_operators_may_kill_a_task() {
    let api = secured();
    let fw = FrameworkId::new();
    let path = kill_path(fw, "t1");
    // Agents, framework principals and read operators: 403 before the books are asked.
    for token in [NODES, TEAM, READER] {
        let (status, body) = call(&api, token, Method::POST, &path, json!({})).await;
        assert_eq!(status, 403, "{token}: {body}");
        assert_eq!(body["error"]["code"], "forbidden");
    }
    // An admin reaches the books: no such framework.
    let (status, body) = call(&api, ADMIN, Method::POST, &path, json!({})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("framework_not_found")),
        "{body}"
    );
}
