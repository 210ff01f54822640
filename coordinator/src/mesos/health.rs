//! Mesos' `TaskInfo.health_check` as a Parley [`HealthCheck`]: `COMMAND` (or the
//! legacy form with only `command`) and `HTTP` (scheme `http`) checks, with
//! `interval_seconds`, `timeout_seconds`, `grace_period_seconds` and `consecutive_failures`
//! (Parley's defaults where absent). `TCP`, `HTTPS` and `statuses` are refused naming the field;
//! `delay_seconds` is accepted and not used (Parley checks from the start, and the grace period
//! covers a slow start).

use protocol::health::HttpProbe;
use protocol::{CommandSpec, HealthCheck};

use super::types::MesosHealthCheck;

/// The Mesos field every message names.
pub const FIELD: &str = "TaskInfo.health_check";

/// Why a Mesos health check has no Parley equivalent; the message names the field under
/// [`FIELD`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MesosHealthError {
    /// A `COMMAND` check without `command`.
    #[error("{FIELD}.command is missing for a COMMAND check")]
    NoCommand,
    /// An `HTTP` check without `http`.
    #[error("{FIELD}.http is missing for an HTTP check")]
    NoHttp,
    /// A scheme other than `http`.
    #[error("{FIELD}.http.scheme: only http is supported")]
    Scheme,
    /// `statuses` given.
    #[error("{FIELD}.http.statuses is not supported (2xx and 3xx pass)")]
    Statuses,
    /// `TCP` or another type.
    #[error("{FIELD}.type {kind:?} is not supported; use COMMAND or HTTP")]
    Kind {
        /// The type given.
        kind: String,
    },
}

/// The Parley check, or why it cannot be had (naming the Mesos field).
pub fn health_check(m: &MesosHealthCheck) -> Result<HealthCheck, MesosHealthError> {
    let kind = m.kind.as_deref().unwrap_or(match m.http {
        Some(_) => "HTTP",
        None => "COMMAND",
    });
    let mut check = match kind {
        "COMMAND" => {
            let Some(cmd) = &m.command else {
                return Err(MesosHealthError::NoCommand);
            };
            let value = cmd.value.clone().unwrap_or_default();
            let command = if cmd.shell.unwrap_or(true) {
                CommandSpec::Shell(value)
            } else {
                let mut argv = vec![value];
                argv.extend(cmd.arguments.iter().skip(1).cloned());
                CommandSpec::Argv(argv)
            };
            HealthCheck::command(command)
        }
        "HTTP" => {
            let Some(http) = &m.http else {
                return Err(MesosHealthError::NoHttp);
            };
            if http.scheme.as_deref().is_some_and(|s| s != "http") {
                return Err(MesosHealthError::Scheme);
            }
            if !http.statuses.is_empty() {
                return Err(MesosHealthError::Statuses);
            }
            let mut check = HealthCheck::http(http.port, "/");
            check.http = Some(HttpProbe {
                port: http.port,
                path: http.path.clone().unwrap_or_else(|| "/".into()),
            });
            check
        }
        other => {
            return Err(MesosHealthError::Kind {
                kind: other.to_string(),
            })
        }
    };
    check.interval_s = m.interval_seconds;
    check.timeout_s = m.timeout_seconds;
    check.grace_period_s = m.grace_period_seconds;
    check.consecutive_failures = m.consecutive_failures;
    Ok(check)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn parse(v: serde_json::Value) -> Result<HealthCheck, MesosHealthError> {
        health_check(&serde_json::from_value(v).unwrap())
    }

    #[test]
    fn command_and_http_checks_translate() {
        let c = parse(
            json!({"type": "COMMAND", "command": {"value": "test -f ok"},
                             "interval_seconds": 2, "consecutive_failures": 5,
                             "delay_seconds": 15}),
        )
        .unwrap();
        assert_eq!(c.command, Some(CommandSpec::Shell("test -f ok".into())));
        assert_eq!((c.interval(), c.failures()), (2.0, 5));
        let legacy = parse(json!({"command": {"value": "true"}})).unwrap();
        assert!(legacy.command.is_some());
        let h = parse(
            json!({"type": "HTTP", "http": {"port": 8080, "path": "/health"},
                             "grace_period_seconds": 30}),
        )
        .unwrap();
        assert_eq!(h.http.as_ref().unwrap().path, "/health");
        assert_eq!(h.grace_period(), 30.0);
    }

    #[test]
    fn what_parley_cannot_do_is_refused_naming_the_field() {
        for (v, needle) in [
            (json!({"type": "TCP", "tcp": {"port": 1}}), "type"),
            (
                json!({"type": "HTTP", "http": {"port": 1, "scheme": "https"}}),
                "scheme",
            ),
            (
                json!({"type": "HTTP", "http": {"port": 1, "statuses": [200]}}),
                "statuses",
            ),
            (json!({"type": "COMMAND"}), "command"),
            (json!({"type": "HTTP"}), "http"),
        ] {
            let err = parse(v.clone()).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains(FIELD), "{v}: {err}");
        }
    }
}
