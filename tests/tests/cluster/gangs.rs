//! End to end, through real HTTP on loopback with real agents and processes: gangs launched
//! with `gang-accepts`. A gang of one member per agent starts on both agents; when one member
//! dies from outside (its shell kills itself), the coordinator kills the other, the agents
//! report both ended, and the framework hears one `gang_failed`. A gang with one member the
//! coordinator refuses launches nothing on any agent.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use protocol::{AgentId, FrameworkEvent, Offer, TaskState};
use reqwest::StatusCode;
use serde_json::json;
use tests::framework::{shell_task, TestFramework};
use tests::{fast_coordinator_config, wait_for, Cluster, WITHIN};

/// A cluster of two agents of two cpus, and framework `f` holding an offer of each.
async fn two_agents_offered() -> (Cluster, TestFramework, Vec<Offer>) {
    let cluster = Cluster::builder()
        .config(fast_coordinator_config())
        .agent("cpus=2,mem=512")
        .agent("cpus=2,mem=512")
        .start()
        .await
        .unwrap();
    let mut fw = TestFramework::register(&cluster.url, "f", "ml")
        .await
        .unwrap();
    let mut offers: Vec<Offer> = Vec::new();
    let until = Instant::now() + WITHIN;
    while offers
        .iter()
        .map(|o| o.agent_id)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        < 2
    {
        let left = until.saturating_duration_since(Instant::now());
        offers.extend(fw.next_offers(left).await.unwrap());
    }
    (cluster, fw, offers)
}

/// The accept of `offer` launching one member `name` running `shell`.
fn part(offer: &Offer, name: &str, shell: &str) -> serde_json::Value {
    let member = shell_task(name, offer.agent_id, "cpus=1,mem=64", shell);
    json!({"offer_ids": [offer.offer_id], "tasks": [member], "refuse_seconds": 0})
}

/// One offer of each agent.
fn one_each(offers: &[Offer]) -> (Offer, Offer) {
    let first = offers[0].clone();
    let other: AgentId = first.agent_id;
    let second = offers.iter().find(|o| o.agent_id != other).unwrap().clone();
    (first, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_dies_ends_its_gang_on_every_agent() {
    let (cluster, mut fw, offers) = two_agents_offered().await;
    let (a, b) = one_each(&offers);
    // m0 runs until it kills itself (from outside as far as the agent knows); m1 would run
    // for ten minutes.
    let gang = json!({"gang_id": "train", "accepts": [
        part(&a, "m0", "sleep 1; kill -9 $$"),
        part(&b, "m1", "sleep 600"),
    ]});
    let (status, body) = fw.post("gang-accepts", &gang).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["launched"], json!(["m0", "m1"]));
    fw.wait_state(WITHIN, "m1", TaskState::Running)
        .await
        .unwrap();
    // m0 dies; the coordinator kills m1, and m1's agent reports it killed.
    let m0 = fw
        .wait_update(WITHIN, "m0's end", |s| {
            s.task_id.as_str() == "m0" && s.state.is_terminal()
        })
        .await
        .unwrap();
    assert_ne!(m0.state, TaskState::Finished, "{m0:?}");
    fw.wait_state(WITHIN, "m1", TaskState::Killed)
        .await
        .unwrap();
    let failed: Vec<_> = fw
        .events()
        .into_iter()
        .filter_map(|e| match e {
            FrameworkEvent::GangFailed(g) => Some(g),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "told once: {failed:?}");
    assert_eq!(failed[0].gang_id, "train");
    assert_eq!(failed[0].task_id.as_str(), "m0");
    assert_eq!(failed[0].agent_id, a.agent_id);
    assert_eq!(failed[0].killed, ["m1".parse().unwrap()]);
    // Nothing of the gang runs on either agent, as the agents themselves report.
    wait_for(WITHIN, "every member ended", || async {
        let tasks = cluster.tasks_of(fw.id).await.unwrap();
        tasks.len() == 2 && tasks.iter().all(|t| t.state.is_terminal())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_with_a_member_that_cannot_launch_starts_nowhere() {
    let (cluster, fw, offers) = two_agents_offered().await;
    let (a, b) = one_each(&offers);
    // m1 asks for more than its agent's offer holds: the whole gang is refused.
    let mut too_big = part(&b, "m1", "sleep 600");
    too_big["tasks"][0]["resources"] = json!({"cpus": 3, "mem": 64});
    let gang = json!({"gang_id": "train", "accepts": [part(&a, "m0", "sleep 600"), too_big]});
    let (status, body) = fw.post("gang-accepts", &gang).await.unwrap();
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "insufficient_resources");
    assert!(
        cluster.tasks_of(fw.id).await.unwrap().is_empty(),
        "no member launched"
    );
    // Both offers are still the framework's to use.
    let (status, body) = fw
        .post(
            "gang-accepts",
            &json!({"gang_id": "train", "accepts": [part(&a, "m0", "true"), part(&b, "m1", "true")]}),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
}
