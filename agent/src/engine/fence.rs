//! Fencing: the agent kills on its own the tasks its coordinator will have declared `lost`
//! (or `gone`) by the time it could have heard of them, so a framework that launches a lost
//! task again never has it running twice (see [`protocol::partition`]).
//!
//! The coordinator declares the agent lost when it has received no heartbeat for the *agent
//! timeout*, which it tells the agent at registration. The agent counts from the *sending* of
//! its last heartbeat (or registration) that the coordinator answered, which is no later than
//! the coordinator's receipt of it: so a task is killed before the verdict, a margin early
//! ([`protocol::partition::fence_after`]). A partition-aware framework's tasks may run on for
//! its partition timeout (sent with each launch) beyond that. The kill of a fenced task ends
//! `killed` with reason `agent_partitioned`, and is journaled, so a restarted agent kills a
//! fenced task it finds alive again.
//!
//! The coordinator may also order a fence ([`Engine::fence`]): when the agent returns still
//! running a task its framework was told is `lost` or `gone`.

use std::collections::HashMap;
use std::time::Duration;

use super::*;

/// What the agent knows of its contact with the coordinator.
#[derive(Debug, Default)]
pub(crate) struct Contact {
    /// How long the coordinator waits for heartbeats (`None` from a coordinator that does not
    /// say: then nothing is fenced).
    pub agent_timeout: Option<Duration>,
    /// When the last heartbeat or registration the coordinator answered was sent.
    pub last: Option<Instant>,
    /// When the heartbeat in flight was sent.
    pub heartbeat_sent: Option<Instant>,
    /// When the registration in flight was sent.
    pub register_sent: Option<Instant>,
    /// When the agent last acted on a call-back ([`Engine::call_back`]).
    pub called_back: Option<Instant>,
    /// When the armed [`Timer::Fence`] fires, if one is armed.
    pub timer_at: Option<Instant>,
    /// Partition timeouts of partition-aware frameworks, as their launches said.
    pub partition: HashMap<FrameworkId, Duration>,
}

impl Engine {
    /// The coordinator orders a fence: the task's framework was told it is `lost` or `gone`.
    /// It is killed (reason `agent_partitioned`) and journaled as fenced.
    pub fn fence(
        &mut self,
        framework_id: Option<FrameworkId>,
        task_id: &TaskId,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Result<(), UnknownTask> {
        let key = self.find(framework_id, task_id)?;
        self.fence_task(&key, self.config.timing.kill_grace, now, out);
        Ok(())
    }

    /// Kills a task as fenced: SIGTERM, then SIGKILL after `grace`.
    fn fence_task(&mut self, key: &TaskKey, grace: Duration, now: Now, out: &mut Vec<Command>) {
        let Some(t) = self.tasks.get_mut(key) else {
            return;
        };
        if t.latest.state.is_terminal() || t.fenced {
            return;
        }
        t.fenced = true;
        t.kill_requested = true;
        let stage = t.stage;
        tracing::warn!(task_id = %key.1, "fencing the task: its framework is told it is not running");
        let record = Record::Fenced {
            framework_id: key.0,
            task_id: key.1.clone(),
        };
        self.journal(vec![record], Durability::Synced, out);
        if let Stage::Started(process) = stage {
            self.signal_kill_within(key, process, grace, now, out);
        }
    }

    /// When a live task of `framework_id` must be killed, counted from the last contact.
    fn fence_at(&self, framework_id: FrameworkId) -> Option<Instant> {
        let (timeout, last) = (self.contact.agent_timeout?, self.contact.last?);
        let partition = self.contact.partition.get(&framework_id).copied();
        Some(last + protocol::partition::fence_after(timeout, self.session.interval, partition))
    }

    /// Kills the live tasks whose fence time has come, then arms [`Timer::Fence`] for the next.
    pub(super) fn check_fence(&mut self, now: Now, out: &mut Vec<Command>) {
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for t in self.tasks.in_order() {
            if t.latest.state.is_terminal() || t.fenced {
                continue;
            }
            let Some(at) = self.fence_at(t.latest.framework_id) else {
                continue;
            };
            if at <= now.at {
                due.push(t.key());
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        // The process must be gone before the coordinator's verdict: half the margin.
        let grace = self
            .config
            .timing
            .kill_grace
            .min(self.session.interval / 2)
            .min(self.contact.agent_timeout.unwrap_or_default() / 4);
        for key in due {
            tracing::warn!(
                task_id = %key.1,
                "the coordinator has not answered for longer than it waits: killing the task"
            );
            self.fence_task(&key, grace, now, out);
        }
        if let Some(at) = next {
            if self.contact.timer_at.is_none_or(|armed| at < armed) {
                self.contact.timer_at = Some(at);
                out.push(Command::SetTimer {
                    at,
                    timer: Timer::Fence,
                });
            }
        }
    }

    /// Arms [`Timer::Fence`] for a task of `framework_id` just launched, unless an earlier one
    /// is armed.
    pub(super) fn arm_fence(
        &mut self,
        framework_id: FrameworkId,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        let Some(at) = self.fence_at(framework_id) else {
            return;
        };
        if at <= now.at {
            self.check_fence(now, out);
        } else if self.contact.timer_at.is_none_or(|armed| at < armed) {
            self.contact.timer_at = Some(at);
            out.push(Command::SetTimer {
                at,
                timer: Timer::Fence,
            });
        }
    }

    /// [`Timer::Fence`] fired.
    pub(super) fn fence_timer(&mut self, now: Now, out: &mut Vec<Command>) {
        if self.contact.timer_at.is_some_and(|at| at <= now.at) {
            self.contact.timer_at = None;
        }
        self.check_fence(now, out);
    }

    /// The coordinator answered a heartbeat or registration sent at `sent`.
    pub(super) fn contact_at(&mut self, sent: Option<Instant>) {
        if let Some(sent) = sent {
            if self.contact.last.is_none_or(|last| sent > last) {
                self.contact.last = Some(sent);
            }
        }
    }
}
