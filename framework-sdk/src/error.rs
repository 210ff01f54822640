//! [`SdkError`]: everything that can go wrong between a framework and the coordinator.

use protocol::ErrorBody;

/// An error of the SDK. A coordinator's 4xx answer keeps its status, code and message.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    /// The coordinator refused a request (4xx): the request was wrong and retrying it as is will
    /// not help. `code` and `message` come from the coordinator's error body.
    #[error("coordinator rejected the request ({status} {code}): {message}")]
    Rejected {
        /// The HTTP status, 400 to 499.
        status: u16,
        /// The coordinator's snake_case error code, e.g. `offer_not_found`.
        code: String,
        /// The coordinator's explanation.
        message: String,
    },
    /// The coordinator failed (5xx); the request may succeed later.
    #[error("coordinator error ({status}): {message}")]
    Server {
        /// The HTTP status, 500 to 599.
        status: u16,
        /// The body, or the error message in it.
        message: String,
    },
    /// The coordinator could not be reached, or the connection broke.
    #[error("cannot reach the coordinator: {0}")]
    Transport(#[from] reqwest::Error),
    /// The call broke off after it was sent (the connection reset, or no answer came in
    /// time): it may have been carried out or not.
    #[error("the call to the coordinator broke off after it was sent: {0}")]
    Interrupted(String),
    /// The coordinator answered something that does not follow the API.
    #[error("unexpected answer from the coordinator: {0}")]
    Protocol(String),
    /// The coordinator removed the framework (its stream said so, or it no longer knows the id).
    #[error("the coordinator removed the framework: {0}")]
    FrameworkRemoved(String),
    /// The driver could not reconnect within the framework's failover timeout, so the coordinator
    /// has torn the framework down.
    #[error("could not reconnect within the failover timeout of {0:?}")]
    FailoverTimeoutExceeded(std::time::Duration),
    /// The driver's configuration is invalid.
    #[error("invalid driver configuration: {0}")]
    InvalidConfig(String),
    /// A task could not be built from the parts given.
    #[error(transparent)]
    InvalidTask(#[from] crate::TaskError),
}

impl SdkError {
    /// Builds the error for a non-success HTTP answer from its status and body. The body is parsed
    /// as `protocol::ErrorBody` when it is one; otherwise the raw text is kept.
    pub fn from_response(status: u16, body: &str) -> Self {
        let parsed = serde_json::from_str::<ErrorBody>(body).ok();
        if (400..500).contains(&status) {
            let (code, message) = match parsed {
                Some(b) => (b.error.code, b.error.message),
                None => ("unknown".to_owned(), truncate(body)),
            };
            SdkError::Rejected {
                status,
                code,
                message,
            }
        } else {
            let message = match parsed {
                Some(b) => b.error.message,
                None => truncate(body),
            };
            SdkError::Server { status, message }
        }
    }

    /// The error for one refused entry of a batch answer: its status and error detail, as a
    /// call of its own would have been answered.
    pub fn from_detail(status: u16, detail: protocol::ErrorDetail) -> Self {
        if (400..500).contains(&status) {
            SdkError::Rejected {
                status,
                code: detail.code,
                message: detail.message,
            }
        } else {
            SdkError::Server {
                status,
                message: detail.message,
            }
        }
    }

    /// True when retrying later may succeed (server errors and broken connections).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            SdkError::Server { .. } | SdkError::Transport(_) | SdkError::Interrupted(_)
        )
    }

    /// True when the call may have been carried out although it failed: the connection
    /// broke, or the answer did not come in time, after the request was sent. (A call that
    /// could not connect, or that the coordinator answered with an error, changed nothing.)
    pub fn in_doubt(&self) -> bool {
        match self {
            SdkError::Interrupted(_) => true,
            SdkError::Transport(e) => !e.is_connect() && !e.is_builder(),
            _ => false,
        }
    }

    /// The coordinator's error code for a rejected request.
    pub fn code(&self) -> Option<&str> {
        match self {
            SdkError::Rejected { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Keeps error messages readable when a proxy answers with a whole HTML page.
fn truncate(body: &str) -> String {
    const MAX: usize = 500;
    if body.len() <= MAX {
        return body.to_owned();
    }
    let mut end = MAX;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &body[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_4xx_keeps_code_and_message() {
        let body = r#"{"error": {"code": "task_does_not_fit", "message": "cpus 4 > 2 offered"}}"#;
        let err = SdkError::from_response(422, body);
        match &err {
            SdkError::Rejected {
                status,
                code,
                message,
            } => {
                assert_eq!(*status, 422);
                assert_eq!(code, "task_does_not_fit");
                assert_eq!(message, "cpus 4 > 2 offered");
            }
            other => panic!("wrong variant {other:?}"),
        }
        assert_eq!(err.code(), Some("task_does_not_fit"));
        assert!(!err.is_transient());
        assert!(err.to_string().contains("cpus 4 > 2 offered"));
    }

    #[test]
    fn non_json_bodies_and_5xx() {
        let err = SdkError::from_response(404, "not found");
        assert_eq!(err.code(), Some("unknown"));
        let err = SdkError::from_response(503, &"x".repeat(2000));
        assert!(err.is_transient());
        assert!(err.to_string().len() < 600);
    }
}
