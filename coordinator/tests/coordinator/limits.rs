//! The coordinator's limits over the API: resource names (per vector and in total), frameworks,
//! the per-client rate limit (429 with `Retry-After`), bounded framework streams (a full queue
//! defers updates to the re-send; only a reader that stopped is cut off, and it gets its pending
//! updates on reconnecting), and supervised background loops. The body limit (413) is tested in `operator_api.rs`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::*;
use coordinator::Config;
use protocol::{AgentId, FrameworkEvent, TaskState};
use serde_json::{json, Value};

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

/// `{"n0": 1, "n1": 1, ...}` with `n` names.
fn many_names(n: usize) -> Value {
    Value::Object((0..n).map(|i| (format!("n{i}"), json!(1))).collect())
}

#[tokio::test]
async fn resource_names_are_capped_per_vector_and_in_total() {
    let api = Api::new(Config {
        max_resource_kinds: 3,
        ..fast_config()
    });
    let agent = |resources: Value| json!({"hostname": "h", "endpoint": "http://127.0.0.1:1", "resources": resources});
    // 32 names in one vector are fine by the wire rules; 33 are refused (400) before the books.
    let (status, body) = api.post("/api/v1/agents", agent(many_names(33))).await;
    assert_eq!((status, code(&body)), (400, "invalid_body"), "{body}");
    assert!(
        body.to_string().contains("too many resource names"),
        "{body}"
    );
    // The finding: 75k new names in a demand, refused at once.
    let (status, body) = api
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "eng", "demand": many_names(75_000)}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(api.frameworks().await.is_empty());

    // In total: three kinds (at the cap) are fine, a fourth is refused and changes nothing.
    api.register_agent_at(
        "http://127.0.0.1:1",
        json!({"cpus": 4, "mem": 10, "gpus": 1}),
    )
    .await;
    let (status, body) = api.post("/api/v1/agents", agent(json!({"disk": 1}))).await;
    assert_eq!(
        (status, code(&body)),
        (422, "too_many_resource_kinds"),
        "{body}"
    );
    let (status, body) = api
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "eng", "demand": {"disk": 1}}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (422, "too_many_resource_kinds"),
        "{body}"
    );
    assert_eq!(api.agents().await.len(), 1);
    assert!(api.frameworks().await.is_empty());
    api.assert_books_consistent().await;
}

#[tokio::test]
async fn frameworks_past_the_cap_are_refused_with_429() {
    let api = Api::new(Config {
        max_frameworks: 2,
        ..fast_config()
    });
    api.register_framework("a", "eng").await;
    api.register_framework("b", "eng").await;
    let (status, body) = api
        .post("/api/v1/frameworks", json!({"name": "c", "role": "eng"}))
        .await;
    assert_eq!(
        (status, code(&body)),
        (429, "too_many_frameworks"),
        "{body}"
    );
    assert_eq!(api.frameworks().await.len(), 2);
}

#[tokio::test]
async fn the_request_rate_is_limited_per_client_with_retry_after() {
    let tc = TestCoordinator::start(Config {
        rate_limit_per_s: 0.5,
        rate_limit_burst: 3,
        ..fast_config()
    })
    .await;
    let get = |token: Option<&str>, path: &str| {
        let mut req = tc.client.get(format!("{}{path}", tc.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    for _ in 0..3 {
        let resp = get(None, "/api/v1/frameworks").await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "within the burst");
    }
    let resp = get(None, "/api/v1/frameworks").await.unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    let retry: u64 = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(code(&body), "rate_limited", "{body}");
    // /health is never limited; another client (its bearer token) has its own bucket.
    let resp = get(None, "/health").await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let resp = get(Some("other"), "/metrics").await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("parley_rate_limited_total 1"), "{text}");
}

/// An agent's registration body with `n` running tasks of `fw`.
fn agent_with_running_tasks(agent: AgentId, fw: protocol::FrameworkId, n: usize) -> Value {
    let tasks: Vec<Value> = (0..n)
        .map(|i| {
            let mut s = status_of(agent, fw, &format!("t{i}"), TaskState::Running);
            s.resources = Some("cpus=0.1".parse().unwrap());
            serde_json::to_value(s).unwrap()
        })
        .collect();
    json!({"hostname": "h", "endpoint": "http://127.0.0.1:1",
           "resources": {"cpus": 4}, "agent_id": agent, "tasks": tasks})
}

/// Acknowledges `status` for `fw`; fails unless accepted.
async fn acknowledge(api: &impl Rest, fw: protocol::FrameworkId, status: &protocol::TaskStatus) {
    let (code, body) = api
        .post(
            &format!("/api/v1/frameworks/{fw}/acknowledge"),
            json!({"task_id": status.task_id, "update_id": status.update_id}),
        )
        .await;
    assert!((200..300).contains(&code), "{code} {body}");
}

/// `connected` or `disconnected`, from the framework list.
async fn framework_state(api: &impl Rest, fw: protocol::FrameworkId) -> String {
    let list = api.get("/api/v1/frameworks").await;
    let one = list["frameworks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["framework_id"] == fw.to_string())
        .unwrap_or_else(|| panic!("{fw} not listed: {list}"));
    one["state"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_full_stream_defers_updates_to_the_resend_and_stays_open() {
    let tc = TestCoordinator::start(Config {
        max_stream_queue: 16,
        ..fast_config()
    })
    .await;
    let (fw, mut stream) = tc.framework("f", "eng").await;
    // An agent comes back with 20 running tasks of the framework: 20 updates at once for a
    // queue of 16.
    let agent = AgentId::new();
    let (status, body) = tc
        .post("/api/v1/agents", agent_with_running_tasks(agent, fw, 20))
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    // The same stream brings all 20 (those left out of the full queue with the re-sends),
    // acknowledged as they are read.
    let mut got = BTreeSet::new();
    while got.len() < 20 {
        let event = stream
            .wait_for("an update", |e| matches!(e, FrameworkEvent::Update { .. }))
            .await;
        if let FrameworkEvent::Update { status } = event {
            acknowledge(&tc, fw, &status).await;
            got.insert(status.task_id.to_string());
        }
    }
    let (_, metrics) = tc.get_text("/metrics").await;
    assert!(
        metrics.contains("parley_streams_overflowed_total 0"),
        "a reader that reads is never cut off: {metrics}"
    );
    assert_eq!(framework_state(&tc, fw).await, "connected");
}

#[tokio::test]
async fn updates_a_full_stream_left_out_come_once_the_reader_made_room_not_at_the_resend() {
    let api = Api::new(Config {
        max_stream_queue: 16,
        // Never within the test: only the refill can bring what the full queue left out.
        update_resend_interval: Duration::from_secs(3600),
        ..fast_config()
    });
    let _loops = coordinator::server::spawn_loops(&api.coordinator);
    let fw = api.register_framework("f", "eng").await;
    let (mut reader, _) = api.coordinator.subscribe(fw).unwrap();
    let agent = AgentId::new();
    let (status, body) = api
        .post("/api/v1/agents", agent_with_running_tasks(agent, fw, 40))
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    // 40 updates for a queue of 16: the first 15 queue behind `subscribed`, the rest are left
    // out; reading makes room and brings them, each once, without acknowledging any.
    let mut got = Vec::new();
    while got.len() < 40 {
        let event = tokio::time::timeout(DEADLINE, reader.recv())
            .await
            .unwrap_or_else(|_| panic!("only {} of 40 updates came: {got:?}", got.len()))
            .expect("the stream stays open");
        if let FrameworkEvent::Update { status } = event {
            got.push(status.task_id.to_string());
        }
    }
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), 40, "each task's update once: {got:?}");
    let (_, metrics) = api.get_text("/metrics").await;
    assert!(
        metrics.contains("parley_streams_overflowed_total 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_reader_that_stopped_is_cut_off_and_gets_its_updates_on_reconnecting() {
    let api = Api::new(Config {
        max_stream_queue: 16,
        ..fast_config()
    });
    let _loops = coordinator::server::spawn_loops(&api.coordinator);
    let fw = api.register_framework("f", "eng").await;
    // A stream whose reader reads nothing (in process: no socket buffer reads for it).
    let (mut stopped, _) = api.coordinator.subscribe(fw).unwrap();
    let agent = AgentId::new();
    let (status, body) = api
        .post("/api/v1/agents", agent_with_running_tasks(agent, fw, 20))
        .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    // The re-sends keep pushing to the full queue; two heartbeats (at least a second) after
    // the last read, the reader counts as stopped.
    wait_for("the stopped stream to be cut off", || async {
        let (_, metrics) = api.get_text("/metrics").await;
        metrics.contains("parley_streams_overflowed_total 1")
    })
    .await;
    assert_eq!(framework_state(&api, fw).await, "disconnected");
    // What was queued can still be read, then the stream ends: the subscription, 15 updates
    // (a queue of 16 events), each once, and the offers of the agent's free resources (offers
    // coalesce, so they are queued past the limit).
    let mut queued = Vec::new();
    while let Some(event) = stopped.recv().await {
        queued.push(event);
    }
    assert!(
        matches!(queued[0], FrameworkEvent::Subscribed(_)),
        "{queued:?}"
    );
    let mut updates = BTreeSet::new();
    for event in &queued[1..] {
        match event {
            FrameworkEvent::Update { status } => assert!(updates.insert(status.update_id)),
            FrameworkEvent::Offers { .. } => {}
            other => panic!("only updates and offers were sent: {other:?}"),
        }
    }
    assert_eq!(updates.len(), 15, "{queued:?}");

    // Reconnecting, the framework gets every pending update.
    let (mut again, _) = api.coordinator.subscribe(fw).unwrap();
    let mut got = BTreeSet::new();
    while got.len() < 20 {
        let event = tokio::time::timeout(DEADLINE, again.recv())
            .await
            .expect("an update in time")
            .expect("the stream stays open");
        if let FrameworkEvent::Update { status } = event {
            acknowledge(&api, fw, &status).await;
            got.insert(status.task_id.to_string());
        }
    }
}

#[tokio::test]
async fn a_panicking_background_loop_is_logged_counted_and_restarted() {
    let api = Api::new(fast_config());
    let _loops = coordinator::server::spawn_loops(&api.coordinator);
    api.coordinator.inject_loop_panic("allocation");
    api.coordinator.inject_loop_panic("maintenance");
    let metrics = api.coordinator.metrics();
    wait_for("both loops to panic", || async move {
        metrics.loop_panics("allocation") == 1 && metrics.loop_panics("maintenance") == 1
    })
    .await;
    // The allocation loop runs again: a new framework and agent get an offer.
    let fw = api.register_framework("f", "eng").await;
    let (_stream, _) = api.coordinator.subscribe(fw).unwrap();
    api.register_agent_at("http://127.0.0.1:1", json!({"cpus": 4}))
        .await;
    wait_for("an offer from the restarted loop", || async {
        !api.offers().await.is_empty()
    })
    .await;
    let (_, text) = api.get_text("/metrics").await;
    assert!(
        text.contains("parley_loop_panics_total{loop=\"allocation\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("parley_loop_panics_total{loop=\"maintenance\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_client_that_sends_headers_too_slowly_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tc = TestCoordinator::start(Config {
        header_read_timeout: std::time::Duration::from_millis(200),
        ..fast_config()
    })
    .await;
    let addr = tc.base.trim_start_matches("http://").to_owned();
    // Half a request head, then nothing (slowloris); and an idle connection that sends nothing.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
    for conn in [&mut slow, &mut idle] {
        let mut buf = Vec::new();
        // The server closes it (after a 408 at most): read_to_end returns within the deadline.
        let closed = tokio::time::timeout(DEADLINE, conn.read_to_end(&mut buf)).await;
        assert!(closed.is_ok(), "the connection was not closed");
    }
    // A prompt client is served as before.
    let resp = tc
        .client
        .get(format!("{}/health", tc.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}
