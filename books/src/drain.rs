//! Drain and maintenance: an operator takes an agent out of service without
//! surprising the frameworks that run tasks there.
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

use super::{AgentRecord, Effect, Effects, Now, State, StateError};

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

impl State {
    /// Drains an agent (see the module docs): `deadline_s` (checked by the caller: finite, not
    /// negative) from now its remaining tasks are killed. Draining a draining agent sets the new
    /// deadline and tells its frameworks again. A lost agent may be drained: it stays out of
    /// service when it comes back. Unknown agents are [`StateError::UnknownAgent`].
    pub fn drain_agent(
        &mut self,
        id: AgentId,
        deadline_s: f64,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<AgentMaintenance, StateError> {
        let delay_ms = (deadline_s.max(0.0) * 1000.0) as u64;
        let deadline = now.wall
            + chrono::Duration::milliseconds(i64::try_from(delay_ms).unwrap_or(i64::MAX / 2));
        self.drain_until(id, delay_ms, deadline, now, fx)
    }

    /// [`State::drain_agent`] with the deadline given both ways: `delay_ms` from `now` on the
    /// monotonic clock and `deadline` on the wall clock.
    fn drain_until(
        &mut self,
        id: AgentId,
        delay_ms: u64,
        deadline: Timestamp,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<AgentMaintenance, StateError> {
        if !self.agents.contains(id) {
            return Err(StateError::UnknownAgent(id));
        }
        if self.ledger.has_agent(id) {
            self.ledger.pause_agent(id, true);
        }
        let before = fx.len();
        self.rescind_agent_offers(id, "agent draining", fx);
        let rescinded_offers = fx[before..]
            .iter()
            .filter(|e| matches!(e, Effect::Offer(OfferEvent::OfferRescinded(_))))
            .count();
        let tasks = self.tasks_on(id);
        for (fw, task_ids) in &tasks {
            let event = AgentDraining {
                agent_id: id,
                framework_id: *fw,
                deadline,
                task_ids: task_ids.clone(),
            };
            fx.push(Effect::ToFramework(
                *fw,
                FrameworkEvent::AgentDraining(event.clone()),
            ));
            fx.push(Effect::Offer(OfferEvent::AgentDraining(event)));
        }
        let drain = Drain {
            deadline_ms: now.ms.saturating_add(delay_ms),
            deadline,
            killed_at_ms: None,
            drained: tasks.is_empty(),
        };
        tracing::info!(agent = %id, %deadline, tasks = tasks.values().map(Vec::len).sum::<usize>(), "agent draining");
        let Some(agent) = self.agents.get_mut(id) else {
            return Err(StateError::UnknownAgent(id));
        };
        agent.drain = Some(drain);
        let answer = AgentMaintenance {
            agent_id: id,
            state: agent_view_state(agent).into(),
            deadline: Some(deadline),
            rescinded_offers,
        };
        self.persist_agent(id, fx);
        Ok(answer)
    }

    /// Puts back a drain the registry kept (see the module docs) on agent `id`, which has just
    /// re-registered with its tasks: the same as draining it again with the stored deadline.
    pub(crate) fn restore_drain(
        &mut self,
        id: AgentId,
        deadline: Timestamp,
        now: &Now,
        fx: &mut Effects,
    ) {
        if self.agents.get(id).is_some_and(|a| a.drain.is_some()) {
            return;
        }
        tracing::info!(agent = %id, %deadline, "drain restored from the registry");
        if let Err(e) = self.drain_until(id, ms_until(deadline, now), deadline, now, fx) {
            tracing::error!(agent = %id, error = %e, "could not restore the agent's drain");
        }
    }

    /// Queues the agent's registry record with its drain (or without, once reactivated).
    fn persist_agent(&self, id: AgentId, fx: &mut Effects) {
        let record = self
            .agents
            .get(id)
            .and_then(|a| self.stored_agent_seen(id, a.registered_at));
        if let Some(change) = record {
            fx.push(Effect::Persist(change));
        }
    }

    /// Ends an agent's drain: it is offered again (an allocation runs soon). Reactivating an
    /// agent that is not draining changes nothing and succeeds (idempotent). Unknown agents are
    /// [`StateError::UnknownAgent`].
    pub fn reactivate_agent(
        &mut self,
        id: AgentId,
        fx: &mut Effects,
    ) -> Result<AgentMaintenance, StateError> {
        let agent = self
            .agents
            .get_mut(id)
            .ok_or(StateError::UnknownAgent(id))?;
        let was_draining = agent.drain.take().is_some();
        let state = agent_view_state(agent);
        if was_draining {
            tracing::info!(agent = %id, "agent reactivated");
            if self.ledger.has_agent(id) {
                self.ledger.pause_agent(id, false);
            }
            fx.push(Effect::Allocate);
            self.persist_agent(id, fx);
        }
        Ok(AgentMaintenance {
            agent_id: id,
            state: state.into(),
            deadline: None,
            rescinded_offers: 0,
        })
    }

    /// The maintenance tick's part for drains: kills what still runs on agents past their
    /// deadline (again every update re-send interval while it runs) and marks agents with no
    /// task left `drained`. One pass over the agents while none is draining, and one over the
    /// tasks otherwise.
    pub fn check_drains(&mut self, now: &Now, fx: &mut Effects) {
        let draining: BTreeSet<AgentId> = self
            .agents
            .iter()
            .filter(|(_, a)| a.drain.as_ref().is_some_and(|d| !d.drained))
            .map(|(id, _)| *id)
            .collect();
        if draining.is_empty() {
            return;
        }
        let mut left: BTreeMap<AgentId, Vec<(FrameworkId, TaskId)>> = BTreeMap::new();
        for ((fw, task), t) in self.tasks.iter() {
            if !t.state().is_terminal() && draining.contains(&t.agent_id) {
                left.entry(t.agent_id)
                    .or_default()
                    .push((*fw, task.clone()));
            }
        }
        let resend_ms = self.timing.update_resend_interval_ms.max(1);
        for id in draining {
            let Some(agent) = self.agents.get_mut(id) else {
                continue;
            };
            let Some(drain) = agent.drain.as_mut() else {
                continue;
            };
            let tasks = left.remove(&id).unwrap_or_default();
            if tasks.is_empty() {
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
                tracing::warn!(agent = %id, tasks = tasks.len(), "drain deadline passed: killing the agent's tasks");
            }
            for (fw, task) in tasks {
                if let Some(mut t) = self.tasks.get_mut(&(fw, task.clone())) {
                    if !t.drain_killed {
                        t.drain_killed = true;
                        self.drain_kills += 1;
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

    /// How many tasks drains killed since the start (each counted once).
    pub fn drain_kills(&self) -> u64 {
        self.drain_kills
    }

    /// The non-terminal tasks on an agent, by framework.
    fn tasks_on(&self, agent: AgentId) -> BTreeMap<FrameworkId, Vec<TaskId>> {
        let mut out: BTreeMap<FrameworkId, Vec<TaskId>> = BTreeMap::new();
        for ((fw, task), t) in self.tasks.on_agent(agent) {
            if !t.state().is_terminal() {
                out.entry(*fw).or_default().push(task.clone());
            }
        }
        out
    }
}
