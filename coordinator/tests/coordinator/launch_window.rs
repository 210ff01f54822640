//! The launch window through real HTTP: allocation offers no more agents while the tasks
//! launching and the outstanding offers fill it, and goes on once agents report.

#![allow(clippy::unwrap_used)]

use protocol::TaskState;
use serde_json::json;

use crate::support::{fast_config, wait_for, FakeAgent, Rest, TestCoordinator};

/// The time allocation runs have waited for the window, from `/metrics`.
async fn waited_s(c: &TestCoordinator) -> f64 {
    let (status, text) = c.get_text("/metrics").await;
    assert_eq!(status, 200);
    text.lines()
        .find_map(|l| l.strip_prefix("parley_launch_window_wait_seconds_total "))
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn offers_wait_while_the_launch_window_is_full() {
    let mut config = fast_config();
    config.launch_window = 2;
    let c = TestCoordinator::start(config).await;
    let (fw, mut events) = c.framework("paced", "eng").await;
    let mut agents = Vec::new();
    for _ in 0..4 {
        let agent = FakeAgent::start().await;
        c.register_agent(&agent, json!({"cpus": 2})).await;
        agents.push(agent);
    }

    // Two offers fill a window of two tasks: the other two agents wait, and the runs say so.
    wait_for("two offers and a wait", || async {
        c.offers().await.len() == 2 && waited_s(&c).await > 0.0
    })
    .await;
    let offers = c.offers().await;
    assert_eq!(offers.len(), 2);

    // Two tasks launching, the other offer declined: still full.
    let first = &offers[0];
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/accept"),
            json!({"offer_ids": [first.offer_id], "refuse_seconds": 0, "tasks": [
                {"task_id": "a", "agent_id": first.agent_id, "resources": {"cpus": 1}, "command": {"argv": ["true"]}},
                {"task_id": "b", "agent_id": first.agent_id, "resources": {"cpus": 1}, "command": {"argv": ["true"]}}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = c
        .post(
            &format!("/api/v1/frameworks/{fw}/decline"),
            json!({"offer_ids": [offers[1].offer_id], "refuse_seconds": 0}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let before = waited_s(&c).await;
    wait_for("the runs to wait again", || async {
        waited_s(&c).await > before + 0.02
    })
    .await;
    assert!(c.offers().await.is_empty(), "nothing offered while full");

    // The agent reports both running: the window has room and agents are offered again (one:
    // an offer now counts as the 1.05 tasks accepts have lately launched per offer).
    for task in ["a", "b"] {
        c.post_status(first.agent_id, fw, task, TaskState::Running)
            .await;
        events.update(task, TaskState::Running).await;
    }
    wait_for("an offer again", || async { c.offers().await.len() == 1 }).await;
    c.assert_books_consistent().await;
}
