//! The book rebuilt from the store after a restart: jobs in submission order, each followed by
//! its attempts.

use protocol::TaskState;

use super::base::Book;
use super::records::JobState;
use super::records::{task_id, AttemptRecord, JobRecord, Running};
use crate::clock::Millis;
use crate::spec::{JobSpec, Kind};

impl Book {
    /// Brings back one stored job with its attempts (on restart). Jobs come in submission
    /// order (`record.seq`), so a job's dependencies are back before it; `spec` is
    /// `record.spec` checked again, with its owner.
    pub fn restore(
        &mut self,
        spec: JobSpec,
        record: &JobRecord,
        attempts: &[AttemptRecord],
        now: Millis,
    ) {
        let name = spec.name.clone();
        self.restore_job(spec, record.seq, record.submitted_ms, record.stopped, now);
        self.restore_generation(&name, record.generation);
        for attempt in attempts {
            self.restore_attempt(attempt, now);
        }
        // A rebuilt book has changed for no one.
        self.cascaded.clear();
    }

    /// Brings back a stored job (on restart), in submission order, before its attempts
    /// ([`Book::restore_attempt`]); `stopped` when it had been stopped.
    pub(super) fn restore_job(
        &mut self,
        spec: JobSpec,
        seq: u64,
        submitted_ms: Millis,
        stopped: bool,
        now: Millis,
    ) {
        self.insert(spec.clone(), seq, submitted_ms);
        if let Some(job) = self.jobs.get_mut(&spec.name) {
            if stopped {
                job.end(JobState::Stopped, "stopped on request".into(), submitted_ms);
            }
            // Runs missed while the service was down are not made up.
            job.next_run_ms = job
                .spec
                .periodic
                .as_ref()
                .and_then(|p| p.schedule.next_after(now));
        }
        self.cascade(submitted_ms);
    }

    /// Brings back a stored attempt (on restart). An attempt that had not ended is running
    /// again as far as the book knows; the service reconciles it with the coordinator.
    pub(super) fn restore_attempt(&mut self, r: &AttemptRecord, now: Millis) {
        let Some(job) = self.jobs.get_mut(&r.job) else {
            return;
        };
        // A replica being replaced when the service stopped: the next attempt is its successor.
        let replaced = job.spec.kind == Kind::Service
            && job
                .running
                .get(&r.index)
                .is_some_and(|old| old.attempt + 1 == r.attempt);
        if replaced {
            if let Some(mut old) = job.running.remove(&r.index) {
                old.retiring = true;
                job.attempts.insert(r.index, r.attempt);
                job.retiring.insert(r.index, (old, false));
            }
        }
        if r.attempt != job.next_attempt(r.index) {
            return;
        }
        if r.index >= job.spec.count {
            // A replica scaled away: its ids stay used, so a later scale-up starts after them.
            job.attempts.insert(r.index, r.attempt + 1);
            return;
        }
        job.unlaunched.remove(r.index);
        job.retry.remove(&r.index);
        let id = task_id(&r.job, r.index, r.attempt);
        job.running.insert(
            r.index,
            Running {
                index: r.index,
                attempt: r.attempt,
                task_id: id.clone(),
                state: if r.state.is_terminal() {
                    TaskState::Staging
                } else {
                    r.state
                },
                agent_id: r.agent_id,
                launched_ms: r.launched_ms,
                timed_out_ms: r.timed_out_ms,
                generation: r.generation,
                healthy: None,
                retiring: false,
            },
        );
        if r.state.is_terminal() {
            let at = r.ended_ms.unwrap_or(now);
            self.update(&id, r.state, r.exit_code, r.message.clone(), at);
        }
    }

    /// Sets a restored job's spec generation (on restart, before its attempts).
    pub(super) fn restore_generation(&mut self, name: &str, generation: u32) {
        if let Some(job) = self.jobs.get_mut(name) {
            job.generation = generation;
        }
    }
}
