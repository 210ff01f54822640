//! The OpenAPI document (`GET /api/v1/openapi.json`) against the router and the answers:
//!
//! - the router's route table and the document list the same (method, path) pairs, and every
//!   documented operation is routed on a running coordinator (not 404 `no_such_endpoint`,
//!   not 405);
//! - answers of a populated cluster (an agent, a framework, a launched task) validate against
//!   the document's schemas;
//! - the document is OpenAPI 3.1: its version, every `$ref` resolves, operation ids are unique,
//!   every path parameter is declared;
//! - the copy committed for the book (`docs/src/reference/openapi.json`) is the document
//!   (regenerated with `PARLEY_BLESS=1`).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::support::{fast_config, FakeAgent, Rest, TestCoordinator};
use axum::http::Method;
use coordinator::router::openapi;
use coordinator::Coordinator;
use serde_json::{json, Value};

/// The document as JSON.
fn document() -> Value {
    serde_json::from_str(openapi::json()).unwrap()
}

/// Each (method, path) the document lists, methods in lower case.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in [
            "get", "put", "post", "delete", "options", "head", "patch", "trace",
        ] {
            if item.get(method).is_some() {
                out.insert((method.to_owned(), path.clone()));
            }
        }
    }
    out
}

/// axum's `{*rest}` is OpenAPI's `{rest}`.
fn openapi_path(axum_path: &str) -> String {
    axum_path.replace("{*", "{")
}

#[tokio::test]
async fn the_router_and_the_document_list_the_same_routes() {
    let token = tokio_util::sync::CancellationToken::new();
    let coordinator = Coordinator::new(fast_config(), token.clone()).unwrap();
    let routed: BTreeSet<(String, String)> = coordinator::router::routes(&coordinator)
        .iter()
        .map(|r| (r.method.as_str().to_lowercase(), openapi_path(r.path)))
        .collect();
    let documented = documented(&document());
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty() && unrouted.is_empty(),
        "routes without a #[utoipa::path] in the document: {undocumented:?}; \
         documented operations the router lacks: {unrouted:?} \
         (coordinator/src/api/openapi.rs and mesos/mod.rs list the documented handlers)"
    );
    // Not vacuous: the table has the routes every client uses.
    for expected in [
        ("post", "/api/v1/frameworks"),
        ("get", "/api/v1/state"),
        ("put", "/api/v1/roles/{path}"),
        ("post", "/api/v1/scheduler"),
        ("get", "/api/v1/openapi.json"),
    ] {
        let expected = (expected.0.to_owned(), expected.1.to_owned());
        assert!(routed.contains(&expected), "{expected:?} is not routed");
    }
    token.cancel();
}

/// `path` with each `{param}` filled in: ids get a fresh UUID, a task id and a role a name.
fn fill(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').unwrap() + start;
        out.push_str(match &rest[start + 1..end] {
            "id" => "3f1c8a0e-6b7d-4e2a-9c55-0d1e2f3a4b5c",
            "task_id" => "t1",
            "path" => "eng",
            other => panic!("no value for the path parameter {other:?}"),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let c = TestCoordinator::start(fast_config()).await;
    let doc = document();
    let operations = documented(&doc);
    assert!(operations.len() > 30, "{operations:?}");
    for (method, path) in operations {
        let url = format!("{}{}", c.base, fill(&path));
        let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let mut request = c.client.request(method.clone(), &url);
        if method != Method::GET {
            request = request.json(&json!({}));
        }
        // Streams answer their headers at once; the body is not read.
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let is_stream = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.to_str().unwrap_or("").starts_with("text/event-stream"));
        let body: Value = if is_stream {
            Value::Null
        } else {
            serde_json::from_slice(&response.bytes().await.unwrap()).unwrap_or(Value::Null)
        };
        assert_ne!(status, 405, "{method} {path}: {body}");
        assert!(
            !(status == 404 && body["error"]["code"] == "no_such_endpoint"),
            "{method} {path} is documented but not routed: {body}"
        );
    }
}

/// A validator for the JSON answer of `method path` with `status`, from the document; `$ref`s
/// resolve against the document's components.
fn validator(doc: &Value, method: &str, path: &str, status: &str) -> jsonschema::Validator {
    let schema = doc["paths"][path][method]["responses"][status]["content"]["application/json"]
        ["schema"]
        .clone();
    assert!(
        schema.is_object(),
        "{method} {path} documents no JSON answer for {status}"
    );
    let mut root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"].clone(),
        "allOf": [schema],
    });
    root["$id"] = json!("urn:parley:openapi");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&root)
        .unwrap_or_else(|e| panic!("{method} {path} {status}: not a schema: {e}"))
}

/// Fails unless `body` is valid for `method path` answering `status`.
fn assert_valid(doc: &Value, method: &str, path: &str, status: &str, body: &Value) {
    let v = validator(doc, method, path, status);
    let errors: Vec<String> = v
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path} ({status}) does not match the document: {errors:?}\n{body:#}"
    );
}

#[tokio::test]
async fn answers_of_a_populated_cluster_match_the_schemas() {
    let c = TestCoordinator::start(fast_config()).await;
    let doc = document();

    // An agent, a framework holding an offer, and a task launched from it.
    let agent = FakeAgent::start().await;
    let (status, registered) = c
        .post(
            "/api/v1/agents",
            json!({"hostname": "fake", "endpoint": agent.endpoint,
                   "resources": {"cpus": 4, "mem": 4096}, "attributes": {"rack": "r1"}}),
        )
        .await;
    assert_eq!(status, 201, "{registered}");
    assert_valid(&doc, "post", "/api/v1/agents", "201", &registered);
    let agent_id: protocol::AgentId =
        serde_json::from_value(registered["agent_id"].clone()).unwrap();
    agent.id.lock().unwrap().replace(agent_id);
    let _alive = crate::support::keep_alive(&c, agent_id);

    let (status, fw) = c
        .post(
            "/api/v1/frameworks",
            json!({"name": "web", "role": "eng/web"}),
        )
        .await;
    assert_eq!(status, 201, "{fw}");
    assert_valid(&doc, "post", "/api/v1/frameworks", "201", &fw);
    let fw_id: protocol::FrameworkId = serde_json::from_value(fw["framework_id"].clone()).unwrap();
    let mut stream = c.subscribe(fw_id).await;
    let offers = stream.offers().await;
    let offer = offers.first().expect("an offer");
    let (status, accepted) = c
        .accept_one(fw_id, offer, "web-1", json!({"cpus": 1, "mem": 512}))
        .await;
    assert_eq!(status, 200, "{accepted}");
    assert_valid(
        &doc,
        "post",
        "/api/v1/frameworks/{id}/accept",
        "200",
        &accepted,
    );
    c.post_status(agent_id, fw_id, "web-1", protocol::TaskState::Running)
        .await;
    c.wait_for_task_state("web-1", protocol::TaskState::Running)
        .await;
    // Another offer outstanding, so that offer lists are not empty.
    let _ = stream.offers().await;

    let reads = [
        ("/api/v1/state", "/api/v1/state".to_owned()),
        ("/api/v1/agents", "/api/v1/agents".to_owned()),
        ("/api/v1/frameworks", "/api/v1/frameworks".to_owned()),
        ("/api/v1/tasks", "/api/v1/tasks".to_owned()),
        ("/api/v1/tasks", "/api/v1/tasks?state=running".to_owned()),
        ("/api/v1/roles", "/api/v1/roles".to_owned()),
        ("/api/v1/offers", "/api/v1/offers".to_owned()),
        (
            "/api/v1/frameworks/{id}/explain",
            format!("/api/v1/frameworks/{fw_id}/explain"),
        ),
        ("/api/v1/history", "/api/v1/history".to_owned()),
        (
            "/api/v1/dashboard/agents",
            "/api/v1/dashboard/agents".to_owned(),
        ),
        (
            "/api/v1/dashboard/agents/{id}",
            format!("/api/v1/dashboard/agents/{agent_id}"),
        ),
        (
            "/api/v1/dashboard/frameworks/{id}",
            format!("/api/v1/dashboard/frameworks/{fw_id}"),
        ),
        ("/health", "/health".to_owned()),
        ("/version", "/version".to_owned()),
    ];
    for (path, url) in reads {
        let body = c.get(&url).await;
        assert_valid(&doc, "get", path, "200", &body);
    }
    // The populated parts were there to check.
    let state = c.get("/api/v1/state").await;
    for part in ["agents", "frameworks", "tasks", "offers"] {
        assert!(
            !state[part].as_array().unwrap().is_empty(),
            "no {part}: {state}"
        );
    }

    // Errors answer the error body the document names.
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw_id}/kill"),
            json!({"task_id": "nope"}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let error = doc["components"]["responses"]["Error"].clone();
    assert_eq!(
        error["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
    assert_valid(
        &{
            let mut d = doc.clone();
            d["paths"]["/api/v1/frameworks/{id}/kill"]["post"]["responses"]["404"] = error;
            d
        },
        "post",
        "/api/v1/frameworks/{id}/kill",
        "404",
        &body,
    );

    // And the check can fail: a state without its tasks, or with a task of a wrong type, is
    // refused.
    let v = validator(&doc, "get", "/api/v1/state", "200");
    let mut broken = state.clone();
    broken.as_object_mut().unwrap().remove("tasks");
    assert!(!v.is_valid(&broken), "a state without tasks passed");
    let mut broken = state.clone();
    broken["tasks"][0]["state"] = json!("sleeping");
    assert!(!v.is_valid(&broken), "a task state not in the enum passed");

    // The endpoint serves the document.
    assert_eq!(c.get(openapi::PATH).await, doc);
}

/// Every `$ref` in `value`, with where it is.
fn refs<'a>(value: &'a Value, at: String, out: &mut Vec<(String, &'a str)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(r) = v.as_str() {
                        out.push((at.clone(), r));
                    }
                }
                refs(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                refs(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_document_is_openapi_3_1() {
    let doc = document();
    let version = doc["openapi"].as_str().unwrap();
    assert!(version.starts_with("3.1"), "openapi: {version}");
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());

    let mut all = Vec::new();
    refs(&doc, String::new(), &mut all);
    assert!(all.len() > 50, "suspiciously few $refs: {}", all.len());
    for (at, r) in &all {
        let pointer = r
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{at}: {r} is not a local reference"));
        assert!(doc.pointer(pointer).is_some(), "{at}: {r} does not resolve");
    }

    let mut ids = BTreeSet::new();
    for (method, path) in documented(&doc) {
        let op = &doc["paths"][&path][&method];
        let id = op["operationId"].as_str().unwrap().to_owned();
        assert!(ids.insert(id.clone()), "operationId {id} is not unique");
        assert!(
            op["responses"].as_object().is_some_and(|r| !r.is_empty()),
            "{method} {path} has no responses"
        );
        // Each `{param}` of the path is declared as a path parameter, and nothing more.
        let in_path: BTreeSet<String> = path
            .split('{')
            .skip(1)
            .map(|s| s.split('}').next().unwrap().to_owned())
            .collect();
        let declared: BTreeSet<String> = op["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p["in"] == "path")
                    .map(|p| p["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(in_path, declared, "{method} {path}: path parameters");
    }

    // Every schema of the components is a valid JSON Schema (2020-12, OpenAPI 3.1's dialect).
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        let mut root = json!({"components": doc["components"].clone(), "allOf": [schema]});
        root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&root)
            .unwrap_or_else(|e| panic!("schema {name}: {e}"));
    }
}

/// `docs/src/reference/openapi.json`.
fn committed_copy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/openapi.json")
}

#[test]
fn the_books_copy_of_the_document_is_fresh() {
    testkit::docs::fresh_or_bless(
        &committed_copy(),
        openapi::json().as_bytes(),
        "cargo test -p parley-coordinator --test coordinator openapi::",
    );
}
