//! What the API shows: a job's summary and full view, and one task's state.

use serde::{Deserialize, Serialize};

use super::base::Book;
use super::job::Job;
use super::records::JobState;
use super::records::{Failure, Running};
use crate::clock::Millis;
use crate::spec::Kind;

impl Book {
    /// What the API shows of one job.
    pub fn view(&self, name: &str) -> Option<JobView> {
        let job = self.jobs.get(name)?;
        Some(JobView {
            summary: summary(job),
            spec: job.spec.raw.clone(),
            running: job
                .running
                .values()
                .chain(job.retiring.values().map(|(r, _)| r))
                .cloned()
                .collect(),
            retrying: job
                .retry
                .iter()
                .map(|(i, due)| Retrying {
                    index: *i,
                    attempt: job.next_attempt(*i),
                    due_ms: *due,
                })
                .collect(),
            failures: job.failures.values().flatten().cloned().collect(),
            failed_indexes: job.failed.iter().copied().collect(),
            succeeded: job.succeeded.spans().to_vec(),
        })
    }

    /// What the API lists of one job.
    pub fn summary(&self, name: &str) -> Option<JobSummary> {
        self.jobs.get(name).map(summary)
    }

    /// What the API lists of every job, in submission order.
    pub fn summaries(&self) -> Vec<JobSummary> {
        let mut out: Vec<JobSummary> = self.jobs.values().map(summary).collect();
        out.sort_by_key(|s| s.seq);
        out
    }

    /// The state of one task of a job, for `GET .../tasks/{index}`.
    pub fn task(&self, name: &str, index: u32) -> Option<TaskView> {
        let job = self.jobs.get(name)?;
        if index >= job.spec.count {
            return None;
        }
        let state = if job.succeeded.contains(index) {
            "succeeded"
        } else if job.failed.contains(&index) {
            "failed"
        } else if job.running.contains_key(&index) {
            "running"
        } else if job.retry.contains_key(&index) {
            "retrying"
        } else if job.unlaunched.contains(index) && !job.state.is_done() {
            "queued"
        } else {
            "not_run"
        };
        Some(TaskView {
            index,
            state: state.to_owned(),
            attempts: job.next_attempt(index) + u32::from(job.running.contains_key(&index)),
            running: job.running.get(&index).cloned(),
            failures: job.failures.get(&index).cloned().unwrap_or_default(),
        })
    }
}

pub(super) fn summary(job: &Job) -> JobSummary {
    JobSummary {
        name: job.spec.name.clone(),
        kind: job.spec.kind,
        next_run_ms: job.next_run_ms.filter(|_| job.state == JobState::Active),
        seq: job.seq,
        generation: job.generation,
        outdated: job.outdated() as u32,
        state: job.state,
        reason: job.reason.clone(),
        priority: job.spec.priority,
        owner: job.spec.owner.clone(),
        submitted_ms: job.submitted_ms,
        ended_ms: job.ended_ms,
        tasks: TaskCounts {
            total: job.spec.count,
            queued: job.unlaunched.len() as u32,
            retrying: job.retry.len() as u32,
            running: (job.running.len() + job.retiring.len()) as u32,
            succeeded: job.succeeded.len() as u32,
            failed: job.failed.len() as u32,
        },
    }
}

pub(super) fn anonymous() -> String {
    crate::spec::ANONYMOUS.to_owned()
}

/// A job in a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    /// Its name.
    pub name: String,
    /// Batch, service or periodic.
    pub kind: Kind,
    /// A periodic job's next run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_ms: Option<Millis>,
    /// Its submission order.
    pub seq: u64,
    /// Its spec's generation: 0 as submitted, one more with each update that changed what a
    /// service's replicas run.
    #[serde(default)]
    pub generation: u32,
    /// A service's replicas still on an older generation (a rolling update is under way
    /// while this is above 0).
    #[serde(default)]
    pub outdated: u32,
    /// Its state.
    pub state: JobState,
    /// Why it failed or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its priority as submitted.
    pub priority: i64,
    /// Who submitted it (the jobs API's user; `anonymous` without a users file).
    #[serde(default = "anonymous")]
    pub owner: String,
    /// When it was submitted.
    pub submitted_ms: Millis,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<Millis>,
    /// Its tasks, counted by state.
    pub tasks: TaskCounts,
}

/// A job's tasks counted by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCounts {
    /// The array's size.
    pub total: u32,
    /// Not launched yet.
    pub queued: u32,
    /// Waiting out a retry delay.
    pub retrying: u32,
    /// Launched and not ended.
    pub running: u32,
    /// Succeeded.
    pub succeeded: u32,
    /// Failed for good.
    pub failed: u32,
}

/// One index waiting out its retry delay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrying {
    /// The index.
    pub index: u32,
    /// The attempt it will be.
    pub attempt: u32,
    /// When it may launch.
    pub due_ms: Millis,
}

/// Everything the API shows of one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView {
    /// The list entry.
    #[serde(flatten)]
    pub summary: JobSummary,
    /// The spec as submitted.
    pub spec: crate::spec::RawSpec,
    /// Attempts running now.
    pub running: Vec<Running>,
    /// Indexes waiting to be tried again.
    pub retrying: Vec<Retrying>,
    /// Every attempt that ended without success, with its exit code and reason.
    pub failures: Vec<Failure>,
    /// Indexes that failed for good.
    pub failed_indexes: Vec<u32>,
    /// Indexes that succeeded, as `[start, end)` ranges.
    pub succeeded: Vec<(u32, u32)>,
}

/// One task of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskView {
    /// The index.
    pub index: u32,
    /// `queued`, `running`, `retrying`, `succeeded`, `failed` or `not_run`.
    pub state: String,
    /// How many attempts it has had.
    pub attempts: u32,
    /// Its running attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<Running>,
    /// Its failed attempts.
    pub failures: Vec<Failure>,
}
