//! Weighted H-DRF end to end: two frameworks in roles weighted 2:1 on an otherwise idle
//! cluster of 12 agents, both accepting everything with long-running tasks, settle at
//! dominant shares in a 2:1 ratio (within one agent's worth), as `GET /api/v1/roles` shows.

#![allow(clippy::unwrap_used)]

use crate::support::{fast_config, wait_for, EventStream, FakeAgent, Rest, TestCoordinator};
use protocol::{FrameworkEvent, FrameworkId};
use serde_json::json;

/// Accepts every offer whole with one long-running task.
fn accept_everything(c: &TestCoordinator, fw: FrameworkId, mut events: EventStream) {
    let (client, base) = (c.client.clone(), c.base.clone());
    tokio::spawn(async move {
        let mut n = 0;
        while let Some(ev) = events.next().await {
            let FrameworkEvent::Offers { offers } = ev else {
                continue;
            };
            for o in offers {
                n += 1;
                let task = json!({"task_id": format!("t{n}"), "agent_id": o.agent_id,
                    "resources": o.resources, "command": {"shell": "sleep 1000"}});
                let _ = client
                    .post(format!("{base}/api/v1/frameworks/{fw}/accept"))
                    .json(&json!({"offer_ids": [o.offer_id], "tasks": [task]}))
                    .send()
                    .await;
            }
        }
    });
}

#[tokio::test]
async fn weights_two_to_one_give_dominant_shares_two_to_one() {
    let mut config = fast_config();
    config.set_role(
        "heavy".parse().unwrap(),
        protocol::Weight::new(2.0).unwrap(),
    );
    config.set_role(
        "light".parse().unwrap(),
        protocol::Weight::new(1.0).unwrap(),
    );
    let c = TestCoordinator::start(config).await;
    let (heavy, heavy_events) = c.framework("heavy", "heavy").await;
    let (light, light_events) = c.framework("light", "light").await;
    accept_everything(&c, heavy, heavy_events);
    accept_everything(&c, light, light_events);

    let mut agents = Vec::new();
    for _ in 0..12 {
        let a = FakeAgent::start().await;
        c.register_agent(&a, json!({"cpus": 4, "mem": 8192})).await;
        agents.push(a);
    }
    wait_for("every agent fully used", || async {
        let agents = c.agents().await;
        agents.len() == 12 && agents.iter().all(|a| a.used == a.resources)
    })
    .await;
    c.assert_books_consistent().await;

    let roles = c.get("/api/v1/roles").await;
    let share = |path: &str| {
        roles["children"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .unwrap()["dominant_share"]
            .as_f64()
            .unwrap()
    };
    let (h, l) = (share("heavy"), share("light"));
    let one_agent = 1.0 / 12.0;
    assert!(
        (h + l - 1.0).abs() < 1e-9,
        "the cluster is fully allocated: {h} + {l}"
    );
    assert!(
        (h - 2.0 * l).abs() <= 2.0 * one_agent + 1e-9,
        "shares {h} : {l} are not 2:1"
    );
    assert!(
        (h - 2.0 / 3.0).abs() <= one_agent + 1e-9,
        "heavy's share {h} is not 2/3"
    );
}
