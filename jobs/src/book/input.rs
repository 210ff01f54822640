//! [`Input`], [`Effect`] and [`Book::handle`]: the one way to change the book, and what each
//! change asks of the service.
//!
//! The effects of one input come in the order they must be carried out: a record is stored
//! before the kill or launch that follows it, and the service's writer keeps that order across
//! inputs too.

use protocol::{AgentId, TaskId, TaskState};

use super::base::Book;
use super::error::BookError;
use super::records::{task_id, AttemptRecord, Candidate, JobRecord, JobState};
use crate::clock::Millis;
use crate::spec::JobSpec;

/// One change to the book.
#[derive(Debug, Clone)]
pub enum Input {
    /// A job submitted through the API, its owner set.
    Submit(JobSpec),
    /// A service's new spec, from the user in `spec.owner`: a changed `replicas` scales it;
    /// any change to what a replica runs starts a rolling update.
    Update(JobSpec),
    /// A service's new replica count.
    Scale {
        /// The service.
        name: String,
        /// Its new count.
        replicas: u32,
        /// Who asks.
        by: String,
    },
    /// Nothing more of a job is launched; what runs is killed.
    Stop {
        /// The job.
        name: String,
        /// Who asks.
        by: String,
    },
    /// A service's replicas are killed and start again at once.
    Restart {
        /// The service.
        name: String,
        /// Who asks.
        by: String,
    },
    /// A job is forgotten; what runs is killed, and jobs waiting on it fail.
    Delete {
        /// The job.
        name: String,
        /// Who asks.
        by: String,
    },
    /// Tasks placed on offers: each candidate ([`Book::candidates`]) and its agent.
    Launch(Vec<(Candidate, AgentId)>),
    /// Launches that never happened: refused by the coordinator, not stored, or unknown to
    /// the coordinator after a restart. Each attempt ends as lost; its index runs again.
    NotLaunched {
        /// The attempts' task ids.
        tasks: Vec<TaskId>,
        /// Why, as the attempts' record will say.
        why: String,
    },
    /// A task's status from the coordinator.
    Status {
        /// The task.
        task: TaskId,
        /// Its state.
        state: TaskState,
        /// Its exit code, once it exited.
        exit_code: Option<i32>,
        /// What the agent said.
        message: Option<String>,
        /// Its health check's verdict, when it has one.
        healthy: Option<bool>,
    },
    /// The coordinator removed the framework: every attempt in flight ended with it.
    FrameworkRemoved,
    /// The clock moved on: time limits, periodic runs and rolling updates take their next
    /// step.
    Tick,
}

/// Why the book asks for a task to be killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillWhy {
    /// Its job was stopped.
    Stopped,
    /// Its job was deleted.
    Deleted,
    /// Its service was scaled below its index.
    ScaledAway,
    /// Its service was restarted.
    Restarted,
    /// Its service's spec changed: scaled away, or replaced by a rolling update.
    Updated,
    /// A rolling update's successor replaces it, or a periodic job's new run replaces its run.
    Replaced,
    /// It ran past its time limit.
    TimedOut,
    /// Its health check failed; it starts again when it ends.
    Unhealthy,
    /// No job waits on it (its job was deleted, or a newer attempt of its index runs).
    Unknown,
}

impl KillWhy {
    /// In words, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stopped => "its job was stopped",
            Self::Deleted => "its job was deleted",
            Self::ScaledAway => "its service was scaled down",
            Self::Restarted => "its service was restarted",
            Self::Updated => "its service was updated",
            Self::Replaced => "it was replaced",
            Self::TimedOut => "it ran past its time limit",
            Self::Unhealthy => "its health check failed",
            Self::Unknown => "no job waits on it",
        }
    }
}

/// What one change asks of the service, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Store job `name`'s record. A change from the API is acknowledged once it is stored.
    StoreJob {
        /// The job.
        name: String,
        /// What to store.
        record: Box<JobRecord>,
    },
    /// Remove job `name` and its attempts from the store.
    ForgetJob(String),
    /// Store an attempt before what follows is carried out: a launch before it is sent, a
    /// time limit before its kill.
    StoreAttempt(AttemptRecord),
    /// Store an attempt's end with the next write, or within a second. Ends come one status
    /// update at a time, and a transaction each would cap the service at the disk's sync
    /// rate; an end lost in a crash costs nothing, as the attempt is restored as running and
    /// reconciliation brings its end back.
    StoreEnd(AttemptRecord),
    /// Kill a task.
    Kill {
        /// The task.
        task: TaskId,
        /// Why.
        why: KillWhy,
    },
    /// Job `name` changed, or is gone: the event stream tells its readers.
    Changed(String),
}

/// The effects of one input, as they are made: writes and kills in order, then the jobs that
/// changed, each once.
#[derive(Debug, Default)]
struct Effects {
    list: Vec<Effect>,
    changed: Vec<String>,
}

impl Effects {
    fn push(&mut self, effect: Effect) {
        self.list.push(effect);
    }

    /// Job `name` changed.
    fn changed(&mut self, name: &str) {
        if !self.changed.iter().any(|n| n == name) {
            self.changed.push(name.to_owned());
        }
    }

    fn kill(&mut self, tasks: impl IntoIterator<Item = TaskId>, why: KillWhy) {
        self.list
            .extend(tasks.into_iter().map(|task| Effect::Kill { task, why }));
    }

    /// Stores `record` now and says its job changed.
    fn attempt(&mut self, record: AttemptRecord) {
        self.changed(&record.job);
        self.list.push(Effect::StoreAttempt(record));
    }

    fn finish(self) -> Vec<Effect> {
        let mut list = self.list;
        list.extend(self.changed.into_iter().map(Effect::Changed));
        list
    }
}

impl Book {
    /// Applies one change at time `now`: the effects to carry out, in order, or why the
    /// change was refused (then nothing changed).
    pub fn handle(&mut self, input: Input, now: Millis) -> Result<Vec<Effect>, BookError> {
        let mut out = Effects::default();
        match input {
            Input::Submit(spec) => self.on_submit(spec, now, &mut out)?,
            Input::Update(spec) => self.on_update(spec, now, &mut out)?,
            Input::Scale { name, replicas, by } => {
                self.check_owner(&name, &by)?;
                let kill = self.scale(&name, replicas, now)?;
                self.store_job(&name, &mut out);
                out.kill(kill, KillWhy::ScaledAway);
            }
            Input::Stop { name, by } => {
                self.check_owner(&name, &by)?;
                let kill = self.stop(&name, now)?;
                self.store_job(&name, &mut out);
                out.kill(kill, KillWhy::Stopped);
            }
            Input::Restart { name, by } => {
                self.check_owner(&name, &by)?;
                let kill = self.restart(&name)?;
                out.kill(kill, KillWhy::Restarted);
            }
            Input::Delete { name, by } => {
                self.check_owner(&name, &by)?;
                let kill = self.delete(&name, now)?;
                out.push(Effect::ForgetJob(name.clone()));
                out.kill(kill, KillWhy::Deleted);
                out.changed(&name);
            }
            Input::Launch(placed) => {
                for (c, agent) in placed {
                    if let Some(record) = self.launched(&c, agent, now) {
                        out.attempt(record);
                    }
                }
            }
            Input::NotLaunched { tasks, why } => {
                for task in tasks {
                    if let Some(record) = self.not_launched(&task, &why, now) {
                        out.attempt(record);
                    }
                }
            }
            Input::Status {
                task,
                state,
                exit_code,
                message,
                healthy,
            } => self.on_status(task, (state, exit_code, message), healthy, now, &mut out),
            Input::FrameworkRemoved => {
                for task in self.in_flight() {
                    if let Some(record) = self.not_launched(&task, "the framework was removed", now)
                    {
                        out.attempt(record);
                    }
                }
            }
            Input::Tick => self.on_tick(now, &mut out),
        }
        self.changed_all(&mut out);
        Ok(out.finish())
    }

    /// Refuses a change to job `name` by a user other than its owner.
    fn check_owner(&self, name: &str, by: &str) -> Result<(), BookError> {
        let job = self
            .job(name)
            .ok_or_else(|| BookError::NotFound(name.to_owned()))?;
        let owner = &job.spec().owner;
        if owner != by {
            return Err(BookError::NotOwner {
                name: name.to_owned(),
                owner: owner.clone(),
            });
        }
        Ok(())
    }

    /// Stores job `name` as it is now, and says it changed.
    fn store_job(&self, name: &str, out: &mut Effects) {
        if let Some(job) = self.job(name) {
            out.push(Effect::StoreJob {
                name: name.to_owned(),
                record: Box::new(job.record(job.state() == JobState::Stopped)),
            });
        }
        out.changed(name);
    }

    /// Says that every job a cascade of dependencies started or failed in this input changed.
    fn changed_all(&mut self, out: &mut Effects) {
        for name in std::mem::take(&mut self.cascaded) {
            out.changed(&name);
        }
    }

    fn on_submit(
        &mut self,
        spec: JobSpec,
        now: Millis,
        out: &mut Effects,
    ) -> Result<(), BookError> {
        self.check_submit(&spec)?;
        let name = spec.name.clone();
        let record = Box::new(JobRecord::new(&spec, self.next_seq(), now));
        self.submit(spec, now)?;
        out.push(Effect::StoreJob {
            name: name.clone(),
            record,
        });
        out.changed(&name);
        Ok(())
    }

    fn on_update(
        &mut self,
        spec: JobSpec,
        now: Millis,
        out: &mut Effects,
    ) -> Result<(), BookError> {
        let name = spec.name.clone();
        self.check_owner(&name, &spec.owner)?;
        let (_generation, kill) = self.update_service(spec, now)?;
        self.store_job(&name, out);
        out.kill(kill, KillWhy::Updated);
        Ok(())
    }

    fn on_status(
        &mut self,
        task: TaskId,
        (state, exit_code, message): (TaskState, Option<i32>, Option<String>),
        healthy: Option<bool>,
        now: Millis,
        out: &mut Effects,
    ) {
        let health_changed = healthy.is_some_and(|h| self.health(&task, h));
        let record = self.update(&task, state, exit_code, message, now);
        // A replica that came up, went or turned healthy may let a rolling update move on.
        let retire = if record.is_some() || health_changed {
            self.roll_task(&task)
        } else {
            Vec::new()
        };
        let known = self.is_current(&task);
        let recorded = record.is_some();
        if let Some(r) = record {
            let job = r.job.clone();
            // Only launches and ends must survive a restart (reconciliation brings back the
            // states in between), so a `running` update costs no write.
            if r.state.is_terminal() {
                out.push(Effect::StoreEnd(r));
            }
            out.changed(&job);
        }
        out.kill(retire, KillWhy::Replaced);
        if healthy == Some(false) && self.unhealthy(&task) {
            // Replaced: killed here, started again when its end arrives.
            out.kill([task.clone()], KillWhy::Unhealthy);
        }
        if !recorded && !known && !state.is_terminal() {
            out.kill([task], KillWhy::Unknown);
        }
    }

    fn on_tick(&mut self, now: Millis, out: &mut Effects) {
        let timed_out = self.timeouts(now);
        let kills: Vec<TaskId> = timed_out
            .iter()
            .map(|r| task_id(&r.job, r.index, r.attempt))
            .collect();
        for r in timed_out {
            out.attempt(r);
        }
        out.kill(kills, KillWhy::TimedOut);
        for (run, replaced) in self.due_runs(now) {
            for old in replaced {
                // Stopped, and stored as stopped, before the run that replaces it starts.
                let Ok(kill) = self.stop(&old, now) else {
                    continue;
                };
                self.store_job(&old, out);
                out.kill(kill, KillWhy::Replaced);
            }
            // `due_runs` never names a run that exists, so the submission is not refused.
            let _ = self.on_submit(run, now, out);
        }
        let rolled = self.roll();
        out.kill(rolled, KillWhy::Replaced);
    }
}
