//! [`Shared`]: what the scheduler, the API and the service's timer share (the book and the
//! store behind one lock, the coordinator client, the event stream), and the events
//! ([`JobEvent`]) the API streams. Below the API and the scheduler; the service builds it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use framework_sdk::{CoordinatorClient, FrameworkId, TaskId};
use tokio_util::sync::CancellationToken;

use crate::book::{AttemptRecord, Book, JobSummary};
use crate::clock::{now_ms, Millis};
use crate::store::{Store, StoreError};
use crate::users::Users;

/// What the scheduler, the API and the timer share.
#[derive(Debug)]
pub struct Shared {
    pub(crate) book: Mutex<Book>,
    /// The durable state; written while the book's lock is held, so the two agree.
    pub store: Store,
    /// The coordinator, for kills, revives and reconciliation outside the driver's callbacks.
    pub client: CoordinatorClient,
    pub(crate) framework_id: Mutex<Option<FrameworkId>>,
    /// Tasks to ask the coordinator about once registered (those in flight at start-up).
    pub(crate) to_check: Mutex<Option<Vec<TaskId>>>,
    pub(crate) last_offers_ms: AtomicU64,
    /// Ends of attempts not stored yet: written with the next launches, or by the next tick.
    pub(crate) ends: Mutex<Vec<AttemptRecord>>,
    /// The API's bearer token, if it has one.
    pub api_token: Option<String>,
    /// The API's users, if it has a users file.
    pub users: Option<Users>,
    pub(crate) events: tokio::sync::broadcast::Sender<JobEvent>,
    /// Cancelled when the service stops; event streams end with it, so the API's graceful
    /// shutdown does not wait on them.
    pub stop: CancellationToken,
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

    /// The coordinator removed the framework: its id is forgotten, and every attempt in flight
    /// ends as lost (the removal killed it), so its index runs again.
    pub(crate) fn framework_removed(&self) {
        *self
            .framework_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        *self.to_check.lock().unwrap_or_else(PoisonError::into_inner) = None;
        if let Err(e) = self.store.clear_framework_id() {
            tracing::error!(error = %e, "cannot forget the framework id");
        }
        let now = now_ms();
        let mut book = self.lock_book();
        let mut records = Vec::new();
        for task in book.in_flight() {
            if let Some(r) = book.not_launched(&task, "the framework was removed", now) {
                records.push(r);
            }
        }
        if let Err(e) = self.store.put_attempts(&records) {
            tracing::error!(error = %e, "cannot record attempts");
        }
        for r in &records {
            self.publish(&book, &r.job);
        }
    }

    /// Keeps an attempt's end to store soon: ends come one status update at a time, and a
    /// transaction each would cap the service at the disk's sync rate. An end lost in a crash
    /// costs nothing: the attempt is restored as running, and reconciliation brings its end
    /// back from the coordinator.
    pub(crate) fn record_end(&self, record: AttemptRecord) {
        self.ends
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record);
    }

    /// Stores `records` together with the ends kept so far, in one transaction: an index's end
    /// is never stored after its next attempt's launch.
    pub fn put_attempts(&self, records: &[AttemptRecord]) -> Result<(), StoreError> {
        let mut all =
            std::mem::take(&mut *self.ends.lock().unwrap_or_else(PoisonError::into_inner));
        all.extend_from_slice(records);
        self.store.put_attempts(&all)
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
