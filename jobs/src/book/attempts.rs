//! Attempts: launched, never launched, their states and ends, retries with backoff, and time
//! limits.

use protocol::{AgentId, TaskId, TaskState};

use super::base::{Book, MAX_LOST};
use super::job::Job;
use super::job::{backoff, blameless};
use super::records::JobState;
use super::records::{parse_task_id, task_id, AttemptRecord, Candidate, Failure, Running};
use super::services::restart_replica;
use crate::clock::Millis;
use crate::spec::Kind;

impl Book {
    /// Records that `c` was launched on `agent`: its record, to store before the launch is
    /// sent. `None` when `c` is not launchable any more (it was not from
    /// [`Book::candidates`], or the job changed since).
    pub(super) fn launched(
        &mut self,
        c: &Candidate,
        agent: AgentId,
        now: Millis,
    ) -> Option<AttemptRecord> {
        let job = self.jobs.get_mut(&c.job)?;
        if job.state != JobState::Active
            || job.room() == 0
            || c.attempt != job.next_attempt(c.index)
            || job.running.contains_key(&c.index)
        {
            return None;
        }
        let from_retry = job.retry.get(&c.index).is_some_and(|due| *due <= now);
        if from_retry {
            job.retry.remove(&c.index);
        } else if !job.unlaunched.remove(c.index) {
            return None;
        }
        let run = Running {
            index: c.index,
            attempt: c.attempt,
            task_id: task_id(&c.job, c.index, c.attempt),
            state: TaskState::Staging,
            agent_id: Some(agent),
            launched_ms: now,
            timed_out_ms: None,
            generation: job.generation,
            healthy: None,
            retiring: false,
        };
        let record = run.record(&c.job, TaskState::Staging, None, None);
        job.running.insert(c.index, run);
        Some(record)
    }

    /// A launch that never happened (the coordinator refused it, or does not know it after a
    /// restart): the attempt is recorded as lost, and the index runs again.
    pub(super) fn not_launched(
        &mut self,
        id: &TaskId,
        why: &str,
        now: Millis,
    ) -> Option<AttemptRecord> {
        self.update(id, TaskState::Lost, None, Some(why.to_owned()), now)
    }

    /// A task's new state. Returns the attempt's record to store, or `None` when the update
    /// is about no attempt the book is waiting on (a repeat, or a deleted job's task).
    pub(super) fn update(
        &mut self,
        id: &TaskId,
        state: TaskState,
        exit_code: Option<i32>,
        message: Option<String>,
        now: Millis,
    ) -> Option<AttemptRecord> {
        let (name, index, attempt) = parse_task_id(id.as_str())?;
        let job = self.jobs.get_mut(name)?;
        if job
            .retiring
            .get(&index)
            .is_some_and(|(r, _)| r.attempt == attempt)
        {
            return retired(job, index, state, exit_code, message, now);
        }
        let run = job.running.get_mut(&index)?;
        if run.attempt != attempt {
            return None;
        }
        let mut record = run.record(name, state, exit_code, message.clone());
        if !state.is_terminal() {
            if run.state == state {
                return None;
            }
            run.state = state;
            return Some(record);
        }
        record.ended_ms = Some(now);
        let timed_out = run.timed_out_ms;
        let ran_ms = now.saturating_sub(run.launched_ms);
        job.running.remove(&index);
        job.attempts.insert(index, attempt + 1);
        if job.spec.kind == Kind::Service {
            restart_replica(
                job,
                index,
                attempt,
                ran_ms,
                (state, exit_code, message),
                now,
            );
            return Some(record);
        }
        if state == TaskState::Finished {
            job.succeeded.insert(index);
            let size = job.size(index);
            job.learned = (job.learned.0.saturating_add(ran_ms), job.learned.1 + size);
        } else {
            let message = match (timed_out, &job.spec.timeout_ms) {
                (Some(_), Some(limit)) => {
                    Some(format!("timed out after {} s", *limit as f64 / 1000.0))
                }
                _ => message,
            };
            record.message.clone_from(&message);
            let counted = timed_out.is_some() || !blameless(state, message.as_deref());
            let history = job.failures.entry(index).or_default();
            history.push(Failure {
                index,
                attempt,
                state,
                exit_code,
                message,
                counted,
                ran_ms,
                ended_ms: now,
            });
            let used = history.iter().filter(|f| f.counted).count();
            let lost = history.len() - used;
            if job.state != JobState::Active {
                // Stopped or failed meanwhile: nothing runs again.
            } else if used > job.spec.max_retries as usize || lost >= MAX_LOST {
                job.failed.insert(index);
            } else {
                let delay = if counted { backoff(&job.spec, used) } else { 0 };
                job.retry.insert(index, now.saturating_add(delay));
            }
        }
        if job.settle(now) {
            self.cascade(now);
        }
        Some(record)
    }

    /// Attempts past their `timeout_s` that were not killed yet: marks them and returns their
    /// records (to store) — the service kills each.
    pub(super) fn timeouts(&mut self, now: Millis) -> Vec<AttemptRecord> {
        let mut out = Vec::new();
        for job in self.jobs.values_mut() {
            let Some(limit) = job.spec.timeout_ms else {
                continue;
            };
            for run in job.running.values_mut() {
                if run.timed_out_ms.is_none() && now.saturating_sub(run.launched_ms) >= limit {
                    run.timed_out_ms = Some(now);
                    out.push(run.record(&job.spec.name, run.state, None, None));
                }
            }
        }
        out
    }

    /// The running tasks of jobs that were stopped (their kills may not have ended them yet).
    pub fn stopped_running(&self) -> Vec<TaskId> {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Stopped)
            .flat_map(Job::alive)
            .collect()
    }

    /// Whether `id` is an attempt the book is waiting on: the one its index runs now, or a
    /// replica a rolling update is replacing.
    pub fn is_current(&self, id: &TaskId) -> bool {
        parse_task_id(id.as_str()).is_some_and(|(name, index, attempt)| {
            self.jobs.get(name).is_some_and(|j| {
                j.running.get(&index).is_some_and(|r| r.attempt == attempt)
                    || j.retiring
                        .get(&index)
                        .is_some_and(|(r, _)| r.attempt == attempt)
            })
        })
    }

    /// Every attempt that is launched and has not ended, for reconciliation.
    pub fn in_flight(&self) -> Vec<TaskId> {
        self.jobs.values().flat_map(Job::alive).collect()
    }
}

/// A retiring replica's new state: recorded, and once it ended, forgotten (its successor
/// runs under its index).
pub(super) fn retired(
    job: &mut Job,
    index: u32,
    state: TaskState,
    exit_code: Option<i32>,
    message: Option<String>,
    now: Millis,
) -> Option<AttemptRecord> {
    let (run, _) = job.retiring.get_mut(&index)?;
    let mut record = run.record(&job.spec.name, state, exit_code, message);
    if !state.is_terminal() {
        if run.state == state {
            return None;
        }
        run.state = state;
        return Some(record);
    }
    let (run, _) = job.retiring.remove(&index)?;
    record.ended_ms = Some(now);
    job.replica_ended(Failure {
        index,
        attempt: run.attempt,
        state,
        exit_code,
        message: Some("replaced by a rolling update".into()),
        counted: false,
        ran_ms: now.saturating_sub(run.launched_ms),
        ended_ms: now,
    });
    Some(record)
}
