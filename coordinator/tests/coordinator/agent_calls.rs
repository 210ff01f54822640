//! How the coordinator treats agents: a known agent id cannot be taken over
//! by a registration with another token, and calls to an agent carry its token and the task's
//! framework, follow no redirect, and copy only a short excerpt of an error body.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use crate::support::{fast_config, wait_for, Api, Rest, TestCoordinator};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use protocol::messages::LaunchTasks;
use protocol::TaskState;
use serde_json::{json, Value};

const NOWHERE: &str = "http://127.0.0.1:9";
const TOKEN: &str = "the-agents-own-token-0123456789";

fn registration(endpoint: &str, agent_id: Option<&Value>, token: Option<&str>) -> Value {
    let mut body = json!({"hostname": "h", "endpoint": endpoint, "resources": {"cpus": 2}});
    if let Some(id) = agent_id {
        body["agent_id"] = id.clone();
    }
    if let Some(token) = token {
        body["api_token"] = json!(token);
    }
    body
}

/// Finding: "re-register an existing `agent_id` with a new endpoint (its tasks are reported
/// lost and later launches, env included, go to the new endpoint)".
#[tokio::test]
async fn a_known_agent_id_cannot_be_taken_over_with_another_token() {
    let api = Api::new(fast_config());
    let (status, body) = api
        .post("/api/v1/agents", registration(NOWHERE, None, Some(TOKEN)))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["agent_id"].clone();

    let thief = "http://10.9.9.9:5051";
    for token in [Some("another-token-0123456789"), None] {
        let (status, body) = api
            .post("/api/v1/agents", registration(thief, Some(&id), token))
            .await;
        assert_eq!(status, 403, "{token:?}: {body}");
        assert_eq!(body["error"]["code"], "agent_token_mismatch");
    }
    let agents = api.agents().await;
    assert_eq!(agents.len(), 1);
    assert_eq!(
        agents[0].endpoint, NOWHERE,
        "a refused registration changes nothing"
    );

    // The agent itself (same token) may move.
    let moved = "http://127.0.0.1:10";
    let (status, body) = api
        .post(
            "/api/v1/agents",
            registration(moved, Some(&id), Some(TOKEN)),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(api.agents().await[0].endpoint, moved);

    // The token is never shown to operators.
    let (_, listing) = api.get_text("/api/v1/agents").await;
    let (_, state) = api.get_text("/api/v1/state").await;
    assert!(!listing.contains(TOKEN) && !state.contains(TOKEN));

    // A malformed token is a bad request.
    let (status, body) = api
        .post("/api/v1/agents", registration(NOWHERE, None, Some("short")))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_field", "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("api_token"));
}

/// What the agent (and the server it redirects to) received.
#[derive(Default)]
struct Seen {
    authorizations: Vec<String>,
    kills: Vec<Value>,
    trap_hits: usize,
}

type Shared = Arc<Mutex<Seen>>;

async fn agent_launch(State(seen): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    seen.lock().unwrap().authorizations.push(auth);
    let launch: LaunchTasks = serde_json::from_slice(&body).unwrap();
    let trap = headers
        .get("x-trap")
        .map(|v| v.to_str().unwrap().to_string());
    match launch.tasks[0].task_id.as_str() {
        "redirected" => (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, trap.unwrap_or_default())],
        )
            .into_response(),
        "refused" => (StatusCode::BAD_REQUEST, "x".repeat(100_000)).into_response(),
        _ => (StatusCode::ACCEPTED, "{}").into_response(),
    }
}

async fn agent_kill(State(seen): State<Shared>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let mut seen = seen.lock().unwrap();
    let auth = headers.get(header::AUTHORIZATION).unwrap();
    seen.authorizations.push(auth.to_str().unwrap().to_string());
    seen.kills.push(serde_json::from_slice(&body).unwrap());
    StatusCode::ACCEPTED
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Finding: "The coordinator follows redirects when it calls an agent endpoint and copies
/// any-size error bodies into task messages (SSRF)".
#[tokio::test]
async fn agent_calls_carry_the_token_follow_no_redirect_and_copy_short_errors() {
    let seen: Shared = Arc::default();
    let trap = serve(
        Router::new()
            .fallback(|State(seen): State<Shared>| async move {
                seen.lock().unwrap().trap_hits += 1;
                StatusCode::ACCEPTED
            })
            .with_state(seen.clone()),
    )
    .await;
    // The fake agent redirects to the trap: a Location it sends as an absolute URL.
    let trap_location = format!("{trap}/internal/admin");
    let agent = serve(
        Router::new()
            .route("/api/v1/tasks", post(agent_launch))
            .route("/api/v1/tasks/{id}/kill", post(agent_kill))
            .layer(axum::middleware::map_request(
                move |mut req: axum::extract::Request| {
                    let location = trap_location.clone();
                    async move {
                        req.headers_mut()
                            .insert("x-trap", location.parse().unwrap());
                        req
                    }
                },
            ))
            .with_state(seen.clone()),
    )
    .await;

    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("f", "eng").await;
    let (status, body) = c
        .post("/api/v1/agents", registration(&agent, None, Some(TOKEN)))
        .await;
    assert_eq!(status, 201, "{body}");

    for (task, state) in [
        ("redirected", TaskState::Lost),
        ("refused", TaskState::Error),
        ("fine", TaskState::Staging),
    ] {
        let offer = events.offers().await.remove(0);
        let (status, body) = c.accept_one(fw, &offer, task, json!({"cpus": 1})).await;
        assert_eq!(status, 200, "{body}");
        wait_for(task, || async {
            c.task(task).await.is_some_and(|t| t.state == state)
        })
        .await;
    }
    assert_eq!(seen.lock().unwrap().trap_hits, 0, "a redirect was followed");
    let refused = c.task("refused").await.unwrap().message.unwrap();
    assert!(refused.len() < 512, "{} bytes copied", refused.len());
    assert!(refused.contains("xxxx"), "{refused}");

    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/kill"),
            json!({"task_id": "fine"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for("the kill", || async {
        !seen.lock().unwrap().kills.is_empty()
    })
    .await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.kills, [json!({"framework_id": fw})]);
    assert_eq!(seen.authorizations.len(), 4);
    assert!(
        seen.authorizations
            .iter()
            .all(|a| *a == format!("Bearer {TOKEN}")),
        "{:?}",
        seen.authorizations
    );
}
