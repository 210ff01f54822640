//! Faults injected into a [`CoordinatorClient`](crate::CoordinatorClient)'s calls, so tests
//! drive the driver's failure paths (splits, retries, revives, interrupted accepts) against a
//! real coordinator: a call can be answered with an error without being sent, delayed, refused
//! as by a closed port, or carried out with its answer lost.
//!
//! Set one with [`CoordinatorClient::with_faults`](crate::CoordinatorClient::with_faults) or
//! [`Driver::with_faults`](crate::Driver::with_faults). Production code sets none, and then a
//! call costs one `Option` check more.

use std::time::Duration;

/// A call about to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The HTTP method, e.g. `POST`.
    pub method: &'a str,
    /// The path and query, e.g. `/api/v1/frameworks/{id}/accepts`.
    pub path: &'a str,
    /// The size of the request body in bytes (0 without one).
    pub body_bytes: usize,
}

impl Call<'_> {
    /// The last segment of the path, without the query: `accepts`, `decline`, `revive`,
    /// `events`, ...
    pub fn action(&self) -> &str {
        let path = self.path.split('?').next().unwrap_or_default();
        path.rsplit('/').next().unwrap_or_default()
    }
}

/// What happens to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Not sent: answered with this HTTP status and error code (e.g. `413 body_too_large`,
    /// `429 rate_limited`, `503 unavailable`), as a refusal that changed nothing.
    Answer {
        /// The HTTP status.
        status: u16,
        /// The error code in the body.
        code: String,
    },
    /// Sent after this wait.
    Delay(Duration),
    /// Not sent: the connection is refused, as by a coordinator whose process is gone.
    Refuse,
    /// Sent and carried out, but the answer is lost, as when a connection resets after the
    /// request went out: the caller cannot tell whether it happened
    /// ([`SdkError::in_doubt`](crate::SdkError::in_doubt)).
    LoseAnswer,
}

/// Decides the fault, if any, of each call. Called once per call, before it is sent (a call
/// re-sent to follow the leader is asked about once).
pub trait FaultInjector: Send + Sync + std::fmt::Debug {
    /// The fault for `call`, or `None` to send it as it is.
    fn fault(&self, call: &Call<'_>) -> Option<Fault>;
}

/// An address nothing listens on: a [`Fault::Refuse`] call is sent there, so it fails as a
/// real refused connection does.
pub(crate) const REFUSING_URL: &str = "http://127.0.0.1:1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_is_the_last_path_segment() {
        let call = |path| Call {
            method: "POST",
            path,
            body_bytes: 0,
        };
        assert_eq!(call("/api/v1/frameworks/x/accepts").action(), "accepts");
        assert_eq!(
            call("/api/v1/frameworks/x/tasks/t/output?file=a/b").action(),
            "output"
        );
        assert_eq!(call("").action(), "");
    }
}
