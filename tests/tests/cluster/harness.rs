//! The harness itself: a cluster whose coordinator cannot start fails at once, saying why,
//! instead of waiting out the startup deadline for agents that will never be active; a
//! running cluster is alive, and a part stopped on purpose is not one that stopped by itself;
//! no task process outlives a cluster shut down or dropped, even one whose agent was stopped.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use protocol::{AgentId, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{fast_coordinator_config, wait_until, Cluster, WITHIN};

#[tokio::test]
async fn a_coordinator_that_cannot_start_fails_the_start_at_once_naming_why() {
    let config = coordinator::Config {
        allocation_interval: Duration::ZERO,
        ..fast_coordinator_config()
    };
    let started = Instant::now();
    let error = match Cluster::builder()
        .config(config)
        .agent("cpus=1,mem=128")
        .start()
        .await
    {
        Ok(_) => panic!("a coordinator with a zero allocation interval started"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        started.elapsed() < WITHIN / 2,
        "it waited {:?} for a coordinator that had stopped",
        started.elapsed()
    );
    assert!(
        error.contains("the coordinator stopped by itself")
            && error.contains("allocation_interval"),
        "{error}"
    );
}

#[tokio::test]
async fn a_running_cluster_is_alive_and_a_part_stopped_on_purpose_is_not_a_failure() {
    let mut cluster = Cluster::builder()
        .simulated_agents(2, "cpus=1,mem=128")
        .start()
        .await
        .expect("a cluster of two simulated agents");
    cluster.check_alive().expect("every part runs");
    // Stopping a part on purpose is not a part stopping by itself.
    cluster.stop_coordinator().await.expect("stopping it");
    cluster
        .check_alive()
        .expect("a stopped part is not checked");
    cluster.start_coordinator().await.expect("restarting it");
    cluster.check_alive().expect("every part runs again");
    cluster.shutdown().await.expect("a clean shutdown");
}

/// The pids of the running processes whose `PARLEY_SANDBOX` (set by the agent on every task,
/// inherited by its children) lies under `dir`.
fn task_processes_under(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            environ.split(|b| *b == 0).any(|kv| {
                kv.strip_prefix(b"PARLEY_SANDBOX=")
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .is_some_and(|v| Path::new(v).starts_with(dir))
            })
        })
        .collect()
}

/// A cluster of two agents, each running a `sleep 600` task (a shell and its child); returns
/// the cluster, the framework and the directory under which the tasks' sandboxes lie.
async fn two_sleeping_tasks() -> (Cluster, TestFramework, PathBuf) {
    let cluster = Cluster::start(&["cpus=1,mem=128", "cpus=1,mem=128"])
        .await
        .unwrap();
    let mut fw = TestFramework::register(&cluster.url, "sleepers", "default")
        .await
        .unwrap();
    for id in ["s-0", "s-1"] {
        let task = shell_task(id, AgentId::new(), "cpus=1,mem=64", "sleep 600; true");
        fw.launch(WITHIN, task).await.unwrap();
        fw.wait_state(WITHIN, id, TaskState::Running).await.unwrap();
    }
    let root = cluster
        .agent_work_dir(0)
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let found = wait_until(WITHIN, "the tasks' shells and sleeps", || {
        let found = task_processes_under(&root);
        async move { (found.len() >= 4).then_some(found) }
    })
    .await
    .unwrap();
    assert!(found.len() >= 4, "{found:?}");
    (cluster, fw, root)
}

/// Waits until no process of a task under `root` runs any more.
async fn none_left_under(root: &Path) {
    let left = wait_until(WITHIN, "no task process left", || {
        let left = task_processes_under(root);
        async move { left.is_empty().then_some(()) }
    })
    .await;
    assert!(
        left.is_ok(),
        "left running: {:?}",
        task_processes_under(root)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_kills_every_task_process_even_of_a_stopped_agent() {
    let (mut cluster, fw, root) = two_sleeping_tasks().await;
    // A stopped agent leaves its tasks running (its restart would re-adopt them).
    cluster.stop_agent(1).await.unwrap();
    assert!(
        task_processes_under(&root).len() >= 4,
        "stopping an agent ended its tasks"
    );
    drop(fw);
    cluster.shutdown().await.unwrap();
    none_left_under(&root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_cluster_kills_every_task_process() {
    let (cluster, fw, root) = two_sleeping_tasks().await;
    drop(fw);
    drop(cluster);
    none_left_under(&root).await;
}
