//! The dashboard's reads over real HTTP: the history ring (`GET /api/v1/history`), the agent
//! pages, the agent and framework views, the resource gauges of `/metrics`, the page's assets,
//! and their refusals of bad queries and unknown ids (a clear 4xx naming the parameter).

#![allow(clippy::unwrap_used)]

use crate::support::{fast_config, wait_for, FakeAgent, Rest, TestCoordinator};
use protocol::TaskState;
use serde_json::{json, Value};

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn history_pages_and_views_show_a_running_task() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("web", "eng").await;
    let agent = FakeAgent::start().await;
    let agent_id = c
        .register_agent(&agent, json!({"cpus": 4, "mem": 100}))
        .await;
    let offer = events.offers().await.remove(0);
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/accept"),
            json!({"offer_ids": [offer.offer_id], "refuse_seconds": 60, "tasks": [
                {"task_id": "t1", "agent_id": agent_id, "resources": {"cpus": 1, "mem": 10},
                 "command": {"shell": "sleep 9"}}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;

    // The sampler takes one a second: wait for one that shows the task and the offer flow.
    let fw_key = fw.to_string();
    wait_for("a history sample with the running task", || async {
        let h = c.get("/api/v1/history").await;
        h["samples"]
            .as_array()
            .and_then(|s| s.last())
            .is_some_and(|s| {
                s["tasks"]["running"] == 1
                    && s["resources"]["cpus"] == json!({"total": 4.0, "used": 1.0, "offered": 0.0})
                    && s["agents"]["active"] == 1
                    && s["offers"]["created"].as_u64() >= Some(1)
                    && s["offers"]["accepted"].as_u64() >= Some(1)
                    && s["frameworks"][&fw_key].as_f64() == Some(0.25)
                    && s["roles"]["eng"].as_f64() == Some(0.25)
            })
    })
    .await;
    let h = c.get("/api/v1/history").await;
    assert_eq!(h["interval_ms"], 1000);
    assert_eq!(h["capacity"], 600);
    let samples = h["samples"].as_array().unwrap();
    let seqs: Vec<u64> = samples.iter().map(|s| s["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let last = *seqs.last().unwrap();
    assert!(h["latest"].as_u64() >= Some(last), "{h}");
    // Only what the page has not seen yet.
    let newer = c.get(&format!("/api/v1/history?after={last}")).await;
    assert!(newer["samples"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["seq"].as_u64() > Some(last)));

    // Pages of agents.
    let page = c.get("/api/v1/dashboard/agents?limit=1").await;
    assert_eq!(
        (page["total"].clone(), page["offset"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(page["agents"][0]["agent_id"], json!(agent_id));
    assert_eq!(page["agents"][0]["used"]["cpus"], 1.0);
    let past = c.get("/api/v1/dashboard/agents?offset=5").await;
    assert_eq!(
        (past["total"].clone(), past["agents"].clone()),
        (json!(1), json!([]))
    );

    // One agent, one framework.
    let a = c.get(&format!("/api/v1/dashboard/agents/{agent_id}")).await;
    assert_eq!(a["agent"]["agent_id"], json!(agent_id));
    assert_eq!(a["task_count"], 1);
    assert_eq!(a["tasks"][0]["task_id"], "t1");
    assert_eq!(a["tasks"][0]["state"], "running");
    let f = c.get(&format!("/api/v1/dashboard/frameworks/{fw}")).await;
    assert_eq!(f["framework"]["name"], "web");
    assert_eq!(f["task_count"], 1);
    assert_eq!(f["tasks"][0]["agent_id"], json!(agent_id));
    assert!(f["offers"].is_array());

    // The resource gauges, Mesos' master/cpus_used and master/cpus_percent.
    let (_, metrics) = c.get_text("/metrics").await;
    assert!(
        metrics.contains("parley_resources_total{resource=\"cpus\"} 4\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("parley_resources_used{resource=\"cpus\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("parley_resources_used_percent{resource=\"cpus\"} 25\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn bad_queries_and_unknown_ids_are_refused() {
    let c = TestCoordinator::start(fast_config()).await;
    for (path, status, want_code, names) in [
        ("/api/v1/history?after=x", 400, "invalid_query", "after"),
        ("/api/v1/history?after=-1", 400, "invalid_query", "after"),
        ("/api/v1/history?since=1", 400, "invalid_query", "since"),
        (
            "/api/v1/dashboard/agents?limit=0",
            400,
            "invalid_query",
            "limit",
        ),
        (
            "/api/v1/dashboard/agents?limit=501",
            400,
            "invalid_query",
            "limit",
        ),
        (
            "/api/v1/dashboard/agents?offset=1.5",
            400,
            "invalid_query",
            "offset",
        ),
        ("/api/v1/dashboard/agents/nope", 400, "invalid_path", "nope"),
        (
            "/api/v1/dashboard/frameworks/nope",
            400,
            "invalid_path",
            "nope",
        ),
    ] {
        let (got, body) = c.call(axum::http::Method::GET, path, None).await;
        assert_eq!((got, code(&body)), (status, want_code), "{path}: {body}");
        assert!(body.to_string().contains(names), "{path}: {body}");
    }
    let unknown = uuid::Uuid::new_v4();
    for path in [
        format!("/api/v1/dashboard/agents/{unknown}"),
        format!("/api/v1/dashboard/frameworks/{unknown}"),
    ] {
        let (got, body) = c.call(axum::http::Method::GET, &path, None).await;
        assert_eq!(got, 404, "{path}: {body}");
    }
    // The page and its assets.
    let (status, page) = c.get_text("/").await;
    assert_eq!(status, 200);
    assert!(page.contains("/ui/app.js") && page.contains("/ui/style.css"));
    let css = c
        .client
        .get(format!("{}/ui/style.css", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(css.headers()["content-type"], "text/css");
}
