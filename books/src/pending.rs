//! [`PendingUpdates`]: one framework's task updates sent and not yet acknowledged.
//!
//! Every operation on the hot path (record, acknowledge, "has this task an update pending?") is
//! O(log n) or O(1), so the cost of a status update does not grow with the number of updates in
//! flight. **A task has at most one update pending, its latest**: a new update of the task
//! supersedes an unacknowledged older one (it carries the task's whole state, so nothing is
//! lost), so a re-send or a new stream never delivers a task's older state after a newer one
//! (a `running` re-sent after its `finished` would tell the framework the task runs again),
//! and a busy framework's pending updates stay bounded by its tasks, not by their updates.
//! Updates keep the order they were recorded in, so re-sends and a new stream replay them in
//! that order.

use std::collections::{BTreeMap, HashMap};

use protocol::{TaskId, TaskStatus, UpdateId};

/// An update sent to a framework and not yet acknowledged.
#[derive(Debug, Clone)]
struct Entry {
    /// Position in the send order.
    seq: u64,
    status: TaskStatus,
    last_sent_ms: u64,
}

/// A framework's unacknowledged updates, indexed by update id, by task and in send order.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingUpdates {
    by_id: HashMap<UpdateId, Entry>,
    order: BTreeMap<u64, UpdateId>,
    /// The one pending update of each task that has one.
    per_task: HashMap<TaskId, UpdateId>,
    next_seq: u64,
    /// No re-send is due before this time (a lower bound; `u64::MAX` when empty).
    next_due_ms: u64,
}

impl PendingUpdates {
    /// Records `status` as sent at `now_ms`. An update with the same id is replaced (it keeps
    /// no older place in the order: it was just sent again), and so is an older pending update
    /// of the same task (superseded).
    pub(crate) fn record(&mut self, status: TaskStatus, now_ms: u64, resend_ms: u64) {
        if let Some(older) = self.per_task.get(&status.task_id).copied() {
            self.remove(&older);
        }
        self.remove(&status.update_id);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.per_task
            .insert(status.task_id.clone(), status.update_id);
        self.order.insert(seq, status.update_id);
        self.by_id.insert(
            status.update_id,
            Entry {
                seq,
                status,
                last_sent_ms: now_ms,
            },
        );
        if self.by_id.len() == 1 {
            self.next_due_ms = now_ms.saturating_add(resend_ms);
        } else {
            self.next_due_ms = self.next_due_ms.min(now_ms.saturating_add(resend_ms));
        }
    }

    /// Removes an update; returns its task when it was pending.
    pub(crate) fn remove(&mut self, update: &UpdateId) -> Option<TaskId> {
        let entry = self.by_id.remove(update)?;
        self.order.remove(&entry.seq);
        let task = entry.status.task_id;
        if self.per_task.get(&task) == Some(update) {
            self.per_task.remove(&task);
        }
        if self.by_id.is_empty() {
            self.next_due_ms = u64::MAX;
        }
        Some(task)
    }

    /// Whether this update is pending.
    pub(crate) fn contains(&self, update: &UpdateId) -> bool {
        self.by_id.contains_key(update)
    }

    /// The status of a pending update.
    pub(crate) fn status(&self, update: &UpdateId) -> Option<&TaskStatus> {
        self.by_id.get(update).map(|e| &e.status)
    }

    /// Whether any update of this task is pending.
    pub(crate) fn has_task(&self, task: &TaskId) -> bool {
        self.per_task.contains_key(task)
    }

    /// The oldest pending update (in send order).
    pub(crate) fn oldest(&self) -> Option<UpdateId> {
        self.order.values().next().copied()
    }

    /// How many updates are pending.
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether nothing is pending.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The pending updates in send order, at most `limit` of them, each marked sent at `now_ms`
    /// (a new stream).
    pub(crate) fn replay(&mut self, now_ms: u64, resend_ms: u64, limit: usize) -> Vec<TaskStatus> {
        let mut out = Vec::with_capacity(self.by_id.len().min(limit));
        let mut next = u64::MAX;
        for id in self.order.values() {
            if let Some(e) = self.by_id.get_mut(id) {
                // Past `limit` (what a new stream can queue) they stay as they were: due for
                // the re-sends, a bounded number per turn.
                if out.len() < limit {
                    e.last_sent_ms = now_ms;
                    out.push(e.status.clone());
                }
                next = next.min(e.last_sent_ms.saturating_add(resend_ms));
            }
        }
        if !out.is_empty() {
            self.next_due_ms = next;
        }
        out
    }

    /// The updates whose last send is at least `resend_ms` old, in send order, at most `limit`
    /// of them, each marked sent at `now_ms`. Scans only when one can be due.
    pub(crate) fn due(&mut self, now_ms: u64, resend_ms: u64, limit: usize) -> Vec<TaskStatus> {
        if now_ms < self.next_due_ms {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut next = u64::MAX;
        for id in self.order.values() {
            let Some(e) = self.by_id.get_mut(id) else {
                continue;
            };
            if out.len() < limit && now_ms.saturating_sub(e.last_sent_ms) >= resend_ms {
                e.last_sent_ms = now_ms;
                out.push(e.status.clone());
            }
            next = next.min(e.last_sent_ms.saturating_add(resend_ms));
        }
        self.next_due_ms = next;
        out
    }

    /// The pending updates in send order.
    #[cfg(test)]
    pub(crate) fn statuses(&self) -> Vec<&TaskStatus> {
        self.order
            .values()
            .filter_map(|id| self.by_id.get(id).map(|e| &e.status))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::{AgentId, FrameworkId, TaskState};

    fn status(task: &str, state: TaskState) -> TaskStatus {
        TaskStatus {
            task_id: TaskId::new(task).expect("valid id"),
            framework_id: FrameworkId::new(),
            agent_id: AgentId::new(),
            state,
            message: None,
            exit_code: None,
            update_id: UpdateId::new(),
            timestamp: protocol::now(),
            resources: None,
            reason: None,
            usage: None,
            gpu_devices: None,
            healthy: None,
        }
    }

    #[test]
    fn a_task_s_newer_update_supersedes_its_pending_one_and_order_is_kept() {
        let mut p = PendingUpdates::default();
        let a = status("t1", TaskState::Starting);
        let b = status("t1", TaskState::Running);
        let c = status("t2", TaskState::Running);
        p.record(a.clone(), 0, 10);
        p.record(c.clone(), 1, 10);
        p.record(b.clone(), 2, 10);
        assert_eq!(p.len(), 2, "t1's starting is superseded by its running");
        assert!(!p.contains(&a.update_id));
        assert_eq!(p.statuses(), vec![&c, &b]);
        assert_eq!(p.remove(&a.update_id), None, "a superseded update is gone");
        assert!(p.has_task(&a.task_id), "t1 still has its running update");
        assert_eq!(p.remove(&b.update_id), Some(b.task_id.clone()));
        assert!(!p.has_task(&a.task_id));
        assert_eq!(p.remove(&b.update_id), None, "removing twice is a no-op");
        assert!(p.contains(&c.update_id));
        assert_eq!(p.statuses(), vec![&c]);
    }

    #[test]
    fn resends_only_what_is_due_in_order() {
        let mut p = PendingUpdates::default();
        let a = status("t1", TaskState::Running);
        let b = status("t2", TaskState::Running);
        p.record(a.clone(), 0, 10);
        p.record(b.clone(), 5, 10);
        assert!(p.due(9, 10, 100).is_empty());
        assert_eq!(p.due(10, 10, 100), vec![a.clone()]);
        // `a` was re-sent at 10; `b` is due at 15, then `a` again at 20.
        assert!(p.due(14, 10, 100).is_empty());
        assert_eq!(p.due(15, 10, 100), vec![b.clone()]);
        assert_eq!(p.due(25, 10, 100), vec![a.clone(), b.clone()]);
        assert_eq!(p.replay(26, 10, 100), vec![a.clone(), b.clone()]);
        assert!(p.due(35, 10, 100).is_empty(), "replay counts as a send");
        // Bounded: at most `limit` per call; the rest stay due, in order.
        assert_eq!(p.replay(40, 10, 1), vec![a.clone()]);
        assert_eq!(p.due(40, 10, 1), vec![b.clone()]);
        assert!(p.due(41, 10, 1).is_empty());
        assert_eq!(p.due(50, 10, 1), vec![a]);
        assert_eq!(p.due(50, 10, 1), vec![b]);
    }

    #[test]
    fn recording_the_same_update_again_replaces_it() {
        let mut p = PendingUpdates::default();
        let a = status("t1", TaskState::Running);
        p.record(a.clone(), 0, 10);
        p.record(a.clone(), 3, 10);
        assert_eq!(p.len(), 1);
        assert_eq!(p.remove(&a.update_id), Some(a.task_id.clone()));
        assert!(!p.has_task(&a.task_id));
        assert!(p.is_empty());
    }
}
