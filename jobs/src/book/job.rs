//! [`Job`]: one job's indexes and attempts, and what follows from them alone (what it may
//! launch, when it is over, how long its tasks run).

use std::collections::{BTreeMap, BTreeSet};

use protocol::{TaskId, TaskState};

use super::records::JobState;
use super::records::{Failure, JobRecord, Running};
use crate::clock::Millis;
use crate::ranges::Ranges;
use crate::spec::{JobSpec, Kind};

/// The most ended attempts a service keeps per replica (it may restart forever).
pub const SERVICE_HISTORY: usize = 10;

/// One job and its tasks.
#[derive(Debug, Clone)]
pub struct Job {
    pub(super) spec: JobSpec,
    pub(super) seq: u64,
    pub(super) submitted_ms: Millis,
    /// When it last became active (aging counts from here).
    pub(super) active_since_ms: Millis,
    pub(super) state: JobState,
    pub(super) reason: Option<String>,
    pub(super) ended_ms: Option<Millis>,
    pub(super) unlaunched: Ranges,
    /// Indexes waiting out a retry delay, and when it ends.
    pub(super) retry: BTreeMap<u32, Millis>,
    pub(super) running: BTreeMap<u32, Running>,
    pub(super) succeeded: Ranges,
    /// Indexes that failed for good.
    pub(super) failed: BTreeSet<u32>,
    /// Every failed attempt, by index (a service's last few ends).
    pub(super) failures: BTreeMap<u32, Vec<Failure>>,
    /// The next attempt of each index that has had one.
    pub(super) attempts: BTreeMap<u32, u32>,
    /// A periodic job's next run.
    pub(super) next_run_ms: Option<Millis>,
    /// How long its succeeded tasks ran, in all, and their sizes, in all (1 each without
    /// `sizes`): the estimate of the next task's length.
    pub(super) learned: (Millis, f64),
    /// A service's replicas killed to be restarted, and why: their end costs no backoff.
    pub(super) restarting: BTreeMap<u32, &'static str>,
    /// The spec's generation: 0 at submission, one more with each update that changes what
    /// a replica runs.
    pub(super) generation: u32,
    /// A service's replicas being replaced by a rolling update (by index): they serve until
    /// their successor, which runs under the same index, is up; `true` once killed.
    pub(super) retiring: BTreeMap<u32, (Running, bool)>,
    /// A service's replicas killed because their health check failed.
    pub(super) unhealthy: BTreeSet<u32>,
}

impl Job {
    pub(super) fn new(spec: JobSpec, seq: u64, now: Millis) -> Self {
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

    /// Its spec's generation (see [`Input::Update`](super::Input::Update)).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Whether `r` serves now: running, not being killed, and healthy when it has a check.
    pub(super) fn available(&self, r: &Running) -> bool {
        r.state == TaskState::Running
            && !self.restarting.contains_key(&r.index)
            && !self.unhealthy.contains(&r.index)
            && (self.spec.health_check.is_none() || r.healthy == Some(true))
    }

    /// How many replicas serve now, retiring ones included.
    pub(super) fn available_count(&self) -> usize {
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
    pub(super) fn alive(&self) -> Vec<TaskId> {
        self.running
            .values()
            .chain(self.retiring.values().map(|(r, _)| r))
            .map(|r| r.task_id.clone())
            .collect()
    }

    /// What to store of this job: its spec, order, generation and owner, `stopped` or not.
    pub fn record(&self, stopped: bool) -> JobRecord {
        JobRecord {
            stopped,
            generation: self.generation,
            ..JobRecord::new(&self.spec, self.seq, self.submitted_ms)
        }
    }

    /// A service replica's attempt ended as `end` says: kept with its index's last
    /// [`SERVICE_HISTORY`] ends (a replica may restart forever), which are returned.
    pub(super) fn replica_ended(&mut self, end: Failure) -> &[Failure] {
        let history = self.failures.entry(end.index).or_default();
        history.push(end);
        if history.len() > SERVICE_HISTORY {
            history.remove(0);
        }
        history
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
    pub(super) fn size(&self, index: u32) -> f64 {
        size_of(self.spec.sizes.as_deref(), index)
    }

    /// The attempts running now.
    pub fn running(&self) -> impl Iterator<Item = &Running> {
        self.running.values()
    }

    pub(super) fn next_attempt(&self, index: u32) -> u32 {
        self.attempts.get(&index).copied().unwrap_or(0)
    }

    /// How many more tasks it may run now.
    pub(super) fn room(&self) -> usize {
        match self.spec.max_running {
            Some(max) => (max as usize).saturating_sub(self.running.len()),
            None => usize::MAX,
        }
    }

    pub(super) fn due_retries(&self, now: Millis) -> usize {
        self.retry.values().filter(|due| **due <= now).count()
    }

    pub(super) fn pending(&self, now: Millis) -> usize {
        if self.state != JobState::Active {
            return 0;
        }
        let want = (self.unlaunched.len() as usize).saturating_add(self.due_retries(now));
        want.min(self.room())
    }

    pub(super) fn effective_priority(&self, now: Millis, aging_ms: Millis) -> i64 {
        let waited = now.saturating_sub(self.active_since_ms) / aging_ms.max(1);
        self.spec.priority.saturating_add(waited as i64)
    }

    /// Ends the job if nothing is left to run; true when it ended now.
    pub(super) fn settle(&mut self, now: Millis) -> bool {
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

    pub(super) fn end(&mut self, state: JobState, reason: String, now: Millis) {
        self.state = state;
        self.reason = Some(reason);
        self.ended_ms = Some(now);
        self.unlaunched = Ranges::new();
        self.retry.clear();
    }
}

/// How an attempt ended, in words.
pub(super) fn describe(f: &Failure) -> String {
    let mut s = f.state.as_str().to_owned();
    if let Some(code) = f.exit_code {
        s.push_str(&format!(" with exit code {code}"));
    }
    if let Some(m) = &f.message {
        s.push_str(&format!(" ({m})"));
    }
    s
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
pub(super) fn size_of(sizes: Option<&[f64]>, index: u32) -> f64 {
    sizes
        .and_then(|s| s.get(index as usize).copied())
        .unwrap_or(1.0)
}

/// Whether an attempt that ended in `state` did nothing wrong: lost (or gone) with its agent,
/// or killed to take its resources back (preemption, a drain). It runs again without using up
/// a retry.
pub(super) fn blameless(state: TaskState, message: Option<&str>) -> bool {
    matches!(state, TaskState::Lost | TaskState::Gone)
        || (state == TaskState::Killed
            && message.is_some_and(|m| m.contains("preempt") || m.contains("drain")))
}

/// The delay before the next try after `failures` counted failures in a row: none for zero,
/// then `backoff_ms`, doubling each time, at most `max_backoff_ms`
/// ([`JobSpec::retry_backoff`]).
pub(super) fn backoff(spec: &JobSpec, failures: usize) -> Millis {
    let delay = spec.retry_backoff().after(failures as u64);
    Millis::try_from(delay.as_millis()).unwrap_or(Millis::MAX)
}
