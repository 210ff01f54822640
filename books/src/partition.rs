//! Tasks of agents the coordinator cannot reach (see [`protocol::partition`]).
//!
//! When an agent misses its heartbeats ([`State::lose_agent`]) each of its tasks becomes:
//! - `lost` (terminal) for a framework that is not partition-aware. The agent has killed it on
//!   its own by then (it knows the agent timeout from its registration);
//! - `unreachable` (not terminal, holding nothing) for a partition-aware one, until the agent
//!   returns (the task comes back with the state the agent reports) or the framework's
//!   partition timeout passes ([`State::check_partitioned`]): then it is `gone` (terminal).
//!
//! Either way, a task the framework was told is `lost` or `gone` must not run: when its agent
//! returns still running it, the coordinator *fences* it ([`Effect::Fence`]): the agent kills
//! it with reason `agent_partitioned` and journals that it must not run again. The task stays
//! terminal in the books; the `killed` the agent then reports replaces `lost` or `gone` as the
//! task's last state, so a framework's last word on a task is what its agent did.

use protocol::{AgentId, FrameworkId, TaskId, TaskState, TaskStatus};

use super::{Effect, Effects, Now, State};

impl State {
    /// Makes a partition-aware framework's task on a lost agent `unreachable` (it holds
    /// nothing from now on: its agent left the ledger) and tells the framework. Returns
    /// false when the framework is not partition-aware (the caller declares it `lost`).
    pub(crate) fn partition_task(
        &mut self,
        key: &(FrameworkId, TaskId),
        now: &Now,
        fx: &mut Effects,
    ) -> bool {
        let Some(timeout_s) = self
            .frameworks
            .get(key.0)
            .and_then(|f| f.partition_timeout_s)
        else {
            return false;
        };
        let Some(status) = self.coordinator_status(
            key.0,
            &key.1,
            TaskState::Unreachable,
            "agent unreachable: it missed its heartbeats; the task may still run",
            now,
        ) else {
            return false;
        };
        let Some(mut t) = self.tasks.get_mut(key) else {
            return false;
        };
        let gone_at = now.ms.saturating_add((timeout_s * 1000.0) as u64);
        t.set_unreachable(status.clone(), gone_at);
        self.send_update(status, now, fx);
        true
    }

    /// Tasks `unreachable` for longer than their framework's partition timeout are `gone`.
    pub fn check_partitioned(&mut self, now: &Now, fx: &mut Effects) {
        for key in self.tasks.gone_due(now.ms) {
            self.make_gone(
                &key,
                "its agent stayed unreachable past the partition timeout",
                now,
                fx,
            );
        }
    }

    /// The task is `gone`: terminal, killed if its agent ever returns with it.
    pub(crate) fn make_gone(
        &mut self,
        key: &(FrameworkId, TaskId),
        message: &str,
        now: &Now,
        fx: &mut Effects,
    ) {
        let unreachable = self
            .tasks
            .get(key)
            .is_some_and(|t| t.state() == TaskState::Unreachable);
        if !unreachable {
            return;
        }
        let Some(status) = self.coordinator_status(key.0, &key.1, TaskState::Gone, message, now)
        else {
            return;
        };
        if let Some(mut t) = self.tasks.get_mut(key) {
            t.set_latest(status.clone());
            t.lost_by_coordinator = true;
        }
        if let Some(f) = self.frameworks.get_mut(key.0) {
            f.active_tasks = f.active_tasks.saturating_sub(1);
        }
        self.send_update(status, now, fx);
    }

    /// A returning agent still runs a task its framework was told is `lost` or `gone`: it must
    /// kill it (see the module docs).
    pub(crate) fn fence(&mut self, agent: AgentId, status: &TaskStatus, fx: &mut Effects) {
        let Some(a) = self.agents.get(agent) else {
            return;
        };
        tracing::warn!(
            %agent,
            framework = %status.framework_id,
            task = %status.task_id,
            "a task reported lost or gone still runs on its returning agent: killing it"
        );
        self.fences += 1;
        fx.push(Effect::Fence {
            agent_id: agent,
            framework_id: status.framework_id,
            endpoint: a.endpoint.clone(),
            task_id: status.task_id.clone(),
        });
    }

    /// The agent of an `unreachable` task returned and reports a status the books have seen
    /// before (the task's state did not change while it was away): the task is what that
    /// status says again, told to the framework under a new update id.
    pub(crate) fn reachable_again(&mut self, mut status: TaskStatus, now: &Now, fx: &mut Effects) {
        status.update_id = self.ids.update_id();
        status.timestamp = now.wall;
        status.message = Some("its agent is reachable again".into());
        self.record_status(status, now, fx);
    }

    /// Sends again the kills frameworks asked for while their tasks on `agent` were
    /// `unreachable`, now that it has returned.
    pub(crate) fn kill_on_return(&mut self, agent: AgentId, fx: &mut Effects) {
        let Some(endpoint) = self.agents.get(agent).map(|a| a.endpoint.clone()) else {
            return;
        };
        self.tasks.for_each_on_agent_mut(agent, |(fw, task), t| {
            if t.kill_on_return {
                t.kill_on_return = false;
                if !t.state().is_terminal() {
                    fx.push(Effect::Kill {
                        agent_id: agent,
                        framework_id: *fw,
                        endpoint: endpoint.clone(),
                        task_id: task.clone(),
                    });
                }
            }
        });
    }
}
