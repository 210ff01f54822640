//! The checks every chaos run ends with: every task terminal as its agent saw it, the books
//! back to zero.

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use framework_sdk::prelude::*;
use serde_json::{json, Value};

use super::{Agent, Coord, Proc, Seen};

/// Waits until the framework has a terminal state for all `total` tasks. On failure it shows
/// the stuck tasks as the agents see them and the coordinators' log lines naming them.
pub async fn wait_all_terminal(
    seen: &Arc<Mutex<Seen>>,
    total: usize,
    timeout: Duration,
    agents: &[Agent],
    coordinators: &[&Proc],
) {
    let r = testkit::wait_for(timeout, "every task terminal in the framework", || {
        std::future::ready(seen.lock().unwrap().terminal() == total)
    })
    .await;
    if r.is_err() {
        let stuck: Vec<(String, Option<String>)> = {
            let seen = seen.lock().unwrap();
            (0..total)
                .map(|i| format!("t{i:03}"))
                .filter(|id| !seen.last.get(id).is_some_and(|s| s.state.is_terminal()))
                .map(|id| {
                    let state = seen.last.get(&id).map(|s| s.state.to_string());
                    (id, state)
                })
                .collect()
        };
        let mut detail = String::new();
        for (id, state) in &stuck {
            detail.push_str(&format!("{id}: framework {state:?}; agents:"));
            for a in agents {
                for t in a.tasks().await {
                    if t.task_id.as_str() == id {
                        detail.push_str(&format!(" {} {}", a.name, t.state));
                    }
                }
            }
            detail.push('\n');
            for (i, c) in coordinators.iter().enumerate() {
                for line in c.log().lines().filter(|l| l.contains(id.as_str())) {
                    detail.push_str(&format!("  coordinator {i}: {line}\n"));
                }
            }
            for a in agents {
                for line in a.proc.log().lines().filter(|l| l.contains(id.as_str())) {
                    detail.push_str(&format!("  {}: {line}\n", a.name));
                }
            }
        }
        let seen = seen.lock().unwrap();
        panic!(
            "{} of {total} tasks not terminal in the framework's view (launched {}, requeued {}):\n{detail}",
            stuck.len(),
            seen.launched,
            seen.requeued
        );
    }
}

/// The coordinator that leads now, `leader` or `standalone` in its `/health` (polled, with a
/// deadline of 30 s).
pub async fn leader(coords: &[Coord]) -> &Coord {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for c in coords {
            let role = c.health().await.map(|h| h["role"].clone());
            if role.is_some_and(|r| r == "leader" || r == "standalone") {
                return c;
            }
        }
        assert!(Instant::now() < deadline, "no leader within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `n` agents are active at `coord`; on failure shows its log.
pub async fn wait_agents(coord: &Coord, n: usize) {
    testkit::wait_for(
        Duration::from_secs(30),
        "the agents to register",
        || async {
            let (s, body) = coord.get("/api/v1/agents").await;
            s == 200
                && body["agents"]
                    .as_array()
                    .is_some_and(|a| a.iter().filter(|x| x["state"] == "active").count() == n)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; coordinator log:\n{}", coord.proc.log()));
}

/// Every task's terminal state in the framework's view is the one its agent holds.
pub async fn assert_tasks_as_agents_saw_them(seen: &Arc<Mutex<Seen>>, agents: &[Agent]) {
    let mut on_agents: BTreeMap<String, Vec<(String, TaskStatus)>> = BTreeMap::new();
    for a in agents {
        for t in a.tasks().await {
            on_agents
                .entry(t.task_id.as_str().to_owned())
                .or_default()
                .push((a.name.clone(), t));
        }
    }
    let seen = seen.lock().unwrap();
    let mut wrong = Vec::new();
    for (id, status) in &seen.last {
        let agent_view = on_agents.get(id).and_then(|v| {
            v.iter()
                .find(|(_, t)| t.agent_id == status.agent_id)
                .map(|(_, t)| t)
        });
        match agent_view {
            Some(t) if t.state == status.state => {}
            Some(t) => wrong.push(format!(
                "{id}: framework {} / agent {} ({:?})",
                status.state, t.state, t.message
            )),
            // A task no agent ran may only be reported lost (it never ran).
            None if status.state == TaskState::Lost => {}
            None => wrong.push(format!(
                "{id}: framework {} ({:?}), on no agent",
                status.state, status.message
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} tasks differ from their agents' view: {wrong:?}",
        wrong.len()
    );
}

/// Whether a resources value on the wire is zero (no entries, or all zero).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Object(m) => m.values().all(is_zero),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The books return to zero: no agent has used or offered resources, no offer is outstanding.
pub async fn assert_books_zero(leader: &Coord, timeout: Duration) {
    let r = testkit::wait_for(timeout, "the books to return to zero", || async {
        let (s, agents) = leader.get("/api/v1/agents").await;
        let (s2, offers) = leader.get("/api/v1/offers").await;
        s == 200
            && s2 == 200
            && agents["agents"].as_array().is_some_and(|a| {
                a.iter()
                    .all(|x| is_zero(&x["used"]) && is_zero(&x["offered"]))
            })
            && offers["offers"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    if r.is_err() {
        let (_, agents) = leader.get("/api/v1/agents").await;
        let (_, offers) = leader.get("/api/v1/offers").await;
        panic!("books not back to zero: agents {agents}\noffers {offers}");
    }
}

/// p50 and max of `xs` (sorted in place).
pub fn p50_max(xs: &mut [Duration]) -> (Duration, Duration) {
    xs.sort();
    (xs[xs.len() / 2], xs[xs.len() - 1])
}

/// One disagreement between the leader's books and the agents, or `None` when they balance:
/// from one snapshot of the leader's `/api/v1/state`, each agent's `used` is the sum of the
/// resources of the tasks that hold resources there (not terminal, not `unreachable`), its
/// `offered` the sum of its offers, and both fit in its total; and each agent process runs
/// exactly the tasks the leader has running on it.
pub async fn books_imbalance(leader: &Coord, agents: &[Agent]) -> Option<String> {
    use protocol::messages::ClusterState;
    use protocol::Resources;
    let (s, body) = leader.get("/api/v1/state").await;
    if s != 200 {
        return Some(format!("GET /api/v1/state: {s} {body}"));
    }
    let state: ClusterState = match serde_json::from_value(body) {
        Ok(state) => state,
        Err(e) => return Some(format!("GET /api/v1/state: {e}")),
    };
    for info in &state.agents {
        let holds = |t: &&protocol::messages::TaskInfo| {
            t.agent_id == info.agent_id
                && !t.state.is_terminal()
                && t.state != TaskState::Unreachable
        };
        let mut used = Resources::default();
        for t in state.tasks.iter().filter(holds) {
            used.add_assign(&t.resources);
        }
        let mut offered = Resources::default();
        for o in state.offers.iter().filter(|o| o.agent_id == info.agent_id) {
            offered.add_assign(&o.resources);
        }
        let name = &info.hostname;
        let same = |a: &Resources, b: &Resources| a.fits_in(b) && b.fits_in(a);
        if !same(&used, &info.used) {
            return Some(format!(
                "{name}: used {} but its tasks hold {used}",
                info.used
            ));
        }
        if !same(&offered, &info.offered) {
            return Some(format!(
                "{name}: offered {} but its offers hold {offered}",
                info.offered
            ));
        }
        if !used.add(&offered).fits_in(&info.resources) {
            return Some(format!(
                "{name}: used {used} + offered {offered} > {}",
                info.resources
            ));
        }
        let Some(agent) = agents.iter().find(|a| &a.name == name) else {
            continue;
        };
        let mut leader_view: Vec<String> = state
            .tasks
            .iter()
            .filter(holds)
            .map(|t| t.task_id.to_string())
            .collect();
        let mut agent_view: Vec<String> = agent
            .tasks()
            .await
            .into_iter()
            .filter(|t| !t.state.is_terminal())
            .map(|t| t.task_id.to_string())
            .collect();
        leader_view.sort();
        agent_view.sort();
        if leader_view != agent_view {
            return Some(format!(
                "{name}: the leader has {leader_view:?} running there, the agent {agent_view:?}"
            ));
        }
    }
    None
}

/// Waits (up to `timeout`) until [`books_imbalance`] finds nothing; panics with the last
/// disagreement.
pub async fn assert_books_balance(leader: &Coord, agents: &[Agent], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let Some(wrong) = books_imbalance(leader, agents).await else {
            return;
        };
        assert!(
            Instant::now() < deadline,
            "the books do not balance: {wrong}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
