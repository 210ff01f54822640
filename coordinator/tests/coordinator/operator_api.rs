//! The operator API — through real HTTP where it needs streams, agents or allocation, in process
//! (`Router::oneshot`) where a request and its answer are all there is — and every documented
//! 4xx of the framework API with a check that the refused request changed nothing.

#![allow(clippy::unwrap_used)]

use crate::support::{fast_config, wait_for, Api, FakeAgent, Rest, TestCoordinator};
use axum::http::Method;
use protocol::events::OfferEvent;
use protocol::{FrameworkId, OfferId, TaskState};
use serde_json::{json, Value};
use testkit::SseReader;

/// Everything a bad request must leave unchanged.
async fn snapshot(c: &TestCoordinator) -> (Value, Value, Value, Value) {
    (
        c.get("/api/v1/offers").await,
        c.get("/api/v1/tasks").await,
        c.get("/api/v1/frameworks").await,
        c.get("/api/v1/roles").await,
    )
}

#[tokio::test]
async fn every_bad_framework_request_is_refused_and_changes_nothing() {
    let config = coordinator::Config {
        max_body_bytes: 4096,
        ..fast_config()
    };
    let c = TestCoordinator::start(config).await;
    let (fw, mut events) = c.framework("f", "f").await;
    let (other, mut other_events) = c.framework("g", "g").await;
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 4, "mem": 100}))
        .await;
    let agent2 = FakeAgent::start().await;
    c.register_agent(&agent2, json!({"cpus": 4, "mem": 100}))
        .await;
    // Wait until each framework holds one offer; then nothing is free, so nothing moves.
    wait_for("two offers", || async { c.offers().await.len() == 2 }).await;
    let offers = c.offers().await;
    let mine = offers
        .iter()
        .find(|o| o.framework_id == fw)
        .unwrap()
        .clone();
    let theirs = offers
        .iter()
        .find(|o| o.framework_id == other)
        .unwrap()
        .clone();
    // Which agent each framework was offered depends on H-DRF's order; name them after it.
    let (agent_id, agent2_id) = (mine.agent_id, theirs.agent_id);
    // A running task of `fw` on its offer's agent, launched from part of an earlier offer.
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/accept"),
            json!({"offer_ids": [mine.offer_id], "refuse_seconds": 60, "tasks": [
                {"task_id": "t1", "agent_id": mine.agent_id, "resources": {"cpus": 1},
                 "command": {"shell": "sleep 9"}}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    c.post_status(mine.agent_id, fw, "t1", TaskState::Running)
        .await;
    // The rest of `mine` is filtered for `fw` (60 s), so it goes to `other`; wait for it.
    let rest = loop {
        if let Some(o) = other_events
            .offers()
            .await
            .into_iter()
            .find(|o| o.agent_id == agent_id)
        {
            break o;
        }
    };
    let used = mine.offer_id;
    let _ = events.update("t1", TaskState::Running).await;
    let before = snapshot(&c).await;

    let task = |id: &str, agent: protocol::AgentId, res: Value| json!({"task_id": id, "agent_id": agent, "resources": res, "command": {"shell": "true"}});
    let ours = other; // `other` holds `theirs` and `rest` (on two agents)
    let base = format!("/api/v1/frameworks/{ours}");
    let unknown = FrameworkId::new();
    let cases: Vec<(String, Value, u16, &str)> = vec![
        // 404: unknown ids.
        (
            format!("/api/v1/frameworks/{unknown}/accept"),
            json!({"offer_ids": [theirs.offer_id]}),
            404,
            "framework_not_found",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [OfferId::new()]}),
            404,
            "offer_not_found",
        ),
        (
            format!("{base}/decline"),
            json!({"offer_ids": [OfferId::new()]}),
            404,
            "offer_not_found",
        ),
        (
            format!("{base}/kill"),
            json!({"task_id": "nope"}),
            404,
            "task_not_found",
        ),
        (
            format!("{base}/reconcile"),
            json!({"task_ids": ["nope"]}),
            404,
            "task_not_found",
        ),
        (
            format!("/api/v1/frameworks/{fw}/acknowledge"),
            json!({"task_id": "t1", "update_id": protocol::UpdateId::new()}),
            404,
            "update_not_found",
        ),
        (
            format!("/api/v1/frameworks/{unknown}/suppress"),
            json!({}),
            404,
            "framework_not_found",
        ),
        // 403: someone else's offer.
        (
            format!("/api/v1/frameworks/{fw}/accept"),
            json!({"offer_ids": [theirs.offer_id]}),
            403,
            "offer_not_yours",
        ),
        (
            format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [theirs.offer_id]}),
            403,
            "offer_not_yours",
        ),
        // 409: used offer, existing task id, removed framework id.
        (
            format!("/api/v1/frameworks/{fw}/accept"),
            json!({"offer_ids": [used]}),
            409,
            "offer_not_outstanding",
        ),
        (
            format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [used]}),
            409,
            "offer_not_outstanding",
        ),
        // 422: well-formed but invalid.
        (
            format!("{base}/accept"),
            json!({"offer_ids": []}),
            422,
            "no_offers",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id, theirs.offer_id]}),
            422,
            "duplicate_offer",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id, rest.offer_id]}),
            422,
            "offers_on_several_agents",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "tasks": [task("a", agent2_id, json!({"cpus": 5}))]}),
            422,
            "insufficient_resources",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "tasks": [task("a", agent2_id, json!({"gpus": 1}))]}),
            422,
            "insufficient_resources",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "tasks": [task("a", agent2_id, json!({"cpus": 1})), task("a", agent2_id, json!({"cpus": 1}))]}),
            422,
            "duplicate_task",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "tasks": [task("a", agent_id, json!({"cpus": 1}))]}),
            422,
            "task_agent_mismatch",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "tasks": [task("a", agent2_id, json!({}))]}),
            422,
            "invalid_task",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "tasks": [{"task_id": "a", "agent_id": agent2_id, "resources": {"cpus": 1}, "command": {"argv": []}}]}),
            422,
            "invalid_task",
        ),
        // 400: malformed.
        (
            format!("{base}/accept"),
            json!({"offer_ids": "x"}),
            400,
            "invalid_body",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "refuse_seconds": -1}),
            400,
            "invalid_field",
        ),
        (
            format!("{base}/accept"),
            json!({"offer_ids": [theirs.offer_id], "tasks": [task("../x", agent2_id, json!({"cpus": 1}))]}),
            400,
            "invalid_body",
        ),
        (
            format!("{base}/decline"),
            json!({"offer_ids": [theirs.offer_id], "bogus": 1}),
            400,
            "invalid_body",
        ),
        (format!("{base}/kill"), json!({}), 400, "invalid_body"),
        (
            "/api/v1/frameworks/not-a-uuid/accept".into(),
            json!({"offer_ids": []}),
            400,
            "invalid_path",
        ),
        (
            "/api/v1/frameworks".into(),
            json!({"name": "x", "role": "Bad Role"}),
            400,
            "invalid_body",
        ),
        (
            "/api/v1/frameworks".into(),
            json!({"name": "x", "role": "_orphans"}),
            400,
            "invalid_field",
        ),
        (
            "/api/v1/frameworks".into(),
            json!({"name": "", "role": "x"}),
            400,
            "invalid_field",
        ),
        (
            "/api/v1/frameworks".into(),
            json!({"name": "x", "role": "x", "failover_timeout_s": -5}),
            400,
            "invalid_field",
        ),
        (
            "/api/v1/frameworks".into(),
            json!({"name": "x", "role": "x", "demand": {"cpus": "lots"}}),
            400,
            "invalid_body",
        ),
    ];
    for (path, body, status, code) in &cases {
        let (got, answer) = c.post(path, body.clone()).await;
        assert_eq!(got, *status, "{path} {body}: {answer}");
        assert_eq!(answer["error"]["code"], *code, "{path} {body}: {answer}");
        assert!(!answer["error"]["message"].as_str().unwrap().is_empty());
    }
    // Malformed JSON, and a body over the limit.
    let (got, answer) = c.post_raw(&format!("{base}/decline"), "{not json").await;
    assert_eq!(
        (got, answer["error"]["code"].as_str()),
        (400, Some("invalid_body"))
    );
    let big = format!("{{\"offer_ids\": [], \"pad\": \"{}\"}}", "x".repeat(10_000));
    let (got, answer) = c.post_raw(&format!("{base}/decline"), big).await;
    assert_eq!(
        (got, answer["error"]["code"].as_str()),
        (413, Some("body_too_large"))
    );
    assert_eq!(
        snapshot(&c).await,
        before,
        "a refused request changed state"
    );

    // 409 for a task id that exists: accept `theirs` with t9, then again with t9 on `rest`.
    let (status, body) = c
        .post(&format!("{base}/accept"), json!({"offer_ids": [theirs.offer_id], "tasks": [task("t9", agent2_id, json!({"cpus": 1}))]}))
        .await;
    assert_eq!(status, 200, "{body}");
    // Let the unused rest be offered again, so the books are at rest.
    wait_for("all resources offered or used", || async {
        c.agents()
            .await
            .iter()
            .all(|a| a.used.add(&a.offered) == a.resources)
    })
    .await;
    let before = (c.get("/api/v1/tasks").await, c.get("/api/v1/agents").await);
    let (status, body) = c
        .post(&format!("{base}/accept"), json!({"offer_ids": [rest.offer_id], "tasks": [task("t9", agent_id, json!({"cpus": 1}))]}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("task_exists")),
        "{body}"
    );
    assert!(
        c.offers().await.iter().any(|o| o.offer_id == rest.offer_id),
        "offer kept"
    );
    assert_eq!(
        (c.get("/api/v1/tasks").await, c.get("/api/v1/agents").await),
        before
    );
    c.assert_books_consistent().await;
}

#[tokio::test]
async fn the_offer_stream_shows_every_offer_life() {
    let c = TestCoordinator::start(fast_config()).await;
    let mut stream = SseReader::open(&c.client, &format!("{}/api/v1/offers/events", c.base))
        .await
        .unwrap();
    let (fw, mut events) = c.framework("f", "f").await;
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 1})).await;
    let offer = events.offers().await.remove(0);
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [offer.offer_id], "refuse_seconds": 0}),
        )
        .await;
    assert_eq!(status, 200);

    let deadline = testkit::deadline_in(crate::support::DEADLINE);
    let mut seen: Vec<OfferEvent> = Vec::new();
    while !seen
        .iter()
        .any(|e| matches!(e, OfferEvent::OfferDeclined(o) if o.offer_id == offer.offer_id))
    {
        seen.push(stream.next_event(deadline).await.expect("offer events"));
    }
    assert_eq!(seen[0], OfferEvent::OfferCreated(offer.clone()));
}

#[tokio::test]
async fn state_roles_and_metrics_after_a_launch() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("f", "eng/batch").await;
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 4})).await;
    let offer = events.offers().await.remove(0);
    assert_eq!(
        c.accept_one(fw, &offer, "t1", json!({"cpus": 1})).await.0,
        200
    );

    let state = c.get("/api/v1/state").await;
    assert_eq!(state["agents"].as_array().unwrap().len(), 1);
    assert_eq!(state["frameworks"][0]["name"], "f");
    assert_eq!(state["tasks"][0]["task_id"], "t1");
    let roles = c.get("/api/v1/roles").await;
    assert_eq!(roles["path"], "");
    let eng = &roles["children"][0];
    assert_eq!(eng["path"], "eng");
    assert_eq!(eng["children"][0]["frameworks"][0], json!(fw));
    assert!(roles["dominant_share"].as_f64().unwrap() > 0.0);

    let (status, text) = c.get_text("/metrics").await;
    assert_eq!(status, 200);
    assert!(text.contains("parley_offers_accepted_total 1"), "{text}");
    assert!(text.contains("parley_tasks{state=\"staging\"} 1"), "{text}");
    assert!(text.contains("parley_agents{state=\"active\"} 1"), "{text}");
    assert!(
        text.contains("parley_role_dominant_share{role=\"eng/batch\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn weights_queries_health_routing_errors_and_the_dashboard_in_process() {
    let api = Api::new(fast_config());
    let (status, body) = api
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "eng/batch"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let fw: FrameworkId = serde_json::from_value(body["framework_id"].clone()).unwrap();

    // Weights change at run time.
    let (status, _) = api
        .put("/api/v1/roles/eng/batch", json!({"weight": 3}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        api.get("/api/v1/roles").await["children"][0]["children"][0]["weight"],
        3.0
    );
    for (path, body) in [
        ("eng", json!({"weight": 0})),
        ("eng", json!({"weight": "x"})),
        ("Bad", json!({"weight": 1})),
        ("_x", json!({"weight": 1})),
    ] {
        let (status, _) = api
            .put(&format!("/api/v1/roles/{path}"), body.clone())
            .await;
        assert_eq!(status, 400, "{path} {body}");
    }
    assert_eq!(api.get("/api/v1/roles").await["children"][0]["weight"], 1.0);

    let offers = api.get(&format!("/api/v1/offers?framework_id={fw}")).await;
    assert!(offers["offers"].is_array());
    let (status, _) = api.get_text("/api/v1/offers?agent_id=zzz").await;
    assert_eq!(status, 400);

    // Standalone (no --etcd): no leader to name.
    assert_eq!(
        api.get("/health").await,
        json!({"role": "standalone", "leader": null})
    );

    let (status, body) = api.call(Method::GET, "/api/v1/nope", None).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "no_such_endpoint");
    let (status, body) = api.call(Method::DELETE, "/api/v1/offers", None).await;
    assert_eq!(status, 405);
    assert_eq!(body["error"]["code"], "method_not_allowed");
    let (_, page) = api.get_text("/").await;
    assert!(page.contains("EventSource") || page.contains("app.js"));
    let (_, js) = api.get_text("/ui/app.js").await;
    assert!(js.contains("/api/v1/offers/events"));

    // Explain: unknown and malformed framework ids.
    let (status, _) = api
        .get_text(&format!(
            "/api/v1/frameworks/{}/explain",
            FrameworkId::new()
        ))
        .await;
    assert_eq!(status, 404);
    let (status, _) = api.get_text("/api/v1/frameworks/nope/explain").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn explain_says_why_a_framework_is_not_offered() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("f", "eng").await;
    let e = explain(&c, fw).await;
    assert_eq!(e["agents"]["active"], 0);
    assert_eq!(e["summary"], "no active agents in the cluster");

    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 2})).await;
    let offer = events.offers().await.remove(0);
    let e = explain(&c, fw).await;
    assert_eq!(
        (
            e["agents"]["offered_to_it"].clone(),
            e["outstanding_offers"].clone()
        ),
        (json!(1), json!(1))
    );
    assert!(
        e["summary"]
            .as_str()
            .unwrap()
            .starts_with("it holds offers"),
        "{e}"
    );

    // Declined with a long filter: the agent is filtered, and the summary says until when.
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [offer.offer_id], "refuse_seconds": 60}),
        )
        .await;
    assert_eq!(status, 200);
    let e = explain(&c, fw).await;
    assert_eq!(e["agents"]["filtered"], 1, "{e}");
    let ends = e["next_filter_ends_in_s"].as_f64().unwrap();
    assert!(ends > 50.0 && ends <= 60.0, "{e}");
    assert!(
        e["summary"]
            .as_str()
            .unwrap()
            .contains("declined and stay filtered"),
        "{e}"
    );

    // Suppressed is the first reason given; revive clears filters and suppression.
    assert_eq!(
        c.post(&format!("/api/v1/frameworks/{fw}/suppress"), json!({}))
            .await
            .0,
        200
    );
    let e = explain(&c, fw).await;
    assert_eq!(e["suppressed"], true);
    assert!(
        e["summary"].as_str().unwrap().starts_with("suppressed"),
        "{e}"
    );
    assert_eq!(
        c.post(&format!("/api/v1/frameworks/{fw}/revive"), json!({}))
            .await
            .0,
        200
    );
    events.offers().await;
    let e = explain(&c, fw).await;
    assert_eq!(e["agents"]["offered_to_it"], 1, "{e}");
    // A framework offered what it wants is not stalled: no `stalled_for_s`, and the gauge
    // is 0.
    assert!(e.get("stalled_for_s").is_none(), "{e}");
    let (status, metrics) = c.get_text("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.lines().any(|l| l == "parley_frameworks_stalled 0"),
        "{metrics}"
    );

    // Disconnected frameworks are told to open their stream.
    drop(events);
    wait_for("disconnected", || async {
        explain(&c, fw).await["state"] == "disconnected"
    })
    .await;
    assert!(explain(&c, fw).await["summary"]
        .as_str()
        .unwrap()
        .starts_with("not subscribed"));
}

#[tokio::test]
async fn a_framework_filtered_past_stall_after_is_reported_stalled() {
    let c = TestCoordinator::start(coordinator::Config {
        stall_after: std::time::Duration::from_secs(1),
        ..fast_config()
    })
    .await;
    let (fw, mut events) = c.framework("f", "eng").await;
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 2})).await;
    let offer = events.offers().await.remove(0);
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [offer.offer_id], "refuse_seconds": 600}),
        )
        .await;
    assert_eq!(status, 200);
    // The maintenance tick finds the stall on its own: nothing else happens.
    wait_for("the stall gauge", || async {
        c.get_text("/metrics")
            .await
            .1
            .lines()
            .any(|l| l == "parley_frameworks_stalled 1")
    })
    .await;
    let e = explain(&c, fw).await;
    assert!(e["stalled_for_s"].as_f64().unwrap() >= 1.0, "{e}");
    let summary = e["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("stalled: no offer for ")
            && summary.contains("1 agent(s) are filtered by its declines"),
        "{e}"
    );
    // A revive clears the filter: it is offered the agent again, and the stall ends.
    assert_eq!(
        c.post(&format!("/api/v1/frameworks/{fw}/revive"), json!({}))
            .await
            .0,
        200
    );
    events.offers().await;
    wait_for("the stall to end", || async {
        c.get_text("/metrics")
            .await
            .1
            .lines()
            .any(|l| l == "parley_frameworks_stalled 0")
    })
    .await;
    assert!(explain(&c, fw).await.get("stalled_for_s").is_none());
}

async fn explain(c: &TestCoordinator, fw: FrameworkId) -> Value {
    c.get(&format!("/api/v1/frameworks/{fw}/explain")).await
}
