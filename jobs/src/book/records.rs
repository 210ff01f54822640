//! The book's records: what it keeps of attempts ([`Running`], [`Failure`]), what it hands
//! the store ([`AttemptRecord`], [`JobRecord`]), what it offers to launch ([`Candidate`]), and
//! the small types the service configures it with ([`QueueOrder`], [`UserLimits`]).

use std::collections::BTreeMap;

use protocol::{AgentId, TaskId, TaskState};
use serde::{Deserialize, Serialize};

use crate::clock::Millis;
use crate::spec::{JobSpec, RawSpec};

/// How the queue orders jobs of the same (aged) priority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueOrder {
    /// First submitted, first served: a job's tasks all go before the next job's.
    #[default]
    Fifo,
    /// Fair: each next task goes to the job running the fewest, so a small job submitted
    /// after a huge array starts at once (as Hadoop's Fair Scheduler shares a queue).
    Fair,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for the jobs it depends on to succeed.
    Waiting,
    /// Its tasks are queued or running.
    Active,
    /// Every index succeeded.
    Succeeded,
    /// Some index failed for good, or a dependency failed.
    Failed,
    /// Stopped on request.
    Stopped,
}

impl JobState {
    /// True once the job will do nothing more.
    pub fn is_done(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Stopped)
    }
}

/// The task id of one attempt: `job-<name>-<index>-<attempt>`.
pub fn task_id(job: &str, index: u32, attempt: u32) -> TaskId {
    // Job names are checked (`spec::check_name`) to be lowercase letters, digits and dashes,
    // so the id is always valid; the fallback is never taken.
    TaskId::new(format!("job-{job}-{index}-{attempt}"))
        .unwrap_or_else(|_| TaskId::new("job-invalid").unwrap_or_else(|e| panic!("{e}")))
}

/// Splits a task id made by [`task_id`] into job, index and attempt.
pub fn parse_task_id(id: &str) -> Option<(&str, u32, u32)> {
    let rest = id.strip_prefix("job-")?;
    let (rest, attempt) = rest.rsplit_once('-')?;
    let (job, index) = rest.rsplit_once('-')?;
    Some((job, index.parse().ok()?, attempt.parse().ok()?))
}

/// One attempt that has been launched and not ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Running {
    /// The index.
    pub index: u32,
    /// Which attempt (0 first).
    pub attempt: u32,
    /// Its task id.
    pub task_id: TaskId,
    /// Its last known state (`staging` until the agent says more).
    pub state: TaskState,
    /// Where it was launched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    /// When it was launched.
    pub launched_ms: Millis,
    /// When it was killed for running past its `timeout_s`, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out_ms: Option<Millis>,
    /// The spec generation it was launched with (a service's rolling update replaces the
    /// replicas of older generations).
    pub generation: u32,
    /// Its health check's latest verdict, for a replica with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// True for a replica a rolling update is replacing: it serves until its successor runs,
    /// then it is killed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub retiring: bool,
}

impl Running {
    /// What the store keeps of this attempt of job `job`, in `state` (not ended).
    pub fn record(
        &self,
        job: &str,
        state: TaskState,
        exit_code: Option<i32>,
        message: Option<String>,
    ) -> AttemptRecord {
        AttemptRecord {
            job: job.to_owned(),
            index: self.index,
            attempt: self.attempt,
            state,
            exit_code,
            message,
            agent_id: self.agent_id,
            launched_ms: self.launched_ms,
            ended_ms: None,
            timed_out_ms: self.timed_out_ms,
            generation: self.generation,
        }
    }
}

/// One attempt that ended without success.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// The index.
    pub index: u32,
    /// Which attempt.
    pub attempt: u32,
    /// How it ended.
    pub state: TaskState,
    /// Its exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why, as the agent (or this service) said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Whether it used up one of `max_retries` (lost and preempted tasks do not).
    pub counted: bool,
    /// How long it ran, from launch to end.
    pub ran_ms: Millis,
    /// When it ended.
    pub ended_ms: Millis,
}

/// What the store keeps of one attempt, written at launch and again when it changes state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The job.
    pub job: String,
    /// The index.
    pub index: u32,
    /// The attempt.
    pub attempt: u32,
    /// The last known state.
    pub state: TaskState,
    /// Its exit code, once it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    /// When it was launched.
    pub launched_ms: Millis,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<Millis>,
    /// When the service killed it for running past its time limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out_ms: Option<Millis>,
    /// The spec generation it was launched with.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
}

pub(super) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One task the book would launch next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The job.
    pub job: String,
    /// The index.
    pub index: u32,
    /// The attempt it would be.
    pub attempt: u32,
}

/// The most tasks each user's jobs may run at once, over all of them (the Capacity
/// Scheduler's per-user limit): a user's own `max_running`, else the default; `None`, no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserLimits {
    /// Users with a limit of their own.
    pub per_user: BTreeMap<String, u32>,
    /// The limit of every other user (the anonymous one included).
    pub default: Option<u32>,
}

impl UserLimits {
    /// The limit of `user`.
    pub fn of(&self, user: &str) -> Option<u32> {
        self.per_user.get(user).copied().or(self.default)
    }

    /// These limits with `default` for every other user.
    pub fn with_default(self, default: Option<u32>) -> Self {
        Self { default, ..self }
    }
}

/// What is stored of a job besides its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its submission order.
    pub seq: u64,
    /// When it was submitted.
    pub submitted_ms: Millis,
    /// Whether it was stopped.
    #[serde(default)]
    pub stopped: bool,
    /// The spec as submitted, or as last updated.
    pub spec: RawSpec,
    /// The spec's generation (one more with each update that changed what replicas run).
    #[serde(default)]
    pub generation: u32,
    /// Who submitted it (absent in stores written before users existed: [`ANONYMOUS`](crate::spec::ANONYMOUS)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl JobRecord {
    /// What to store of a job submitted now as the `seq`th.
    pub fn new(spec: &JobSpec, seq: u64, submitted_ms: Millis) -> Self {
        Self {
            seq,
            submitted_ms,
            stopped: false,
            spec: spec.raw.clone(),
            generation: 0,
            owner: Some(spec.owner.clone()),
        }
    }
}
