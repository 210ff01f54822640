//! [`Writer`]: the one place the service writes its store. Writes come in the order the book
//! made them (they are handed over under the book's lock) and are stored in that order, on a
//! thread of their own, so no lock is held and no tokio worker blocks while the disk syncs.
//!
//! Writes that must be stored before the service goes on (a job's record before the API
//! answers, a launch before it is sent) are committed at once, together with everything
//! queued before them; whoever waits on them hears when they are stored. An attempt's end may
//! wait: ends are kept and committed with the next write that may not wait, or after
//! [`LATER_MS`] at most, so a stream of status updates costs a transaction a second, not one
//! each. Writes queued while a commit runs are committed together by the next (group commit).
//!
//! A store that cannot be written breaks the service's promise (every index runs once), so
//! the service stops when a write fails: it fails loudly, and its next start carries on from
//! what was stored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::store::{Store, StoreError, Write};

/// The longest an attempt's end waits to be stored, in milliseconds.
pub const LATER_MS: u64 = 1_000;

/// The most writes kept waiting: past this many, they are committed at once.
pub const MAX_WAITING: usize = 10_000;

/// A write the store refused; the service stops.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the jobs store could not be written ({0}); the service stops, and its next start carries on from what was stored")]
pub struct WriteError(Arc<StoreError>);

impl WriteError {
    /// The store's own error.
    pub fn store(&self) -> &StoreError {
        &self.0
    }
}

/// Writes handed to the writer at once.
struct Batch {
    writes: Vec<Write>,
    /// Whether they may wait ([`LATER_MS`]).
    later: bool,
    done: Option<oneshot::Sender<Result<(), WriteError>>>,
}

/// Waits for a batch of writes to be stored ([`Writer::send`]).
#[derive(Debug)]
pub struct Stored(Option<oneshot::Receiver<Result<(), WriteError>>>);

impl Stored {
    /// Nothing to wait for.
    pub fn nothing() -> Self {
        Self(None)
    }

    /// Returns once the writes are stored, or the store refused them.
    pub async fn wait(self) -> Result<(), WriteError> {
        let Some(rx) = self.0 else {
            return Ok(());
        };
        // A writer gone before answering has stopped, and stored nothing more.
        rx.await
            .unwrap_or_else(|_| Err(WriteError(Arc::new(StoreError::Closed))))
    }
}

/// The store's one writer.
#[derive(Debug)]
pub struct Writer {
    tx: Mutex<Option<mpsc::Sender<Batch>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    failed: Arc<AtomicBool>,
}

impl Writer {
    /// Starts the writer over `store`; `stop` is cancelled when a write fails.
    pub fn start(store: Store, stop: CancellationToken) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let failed = Arc::new(AtomicBool::new(false));
        let thread = {
            let failed = failed.clone();
            std::thread::Builder::new()
                .name("jobs-store".into())
                .spawn(move || run(&store, &rx, &failed, &stop))?
        };
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            failed,
        })
    }

    /// Queues `writes`, after every write queued before; `later` when they may wait
    /// ([`LATER_MS`]). Wait on the answer to know they are stored.
    pub fn send(&self, writes: Vec<Write>, later: bool) -> Stored {
        if writes.is_empty() {
            return Stored::nothing();
        }
        let (done, rx) = if later {
            (None, None)
        } else {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        };
        let batch = Batch {
            writes,
            later,
            done,
        };
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tx| tx.send(batch).is_ok());
        if !sent {
            tracing::error!("a write came after the jobs store was closed; it is not stored");
        }
        Stored(rx)
    }

    /// Whether a write has failed (the service is stopping).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Stores what waits and stops the writer; later writes are refused. Blocks until the
    /// last commit is done.
    pub fn close(&self) {
        drop(
            self.tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                tracing::error!("the jobs store's writer panicked");
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer's loop: gathers batches, commits when one may not wait (or the oldest waiting
/// write is due), answers the waiters.
fn run(store: &Store, rx: &mpsc::Receiver<Batch>, failed: &AtomicBool, stop: &CancellationToken) {
    let mut pending: Vec<Write> = Vec::new();
    let mut waiters: Vec<oneshot::Sender<Result<(), WriteError>>> = Vec::new();
    let mut oldest: Option<Instant> = None;
    loop {
        let wait = oldest.map_or(Duration::from_secs(3600), |t| {
            Duration::from_millis(LATER_MS).saturating_sub(t.elapsed())
        });
        let mut now_due = false;
        let mut closed = false;
        match rx.recv_timeout(wait) {
            Ok(batch) => {
                let mut take = |b: Batch| {
                    now_due |= !b.later;
                    pending.extend(b.writes);
                    waiters.extend(b.done);
                };
                take(batch);
                // Everything queued meanwhile goes in the same commit.
                while let Ok(b) = rx.try_recv() {
                    take(b);
                }
                oldest.get_or_insert_with(Instant::now);
            }
            Err(RecvTimeoutError::Timeout) => now_due = true,
            Err(RecvTimeoutError::Disconnected) => closed = true,
        }
        let due = now_due || closed || pending.len() >= MAX_WAITING;
        if due && !pending.is_empty() {
            let answer = store.write(&pending).map_err(|e| WriteError(Arc::new(e)));
            if let Err(e) = &answer {
                tracing::error!(error = %e, writes = pending.len(), "the jobs store cannot be written; stopping");
                failed.store(true, Ordering::Relaxed);
                stop.cancel();
            }
            for w in waiters.drain(..) {
                // A waiter that gave up needs no answer.
                let _ = w.send(answer.clone());
            }
            pending.clear();
            oldest = None;
        }
        if closed {
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::book::JobRecord;

    fn job(name: &str) -> Write {
        let spec = crate::spec::parse_any(&format!(
            "name = \"{name}\"\ncommand = \"true\"\n[resources]\ncpus = 1\n"
        ))
        .unwrap();
        Write::Job {
            name: name.into(),
            record: Box::new(JobRecord::new(&spec, 0, 0)),
        }
    }

    #[tokio::test]
    async fn writes_are_stored_in_order_and_ends_wait_for_the_next_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.redb");
        let writer = Writer::start(Store::open(&path).unwrap(), CancellationToken::new()).unwrap();
        // Forgotten after it was written: in order, nothing is left.
        writer.send(vec![job("a")], true);
        writer
            .send(vec![Write::ForgetJob("a".into())], false)
            .wait()
            .await
            .unwrap();
        writer.send(vec![job("b")], false).wait().await.unwrap();
        writer.close();
        let store = Store::open(&path).unwrap();
        assert!(store.job("a").unwrap().is_none());
        assert!(store.job("b").unwrap().is_some());
    }

    #[tokio::test]
    async fn a_write_that_may_wait_is_stored_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.redb");
        let writer = Writer::start(Store::open(&path).unwrap(), CancellationToken::new()).unwrap();
        // Nobody waits on a write that may wait; closing stores it.
        writer.send(vec![job("a")], true);
        writer.close();
        assert!(!writer.failed());
        assert!(
            writer.send(vec![job("b")], false).wait().await.is_err(),
            "closed"
        );
        let store = Store::open(&path).unwrap();
        assert!(store.job("a").unwrap().is_some());
        assert!(store.job("b").unwrap().is_none());
    }

    #[tokio::test]
    async fn a_failed_write_answers_its_waiters_and_stops_the_service() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("jobs.redb")).unwrap();
        store.refuse_writes = true;
        let stop = CancellationToken::new();
        let writer = Writer::start(store, stop.clone()).unwrap();
        let err = writer.send(vec![job("a")], false).wait().await.unwrap_err();
        assert!(matches!(err.store(), StoreError::Refused), "{err}");
        assert!(writer.failed());
        assert!(stop.is_cancelled());
    }
}
