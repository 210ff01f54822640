//! End to end with a credentials file: an SDK framework and a real agent, each with its
//! principal's token, run a task; another framework principal cannot take over the stream,
//! kill the task or delete the framework; without a token nothing but `/health` answers.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use coordinator::auth::{Credentials, SecretHash};
use framework_sdk::{BearerToken, CoordinatorClient, SdkError};
use protocol::{FrameworkId, TaskState};
use reqwest::StatusCode;
use serde_json::json;
use tests::{Cluster, WITHIN};
use tokio_util::sync::CancellationToken;

const TEAM_A: &str = "e2e-token-team-a-0123456789abcdef";
const TEAM_B: &str = "e2e-token-team-b-0123456789abcdef";
const NODES: &str = "e2e-token-nodes-0123456789abcdef";
const OPS: &str = "e2e-token-ops-0123456789abcdef";

fn credentials() -> Credentials {
    let h = |t: &str| SecretHash::of(t).to_hex();
    Credentials::from_toml(&format!(
        r#"
[[principals]]
name = "team-a"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*"]

[[principals]]
name = "team-b"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*"]

[[principals]]
name = "nodes"
kind = "agent"
secret_sha256 = "{}"

[[principals]]
name = "ops"
kind = "operator"
access = "read"
secret_sha256 = "{}"
"#,
        h(TEAM_A),
        h(TEAM_B),
        h(NODES),
        h(OPS)
    ))
    .unwrap()
}

/// A request as `token` (no token: `None`).
async fn send(
    http: &reqwest::Client,
    token: Option<&str>,
    method: reqwest::Method,
    url: String,
    body: Option<serde_json::Value>,
) -> StatusCode {
    let mut request = http.request(method, url);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    if let Some(b) = body {
        request = request.json(&b);
    }
    request.send().await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_its_principal_can_act_as_a_framework() {
    let config = coordinator::Config {
        allocation_interval: Duration::from_millis(100),
        agent_heartbeat_interval: Duration::from_millis(500),
        framework_heartbeat_interval: Duration::from_secs(1),
        update_resend_interval: Duration::from_millis(500),
        ..coordinator::Config::default()
    };
    let cluster = Cluster::builder()
        .config(config)
        .agent("cpus=1,mem=512")
        .reap_orphans(false)
        .credentials(credentials(), NODES, OPS)
        .start()
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", cluster.url);

    // No token: only /health.
    assert_eq!(
        send(&http, None, reqwest::Method::GET, url("/health"), None).await,
        StatusCode::OK
    );
    assert_eq!(
        send(
            &http,
            None,
            reqwest::Method::GET,
            url("/api/v1/state"),
            None
        )
        .await,
        StatusCode::UNAUTHORIZED
    );
    let anonymous = CoordinatorClient::new(&cluster.url, Duration::from_secs(5)).unwrap();
    assert!(matches!(
        anonymous.agents().await,
        Err(SdkError::Rejected { status: 401, .. })
    ));

    // The SDK framework with team-a's token runs a long task on the agent (token: nodes).
    let mut common =
        examples::common::CommonArgs::new(cluster.url.clone(), "eng/a".parse().unwrap());
    common.no_unregister = true;
    common.token = Some(BearerToken::new(TEAM_A));
    let args = examples::hello::Args {
        common,
        tasks: 1,
        command: "sleep 60".into(),
        resources: "cpus=0.5,mem=64".parse().unwrap(),
        duration_s: None,
    };
    let stop = CancellationToken::new();
    let run = tokio::spawn(examples::hello::run(args, stop.clone().cancelled_owned()));
    let (framework, task) = cluster
        .wait_for("the task running", |c| async move {
            let tasks = c.tasks().await.ok()?;
            let t = tasks
                .tasks
                .into_iter()
                .find(|t| t.state == TaskState::Running)?;
            Some((t.framework_id, t.task_id))
        })
        .await
        .unwrap();

    // team-b cannot take over its stream, kill its task, re-register its id, or delete it.
    let id: FrameworkId = framework;
    let refused = [
        (
            reqwest::Method::GET,
            format!("/api/v1/frameworks/{id}/events"),
            None,
        ),
        (
            reqwest::Method::POST,
            format!("/api/v1/frameworks/{id}/kill"),
            Some(json!({"task_id": task})),
        ),
        (
            reqwest::Method::POST,
            "/api/v1/frameworks".to_owned(),
            Some(json!({"name": "thief", "role": "eng/b", "framework_id": id})),
        ),
        (
            reqwest::Method::DELETE,
            format!("/api/v1/frameworks/{id}"),
            None,
        ),
    ];
    for (method, path, body) in refused {
        let status = send(&http, Some(TEAM_B), method.clone(), url(&path), body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}");
    }
    // Nor can the agent's principal or a read-only operator kill it.
    for token in [NODES, OPS] {
        let status = send(
            &http,
            Some(token),
            reqwest::Method::POST,
            url(&format!("/api/v1/frameworks/{id}/kill")),
            Some(json!({"task_id": task})),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let still = cluster.tasks_of(id).await.unwrap();
    assert_eq!(still.len(), 1);
    assert_eq!(still[0].state, TaskState::Running, "{still:?}");

    // Its own principal can.
    let owner = CoordinatorClient::with_token(
        &cluster.url,
        Duration::from_secs(5),
        Some(&BearerToken::new(TEAM_A)),
    )
    .unwrap();
    owner.kill(id, &task).await.unwrap();
    cluster
        .wait_for_task_state(task.as_str(), TaskState::Killed)
        .await
        .unwrap();
    stop.cancel();
    tokio::time::timeout(WITHIN, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    cluster.shutdown().await.unwrap();
}
