//! The queue: which jobs may be submitted (names, dependencies), which tasks go next (priority
//! with aging, FIFO or fair order, per-job and per-user limits), and jobs' ends by request or
//! by their dependencies.

use std::collections::{BTreeMap, BTreeSet};

use protocol::{Resources, TaskId};

use super::base::Book;
use super::error::BookError;
use super::job::Job;
use super::records::Candidate;
use super::records::{JobState, QueueOrder};
use crate::clock::Millis;
use crate::spec::JobSpec;

impl Book {
    /// How many more tasks each limited user may start now (users without a limit are
    /// absent).
    pub(super) fn user_room(&self) -> BTreeMap<&str, usize> {
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

    /// Checks that `spec` could be submitted now, changing nothing.
    pub(super) fn check_submit(&self, spec: &JobSpec) -> Result<(), BookError> {
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
    pub(super) fn reaches(&self, from: &str, to: &str) -> bool {
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
    pub(super) fn submit(&mut self, spec: JobSpec, now: Millis) -> Result<u64, BookError> {
        self.check_submit(&spec)?;
        let seq = self.next_seq;
        self.insert(spec, seq, now);
        self.cascade(now);
        Ok(seq)
    }

    pub(super) fn insert(&mut self, spec: JobSpec, seq: u64, now: Millis) {
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

    /// The tasks to launch next, best first, at most `limit`: jobs by priority (with aging),
    /// then by submission ([`QueueOrder::Fifo`]) or by fewest running
    /// ([`QueueOrder::Fair`]); within a job, retries that are due, then indexes in order; no
    /// job past its `max_running`, no user past its limit ([`UserLimits`](super::UserLimits)).
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
    pub(super) fn fair_candidates(&self, now: Millis, limit: usize) -> Vec<Candidate> {
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

    /// Stops a job: nothing more is launched; returns its running tasks, to kill.
    pub(super) fn stop(&mut self, name: &str, now: Millis) -> Result<Vec<TaskId>, BookError> {
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
    pub(super) fn delete(&mut self, name: &str, now: Millis) -> Result<Vec<TaskId>, BookError> {
        let job = self
            .jobs
            .remove(name)
            .ok_or_else(|| BookError::NotFound(name.to_owned()))?;
        self.cascade(now);
        Ok(job.alive())
    }

    /// Starts waiting jobs whose dependencies all succeeded, and fails those with a failed,
    /// stopped or deleted dependency; repeats until nothing changes (chains of jobs).
    pub(super) fn cascade(&mut self, now: Millis) {
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
                self.cascaded.push(name.clone());
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
}
