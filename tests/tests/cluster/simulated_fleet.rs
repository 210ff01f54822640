//! End to end at scale: 500 simulated agents (`agent::run_simulated`, one process, one
//! listener) register and heartbeat against a real coordinator, and a framework runs simulated
//! tasks (`duration_s`) on them to the end.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::time::Duration;

use protocol::{AgentId, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{fast_coordinator_config, Cluster, WITHIN};

const AGENTS: usize = 500;
const TASKS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_simulated_agents_register_heartbeat_and_run_tasks() {
    // Heartbeats every 500 ms (1,000 a second in all) with a wide margin before an agent is
    // lost, so a slow debug build on a loaded machine does not lose agents.
    let config = coordinator::Config {
        agent_heartbeat_interval: Duration::from_millis(500),
        max_missed_heartbeats: 20,
        ..fast_coordinator_config()
    };
    // Starting waits until every simulated agent is registered and active.
    let cluster = Cluster::builder()
        .config(config)
        .simulated_agents(AGENTS, "cpus=4,mem=4096")
        .start()
        .await
        .unwrap();
    let registered = cluster.agents().await.unwrap().agents;
    assert_eq!(registered.len(), AGENTS);
    let hosts: HashSet<_> = registered.iter().map(|a| a.hostname.clone()).collect();
    assert_eq!(
        hosts.len(),
        AGENTS,
        "each simulated agent has its own hostname"
    );

    // Every one of them heartbeats: its last heartbeat moves past its registration.
    cluster
        .wait_for("a heartbeat from every agent", |c| async move {
            let list = c.agents().await.ok()?;
            (list.agents.len() == AGENTS
                && list
                    .agents
                    .iter()
                    .all(|a| a.state == "active" && a.last_heartbeat_at > a.registered_at))
            .then_some(())
        })
        .await
        .unwrap();

    // A framework runs short simulated tasks, one per agent, on TASKS different agents.
    let mut fw = TestFramework::register(&cluster.url, "sim-batch", "sim")
        .await
        .unwrap();
    let mut used = HashSet::<AgentId>::new();
    while used.len() < TASKS {
        for offer in fw.next_offers(WITHIN).await.unwrap() {
            if used.len() == TASKS || used.contains(&offer.agent_id) {
                fw.decline(&[offer.offer_id], Some(60.0)).await.unwrap();
                continue;
            }
            let mut task = shell_task(
                &format!("sim-{}", used.len()),
                offer.agent_id,
                "cpus=1,mem=512",
                "simulated",
            );
            task.duration_s = Some(0.2);
            used.insert(offer.agent_id);
            fw.accept(&[offer.offer_id], vec![task]).await.unwrap();
        }
    }
    for i in 0..TASKS {
        let done = fw
            .wait_state(WITHIN, &format!("sim-{i}"), TaskState::Finished)
            .await
            .unwrap();
        assert!(used.contains(&done.agent_id));
        let states: Vec<_> = fw
            .updates(&format!("sim-{i}"))
            .iter()
            .map(|s| s.state)
            .collect();
        assert!(states.contains(&TaskState::Running), "sim-{i}: {states:?}");
    }
    let tasks = cluster.tasks().await.unwrap().tasks;
    assert_eq!(tasks.len(), TASKS);
    assert!(
        tasks.iter().all(|t| t.state == TaskState::Finished),
        "{tasks:?}"
    );
    cluster
        .wait_for("the tasks' resources to be released", |c| async move {
            let list = c.agents().await.ok()?;
            list.agents.iter().all(|a| a.used.is_empty()).then_some(())
        })
        .await
        .unwrap();
    // Still all there and active after the work.
    let list = cluster.agents().await.unwrap();
    assert_eq!(
        list.agents.iter().filter(|a| a.state == "active").count(),
        AGENTS
    );

    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}
