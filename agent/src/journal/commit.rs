//! Group commit: one `fdatasync` makes durable every record appended before it.
//!
//! Appends ([`super::Journal::append`]) write to the file under the books' lock and return a
//! [`Mark`], their place in the order; a syncing thread, one per journal, waits until some
//! record appended as [`super::Durability::Synced`] is not yet durable, then syncs the file once
//! for everything appended so far. Whoever must wait for durability (an update's request, a
//! launch's answer) waits on [`Durable::wait`], outside the books' lock, so appends go on
//! while a sync runs and the next sync covers them all.
//!
//! A failed sync is reported to the waiters of the marks it covered (and logged); the next one
//! is tried for the marks after them.

use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::JournalError;

/// The place of an append in the journal's order: durable once every append up to it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Mark(pub(super) u64);

/// How many failed syncs are remembered for waiters that wake late.
const FAILURES_KEPT: usize = 64;

/// What the appenders, the syncing thread and the waiters share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the syncing thread.
    work: Condvar,
    /// The latest durable mark, for waiters.
    synced: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    /// The journal file appends go to now (a compaction replaces it).
    file: Arc<File>,
    path: PathBuf,
    /// The latest mark written to `file`.
    appended: u64,
    /// The latest mark that must become durable.
    wanted: u64,
    /// Every mark up to this one is durable, or its sync failed (`failures`).
    synced: u64,
    /// Marks `(after, up_to]` whose sync failed, with the error, oldest first.
    failures: VecDeque<(u64, u64, String)>,
    /// The journal was dropped: the syncing thread ends.
    closed: bool,
}

/// The group commit of one journal file; owned by [`super::Journal`].
#[derive(Debug)]
pub(super) struct GroupCommit {
    shared: Arc<Shared>,
}

/// A handle to wait for durability with, cheap to clone and usable without the books' lock.
#[derive(Debug, Clone)]
pub struct Durable {
    shared: Arc<Shared>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks everything up to `mark` durable (or failed) and wakes the waiters.
    fn settle(&self, state: &mut State, mark: u64, failure: Option<String>) {
        if mark <= state.synced {
            return;
        }
        if let Some(e) = failure {
            if state.failures.len() == FAILURES_KEPT {
                state.failures.pop_front();
            }
            state.failures.push_back((state.synced, mark, e));
        }
        state.synced = mark;
        self.synced.send_replace(mark);
    }
}

impl GroupCommit {
    /// Starts the syncing thread for `file` (at `path`, for error messages).
    pub(super) fn start(file: Arc<File>, path: PathBuf) -> std::io::Result<GroupCommit> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                file,
                path,
                appended: 0,
                wanted: 0,
                synced: 0,
                failures: VecDeque::new(),
                closed: false,
            }),
            work: Condvar::new(),
            synced: tokio::sync::watch::Sender::new(0),
        });
        let syncer = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("journal-sync".into())
            .spawn(move || sync_loop(&syncer))?;
        Ok(GroupCommit { shared })
    }

    /// Notes an append written to the file; `synced`: it must become durable. Returns its
    /// mark.
    pub(super) fn appended(&self, synced: bool) -> Mark {
        let mut state = self.shared.lock();
        state.appended += 1;
        let mark = state.appended;
        if synced {
            state.wanted = mark;
            self.shared.work.notify_one();
        }
        Mark(mark)
    }

    /// Everything appended so far was made durable by the caller (a sync of its own, or a
    /// compaction that wrote it all again); `file` is where appends go from now on.
    pub(super) fn all_durable(&self, file: Option<Arc<File>>) {
        let mut state = self.shared.lock();
        if let Some(file) = file {
            state.file = file;
        }
        let mark = state.appended;
        state.wanted = state.wanted.max(mark);
        self.shared.settle(&mut state, mark, None);
    }

    /// The latest mark that must become durable (every update queued so far was journaled at
    /// or before it).
    pub(super) fn wanted(&self) -> Mark {
        Mark(self.shared.lock().wanted)
    }

    /// A handle for waiters.
    pub(super) fn durable(&self) -> Durable {
        Durable {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_one();
    }
}

/// The syncing thread: one `fdatasync` for every append made before it, whenever one is wanted.
fn sync_loop(shared: &Shared) {
    let mut state = shared.lock();
    loop {
        while !state.closed && state.wanted <= state.synced {
            state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.closed {
            return;
        }
        let (file, path, target) = (Arc::clone(&state.file), state.path.clone(), state.appended);
        drop(state);
        let failure = file.sync_data().err().map(|e| {
            let e = JournalError::Io { path, source: e };
            tracing::error!("cannot sync the journal: {e}");
            e.to_string()
        });
        state = shared.lock();
        shared.settle(&mut state, target, failure);
    }
}

impl Durable {
    /// True when `mark` is durable already (or its sync failed).
    pub fn is_settled(&self, mark: Mark) -> bool {
        *self.shared.synced.borrow() >= mark.0
    }

    /// Waits until every append up to `mark` is durable; an error when the sync that covered
    /// it failed.
    pub async fn wait(&self, mark: Mark) -> Result<(), JournalError> {
        let mut rx = self.shared.synced.subscribe();
        // The sender lives as long as `self`: this cannot fail.
        let _ = rx.wait_for(|synced| *synced >= mark.0).await;
        let state = self.shared.lock();
        match state
            .failures
            .iter()
            .find(|(after, up_to, _)| *after < mark.0 && mark.0 <= *up_to)
        {
            Some((_, _, e)) => Err(JournalError::Sync(e.clone())),
            None => Ok(()),
        }
    }
}
