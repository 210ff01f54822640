//! Polling with a deadline. A test that waits for something to happen polls for it every
//! [`POLL`] and fails with [`TimedOut`] (naming what it waited for) once the deadline passes;
//! it never sleeps for a fixed time and hopes.
//!
//! The clock is tokio's, so a test that pauses time (`start_paused`) moves the deadlines with it.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often the helpers check their condition.
pub const POLL: Duration = Duration::from_millis(10);

/// A wait that ran past its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOut {
    /// What was waited for.
    pub what: String,
    /// How long it was waited for.
    pub after: Duration,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out after {:?} waiting for {}",
            self.after, self.what
        )
    }
}

impl std::error::Error for TimedOut {}

/// The instant `timeout` from now, on tokio's clock.
pub fn deadline_in(timeout: Duration) -> Instant {
    Instant::now() + timeout
}

/// Polls `check` until it returns `Some` (whose value is returned), or fails after `timeout`
/// naming `what`. The check runs at least once, even with a zero timeout.
pub async fn wait_until<T, F, Fut>(
    timeout: Duration,
    what: &str,
    mut check: F,
) -> Result<T, TimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = deadline_in(timeout);
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(TimedOut {
                what: what.to_owned(),
                after: timeout,
            });
        }
        tokio::time::sleep_until((now + POLL).min(deadline)).await;
    }
}

/// Polls `cond` until it is true, or fails after `timeout` naming `what`. For a synchronous
/// condition pass `|| std::future::ready(cond())`.
pub async fn wait_for<F, Fut>(timeout: Duration, what: &str, mut cond: F) -> Result<(), TimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_until(timeout, what, || {
        let holds = cond();
        async move { holds.await.then_some(()) }
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test]
    async fn returns_the_first_value_and_polls_until_then() {
        let calls = Cell::new(0);
        let got = wait_until(Duration::from_secs(1), "the third call", || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move { (n == 3).then_some(n * 10) }
        })
        .await;
        assert_eq!(got, Ok(30));
        assert_eq!(calls.get(), 3);
    }

    #[tokio::test]
    async fn times_out_naming_what_it_waited_for() {
        let calls = Cell::new(0);
        let err = wait_for(Duration::from_millis(35), "never", || {
            calls.set(calls.get() + 1);
            async { false }
        })
        .await
        .expect_err("the condition never holds");
        assert_eq!(err.to_string(), "timed out after 35ms waiting for never");
        // Checked at the start, and again after each poll period until the deadline.
        assert!(calls.get() >= 2, "checked {} times", calls.get());
    }

    #[tokio::test]
    async fn checks_once_even_with_no_time_left() {
        let got = wait_for(Duration::ZERO, "already true", || std::future::ready(true)).await;
        assert_eq!(got, Ok(()));
    }
}
