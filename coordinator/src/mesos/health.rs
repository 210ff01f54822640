//! Mesos' `TaskInfo.health_check` as a Parley [`HealthCheck`]: `COMMAND` (or the
//! legacy form with only `command`) and `HTTP` (scheme `http`) checks, with
//! `interval_seconds`, `timeout_seconds`, `grace_period_seconds` and `consecutive_failures`
//! (Parley's defaults where absent). `TCP`, `HTTPS` and `statuses` are refused naming the field;
//! `delay_seconds` is accepted and not used (Parley checks from the start, and the grace period
//! covers a slow start).

use protocol::health::HttpProbe;
use protocol::{CommandSpec, HealthCheck};
use serde::Deserialize;

use super::types::CommandInfo;

/// Mesos' `HealthCheck` (unknown fields ignored, as in [`super::types`]).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MesosHealthCheck {
    /// `COMMAND`, `HTTP` or `TCP`; absent in the legacy command form.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The command of a `COMMAND` check.
    #[serde(default)]
    pub command: Option<CommandInfo>,
    /// The target of an `HTTP` check.
    #[serde(default)]
    pub http: Option<MesosHttpCheck>,
    /// Seconds between checks.
    #[serde(default)]
    pub interval_seconds: Option<f64>,
    /// Seconds one check may take.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// Seconds after the start during which failures are ignored.
    #[serde(default)]
    pub grace_period_seconds: Option<f64>,
    /// Failures in a row that make the task unhealthy.
    #[serde(default)]
    pub consecutive_failures: Option<u32>,
}

/// Mesos' `HealthCheck.HTTPCheckInfo`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MesosHttpCheck {
    /// `http` (default); `https` is refused.
    #[serde(default)]
    pub scheme: Option<String>,
    /// The port on 127.0.0.1.
    #[serde(default)]
    pub port: u32,
    /// The path (default `/`).
    #[serde(default)]
    pub path: Option<String>,
    /// Statuses that pass (refused: Parley passes 2xx and 3xx).
    #[serde(default)]
    pub statuses: Vec<u32>,
}

const FIELD: &str = "TaskInfo.health_check";

/// The Parley check, or why it cannot be had (naming the Mesos field).
pub fn health_check(m: &MesosHealthCheck) -> Result<HealthCheck, String> {
    let kind = m.kind.as_deref().unwrap_or(match m.http {
        Some(_) => "HTTP",
        None => "COMMAND",
    });
    let mut check = match kind {
        "COMMAND" => {
            let Some(cmd) = &m.command else {
                return Err(format!("{FIELD}.command is missing for a COMMAND check"));
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
                return Err(format!("{FIELD}.http is missing for an HTTP check"));
            };
            if http.scheme.as_deref().is_some_and(|s| s != "http") {
                return Err(format!("{FIELD}.http.scheme: only http is supported"));
            }
            if !http.statuses.is_empty() {
                return Err(format!(
                    "{FIELD}.http.statuses is not supported (2xx and 3xx pass)"
                ));
            }
            let mut check = HealthCheck::http(http.port, "/");
            check.http = Some(HttpProbe {
                port: http.port,
                path: http.path.clone().unwrap_or_else(|| "/".into()),
            });
            check
        }
        other => {
            return Err(format!(
                "{FIELD}.type {other:?} is not supported; use COMMAND or HTTP"
            ))
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

    fn parse(v: serde_json::Value) -> Result<HealthCheck, String> {
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
            let err = parse(v.clone()).unwrap_err();
            assert!(err.contains(needle) && err.contains(FIELD), "{v}: {err}");
        }
    }
}
