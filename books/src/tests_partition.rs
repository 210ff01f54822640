//! Unit tests of lost agents' tasks (`partition.rs`): `lost` and fenced for frameworks that
//! are not partition-aware, `unreachable` then `gone` (or back) for those that are. Effects
//! are asserted exactly; no network, no clock.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use protocol::{FrameworkEvent, TaskState, UpdateId};

use super::tests::{
    at, books, check, new_books, put_framework, registration, reregister, running,
    stored_framework, task, update,
};
use super::*;

/// Just past the default agent timeout (5 missed heartbeats of 15 s) after the last heartbeat
/// of [`launched`], at 4 ms.
const LOST_AT: u64 = 75_005;

/// A framework (partition-aware with this timeout, or not) whose task `a` (cpus=1) runs on
/// one agent; the running status the agent reported, acknowledged.
fn launched(partition_timeout_s: Option<f64>) -> (State, FrameworkId, AgentId, TaskStatus) {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let mut req = registration("f", "eng", None, None);
    req.partition_timeout_s = partition_timeout_s;
    let (fw, _) = s.register_framework(req, &at(0), &mut fx).unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let (agent, _) = s
        .register_agent(reregister_new("cpus=4,mem=100"), &at(0), &mut fx)
        .unwrap();
    s.allocate(&at(1), &mut fx);
    let offer = s.offers(None, None).remove(0);
    let accept = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=1")],
        refuse: Some(Duration::from_secs(3600)),
    };
    s.accept(fw, accept, &at(2), &mut fx).unwrap();
    let status = running("a", fw, agent, Some("cpus=1"));
    s.agent_status(agent, status.clone(), &at(3), &mut fx)
        .unwrap();
    s.acknowledge(fw, status.task_id.clone(), status.update_id)
        .unwrap();
    // Heartbeats stop after this one.
    s.agent_heartbeat(agent, &at(4)).unwrap();
    (s, fw, agent, status)
}

fn reregister_new(total: &str) -> AgentRegistration {
    let mut r = reregister(AgentId::new(), total, Vec::new());
    r.agent_id = None;
    r
}

fn key(fw: FrameworkId) -> (FrameworkId, TaskId) {
    (fw, "a".parse().unwrap())
}

/// The task's latest status in the books.
fn latest(s: &State, fw: FrameworkId) -> TaskStatus {
    s.tasks[&key(fw)].latest_status()
}

fn fence(fw: FrameworkId, agent: AgentId) -> Effect {
    Effect::Fence {
        agent_id: agent,
        framework_id: fw,
        endpoint: "http://127.0.0.1:1".into(),
        task_id: "a".parse().unwrap(),
    }
}

/// The agent loses contact: the checks at `LOST_AT`; returns their effects.
fn lose(s: &mut State) -> Effects {
    let mut fx = Vec::new();
    s.check_agents(&at(LOST_AT - 1_000), &mut fx);
    assert_eq!(fx, [], "not lost before the agent timeout");
    s.check_agents(&at(LOST_AT), &mut fx);
    fx
}

#[test]
fn a_task_of_a_framework_that_is_not_partition_aware_is_lost_and_fenced_when_its_agent_returns() {
    let (mut s, fw, agent, running_status) = launched(None);
    let fx = lose(&mut s);
    let lost = latest(&s, fw);
    assert_eq!(lost.state, TaskState::Lost);
    assert_eq!(
        lost.message.as_deref(),
        Some("agent lost: it missed its heartbeats")
    );
    assert_eq!(fx, [update(fw, lost.clone()), Effect::Allocate]);
    assert_eq!(s.frameworks()[0].active_tasks, 0);
    assert!(s.frameworks()[0].used.is_empty());

    // It returns still running the task (its own fence failed, or it has none): the framework
    // was told `lost`, so the task must not run. Nothing is relayed and nothing is held.
    let mut fx = Vec::new();
    s.register_agent(
        reregister(agent, "cpus=4,mem=100", vec![running_status.clone()]),
        &at(LOST_AT + 10),
        &mut fx,
    )
    .unwrap();
    assert_eq!(fx, [fence(fw, agent), Effect::Allocate]);
    assert_eq!(latest(&s, fw), lost);
    assert!(s.agents()[0].used.is_empty());

    // The agent reports the fenced end: it replaces `lost` as the framework's last word.
    let mut killed = running_status;
    killed.state = TaskState::Killed;
    killed.reason = Some(protocol::task::REASON_AGENT_PARTITIONED.into());
    killed.update_id = UpdateId::new();
    let mut fx = Vec::new();
    s.agent_status(agent, killed.clone(), &at(LOST_AT + 20), &mut fx)
        .unwrap();
    assert_eq!(fx, [update(fw, killed.clone())]);
    assert_eq!(latest(&s, fw), killed);
    assert_eq!(s.frameworks()[0].active_tasks, 0);
    books(&s);
}

#[test]
fn a_partition_aware_task_is_unreachable_then_running_again_when_its_agent_returns() {
    let (mut s, fw, agent, running_status) = launched(Some(600.0));
    let fx = lose(&mut s);
    let unreachable = latest(&s, fw);
    assert_eq!(unreachable.state, TaskState::Unreachable);
    assert_eq!(fx, [update(fw, unreachable.clone()), Effect::Allocate]);
    // Not terminal: still counted, but holding nothing while its agent is away.
    assert_eq!(s.frameworks()[0].active_tasks, 1);
    assert!(s.frameworks()[0].used.is_empty());
    assert!(s.ledger.allocator().capacity().is_empty());

    // Back within the partition timeout, reporting the status it had sent before.
    let mut fx = Vec::new();
    s.register_agent(
        reregister(agent, "cpus=4,mem=100", vec![running_status.clone()]),
        &at(LOST_AT + 10_000),
        &mut fx,
    )
    .unwrap();
    let back = latest(&s, fw);
    assert_eq!(back.state, TaskState::Running);
    assert_ne!(back.update_id, running_status.update_id, "a new update");
    assert_eq!(
        back.message.as_deref(),
        Some("its agent is reachable again")
    );
    assert_eq!(fx, [update(fw, back), Effect::Allocate]);
    assert_eq!(s.frameworks()[0].used, "cpus=1".parse().unwrap());
    assert_eq!(s.frameworks()[0].active_tasks, 1);
    assert!(s.tasks.unreachable_len() == 0);

    // Past the old partition timeout nothing happens: it is no longer unreachable.
    s.agent_heartbeat(agent, &at(LOST_AT + 650_000)).unwrap();
    let mut fx = Vec::new();
    s.check_agents(&at(LOST_AT + 700_000), &mut fx);
    assert_eq!(fx, []);
    books(&s);
}

#[test]
fn a_partition_aware_task_is_gone_after_the_partition_timeout_and_fenced_if_its_agent_returns() {
    let (mut s, fw, agent, running_status) = launched(Some(60.0));
    lose(&mut s);
    let mut fx = Vec::new();
    s.check_agents(&at(LOST_AT + 59_999), &mut fx);
    assert_eq!(latest(&s, fw).state, TaskState::Unreachable);
    assert_eq!(fx, []);
    s.check_agents(&at(LOST_AT + 60_000), &mut fx);
    let gone = latest(&s, fw);
    assert_eq!(gone.state, TaskState::Gone);
    assert_eq!(
        gone.message.as_deref(),
        Some("its agent stayed unreachable past the partition timeout")
    );
    assert_eq!(fx, [update(fw, gone.clone())]);
    assert_eq!(s.frameworks()[0].active_tasks, 0);

    let mut fx = Vec::new();
    s.register_agent(
        reregister(agent, "cpus=4,mem=100", vec![running_status]),
        &at(LOST_AT + 61_000),
        &mut fx,
    )
    .unwrap();
    assert_eq!(fx, [fence(fw, agent), Effect::Allocate]);
    assert_eq!(latest(&s, fw), gone);
    assert!(s.agents()[0].used.is_empty());
    books(&s);
}

#[test]
fn an_unreachable_task_its_agent_no_longer_has_is_lost_and_one_that_ended_takes_its_end() {
    // Not reported at all (the agent lost its journal): lost.
    let (mut s, fw, agent, _) = launched(Some(600.0));
    lose(&mut s);
    let mut fx = Vec::new();
    s.register_agent(
        reregister(agent, "cpus=4,mem=100", Vec::new()),
        &at(LOST_AT + 10),
        &mut fx,
    )
    .unwrap();
    let lost = latest(&s, fw);
    assert_eq!(lost.state, TaskState::Lost);
    assert_eq!(
        lost.message.as_deref(),
        Some("the agent re-registered without this task")
    );
    // (The loss frees what the task held again: one allocation for it, one for the agent.)
    assert_eq!(fx, [Effect::Allocate, update(fw, lost), Effect::Allocate]);
    assert!(s.agents()[0].used.is_empty());
    assert!(s.tasks.unreachable_len() == 0);
    books(&s);

    // It finished while its agent was away: `finished`, as the agent says.
    let (mut s, fw, agent, running_status) = launched(Some(600.0));
    lose(&mut s);
    let mut finished = running_status;
    finished.state = TaskState::Finished;
    finished.update_id = UpdateId::new();
    let mut fx = Vec::new();
    s.register_agent(
        reregister(agent, "cpus=4,mem=100", vec![finished.clone()]),
        &at(LOST_AT + 10),
        &mut fx,
    )
    .unwrap();
    assert_eq!(
        fx,
        [
            Effect::Allocate,
            update(fw, finished.clone()),
            Effect::Allocate
        ]
    );
    assert_eq!(latest(&s, fw), finished);
    assert_eq!(s.frameworks()[0].active_tasks, 0);
    assert!(s.agents()[0].used.is_empty());
    books(&s);
}

#[test]
fn a_kill_asked_while_the_task_is_unreachable_is_sent_when_its_agent_returns() {
    let (mut s, fw, agent, running_status) = launched(Some(600.0));
    lose(&mut s);
    let mut fx = Vec::new();
    s.kill(fw, "a".parse().unwrap(), &mut fx).unwrap();
    let kill = Effect::Kill {
        agent_id: agent,
        framework_id: fw,
        endpoint: "http://127.0.0.1:1".into(),
        task_id: "a".parse().unwrap(),
    };
    // Tried at once (the agent may hear it), and again on its return.
    assert_eq!(fx, std::slice::from_ref(&kill));
    let mut fx = Vec::new();
    s.register_agent(
        reregister(agent, "cpus=4,mem=100", vec![running_status]),
        &at(LOST_AT + 10),
        &mut fx,
    )
    .unwrap();
    let back = latest(&s, fw);
    assert_eq!(fx, [update(fw, back), kill, Effect::Allocate]);
    books(&s);
}

#[test]
fn a_removed_framework_takes_its_unreachable_tasks_with_it() {
    let (mut s, fw, _, _) = launched(Some(600.0));
    lose(&mut s);
    assert_eq!(s.tasks.unreachable_len(), 1);
    // No kill: the agent is away.
    check(
        &mut s,
        |s, fx| s.remove_framework(fw, "test", fx).unwrap(),
        vec![
            Effect::Persist(crate::records::Change::RemoveFramework(fw)),
            Effect::ToFramework(
                fw,
                FrameworkEvent::Error {
                    message: "framework removed: test".into(),
                },
            ),
            Effect::CloseStream(fw),
            Effect::Allocate,
        ],
    );
    assert!(s.tasks.unreachable_len() == 0);
    assert!(s.tasks.is_empty());
    books(&s);
}

#[test]
fn the_partition_timeout_is_shown_persisted_and_restored() {
    let (s, fw, _, _) = launched(Some(120.0));
    let info = &s.frameworks()[0];
    assert_eq!(info.partition_timeout_s, Some(120.0));
    assert_eq!(info.capabilities, ["partition_aware"]);
    let mut fx = Vec::new();
    let mut again = new_books(&Settings::default());
    let mut req = registration("f", "eng", None, Some(fw));
    req.partition_timeout_s = Some(120.0);
    again.register_framework(req, &at(0), &mut fx).unwrap();
    let default_failover_s = Settings::default().default_failover_timeout.as_secs_f64();
    let mut stored = stored_framework(fw, "f", "eng", default_failover_s, &at(0));
    stored.partition_timeout_s = Some(120.0);
    assert_eq!(fx, vec![put_framework(stored)]);
    let (plain, _, _, _) = launched(None);
    assert_eq!(plain.frameworks()[0].partition_timeout_s, None);
    assert!(plain.frameworks()[0].capabilities.is_empty());
}
