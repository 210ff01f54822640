//! Authentication, authorization and ownership of the coordinator's API, in process
//! (`Router::oneshot`): for each kind of principal what it may and may not do, each hole an
//! open API would leave reproduced as a refused request that changed nothing, and the
//! `Content-Type` rule (415) with and without credentials.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::{Api, Rest};
use axum::body::Body;
use axum::http::{header, Method, Request};
use coordinator::auth::{Credentials, SecretHash};
use coordinator::Config;
use protocol::{AgentId, FrameworkId};
use serde_json::{json, Value};

const FW_A: &str = "token-of-framework-a";
const FW_B: &str = "token-of-framework-b";
const NODES_1: &str = "token-of-agent-pool-1";
const NODES_2: &str = "token-of-agent-pool-2";
const READER: &str = "token-of-read-operator";
const ADMIN: &str = "token-of-admin-operator";

fn credentials() -> Credentials {
    let h = |t: &str| SecretHash::of(t).to_hex();
    Credentials::from_toml(&format!(
        r#"
[[principals]]
name = "team-a"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*"]
max_frameworks = 3

[[principals]]
name = "team-b"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*", "ops"]

[[principals]]
name = "pool-1"
kind = "agent"
secret_sha256 = "{}"

[[principals]]
name = "pool-2"
kind = "agent"
secret_sha256 = "{}"

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
        h(FW_A),
        h(FW_B),
        h(NODES_1),
        h(NODES_2),
        h(READER),
        h(ADMIN)
    ))
    .unwrap()
}

fn secured() -> Api {
    Api::new(Config {
        credentials: Some(Arc::new(credentials())),
        ..Config::default()
    })
}

/// Sends `body` as JSON with `token` (if any); returns the status, the error code (if the
/// answer is an error) and the body.
async fn call(
    api: &Api,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let body = match body {
        Some(b) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(b.to_string())
        }
        None => Body::empty(),
    };
    let (status, _, bytes) = api.request(request.body(body).unwrap()).await;
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

async fn register_framework(api: &Api, token: &str, role: &str) -> FrameworkId {
    let (status, body) = call(
        api,
        Some(token),
        Method::POST,
        "/api/v1/frameworks",
        Some(json!({"name": "f", "role": role})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["framework_id"].as_str().unwrap().parse().unwrap()
}

async fn register_agent(api: &Api, token: &str, agent_id: Option<AgentId>) -> (u16, Value) {
    let mut body = json!({
        "hostname": "node",
        "endpoint": "http://127.0.0.1:9",
        "resources": {"cpus": 4, "mem": 1024},
    });
    if let Some(id) = agent_id {
        body["agent_id"] = json!(id);
    }
    call(api, Some(token), Method::POST, "/api/v1/agents", Some(body)).await
}

/// The books as an admin sees them: what a refused request must leave unchanged.
async fn books(api: &Api) -> (Value, Value, Value) {
    let get = |p: &'static str| async move { call(api, Some(ADMIN), Method::GET, p, None).await.1 };
    (
        get("/api/v1/frameworks").await,
        get("/api/v1/agents").await,
        get("/api/v1/roles").await,
    )
}

#[tokio::test]
async fn without_a_valid_token_only_health_answers() {
    let api = secured();
    let (status, _) = call(&api, None, Method::GET, "/health", None).await;
    assert_eq!(status, 200);
    // The dashboard's static page (no data) too, so a browser can show its login form.
    let (status, _) = call(&api, None, Method::GET, "/", None).await;
    assert_eq!(status, 200);
    for (token, why) in [(None, "no token"), (Some("guess"), "unknown token")] {
        for (method, path) in [
            (Method::GET, "/api/v1/state"),
            (Method::GET, "/api/v1/frameworks"),
            (Method::GET, "/metrics"),
            (Method::GET, "/api/v1/history"),
            (Method::POST, "/api/v1/frameworks"),
            (Method::GET, "/no/such/route"),
        ] {
            let body = (method == Method::POST).then(|| json!({"name": "x", "role": "eng"}));
            let (status, v) = call(&api, token, method.clone(), path, body).await;
            assert_eq!(status, 401, "{why}: {method} {path}: {v}");
            assert_eq!(code(&v), "unauthorized");
        }
    }
    // The challenge header, and a malformed scheme.
    let request = Request::builder()
        .uri("/api/v1/state")
        .header(header::AUTHORIZATION, format!("Basic {READER}"))
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = api.request(request).await;
    assert_eq!(status, 401);
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    assert!(books(&api).await.0["frameworks"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn framework_principals_register_only_in_their_roles_and_up_to_their_quota() {
    let api = secured();
    register_framework(&api, FW_A, "eng").await;
    register_framework(&api, FW_A, "eng/batch/nightly").await;
    for role in ["ops", "engineering", "x/eng"] {
        let (status, v) = call(
            &api,
            Some(FW_A),
            Method::POST,
            "/api/v1/frameworks",
            Some(json!({"name": "f", "role": role})),
        )
        .await;
        assert_eq!((status, code(&v)), (403, "forbidden"), "{role}: {v}");
    }
    register_framework(&api, FW_A, "eng/c").await;
    let before = books(&api).await;
    let (status, v) = call(
        &api,
        Some(FW_A),
        Method::POST,
        "/api/v1/frameworks",
        Some(json!({"name": "fourth", "role": "eng"})),
    )
    .await;
    assert_eq!(status, 403, "max_frameworks = 3: {v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_frameworks"));
    assert_eq!(books(&api).await, before);
    // Other kinds may not register frameworks at all.
    for token in [NODES_1, READER, ADMIN] {
        let (status, _) = call(
            &api,
            Some(token),
            Method::POST,
            "/api/v1/frameworks",
            Some(json!({"name": "f", "role": "eng"})),
        )
        .await;
        assert_eq!(status, 403);
    }
}

/// Without authentication anyone could delete any framework, kill any task, take over a
/// framework's event stream and re-register its id into another role. Now only its owner can.
#[tokio::test]
async fn another_principal_cannot_act_as_a_framework() {
    let api = secured();
    let a = register_framework(&api, FW_A, "eng/a").await;
    let before = books(&api).await;
    let calls: [(Method, String, Option<Value>); 10] = [
        (Method::GET, format!("/api/v1/frameworks/{a}/events"), None),
        (
            Method::POST,
            format!("/api/v1/frameworks/{a}/accept"),
            Some(json!({"offer_ids": [protocol::OfferId::new()], "tasks": []})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{a}/decline"),
            Some(json!({"offer_ids": [protocol::OfferId::new()]})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{a}/suppress"),
            Some(json!({})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{a}/revive"),
            Some(json!({})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{a}/kill"),
            Some(json!({"task_id": "t1"})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{a}/acknowledge"),
            Some(json!({"task_id": "t1", "update_id": uuid()})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{a}/reconcile"),
            Some(json!({"task_ids": []})),
        ),
        (Method::DELETE, format!("/api/v1/frameworks/{a}"), None),
        (
            Method::POST,
            "/api/v1/frameworks".to_owned(),
            Some(json!({"name": "taken", "role": "ops", "framework_id": a})),
        ),
    ];
    for (method, path, body) in calls {
        let (status, v) = call(&api, Some(FW_B), method.clone(), &path, body).await;
        assert_eq!(
            (status, code(&v)),
            (403, "forbidden"),
            "{method} {path}: {v}"
        );
    }
    // Not even into a role team-b may use.
    let (status, _) = call(
        &api,
        Some(FW_B),
        Method::POST,
        "/api/v1/frameworks",
        Some(json!({"name": "taken", "role": "eng/a", "framework_id": a})),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(
        books(&api).await,
        before,
        "a refused call changed the books"
    );

    // Its owner may do all of it, within its roles.
    let (status, v) = call(
        &api,
        Some(FW_A),
        Method::POST,
        "/api/v1/frameworks",
        Some(json!({"name": "again", "role": "eng/b", "framework_id": a})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = call(
        &api,
        Some(FW_A),
        Method::POST,
        "/api/v1/frameworks",
        Some(json!({"name": "again", "role": "ops", "framework_id": a})),
    )
    .await;
    assert_eq!(
        status, 403,
        "re-registration into a role outside its patterns"
    );
    let (status, _) = call(
        &api,
        Some(FW_A),
        Method::POST,
        &format!("/api/v1/frameworks/{a}/suppress"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(
        &api,
        Some(FW_A),
        Method::GET,
        &format!("/api/v1/frameworks/{a}/explain"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(
        &api,
        Some(FW_A),
        Method::DELETE,
        &format!("/api/v1/frameworks/{a}"),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // The refusals were counted by reason.
    let text = metrics_text(&api).await;
    assert!(
        text.contains("parley_auth_denied_total{reason=\"not_owner\"} 11"),
        "{text}"
    );
    assert!(
        text.contains("parley_auth_denied_total{reason=\"role\"} 1"),
        "{text}"
    );
}

fn uuid() -> String {
    FrameworkId::new().to_string()
}

async fn metrics_text(api: &Api) -> String {
    let request = Request::builder()
        .uri("/metrics")
        .header(header::AUTHORIZATION, format!("Bearer {READER}"))
        .body(Body::empty())
        .unwrap();
    let (status, _, bytes) = api.request(request).await;
    assert_eq!(status, 200);
    String::from_utf8(bytes).unwrap()
}

/// Without authentication anyone could change weights and read every id. Operators: `read`
/// reads, `admin` also sets weights and deletes frameworks; frameworks and agents read nothing
/// but the agent list (frameworks) and their own explanation.
#[tokio::test]
async fn operators_read_and_only_admins_change_weights_or_delete() {
    let api = secured();
    let a = register_framework(&api, FW_A, "eng/a").await;
    for path in [
        "/api/v1/state",
        "/api/v1/frameworks",
        "/api/v1/tasks",
        "/api/v1/offers",
        "/api/v1/roles",
        "/metrics",
    ] {
        for token in [READER, ADMIN] {
            let (status, _) = call(&api, Some(token), Method::GET, path, None).await;
            assert_eq!(status, 200, "{path}");
        }
        for token in [FW_A, NODES_1] {
            let (status, _) = call(&api, Some(token), Method::GET, path, None).await;
            assert_eq!(status, 403, "{path}");
        }
    }
    let (status, _) = call(&api, Some(FW_A), Method::GET, "/api/v1/agents", None).await;
    assert_eq!(status, 200, "the SDK lists agents");
    let (status, _) = call(
        &api,
        Some(FW_B),
        Method::GET,
        &format!("/api/v1/frameworks/{a}/explain"),
        None,
    )
    .await;
    assert_eq!(status, 403);

    let weight = json!({"weight": 3.0});
    let before = books(&api).await;
    for token in [READER, FW_A, NODES_1] {
        let (status, _) = call(
            &api,
            Some(token),
            Method::PUT,
            "/api/v1/roles/eng",
            Some(weight.clone()),
        )
        .await;
        assert_eq!(status, 403);
        let (status, _) = call(
            &api,
            Some(token),
            Method::DELETE,
            &format!("/api/v1/frameworks/{a}"),
            None,
        )
        .await;
        assert_eq!(status, if token == FW_A { 200 } else { 403 });
        if token == FW_A {
            break;
        }
    }
    assert_ne!(books(&api).await, before, "its owner deleted it");
    let b = register_framework(&api, FW_B, "ops").await;
    let (status, v) = call(
        &api,
        Some(ADMIN),
        Method::PUT,
        "/api/v1/roles/eng",
        Some(weight),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = call(
        &api,
        Some(ADMIN),
        Method::DELETE,
        &format!("/api/v1/frameworks/{b}"),
        None,
    )
    .await;
    assert_eq!(status, 200);
}

/// Without authentication anyone could post fake task statuses as an agent or re-register an
/// existing agent id with a new endpoint. Now an agent id belongs to the agent principal that
/// registered it.
#[tokio::test]
async fn another_principal_cannot_act_as_an_agent() {
    let api = secured();
    let (status, v) = register_agent(&api, NODES_1, None).await;
    assert_eq!(status, 201, "{v}");
    let agent: AgentId = v["agent_id"].as_str().unwrap().parse().unwrap();
    let before = books(&api).await;
    let (status, _) = register_agent(&api, NODES_2, Some(agent)).await;
    assert_eq!(status, 403, "re-registration by another principal");
    let status_body = json!({
        "task_id": "t1",
        "framework_id": FrameworkId::new(),
        "agent_id": agent,
        "state": "finished",
        "update_id": uuid(),
        "timestamp": "2026-01-01T00:00:00Z",
    });
    for token in [NODES_2, FW_A, ADMIN] {
        for (path, body) in [
            (format!("/api/v1/agents/{agent}/heartbeat"), json!({})),
            (
                format!("/api/v1/agents/{agent}/status"),
                status_body.clone(),
            ),
            (
                format!("/api/v1/agents/{agent}/statuses"),
                json!({"statuses": [status_body.clone()]}),
            ),
        ] {
            let (status, v) = call(&api, Some(token), Method::POST, &path, Some(body)).await;
            assert_eq!(status, 403, "{token} {path}: {v}");
        }
    }
    for token in [FW_A, READER, ADMIN] {
        let (status, _) = register_agent(&api, token, None).await;
        assert_eq!(status, 403, "only agent principals register agents");
    }
    assert_eq!(books(&api).await, before);
    // Its owner may.
    let (status, _) = call(
        &api,
        Some(NODES_1),
        Method::POST,
        &format!("/api/v1/agents/{agent}/heartbeat"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = register_agent(&api, NODES_1, Some(agent)).await;
    assert_eq!(status, 200);
}

/// Found by the hostile suite with credentials: a framework that exists only as a placeholder
/// (an agent reported a task of it, it has not registered since) was "unknown" to the ownership
/// check, so any framework principal could kill its tasks or delete it. It is nobody's until a
/// framework principal registers it with its id.
#[tokio::test]
async fn a_placeholder_framework_is_nobodys_until_registered() {
    let api = secured();
    let (status, v) = register_agent(&api, NODES_1, None).await;
    assert_eq!(status, 201, "{v}");
    let agent: AgentId = v["agent_id"].as_str().unwrap().parse().unwrap();
    let orphan = FrameworkId::new();
    let running = json!({
        "task_id": "t1",
        "framework_id": orphan,
        "agent_id": agent,
        "state": "running",
        "update_id": uuid(),
        "timestamp": "2026-01-01T00:00:00Z",
        "resources": {"cpus": 1},
    });
    let (status, v) = call(
        &api,
        Some(NODES_1),
        Method::POST,
        &format!("/api/v1/agents/{agent}/status"),
        Some(running),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let before = books(&api).await;
    assert!(
        before.0.to_string().contains(&orphan.to_string()),
        "no placeholder: {}",
        before.0
    );
    for (method, path, body) in [
        (
            Method::POST,
            format!("/api/v1/frameworks/{orphan}/kill"),
            Some(json!({"task_id": "t1"})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{orphan}/reconcile"),
            Some(json!({"task_ids": ["t1"]})),
        ),
        (
            Method::POST,
            format!("/api/v1/frameworks/{orphan}/suppress"),
            Some(json!({})),
        ),
        (Method::DELETE, format!("/api/v1/frameworks/{orphan}"), None),
    ] {
        let (status, v) = call(&api, Some(FW_B), method.clone(), &path, body).await;
        assert_eq!(
            (status, code(&v)),
            (403, "forbidden"),
            "{method} {path}: {v}"
        );
    }
    assert_eq!(
        books(&api).await,
        before,
        "a refused call changed the books"
    );
    // Registering it with its id claims it; then its principal may act on it.
    let (status, v) = call(
        &api,
        Some(FW_A),
        Method::POST,
        "/api/v1/frameworks",
        Some(json!({"name": "f", "role": "eng/a", "framework_id": orphan})),
    )
    .await;
    assert!(status == 200 || status == 201, "{status} {v}");
    let (status, v) = call(
        &api,
        Some(FW_A),
        Method::POST,
        &format!("/api/v1/frameworks/{orphan}/kill"),
        Some(json!({"task_id": "t1"})),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = call(
        &api,
        Some(FW_B),
        Method::DELETE,
        &format!("/api/v1/frameworks/{orphan}"),
        None,
    )
    .await;
    assert_eq!(status, 403);
}

/// Before the check, the JSON extractor ignored Content-Type, so a web page could POST from a
/// browser (CSRF). A body must now be `application/json`, credentials or not.
#[tokio::test]
async fn bodies_must_be_json_with_or_without_credentials() {
    for api in [Api::new(Config::default()), secured()] {
        let register = json!({"name": "csrf", "role": "eng"}).to_string();
        for content_type in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            let mut request = Request::builder()
                .method(Method::POST)
                .uri("/api/v1/frameworks")
                .header(header::AUTHORIZATION, format!("Bearer {FW_A}"))
                .header(header::CONTENT_LENGTH, register.len());
            if let Some(ct) = content_type {
                request = request.header(header::CONTENT_TYPE, ct);
            }
            let (status, _, bytes) = api
                .request(request.body(Body::from(register.clone())).unwrap())
                .await;
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(status, 415, "{content_type:?}");
            assert_eq!(code(&v), "unsupported_media_type");
        }
        assert!(books(&api).await.0["frameworks"]
            .as_array()
            .unwrap()
            .is_empty());
        // JSON (with a charset) is accepted; a bodiless POST needs no type.
        let request = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/frameworks")
            .header(header::AUTHORIZATION, format!("Bearer {FW_A}"))
            .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
            .body(Body::from(register.clone()))
            .unwrap();
        let (status, _, bytes) = api.request(request).await;
        assert_eq!(status, 201);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let id = v["framework_id"].as_str().unwrap();
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("/api/v1/frameworks/{id}/suppress"))
            .header(header::AUTHORIZATION, format!("Bearer {FW_A}"))
            .body(Body::empty())
            .unwrap();
        assert_eq!(api.request(request).await.0, 200);
    }
}

/// Without a credentials file nothing changes: no token needed, every kind of call works.
#[tokio::test]
async fn without_credentials_the_api_is_open() {
    let api = Api::new(Config::default());
    let fw = api.register_framework("f", "eng").await;
    let (status, _) = api.put("/api/v1/roles/eng", json!({"weight": 2.0})).await;
    assert_eq!(status, 200);
    let (status, _) = api.get_text("/api/v1/state").await;
    assert_eq!(status, 200);
    let (status, _) = call(
        &api,
        None,
        Method::DELETE,
        &format!("/api/v1/frameworks/{fw}"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    // A token is ignored rather than refused.
    let (status, _) = call(&api, Some("anything"), Method::GET, "/api/v1/state", None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn only_an_admin_reads_the_registry_backup_and_it_holds_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let api = Api::new(Config {
        credentials: Some(Arc::new(credentials())),
        registry: Some(path.clone()),
        ..Config::default()
    });
    let fw = register_framework(&api, FW_A, "eng/batch").await;
    let (status, body) = call(
        &api,
        Some(ADMIN),
        Method::PUT,
        "/api/v1/roles/eng",
        Some(json!({"weight": 2.5})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let backup = "/api/v1/registry/backup";
    for (token, want) in [
        (None, 401),
        (Some(READER), 403),
        (Some(FW_A), 403),
        (Some(NODES_1), 403),
    ] {
        let (status, body) = call(&api, token, Method::GET, backup, None).await;
        assert_eq!(status, want, "{token:?}: {body}");
    }
    let (status, doc) = call(&api, Some(ADMIN), Method::GET, backup, None).await;
    assert_eq!(status, 200, "{doc}");
    // The document `coordinator restore` reads, with the owner of the framework.
    let parsed = coordinator::store::backup::Backup::parse(&doc.to_string()).unwrap();
    assert_eq!(parsed.records.frameworks.len(), 1);
    assert_eq!(parsed.records.frameworks[0].id, fw);
    assert_eq!(
        parsed.records.frameworks[0].owner.as_deref(),
        Some("team-a")
    );
    assert_eq!(parsed.records.role_weights[0].role.as_str(), "eng");
    assert_eq!(parsed.records.role_weights[0].weight.get(), 2.5);
    assert_eq!(doc["source"]["backend"], "redb");
    assert_eq!(doc["source"]["location"], path.display().to_string());

    // Without a registry there is nothing to back up.
    let (status, body) = call(&secured(), Some(ADMIN), Method::GET, backup, None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(code(&body), "no_registry");
}
