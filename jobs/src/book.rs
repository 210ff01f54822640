//! [`Book`]: the pure state of every job — the queue, each array's indexes, every attempt —
//! with no I/O and no clock (the time is passed in, in milliseconds since the Unix epoch).
//!
//! An array is kept as ranges: the indexes not yet launched and those that succeeded are
//! [`Ranges`]; only indexes running, waiting for a retry, or with a failed attempt have records
//! of their own. Task ids are derived from the job, the index and the attempt
//! ([`task_id`]), so an attempt is never launched twice under two names, and a restarted
//! service recognises the tasks it launched before.
//!
//! The service (`scheduler`, `api`) asks the book what to launch ([`Book::candidates`]), tells
//! it what was launched ([`Book::launched`]) and what happened ([`Book::update`]), and gets
//! back [`AttemptRecord`]s to store.

use std::collections::{BTreeMap, BTreeSet};

use protocol::{AgentId, Resources, TaskId, TaskState};
use serde::{Deserialize, Serialize};

use crate::ranges::Ranges;
use crate::schedule::Concurrency;
use crate::spec::{JobSpec, Kind};

pub use crate::clock::Millis;

/// How long a queued job waits to gain one point of priority (aging), by default.
pub const DEFAULT_AGING_MS: Millis = 60_000;

/// Lost attempts (agent gone, task preempted) do not use up retries, but an index lost this
/// many times fails, so a task that kills its agent cannot loop forever.
pub const MAX_LOST: usize = 10;

/// A service replica that ran this long before it ended was healthy: its next restart waits
/// only the first backoff again.
pub const STABLE_MS: Millis = 10_000;

/// The most ended attempts a service keeps per replica (it may restart forever).
pub const SERVICE_HISTORY: usize = 10;

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

/// Why the book refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BookError {
    /// Only a service can be scaled.
    #[error("job {0:?} is not a service; only services have replicas to scale")]
    NotService(String),
    /// A job of that name exists.
    #[error("a job named {0:?} exists; delete it first or choose another name")]
    Exists(String),
    /// No job of that name.
    #[error("no job named {0:?}")]
    NotFound(String),
    /// `depends_on` names a job the service does not know.
    #[error("{field}: no job named {name:?} (a job may only depend on jobs already submitted)")]
    UnknownDependency {
        /// The field, `depends_on[i]`.
        field: String,
        /// The name.
        name: String,
    },
    /// An update tries to change what cannot change.
    #[error("{field}: {why}")]
    Unchangeable {
        /// The field.
        field: String,
        /// Why it cannot change.
        why: String,
    },
    /// `depends_on` would close a cycle.
    #[error("{field}: depending on {name:?} makes a cycle")]
    Cycle {
        /// The field, `depends_on[i]`.
        field: String,
        /// The name.
        name: String,
    },
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

fn is_zero(n: &u32) -> bool {
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

/// One job and its tasks.
#[derive(Debug, Clone)]
pub struct Job {
    spec: JobSpec,
    seq: u64,
    submitted_ms: Millis,
    /// When it last became active (aging counts from here).
    active_since_ms: Millis,
    state: JobState,
    reason: Option<String>,
    ended_ms: Option<Millis>,
    unlaunched: Ranges,
    /// Indexes waiting out a retry delay, and when it ends.
    retry: BTreeMap<u32, Millis>,
    running: BTreeMap<u32, Running>,
    succeeded: Ranges,
    /// Indexes that failed for good.
    failed: BTreeSet<u32>,
    /// Every failed attempt, by index (a service's last few ends).
    failures: BTreeMap<u32, Vec<Failure>>,
    /// The next attempt of each index that has had one.
    attempts: BTreeMap<u32, u32>,
    /// A periodic job's next run.
    next_run_ms: Option<Millis>,
    /// How long its succeeded tasks ran, in all, and their sizes, in all (1 each without
    /// `sizes`): the estimate of the next task's length.
    learned: (Millis, f64),
    /// A service's replicas killed to be restarted, and why: their end costs no backoff.
    restarting: BTreeMap<u32, &'static str>,
    /// The spec's generation: 0 at submission, one more with each update that changes what
    /// a replica runs.
    generation: u32,
    /// A service's replicas being replaced by a rolling update (by index): they serve until
    /// their successor, which runs under the same index, is up; `true` once killed.
    retiring: BTreeMap<u32, (Running, bool)>,
    /// A service's replicas killed because their health check failed.
    unhealthy: BTreeSet<u32>,
}

impl Job {
    fn new(spec: JobSpec, seq: u64, now: Millis) -> Self {
        // A periodic job runs no task itself: each run is a batch job of its own.
        let unlaunched = match spec.kind {
            Kind::Periodic => Ranges::new(),
            Kind::Batch | Kind::Service => Ranges::full(spec.count),
        };
        Self {
            unlaunched,
            spec,
            seq,
            submitted_ms: now,
            active_since_ms: now,
            state: JobState::Waiting,
            reason: None,
            ended_ms: None,
            retry: BTreeMap::new(),
            running: BTreeMap::new(),
            succeeded: Ranges::new(),
            failed: BTreeSet::new(),
            failures: BTreeMap::new(),
            attempts: BTreeMap::new(),
            next_run_ms: None,
            learned: (0, 0.0),
            restarting: BTreeMap::new(),
            unhealthy: BTreeSet::new(),
            generation: 0,
            retiring: BTreeMap::new(),
        }
    }

    /// Its spec's generation (see [`Book::update_service`]).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Whether `r` serves now: running, not being killed, and healthy when it has a check.
    fn available(&self, r: &Running) -> bool {
        r.state == TaskState::Running
            && !self.restarting.contains_key(&r.index)
            && !self.unhealthy.contains(&r.index)
            && (self.spec.health_check.is_none() || r.healthy == Some(true))
    }

    /// How many replicas serve now, retiring ones included.
    fn available_count(&self) -> usize {
        let current = self.running.values().filter(|r| self.available(r)).count();
        let retiring = self
            .retiring
            .values()
            .filter(|(r, killed)| !killed && r.state == TaskState::Running)
            .filter(|(r, _)| self.spec.health_check.is_none() || r.healthy == Some(true))
            .count();
        current + retiring
    }

    /// Every attempt launched and not ended: running, and retiring replicas.
    fn alive(&self) -> Vec<TaskId> {
        self.running
            .values()
            .chain(self.retiring.values().map(|(r, _)| r))
            .map(|r| r.task_id.clone())
            .collect()
    }

    /// One step of a service's rolling update: replaces replicas of older generations as far
    /// as `max_surge` and `max_unavailable` allow, and kills retiring replicas whose
    /// successor serves (or that the unavailability budget can spare). Returns what to kill.
    fn roll(&mut self) -> Vec<TaskId> {
        let mut kill = Vec::new();
        if self.spec.kind != Kind::Service || self.state != JobState::Active {
            return kill;
        }
        let floor = (self.spec.count as usize).saturating_sub(self.spec.max_unavailable as usize);
        let mut available = self.available_count();
        // First the retiring replicas: one whose successor serves goes, as far as the budget
        // allows (it serves too until it is killed); one that does not serve goes at once.
        let retiring: Vec<u32> = self
            .retiring
            .iter()
            .filter(|(_, (_, killed))| !killed)
            .map(|(i, _)| *i)
            .collect();
        for index in retiring {
            // Its successor is newer, if not the newest (an update came during the roll).
            let successor_up = self.running.get(&index).is_some_and(|r| self.available(r));
            let Some((old, _)) = self.retiring.get(&index) else {
                continue;
            };
            let serving = old.state == TaskState::Running
                && (self.spec.health_check.is_none() || old.healthy == Some(true));
            if !serving || (successor_up && available > floor) {
                kill.push(old.task_id.clone());
                available -= usize::from(serving);
                if let Some((_, killed)) = self.retiring.get_mut(&index) {
                    *killed = true;
                }
            }
        }
        // Then the replicas of older generations.
        let outdated: Vec<u32> = self
            .running
            .values()
            .filter(|r| r.generation < self.generation)
            .filter(|r| {
                !self.restarting.contains_key(&r.index) && !self.unhealthy.contains(&r.index)
            })
            .filter(|r| !self.retiring.contains_key(&r.index))
            .map(|r| r.index)
            .collect();
        for index in outdated {
            let Some(r) = self.running.get(&index) else {
                continue;
            };
            let serving = self.available(r);
            if self.retiring.len() < self.spec.max_surge as usize {
                // Surge: the successor starts under the same index while this one serves.
                if let Some(mut old) = self.running.remove(&index) {
                    old.retiring = true;
                    self.attempts.insert(index, old.attempt + 1);
                    self.retiring.insert(index, (old, false));
                    self.unlaunched.insert(index);
                }
            } else if !serving || available > floor {
                // Unavailable: killed first; it starts again on the new spec when it ends.
                self.restarting
                    .insert(index, "replaced by a rolling update");
                kill.push(r.task_id.clone());
                available -= usize::from(serving);
            } else {
                break;
            }
        }
        kill
    }

    /// Replicas still on an older spec: retiring, or running an older generation.
    fn outdated(&self) -> usize {
        self.retiring.len()
            + self
                .running
                .values()
                .filter(|r| r.generation < self.generation)
                .count()
    }

    /// The job's spec.
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    /// Its state.
    pub fn state(&self) -> JobState {
        self.state
    }

    /// Its submission order.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// When it was submitted.
    pub fn submitted_ms(&self) -> Millis {
        self.submitted_ms
    }

    /// How long task `index` of this job is expected to run, in seconds: the average of its
    /// succeeded tasks so far, weighted by their declared `sizes` where given (time per unit
    /// of size, times this index's size); before any has succeeded, its `timeout_s` (or 60 s),
    /// scaled by this index's size over the mean size. Tetris' remaining work term uses it,
    /// so short tasks finish first.
    pub fn estimated_task_s(&self, index: u32) -> f64 {
        self.estimator().task_s(index)
    }

    /// [`Job::estimated_task_s`] for any index, owned (it holds no borrow of the book).
    pub fn estimator(&self) -> Estimator {
        let sizes = self.spec.sizes.clone();
        let per_size_s = match self.learned {
            (total, sizes) if sizes > 0.0 => total as f64 / sizes / 1000.0,
            _ => {
                let base = self.spec.timeout_ms.map_or(60.0, |t| t as f64 / 1000.0);
                match &sizes {
                    Some(all) if !all.is_empty() => {
                        base * all.len() as f64 / all.iter().sum::<f64>()
                    }
                    _ => base,
                }
            }
        };
        Estimator { per_size_s, sizes }
    }

    /// Index `index`'s declared size (1 without `sizes`).
    fn size(&self, index: u32) -> f64 {
        size_of(self.spec.sizes.as_deref(), index)
    }

    /// The attempts running now.
    pub fn running(&self) -> impl Iterator<Item = &Running> {
        self.running.values()
    }

    fn next_attempt(&self, index: u32) -> u32 {
        self.attempts.get(&index).copied().unwrap_or(0)
    }

    /// How many more tasks it may run now.
    fn room(&self) -> usize {
        match self.spec.max_running {
            Some(max) => (max as usize).saturating_sub(self.running.len()),
            None => usize::MAX,
        }
    }

    fn due_retries(&self, now: Millis) -> usize {
        self.retry.values().filter(|due| **due <= now).count()
    }

    fn pending(&self, now: Millis) -> usize {
        if self.state != JobState::Active {
            return 0;
        }
        let want = (self.unlaunched.len() as usize).saturating_add(self.due_retries(now));
        want.min(self.room())
    }

    fn effective_priority(&self, now: Millis, aging_ms: Millis) -> i64 {
        let waited = now.saturating_sub(self.active_since_ms) / aging_ms.max(1);
        self.spec.priority.saturating_add(waited as i64)
    }

    /// Ends the job if nothing is left to run; true when it ended now.
    fn settle(&mut self, now: Millis) -> bool {
        if self.spec.kind != Kind::Batch
            || self.state != JobState::Active
            || !self.unlaunched.is_empty()
            || !self.retry.is_empty()
            || !self.running.is_empty()
        {
            return false;
        }
        if self.failed.is_empty() {
            self.state = JobState::Succeeded;
        } else {
            self.state = JobState::Failed;
            let first = self.failed.iter().next().copied().unwrap_or_default();
            let why = self
                .failures
                .get(&first)
                .and_then(|f| f.last())
                .map(describe)
                .unwrap_or_default();
            self.reason = Some(format!(
                "{} of {} tasks failed; index {first}: {why}",
                self.failed.len(),
                self.spec.count
            ));
        }
        self.ended_ms = Some(now);
        true
    }

    fn end(&mut self, state: JobState, reason: String, now: Millis) {
        self.state = state;
        self.reason = Some(reason);
        self.ended_ms = Some(now);
        self.unlaunched = Ranges::new();
        self.retry.clear();
    }
}

/// A retiring replica's new state: recorded, and once it ended, forgotten (its successor
/// runs under its index).
fn retired(
    job: &mut Job,
    index: u32,
    state: TaskState,
    exit_code: Option<i32>,
    message: Option<String>,
    now: Millis,
) -> Option<AttemptRecord> {
    let (run, _) = job.retiring.get_mut(&index)?;
    let mut record = AttemptRecord {
        job: job.spec.name.clone(),
        index,
        attempt: run.attempt,
        state,
        exit_code,
        message,
        agent_id: run.agent_id,
        launched_ms: run.launched_ms,
        ended_ms: None,
        timed_out_ms: run.timed_out_ms,
        generation: run.generation,
    };
    if !state.is_terminal() {
        if run.state == state {
            return None;
        }
        run.state = state;
        return Some(record);
    }
    let (run, _) = job.retiring.remove(&index)?;
    record.ended_ms = Some(now);
    let history = job.failures.entry(index).or_default();
    history.push(Failure {
        index,
        attempt: run.attempt,
        state,
        exit_code,
        message: Some("replaced by a rolling update".into()),
        counted: false,
        ran_ms: now.saturating_sub(run.launched_ms),
        ended_ms: now,
    });
    if history.len() > SERVICE_HISTORY {
        history.remove(0);
    }
    Some(record)
}

/// How an attempt ended, in words.
fn describe(f: &Failure) -> String {
    let mut s = f.state.as_str().to_owned();
    if let Some(code) = f.exit_code {
        s.push_str(&format!(" with exit code {code}"));
    }
    if let Some(m) = &f.message {
        s.push_str(&format!(" ({m})"));
    }
    s
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

/// How long a job's tasks are expected to run ([`Job::estimator`]).
#[derive(Debug, Clone)]
pub struct Estimator {
    /// Seconds per unit of declared size (per task without `sizes`).
    per_size_s: f64,
    sizes: Option<std::sync::Arc<[f64]>>,
}

impl Estimator {
    /// Task `index`'s expected run time, in seconds.
    pub fn task_s(&self, index: u32) -> f64 {
        self.per_size_s * size_of(self.sizes.as_deref(), index)
    }
}

/// Index `index`'s declared size in `sizes` (1 without sizes).
fn size_of(sizes: Option<&[f64]>, index: u32) -> f64 {
    sizes
        .and_then(|s| s.get(index as usize).copied())
        .unwrap_or(1.0)
}

/// Every job the service knows.
#[derive(Debug, Clone)]
pub struct Book {
    jobs: BTreeMap<String, Job>,
    next_seq: u64,
    aging_ms: Millis,
    order: QueueOrder,
    limits: UserLimits,
}

impl Default for Book {
    fn default() -> Self {
        Self::new(DEFAULT_AGING_MS)
    }
}

impl Book {
    /// An empty book; a queued job gains a point of priority every `aging_ms` it waits.
    pub fn new(aging_ms: Millis) -> Self {
        Self {
            jobs: BTreeMap::new(),
            next_seq: 0,
            aging_ms,
            order: QueueOrder::Fifo,
            limits: UserLimits::default(),
        }
    }

    /// Sets how many tasks each user's jobs may run at once.
    pub fn set_user_limits(&mut self, limits: UserLimits) {
        self.limits = limits;
    }

    /// How many more tasks each limited user may start now (users without a limit are
    /// absent).
    fn user_room(&self) -> BTreeMap<&str, usize> {
        let mut room: BTreeMap<&str, usize> = BTreeMap::new();
        for job in self.jobs.values() {
            let owner = job.spec.owner.as_str();
            if let Some(limit) = self.limits.of(owner) {
                let left = room.entry(owner).or_insert(limit as usize);
                *left = left.saturating_sub(job.running.len());
            }
        }
        room
    }

    /// Sets how jobs of the same priority share the queue.
    pub fn set_order(&mut self, order: QueueOrder) {
        self.order = order;
    }

    /// The job named `name`.
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.get(name)
    }

    /// Every job, by name.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    /// The sequence number the next submitted job gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Checks that `spec` could be submitted now, changing nothing.
    pub fn check_submit(&self, spec: &JobSpec) -> Result<(), BookError> {
        if self.jobs.contains_key(&spec.name) {
            return Err(BookError::Exists(spec.name.clone()));
        }
        for (i, dep) in spec.depends_on.iter().enumerate() {
            let field = format!("depends_on[{i}]");
            if !self.jobs.contains_key(dep) {
                return Err(BookError::UnknownDependency {
                    field,
                    name: dep.clone(),
                });
            }
            if self.reaches(dep, &spec.name) {
                return Err(BookError::Cycle {
                    field,
                    name: dep.clone(),
                });
            }
        }
        Ok(())
    }

    /// Whether `from` depends, directly or not, on `to`.
    fn reaches(&self, from: &str, to: &str) -> bool {
        let mut stack = vec![from.to_owned()];
        let mut seen = BTreeSet::new();
        while let Some(name) = stack.pop() {
            if name == to {
                return true;
            }
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(job) = self.jobs.get(&name) {
                stack.extend(job.spec.depends_on.iter().cloned());
            }
        }
        false
    }

    /// Queues a job (after [`Book::check_submit`]'s checks); returns its sequence number.
    pub fn submit(&mut self, spec: JobSpec, now: Millis) -> Result<u64, BookError> {
        self.check_submit(&spec)?;
        let seq = self.next_seq;
        self.insert(spec, seq, now);
        self.cascade(now);
        Ok(seq)
    }

    fn insert(&mut self, spec: JobSpec, seq: u64, now: Millis) {
        self.next_seq = self.next_seq.max(seq + 1);
        let name = spec.name.clone();
        let mut job = Job::new(spec, seq, now);
        job.next_run_ms = job
            .spec
            .periodic
            .as_ref()
            .and_then(|p| p.schedule.next_after(now));
        self.jobs.insert(name, job);
    }

    /// The periodic jobs' runs that are due: for each, the run's spec (to store and submit)
    /// and the runs it replaces (to stop). Runs a policy forbids are skipped; every due job's
    /// next run moves past `now`.
    pub fn due_runs(&mut self, now: Millis) -> Vec<(JobSpec, Vec<String>)> {
        let due: Vec<String> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Active && j.next_run_ms.is_some_and(|t| t <= now))
            .map(|j| j.spec.name.clone())
            .collect();
        let mut out = Vec::new();
        for name in due {
            let prefix = format!("{name}-");
            let running: Vec<String> = self
                .jobs
                .values()
                .filter(|j| !j.state.is_done())
                .filter(|j| {
                    j.spec.name.strip_prefix(&prefix).is_some_and(|rest| {
                        !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
                    })
                })
                .map(|j| j.spec.name.clone())
                .collect();
            let Some(job) = self.jobs.get_mut(&name) else {
                continue;
            };
            let Some(periodic) = job.spec.periodic.clone() else {
                continue;
            };
            job.next_run_ms = periodic.schedule.next_after(now);
            let run_name = format!("{prefix}{}", now / 1000);
            let replaced = match periodic.concurrency {
                Concurrency::Forbid if !running.is_empty() => continue,
                Concurrency::Replace => running,
                _ => Vec::new(),
            };
            let run = job.spec.run(&run_name);
            if self.jobs.contains_key(&run_name) {
                continue;
            }
            out.push((run, replaced));
        }
        out
    }

    /// Brings back a stored job (on restart), in submission order, before its attempts
    /// ([`Book::restore_attempt`]); `stopped` when it had been stopped.
    pub fn restore_job(
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
    pub fn restore_attempt(&mut self, r: &AttemptRecord, now: Millis) {
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

    /// The tasks to launch next, best first, at most `limit`: jobs by priority (with aging),
    /// then by submission ([`QueueOrder::Fifo`]) or by fewest running
    /// ([`QueueOrder::Fair`]); within a job, retries that are due, then indexes in order; no
    /// job past its `max_running`, no user past its limit ([`UserLimits`]).
    pub fn candidates(&self, now: Millis, limit: usize) -> Vec<Candidate> {
        if self.order == QueueOrder::Fair {
            return self.fair_candidates(now, limit);
        }
        let mut order: Vec<&Job> = self.jobs.values().filter(|j| j.pending(now) > 0).collect();
        order.sort_by_key(|j| {
            (
                std::cmp::Reverse(j.effective_priority(now, self.aging_ms)),
                j.seq,
            )
        });
        let mut users = self.user_room();
        let mut out = Vec::new();
        for job in order {
            let user = users.get_mut(job.spec.owner.as_str());
            let room = user.as_deref().copied().unwrap_or(usize::MAX);
            let take = job
                .pending(now)
                .min(limit.saturating_sub(out.len()))
                .min(room);
            if let Some(left) = user {
                *left -= take;
            }
            let due = job
                .retry
                .iter()
                .filter(|(_, due)| **due <= now)
                .map(|(i, _)| *i);
            for index in due.chain(job.unlaunched.iter()).take(take) {
                out.push(Candidate {
                    job: job.spec.name.clone(),
                    index,
                    attempt: job.next_attempt(index),
                });
            }
            if out.len() >= limit {
                break;
            }
        }
        out
    }

    /// [`Book::candidates`] in fair order: task by task, to the job of the highest priority
    /// that runs (or has been given in this call) the fewest, ties to the first submitted.
    fn fair_candidates(&self, now: Millis, limit: usize) -> Vec<Candidate> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let jobs: Vec<(&Job, Vec<u32>)> = self
            .jobs
            .values()
            .filter(|j| j.pending(now) > 0)
            .map(|j| {
                let due = j
                    .retry
                    .iter()
                    .filter(|(_, due)| **due <= now)
                    .map(|(i, _)| *i);
                let take = j.pending(now).min(limit);
                (j, due.chain(j.unlaunched.iter()).take(take).collect())
            })
            .collect();
        // The smallest key first.
        // (higher aged priority, fewer running, earlier submission, the job's slot).
        type Key = (Reverse<i64>, usize, u64, usize);
        let mut heap: BinaryHeap<Reverse<Key>> = jobs
            .iter()
            .enumerate()
            .map(|(slot, (j, _))| {
                let prio = j.effective_priority(now, self.aging_ms);
                Reverse((Reverse(prio), j.running.len(), j.seq, slot))
            })
            .collect();
        let mut users = self.user_room();
        let mut next = vec![0usize; jobs.len()];
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(Reverse((prio, load, seq, slot))) = heap.pop() else {
                break;
            };
            let (job, indexes) = &jobs[slot];
            let Some(&index) = indexes.get(next[slot]) else {
                continue;
            };
            if let Some(left) = users.get_mut(job.spec.owner.as_str()) {
                // A user at its limit: none of its jobs gets more in this call.
                let Some(less) = left.checked_sub(1) else {
                    continue;
                };
                *left = less;
            }
            next[slot] += 1;
            out.push(Candidate {
                job: job.spec.name.clone(),
                index,
                attempt: job.next_attempt(index),
            });
            heap.push(Reverse((prio, load + 1, seq, slot)));
        }
        out
    }

    /// The least any task ready to launch now asks of each resource (the element-wise
    /// minimum of their jobs' resources; a resource some job does not ask for is absent), or
    /// `None` when no task is ready. No ready task fits where this does not.
    pub fn least_demand(&self, now: Millis) -> Option<Resources> {
        let mut least: Option<Resources> = None;
        for j in self.jobs.values().filter(|j| j.pending(now) > 0) {
            let demand = &j.spec.resources;
            least = Some(match least {
                None => demand.clone(),
                Some(acc) => {
                    let mut min = Resources::new();
                    for (name, millis) in acc.iter() {
                        min.set_millis(name.clone(), millis.min(demand.millis(name.as_str())));
                    }
                    min
                }
            });
        }
        least
    }

    /// How many tasks are ready to launch now.
    pub fn pending(&self, now: Millis) -> usize {
        let mut by_user: BTreeMap<&str, usize> = BTreeMap::new();
        for j in self.jobs.values() {
            let n = by_user.entry(j.spec.owner.as_str()).or_default();
            *n = n.saturating_add(j.pending(now));
        }
        let room = self.user_room();
        by_user
            .iter()
            .map(|(user, n)| room.get(user).map_or(*n, |r| (*n).min(*r)))
            .fold(0usize, usize::saturating_add)
    }

    /// The earliest retry that is not due yet, if any.
    pub fn next_retry(&self, now: Millis) -> Option<Millis> {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Active)
            .flat_map(|j| j.retry.values())
            .filter(|due| **due > now)
            .min()
            .copied()
    }

    /// Records that `c` was launched on `agent`: its record, to store before the launch is
    /// sent. `None` when `c` is not launchable any more (it was not from
    /// [`Book::candidates`], or the job changed since).
    pub fn launched(
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
        job.running.insert(
            c.index,
            Running {
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
            },
        );
        Some(AttemptRecord {
            job: c.job.clone(),
            index: c.index,
            attempt: c.attempt,
            state: TaskState::Staging,
            exit_code: None,
            message: None,
            agent_id: Some(agent),
            launched_ms: now,
            ended_ms: None,
            timed_out_ms: None,
            generation: job.generation,
        })
    }

    /// A launch that never happened (the coordinator refused it, or does not know it after a
    /// restart): the attempt is recorded as lost, and the index runs again.
    pub fn not_launched(&mut self, id: &TaskId, why: &str, now: Millis) -> Option<AttemptRecord> {
        self.update(id, TaskState::Lost, None, Some(why.to_owned()), now)
    }

    /// A task's new state. Returns the attempt's record to store, or `None` when the update
    /// is about no attempt the book is waiting on (a repeat, or a deleted job's task).
    pub fn update(
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
        let mut record = AttemptRecord {
            job: name.to_owned(),
            index,
            attempt,
            state,
            exit_code,
            message: message.clone(),
            agent_id: run.agent_id,
            launched_ms: run.launched_ms,
            ended_ms: None,
            timed_out_ms: run.timed_out_ms,
            generation: run.generation,
        };
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
    pub fn timeouts(&mut self, now: Millis) -> Vec<AttemptRecord> {
        let mut out = Vec::new();
        for job in self.jobs.values_mut() {
            let Some(limit) = job.spec.timeout_ms else {
                continue;
            };
            for run in job.running.values_mut() {
                if run.timed_out_ms.is_none() && now.saturating_sub(run.launched_ms) >= limit {
                    run.timed_out_ms = Some(now);
                    out.push(AttemptRecord {
                        job: job.spec.name.clone(),
                        index: run.index,
                        attempt: run.attempt,
                        state: run.state,
                        exit_code: None,
                        message: None,
                        agent_id: run.agent_id,
                        launched_ms: run.launched_ms,
                        ended_ms: None,
                        timed_out_ms: Some(now),
                        generation: run.generation,
                    });
                }
            }
        }
        out
    }

    /// The service named `name`, to change.
    fn service_mut(&mut self, name: &str) -> Result<&mut Job, BookError> {
        let job = self
            .jobs
            .get_mut(name)
            .ok_or_else(|| BookError::NotFound(name.to_owned()))?;
        if job.spec.kind != Kind::Service {
            return Err(BookError::NotService(name.to_owned()));
        }
        Ok(job)
    }

    /// Sets a service's replica count: new replicas are queued, and the running tasks of those
    /// scaled away are returned, to kill.
    pub fn scale(
        &mut self,
        name: &str,
        replicas: u32,
        _now: Millis,
    ) -> Result<Vec<TaskId>, BookError> {
        let job = self.service_mut(name)?;
        let old = job.spec.count;
        job.spec.count = replicas;
        job.spec.raw.replicas = Some(i64::from(replicas));
        let mut kill = Vec::new();
        if job.state.is_done() {
            return Ok(kill);
        }
        // Whole ranges, so scaling by millions costs no more than by one.
        job.unlaunched.insert_range(old, replicas);
        // A replica scaled away whose kill has not ended it yet is restarted when it ends.
        let still_running: Vec<u32> = job
            .running
            .range(old..replicas.max(old))
            .map(|(i, _)| *i)
            .collect();
        for index in still_running {
            job.unlaunched.remove(index);
        }
        job.unlaunched.remove_range(replicas, old);
        job.retry.retain(|index, _| *index < replicas);
        kill.extend(
            job.running
                .range(replicas..)
                .map(|(_, r)| r.task_id.clone()),
        );
        for (_, (r, killed)) in job.retiring.range_mut(replicas..) {
            *killed = true;
            kill.push(r.task_id.clone());
        }
        Ok(kill)
    }

    /// Checks that `spec` could replace service `spec.name`'s spec now, changing nothing: the
    /// job exists, is a service, and keeps its kind and dependencies.
    pub fn check_update(&self, spec: &JobSpec) -> Result<(), BookError> {
        let job = self
            .jobs
            .get(&spec.name)
            .ok_or_else(|| BookError::NotFound(spec.name.clone()))?;
        if job.spec.kind != Kind::Service {
            return Err(BookError::NotService(spec.name.clone()));
        }
        if spec.kind != Kind::Service {
            return Err(BookError::Unchangeable {
                field: "kind".into(),
                why: "a service stays a service; delete it and submit the new job".into(),
            });
        }
        if spec.depends_on != job.spec.depends_on {
            return Err(BookError::Unchangeable {
                field: "depends_on".into(),
                why: "a service's dependencies cannot change in an update".into(),
            });
        }
        Ok(())
    }

    /// Replaces service `spec.name`'s spec (after [`Book::check_update`]'s checks). When what a
    /// replica runs changed (anything but `replicas`, the update bounds, retries' backoff and
    /// priority), the spec's generation goes up and a rolling update replaces the replicas,
    /// step by step ([`Book::roll`]); a changed `replicas` scales. Returns the new generation
    /// and the tasks to kill now.
    pub fn update_service(
        &mut self,
        spec: JobSpec,
        now: Millis,
    ) -> Result<(u32, Vec<TaskId>), BookError> {
        self.check_update(&spec)?;
        let name = spec.name.clone();
        let replicas = spec.count;
        let job = self.service_mut(&name)?;
        if runs_differently(&job.spec, &spec) {
            job.generation += 1;
        }
        let generation = job.generation;
        let count = job.spec.count;
        job.spec = spec;
        job.spec.count = count;
        let mut kill = self.scale(&name, replicas, now)?;
        kill.extend(self.roll());
        Ok((generation, kill))
    }

    /// A rolling update's next step for every service: the tasks to kill.
    pub fn roll(&mut self) -> Vec<TaskId> {
        self.jobs.values_mut().flat_map(Job::roll).collect()
    }

    /// A rolling update's next step for the job that task `id` belongs to: the tasks to kill.
    pub fn roll_task(&mut self, id: &TaskId) -> Vec<TaskId> {
        parse_task_id(id.as_str())
            .and_then(|(name, _, _)| self.jobs.get_mut(name))
            .map(Job::roll)
            .unwrap_or_default()
    }

    /// Sets a restored job's spec generation (on restart, before its attempts).
    pub fn restore_generation(&mut self, name: &str, generation: u32) {
        if let Some(job) = self.jobs.get_mut(name) {
            job.generation = generation;
        }
    }

    /// A replica's health check verdict; true when it changed.
    pub fn health(&mut self, id: &TaskId, healthy: bool) -> bool {
        let Some((name, index, attempt)) = parse_task_id(id.as_str()) else {
            return false;
        };
        let Some(job) = self.jobs.get_mut(name) else {
            return false;
        };
        let run = match job.running.get_mut(&index) {
            Some(r) if r.attempt == attempt => Some(r),
            _ => job
                .retiring
                .get_mut(&index)
                .map(|(r, _)| r)
                .filter(|r| r.attempt == attempt),
        };
        match run {
            Some(r) if r.healthy != Some(healthy) => {
                r.healthy = Some(healthy);
                true
            }
            _ => false,
        }
    }

    /// Restarts a service: returns its running replicas, to kill; each starts again at once
    /// when its end arrives.
    pub fn restart(&mut self, name: &str) -> Result<Vec<TaskId>, BookError> {
        let job = self.service_mut(name)?;
        for index in job.running.keys() {
            job.restarting.insert(*index, "restarted on request");
        }
        Ok(job.running.values().map(|r| r.task_id.clone()).collect())
    }

    /// A service replica's health check failed: true when `id` is its current attempt and was
    /// not already marked (the caller kills it; it starts again, with backoff, when it ends).
    pub fn unhealthy(&mut self, id: &TaskId) -> bool {
        let Some((name, index, attempt)) = parse_task_id(id.as_str()) else {
            return false;
        };
        let Some(job) = self.jobs.get_mut(name) else {
            return false;
        };
        let current = job
            .running
            .get(&index)
            .is_some_and(|r| r.attempt == attempt);
        current && job.spec.kind == Kind::Service && job.unhealthy.insert(index)
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

    /// Stops a job: nothing more is launched; returns its running tasks, to kill.
    pub fn stop(&mut self, name: &str, now: Millis) -> Result<Vec<TaskId>, BookError> {
        let job = self
            .jobs
            .get_mut(name)
            .ok_or_else(|| BookError::NotFound(name.to_owned()))?;
        let running = job.alive();
        if !job.state.is_done() {
            job.end(JobState::Stopped, "stopped on request".into(), now);
            self.cascade(now);
        }
        Ok(running)
    }

    /// Forgets a job: returns its running tasks, to kill. Jobs that depend on it and have not
    /// started fail.
    pub fn delete(&mut self, name: &str, now: Millis) -> Result<Vec<TaskId>, BookError> {
        let job = self
            .jobs
            .remove(name)
            .ok_or_else(|| BookError::NotFound(name.to_owned()))?;
        self.cascade(now);
        Ok(job.alive())
    }

    /// Starts waiting jobs whose dependencies all succeeded, and fails those with a failed,
    /// stopped or deleted dependency; repeats until nothing changes (chains of jobs).
    fn cascade(&mut self, now: Millis) {
        loop {
            let mut changes = Vec::new();
            for job in self.jobs.values().filter(|j| j.state == JobState::Waiting) {
                let mut verdict = Some(Ok(()));
                for dep in &job.spec.depends_on {
                    match self.jobs.get(dep).map(|d| (d.state, d.reason.as_deref())) {
                        Some((JobState::Succeeded, _)) => {}
                        Some((JobState::Waiting | JobState::Active, _)) => {
                            verdict = verdict.and(None);
                        }
                        Some((state, why)) => {
                            let why = why.map(|w| format!(": {w}")).unwrap_or_default();
                            verdict = Some(Err(format!(
                                "dependency {dep:?} {}{why}",
                                match state {
                                    JobState::Stopped => "was stopped",
                                    _ => "failed",
                                }
                            )));
                            break;
                        }
                        None => {
                            verdict = Some(Err(format!("dependency {dep:?} was deleted")));
                            break;
                        }
                    }
                }
                if let Some(v) = verdict {
                    changes.push((job.spec.name.clone(), v));
                }
            }
            if changes.is_empty() {
                return;
            }
            for (name, verdict) in changes {
                let Some(job) = self.jobs.get_mut(&name) else {
                    continue;
                };
                match verdict {
                    Ok(()) => {
                        job.state = JobState::Active;
                        job.active_since_ms = now;
                        job.settle(now);
                    }
                    Err(reason) => job.end(JobState::Failed, reason, now),
                }
            }
        }
    }

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

fn summary(job: &Job) -> JobSummary {
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

fn anonymous() -> String {
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

/// Whether replicas of `new` would run differently from those of `old`: anything but the
/// replica count, the rolling-update bounds, the restart backoff and the priority changed.
pub fn runs_differently(old: &JobSpec, new: &JobSpec) -> bool {
    let launch_only = |s: &JobSpec| {
        let mut raw = s.raw.clone();
        raw.replicas = None;
        raw.max_unavailable = None;
        raw.max_surge = None;
        raw.backoff_s = None;
        raw.max_backoff_s = None;
        raw.priority = None;
        raw
    };
    launch_only(old) != launch_only(new)
}

/// Whether an attempt that ended in `state` did nothing wrong: lost (or gone) with its agent,
/// or killed to take its resources back (preemption, a drain). It runs again without using up
/// a retry.
fn blameless(state: TaskState, message: Option<&str>) -> bool {
    matches!(state, TaskState::Lost | TaskState::Gone)
        || (state == TaskState::Killed
            && message.is_some_and(|m| m.contains("preempt") || m.contains("drain")))
}

/// The delay before the next try after `failures` counted failures in a row: none for zero,
/// then `backoff_ms`, doubling each time, at most `max_backoff_ms`.
fn backoff(spec: &JobSpec, failures: usize) -> Millis {
    if failures == 0 {
        return 0;
    }
    let doublings = (failures - 1).min(30) as u32;
    spec.backoff_ms
        .saturating_mul(1u64 << doublings)
        .min(spec.max_backoff_ms)
}

/// A service replica ended: it is recorded (keeping the last [`SERVICE_HISTORY`]) and, unless
/// the service was stopped or scaled below it, started again after a delay that doubles with
/// each quick end in a row (a lost or preempted replica restarts at once).
fn restart_replica(
    job: &mut Job,
    index: u32,
    attempt: u32,
    ran_ms: Millis,
    (state, exit_code, message): (TaskState, Option<i32>, Option<String>),
    now: Millis,
) {
    let requested = job.restarting.remove(&index);
    let sick = job.unhealthy.remove(&index);
    let counted = requested.is_none() && !blameless(state, message.as_deref());
    let message = if let Some(why) = requested {
        Some(why.to_owned())
    } else if sick {
        Some("unhealthy: killed after its health check failed".to_owned())
    } else {
        message
    };
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
    if history.len() > SERVICE_HISTORY {
        history.remove(0);
    }
    let quick = history
        .iter()
        .rev()
        .take_while(|f| f.counted && f.ran_ms < STABLE_MS)
        .count();
    if job.state != JobState::Active || index >= job.spec.count {
        return;
    }
    let delay = backoff(&job.spec, quick);
    job.retry.insert(index, now.saturating_add(delay));
}

#[cfg(test)]
#[path = "book_tests.rs"]
mod tests;
