//! Drain and maintenance (issue #17): an operator takes an agent out of service without
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
//! A drain lives in the books only: the durable registry does not keep it, so a coordinator
//! restart forgets it and the agent comes back `active` when it re-registers (re-drain it).
//! A drain survives the agent's own loss and re-registration.

use std::collections::{BTreeMap, BTreeSet};

use protocol::maintenance::{AgentDraining, AgentMaintenance, AGENT_DRAINED, AGENT_DRAINING};
use protocol::{AgentId, FrameworkEvent, FrameworkId, OfferEvent, TaskId, Timestamp};

use super::views::agent_state_name;
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

/// The state name operators see for an agent: `lost`, `draining`, `drained` or `active`.
pub(crate) fn agent_view_state(a: &AgentRecord) -> &'static str {
    match (&a.drain, a.state) {
        (_, super::AgentState::Lost) => agent_state_name(a.state),
        (Some(d), _) if d.drained => AGENT_DRAINED,
        (Some(_), _) => AGENT_DRAINING,
        (None, s) => agent_state_name(s),
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
        if !self.agents.contains_key(&id) {
            return Err(StateError::UnknownAgent(id));
        }
        let delay_ms = (deadline_s.max(0.0) * 1000.0) as u64;
        let deadline = now.wall
            + chrono::Duration::milliseconds(i64::try_from(delay_ms).unwrap_or(i64::MAX / 2));
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
        tracing::info!(agent = %id, deadline_s, tasks = tasks.values().map(Vec::len).sum::<usize>(), "agent draining");
        let Some(agent) = self.agents.get_mut(&id) else {
            return Err(StateError::UnknownAgent(id));
        };
        agent.drain = Some(drain);
        Ok(AgentMaintenance {
            agent_id: id,
            state: agent_view_state(agent).into(),
            deadline: Some(deadline),
            rescinded_offers,
        })
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
            .get_mut(&id)
            .ok_or(StateError::UnknownAgent(id))?;
        let was_draining = agent.drain.take().is_some();
        let state = agent_view_state(agent);
        if was_draining {
            tracing::info!(agent = %id, "agent reactivated");
            if self.ledger.has_agent(id) {
                self.ledger.pause_agent(id, false);
            }
            fx.push(Effect::Allocate);
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
        for ((fw, task), t) in &self.tasks {
            if !t.state().is_terminal() && draining.contains(&t.agent_id) {
                left.entry(t.agent_id)
                    .or_default()
                    .push((*fw, task.clone()));
            }
        }
        let resend_ms = self.timing.update_resend_interval_ms.max(1);
        for id in draining {
            let Some(agent) = self.agents.get_mut(&id) else {
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
                if let Some(t) = self.tasks.get_mut(&(fw, task.clone())) {
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
        for ((fw, task), t) in &self.tasks {
            if t.agent_id == agent && !t.state().is_terminal() {
                out.entry(*fw).or_default().push(task.clone());
            }
        }
        out
    }
}
