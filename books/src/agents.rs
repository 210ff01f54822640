//! Agents: registration and re-registration (with their tasks), heartbeats, and loss.

use protocol::{AgentId, FrameworkId, TaskId, TaskState, TaskStatus};
use std::collections::HashSet;

use super::{
    AgentRecord, AgentRegistration, AgentState, AgentToken, Effect, Effects, Now, State, StateError,
};
use crate::records::{Change, StoredAgent};

/// How to call the agent a task runs on.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentContact {
    /// The agent.
    pub agent_id: AgentId,
    /// Its base URL.
    pub endpoint: String,
    /// The token to present to it, if it registered one.
    pub token: Option<AgentToken>,
}

impl State {
    /// Registers an agent, or re-registers a known (or, after a coordinator restart, unknown) one
    /// with the tasks it still runs. Returns its id and whether it is new to this coordinator.
    pub fn register_agent(
        &mut self,
        req: AgentRegistration,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<(AgentId, bool), StateError> {
        let id = req.agent_id.unwrap_or_else(|| self.ids.agent_id());
        for status in &req.tasks {
            if status.agent_id != id {
                return Err(StateError::AgentMismatch {
                    task: status.task_id.clone(),
                    given: status.agent_id,
                    reason: format!("the registering agent is {id}"),
                });
            }
            if let Some(task) = self
                .tasks
                .get(&(status.framework_id, status.task_id.clone()))
            {
                if task.agent_id() != id {
                    return Err(StateError::AgentMismatch {
                        task: status.task_id.clone(),
                        given: id,
                        reason: format!("the task runs on agent {}", task.agent_id()),
                    });
                }
            }
        }

        if let Some(record) = self.agents.get(id) {
            if !AgentToken::same(record.api_token.as_ref(), req.api_token.as_ref()) {
                tracing::warn!(agent = %id, "re-registration refused: another api_token");
                return Err(StateError::AgentTokenMismatch(id));
            }
        }
        self.ledger.check_kinds(&req.resources)?;
        self.check_static_reservations(&req.reservations)?;
        let known = self.agents.contains(id);
        // Take the agent out of the allocator (rescinding its offers) and put it back with the
        // possibly changed total, then re-account its tasks: one path for every case.
        if known {
            self.rescind_agent_offers(id, "agent re-registered", fx);
            if self.ledger.has_agent(id) {
                self.ledger.remove_agent(id);
            }
        }
        self.ledger.add_agent(id, &req.resources);
        // A drain the registry kept from before a coordinator restart is put back once the
        // agent's tasks are accounted (below).
        let (record, stored_drain) = self.agents.register(id, now);
        record.hostname = req.hostname;
        record.endpoint = req.endpoint;
        record.api_token = req.api_token;
        record.total = req.resources;
        record.attributes = req.attributes;
        record.gpu_devices = req.gpu_devices;
        record.static_reservations = req.reservations;
        record.state = AgentState::Active;
        record.registered_at = now.wall;
        record.last_heartbeat_at = now.wall;
        record.last_heartbeat_ms = now.ms;
        if record.drain.is_some() {
            // A drain outlives the agent's re-registration: it still makes no offers.
            self.ledger.pause_agent(id, true);
        }
        // Its pools before its tasks: a task goes back into a pool of its framework's role.
        self.apply_reservations(id);
        // Re-account the non-terminal tasks the books place on this agent.
        // (`unreachable` ones included: their agent is back.)
        let keys: Vec<_> = self
            .tasks
            .on_agent(id)
            .filter(|(_, t)| !t.state().is_terminal())
            .map(|(k, _)| k.clone())
            .collect();
        // Removing the agent from the ledger took them off their frameworks' `used` too.
        for (fw, task) in keys {
            self.rehold_task(fw, id, &task, fx);
        }

        if known {
            self.reconcile_agent_tasks(id, &req.tasks, now, fx);
        }
        for status in req.tasks {
            self.apply_reported_status(id, status, now, fx);
        }
        self.kill_on_return(id, fx);
        if let Some(deadline) = stored_drain {
            self.restore_drain(id, deadline, now, fx);
        }
        fx.push(Effect::Allocate);
        Ok((id, !known))
    }

    /// The token to present when calling the agent (none for an agent that registered without
    /// one, or an unknown agent).
    pub fn agent_token(&self, id: AgentId) -> Option<AgentToken> {
        self.agents.get(id)?.api_token.clone()
    }

    /// How to reach the agent that runs task `task` of `framework` (to read its output there),
    /// or why it cannot be named: an unknown framework, task or agent.
    pub fn task_agent(
        &self,
        framework: FrameworkId,
        task: &TaskId,
    ) -> Result<AgentContact, StateError> {
        if !self.frameworks.contains(framework) {
            return Err(StateError::UnknownFramework(framework));
        }
        let record = self
            .tasks
            .get(&(framework, task.clone()))
            .ok_or_else(|| StateError::UnknownTask(task.clone()))?;
        let agent_id = record.agent_id();
        let agent = self
            .agents
            .get(agent_id)
            .ok_or(StateError::UnknownAgent(agent_id))?;
        Ok(AgentContact {
            agent_id,
            endpoint: agent.endpoint.clone(),
            token: agent.api_token.clone(),
        })
    }

    /// Tasks the books place on a re-registering agent in a running (or unreachable) state
    /// that the agent no longer reports are lost. (Staging tasks may still be on their way to
    /// it.)
    fn reconcile_agent_tasks(
        &mut self,
        id: AgentId,
        reported: &[TaskStatus],
        now: &Now,
        fx: &mut Effects,
    ) {
        let reported: HashSet<(FrameworkId, &TaskId)> = reported
            .iter()
            .map(|s| (s.framework_id, &s.task_id))
            .collect();
        let missing: Vec<_> = self
            .tasks
            .on_agent(id)
            .filter(|((fw, task), t)| {
                matches!(
                    t.state(),
                    TaskState::Starting | TaskState::Running | TaskState::Unreachable
                ) && !reported.contains(&(*fw, task))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for (fw, task) in missing {
            let status = self.coordinator_status(
                fw,
                &task,
                TaskState::Lost,
                "the agent re-registered without this task",
                now,
            );
            if let Some(status) = status {
                self.record_status(status, now, fx);
            }
        }
    }

    /// Accounts a known task's resources again on its agent (after the agent re-registered, or
    /// the task came back from `lost`). If they no longer fit, the task holds what fits (see
    /// [`State::hold_reported`]).
    pub(crate) fn rehold_task(
        &mut self,
        fw: protocol::FrameworkId,
        agent: AgentId,
        task: &protocol::TaskId,
        fx: &mut Effects,
    ) {
        let key = (fw, task.clone());
        let Some(res) = self.tasks.get(&key).map(|t| t.resources.clone()) else {
            return;
        };
        let (held, pool) = self.hold_reported(fw, agent, task, &res, fx);
        if let Some(mut t) = self.tasks.get_mut(&key) {
            t.pool = pool;
            if held != res {
                t.set_resources(held);
            }
        }
    }

    /// Records a heartbeat. Unknown and lost agents get 404, which tells them to register again.
    pub fn agent_heartbeat(&mut self, id: AgentId, now: &Now) -> Result<(), StateError> {
        match self.agents.get_mut(id) {
            Some(a) if a.state == AgentState::Active => {
                a.last_heartbeat_ms = now.ms;
                a.last_heartbeat_at = now.wall;
                Ok(())
            }
            _ => Err(StateError::UnknownAgent(id)),
        }
    }

    /// What the registry holds of agent `id`, as far as the books know: the record loaded for
    /// it while it is awaited, else what its registration wrote. Read before a registration,
    /// for [`State::stored_agent`].
    pub fn kept_agent(&self, id: AgentId) -> Option<StoredAgent> {
        self.agents.kept(id)
    }

    /// The registry change that records agent `id` as registered now (the runtime queues it
    /// after a successful registration), or `None` when the registry already holds the same
    /// hostname, endpoint and drain (`kept`, read before the registration): only `last_seen`
    /// would change, and a fleet re-registering after a failover would otherwise queue one
    /// write per agent ahead of the writes clients wait for.
    pub fn stored_agent(
        &self,
        id: AgentId,
        kept: Option<&StoredAgent>,
        now: &Now,
    ) -> Option<Change> {
        let next = self.agents.stored(id, now.wall)?;
        let same = kept.is_some_and(|k| {
            *k == StoredAgent {
                last_seen: k.last_seen,
                ..next.clone()
            }
        });
        (!same).then_some(Change::PutAgent(next))
    }

    /// How many agents the registry knew at load have not re-registered yet (and are not yet
    /// reported lost).
    pub fn awaited_agents(&self) -> usize {
        self.agents.awaited_len()
    }

    /// Whether agent `id` is one the registry knew at load that has not re-registered yet.
    pub fn is_awaited(&self, id: AgentId) -> bool {
        self.agents.is_awaited(id)
    }

    /// The agents the registry knew at load that have not re-registered yet, with the
    /// endpoints it kept for them (to call them back), in id order.
    pub fn awaited_endpoints(&self) -> Vec<(AgentId, String)> {
        self.agents.awaited_endpoints()
    }

    /// Declares lost every active agent that missed `max_missed_heartbeats` heartbeats, and
    /// every agent loaded from the registry that did not re-register within as long; forgets
    /// agents lost for longer than `lost_agent_retention` (and removes them from the registry).
    pub fn check_agents(&mut self, now: &Now, fx: &mut Effects) {
        let limit = self.agent_timeout_ms();
        for stored in self.agents.take_overdue(now.ms, limit) {
            let id = stored.id;
            // Lost as one that missed its heartbeats: listed as `lost`, in no capacity (it
            // was never in the ledger), forgotten after the retention; it may still
            // re-register with its id.
            tracing::warn!(agent = %id, endpoint = %stored.endpoint, "agent known to the registry did not re-register: lost");
            self.agents.insert(
                id,
                AgentRecord {
                    hostname: stored.hostname,
                    endpoint: stored.endpoint,
                    api_token: None,
                    total: Default::default(),
                    attributes: Default::default(),
                    state: AgentState::Lost,
                    registered_at: stored.last_seen,
                    last_heartbeat_at: stored.last_seen,
                    last_heartbeat_ms: now.ms,
                    owner: None,
                    gpu_devices: Vec::new(),
                    drain: stored
                        .drain_deadline
                        .map(|deadline| super::drain::Drain::restored(deadline, now)),
                    static_reservations: Vec::new(),
                },
            );
        }
        let lost: Vec<AgentId> = self
            .agents
            .iter()
            .filter(|(_, a)| {
                a.state == AgentState::Active && now.ms.saturating_sub(a.last_heartbeat_ms) > limit
            })
            .map(|(id, _)| *id)
            .collect();
        for id in lost {
            tracing::warn!(agent = %id, "agent missed its heartbeats: lost");
            self.lose_agent(id, now, fx);
        }
        self.check_partitioned(now, fx);
        // Lost agents silent for longer than `lost_agent_retention` are forgotten (garbage
        // collection: the books would otherwise keep every agent ever seen). One that comes
        // back later registers as a new agent would after a restart.
        let retention = self.timing.lost_agent_retention_ms;
        let before = self.agents.len();
        let forgotten: Vec<AgentId> = self
            .agents
            .iter()
            .filter(|(_, a)| {
                a.state == AgentState::Lost
                    && now.ms.saturating_sub(a.last_heartbeat_ms) > retention
            })
            .map(|(id, _)| *id)
            .collect();
        for id in forgotten {
            // Its tasks still unreachable will not come back with it: they are gone.
            for key in self.tasks.unreachable_on(id) {
                self.make_gone(&key, "its agent was forgotten", now, fx);
            }
            let roles = self.agents.forget(id);
            fx.push(Effect::Persist(Change::RemoveAgent(id)));
            // Its dynamic reservations are forgotten with it.
            for role in roles {
                fx.push(Effect::Persist(Change::SetReservation(
                    id,
                    role,
                    protocol::Resources::new(),
                )));
            }
        }
        if self.agents.len() != before {
            let agents = &self.agents;
            self.freed_at.retain(|id, _| agents.contains(*id));
            tracing::info!(
                forgotten = before - self.agents.len(),
                "lost agents forgotten"
            );
        }
    }

    /// An agent is lost: its offers are rescinded, its tasks become `lost` (`unreachable` for a
    /// partition-aware framework: see `partition.rs`), its resources leave the capacity. Its
    /// record stays (state `lost`) so it can re-register with the same id.
    pub fn lose_agent(&mut self, id: AgentId, now: &Now, fx: &mut Effects) {
        let Some(agent) = self.agents.get(id) else {
            return;
        };
        if agent.state == AgentState::Lost {
            return;
        }
        self.rescind_agent_offers(id, "agent lost", fx);
        // What its tasks held leaves their frameworks' `used` with it.
        self.ledger.remove_agent(id);
        let victims: Vec<_> = self
            .tasks
            .on_agent(id)
            .filter(|(_, t)| t.holds())
            .map(|(k, _)| k.clone())
            .collect();
        for key in victims {
            if self.partition_task(&key, now, fx) {
                continue;
            }
            let Some(status) = self.coordinator_status(
                key.0,
                &key.1,
                TaskState::Lost,
                "agent lost: it missed its heartbeats",
                now,
            ) else {
                continue;
            };
            if let Some(mut t) = self.tasks.get_mut(&key) {
                t.set_latest(status.clone());
                t.lost_by_coordinator = true;
            }
            if let Some(f) = self.frameworks.get_mut(key.0) {
                f.active_tasks = f.active_tasks.saturating_sub(1);
            }
            self.send_update(status, now, fx);
        }
        if let Some(a) = self.agents.get_mut(id) {
            a.state = AgentState::Lost;
        }
        fx.push(Effect::Allocate);
    }
}
