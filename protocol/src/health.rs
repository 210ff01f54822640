//! Task health checks: what a framework asks its agent to probe
//! ([`HealthCheck`]: a shell command or an HTTP GET on a local port, with timing), and the check
//! both the coordinator (at accept) and the agent (at launch) make of its form
//! ([`HealthCheck::validate`]). The verdict travels on [`crate::TaskStatus::healthy`].

use serde::{Deserialize, Serialize};

use crate::command::CommandError;
use crate::{CommandSpec, Isolation, NetworkMode};

/// The default seconds between two checks.
pub const DEFAULT_INTERVAL_S: f64 = 10.0;
/// The default seconds one check may take before it counts as failed.
pub const DEFAULT_TIMEOUT_S: f64 = 5.0;
/// The default failures in a row that make a task unhealthy.
pub const DEFAULT_CONSECUTIVE_FAILURES: u32 = 3;
/// The shortest interval between checks, in seconds.
pub const MIN_INTERVAL_S: f64 = 0.1;
/// The longest interval, timeout or grace period, in seconds (one day).
pub const MAX_SECONDS: f64 = 86_400.0;
/// The most consecutive failures one may ask for.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 1000;
/// The longest HTTP path, in bytes.
pub const MAX_PATH: usize = 1024;

/// Why a [`HealthCheck`] is refused; the message names the field (`health_check.…`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HealthCheckError {
    /// `interval_s`, `timeout_s` or `grace_period_s` out of range.
    #[error("health_check.{field} must be a number from {min} to {MAX_SECONDS}, not {value}")]
    Seconds {
        /// The field under `health_check`.
        field: &'static str,
        /// Its least value.
        min: f64,
        /// The value given.
        value: f64,
    },
    /// `consecutive_failures` out of range.
    #[error(
        "health_check.consecutive_failures must be from 1 to {MAX_CONSECUTIVE_FAILURES}, not {value}"
    )]
    ConsecutiveFailures {
        /// The value given.
        value: u32,
    },
    /// Neither or both of `command` and `http`.
    #[error("health_check needs exactly one of command and http")]
    NoProbe,
    /// `health_check.command` is not runnable.
    #[error("health_check.{0}")]
    Command(CommandError),
    /// A command check for a task in an image.
    #[error("health_check.command cannot be run for a task with isolation.image (the check runs on the agent's host, not in the image); use an http check")]
    CommandInImage,
    /// `http.port` out of range.
    #[error("health_check.http.port must be from 1 to 65535, not {port}")]
    Port {
        /// The port given.
        port: u32,
    },
    /// `http.path` malformed.
    #[error("health_check.http.path must start with '/' and be 1 to {MAX_PATH} printable ASCII bytes without spaces")]
    Path,
    /// An HTTP check for a task in its own network namespace.
    #[error("health_check.http cannot reach a task with isolation.network=loopback (its own network namespace); use a command check")]
    HttpLoopback,
}

impl HealthCheckError {
    /// The field it names: `health_check`, or a field under it (`health_check.http.port`).
    pub fn field(&self) -> String {
        match self {
            HealthCheckError::Seconds { field, .. } => format!("health_check.{field}"),
            HealthCheckError::ConsecutiveFailures { .. } => {
                "health_check.consecutive_failures".into()
            }
            HealthCheckError::NoProbe => "health_check".into(),
            HealthCheckError::Command(e) => format!("health_check.{}", e.field()),
            HealthCheckError::CommandInImage => "health_check.command".into(),
            HealthCheckError::Port { .. } => "health_check.http.port".into(),
            HealthCheckError::Path => "health_check.http.path".into(),
            HealthCheckError::HttpLoopback => "health_check.http".into(),
        }
    }
}

/// What one check does (see [`HealthCheck::probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe<'a> {
    /// Run a command (like the task's: `{"shell": "..."}` or `{"argv": [...]}`); exit 0 is
    /// healthy.
    Command(&'a CommandSpec),
    /// `GET http://127.0.0.1:{port}{path}`; a 2xx or 3xx answer is healthy.
    Http(&'a HttpProbe),
}

/// An HTTP GET on the task's host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HttpProbe {
    /// The port on 127.0.0.1 (1 to 65535).
    pub port: u32,
    /// The path, starting with `/` (default `/`).
    #[serde(default = "root_path")]
    pub path: String,
}

fn root_path() -> String {
    "/".into()
}

/// A task's health check: `{"command": {"shell": "test -f ok"}, "interval_s": 2}` or
/// `{"http": {"port": 8080, "path": "/healthz"}}`; every timing field is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// Run this command (like the task's); exit 0 is healthy. Exactly one of `command` and
    /// `http` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandSpec>,
    /// `GET http://127.0.0.1:{port}{path}`; a 2xx or 3xx answer is healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpProbe>,
    /// Seconds between checks (default [`DEFAULT_INTERVAL_S`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// Seconds one check may take (default [`DEFAULT_TIMEOUT_S`]); a slower one failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Seconds after the task starts during which failures are ignored (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_s: Option<f64>,
    /// Failures in a row that make the task unhealthy (default
    /// [`DEFAULT_CONSECUTIVE_FAILURES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<u32>,
}

impl HealthCheck {
    /// A command check with the default timing.
    pub fn command(command: CommandSpec) -> Self {
        Self {
            command: Some(command),
            http: None,
            ..Self::http(0, "/")
        }
    }

    /// An HTTP check of `127.0.0.1:{port}{path}` with the default timing.
    pub fn http(port: u32, path: &str) -> Self {
        Self {
            command: None,
            http: Some(HttpProbe {
                port,
                path: path.into(),
            }),
            interval_s: None,
            timeout_s: None,
            grace_period_s: None,
            consecutive_failures: None,
        }
    }

    /// What to probe; `None` when neither or both of `command` and `http` are given (which
    /// [`Self::validate`] refuses).
    pub fn probe(&self) -> Option<Probe<'_>> {
        match (&self.command, &self.http) {
            (Some(c), None) => Some(Probe::Command(c)),
            (None, Some(h)) => Some(Probe::Http(h)),
            _ => None,
        }
    }

    /// Seconds between checks.
    pub fn interval(&self) -> f64 {
        self.interval_s.unwrap_or(DEFAULT_INTERVAL_S)
    }

    /// Seconds one check may take.
    pub fn timeout(&self) -> f64 {
        self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)
    }

    /// Seconds of grace after the start.
    pub fn grace_period(&self) -> f64 {
        self.grace_period_s.unwrap_or(0.0)
    }

    /// Failures in a row that make the task unhealthy.
    pub fn failures(&self) -> u32 {
        self.consecutive_failures
            .unwrap_or(DEFAULT_CONSECUTIVE_FAILURES)
    }

    /// Checks the form of the check, and that the task's isolation lets the agent run it;
    /// the error names the field (`health_check.…`).
    pub fn validate(&self, isolation: Option<&Isolation>) -> Result<(), HealthCheckError> {
        let seconds = |name: &'static str, v: Option<f64>, min: f64| match v {
            Some(s) if !s.is_finite() || s < min || s > MAX_SECONDS => {
                Err(HealthCheckError::Seconds {
                    field: name,
                    min,
                    value: s,
                })
            }
            _ => Ok(()),
        };
        seconds("interval_s", self.interval_s, MIN_INTERVAL_S)?;
        seconds("timeout_s", self.timeout_s, MIN_INTERVAL_S)?;
        seconds("grace_period_s", self.grace_period_s, 0.0)?;
        if let Some(n) = self.consecutive_failures {
            if !(1..=MAX_CONSECUTIVE_FAILURES).contains(&n) {
                return Err(HealthCheckError::ConsecutiveFailures { value: n });
            }
        }
        let Some(probe) = self.probe() else {
            return Err(HealthCheckError::NoProbe);
        };
        match probe {
            Probe::Command(c) => {
                c.validate().map_err(HealthCheckError::Command)?;
                if isolation.is_some_and(|i| i.image.is_some()) {
                    return Err(HealthCheckError::CommandInImage);
                }
            }
            Probe::Http(h) => {
                if !(1..=65_535).contains(&h.port) {
                    return Err(HealthCheckError::Port { port: h.port });
                }
                let path_ok = h.path.starts_with('/')
                    && h.path.len() <= MAX_PATH
                    && h.path.bytes().all(|b| b.is_ascii_graphic());
                if !path_ok {
                    return Err(HealthCheckError::Path);
                }
                if isolation.is_some_and(|i| i.network == Some(NetworkMode::Loopback)) {
                    return Err(HealthCheckError::HttpLoopback);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(json: &str) -> Result<HealthCheck, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn both_shapes_parse_with_defaults() {
        let c = parse(r#"{"command": {"shell": "test -f ok"}, "interval_s": 2}"#).unwrap();
        assert_eq!(
            c.probe(),
            Some(Probe::Command(&CommandSpec::Shell("test -f ok".into())))
        );
        assert_eq!((c.interval(), c.timeout(), c.failures()), (2.0, 5.0, 3));
        assert_eq!(c.grace_period(), 0.0);
        assert!(c.validate(None).is_ok());
        let h = parse(r#"{"http": {"port": 8080}}"#).unwrap();
        assert_eq!(h, HealthCheck::http(8080, "/"));
        let built = HealthCheck::command(CommandSpec::Shell("true".into()));
        assert!(matches!(built.probe(), Some(Probe::Command(_))));
        let back: HealthCheck = serde_json::from_value(serde_json::to_value(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn unknown_fields_and_not_one_probe_are_refused() {
        assert!(parse(r#"{"command": {"shell": "x"}, "intervall_s": 2}"#).is_err());
        let both = parse(r#"{"command": {"shell": "x"}, "http": {"port": 1}}"#).unwrap();
        assert!(both
            .validate(None)
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        let neither = parse(r#"{"interval_s": 2}"#).unwrap();
        assert!(neither
            .validate(None)
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        assert!(parse(r#"{"http": {"port": 1, "host": "x"}}"#).is_err());
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases = [
            (
                r#"{"command": {"shell": "x"}, "interval_s": 0}"#,
                "interval_s",
            ),
            (
                r#"{"command": {"shell": "x"}, "interval_s": -1}"#,
                "interval_s",
            ),
            (
                r#"{"command": {"shell": "x"}, "timeout_s": 1e9}"#,
                "timeout_s",
            ),
            (
                r#"{"command": {"shell": "x"}, "grace_period_s": -0.5}"#,
                "grace_period_s",
            ),
            (
                r#"{"command": {"shell": "x"}, "consecutive_failures": 0}"#,
                "consecutive_failures",
            ),
            (r#"{"command": {"shell": " "}}"#, "command.shell"),
            (r#"{"command": {"argv": []}}"#, "command.argv"),
            (r#"{"http": {"port": 0}}"#, "http.port"),
            (r#"{"http": {"port": 70000}}"#, "http.port"),
            (r#"{"http": {"port": 80, "path": "x"}}"#, "http.path"),
            (r#"{"http": {"port": 80, "path": "/a b"}}"#, "http.path"),
        ];
        for (json, field) in cases {
            let err = parse(json).unwrap().validate(None).unwrap_err().to_string();
            assert!(
                err.contains(&format!("health_check.{field}")),
                "{json}: {err}"
            );
        }
    }

    #[test]
    fn isolation_that_the_check_cannot_reach_is_refused() {
        let http = parse(r#"{"http": {"port": 80}}"#).unwrap();
        let loopback = Isolation {
            network: Some(NetworkMode::Loopback),
            ..Isolation::default()
        };
        let err = http.validate(Some(&loopback)).unwrap_err().to_string();
        assert!(err.contains("health_check.http"), "{err}");
        let command = parse(r#"{"command": {"shell": "true"}}"#).unwrap();
        assert!(command.validate(Some(&loopback)).is_ok());
        let image = Isolation {
            image: Some("debian".into()),
            ..Isolation::default()
        };
        assert!(command.validate(Some(&image)).is_err());
        assert!(http.validate(Some(&image)).is_ok());
    }
}
