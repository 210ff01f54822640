//! The books: one function records every state change (journal, then queue); acknowledgements,
//! forgetting old tasks, journal compaction.

use super::*;

impl Engine {
    /// Records a state change of a task that has not ended: journal, then queue. A task that
    /// ended does not change again.
    pub(super) fn record(
        &mut self,
        key: &TaskKey,
        end: (TaskState, Option<String>, Option<i32>),
        now: Now,
        out: &mut Vec<Command>,
    ) {
        self.record_end(key, end, (None, None), now, out);
    }

    /// Records a change of a running task's health: a `running` update carrying
    /// `healthy`, journaled and sent like every other. Nothing for a task that is not running
    /// or whose health is already this.
    pub fn health_changed(
        &mut self,
        key: &TaskKey,
        healthy: bool,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        let Some(t) = self.tasks.get(key) else {
            return;
        };
        if t.latest.state != TaskState::Running || t.latest.healthy == Some(healthy) {
            return;
        }
        let end = (TaskState::Running, None, None);
        self.record_full(key, end, (None, None), Some(healthy), now, out);
    }

    /// [`Self::record`] with the status's `reason` and `usage` (a measured end).
    pub(super) fn record_end(
        &mut self,
        key: &TaskKey,
        end: (TaskState, Option<String>, Option<i32>),
        extras: (Option<String>, Option<protocol::TaskUsage>),
        now: Now,
        out: &mut Vec<Command>,
    ) {
        self.record_full(key, end, extras, None, now, out);
    }

    /// [`Self::record_end`] with a new health (`None`: the task's latest carries over).
    fn record_full(
        &mut self,
        key: &TaskKey,
        (state, message, exit_code): (TaskState, Option<String>, Option<i32>),
        (reason, usage): (Option<String>, Option<protocol::TaskUsage>),
        health: Option<bool>,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        let agent_id = self.session.stamp();
        let Some(t) = self.tasks.get(key) else {
            return;
        };
        let task_id = &key.1;
        if t.latest.state.is_terminal() {
            return;
        }
        let usage = match state.is_terminal() {
            true => t.gpu_samples.into_usage(usage),
            false => usage,
        };
        let gpu_devices = t.latest.gpu_devices.clone();
        let healthy = health.or(t.latest.healthy);
        let reason = reason.or_else(|| {
            (t.fenced && state == TaskState::Killed)
                .then(|| protocol::task::REASON_AGENT_PARTITIONED.to_owned())
        });
        let status = TaskStatus {
            task_id: task_id.clone(),
            framework_id: t.latest.framework_id,
            agent_id,
            state,
            message,
            exit_code,
            update_id: self.config.update_ids.next(),
            timestamp: now.wall,
            resources: Some(t.spec.resources.clone()),
            reason,
            usage,
            gpu_devices,
            healthy,
        };
        if state.is_terminal() {
            self.gpus.release(key);
        }
        if self.config.journaling == Journaling::On {
            let record = Record::Status {
                status: status.clone(),
            };
            self.journal(vec![record], Durability::Synced, out);
            tracing::info!(%task_id, state = %state, "task state changed");
        }
        self.updates.push(status.clone(), now.at);
        self.tasks.set_latest(key, status);
        self.prune();
    }

    pub(super) fn journal(
        &mut self,
        records: Vec<Record>,
        durability: Durability,
        out: &mut Vec<Command>,
    ) {
        if self.config.journaling == Journaling::Off || records.is_empty() {
            return;
        }
        self.journal_lines += records.len();
        out.push(Command::Journal {
            records,
            durability,
        });
    }

    /// The coordinator recorded (or refused for good) these updates: journal the acks, forget
    /// tasks that are done with, compact the journal when it has grown well past what it holds.
    pub(super) fn acknowledged(&mut self, acked: Vec<TaskStatus>, out: &mut Vec<Command>) {
        if self.config.retention == Retention::ForgetWhenAcked {
            for s in &acked {
                let key = (s.framework_id, s.task_id.clone());
                if s.state.is_terminal() && !self.updates.has_task(&key) {
                    self.tasks.remove(&key);
                }
            }
        }
        if self.config.journaling == Journaling::Off {
            return;
        }
        let records = acked
            .iter()
            .map(|s| Record::Acked {
                update_id: s.update_id,
            })
            .collect();
        self.journal(records, Durability::Buffered, out);
        self.prune();
        let live = self.tasks.len() * 3 + self.updates.queue.len();
        if self.journal_lines > 256 + 4 * live {
            let records = self.compacted();
            self.journal_lines = records.len();
            out.push(Command::RewriteJournal { records });
        }
    }

    /// Forgets the oldest terminal, fully acknowledged tasks beyond the retention.
    pub(super) fn prune(&mut self) {
        let Retention::KeepTerminal(keep) = self.config.retention else {
            return;
        };
        let mut excess = self.tasks.terminal().saturating_sub(keep);
        if excess == 0 {
            return;
        }
        let unacked: HashSet<(FrameworkId, &TaskId)> = self
            .updates
            .queue
            .iter()
            .map(|s| (s.framework_id, &s.task_id))
            .collect();
        let mut forget = Vec::new();
        for t in self.tasks.in_order() {
            if excess == 0 {
                break;
            }
            let fw = t.latest.framework_id;
            if t.latest.state.is_terminal() && !unacked.contains(&(fw, &t.spec.task_id)) {
                forget.push(t.key());
                excess -= 1;
            }
        }
        for id in &forget {
            self.tasks.remove(id);
        }
    }

    /// What the journal must still hold: tasks not yet terminal or with updates not yet
    /// acknowledged (their launch, process and updates), and every unacknowledged update.
    pub(super) fn compacted(&self) -> Vec<Record> {
        let mut records: Vec<Record> = self
            .contact
            .partition
            .iter()
            .map(|(fw, t)| Record::Partition {
                framework_id: *fw,
                partition_timeout_s: Some(t.as_secs_f64()),
            })
            .collect();
        for t in self.tasks.in_order() {
            let id = &t.spec.task_id;
            let fw = t.latest.framework_id;
            let pending: Vec<&TaskStatus> = self
                .updates
                .queue
                .iter()
                .filter(|s| s.framework_id == fw && &s.task_id == id)
                .collect();
            if t.latest.state.is_terminal() && pending.is_empty() {
                continue;
            }
            let Some(sandbox) = &t.sandbox else { continue };
            records.push(Record::Launch {
                framework_id: t.latest.framework_id,
                spec: t.spec.clone(),
                sandbox: sandbox.clone(),
            });
            if let Some(p) = t.process() {
                records.push(Record::Started {
                    framework_id: Some(fw),
                    task_id: id.clone(),
                    pid: p.pid,
                    start_time: p.start_time,
                    boot_id: p.boot_id,
                });
            }
            if t.fenced {
                records.push(Record::Fenced {
                    framework_id: fw,
                    task_id: id.clone(),
                });
            }
            if pending.is_empty() {
                records.push(Record::Status {
                    status: t.latest.clone(),
                });
                records.push(Record::Acked {
                    update_id: t.latest.update_id,
                });
            }
            for s in pending {
                records.push(Record::Status { status: s.clone() });
            }
        }
        records
    }

    /// A status carrying the agent's current id.
    pub(super) fn stamped(&self, status: &TaskStatus) -> TaskStatus {
        let mut s = status.clone();
        if let Some(id) = self.session.agent_id {
            s.agent_id = id;
        }
        s
    }
}
