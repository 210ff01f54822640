//! [`Writer`]: the one thread that writes the durable registry, so that no fsync runs under
//! the books' lock or on a tokio worker thread.
//!
//! The runtime hands each state call's [`Change`]s to [`Writer::submit`] while it still holds
//! the books' lock, so the writer receives them in the books' order. The writer takes
//! everything queued at once and commits it in one transaction (group commit: under load, one
//! fsync serves many calls), then answers each submitter on its oneshot channel: `true` once the
//! changes are durable, `false` if the transaction failed. A failure is also logged and passed
//! to the `on_error` hook (the runtime counts it), so a change nobody waits for does not fail
//! silently either.
//!
//! [`Writer::read`] queues a read of every record behind the changes queued before it (for
//! `GET /api/v1/registry/backup`): it sees exactly the changes submitted before it, durable.

use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::backup::Source;
use super::{Change, Registry, Snapshot, StoreError};

/// One state call's changes, and who to tell when they are durable; or a read of everything.
enum Job {
    Write {
        changes: Vec<Change>,
        done: oneshot::Sender<bool>,
    },
    Read(oneshot::Sender<Result<(Snapshot, Source), StoreError>>),
}

/// The registry's writer thread. Dropping it (or [`Writer::close`]) writes what is queued,
/// then closes the file.
pub struct Writer {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    /// Starts the thread that owns `store` (any [`Registry`] backend). `on_error` runs on it
    /// after each failed commit.
    pub fn spawn(
        store: impl Registry,
        on_error: impl Fn(&StoreError, &[Change]) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("registry-writer".into())
            .spawn(move || run(store, rx, on_error))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues `changes` (non-blocking). The receiver answers `true` once they are durable,
    /// `false` if writing them failed (or the writer is gone).
    pub fn submit(&self, changes: Vec<Change>) -> oneshot::Receiver<bool> {
        let (done, rx) = oneshot::channel();
        let job = Job::Write { changes, done };
        if let Some(tx) = &self.tx {
            if let Err(mpsc::SendError(Job::Write { changes, done })) = tx.send(job) {
                tracing::error!(?changes, "registry writer is gone");
                let _ = done.send(false);
            }
        }
        rx
    }

    /// Queues a read of every record, after the changes submitted before it. The receiver
    /// answers the records and where they were read from, or why they could not be read (a
    /// dropped sender: the writer is gone).
    pub fn read(&self) -> oneshot::Receiver<Result<(Snapshot, Source), StoreError>> {
        let (done, rx) = oneshot::channel();
        if let Some(tx) = &self.tx {
            // A failed send drops the sender: the receiver sees the writer gone.
            let _ = tx.send(Job::Read(done));
        }
        rx
    }

    /// Writes what is queued and closes the file (blocking until then).
    pub fn close(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        // Closing the channel ends the thread's loop once the queue is empty.
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("registry writer panicked");
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shut();
    }
}

fn run(store: impl Registry, rx: mpsc::Receiver<Job>, on_error: impl Fn(&StoreError, &[Change])) {
    let mut next = rx.recv().ok();
    while let Some(first) = next.take() {
        let (mut changes, mut waiting) = match first {
            Job::Read(done) => {
                let _ = done.send(store.load().map(|snap| (snap, store.source())));
                next = rx.recv().ok();
                continue;
            }
            Job::Write { changes, done } => (changes, vec![done]),
        };
        // Group the writes queued behind; a read waits for them.
        loop {
            match rx.try_recv() {
                Ok(Job::Write {
                    changes: more,
                    done,
                }) => {
                    changes.extend(more);
                    waiting.push(done);
                }
                Ok(read) => {
                    next = Some(read);
                    break;
                }
                Err(_) => break,
            }
        }
        let written = match store.apply(&changes) {
            Ok(()) => true,
            Err(e) => {
                // The books moved on; a restart would come back without these changes.
                tracing::error!(error = %e, ?changes, "registry write failed");
                on_error(&e, &changes);
                false
            }
        };
        for done in waiting {
            // A submitter that stopped waiting is fine: the change is written either way.
            let _ = done.send(written);
        }
        if next.is_none() {
            next = rx.recv().ok();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::store::{Store, StoredFramework};
    use protocol::FrameworkId;

    fn framework() -> StoredFramework {
        StoredFramework {
            id: FrameworkId::new(),
            name: "f".into(),
            role: "eng".parse().unwrap(),
            failover_timeout_s: 30.0,
            registered_at: protocol::now(),
            owner: None,
            gpu_resources: false,
            partition_timeout_s: None,
        }
    }

    #[tokio::test]
    async fn changes_are_durable_when_answered_and_written_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let writer = Writer::spawn(Store::open(&path).unwrap(), |_, _| {}).unwrap();
        let (a, b) = (framework(), framework());
        // Submitted back to back (likely one group commit): the removal of `a` comes after
        // its registration, so `a` ends removed.
        let first = writer.submit(vec![Change::PutFramework(a.clone())]);
        let second = writer.submit(vec![
            Change::PutFramework(b.clone()),
            Change::RemoveFramework(a.id),
        ]);
        assert!(second.await.unwrap());
        assert!(first.await.unwrap());
        writer.close();
        let snap = Store::open(&path).unwrap().load().unwrap();
        assert_eq!(snap.frameworks, vec![b]);
        assert_eq!(snap.removed_frameworks, vec![a.id]);
    }

    #[tokio::test]
    async fn a_read_sees_the_changes_submitted_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let writer = Writer::spawn(Store::open(&path).unwrap(), |_, _| {}).unwrap();
        let (a, b) = (framework(), framework());
        drop(writer.submit(vec![Change::PutFramework(a.clone())]));
        let read = writer.read();
        drop(writer.submit(vec![Change::PutFramework(b)]));
        let (snap, source) = read.await.unwrap().unwrap();
        assert_eq!(snap.frameworks, vec![a]);
        assert_eq!(source.backend, crate::store::backup::Backend::Redb);
        assert_eq!(source.location, path.display().to_string());
        writer.close();
    }

    #[test]
    fn closing_writes_what_is_queued_and_releases_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let writer = Writer::spawn(Store::open(&path).unwrap(), |_, _| {}).unwrap();
        let fw = framework();
        // Nobody waits for this one.
        drop(writer.submit(vec![Change::PutFramework(fw.clone())]));
        writer.close();
        let snap = Store::open(&path).unwrap().load().unwrap();
        assert_eq!(snap.frameworks, vec![fw]);
    }
}
