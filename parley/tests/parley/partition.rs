//! Network partitions on a real network: a coordinator and three agents, each a real process
//! in a network namespace of its own that the test makes (see `crate::support::netns`), and a
//! framework driven by the SDK in this process. One agent's link is cut for less, or for more,
//! than the agent timeout (heartbeats every 1 s, 6 missed: 6 s), with a framework that is not
//! partition-aware and one that is.
//!
//! The framework runs 12 tasks of `sleep 12` (4 per agent) and launches a task again, as a new
//! attempt, when it is told the task is `lost` or `gone`. Every attempt holds a lock on its
//! task's file (`flock -n`) while it runs: a second attempt of a task started while an earlier
//! one still runs cannot take it and fails at once. So after each run:
//! - every task has one `finished` attempt and no attempt `failed` (none ran twice at once);
//! - every attempt's last state in the framework is the one its agent holds (`lost` became the
//!   agent's `killed`, reason `agent_partitioned`: never `finished` later);
//! - no task process is left, and the books are back to zero.
//!
//! Needs root and iproute2; without them it prints why it skips, unless `PARLEY_CI=1`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::netns::{can_make_namespaces, Net};
use crate::support::*;
use framework_sdk::prelude::*;
use framework_sdk::Driver;

/// Tasks per run (4 per agent).
const TASKS: usize = 12;

/// How a run goes, and what it must show.
struct Case {
    /// The net number (distinct per test).
    net: u8,
    /// The framework's partition timeout, when it is partition-aware.
    partition_aware: Option<Duration>,
    /// What is cut off from what.
    fault: Fault,
    /// How long the cut lasts: until agent 0's tasks reach this state in the framework's
    /// view, or for this long (a partition shorter than the agent timeout).
    cut: Cut,
    /// The states agent 0's tasks pass through in the framework's view, repeats dropped.
    history: &'static [TaskState],
}

/// What a run cuts off.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Agent 0 from everything (one coordinator).
    Agent,
    /// The leader of two coordinators from etcd (and nothing else): it steps down.
    LeaderFromEtcd,
    /// Agent 0 from the leader of two coordinators only (it still reaches the follower).
    AgentFromLeader,
}

/// How long a link stays cut.
enum Cut {
    Until(TaskState),
    For(Duration),
}

/// The coordinators' timings: agents are lost after `missed` missed heartbeats of 1 s (and
/// fence their tasks a heartbeat before).
fn timings(missed: u32) -> Vec<String> {
    [
        "--agent-heartbeat-interval",
        "1",
        "--max-missed-heartbeats",
        &missed.to_string(),
        "--framework-heartbeat-interval",
        "1",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The processes of one run: an etcd member (with two coordinators), or one coordinator; three
/// agents; each in its own namespace.
struct Processes {
    coords: Vec<Coord>,
    agents: Vec<Agent>,
    _etcd: Option<Proc>,
}

async fn start(net: &Net, dir: &Path, ha: bool) -> Processes {
    let coordinator_hosts: &[&str] = if ha { &["c0", "c1"] } else { &["c0"] };
    let urls: Vec<String> = coordinator_hosts
        .iter()
        .map(|h| format!("http://{}:5050", net.addr(h)))
        .collect();
    let mut etcd = None;
    let mut coords = Vec::new();
    if ha {
        let client = format!("http://{}:2379", net.addr("e"));
        let mut cmd = Net::command_in(&net.ns("e"), Path::new("etcd"));
        cmd.args(["--name", "e", "--data-dir"])
            .arg(dir.join("etcd"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", "http://127.0.0.1:2380"])
            .args(["--initial-advertise-peer-urls", "http://127.0.0.1:2380"])
            .args(["--initial-cluster", "e=http://127.0.0.1:2380"])
            .args(["--heartbeat-interval=50", "--election-timeout=500"]);
        let proc = Proc::spawn(cmd);
        testkit::wait_for(Duration::from_secs(30), "etcd to answer", || async {
            http()
                .get(format!("{client}/health"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}; etcd log:\n{}", proc.log()));
        etcd = Some(proc);
        for (host, url) in coordinator_hosts.iter().zip(&urls) {
            let mut args = timings(10);
            args.extend(
                [
                    "--etcd",
                    &client,
                    "--etcd-prefix",
                    "/partition",
                    "--advertise-url",
                    url,
                    "--leader-lease-s",
                    "2",
                    "--reregister-grace-s",
                    "1",
                ]
                .map(str::to_owned),
            );
            coords.push(Coord::in_namespace(&net.ns(host), url, 5050, &args));
        }
    } else {
        let mut args = timings(6);
        args.push("--in-memory".into());
        coords.push(Coord::in_namespace(&net.ns("c0"), &urls[0], 5050, &args));
    }
    for c in &coords {
        c.wait_up(Duration::from_secs(20)).await;
    }
    let agents = (0..3)
        .map(|k| {
            let host = format!("a{k}");
            Agent::in_namespace(
                &net.ns(&host),
                &format!("node{k}"),
                &net.addr(&host),
                &urls.join(","),
                &dir.join(&host),
            )
        })
        .collect();
    Processes {
        coords,
        agents,
        _etcd: etcd,
    }
}

/// Agent 0's attempts, as the framework saw them first launched there.
fn on_agent(seen: &Seen, agent: AgentId) -> Vec<String> {
    seen.last
        .iter()
        .filter(|(_, s)| s.agent_id == agent)
        .map(|(id, _)| id.clone())
        .collect()
}

async fn run(case: Case) {
    let test = format!("partition net {}", case.net);
    if !can_make_namespaces(&test) {
        return;
    }
    let ha = case.fault != Fault::Agent;
    if ha && !have_etcd(&test) {
        return;
    }
    let _one = SERIAL.lock().await;
    let hosts: &[&str] = if ha {
        &["e", "c0", "c1", "a0", "a1", "a2"]
    } else {
        &["c0", "a0", "a1", "a2"]
    };
    let net = Net::create(case.net, hosts).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let locks = dir.path().join("locks");
    std::fs::create_dir(&locks).unwrap();
    let Processes {
        mut coords,
        agents,
        _etcd,
    } = start(&net, dir.path(), ha).await;
    let first = leader(&coords).await;
    wait_agents(first, 3).await;
    let first_leader = coords.iter().position(|c| c.base == first.base).unwrap();
    let host_of = |i: usize| format!("c{i}");

    let (retrier, seen) = Retrier::new(&locks, "sleep 12", TASKS, "cpus=0.25,mem=16");
    let urls: Vec<&str> = coords.iter().map(|c| c.base.as_str()).collect();
    let mut config = driver_config(&urls.join(","));
    config.partition_aware = case.partition_aware;
    let driver = Driver::new(config, retrier).unwrap();
    let stop = driver.stop_token();
    let running = tokio::spawn(driver.run());

    let all_running = || {
        let seen = seen.lock().unwrap();
        seen.last.len() == TASKS && seen.last.values().all(|s| s.state == TaskState::Running)
    };
    testkit::wait_for(Duration::from_secs(30), "every task running", || {
        std::future::ready(all_running())
    })
    .await
    .unwrap();
    let victim = agents[0].tasks().await;
    assert_eq!(victim.len(), 4, "4 tasks on node0: {victim:?}");
    let victim_id = victim[0].agent_id;
    let cut: Vec<String> = on_agent(&seen.lock().unwrap(), victim_id);

    let leader_host = host_of(first_leader);
    match case.fault {
        Fault::Agent => net.cut("a0"),
        Fault::LeaderFromEtcd => net.cut_between(&leader_host, "e"),
        Fault::AgentFromLeader => net.cut_between(&leader_host, "a0"),
    }
    match case.cut {
        // The partition's length is the fault itself, not a wait for something.
        Cut::For(d) => tokio::time::sleep(d).await,
        Cut::Until(last) => {
            let what = format!("node0's tasks to be {last} in the framework");
            testkit::wait_for(Duration::from_secs(60), &what, || {
                let seen = seen.lock().unwrap();
                std::future::ready(cut.iter().all(|id| seen.last[id].state == last))
            })
            .await
            .unwrap_or_else(|e| panic!("{e}; node0 log:\n{}", agents[0].proc.log()));
        }
    }
    if case.fault == Fault::LeaderFromEtcd {
        // It cannot renew its lease: it steps down (exit code 3) and the other leads.
        let code = coords[first_leader]
            .proc
            .exit_code(Duration::from_secs(30))
            .await;
        assert_eq!(code, Some(3), "the cut-off leader exits as deposed");
    }
    match case.fault {
        Fault::Agent => net.heal("a0"),
        Fault::LeaderFromEtcd => net.heal_between(&leader_host, "e"),
        Fault::AgentFromLeader => net.heal_between(&leader_host, "a0"),
    }
    if case.fault == Fault::LeaderFromEtcd {
        coords.remove(first_leader);
    }
    let coord = leader(&coords).await;

    let every_task_finished = || {
        let seen = seen.lock().unwrap();
        let mut done: BTreeMap<usize, usize> = BTreeMap::new();
        for (id, s) in &seen.last {
            if s.state == TaskState::Finished {
                *done.entry(parse_attempt(id).0).or_default() += 1;
            }
        }
        done.len() == TASKS
    };
    wait_all_or_panic(&seen, &agents, coord, every_task_finished).await;
    // Agent 0's ends reach the framework once it is back.
    let end = *case.history.last().unwrap();
    testkit::wait_for(Duration::from_secs(30), "node0's tasks' ends", || {
        let seen = seen.lock().unwrap();
        std::future::ready(cut.iter().all(|id| seen.last[id].state == end))
    })
    .await
    .unwrap_or_else(|e| {
        let seen = seen.lock().unwrap();
        let states: Vec<_> = cut.iter().map(|id| (id, seen.history(id))).collect();
        panic!("{e}: {states:?}")
    });

    {
        let seen = seen.lock().unwrap();
        let failed = seen.failed();
        assert!(failed.is_empty(), "attempts ran twice at once: {failed:?}");
        for id in &cut {
            assert_eq!(seen.history(id), case.history, "{id}");
        }
        let relaunched = seen.launched - TASKS;
        let expected = match end {
            TaskState::Finished => 0,
            _ => cut.len(),
        };
        assert_eq!(relaunched, expected, "attempts launched again");
        if end == TaskState::Killed {
            for id in &cut {
                assert_eq!(
                    seen.last[id].reason.as_deref(),
                    Some(protocol::task::REASON_AGENT_PARTITIONED),
                    "{id}"
                );
            }
        }
    }
    assert_tasks_as_agents_saw_them(&seen, &agents).await;
    assert_books_zero(coord, Duration::from_secs(15)).await;
    // Every attempt has ended: none of their processes is left.
    let left = std::process::Command::new("pgrep")
        .args(["-f", &locks.display().to_string()])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "task processes outlive their tasks: {}",
        String::from_utf8_lossy(&left.stdout)
    );
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), running).await;
    drop(agents);
    drop(coords);
    drop(_etcd);
    drop(net);
}

/// Waits until `done` holds; on failure shows where every attempt stands.
async fn wait_all_or_panic(
    seen: &Arc<Mutex<Seen>>,
    agents: &[Agent],
    coord: &Coord,
    done: impl Fn() -> bool,
) {
    let r = testkit::wait_for(Duration::from_secs(90), "every task finished once", || {
        std::future::ready(done())
    })
    .await;
    if r.is_err() {
        let mut detail = String::new();
        {
            let seen = seen.lock().unwrap();
            for (id, s) in &seen.last {
                detail.push_str(&format!("{id}: {:?} {:?}\n", seen.history(id), s.message));
            }
        }
        for a in agents {
            for t in a.tasks().await {
                detail.push_str(&format!(
                    "{} {}: {} {:?}\n",
                    a.name, t.task_id, t.state, t.message
                ));
            }
        }
        panic!(
            "not every task finished:\n{detail}\ncoordinator log:\n{}",
            coord.proc.log()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_shorter_than_the_agent_timeout_loses_nothing() {
    run(Case {
        net: 1,
        partition_aware: None,
        fault: Fault::Agent,
        cut: Cut::For(Duration::from_secs(2)),
        history: &[TaskState::Running, TaskState::Finished],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_lost_to_a_partition_were_killed_by_their_agent_and_run_again_once() {
    run(Case {
        net: 2,
        partition_aware: None,
        fault: Fault::Agent,
        cut: Cut::Until(TaskState::Lost),
        history: &[TaskState::Running, TaskState::Lost, TaskState::Killed],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_aware_frameworks_tasks_are_unreachable_and_come_back_running() {
    run(Case {
        net: 3,
        partition_aware: Some(Duration::from_secs(60)),
        fault: Fault::Agent,
        cut: Cut::Until(TaskState::Unreachable),
        history: &[
            TaskState::Running,
            TaskState::Unreachable,
            TaskState::Running,
            TaskState::Finished,
        ],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_aware_frameworks_tasks_are_gone_after_its_partition_timeout_and_killed() {
    run(Case {
        net: 4,
        partition_aware: Some(Duration::from_secs(2)),
        fault: Fault::Agent,
        cut: Cut::Until(TaskState::Gone),
        history: &[
            TaskState::Running,
            TaskState::Unreachable,
            TaskState::Gone,
            TaskState::Killed,
        ],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_etcd_steps_down_and_no_task_is_lost_or_run_twice() {
    run(Case {
        net: 5,
        partition_aware: None,
        fault: Fault::LeaderFromEtcd,
        // Until the new leader has every agent back: no task is lost meanwhile.
        cut: Cut::For(Duration::from_secs(4)),
        history: &[TaskState::Running, TaskState::Finished],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cut_off_from_the_leader_only_has_its_tasks_lost_killed_and_run_again_once() {
    run(Case {
        net: 6,
        partition_aware: None,
        fault: Fault::AgentFromLeader,
        cut: Cut::Until(TaskState::Lost),
        history: &[TaskState::Running, TaskState::Lost, TaskState::Killed],
    })
    .await;
}
