//! Drain and reactivate in process (`Router::oneshot`), with credentials: only an
//! admin operator may drain or reactivate (agents, framework principals and read operators get
//! 403 and change nothing), and the agent's state follows.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::Api;
use axum::body::Body;
use axum::http::{header, Method, Request};
use coordinator::auth::{Credentials, SecretHash};
use coordinator::Config;
use serde_json::{json, Value};

pub(crate) const NODES: &str = "token-of-agent-pool";
pub(crate) const TEAM: &str = "token-of-team";
pub(crate) const READER: &str = "token-of-read-operator";
pub(crate) const ADMIN: &str = "token-of-admin-operator";

/// A coordinator with one principal of each kind: an agent pool ([`NODES`]), a framework team
/// ([`TEAM`]), a read operator ([`READER`]) and an admin operator ([`ADMIN`]). The other admin
/// routes' tests (`task_kill_api`) use it too.
pub(crate) fn secured() -> Api {
    let h = |t: &str| SecretHash::of(t).to_hex();
    let credentials = Credentials::from_toml(&format!(
        r#"
[[principals]]
name = "pool"
kind = "agent"
secret_sha256 = "{}"

[[principals]]
name = "team"
kind = "framework"
secret_sha256 = "{}"
roles = ["*"]

[[principals]]
name = "bob"
kind = "operator"
access = "read"
secret_sha256 = "{}"

[[principals]]
name = "alice"
kind = "operator"
access = "admin"
secret_sha256 = "{}"
"#,
        h(NODES),
        h(TEAM),
        h(READER),
        h(ADMIN)
    ))
    .unwrap();
    Api::new(Config {
        credentials: Some(Arc::new(credentials)),
        ..Config::default()
    })
}

/// Sends `body` to `method path` with `token`; the status and the JSON answer (`null` if none).
pub(crate) async fn call(
    api: &Api,
    token: &str,
    method: Method,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, bytes) = api.request(request).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn agents(api: &Api) -> Value {
    let request = Request::builder()
        .uri("/api/v1/agents")
        .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
        .body(Body::empty())
        .unwrap();
    let (_, _, bytes) = api.request(request).await;
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn only_admin_operators_drain_and_reactivate() {
    let api = secured();
    let (status, body) = call(
        &api,
        NODES,
        Method::POST,
        "/api/v1/agents",
        json!({"hostname": "node", "endpoint": "http://127.0.0.1:9", "resources": {"cpus": 4}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["agent_id"].as_str().unwrap().to_owned();
    let drain = format!("/api/v1/agents/{id}/drain");
    let reactivate = format!("/api/v1/agents/{id}/reactivate");
    let before = agents(&api).await;
    for token in [NODES, TEAM, READER] {
        let (status, body) =
            call(&api, token, Method::POST, &drain, json!({"deadline_s": 5})).await;
        assert_eq!(status, 403, "{token}: {body}");
        let (status, body) = call(&api, token, Method::POST, &reactivate, json!({})).await;
        assert_eq!(status, 403, "{token}: {body}");
        assert_eq!(agents(&api).await, before, "{token} changed the books");
    }
    let (status, body) = call(&api, ADMIN, Method::POST, &drain, json!({"deadline_s": 5})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "drained", "no tasks: drained at once");
    assert_eq!(agents(&api).await["agents"][0]["state"], "drained");
    let (status, body) = call(&api, ADMIN, Method::POST, &reactivate, json!({})).await;
    assert_eq!((status, &body["state"]), (200, &json!("active")), "{body}");
    assert_eq!(agents(&api).await["agents"][0]["state"], "active");
}
