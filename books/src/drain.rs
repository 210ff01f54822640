//! Drain and maintenance: an operator takes an agent out of service without
//! surprising the frameworks that run tasks there.
//!
//! The rules are functions over the sub-books they name; `State`'s entry points
//! (`entry.rs`) split the books for them.
//!
//! [`State::drain_agent`] pauses the agent in the allocator (it makes no new offers; what its
//! tasks hold stays booked and in the capacity), rescinds its outstanding offers (the usual
//! `rescind` events), and tells each framework with tasks there `agent_draining` (its task ids
//! and the deadline), on its stream and on the offer stream. [`State::check_drains`], on every
//! maintenance tick, kills what still runs at the deadline (through the agent, as a framework's
//! kill; the `killed` update then carries reason `agent_drained`, kills sent again every update
//! re-send interval while a task still runs) and marks the agent `drained` once none of its
//! tasks is left. [`State::reactivate_agent`] ends the drain and offers the agent again.
//!
//! The durable registry keeps each drain's deadline with the agent's record
//! ([`crate::records::StoredAgent::drain_deadline`]; a reactivation clears it), so a drain
//! survives a coordinator restart or failover: the agent comes back draining when it
//! re-registers, its frameworks are told again, and the original deadline still holds (a
//! deadline that passed meanwhile kills at once). A drain also survives the agent's own loss
//! and re-registration.

use std::collections::{BTreeMap, BTreeSet};

use protocol::maintenance::{AgentDraining, AgentMaintenance, AGENT_DRAINED, AGENT_DRAINING};
use protocol::{AgentId, FrameworkEvent, FrameworkId, OfferEvent, TaskId, Timestamp};

use crate::agent_book::AgentBook;
use crate::error::StateError;
use crate::ledger::Ledger;
use crate::records::Change;
use crate::task_book::TaskBook;
use crate::{AgentRecord, Effect, Effects, Now};

/// A drain in progress (or done) on one agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Drain {
    /// When tasks still running are killed, on the monotonic clock.
    pub(crate) deadline_ms: u64,
    /// The same, on the wall clock (what frameworks and operators are told).
    pub(crate) deadline: Timestamp,
    /// When kills were last sent (the deadline passed), to send them again if tasks linger.
    pub(crate) killed_at_ms: Option<u64>,
    /// No task of the agent is left: it is `drained`.
    pub(crate) drained: bool,
}

impl Drain {
    /// A drain put back from the registry's `deadline` (wall clock) at `now`, for an agent whose
    /// tasks are not known yet: not `drained` until the maintenance tick finds none left.
    pub(crate) fn restored(deadline: Timestamp, now: &Now) -> Self {
        Self {
            deadline_ms: now.ms.saturating_add(ms_until(deadline, now)),
            deadline,
            killed_at_ms: None,
            drained: false,
        }
    }
}

/// Milliseconds from `now` to the wall-clock `deadline` (0 once it passed).
fn ms_until(deadline: Timestamp, now: &Now) -> u64 {
    u64::try_from((deadline - now.wall).num_milliseconds()).unwrap_or(0)
}

/// The state name operators see for an agent: `lost`, `draining`, `drained` or `active`.
pub(crate) fn agent_view_state(a: &AgentRecord) -> &'static str {
    match (&a.drain, a.state) {
        (_, super::AgentState::Lost) => a.state.name(),
        (Some(d), _) if d.drained => AGENT_DRAINED,
        (Some(_), _) => AGENT_DRAINING,
        (None, s) => s.name(),
    }
}

/// Starts (or restarts) `drain` on agent `id`, whose offers were rescinded already
/// (`rescinded_offers` of them) and which is paused in the allocator: tells each framework
/// with tasks there `agent_draining`, on its stream and on the offer stream, records the drain
/// (`drained` at once with no task left) and queues the agent's registry record.
pub(crate) fn start(
    agents: &mut AgentBook,
    tasks: &TaskBook,
    id: AgentId,
    mut drain: Drain,
    rescinded_offers: usize,
    fx: &mut Effects,
) -> Result<AgentMaintenance, StateError> {
    let on_agent = tasks_on(tasks, id);
    for (fw, task_ids) in &on_agent {
        let event = AgentDraining {
            agent_id: id,
            framework_id: *fw,
            deadline: drain.deadline,
            task_ids: task_ids.clone(),
        };
        fx.push(Effect::ToFramework(
            *fw,
            FrameworkEvent::AgentDraining(event.clone()),
        ));
        fx.push(Effect::Offer(OfferEvent::AgentDraining(event)));
    }
    drain.drained = on_agent.is_empty();
    let deadline = drain.deadline;
    tracing::info!(agent = %id, %deadline, tasks = on_agent.values().map(Vec::len).sum::<usize>(), "agent draining");
    let Some(agent) = agents.get_mut(id) else {
        return Err(StateError::UnknownAgent(id));
    };
    agent.drain = Some(drain);
    let answer = AgentMaintenance {
        agent_id: id,
        state: agent_view_state(agent).into(),
        deadline: Some(deadline),
        rescinded_offers,
    };
    persist(agents, id, fx);
    Ok(answer)
}

/// A drain until `deadline` (wall clock), `delay_ms` from `now` on the monotonic clock.
pub(crate) fn until(delay_ms: u64, deadline: Timestamp, now: &Now) -> Drain {
    Drain {
        deadline_ms: now.ms.saturating_add(delay_ms),
        deadline,
        killed_at_ms: None,
        drained: false,
    }
}

/// Milliseconds from `now` to the drain deadline the registry kept for an agent.
pub(crate) fn restored_delay_ms(deadline: Timestamp, now: &Now) -> u64 {
    ms_until(deadline, now)
}

/// Queues the agent's registry record with its drain (or without, once reactivated).
fn persist(agents: &AgentBook, id: AgentId, fx: &mut Effects) {
    let record = agents
        .get(id)
        .and_then(|a| agents.stored(id, a.registered_at));
    if let Some(stored) = record {
        fx.push(Effect::Persist(Change::PutAgent(stored)));
    }
}

/// Ends an agent's drain: it is offered again (an allocation runs soon). Reactivating an
/// agent that is not draining changes nothing and succeeds (idempotent).
pub(crate) fn reactivate(
    agents: &mut AgentBook,
    ledger: &mut Ledger,
    id: AgentId,
    fx: &mut Effects,
) -> Result<AgentMaintenance, StateError> {
    let agent = agents.get_mut(id).ok_or(StateError::UnknownAgent(id))?;
    let was_draining = agent.drain.take().is_some();
    let state = agent_view_state(agent);
    if was_draining {
        tracing::info!(agent = %id, "agent reactivated");
        if ledger.has_agent(id) {
            ledger.pause_agent(id, false);
        }
        fx.push(Effect::Allocate);
        persist(agents, id, fx);
    }
    Ok(AgentMaintenance {
        agent_id: id,
        state: state.into(),
        deadline: None,
        rescinded_offers: 0,
    })
}

/// The maintenance tick's part for drains: kills what still runs on agents past their
/// deadline (again every `resend_ms` while it runs, each task counted in `kills` once) and
/// marks agents with no task left `drained`. One pass over the agents while none is
/// draining, and one over the tasks otherwise.
pub(crate) fn check(
    agents: &mut AgentBook,
    tasks: &mut TaskBook,
    kills: &mut u64,
    resend_ms: u64,
    now: &Now,
    fx: &mut Effects,
) {
    let draining: BTreeSet<AgentId> = agents
        .iter()
        .filter(|(_, a)| a.drain.as_ref().is_some_and(|d| !d.drained))
        .map(|(id, _)| *id)
        .collect();
    if draining.is_empty() {
        return;
    }
    let mut left: BTreeMap<AgentId, Vec<(FrameworkId, TaskId)>> = BTreeMap::new();
    for id in &draining {
        for ((fw, task), t) in tasks.on_agent(*id) {
            if !t.state().is_terminal() {
                left.entry(*id).or_default().push((*fw, task.clone()));
            }
        }
    }
    let resend_ms = resend_ms.max(1);
    for id in draining {
        let Some(agent) = agents.get_mut(id) else {
            continue;
        };
        let Some(drain) = agent.drain.as_mut() else {
            continue;
        };
        let to_kill = left.remove(&id).unwrap_or_default();
        if to_kill.is_empty() {
            drain.drained = true;
            tracing::info!(agent = %id, "agent drained: no task left");
            continue;
        }
        let due = now.ms >= drain.deadline_ms
            && drain
                .killed_at_ms
                .is_none_or(|at| now.ms.saturating_sub(at) >= resend_ms);
        if !due {
            continue;
        }
        let first = drain.killed_at_ms.is_none();
        drain.killed_at_ms = Some(now.ms);
        let endpoint = agent.endpoint.clone();
        if first {
            tracing::warn!(agent = %id, tasks = to_kill.len(), "drain deadline passed: killing the agent's tasks");
        }
        for (fw, task) in to_kill {
            if let Some(mut t) = tasks.get_mut(&(fw, task.clone())) {
                if !t.drain_killed {
                    t.drain_killed = true;
                    *kills += 1;
                }
            }
            fx.push(Effect::Kill {
                agent_id: id,
                framework_id: fw,
                endpoint: endpoint.clone(),
                task_id: task,
            });
        }
    }
}

/// The non-terminal tasks on an agent, by framework.
fn tasks_on(tasks: &TaskBook, agent: AgentId) -> BTreeMap<FrameworkId, Vec<TaskId>> {
    let mut out: BTreeMap<FrameworkId, Vec<TaskId>> = BTreeMap::new();
    for ((fw, task), t) in tasks.on_agent(agent) {
        if !t.state().is_terminal() {
            out.entry(*fw).or_default().push(task.clone());
        }
    }
    out
}
