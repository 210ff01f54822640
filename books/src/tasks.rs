//! Tasks: status updates from agents, relayed to frameworks at least once (re-sent until
//! acknowledged); kill; reconciliation; adoption of tasks the books do not know.

use protocol::{
    AgentId, FrameworkEvent, FrameworkId, Resources, RolePath, TaskId, TaskState, TaskStatus,
    UpdateId,
};

use super::{Connection, Effect, Effects, Now, State, StateError};

impl State {
    /// A status update posted by an agent. Once this returns `Ok` the update is recorded and
    /// will reach the framework (at least once).
    pub fn agent_status(
        &mut self,
        agent: AgentId,
        status: TaskStatus,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        self.agent_statuses(agent, vec![status], now, fx)
    }

    /// Several status updates posted by one agent, oldest first: all are checked before any
    /// is applied, so an `Err` records none of them. Once this returns `Ok` every one is
    /// recorded and will reach its framework (at least once).
    pub fn agent_statuses(
        &mut self,
        agent: AgentId,
        statuses: Vec<TaskStatus>,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        if self.agents.active(agent).is_none() {
            return Err(StateError::UnknownAgent(agent));
        }
        for status in &statuses {
            self.check_reported_status(agent, status)?;
        }
        for status in statuses {
            self.apply_reported_status(agent, status, now, fx);
        }
        Ok(())
    }

    /// Checks that `agent` may report `status`: it names the agent, and a known task runs there.
    fn check_reported_status(&self, agent: AgentId, status: &TaskStatus) -> Result<(), StateError> {
        if status.agent_id != agent {
            return Err(StateError::AgentMismatch {
                task: status.task_id.clone(),
                given: status.agent_id,
                reason: format!("it was posted by agent {agent}"),
            });
        }
        if let Some(t) = self
            .tasks
            .get(&(status.framework_id, status.task_id.clone()))
        {
            if t.agent_id() != agent {
                return Err(StateError::AgentMismatch {
                    task: status.task_id.clone(),
                    given: agent,
                    reason: format!("the task runs on agent {}", t.agent_id()),
                });
            }
        }
        Ok(())
    }

    /// Applies a status an agent reported (in a status post or a re-registration): updates a
    /// known task, brings back a task the coordinator declared lost, or adopts an unknown one.
    /// Duplicates are dropped. So are statuses of removed frameworks, and a task of a removed
    /// framework that still runs is killed: it has no one to report to (its agent was away when
    /// the framework was removed, e.g. across a coordinator restart).
    pub(crate) fn apply_reported_status(
        &mut self,
        agent: AgentId,
        status: TaskStatus,
        now: &Now,
        fx: &mut Effects,
    ) {
        if self.frameworks.was_removed(status.framework_id) {
            if let Some(a) = self
                .agents
                .get(agent)
                .filter(|_| !status.state.is_terminal())
            {
                fx.push(Effect::Kill {
                    agent_id: agent,
                    framework_id: status.framework_id,
                    endpoint: a.endpoint.clone(),
                    task_id: status.task_id,
                });
            }
            return;
        }
        let key = (status.framework_id, status.task_id.clone());
        match self.tasks.get(&key) {
            Some(t) if t.had_update(&status.update_id) => {
                if t.state() == TaskState::Unreachable {
                    self.reachable_again(status, now, fx);
                } else if t.lost_by_coordinator && !status.state.is_terminal() {
                    // Still running (as it was before its agent was lost), yet its framework
                    // was told it is not: it must not run.
                    self.fence(agent, &status, fx);
                }
            }
            Some(t) if t.state().is_terminal() => {
                if t.lost_by_coordinator && !status.state.is_terminal() {
                    // The framework was told it is not running (and may have launched it
                    // again): it must not run.
                    self.fence(agent, &status, fx);
                } else if t.lost_by_coordinator && status.state != t.state() {
                    self.correct_lost_task(status, now, fx);
                }
            }
            Some(_) => self.record_status(status, now, fx),
            None => self.adopt_task(agent, status, now, fx),
        }
    }

    /// Records a new status of a known, non-terminal task and relays it; a terminal state frees
    /// the task's resources.
    pub(crate) fn record_status(&mut self, mut status: TaskStatus, now: &Now, fx: &mut Effects) {
        let fw = status.framework_id;
        let Some(mut t) = self.tasks.get_mut(&(fw, status.task_id.clone())) else {
            return;
        };
        if t.state().is_terminal() {
            return;
        }
        if t.drain_killed && status.state == TaskState::Killed && status.reason.is_none() {
            status.reason = Some(protocol::task::REASON_AGENT_DRAINED.into());
        }
        if t.preempt_killed && status.state == TaskState::Killed && status.reason.is_none() {
            status.reason = Some(protocol::task::REASON_PREEMPTED.into());
        }
        t.set_latest(status.clone());
        if status.state.is_terminal() {
            let (agent, res, pool) = (t.agent_id(), t.resources.clone(), t.pool.clone());
            let on_active_agent = self.agents.active(agent).is_some();
            // A non-terminal task is always on an active agent (a lost agent's tasks are
            // lost with it): the ledger reports it if not.
            self.ledger.release(fw, agent, &res, pool.as_ref());
            if on_active_agent {
                self.freed(agent, now.ms);
            }
            if let Some(f) = self.frameworks.get_mut(fw) {
                f.active_tasks = f.active_tasks.saturating_sub(1);
            }
            fx.push(Effect::Allocate);
        }
        let member_ended = (status.state.is_terminal()
            && self.gangs.has_member(fw, &status.task_id))
        .then(|| status.clone());
        self.send_update(status, now, fx);
        if let Some(status) = member_ended {
            self.gang_member_ended(&status, fx);
        }
    }

    /// A task the coordinator declared lost (its agent missed heartbeats, or a launch could not
    /// reach it) ended otherwise as its agent reports (e.g. `failed`: the agent journaled the
    /// launch and restarted before starting it): the agent's word replaces the guess and is
    /// relayed, so the framework's last state is the agent's. It holds nothing either way.
    fn correct_lost_task(&mut self, status: TaskStatus, now: &Now, fx: &mut Effects) {
        let Some(mut t) = self
            .tasks
            .get_mut(&(status.framework_id, status.task_id.clone()))
        else {
            return;
        };
        t.set_latest(status.clone());
        t.lost_by_coordinator = false;
        self.send_update(status, now, fx);
    }

    /// Adopts a task the books do not know (after a coordinator restart), under a placeholder
    /// framework if its framework is unknown too. A task still running is accounted with the
    /// resources its status reports, exactly as a launched task (see [`State::hold_reported`]);
    /// without them (an older agent) it holds nothing. A task that ended while no coordinator
    /// knew it is adopted too (terminal, holding nothing): the agent counts the update as
    /// delivered once this returns, so it must stay pending until the framework acknowledges
    /// it, and reconciliation must be able to report it.
    fn adopt_task(&mut self, agent: AgentId, status: TaskStatus, now: &Now, fx: &mut Effects) {
        let fw = status.framework_id;
        if !self.ensure_placeholder(fw, now) {
            // Too many unknown frameworks: the task is not adopted. One still running has no
            // one to report to and is not in the books, so it is killed, as a removed
            // framework's would be.
            tracing::warn!(framework = %fw, task = %status.task_id, "placeholder frameworks at their limit: task not adopted");
            if let Some(a) = self
                .agents
                .get(agent)
                .filter(|_| !status.state.is_terminal())
            {
                fx.push(Effect::Kill {
                    agent_id: agent,
                    framework_id: fw,
                    endpoint: a.endpoint.clone(),
                    task_id: status.task_id,
                });
            }
            return;
        }
        let (resources, pool) = match &status.resources {
            Some(reported) if !status.state.is_terminal() => {
                self.hold_reported(fw, agent, &status.task_id, reported, fx)
            }
            _ => (Resources::new(), None),
        };
        self.tasks
            .take_in(
                (fw, status.task_id.clone()),
                String::new(),
                agent,
                resources,
                status.clone(),
            )
            .pool = pool;
        if !status.state.is_terminal() {
            if let Some(f) = self.frameworks.get_mut(fw) {
                f.active_tasks += 1;
            }
        }
        self.send_update(status, now, fx);
    }

    /// Accounts the resources a running task reports (an adopted task, or a known one its
    /// re-registered agent still runs), on its agent for its framework (the ledger: allocator,
    /// and the agent's and framework's `used`). Outstanding offers on the agent that
    /// hold what the task uses are rescinded first: the task already runs, so the offers were
    /// made from resources that were never free. If it still does not fit (the agent reports
    /// more than its total), the task holds what fits and a warning is logged: the books never
    /// over-commit an agent. Returns what the task now holds.
    pub(crate) fn hold_reported(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        task: &TaskId,
        reported: &Resources,
        fx: &mut Effects,
    ) -> (Resources, Option<RolePath>) {
        if reported.is_empty() {
            return (Resources::new(), None);
        }
        let free = self.make_room(agent, reported, "resources in use by an adopted task", fx);
        // Per resource, min(reported, free).
        let held = reported.saturating_sub(&reported.saturating_sub(&free));
        if held != *reported {
            tracing::warn!(
                %fw,
                %agent,
                %task,
                %reported,
                accounted = %held,
                "adopted task reports more than its agent has free: accounting what fits"
            );
        }
        if held.is_empty() {
            return (held, None);
        }
        match self.ledger.hold(fw, agent, &held) {
            Ok(pool) => (held, pool),
            Err(e) => {
                // It fits what is free (unless reservations hold it: then it is a known
                // limitation, logged).
                tracing::error!(%fw, %agent, %task, error = %e, "task resources refused");
                (Resources::new(), None)
            }
        }
    }

    /// A status made by the coordinator itself (launch failure, loss), for a known task.
    pub(crate) fn coordinator_status(
        &mut self,
        fw: FrameworkId,
        task: &TaskId,
        state: TaskState,
        message: &str,
        now: &Now,
    ) -> Option<TaskStatus> {
        let t = self.tasks.get(&(fw, task.clone()))?;
        Some(TaskStatus {
            task_id: task.clone(),
            framework_id: fw,
            agent_id: t.agent_id(),
            state,
            message: Some(message.to_owned()),
            exit_code: None,
            update_id: self.ids.update_id(),
            timestamp: now.wall,
            resources: t.known_resources(),
            reason: None,
            usage: None,
            gpu_devices: t.latest().gpu_devices.clone(),
            healthy: t.latest().healthy,
        })
    }

    /// A launch failed: the tasks still staging become `state` (`lost` when the agent could not
    /// be reached, `error` when it refused them).
    pub fn launch_failed(
        &mut self,
        fw: FrameworkId,
        tasks: &[TaskId],
        state: TaskState,
        message: &str,
        now: &Now,
        fx: &mut Effects,
    ) {
        for task in tasks {
            let staging = self
                .tasks
                .get(&(fw, task.clone()))
                .is_some_and(|t| t.state() == TaskState::Staging);
            if !staging {
                continue;
            }
            if let Some(status) = self.coordinator_status(fw, task, state, message, now) {
                self.record_status(status, now, fx);
            }
            // Unreachable is a guess: the agent may have the launch (see correct_lost_task).
            if state == TaskState::Lost {
                if let Some(mut t) = self.tasks.get_mut(&(fw, task.clone())) {
                    t.lost_by_coordinator = true;
                }
            }
        }
    }

    /// Asks the task's agent to kill it; the outcome arrives as an update. A task already
    /// terminal gets its final status sent again.
    pub fn kill(
        &mut self,
        fw: FrameworkId,
        task: TaskId,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        self.live_framework_mut(fw)?;
        let t = self
            .tasks
            .get(&(fw, task.clone()))
            .ok_or(StateError::UnknownTask(task.clone()))?;
        if t.state().is_terminal() {
            fx.push(Effect::ToFramework(
                fw,
                FrameworkEvent::Update {
                    status: t.latest_status(),
                },
            ));
            return Ok(());
        }
        self.send_kill(fw, task, fx);
        Ok(())
    }

    /// An operator kills one task of framework `fw`, whether or not the framework is connected
    /// (or registered since its tasks were adopted): as the framework's own [`State::kill`], but
    /// a task that has already ended is refused ([`StateError::TaskTerminal`]) instead of
    /// reported again. Returns the task as it is now; the kill's outcome arrives from its agent
    /// as an update, relayed to the framework like any other.
    pub fn operator_kill(
        &mut self,
        fw: FrameworkId,
        task: TaskId,
        fx: &mut Effects,
    ) -> Result<protocol::messages::TaskInfo, StateError> {
        let Some(t) = self.tasks.get(&(fw, task.clone())) else {
            return Err(if self.frameworks.contains(fw) {
                StateError::UnknownTask(task)
            } else {
                StateError::UnknownFramework(fw)
            });
        };
        if t.state().is_terminal() {
            return Err(StateError::TaskTerminal {
                task,
                state: t.state(),
            });
        }
        let info = super::views::task_info(fw, &task, t);
        self.send_kill(fw, task, fx);
        Ok(info)
    }

    /// Sends the kill of a task not yet terminal to its agent; one that cannot hear it now
    /// (unreachable) is killed again when its agent returns.
    fn send_kill(&mut self, fw: FrameworkId, task: TaskId, fx: &mut Effects) {
        let Some(t) = self.tasks.get(&(fw, task.clone())) else {
            return;
        };
        let agent_id = t.agent_id();
        if t.state() == TaskState::Unreachable {
            // Its agent may not hear this kill: it is sent again when the agent returns.
            if let Some(mut t) = self.tasks.get_mut(&(fw, task.clone())) {
                t.kill_on_return = true;
            }
        }
        if let Some(agent) = self.agents.get(agent_id) {
            fx.push(Effect::Kill {
                agent_id,
                framework_id: fw,
                endpoint: agent.endpoint.clone(),
                task_id: task,
            });
        }
    }

    /// The framework acknowledges an update: it is not sent again.
    pub fn acknowledge(
        &mut self,
        fw: FrameworkId,
        task: TaskId,
        update: UpdateId,
    ) -> Result<(), StateError> {
        self.live_framework_mut(fw)?;
        self.acknowledge_one(fw, task, update)
    }

    /// Several acknowledgements of one framework. Each is recorded as by
    /// [`State::acknowledge`]; those of unknown tasks or updates change nothing and are
    /// returned (a task may have been forgotten since the update was sent).
    pub fn acknowledge_many(
        &mut self,
        fw: FrameworkId,
        acks: Vec<(TaskId, UpdateId)>,
    ) -> Result<Vec<(TaskId, UpdateId)>, StateError> {
        self.live_framework_mut(fw)?;
        let mut unknown = Vec::new();
        for (task, update) in acks {
            if self.acknowledge_one(fw, task.clone(), update).is_err() {
                unknown.push((task, update));
            }
        }
        Ok(unknown)
    }

    fn acknowledge_one(
        &mut self,
        fw: FrameworkId,
        task: TaskId,
        update: UpdateId,
    ) -> Result<(), StateError> {
        let t = self.tasks.get(&(fw, task.clone()));
        let known = t.is_some_and(|t| t.had_update(&update));
        let pending = self
            .frameworks
            .get(fw)
            .is_some_and(|f| f.pending.contains(&update));
        if !known && !pending {
            return Err(match t {
                None => StateError::UnknownTask(task),
                Some(_) => StateError::UnknownUpdate { task, update },
            });
        }
        let mut acked = vec![task];
        if let Some(f) = self.frameworks.get_mut(fw) {
            if let Some(of) = f.pending.remove(&update) {
                if of != acked[0] {
                    acked.push(of);
                }
            }
        }
        for task in acked {
            self.complete_if_done(fw, &task);
        }
        Ok(())
    }

    /// Moves a terminal task with no update pending to its framework's FIFO of completed tasks,
    /// then forgets the oldest completed tasks past `max_completed_tasks_per_framework`. A task
    /// with an update still pending stays (at-least-once delivery); terminal tasks hold no
    /// resources, so no accounting changes.
    pub(crate) fn complete_if_done(&mut self, fw: FrameworkId, task: &TaskId) {
        let Some(f) = self.frameworks.get_mut(fw) else {
            return;
        };
        let Some(mut t) = self.tasks.get_mut(&(fw, task.clone())) else {
            return;
        };
        if t.completed || !t.state().is_terminal() || f.pending.has_task(task) {
            return;
        }
        t.completed = true;
        f.completed.push_back(task.clone());
        while f.completed.len() > self.timing.max_completed_tasks_per_framework {
            let Some(old) = f.completed.pop_front() else {
                break;
            };
            let key = (fw, old);
            // Re-checked: only a task still completed (terminal, nothing pending) is forgotten.
            let forget = self.tasks.get(&key).is_some_and(|t| {
                t.completed && t.state().is_terminal() && !f.pending.has_task(&key.1)
            });
            if forget {
                self.tasks.remove(&key);
            } else if let Some(mut t) = self.tasks.get_mut(&key) {
                t.completed = false;
            }
        }
    }

    /// Sends the latest status of the named tasks (all of the framework's when empty) as
    /// updates. Unknown task ids are refused before anything is sent: as unknown (404), or as
    /// not known yet (409) while agents known before a restart or failover are still awaited.
    pub fn reconcile(
        &mut self,
        fw: FrameworkId,
        task_ids: Vec<TaskId>,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        self.live_framework_mut(fw)?;
        // Each id once, in the order given; capped, as each is one event on the stream.
        let mut seen = std::collections::HashSet::with_capacity(task_ids.len().min(1024));
        let task_ids: Vec<TaskId> = task_ids
            .into_iter()
            .filter(|id| seen.insert(id.clone()))
            .collect();
        if task_ids.len() > self.timing.max_stream_queue {
            return Err(StateError::TooManyTaskIds {
                given: task_ids.len(),
                max: self.timing.max_stream_queue,
            });
        }
        let statuses: Vec<TaskStatus> = if task_ids.is_empty() {
            self.tasks
                .of_framework(fw)
                .map(|(_, t)| t.latest_status())
                .collect()
        } else {
            // An unknown task may still be on an agent that has not re-registered since a
            // restart or failover: "unknown" would read as lost, and a framework that retries
            // lost tasks would run it twice (Mesos' master likewise does not answer then).
            let awaited = self.agents.awaited_len();
            let mut out = Vec::with_capacity(task_ids.len());
            for id in task_ids {
                let Some(t) = self.tasks.get(&(fw, id.clone())) else {
                    return Err(if awaited > 0 {
                        StateError::TaskNotYetKnown { task: id, awaited }
                    } else {
                        StateError::UnknownTask(id)
                    });
                };
                out.push(t.latest_status());
            }
            out
        };
        for status in statuses {
            fx.push(Effect::ToFramework(fw, FrameworkEvent::Update { status }));
        }
        Ok(())
    }

    /// The updates among `updates` that framework `fw` has still not acknowledged, in the
    /// order given: what its stream left out while full, to send now that it has room. An
    /// update since superseded by a newer one of its task is not among them (the newer one
    /// went its own way). Changes nothing: the re-send timer still covers them.
    pub fn unacknowledged(&self, fw: FrameworkId, updates: &[UpdateId]) -> Vec<TaskStatus> {
        let Some(f) = self.frameworks.get(fw) else {
            return Vec::new();
        };
        updates
            .iter()
            .filter_map(|u| f.pending.status(u).cloned())
            .collect()
    }

    /// Sends again every unacknowledged update whose last send is older than the re-send
    /// interval, to connected frameworks.
    pub fn resend_updates(&mut self, now: &Now, fx: &mut Effects) {
        let interval = self.timing.update_resend_interval_ms;
        let half_queue = (self.timing.max_stream_queue / 2).max(1);
        for (id, fw) in self.frameworks.iter_mut() {
            if !matches!(fw.connection, Connection::Connected { .. }) {
                continue;
            }
            // At most half a stream queue per turn: re-sends to a reader that keeps up never
            // overflow its stream.
            for status in fw.pending.due(now.ms, interval, half_queue) {
                fx.push(Effect::ToFramework(*id, FrameworkEvent::Update { status }));
            }
        }
    }
}
