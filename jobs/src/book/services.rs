//! Services: scaling, spec updates and their rolling replacement of replicas, health,
//! restarts, and a replica's restart after it ends.

use protocol::{TaskId, TaskState};

use super::base::{Book, STABLE_MS};
use super::error::BookError;
use super::job::Job;
use super::job::{backoff, blameless};
use super::records::JobState;
use super::records::{parse_task_id, Failure};
use crate::clock::Millis;
use crate::spec::{JobSpec, Kind};

impl Job {
    /// One step of a service's rolling update: replaces replicas of older generations as far
    /// as `max_surge` and `max_unavailable` allow, and kills retiring replicas whose
    /// successor serves (or that the unavailability budget can spare). Returns what to kill.
    pub(super) fn roll(&mut self) -> Vec<TaskId> {
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
    pub(super) fn outdated(&self) -> usize {
        self.retiring.len()
            + self
                .running
                .values()
                .filter(|r| r.generation < self.generation)
                .count()
    }
}

impl Book {
    /// The service named `name`, to change.
    pub(super) fn service_mut(&mut self, name: &str) -> Result<&mut Job, BookError> {
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
    pub(super) fn scale(
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
    pub(super) fn check_update(&self, spec: &JobSpec) -> Result<(), BookError> {
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
    pub(super) fn update_service(
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
    pub(super) fn roll(&mut self) -> Vec<TaskId> {
        self.jobs.values_mut().flat_map(Job::roll).collect()
    }

    /// A rolling update's next step for the job that task `id` belongs to: the tasks to kill.
    pub(super) fn roll_task(&mut self, id: &TaskId) -> Vec<TaskId> {
        parse_task_id(id.as_str())
            .and_then(|(name, _, _)| self.jobs.get_mut(name))
            .map(Job::roll)
            .unwrap_or_default()
    }

    /// A replica's health check verdict; true when it changed.
    pub(super) fn health(&mut self, id: &TaskId, healthy: bool) -> bool {
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
    pub(super) fn restart(&mut self, name: &str) -> Result<Vec<TaskId>, BookError> {
        let job = self.service_mut(name)?;
        for index in job.running.keys() {
            job.restarting.insert(*index, "restarted on request");
        }
        Ok(job.running.values().map(|r| r.task_id.clone()).collect())
    }

    /// A service replica's health check failed: true when `id` is its current attempt and was
    /// not already marked (the caller kills it; it starts again, with backoff, when it ends).
    pub(super) fn unhealthy(&mut self, id: &TaskId) -> bool {
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

/// A service replica ended: it is recorded (keeping the last [`SERVICE_HISTORY`]) and, unless
/// the service was stopped or scaled below it, started again after a delay that doubles with
/// each quick end in a row (a lost or preempted replica restarts at once).
pub(super) fn restart_replica(
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
    let history = job.replica_ended(Failure {
        index,
        attempt,
        state,
        exit_code,
        message,
        counted,
        ran_ms,
        ended_ms: now,
    });
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
