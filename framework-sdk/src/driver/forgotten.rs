//! Launches a coordinator forgot. A coordinator answers an accept once its books hold the
//! task and sends the launch to the agent after; killed in between (a leader SIGKILLed, a
//! single-node coordinator crashing), the task never reaches its agent, and the coordinator
//! that comes back (or takes over) learns of tasks only from agents: nobody would ever report
//! that task, and the framework would wait for it forever.
//!
//! So the driver remembers every task it launched until it hears a terminal state. After
//! re-registering it reconciles all tasks (the coordinator sends the latest state of those it
//! knows); at the first offers after that (the coordinator offers once its agents had their
//! chance to re-register), each launched, unfinished task it heard nothing about since is
//! reconciled by id, and one the coordinator answers `404 task_not_found` for is reported to
//! the scheduler as `lost` (as Mesos reports tasks unknown to its master).

use std::collections::{HashMap, HashSet};

use protocol::{AgentId, FrameworkId, TaskId, TaskState, TaskStatus, UpdateId};

/// What [`Forgotten`] tells the scheduler a forgotten launch became.
pub(crate) const FORGOTTEN_MESSAGE: &str =
    "the coordinator does not know this task: it was launched just before a coordinator \
     failover or restart and never reached its agent";

/// Tasks launched and not yet terminal, and which were heard of since the last
/// re-registration.
#[derive(Debug, Default)]
pub(crate) struct Forgotten {
    /// Launched, no terminal state heard yet: task → its agent.
    open: HashMap<TaskId, AgentId>,
    /// Heard of (any state) since the last re-registration.
    heard: HashSet<TaskId>,
    /// A re-registration happened; check at the next offers.
    check: bool,
}

impl Forgotten {
    /// The coordinator launched `task` on `agent`.
    pub fn launched(&mut self, task: TaskId, agent: AgentId) {
        self.open.insert(task, agent);
    }

    /// An update for a task arrived. Who was heard of matters only between a
    /// re-registration and the check at the next offers, so only then is it recorded (the
    /// steady state keeps no per-update set).
    pub fn heard(&mut self, status: &TaskStatus) {
        if self.check {
            self.heard.insert(status.task_id.clone());
        }
        if status.state.is_terminal() {
            self.open.remove(&status.task_id);
        }
    }

    /// The driver registered again under its id: check at the next offers.
    pub fn reregistered(&mut self) {
        self.heard.clear();
        self.check = !self.open.is_empty();
    }

    /// At offers: the open tasks not heard of since the re-registration, once per
    /// re-registration (empty otherwise).
    pub fn take_unheard(&mut self) -> Vec<TaskId> {
        if !std::mem::take(&mut self.check) {
            return Vec::new();
        }
        let heard = std::mem::take(&mut self.heard);
        let mut ids: Vec<TaskId> = self
            .open
            .keys()
            .filter(|t| !heard.contains(*t))
            .cloned()
            .collect();
        ids.sort();
        ids
    }

    /// The coordinator does not know `task`: forget it, and the `lost` status to report.
    pub fn unknown(&mut self, framework: FrameworkId, task: &TaskId) -> Option<TaskStatus> {
        let agent_id = self.open.remove(task)?;
        Some(TaskStatus {
            task_id: task.clone(),
            framework_id: framework,
            agent_id,
            state: TaskState::Lost,
            message: Some(FORGOTTEN_MESSAGE.to_owned()),
            exit_code: None,
            update_id: UpdateId::new(),
            timestamp: protocol::now(),
            resources: None,
            reason: Some("unknown_to_coordinator".to_owned()),
            usage: None,
            gpu_devices: None,
            healthy: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(task: &TaskId, state: TaskState) -> TaskStatus {
        let mut s = Forgotten::default();
        s.launched(task.clone(), AgentId::new());
        let mut st = s.unknown(FrameworkId::new(), task).unwrap();
        st.state = state;
        st
    }

    #[test]
    fn only_open_tasks_unheard_since_the_reregistration_are_checked_once() {
        let mut f = Forgotten::default();
        let (a, b, c) = (
            TaskId::new("a").unwrap(),
            TaskId::new("b").unwrap(),
            TaskId::new("c").unwrap(),
        );
        for t in [&a, &b, &c] {
            f.launched(t.clone(), AgentId::new());
        }
        // Nothing to check before a re-registration.
        assert!(f.take_unheard().is_empty());
        f.heard(&status(&a, TaskState::Finished));
        f.reregistered();
        f.heard(&status(&b, TaskState::Running));
        assert_eq!(f.take_unheard(), vec![c.clone()]);
        // Once per re-registration.
        assert!(f.take_unheard().is_empty());
        let lost = f.unknown(FrameworkId::new(), &c).unwrap();
        assert_eq!(lost.state, TaskState::Lost);
        assert_eq!(lost.task_id, c);
        assert!(f.unknown(FrameworkId::new(), &c).is_none());
        // b stays open (running); a finished is gone.
        f.reregistered();
        assert_eq!(f.take_unheard(), vec![b]);
    }

    #[test]
    fn nothing_open_means_nothing_unheard() {
        let mut f = Forgotten::default();
        f.reregistered();
        assert!(f.take_unheard().is_empty());
    }
}
