//! [`Config`]: every setting of the coordinator, its documented defaults, the TOML file form
//! ([`FileConfig`]) and validation.
//!
//! Settings come from three layers, later ones winning: the defaults, a TOML file
//! (`--config FILE`), and command-line flags. [`Config::validate`] runs once on the result, so a
//! bad value is reported (naming the setting) before anything starts.

use std::collections::BTreeMap;
use std::time::Duration;

use protocol::{RolePath, Weight};
use serde::Deserialize;

/// The longest duration any setting accepts: keeps millisecond arithmetic far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Every setting of the coordinator. `Config::default()` has the documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// How often the allocation loop runs even when nothing changed (default 1 s).
    pub allocation_interval: Duration,
    /// After a change that frees resources, how long to wait for more changes before running an
    /// allocation, so bursts are batched into one run (default 5 ms).
    pub allocation_batch_delay: Duration,
    /// How long an offer stays outstanding before it is rescinded as expired (default 60 s).
    pub offer_timeout: Duration,
    /// How often agents are told to heartbeat (default 15 s).
    pub agent_heartbeat_interval: Duration,
    /// An agent missing this many heartbeats in a row is lost (default 5).
    pub max_missed_heartbeats: u32,
    /// How often a framework stream carries a `heartbeat` event (default 15 s).
    pub framework_heartbeat_interval: Duration,
    /// Failover timeout of a framework that registers without one (default 60 s).
    pub default_failover_timeout: Duration,
    /// Decline filter of a decline or accept without `refuse_seconds` (default 5 s).
    pub default_refuse_seconds: Duration,
    /// How often an unacknowledged task update is sent again (default 10 s).
    pub update_resend_interval: Duration,
    /// Timeout of the coordinator's requests to agents (launch, kill) (default 10 s).
    pub agent_request_timeout: Duration,
    /// The largest request body accepted; larger bodies get 413 (default 1 MiB).
    pub max_body_bytes: usize,
    /// How many completed tasks (terminal, their final update acknowledged) each framework keeps
    /// in the books for reconciliation and the operator views; past it the oldest is forgotten
    /// (like Mesos' `max_completed_tasks_per_framework`) (default 1000).
    pub max_completed_tasks_per_framework: usize,
    /// The initial role tree: roles and their weights (others are created with weight 1).
    /// Weights set at run time and kept in the registry override these after a restart.
    pub roles: Vec<(RolePath, Weight)>,
    /// The durable registry file ([`crate::store`]); `None` keeps the books in memory only
    /// (the library's default; the `coordinator` binary uses `{data_dir}/registry.redb`).
    pub registry: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            allocation_interval: Duration::from_secs(1),
            allocation_batch_delay: Duration::from_millis(5),
            offer_timeout: Duration::from_secs(60),
            agent_heartbeat_interval: Duration::from_secs(15),
            max_missed_heartbeats: 5,
            framework_heartbeat_interval: Duration::from_secs(15),
            default_failover_timeout: Duration::from_secs(60),
            default_refuse_seconds: Duration::from_secs(5),
            update_resend_interval: Duration::from_secs(10),
            agent_request_timeout: Duration::from_secs(10),
            max_body_bytes: 1024 * 1024,
            max_completed_tasks_per_framework: 1000,
            roles: Vec::new(),
            registry: None,
        }
    }
}

/// A setting that was rejected; the message names it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A duration is negative, not finite, zero where zero makes no sense, or too large.
    #[error("invalid {name}: {value} seconds; {reason}")]
    Duration {
        /// The setting.
        name: &'static str,
        /// The value given, in seconds.
        value: f64,
        /// What is allowed.
        reason: &'static str,
    },
    /// A number is out of range.
    #[error("invalid {name}: {value}; {reason}")]
    Number {
        /// The setting.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        reason: &'static str,
    },
    /// A role path or weight in the role tree is invalid.
    #[error("invalid role {path:?} in roles: {reason}")]
    Role {
        /// The path given.
        path: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The TOML file does not parse or has an unknown key.
    #[error("invalid config file: {0}")]
    File(String),
}

/// Converts seconds to a duration, checking the range (`allow_zero` for settings where zero
/// means "none").
pub fn seconds(name: &'static str, value: f64, allow_zero: bool) -> Result<Duration, ConfigError> {
    let err = |reason| ConfigError::Duration {
        name,
        value,
        reason,
    };
    if !value.is_finite() || value < 0.0 {
        return Err(err("use a finite number of seconds >= 0"));
    }
    if value == 0.0 && !allow_zero {
        return Err(err("must be greater than 0"));
    }
    if value > MAX_DURATION.as_secs_f64() {
        return Err(err("must be at most ten years"));
    }
    Ok(Duration::from_secs_f64(value))
}

impl Config {
    /// Checks every setting; the first bad one is returned, named.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("allocation_interval", self.allocation_interval),
            ("offer_timeout", self.offer_timeout),
            ("agent_heartbeat_interval", self.agent_heartbeat_interval),
            (
                "framework_heartbeat_interval",
                self.framework_heartbeat_interval,
            ),
            ("update_resend_interval", self.update_resend_interval),
            ("agent_request_timeout", self.agent_request_timeout),
        ];
        for (name, d) in positive {
            seconds(name, d.as_secs_f64(), false)?;
        }
        let maybe_zero = [
            ("allocation_batch_delay", self.allocation_batch_delay),
            ("default_failover_timeout", self.default_failover_timeout),
            ("default_refuse_seconds", self.default_refuse_seconds),
        ];
        for (name, d) in maybe_zero {
            seconds(name, d.as_secs_f64(), true)?;
        }
        if self.max_missed_heartbeats == 0 || self.max_missed_heartbeats > 1000 {
            return Err(ConfigError::Number {
                name: "max_missed_heartbeats",
                value: self.max_missed_heartbeats.to_string(),
                reason: "use a whole number from 1 to 1000",
            });
        }
        if self.max_body_bytes < 1024 || self.max_body_bytes > 1024 * 1024 * 1024 {
            return Err(ConfigError::Number {
                name: "max_body_bytes",
                value: self.max_body_bytes.to_string(),
                reason: "use a number of bytes from 1024 to 1073741824",
            });
        }
        if self.max_completed_tasks_per_framework == 0 {
            return Err(ConfigError::Number {
                name: "max_completed_tasks_per_framework",
                value: self.max_completed_tasks_per_framework.to_string(),
                reason: "use a whole number >= 1",
            });
        }
        for (path, _) in &self.roles {
            check_role_not_reserved(path)?;
        }
        Ok(())
    }

    /// Applies the settings present in a parsed config file over `self`.
    pub fn apply_file(&mut self, file: &FileConfig) -> Result<(), ConfigError> {
        let durations: [(&'static str, Option<f64>, &mut Duration, bool); 9] = [
            (
                "allocation_interval_s",
                file.allocation_interval_s,
                &mut self.allocation_interval,
                false,
            ),
            (
                "allocation_batch_delay_s",
                file.allocation_batch_delay_s,
                &mut self.allocation_batch_delay,
                true,
            ),
            (
                "offer_timeout_s",
                file.offer_timeout_s,
                &mut self.offer_timeout,
                false,
            ),
            (
                "agent_heartbeat_interval_s",
                file.agent_heartbeat_interval_s,
                &mut self.agent_heartbeat_interval,
                false,
            ),
            (
                "framework_heartbeat_interval_s",
                file.framework_heartbeat_interval_s,
                &mut self.framework_heartbeat_interval,
                false,
            ),
            (
                "default_failover_timeout_s",
                file.default_failover_timeout_s,
                &mut self.default_failover_timeout,
                true,
            ),
            (
                "default_refuse_seconds",
                file.default_refuse_seconds,
                &mut self.default_refuse_seconds,
                true,
            ),
            (
                "update_resend_interval_s",
                file.update_resend_interval_s,
                &mut self.update_resend_interval,
                false,
            ),
            (
                "agent_request_timeout_s",
                file.agent_request_timeout_s,
                &mut self.agent_request_timeout,
                false,
            ),
        ];
        for (name, value, slot, allow_zero) in durations {
            if let Some(v) = value {
                *slot = seconds(name, v, allow_zero)?;
            }
        }
        if let Some(n) = file.max_missed_heartbeats {
            self.max_missed_heartbeats = n;
        }
        if let Some(n) = file.max_body_bytes {
            self.max_body_bytes = n;
        }
        if let Some(n) = file.max_completed_tasks_per_framework {
            self.max_completed_tasks_per_framework = n;
        }
        for (path, weight) in &file.roles {
            let role = RolePath::new(path.clone()).map_err(|e| ConfigError::Role {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let weight = Weight::new(*weight).map_err(|e| ConfigError::Role {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            self.set_role(role, weight);
        }
        Ok(())
    }

    /// Sets (or replaces) one role's initial weight.
    pub fn set_role(&mut self, role: RolePath, weight: Weight) {
        self.roles.retain(|(p, _)| *p != role);
        self.roles.push((role, weight));
    }

    /// Parses a TOML config file's text into its settings plus the `listen` address, if given.
    pub fn parse_file(text: &str) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::File(one_line(&e.to_string())))
    }
}

/// Role paths whose first segment starts with `_` are reserved for the coordinator's own use
/// (tasks of not-yet-re-registered frameworks live under `_orphans`).
pub fn check_role_not_reserved(path: &RolePath) -> Result<(), ConfigError> {
    if path.as_str().starts_with('_') {
        return Err(ConfigError::Role {
            path: path.to_string(),
            reason: "roles starting with '_' are reserved".into(),
        });
    }
    Ok(())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The TOML config file. Every key is optional; unknown keys are an error (a typo must not be
/// silently ignored).
///
/// ```toml
/// listen = "127.0.0.1:5050"
/// allocation_interval_s = 1.0
/// offer_timeout_s = 60
/// [roles]
/// "eng" = 2.0
/// "eng/batch" = 1.0
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Address to listen on.
    pub listen: Option<String>,
    /// See [`Config::allocation_interval`].
    pub allocation_interval_s: Option<f64>,
    /// See [`Config::allocation_batch_delay`].
    pub allocation_batch_delay_s: Option<f64>,
    /// See [`Config::offer_timeout`].
    pub offer_timeout_s: Option<f64>,
    /// See [`Config::agent_heartbeat_interval`].
    pub agent_heartbeat_interval_s: Option<f64>,
    /// See [`Config::max_missed_heartbeats`].
    pub max_missed_heartbeats: Option<u32>,
    /// See [`Config::framework_heartbeat_interval`].
    pub framework_heartbeat_interval_s: Option<f64>,
    /// See [`Config::default_failover_timeout`].
    pub default_failover_timeout_s: Option<f64>,
    /// See [`Config::default_refuse_seconds`].
    pub default_refuse_seconds: Option<f64>,
    /// See [`Config::update_resend_interval`].
    pub update_resend_interval_s: Option<f64>,
    /// See [`Config::agent_request_timeout`].
    pub agent_request_timeout_s: Option<f64>,
    /// See [`Config::max_body_bytes`].
    pub max_body_bytes: Option<usize>,
    /// See [`Config::max_completed_tasks_per_framework`].
    pub max_completed_tasks_per_framework: Option<usize>,
    /// Role path → weight.
    #[serde(default)]
    pub roles: BTreeMap<String, f64>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented() {
        let c = Config::default();
        c.validate().unwrap();
        assert_eq!(c.allocation_interval, Duration::from_secs(1));
        assert_eq!(c.offer_timeout, Duration::from_secs(60));
        assert_eq!(c.max_missed_heartbeats, 5);
        assert_eq!(c.default_refuse_seconds, Duration::from_secs(5));
        assert_eq!(c.max_completed_tasks_per_framework, 1000);
    }

    #[test]
    fn max_completed_tasks_per_framework_is_read_and_checked() {
        let file = Config::parse_file("max_completed_tasks_per_framework = 7\n").unwrap();
        let mut c = Config::default();
        c.apply_file(&file).unwrap();
        assert_eq!(c.max_completed_tasks_per_framework, 7);
        c.validate().unwrap();

        let file = Config::parse_file("max_completed_tasks_per_framework = 0\n").unwrap();
        let mut c = Config::default();
        c.apply_file(&file).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("max_completed_tasks_per_framework"), "{err}");

        let err = Config::parse_file("max_completed_tasks_per_framework = -1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_completed_tasks_per_framework"), "{err}");
    }

    #[test]
    fn file_settings_apply_and_bad_ones_are_named() {
        let file = Config::parse_file(
            "listen = \"127.0.0.1:1\"\noffer_timeout_s = 2.5\n[roles]\n\"eng/batch\" = 2\n",
        )
        .unwrap();
        let mut c = Config::default();
        c.apply_file(&file).unwrap();
        assert_eq!(c.offer_timeout, Duration::from_millis(2500));
        assert_eq!(c.roles.len(), 1);
        assert_eq!(file.listen.as_deref(), Some("127.0.0.1:1"));

        let err = Config::parse_file("offer_timeout = 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("offer_timeout"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");

        let bad = Config::parse_file("offer_timeout_s = -1\n").unwrap();
        let err = Config::default().apply_file(&bad).unwrap_err().to_string();
        assert!(err.contains("offer_timeout_s"), "{err}");

        let bad = Config::parse_file("[roles]\n\"eng\" = 0\n").unwrap();
        let err = Config::default().apply_file(&bad).unwrap_err().to_string();
        assert!(err.contains("\"eng\""), "{err}");
    }

    #[test]
    fn validation_names_the_setting() {
        let c = Config {
            allocation_interval: Duration::ZERO,
            ..Config::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("allocation_interval"));
        let c = Config {
            max_missed_heartbeats: 0,
            ..Config::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_missed_heartbeats"));
        let c = Config {
            max_body_bytes: 10,
            ..Config::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_body_bytes"));
        let mut c = Config::default();
        c.set_role(RolePath::new("_x").unwrap(), Weight::ONE);
        assert!(c.validate().is_err());
    }
}
