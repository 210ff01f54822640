//! [`Doorbell`]: how the allocation loop is woken. Rung from any thread (request handlers, the
//! maintenance loop) and waited on, with a deadline, by the allocation loop's own OS thread.
//! A std condition variable rather than tokio's `Notify`, because the waiter is not a task:
//! the kernel wakes it at once, where a task would wait its turn behind every request queued
//! on the runtime's workers.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Why [`Doorbell::wait_until`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// Rung since the last wait (the ring is used up).
    Rung,
    /// The deadline passed without a ring.
    Deadline,
    /// Closed: the waiter must stop.
    Closed,
}

#[derive(Debug, Default)]
struct Bell {
    rung: bool,
    closed: bool,
}

/// A ring flag and a closed flag under one lock, with a condition variable.
#[derive(Debug, Default)]
pub struct Doorbell {
    bell: Mutex<Bell>,
    wake: Condvar,
}

impl Doorbell {
    fn lock(&self) -> MutexGuard<'_, Bell> {
        // Two flags cannot be left half-changed: a poisoned lock holds good data.
        self.bell.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rings: the next (or the current) wait returns [`Woken::Rung`]. Rings before that wait
    /// count once.
    pub fn ring(&self) {
        self.lock().rung = true;
        self.wake.notify_one();
    }

    /// Closes: every wait returns [`Woken::Closed`] until [`Doorbell::open`].
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }

    /// Opens again (a restarted waiter).
    pub fn open(&self) {
        self.lock().closed = false;
    }

    /// Waits for a ring, the deadline, or the close, whichever comes first.
    pub fn wait_until(&self, deadline: Instant) -> Woken {
        let mut bell = self.lock();
        loop {
            if bell.closed {
                return Woken::Closed;
            }
            if std::mem::take(&mut bell.rung) {
                return Woken::Rung;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Woken::Deadline;
            }
            bell = self
                .wake
                .wait_timeout(bell, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Sleeps for `d` unless closed first (rings are left for the next wait); false when
    /// closed.
    pub fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut bell = self.lock();
        loop {
            if bell.closed {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            bell = self
                .wake
                .wait_timeout(bell, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Closes its doorbell when dropped: the allocation loop's task holds one, so its thread
/// stops when the task ends or the runtime drops it.
#[derive(Debug)]
pub struct CloseOnDrop<'a>(pub &'a Doorbell);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn rings_before_a_wait_count_once_and_the_deadline_returns() {
        let bell = Doorbell::default();
        bell.ring();
        bell.ring();
        assert_eq!(bell.wait_until(Instant::now() + LONG), Woken::Rung);
        assert_eq!(bell.wait_until(Instant::now()), Woken::Deadline);
        assert_eq!(
            bell.wait_until(Instant::now() + Duration::from_millis(5)),
            Woken::Deadline
        );
    }

    #[test]
    fn a_ring_or_a_close_from_another_thread_wakes_the_waiter() {
        let bell = Arc::new(Doorbell::default());
        let waiter = {
            let bell = Arc::clone(&bell);
            std::thread::spawn(move || {
                let first = bell.wait_until(Instant::now() + LONG);
                let second = bell.wait_until(Instant::now() + LONG);
                (first, second)
            })
        };
        bell.ring();
        // The second wait returns only when closed (a long deadline, no more rings).
        while !waiter.is_finished() {
            bell.close();
            std::thread::yield_now();
        }
        let (first, second) = waiter.join().unwrap_or((Woken::Deadline, Woken::Deadline));
        // The ring may land before or after the close: either way the waiter ended on it.
        assert!(matches!(first, Woken::Rung | Woken::Closed));
        assert_eq!(second, Woken::Closed);
    }

    #[test]
    fn closed_sleeps_end_at_once_and_open_undoes_the_close() {
        let bell = Doorbell::default();
        {
            let _closer = CloseOnDrop(&bell);
        }
        assert!(!bell.sleep(LONG));
        assert_eq!(bell.wait_until(Instant::now() + LONG), Woken::Closed);
        bell.open();
        bell.ring();
        assert!(
            bell.sleep(Duration::from_millis(1)),
            "a ring does not end a sleep"
        );
        assert_eq!(bell.wait_until(Instant::now() + LONG), Woken::Rung);
    }
}
