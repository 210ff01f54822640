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
//!
//! A coordinator that still awaits agents it knew before (they have not re-registered since
//! its restart or failover) answers `409 task_not_yet_known` instead: the task may run on one
//! of them. Such a task is asked about again at later offers, at most once per
//! [`ASK_AGAIN`], until it is heard of or answered for: reporting it lost would make a
//! framework that retries lost tasks run it twice.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use protocol::{AgentId, FrameworkId, TaskId, TaskState, TaskStatus, UpdateId};

/// What [`Forgotten`] tells the scheduler a forgotten launch became.
pub(crate) const FORGOTTEN_MESSAGE: &str =
    "the coordinator does not know this task: it was launched just before a coordinator \
     failover or restart and never reached its agent";

/// How long a task the coordinator does not know yet waits before it is asked about again.
pub(crate) const ASK_AGAIN: Duration = Duration::from_secs(1);

/// Tasks launched and not yet terminal, and which were heard of since the last
/// re-registration.
#[derive(Debug, Default)]
pub(crate) struct Forgotten {
    /// Launched, no terminal state heard yet: task → its agent.
    open: HashMap<TaskId, AgentId>,
    /// Heard of (any state) since the last re-registration or check.
    heard: HashSet<TaskId>,
    /// A re-registration happened; check at the next offers.
    check: bool,
    /// Tasks the coordinator did not know yet (agents still awaited): asked about again.
    again: HashSet<TaskId>,
    /// When the last check was taken.
    asked_at: Option<Instant>,
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
        if self.check || !self.again.is_empty() {
            self.heard.insert(status.task_id.clone());
        }
        if status.state.is_terminal() {
            self.open.remove(&status.task_id);
        }
    }

    /// The driver registered again under its id: check at the next offers.
    pub fn reregistered(&mut self) {
        self.heard.clear();
        self.again.clear();
        self.check = !self.open.is_empty();
    }

    /// At offers (`now`): the open tasks not heard of since the re-registration, once per
    /// re-registration; and those the coordinator did not know yet, not heard of since, once
    /// [`ASK_AGAIN`] has passed since the last check. Empty otherwise.
    pub fn take_unheard(&mut self, now: Instant) -> Vec<TaskId> {
        let again_due = !self.again.is_empty()
            && self
                .asked_at
                .is_none_or(|at| now.duration_since(at) >= ASK_AGAIN);
        let check = std::mem::take(&mut self.check);
        if !check && !again_due {
            return Vec::new();
        }
        self.asked_at = Some(now);
        let heard = std::mem::take(&mut self.heard);
        let again = std::mem::take(&mut self.again);
        let mut ids: Vec<TaskId> = self
            .open
            .keys()
            .filter(|t| !heard.contains(*t) && (check || again.contains(*t)))
            .cloned()
            .collect();
        ids.sort();
        ids
    }

    /// The coordinator does not know `task` yet (it still awaits agents): ask again later.
    pub fn not_yet_known(&mut self, task: &TaskId) {
        if self.open.contains_key(task) {
            self.again.insert(task.clone());
        }
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

    /// A book with tasks `a`, `b` and `c` launched.
    fn three_launched() -> (Forgotten, [TaskId; 3]) {
        let mut f = Forgotten::default();
        let ids = ["a", "b", "c"].map(|t| TaskId::new(t).unwrap());
        for t in &ids {
            f.launched(t.clone(), AgentId::new());
        }
        (f, ids)
    }

    #[test]
    fn only_open_tasks_unheard_since_the_reregistration_are_checked_once() {
        let (mut f, [a, b, c]) = three_launched();
        let now = Instant::now();
        // Nothing to check before a re-registration.
        assert!(f.take_unheard(now).is_empty());
        f.heard(&status(&a, TaskState::Finished));
        f.reregistered();
        f.heard(&status(&b, TaskState::Running));
        assert_eq!(f.take_unheard(now), vec![c.clone()]);
        // Once per re-registration.
        assert!(f.take_unheard(now + ASK_AGAIN).is_empty());
        let lost = f.unknown(FrameworkId::new(), &c).unwrap();
        assert_eq!(lost.state, TaskState::Lost);
        assert_eq!(lost.task_id, c);
        assert!(f.unknown(FrameworkId::new(), &c).is_none());
        // b stays open (running); a finished is gone.
        f.reregistered();
        assert_eq!(f.take_unheard(now), vec![b]);
    }

    #[test]
    fn tasks_not_known_yet_are_asked_about_again_until_heard_of() {
        let (mut f, [a, b, c]) = three_launched();
        f.reregistered();
        let t0 = Instant::now();
        assert_eq!(f.take_unheard(t0), vec![a.clone(), b.clone(), c.clone()]);
        // The coordinator still awaits agents: none of them is reported lost.
        for t in [&a, &b, &c] {
            f.not_yet_known(t);
        }
        // Not before the interval.
        assert!(f.take_unheard(t0 + ASK_AGAIN / 2).is_empty());
        // b's agent came back and its update arrived; c ended.
        f.heard(&status(&b, TaskState::Running));
        f.heard(&status(&c, TaskState::Finished));
        assert_eq!(f.take_unheard(t0 + ASK_AGAIN), vec![a.clone()]);
        // Answered (known, or reported lost): nothing more to ask.
        assert!(f.take_unheard(t0 + ASK_AGAIN * 3).is_empty());
        // Only open tasks are asked about again.
        f.not_yet_known(&c);
        assert!(f.take_unheard(t0 + ASK_AGAIN * 5).is_empty());
        // A re-registration starts over.
        f.not_yet_known(&a);
        f.reregistered();
        assert_eq!(f.take_unheard(t0 + ASK_AGAIN * 5), vec![a, b]);
    }

    #[test]
    fn nothing_open_means_nothing_unheard() {
        let mut f = Forgotten::default();
        f.reregistered();
        assert!(f.take_unheard(Instant::now()).is_empty());
    }
}
