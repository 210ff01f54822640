//! [`Shared`]: what the scheduler, the API and the service's timer share (the book behind one
//! lock, the store's writer, the coordinator client, the event stream), and the events
//! ([`JobEvent`]) the API streams. Every change to the book goes through [`Shared::apply`]:
//! one input in, its effects carried out (writes handed to the writer under the lock, so in
//! the book's order; events published; kills handed back). Below the API and the scheduler;
//! the service builds it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use framework_sdk::{CoordinatorClient, FrameworkId, TaskId};
use tokio_util::sync::CancellationToken;

use crate::book::{Book, BookError, Effect, Input, JobSummary, KillWhy};
use crate::clock::{now_ms, Millis};
use crate::store::Write;
use crate::users::Users;
use crate::writer::{Stored, WriteError, Writer};

/// What the scheduler, the API and the timer share.
#[derive(Debug)]
pub struct Shared {
    pub(crate) book: Mutex<Book>,
    /// The store's one writer: the book's changes, in the order they were made.
    pub writer: Writer,
    /// The coordinator, for kills, revives and reconciliation outside the driver's callbacks.
    pub client: CoordinatorClient,
    pub(crate) framework_id: Mutex<Option<FrameworkId>>,
    /// Tasks to ask the coordinator about once registered (those in flight at start-up).
    pub(crate) to_check: Mutex<Option<Vec<TaskId>>>,
    pub(crate) last_offers_ms: AtomicU64,
    /// The API's bearer token, if it has one.
    pub api_token: Option<String>,
    /// The API's users, if it has a users file.
    pub users: Option<Users>,
    pub(crate) events: tokio::sync::broadcast::Sender<JobEvent>,
    /// Cancelled when the service stops; event streams end with it, so the API's graceful
    /// shutdown does not wait on them.
    pub stop: CancellationToken,
}

/// What [`Shared::apply`] leaves to its caller: the tasks to kill, once the writes are stored.
#[derive(Debug)]
#[must_use]
pub struct Applied {
    /// Tasks to kill (after the writes are stored).
    pub kills: Vec<TaskId>,
    stored: Stored,
}

impl Applied {
    /// Waits until the input's writes are stored: the tasks to kill.
    pub async fn stored(self) -> Result<Vec<TaskId>, WriteError> {
        self.stored.wait().await?;
        Ok(self.kills)
    }
}

/// Why a change did not happen, or was not stored.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The book refused it: nothing changed.
    #[error(transparent)]
    Book(#[from] BookError),
    /// It could not be stored: the service is stopping.
    #[error(transparent)]
    Store(#[from] WriteError),
}

/// Logs a kill the book asked for: the ones an operator should hear of at `warn`.
fn log_kill(task: &TaskId, why: KillWhy) {
    match why {
        KillWhy::Unhealthy => tracing::warn!(task_id = %task, "replica unhealthy; replacing it"),
        KillWhy::Unknown => tracing::warn!(task_id = %task, "killing a task no job is waiting on"),
        KillWhy::TimedOut => tracing::info!(task_id = %task, "killing a task past its time limit"),
        _ => tracing::debug!(task_id = %task, why = why.as_str(), "killing a task"),
    }
}

/// A change to a job, as the event stream (`GET /api/v1/jobs/events`) sends it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum JobEvent {
    /// A job was submitted or changed: its summary now (event `job`).
    Job(JobSummary),
    /// A job was deleted (event `deleted`).
    Deleted {
        /// Its name.
        name: String,
    },
}

impl JobEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Job(_) => "job",
            Self::Deleted { .. } => "deleted",
        }
    }
}

/// How many events a slow reader of the stream may fall behind before it misses some.
pub const EVENT_BUFFER: usize = 4096;

impl Shared {
    /// The book, locked. The lock is never held across an `.await`.
    pub fn lock_book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The framework id, once registered.
    pub fn framework_id(&self) -> Option<FrameworkId> {
        *self
            .framework_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn registered(&self, id: FrameworkId) {
        *self
            .framework_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(id);
    }

    /// Tells the event stream's readers about job `name` as `book` has it now.
    pub fn publish(&self, book: &Book, name: &str) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let event = match book.summary(name) {
            Some(summary) => JobEvent::Job(summary),
            None => JobEvent::Deleted {
                name: name.to_owned(),
            },
        };
        // No reader is not an error.
        let _ = self.events.send(event);
    }

    /// A new reader of the event stream.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<JobEvent> {
        self.events.subscribe()
    }

    /// Hands `input` to the book at time `now` and carries out its effects ([`Shared::carry_out`]).
    /// Refused, it changed nothing.
    pub fn apply(&self, input: Input, now: Millis) -> Result<Applied, BookError> {
        let mut book = self.lock_book();
        let effects = book.handle(input, now)?;
        Ok(self.carry_out(&book, effects))
    }

    /// [`Shared::apply`], then waits until its writes are stored: the tasks to kill.
    pub async fn change(&self, input: Input) -> Result<Vec<TaskId>, ChangeError> {
        let applied = self.apply(input, now_ms())?;
        Ok(applied.stored().await?)
    }

    /// Carries out `effects` that `book` (still locked) made: writes go to the writer in
    /// order, changed jobs to the event stream; the kills come back to the caller.
    pub fn carry_out(&self, book: &Book, effects: Vec<Effect>) -> Applied {
        let mut writes = Vec::new();
        let mut later = true;
        let mut kills = Vec::new();
        for effect in effects {
            later &= matches!(
                effect,
                Effect::StoreEnd(_) | Effect::Kill { .. } | Effect::Changed(_)
            );
            match effect {
                Effect::Kill { task, why } => {
                    log_kill(&task, why);
                    kills.push(task);
                }
                Effect::Changed(name) => self.publish(book, &name),
                write => writes.extend(Write::of(write)),
            }
        }
        Applied {
            kills,
            stored: self.writer.send(writes, later),
        }
    }

    /// The coordinator removed the framework: its id is forgotten, and every attempt in flight
    /// ends as lost (the removal killed it), so its index runs again.
    pub(crate) fn framework_removed(&self) {
        *self
            .framework_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        *self.to_check.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.writer.send(vec![Write::FrameworkId(None)], false);
        if let Err(e) = self.apply(Input::FrameworkRemoved, now_ms()) {
            tracing::error!(error = %e, "the book refused the framework's removal");
        }
    }

    pub(crate) fn offers_seen(&self, now: Millis) {
        self.last_offers_ms.store(now, Ordering::Relaxed);
    }

    /// Kills tasks (best effort: a task the coordinator no longer knows has ended anyway).
    pub async fn kill(&self, tasks: &[TaskId]) {
        let Some(id) = self.framework_id() else {
            return;
        };
        for task in tasks {
            if let Err(e) = self.client.kill(id, task).await {
                tracing::warn!(task_id = %task, error = %e, "kill failed");
            }
        }
    }
}
