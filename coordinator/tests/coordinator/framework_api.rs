//! The framework API through real HTTP: registration, offers, accept, decline with filters,
//! suppress / revive, expiry, failover, at-least-once updates, reconcile, kill, removal.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::{fast_config, wait_for, FakeAgent, Rest, TestCoordinator};
use protocol::{FrameworkEvent, FrameworkId, TaskState, TaskStatus};
use serde_json::json;

#[tokio::test]
async fn offers_arrive_and_accept_launches_on_the_agent() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("hello", "eng/batch").await;
    let agent = FakeAgent::start().await;
    let agent_id = c
        .register_agent(&agent, json!({"cpus": 4, "mem": 4096}))
        .await;

    let offers = events.offers().await;
    assert_eq!(offers.len(), 1);
    let offer = &offers[0];
    assert_eq!((offer.agent_id, offer.framework_id), (agent_id, fw));
    assert_eq!(offer.resources, "cpus=4,mem=4096".parse().unwrap());
    assert_eq!(offer.agent_total, offer.resources);
    assert_eq!(
        c.offers().await,
        offers,
        "GET /offers lists the outstanding offer"
    );
    c.assert_books_consistent().await;

    let (status, body) = c
        .accept_one(fw, offer, "t1", json!({"cpus": 1, "mem": 1024}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"launched": ["t1"]}));
    wait_for("launch on the agent", || async {
        agent.launched_task_ids() == ["t1"]
    })
    .await;
    let launch = agent.received.lock().unwrap().launches[0].clone();
    assert_eq!(launch.framework_id, fw);
    assert_eq!(c.task("t1").await.unwrap().state, TaskState::Staging);

    // The unused rest (refuse_seconds 0) is offered again at once.
    let rest = events.offers().await;
    assert_eq!(rest[0].resources, "cpus=3,mem=3072".parse().unwrap());
    c.assert_books_consistent().await;
    let a = &c.agents().await[0];
    assert_eq!(a.used, "cpus=1,mem=1024".parse().unwrap());

    // The offer id was single use.
    let (status, body) = c.accept_one(fw, offer, "t2", json!({"cpus": 1})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "offer_not_outstanding");

    // A running then finished task frees its resources, and they are offered again.
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    events.update("t1", TaskState::Running).await;
    c.post_status(agent_id, fw, "t1", TaskState::Finished).await;
    events.update("t1", TaskState::Finished).await;
    wait_for("resources freed", || async {
        c.agents().await[0].used.is_empty()
    })
    .await;
    c.assert_books_consistent().await;
}

#[tokio::test]
async fn decline_filters_the_agent_for_refuse_seconds_and_revive_clears_it() {
    let c = TestCoordinator::start(fast_config()).await;
    let (a, mut a_events) = c.framework("a", "a").await;
    let (b, mut b_events) = c.framework("b", "b").await;
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 2})).await;

    // Whoever gets the offer declines it with a long filter; the other framework gets it next.
    wait_for("an offer", || async { !c.offers().await.is_empty() }).await;
    let offer = c.offers().await.remove(0);
    let (first, second, second_events) = if offer.framework_id == a {
        (a, b, &mut b_events)
    } else {
        (b, a, &mut a_events)
    };
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{first}/decline"),
            json!({"offer_ids": [offer.offer_id], "refuse_seconds": 60}),
        )
        .await;
    assert_eq!(status, 200);
    let next = second_events.offers().await;
    assert_eq!(next[0].framework_id, second);
    c.assert_books_consistent().await;

    // The second framework declines too, briefly: the first is still filtered, so the offer
    // comes back to the second.
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{second}/decline"),
            json!({"offer_ids": [next[0].offer_id], "refuse_seconds": 0}),
        )
        .await;
    assert_eq!(status, 200);
    let again = second_events.offers().await;
    assert_eq!(
        again[0].framework_id, second,
        "the first framework is filtered"
    );

    // Suppressing the second and reviving the first: the first gets offers despite its filter.
    let (status, _) = c
        .post(&format!("/api/v1/frameworks/{second}/suppress"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{second}/decline"),
            json!({"offer_ids": [again[0].offer_id], "refuse_seconds": 0}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = c
        .post(&format!("/api/v1/frameworks/{first}/revive"), json!({}))
        .await;
    assert_eq!(status, 200);
    wait_for("offer to the revived framework", || async {
        c.offers().await.iter().any(|o| o.framework_id == first)
    })
    .await;
    let fws = c.frameworks().await;
    assert!(
        fws.iter()
            .find(|f| f.framework_id == second)
            .unwrap()
            .suppressed
    );
}

#[tokio::test]
async fn suppressed_framework_gets_no_offers_until_revive() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("s", "s").await;
    let (status, _) = c
        .post(&format!("/api/v1/frameworks/{fw}/suppress"), json!({}))
        .await;
    assert_eq!(status, 200);
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 1})).await;
    // Let several allocation runs pass (counted on /metrics), then check nothing was offered.
    let runs = || async {
        let (_, text) = c.get_text("/metrics").await;
        text.lines()
            .find_map(|l| l.strip_prefix("parley_allocation_run_seconds_count "))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let start = runs().await;
    wait_for("five allocation runs", || async {
        runs().await >= start + 5
    })
    .await;
    assert!(
        c.offers().await.is_empty(),
        "a suppressed framework got an offer"
    );

    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/revive"),
            json!({"demand": {"cpus": 1}}),
        )
        .await;
    assert_eq!(status, 200);
    let offers = events.offers().await;
    assert_eq!(offers[0].framework_id, fw);
}

#[tokio::test]
async fn unanswered_offers_expire_and_are_rescinded() {
    let config = coordinator::Config {
        offer_timeout: Duration::from_millis(200),
        ..fast_config()
    };
    let c = TestCoordinator::start(config).await;
    let (_, mut events) = c.framework("slow", "slow").await;
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 1})).await;
    let offer = events.offers().await.remove(0);
    let ev = events
        .wait_for("rescind", |e| matches!(e, FrameworkEvent::Rescind { .. }))
        .await;
    assert_eq!(
        ev,
        FrameworkEvent::Rescind {
            offer_id: offer.offer_id
        }
    );
    // The resources are offered again, under a new id.
    let again = events.offers().await;
    assert_ne!(again[0].offer_id, offer.offer_id);
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{}/decline", offer.framework_id),
            json!({"offer_ids": [offer.offer_id]}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
}

#[tokio::test]
async fn updates_are_resent_until_acknowledged() {
    let (c, fw, mut events, agent_id, _agent) = two_tasks_launched("u").await;

    let sent = c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    let first = events.update("t1", TaskState::Running).await;
    assert_eq!(first.update_id, sent.update_id);
    // Not acknowledged: sent again, same update id.
    let again = events.update("t1", TaskState::Running).await;
    assert_eq!(again.update_id, sent.update_id);

    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/acknowledge"),
            json!({"task_id": "t1", "update_id": sent.update_id}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // Drain what was in flight, then watch t2's update be re-sent twice (two re-send rounds)
    // while t1's never comes again.
    c.post_status(agent_id, fw, "t2", TaskState::Running).await;
    let mut t2_seen = 0;
    let mut t1_after = 0;
    while t2_seen < 3 {
        match events.next().await.unwrap() {
            FrameworkEvent::Update { status } if status.task_id.as_str() == "t2" => t2_seen += 1,
            FrameworkEvent::Update { status } if status.task_id.as_str() == "t1" && t2_seen > 0 => {
                t1_after += 1
            }
            _ => {}
        }
    }
    assert_eq!(t1_after, 0, "an acknowledged update was sent again");

    // Acknowledging an unknown update is 404; reconcile sends the latest state.
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/acknowledge"),
            json!({"task_id": "t1", "update_id": protocol::UpdateId::new()}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/reconcile"),
            json!({"task_ids": ["t1"]}),
        )
        .await;
    assert_eq!(status, 200);
    let r = events.update("t1", TaskState::Running).await;
    assert_eq!(r.update_id, sent.update_id);
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/reconcile"),
            json!({"task_ids": ["nope"]}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = c
        .post(&format!("/api/v1/frameworks/{fw}/reconcile"), json!({}))
        .await;
    assert_eq!(status, 200);
    events.update("t2", TaskState::Running).await;
}

#[tokio::test]
async fn kill_is_forwarded_and_the_outcome_arrives_as_an_update() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("k", "k").await;
    let agent = FakeAgent::start().await;
    let agent_id = c.register_agent(&agent, json!({"cpus": 1})).await;
    let offer = events.offers().await.remove(0);
    assert_eq!(
        c.accept_one(fw, &offer, "t1", json!({"cpus": 1})).await.0,
        200
    );
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/kill"),
            json!({"task_id": "t1"}),
        )
        .await;
    assert_eq!(status, 200);
    wait_for("kill on the agent", || async { agent.kills() == ["t1"] }).await;
    c.post_status(agent_id, fw, "t1", TaskState::Killed).await;
    events.update("t1", TaskState::Killed).await;
    // Freed: the agent's resources are offered again.
    let again = events.offers().await;
    assert_eq!(again[0].resources, "cpus=1".parse().unwrap());
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/kill"),
            json!({"task_id": "x"}),
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn unreachable_agent_makes_launched_tasks_lost() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("l", "l").await;
    // An endpoint nobody listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (status, _) = c
        .post(
            "/api/v1/agents",
            json!({"hostname": "h", "endpoint": endpoint, "resources": {"cpus": 1}}),
        )
        .await;
    assert_eq!(status, 201);
    let offer = events.offers().await.remove(0);
    assert_eq!(
        c.accept_one(fw, &offer, "t1", json!({"cpus": 1})).await.0,
        200
    );
    let lost = events.update("t1", TaskState::Lost).await;
    assert!(lost.message.unwrap().contains("unreachable"));
    wait_for("resources freed", || async {
        c.agents().await[0].used.is_empty()
    })
    .await;
}

#[tokio::test]
async fn failover_within_the_timeout_keeps_tasks() {
    let c = TestCoordinator::start(fast_config()).await;
    let fw = c
        .register_framework_with(json!({"name": "f", "role": "f", "failover_timeout_s": 30}))
        .await;
    let mut events = c.subscribe(fw).await;
    let agent = FakeAgent::start().await;
    let agent_id = c.register_agent(&agent, json!({"cpus": 2})).await;
    let offer = events.offers().await.remove(0);
    assert_eq!(
        c.accept_one(fw, &offer, "t1", json!({"cpus": 1})).await.0,
        200
    );
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    events.update("t1", TaskState::Running).await;

    drop(events);
    wait_for("framework disconnected", || async {
        c.frameworks().await[0].state == "disconnected"
    })
    .await;
    assert!(
        c.offers().await.is_empty(),
        "a disconnected framework's offers are rescinded"
    );

    let (status, body) = c
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "f", "framework_id": fw}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["framework_id"], json!(fw));
    let mut events = c.subscribe(fw).await;
    // The unacknowledged update comes again on the new stream; the task is still there.
    events.update("t1", TaskState::Running).await;
    assert_eq!(c.task("t1").await.unwrap().state, TaskState::Running);
    assert!(agent.kills().is_empty());
}

#[tokio::test]
async fn failover_timeout_removes_the_framework_and_kills_its_tasks() {
    let c = TestCoordinator::start(fast_config()).await;
    let fw = c
        .register_framework_with(json!({"name": "f", "role": "f", "failover_timeout_s": 0.2}))
        .await;
    let mut events = c.subscribe(fw).await;
    let agent = FakeAgent::start().await;
    let agent_id = c.register_agent(&agent, json!({"cpus": 2})).await;
    let offer = events.offers().await.remove(0);
    assert_eq!(
        c.accept_one(fw, &offer, "t1", json!({"cpus": 1})).await.0,
        200
    );
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    drop(events);

    wait_for("framework removed", || async {
        c.frameworks().await.is_empty()
    })
    .await;
    wait_for("task killed on the agent", || async {
        agent.kills() == ["t1"]
    })
    .await;
    assert!(c.tasks().await.is_empty());
    assert!(c.agents().await[0].used.is_empty());
    let (status, body) = c
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "f", "framework_id": fw}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "framework_removed");
    // Its late status updates are accepted and dropped.
    c.post_status(agent_id, fw, "t1", TaskState::Killed).await;
    assert!(c.tasks().await.is_empty());
}

#[tokio::test]
async fn a_newer_stream_replaces_the_older_and_delete_ends_it() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut old) = c.framework("r", "r").await;
    let mut new = c.subscribe(fw).await;
    old.ended().await;
    assert_eq!(c.frameworks().await[0].state, "connected");
    let agent = FakeAgent::start().await;
    c.register_agent(&agent, json!({"cpus": 1})).await;
    let offer = new.offers().await.remove(0);

    let resp = c
        .client
        .delete(format!("{}/api/v1/frameworks/{fw}", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let seen = new.ended().await;
    assert!(
        seen.iter()
            .any(|e| matches!(e, FrameworkEvent::Error { .. })),
        "{seen:?}"
    );
    assert!(c.frameworks().await.is_empty());
    assert!(c.offers().await.is_empty());
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [offer.offer_id]}),
        )
        .await;
    assert_eq!(status, 404);
    c.assert_books_consistent().await;
}

#[tokio::test]
async fn batched_statuses_and_acknowledgements() {
    let (c, fw, mut events, agent_id, _agent) = two_tasks_launched("b").await;
    let status_of =
        |task: &str, state: TaskState| crate::support::status_of(agent_id, fw, task, state);

    // A batch with one status of another agent is refused whole: nothing is relayed.
    let mut foreign = status_of("t2", TaskState::Running);
    foreign.agent_id = protocol::AgentId::new();
    let (code, body) = c
        .post(
            &format!("/api/v1/agents/{agent_id}/statuses"),
            json!({"statuses": [status_of("t1", TaskState::Running), foreign]}),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    let tasks = c.get("/api/v1/tasks").await;
    assert!(
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "staging"),
        "{tasks}"
    );

    // A good batch: every update arrives, in order.
    let batch = [
        status_of("t1", TaskState::Running),
        status_of("t2", TaskState::Running),
        status_of("t1", TaskState::Finished),
    ];
    let (code, body) = c
        .post(
            &format!("/api/v1/agents/{agent_id}/statuses"),
            json!({ "statuses": batch }),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        if let Some(FrameworkEvent::Update { status }) = events.next().await {
            if !seen
                .iter()
                .any(|s: &TaskStatus| s.update_id == status.update_id)
            {
                seen.push(status);
            }
        }
    }
    let ids: Vec<_> = seen.iter().map(|s| s.update_id).collect();
    assert_eq!(ids, batch.iter().map(|s| s.update_id).collect::<Vec<_>>());

    // Acknowledge all three and one unknown in one call.
    let mut acks: Vec<_> = batch
        .iter()
        .map(|s| json!({"task_id": s.task_id, "update_id": s.update_id}))
        .collect();
    acks.push(json!({"task_id": "t9", "update_id": protocol::UpdateId::new()}));
    let (code, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/acknowledgements"),
            json!({ "acknowledgements": acks }),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["acknowledged"], 3);
    assert_eq!(body["unknown"][0]["task_id"], "t9");
    // Malformed batches are 400/422 and an unknown framework 404.
    let (code, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/acknowledgements"),
            json!({"acks": []}),
        )
        .await;
    assert!(code == 400 || code == 422, "{code}");
    let (code, _) = c
        .post(
            &format!("/api/v1/frameworks/{}/acknowledgements", FrameworkId::new()),
            json!({"acknowledgements": []}),
        )
        .await;
    assert_eq!(code, 404);
}

/// Two fake agents of two cpus registered with `c`, and an offer of each, from `events`.
async fn two_agents_offered(
    c: &TestCoordinator,
    events: &mut crate::support::EventStream,
) -> (FakeAgent, FakeAgent, Vec<protocol::Offer>) {
    let (a, b) = (FakeAgent::start().await, FakeAgent::start().await);
    c.register_agent(&a, json!({"cpus": 2})).await;
    c.register_agent(&b, json!({"cpus": 2})).await;
    let mut offers = Vec::new();
    while offers.len() < 2 {
        offers.extend(events.offers().await);
    }
    (a, b, offers)
}

/// One task of one cpu on `offer`'s agent, as an accept of that offer.
fn accept_of(offer: &protocol::Offer, task: &str) -> serde_json::Value {
    json!({"offer_ids": [offer.offer_id], "refuse_seconds": 0, "tasks": [
        {"task_id": task, "agent_id": offer.agent_id, "resources": {"cpus": 1},
         "command": {"argv": ["true"]}}
    ]})
}

#[tokio::test]
async fn accepts_of_several_agents_go_in_one_call_each_answered_alone() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework("batch", "eng/batch").await;
    let (a, b, offers) = two_agents_offered(&c, &mut events).await;
    let path = format!("/api/v1/frameworks/{fw}/accepts");

    // Malformed: the whole call is refused, naming the accept, and nothing changes.
    let mut bad = accept_of(&offers[1], "bad");
    bad["tasks"][0]["command"] = json!({"argv": []});
    let (status, body) = c
        .post(
            &path,
            json!({"accepts": [accept_of(&offers[0], "t1"), bad]}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_task");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("accepts[1]: task bad:"), "{message}");
    let too_many: Vec<_> = (0..=protocol::messages::AcceptBatch::MAX)
        .map(|i| accept_of(&offers[0], &format!("t{i}")))
        .collect();
    let (status, body) = c.post(&path, json!({ "accepts": too_many })).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("accepts"),
        "{body}"
    );
    assert_eq!(
        c.offers().await.len(),
        2,
        "the refused calls changed nothing"
    );
    assert!(c.tasks().await.is_empty());

    // An offer gone since refuses only its own accept; the others launch.
    let (status, body) = c
        .post(
            &path,
            json!({"accepts": [
                accept_of(&offers[0], "t1"),
                accept_of(&offers[0], "t2"),
                accept_of(&offers[1], "t3"),
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{body}");
    assert_eq!(results[0], json!({"status": 200, "launched": ["t1"]}));
    assert_eq!(results[1]["status"], 409, "{body}");
    assert_eq!(results[1]["launched"], json!([]));
    assert_eq!(results[1]["error"]["code"], "offer_not_outstanding");
    assert_eq!(results[2], json!({"status": 200, "launched": ["t3"]}));
    wait_for("both agents launched", || async {
        a.launched_task_ids().len() + b.launched_task_ids().len() == 2
    })
    .await;
    let mut launched = [a.launched_task_ids(), b.launched_task_ids()].concat();
    launched.sort();
    assert_eq!(launched, ["t1", "t3"]);
    assert!(c.task("t2").await.is_none());
    c.assert_books_consistent().await;

    // Another framework's id: refused as a whole.
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{}/accepts", FrameworkId::new()),
            json!({"accepts": []}),
        )
        .await;
    assert_eq!(status, 404);
}

/// A coordinator, a framework `name` with its stream, and a fake agent of 2 cpus on which the
/// framework has launched tasks `t1` and `t2` (1 cpu each), still staging.
async fn two_tasks_launched(
    name: &str,
) -> (
    TestCoordinator,
    FrameworkId,
    crate::support::EventStream,
    protocol::AgentId,
    FakeAgent,
) {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, mut events) = c.framework(name, name).await;
    let agent = FakeAgent::start().await;
    let agent_id = c.register_agent(&agent, json!({"cpus": 2})).await;
    let offer = events.offers().await.remove(0);
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/accept"),
            json!({"offer_ids": [offer.offer_id], "tasks": [
                {"task_id": "t1", "agent_id": agent_id, "resources": {"cpus": 1}, "command": {"argv": ["true"]}},
                {"task_id": "t2", "agent_id": agent_id, "resources": {"cpus": 1}, "command": {"argv": ["true"]}}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    (c, fw, events, agent_id, agent)
}

#[tokio::test]
async fn offers_stop_once_they_hold_the_tasks_a_framework_says_it_wants() {
    let c = TestCoordinator::start(fast_config()).await;
    let (fw, _events) = c.framework("sized", "eng").await;
    let (status, _) = c
        .post(&format!("/api/v1/frameworks/{fw}/suppress"), json!({}))
        .await;
    assert_eq!(status, 200);
    let mut agents = Vec::new();
    for _ in 0..3 {
        let agent = FakeAgent::start().await;
        c.register_agent(&agent, json!({"cpus": 4, "mem": 4096}))
            .await;
        agents.push(agent);
    }
    let explain = format!("/api/v1/frameworks/{fw}/explain");

    // Three tasks of two cpus wanted: an agent's offer holds two, so two offers hold them.
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/revive"),
            json!({"demand": {"cpus": 2, "mem": 1024}, "pending_tasks": 3}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for("held back by its offers", || async {
        c.get(&explain).await["sated"] == true
    })
    .await;
    let offers = c.offers().await;
    assert_eq!(offers.len(), 2, "{offers:?}");
    assert_eq!(c.frameworks().await[0].pending_tasks, Some(3));
    assert!(c.get(&explain).await["summary"]
        .as_str()
        .unwrap()
        .starts_with("sated"));

    // Declining one and still wanting one: the other offer holds it.
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [offers[0].offer_id], "refuse_seconds": 60, "pending_tasks": 1}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(c.get(&explain).await["sated"], true);
    assert_eq!(c.offers().await, [offers[1].clone()]);
    // Declining that one too, wanting two: the third agent is offered, and holds them.
    let (status, _) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [offers[1].offer_id], "refuse_seconds": 60, "pending_tasks": 2}),
        )
        .await;
    assert_eq!(status, 200);
    wait_for("the third agent offered", || async {
        let now = c.offers().await;
        now.len() == 1 && offers.iter().all(|o| o.agent_id != now[0].agent_id)
    })
    .await;
    assert_eq!(c.get(&explain).await["sated"], true);

    // A bad count is refused, naming the field, and changes nothing.
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/revive"),
            json!({"pending_tasks": -1}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("pending_tasks"), "{message}");
    assert_eq!(c.frameworks().await[0].pending_tasks, Some(2));

    // A revive without a count lifts the bound.
    let (status, _) = c
        .post(&format!("/api/v1/frameworks/{fw}/revive"), json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(c.frameworks().await[0].pending_tasks, None);
    assert_eq!(c.get(&explain).await["sated"], false);
    c.assert_books_consistent().await;
}

#[tokio::test]
async fn a_gang_launches_on_several_agents_all_or_none() {
    // A body big enough for more members than a gang may have.
    let config = coordinator::Config {
        max_body_bytes: 4 << 20,
        ..fast_config()
    };
    let c = TestCoordinator::start(config).await;
    let (fw, mut events) = c.framework("train", "eng/ml").await;
    let (a, b, offers) = two_agents_offered(&c, &mut events).await;
    let path = format!("/api/v1/frameworks/{fw}/gang-accepts");

    // Malformed: refused naming the field, nothing launched.
    let (status, body) = c
        .post(
            &path,
            json!({"gang_id": "no spaces", "accepts": [accept_of(&offers[0], "m0")]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid gang_id"),
        "{body}"
    );
    let (status, body) = c.post(&path, json!({"gang_id": "g", "accepts": []})).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid accepts"),
        "{body}"
    );

    // More members than a gang may have: refused naming the field.
    let many: Vec<_> = (0..=protocol::gang::MAX_MEMBERS)
        .map(|i| {
            json!({"task_id": format!("t{i}"), "agent_id": offers[0].agent_id,
                   "resources": {"cpus": 0.001}, "command": {"argv": ["true"]}})
        })
        .collect();
    let huge = json!({"offer_ids": [offers[0].offer_id], "tasks": many});
    let (status, body) = c
        .post(&path, json!({"gang_id": "g", "accepts": [huge]}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 10000"),
        "{body}"
    );

    // An offer of another framework: refused, and nothing is launched.
    let (other, mut other_events) = c.framework("other", "eng/other").await;
    let c2 = FakeAgent::start().await;
    c.register_agent(&c2, json!({"cpus": 2})).await;
    let theirs = other_events.offers().await.remove(0);
    let (status, body) = c
        .post(
            &path,
            json!({"gang_id": "g", "accepts": [accept_of(&offers[0], "m0"), accept_of(&theirs, "m1")]}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "offer_not_yours");
    assert!(c.tasks().await.is_empty(), "no member launched");
    let _ = other;

    // One member on an offer the framework does not hold: the whole gang is refused.
    let mut stale = accept_of(&offers[1], "m1");
    stale["offer_ids"] = json!([protocol::OfferId::new()]);
    let (status, body) = c
        .post(
            &path,
            json!({"gang_id": "g", "accepts": [accept_of(&offers[0], "m0"), stale]}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "offer_not_found");
    assert!(c.tasks().await.is_empty(), "no member launched");
    assert_eq!(c.offers().await.len(), 3, "every offer still held");

    // Both parts: every member is sent to its agent.
    let (status, body) = c
        .post(
            &path,
            json!({"gang_id": "g", "accepts": [accept_of(&offers[0], "m0"), accept_of(&offers[1], "m1")]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["launched"], json!(["m0", "m1"]));
    wait_for("both agents launched", || async {
        a.launched_task_ids().len() + b.launched_task_ids().len() == 2
    })
    .await;
    let mut launched = [a.launched_task_ids(), b.launched_task_ids()].concat();
    launched.sort();
    assert_eq!(launched, ["m0", "m1"]);
    c.assert_books_consistent().await;
}
