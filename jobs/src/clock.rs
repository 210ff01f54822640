//! Time as the service keeps it: [`Millis`] since the Unix epoch, and [`now_ms`]. Below the
//! book (which is passed the time) and everything that reads the clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}
