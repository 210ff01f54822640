//! [`CtlError`]: everything that can go wrong, each with its exit code and a message that
//! says what to do.

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the coordinator answered with an error (4xx / 5xx), or named no such thing.
pub const EXIT_API: i32 = 1;
/// Exit code: bad command line (clap's own usage errors exit 2 as well).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the coordinator could not be reached.
pub const EXIT_UNREACHABLE: i32 = 3;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// No answer from the coordinator (connection refused, DNS, TLS, timeout).
    #[error("cannot reach the coordinator at {url}: {reason}; is it running? set --coordinator or PARLEY_COORDINATOR")]
    Unreachable {
        /// The coordinator's base URL.
        url: String,
        /// Why, in a few words (e.g. `connection refused`).
        reason: String,
    },
    /// No answer from the jobs service.
    #[error("cannot reach the jobs service at {url}: {reason}; is it running? set --jobs-url or PARLEY_JOBS_URL")]
    JobsUnreachable {
        /// The service's base URL.
        url: String,
        /// Why, in a few words.
        reason: String,
    },
    /// A job waited for (`run --wait`) failed or was stopped.
    #[error("{0}")]
    JobFailed(String),
    /// The coordinator answered with an error body.
    #[error("{}", api_message(*.status, code, message))]
    Api {
        /// The HTTP status.
        status: u16,
        /// The API's error code (`framework_not_found`, ...).
        code: String,
        /// The API's message.
        message: String,
    },
    /// What was named does not exist, or names several things.
    #[error("{0}")]
    NotFound(String),
    /// A bad argument or setting (CA file, URL, token).
    #[error("{0}")]
    Usage(String),
    /// The coordinator answered something this client does not understand.
    #[error("unexpected answer from the coordinator: {0}")]
    Protocol(String),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

fn api_message(status: u16, code: &str, message: &str) -> String {
    let hint = match status {
        401 => "; give a token with --token or PARLEY_TOKEN",
        403 => "; the token's principal may not do this (reads need an operator token, changes an admin one)",
        _ => "",
    };
    format!("{status} {code}: {message}{hint}")
}

impl CtlError {
    /// The process exit code for this error (see the `EXIT_*` constants).
    pub fn exit_code(&self) -> i32 {
        match self {
            CtlError::Unreachable { .. } | CtlError::JobsUnreachable { .. } => EXIT_UNREACHABLE,
            CtlError::Usage(_) => EXIT_USAGE,
            CtlError::Api { .. }
            | CtlError::NotFound(_)
            | CtlError::JobFailed(_)
            | CtlError::Protocol(_)
            | CtlError::Output(_) => EXIT_API,
        }
    }
}

/// The innermost cause of an error, in a few words: `connection refused` rather than
/// reqwest's "error sending request for url (...)".
pub(crate) fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut last: &(dyn std::error::Error + 'static) = error;
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
                std::io::ErrorKind::TimedOut => return "timed out".into(),
                _ => {}
            }
        }
        last = cause;
        source = cause.source();
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_exit_codes() {
        let e = CtlError::Unreachable {
            url: "http://127.0.0.1:1".into(),
            reason: "connection refused".into(),
        };
        assert_eq!(e.exit_code(), EXIT_UNREACHABLE);
        assert_eq!(
            e.to_string(),
            "cannot reach the coordinator at http://127.0.0.1:1: connection refused; is it running? set --coordinator or PARLEY_COORDINATOR"
        );
        let e = CtlError::Api {
            status: 401,
            code: "unauthorized".into(),
            message: "missing bearer token".into(),
        };
        assert_eq!(e.exit_code(), EXIT_API);
        assert!(e
            .to_string()
            .starts_with("401 unauthorized: missing bearer token; give a token"));
        assert_eq!(CtlError::Usage("x".into()).exit_code(), EXIT_USAGE);
    }

    #[test]
    fn root_cause_finds_the_io_error() {
        #[derive(Debug, thiserror::Error)]
        #[error("error sending request")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(root_cause(&e), "connection refused");
        let e = Outer(std::io::Error::other("dns failed"));
        assert_eq!(root_cause(&e), "dns failed");
    }
}
