//! A coordinator that comes back on its registry calls back the agents it knew: they register
//! again at once instead of at their next heartbeat; so does a new leader on etcd.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::support::{have_etcd, Agent, Coord, Etcd, SERIAL};

/// Agents heartbeat every 120 s: the first beat after a registration comes 12–120 s later.
const SLOW_BEATS: [&str; 4] = [
    "--agent-heartbeat-interval",
    "120",
    "--framework-heartbeat-interval",
    "0.5",
];

/// Waits up to `within` for `coord` to list the agent `hostname` as active (registered with
/// it); fails with both logs.
async fn wait_active(coord: &Coord, agent: &Agent, hostname: &str, within: Duration) {
    let what = format!("{} to list agent {hostname} active", coord.url(""));
    testkit::wait_for(within, &what, || async {
        let (status, body) = coord.get("/api/v1/agents").await;
        status == 200
            && body["agents"].as_array().is_some_and(|agents| {
                agents
                    .iter()
                    .any(|a| a["hostname"] == hostname && a["state"] == "active")
            })
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}; coordinator log:\n{}\nagent log:\n{}",
            coord.proc.log(),
            agent.proc.log()
        )
    });
}

/// Asserts that `coord` logged its round of call-backs.
fn assert_called_back(coord: &Coord) {
    let log = coord.proc.log();
    assert!(
        log.contains("called back the agents the registry knew"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_calls_its_agents_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut first = Coord::redb_with(&data, 0, &SLOW_BEATS);
    first.wait_up(Duration::from_secs(20)).await;
    let agent = Agent::start("recalled", &first.url(""), &dir.path().join("agent"));
    wait_active(&first, &agent, "recalled", Duration::from_secs(20)).await;

    // Killed, and started again on the same port and registry: it loads the agent and awaits
    // it, listing it only once it registers again.
    let port = first.port();
    first.proc.kill9();
    let killed = Instant::now();
    let second = Coord::redb_with(&data, port, &SLOW_BEATS);
    second.wait_up(Duration::from_secs(20)).await;
    // Its next heartbeat is at least 12 s after it registered: back well before, it was
    // called back.
    wait_active(&second, &agent, "recalled", Duration::from_secs(8)).await;
    eprintln!("registered again {:?} after the kill", killed.elapsed());
    assert_called_back(&second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_calls_the_old_leaders_agents_back_at_once() {
    if !have_etcd("recall_leader") {
        return;
    }
    let _one = SERIAL.lock().await;
    let etcd = Etcd::start(1).await;
    let dir = tempfile::tempdir().unwrap();
    let mut first = Coord::etcd_with(&etcd, "/recall", 2, &SLOW_BEATS);
    first.wait_role("leader", Duration::from_secs(20)).await;
    let second = Coord::etcd_with(&etcd, "/recall", 2, &SLOW_BEATS);
    second.wait_role("follower", Duration::from_secs(20)).await;
    let both = format!("{},{}", first.url(""), second.url(""));
    let agent = Agent::start("recalled", &both, &dir.path().join("agent"));
    wait_active(&first, &agent, "recalled", Duration::from_secs(20)).await;
    // An agent's record is written after its registration is answered: killed before that,
    // the new leader would not know the agent and could not call it.
    etcd.wait_for_keys("/recall/registry/agents/", &[]).await;

    // The leader killed: the other takes over within the 2 s lease, loads the agent from etcd
    // and calls it; the agent's next heartbeat is at least 12 s after it registered.
    first.proc.kill9();
    second.wait_role("leader", Duration::from_secs(15)).await;
    wait_active(&second, &agent, "recalled", Duration::from_secs(8)).await;
    assert_called_back(&second);
}
