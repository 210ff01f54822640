//! The harness itself: a cluster whose coordinator cannot start fails at once, saying why,
//! instead of waiting out the startup deadline for agents that will never be active; a
//! running cluster is alive, and a part stopped on purpose is not one that stopped by itself.

use std::time::{Duration, Instant};

use tests::{fast_coordinator_config, Cluster, WITHIN};

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
