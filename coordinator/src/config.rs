//! [`Config`]: every setting of the coordinator, its documented defaults, the TOML file form
//! and the flags ([`Overrides`], one struct for both) and validation.
//!
//! Settings come from three layers, later ones winning: the defaults, a TOML file
//! (`--config FILE`), and command-line flags. [`Config::validate`] runs once on the result, so a
//! bad value is reported (naming the setting) before anything starts.

use std::collections::BTreeMap;
use std::path::PathBuf;
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
    /// The most distinct resource names the cluster may use, over agents' totals, demand
    /// hints and decline filters; a request that would add more is refused (422
    /// `too_many_resource_kinds`) (default 256). One vector carries at most 32 names
    /// ([`protocol::resources::MAX_NAMES_PER_VECTOR`]).
    pub max_resource_kinds: usize,
    /// The most frameworks (registered or awaiting re-registration) the books hold; a new
    /// registration past it is refused (429 `too_many_frameworks`) (default 10000).
    pub max_frameworks: usize,
    /// The most roles in the role tree (every prefix of a role path counts: `eng/batch` is two);
    /// a registration or weight that would add more is refused (429 `too_many_roles`). Roles
    /// are not removed, so this bounds them (and their metrics labels) (default 1000).
    pub max_roles: usize,
    /// The longest failover timeout a framework may ask for; a longer one is clamped to it
    /// (default 7 days).
    pub max_failover_timeout: Duration,
    /// The most placeholder frameworks (made for tasks agents report under framework ids the
    /// coordinator does not know, after a restart); past it such tasks are not adopted and,
    /// if running, killed (default 1000).
    pub max_placeholder_frameworks: usize,
    /// How many removed framework ids are remembered (to refuse their re-registration and drop
    /// their tasks' late updates); past it the oldest is forgotten (default 100000).
    pub max_removed_frameworks: usize,
    /// The most unacknowledged task updates kept per framework; past it the oldest is dropped
    /// (a terminal task left with none pending is then completed, as if acknowledged) and the
    /// framework must reconcile to learn it (default 100000).
    pub max_pending_updates_per_framework: usize,
    /// How long a connection may take to send a request's headers, counted from when it starts
    /// waiting for them: bounds slow clients and idle keep-alive connections (default 30 s).
    pub header_read_timeout: Duration,
    /// How long a lost agent is remembered (it may re-register with its id and tasks); after
    /// that its record is forgotten (default 24 h).
    pub lost_agent_retention: Duration,
    /// The most events queued on one framework stream before its updates are deferred to the
    /// re-send (offers coalesce into one waiting event and do not count against it); a stream
    /// whose reader takes nothing from a full queue for two heartbeats is closed (the framework
    /// reconnects and gets its pending updates again). Also the most task ids one `reconcile`
    /// may name (default 10000).
    pub max_stream_queue: usize,
    /// The launch window: allocation offers no more agents while the tasks launched and not
    /// yet reported by their agents, with what the offers made in the last 2 s and still
    /// outstanding are expected to launch, come to this many. Work then queues in its frameworks instead of in the launch pipeline,
    /// and accept → running stays short. Zero turns the bound off (default 16384).
    pub launch_window: usize,
    /// Requests per second allowed to one client (its bearer token, else its address), as a
    /// token bucket of `rate_limit_burst`; beyond it 429 with `Retry-After`. Zero (the default)
    /// turns the limit off.
    pub rate_limit_per_s: f64,
    /// The bucket size of the request rate limit: requests one client may make at once
    /// (default 1000).
    pub rate_limit_burst: u32,
    /// The initial role tree: roles and their weights (others are created with weight 1).
    /// Weights set at run time and kept in the registry override these after a restart.
    pub roles: Vec<(RolePath, Weight)>,
    /// The durable registry file ([`crate::store`]); `None` keeps the books in memory only
    /// (the library's default; the `coordinator` binary uses `{data_dir}/registry.redb`).
    pub registry: Option<std::path::PathBuf>,
    /// The PEM certificate chain to serve HTTPS with (with [`Config::tls_key`]); plain HTTP when
    /// `None`. Read when serving starts.
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of [`Config::tls_cert`].
    pub tls_key: Option<PathBuf>,
    /// A PEM CA file to trust, instead of the built-in roots, when calling agents over
    /// `https://` (launches, kills).
    pub agent_ca_file: Option<PathBuf>,
    /// The principals allowed in ([`crate::auth`]); `None` (the default) leaves the API open,
    /// as without authentication.
    pub credentials: Option<std::sync::Arc<crate::auth::Credentials>>,
    /// The file [`Config::credentials`] was read from, read again on a reload
    /// (`crate::reload`); `None` when the principals were given in code.
    pub credentials_file: Option<PathBuf>,
    /// Reload the TLS certificate and the credentials file on SIGHUP (the `coordinator`
    /// binary turns it on; off by default, so a library user's process keeps its own SIGHUP).
    pub reload_on_sighup: bool,
    /// GPU gating, as Mesos does it: offers from agents whose total has `gpus > 0` go only to
    /// frameworks that declared the `gpu_resources` capability, so CPU-only frameworks cannot
    /// strand GPU machines (default on; `--gpu-gating off` turns it off).
    pub gpu_gating: bool,
    /// Resource names a role's quota may name before any agent offers them, besides `cpus`,
    /// `mem`, `disk` and `gpus` (always known), so quotas can be set at install time.
    pub known_resources: Vec<protocol::ResourceName>,
    /// Preemption toward fair share: `None` (the default) never preempts; with a
    /// grace, a role with demand below its fair share or guarantee for that long gets tasks
    /// taken back from roles above theirs, killed that long after their frameworks are told
    /// (`--preemption-grace-s`; see `docs/src/operating/preemption.md`).
    pub preemption_grace: Option<Duration>,
    /// How long a framework that wants tasks may go without an offer, holding none, while an
    /// agent has room it could be offered, before it is reported stalled: a warning in the
    /// log, the `parley_frameworks_stalled` gauge, and `explain`'s summary (default 30 s; 1 s
    /// to 1 day).
    pub stall_after: Duration,
    /// How the `coordinator` binary writes its log lines: text (the default) or JSON, one
    /// object a line (`--log-format`); the library itself installs no subscriber.
    pub log_format: observe::LogFormat,
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
            max_resource_kinds: allocator::DEFAULT_MAX_KINDS,
            max_frameworks: 10_000,
            max_roles: 1000,
            max_failover_timeout: Duration::from_secs(7 * 24 * 3600),
            max_placeholder_frameworks: 1000,
            max_removed_frameworks: 100_000,
            max_stream_queue: 10_000,
            launch_window: 16_384,
            lost_agent_retention: Duration::from_secs(24 * 3600),
            header_read_timeout: Duration::from_secs(30),
            max_pending_updates_per_framework: 100_000,
            rate_limit_per_s: 0.0,
            rate_limit_burst: 1000,
            roles: Vec::new(),
            registry: None,
            tls_cert: None,
            tls_key: None,
            agent_ca_file: None,
            credentials: None,
            credentials_file: None,
            reload_on_sighup: false,
            gpu_gating: true,
            preemption_grace: None,
            stall_after: Duration::from_secs(30),
            known_resources: Vec::new(),
            log_format: observe::LogFormat::Text,
        }
    }
}

impl From<&Config> for books::Settings {
    /// The settings the books read, from the coordinator's.
    fn from(c: &Config) -> Self {
        Self {
            allocation_interval: c.allocation_interval,
            offer_timeout: c.offer_timeout,
            agent_heartbeat_interval: c.agent_heartbeat_interval,
            max_missed_heartbeats: c.max_missed_heartbeats,
            framework_heartbeat_interval: c.framework_heartbeat_interval,
            default_failover_timeout: c.default_failover_timeout,
            default_refuse_seconds: c.default_refuse_seconds,
            update_resend_interval: c.update_resend_interval,
            max_completed_tasks_per_framework: c.max_completed_tasks_per_framework,
            max_resource_kinds: c.max_resource_kinds,
            max_frameworks: c.max_frameworks,
            max_roles: c.max_roles,
            max_failover_timeout: c.max_failover_timeout,
            max_placeholder_frameworks: c.max_placeholder_frameworks,
            max_removed_frameworks: c.max_removed_frameworks,
            max_pending_updates_per_framework: c.max_pending_updates_per_framework,
            lost_agent_retention: c.lost_agent_retention,
            max_stream_queue: c.max_stream_queue,
            roles: c.roles.clone(),
            gpu_gating: c.gpu_gating,
            preemption_grace: c.preemption_grace,
            known_resources: c.known_resources.clone(),
            stall_after: c.stall_after,
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
    /// A TLS certificate without its key, or a key without its certificate.
    #[error("{0}")]
    Tls(String),
    /// The TOML file does not parse or has an unknown key.
    #[error("invalid config file: {0}")]
    File(String),
    /// The credentials file cannot be read or is invalid.
    #[error("{0}")]
    Credentials(String),
    /// A name in `known_resources` is not a resource name.
    #[error("invalid resource name {0:?} in known_resources (--known-resources): a lowercase letter, then up to 31 lowercase letters, digits or '_'")]
    KnownResource(String),
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
            ("max_failover_timeout", self.max_failover_timeout),
            ("lost_agent_retention", self.lost_agent_retention),
            ("header_read_timeout", self.header_read_timeout),
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
        stall_after("stall_after", self.stall_after.as_secs_f64())?;
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
        let counts = [
            ("max_resource_kinds", self.max_resource_kinds, 1, 100_000),
            ("max_frameworks", self.max_frameworks, 1, 10_000_000),
            ("max_roles", self.max_roles, 1, 1_000_000),
            (
                "max_placeholder_frameworks",
                self.max_placeholder_frameworks,
                0,
                10_000_000,
            ),
            (
                "max_removed_frameworks",
                self.max_removed_frameworks,
                1,
                100_000_000,
            ),
            ("max_stream_queue", self.max_stream_queue, 16, 10_000_000),
            ("launch_window", self.launch_window, 0, 100_000_000),
            (
                "max_pending_updates_per_framework",
                self.max_pending_updates_per_framework,
                1,
                100_000_000,
            ),
        ];
        for (name, value, min, max) in counts {
            if value < min || value > max {
                return Err(ConfigError::Number {
                    name,
                    value: value.to_string(),
                    reason: "out of range; see docs/src/reference/config.md",
                });
            }
        }
        if !self.rate_limit_per_s.is_finite() || self.rate_limit_per_s < 0.0 {
            return Err(ConfigError::Number {
                name: "rate_limit_per_s",
                value: self.rate_limit_per_s.to_string(),
                reason: "use a finite number >= 0 (0 turns the limit off)",
            });
        }
        if self.rate_limit_burst == 0 {
            return Err(ConfigError::Number {
                name: "rate_limit_burst",
                value: self.rate_limit_burst.to_string(),
                reason: "use a whole number >= 1",
            });
        }
        for (path, _) in &self.roles {
            check_role_not_reserved(path)?;
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => Err(ConfigError::Tls(
                "tls_cert (--tls-cert) is set without tls_key (--tls-key)".into(),
            )),
            (None, Some(_)) => Err(ConfigError::Tls(
                "tls_key (--tls-key) is set without tls_cert (--tls-cert)".into(),
            )),
            _ => Ok(()),
        }
    }

    /// The defaults, then the file's settings (if any), then the flags'; validated. The first bad
    /// value is reported, named as its layer spells it (`offer_timeout` in the file,
    /// `--offer-timeout` on the command line).
    pub fn from_layers(file: Option<&Overrides>, flags: &Overrides) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        if let Some(file) = file {
            file.apply(&mut config, Layer::File)?;
        }
        flags.apply(&mut config, Layer::Flags)?;
        config.validate()?;
        Ok(config)
    }

    /// Sets (or replaces) one role's initial weight.
    pub fn set_role(&mut self, role: RolePath, weight: Weight) {
        self.roles.retain(|(p, _)| *p != role);
        self.roles.push((role, weight));
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

/// `on` / `off` (also `true` / `false`) for a switch given as a flag value.
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        other => Err(format!("{other:?} is not on or off")),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Which layer an [`Overrides`] came from: errors name a setting as that layer spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The TOML file (`offer_timeout`).
    File,
    /// The command line (`--offer-timeout`).
    Flags,
}

/// Optional settings: one layer over the defaults, either the TOML config file or the command
/// line with its environment variables (the same struct is deserialized from the file and parsed
/// from the flags, so the two cannot drift). Unset fields leave the setting alone;
/// [`Config::from_layers`] applies the file, then the flags, then validates.
///
/// Each field is one setting, named once: its file key is the field's name, its flag the name
/// with `-` for `_` (`--offer-timeout`), its environment variable `PARLEY_` and the name in
/// capitals (`PARLEY_OFFER_TIMEOUT`). The one exception is `roles`: the flag is the repeatable
/// `--role`, the file a `[roles]` table. Keys of earlier versions still load as serde aliases
/// ([`DEPRECATED_KEYS`]). The book's reference page is generated from this struct
/// ([`reference_table`]).
///
/// The file form (every key optional; an unknown key is an error, so a typo is not silently
/// ignored):
///
/// ```toml
/// listen = "127.0.0.1:5050"
/// allocation_interval = 1.0
/// offer_timeout = 60
/// tls_cert = "/etc/parley/coordinator.crt"
/// tls_key = "/etc/parley/coordinator.key"
/// agent_ca_file = "/etc/parley/ca.pem"
/// [roles]
/// "eng" = 2.0
/// "eng/batch" = 1.0
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    /// Address to listen on (file only: the command line's `--listen` is the binary's own flag,
    /// parsed as a socket address).
    #[arg(skip)]
    pub listen: Option<String>,
    /// Seconds between allocation runs (default 1).
    #[arg(long, value_name = "SECS", env = "PARLEY_ALLOCATION_INTERVAL")]
    #[serde(alias = "allocation_interval_s")]
    pub allocation_interval: Option<f64>,
    /// Seconds to batch changes before an early allocation run, 0 allowed (default 0.005).
    #[arg(long, value_name = "SECS", env = "PARLEY_ALLOCATION_BATCH_DELAY")]
    #[serde(alias = "allocation_batch_delay_s")]
    pub allocation_batch_delay: Option<f64>,
    /// Seconds before an unanswered offer is rescinded (default 60).
    #[arg(long, value_name = "SECS", env = "PARLEY_OFFER_TIMEOUT")]
    #[serde(alias = "offer_timeout_s")]
    pub offer_timeout: Option<f64>,
    /// Seconds between agent heartbeats (default 15).
    #[arg(long, value_name = "SECS", env = "PARLEY_AGENT_HEARTBEAT_INTERVAL")]
    #[serde(alias = "agent_heartbeat_interval_s")]
    pub agent_heartbeat_interval: Option<f64>,
    /// Missed heartbeats before an agent is lost, 1 to 1000 (default 5).
    #[arg(long, value_name = "N", env = "PARLEY_MAX_MISSED_HEARTBEATS")]
    pub max_missed_heartbeats: Option<u32>,
    /// Seconds between heartbeat events on framework streams (default 15).
    #[arg(long, value_name = "SECS", env = "PARLEY_FRAMEWORK_HEARTBEAT_INTERVAL")]
    #[serde(alias = "framework_heartbeat_interval_s")]
    pub framework_heartbeat_interval: Option<f64>,
    /// Failover timeout of frameworks that give none, in seconds, 0 allowed (default 60).
    #[arg(long, value_name = "SECS", env = "PARLEY_DEFAULT_FAILOVER_TIMEOUT")]
    #[serde(alias = "default_failover_timeout_s")]
    pub default_failover_timeout: Option<f64>,
    /// Decline filter length when a framework gives none, in seconds, 0 allowed (default 5).
    #[arg(long, value_name = "SECS", env = "PARLEY_DEFAULT_REFUSE_SECONDS")]
    pub default_refuse_seconds: Option<f64>,
    /// Seconds between re-sends of unacknowledged task updates (default 10).
    #[arg(long, value_name = "SECS", env = "PARLEY_UPDATE_RESEND_INTERVAL")]
    #[serde(alias = "update_resend_interval_s")]
    pub update_resend_interval: Option<f64>,
    /// Timeout of requests to agents, in seconds (default 10).
    #[arg(long, value_name = "SECS", env = "PARLEY_AGENT_REQUEST_TIMEOUT")]
    #[serde(alias = "agent_request_timeout_s")]
    pub agent_request_timeout: Option<f64>,
    /// Largest request body in bytes, 1024 to 1073741824; larger bodies get 413 (default
    /// 1048576).
    #[arg(long, value_name = "BYTES", env = "PARLEY_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Completed (terminal, acknowledged) tasks kept per framework before the oldest is
    /// forgotten, at least 1 (default 1000).
    #[arg(
        long,
        value_name = "N",
        env = "PARLEY_MAX_COMPLETED_TASKS_PER_FRAMEWORK"
    )]
    pub max_completed_tasks_per_framework: Option<usize>,
    /// Most distinct resource names in the cluster, 1 to 100000 (default 256).
    #[arg(long, value_name = "N", env = "PARLEY_MAX_RESOURCE_KINDS")]
    pub max_resource_kinds: Option<usize>,
    /// Most frameworks in the books, 1 to 10000000 (default 10000).
    #[arg(long, value_name = "N", env = "PARLEY_MAX_FRAMEWORKS")]
    pub max_frameworks: Option<usize>,
    /// Most roles in the role tree, every path prefix counted, 1 to 1000000 (default 1000).
    #[arg(long, value_name = "N", env = "PARLEY_MAX_ROLES")]
    pub max_roles: Option<usize>,
    /// Longest failover timeout a framework may ask for, in seconds; longer ones are clamped
    /// (default 604800, 7 days).
    #[arg(long, value_name = "SECS", env = "PARLEY_MAX_FAILOVER_TIMEOUT")]
    #[serde(alias = "max_failover_timeout_s")]
    pub max_failover_timeout: Option<f64>,
    /// Most placeholder frameworks for tasks of unknown frameworks, 0 to 10000000 (default 1000).
    #[arg(long, value_name = "N", env = "PARLEY_MAX_PLACEHOLDER_FRAMEWORKS")]
    pub max_placeholder_frameworks: Option<usize>,
    /// Removed framework ids remembered, 1 to 100000000 (default 100000).
    #[arg(long, value_name = "N", env = "PARLEY_MAX_REMOVED_FRAMEWORKS")]
    pub max_removed_frameworks: Option<usize>,
    /// Seconds a connection may take to send a request's headers, idle keep-alive included
    /// (default 30).
    #[arg(long, value_name = "SECS", env = "PARLEY_HEADER_READ_TIMEOUT")]
    #[serde(alias = "header_read_timeout_s")]
    pub header_read_timeout: Option<f64>,
    /// Seconds a lost agent is remembered before it is forgotten (default 86400).
    #[arg(long, value_name = "SECS", env = "PARLEY_LOST_AGENT_RETENTION")]
    #[serde(alias = "lost_agent_retention_s")]
    pub lost_agent_retention: Option<f64>,
    /// Most unacknowledged updates kept per framework, the oldest dropped past it, 1 to
    /// 100000000 (default 100000).
    #[arg(
        long,
        value_name = "N",
        env = "PARLEY_MAX_PENDING_UPDATES_PER_FRAMEWORK"
    )]
    pub max_pending_updates_per_framework: Option<usize>,
    /// Most events queued on one framework stream before its updates wait for their re-send;
    /// also the most task ids in one `reconcile`; 16 to 10000000 (default 10000).
    #[arg(long, value_name = "N", env = "PARLEY_MAX_STREAM_QUEUE")]
    pub max_stream_queue: Option<usize>,
    /// Most tasks launched and not yet reported, with those the offers of the last 2 s are
    /// expected to launch, before allocation offers no more agents; 0 = no bound (default
    /// 16384).
    #[arg(long, value_name = "N", env = "PARLEY_LAUNCH_WINDOW")]
    pub launch_window: Option<usize>,
    /// Requests per second per client, 0 = no limit (default 0).
    #[arg(long, value_name = "N", env = "PARLEY_RATE_LIMIT_PER_S")]
    pub rate_limit_per_s: Option<f64>,
    /// Burst of the per-client rate limit, at least 1 (default 1000).
    #[arg(long, value_name = "N", env = "PARLEY_RATE_LIMIT_BURST")]
    pub rate_limit_burst: Option<u32>,
    /// GPU gating: `on` (the default) offers agents with GPUs only to frameworks that declared
    /// `gpu_resources`; `off` offers them to everyone (file: `gpu_gating = false`).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, env = "PARLEY_GPU_GATING")]
    pub gpu_gating: Option<bool>,
    /// Preemption toward fair share: a role with demand below its fair share (or
    /// guarantee) for this many seconds gets tasks taken back from roles above theirs, killed
    /// this many seconds after their frameworks are told. Off unless given; from 0.1 to 86400.
    #[arg(long, value_name = "SECS", env = "PARLEY_PREEMPTION_GRACE_S")]
    pub preemption_grace_s: Option<f64>,
    /// Seconds a framework that wants tasks may go without an offer, holding none, while an
    /// agent has room it could be offered, before it is reported stalled (a log warning, the
    /// `parley_frameworks_stalled` gauge, `explain`); 1 to 86400 (default 30).
    #[arg(long, value_name = "SECS", env = "PARLEY_STALL_AFTER")]
    pub stall_after: Option<f64>,
    /// Resources a role's quota may name before any agent offers them, besides cpus, mem, disk
    /// and gpus (always known), e.g. `fpga,ssd` (file: `known_resources = ["fpga"]`).
    #[arg(
        long,
        value_name = "NAME[,NAME...]",
        env = "PARLEY_KNOWN_RESOURCES",
        value_delimiter = ','
    )]
    pub known_resources: Option<Vec<String>>,
    /// A role weight, e.g. `--role eng/batch=2` (repeatable; in the environment comma-separated,
    /// `PARLEY_ROLES=eng=2,sci=1`; overrides the file).
    // In the file: a `[roles]` table of path = weight, checked when applied.
    #[arg(
        long = "role",
        value_name = "PATH=WEIGHT",
        value_parser = parse_role,
        env = "PARLEY_ROLES",
        value_delimiter = ','
    )]
    #[serde(default, deserialize_with = "roles_table")]
    pub roles: Vec<(String, f64)>,
    /// Serve HTTPS with this PEM certificate chain (needs `--tls-key`).
    #[arg(long, value_name = "FILE", env = "PARLEY_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, value_name = "FILE", env = "PARLEY_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Trust only the CAs in this PEM file when calling agents over https:// (default: the
    /// built-in Mozilla roots).
    #[arg(long, value_name = "FILE", env = "PARLEY_AGENT_CA_FILE")]
    pub agent_ca_file: Option<PathBuf>,
    /// TOML file of principals and what they may do; with it every endpoint but `/health` needs
    /// `Authorization: Bearer <token>` (see `docs/src/operating/security.md`). Without it the API
    /// is open.
    #[arg(long, value_name = "FILE", env = "PARLEY_CREDENTIALS")]
    pub credentials: Option<std::path::PathBuf>,
    /// Log lines as `text` or `json` (one object a line: timestamp, level, target, fields);
    /// text has colours only on a terminal.
    #[arg(long, value_name = "text|json", env = "PARLEY_LOG_FORMAT")]
    pub log_format: Option<observe::LogFormat>,
}

/// A duration setting: its name in the file, its flag, where it goes, whether zero is allowed.
struct SecondsSetting {
    file: &'static str,
    flag: &'static str,
    get: fn(&Overrides) -> Option<f64>,
    set: fn(&mut Config) -> &mut Duration,
    allow_zero: bool,
}

const SECONDS: [SecondsSetting; 12] = [
    SecondsSetting {
        file: "header_read_timeout",
        flag: "--header-read-timeout",
        get: |o| o.header_read_timeout,
        set: |c| &mut c.header_read_timeout,
        allow_zero: false,
    },
    SecondsSetting {
        file: "lost_agent_retention",
        flag: "--lost-agent-retention",
        get: |o| o.lost_agent_retention,
        set: |c| &mut c.lost_agent_retention,
        allow_zero: false,
    },
    SecondsSetting {
        file: "max_failover_timeout",
        flag: "--max-failover-timeout",
        get: |o| o.max_failover_timeout,
        set: |c| &mut c.max_failover_timeout,
        allow_zero: false,
    },
    SecondsSetting {
        file: "allocation_interval",
        flag: "--allocation-interval",
        get: |o| o.allocation_interval,
        set: |c| &mut c.allocation_interval,
        allow_zero: false,
    },
    SecondsSetting {
        file: "allocation_batch_delay",
        flag: "--allocation-batch-delay",
        get: |o| o.allocation_batch_delay,
        set: |c| &mut c.allocation_batch_delay,
        allow_zero: true,
    },
    SecondsSetting {
        file: "offer_timeout",
        flag: "--offer-timeout",
        get: |o| o.offer_timeout,
        set: |c| &mut c.offer_timeout,
        allow_zero: false,
    },
    SecondsSetting {
        file: "agent_heartbeat_interval",
        flag: "--agent-heartbeat-interval",
        get: |o| o.agent_heartbeat_interval,
        set: |c| &mut c.agent_heartbeat_interval,
        allow_zero: false,
    },
    SecondsSetting {
        file: "framework_heartbeat_interval",
        flag: "--framework-heartbeat-interval",
        get: |o| o.framework_heartbeat_interval,
        set: |c| &mut c.framework_heartbeat_interval,
        allow_zero: false,
    },
    SecondsSetting {
        file: "default_failover_timeout",
        flag: "--default-failover-timeout",
        get: |o| o.default_failover_timeout,
        set: |c| &mut c.default_failover_timeout,
        allow_zero: true,
    },
    SecondsSetting {
        file: "default_refuse_seconds",
        flag: "--default-refuse-seconds",
        get: |o| o.default_refuse_seconds,
        set: |c| &mut c.default_refuse_seconds,
        allow_zero: true,
    },
    SecondsSetting {
        file: "update_resend_interval",
        flag: "--update-resend-interval",
        get: |o| o.update_resend_interval,
        set: |c| &mut c.update_resend_interval,
        allow_zero: false,
    },
    SecondsSetting {
        file: "agent_request_timeout",
        flag: "--agent-request-timeout",
        get: |o| o.agent_request_timeout,
        set: |c| &mut c.agent_request_timeout,
        allow_zero: false,
    },
];

impl Overrides {
    /// Parses a TOML config file's text (unknown keys are an error; the message is one line).
    pub fn from_toml(text: &str) -> Result<Overrides, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::File(one_line(&e.to_string())))
    }

    /// Applies the settings present over `config` (not validated: [`Config::validate`] runs on
    /// the result of all layers). A bad duration or role is named as `layer` spells it.
    pub fn apply(&self, config: &mut Config, layer: Layer) -> Result<(), ConfigError> {
        for s in &SECONDS {
            if let Some(v) = (s.get)(self) {
                let name = match layer {
                    Layer::File => s.file,
                    Layer::Flags => s.flag,
                };
                *(s.set)(config) = seconds(name, v, s.allow_zero)?;
            }
        }
        if let Some(n) = self.max_missed_heartbeats {
            config.max_missed_heartbeats = n;
        }
        if let Some(n) = self.max_body_bytes {
            config.max_body_bytes = n;
        }
        if let Some(n) = self.max_completed_tasks_per_framework {
            config.max_completed_tasks_per_framework = n;
        }
        if let Some(path) = &self.tls_cert {
            config.tls_cert = Some(path.clone());
        }
        if let Some(path) = &self.tls_key {
            config.tls_key = Some(path.clone());
        }
        if let Some(path) = &self.agent_ca_file {
            config.agent_ca_file = Some(path.clone());
        }
        if let Some(format) = self.log_format {
            config.log_format = format;
        }
        if let Some(path) = &self.credentials {
            let credentials = crate::auth::Credentials::load(path)
                .map_err(|e| ConfigError::Credentials(e.to_string()))?;
            config.credentials = Some(std::sync::Arc::new(credentials));
            config.credentials_file = Some(path.clone());
        }
        let counts = [
            (self.max_resource_kinds, &mut config.max_resource_kinds),
            (self.max_frameworks, &mut config.max_frameworks),
            (self.max_roles, &mut config.max_roles),
            (
                self.max_placeholder_frameworks,
                &mut config.max_placeholder_frameworks,
            ),
            (
                self.max_removed_frameworks,
                &mut config.max_removed_frameworks,
            ),
            (self.max_stream_queue, &mut config.max_stream_queue),
            (self.launch_window, &mut config.launch_window),
            (
                self.max_pending_updates_per_framework,
                &mut config.max_pending_updates_per_framework,
            ),
        ];
        for (given, setting) in counts {
            if let Some(n) = given {
                *setting = n;
            }
        }
        if let Some(n) = self.rate_limit_per_s {
            config.rate_limit_per_s = n;
        }
        if let Some(n) = self.rate_limit_burst {
            config.rate_limit_burst = n;
        }
        if let Some(on) = self.gpu_gating {
            config.gpu_gating = on;
        }
        if let Some(v) = self.preemption_grace_s {
            let name = match layer {
                Layer::File => "preemption_grace_s",
                Layer::Flags => "--preemption-grace-s",
            };
            config.preemption_grace = Some(preemption_grace(name, v)?);
        }
        if let Some(v) = self.stall_after {
            let name = match layer {
                Layer::File => "stall_after",
                Layer::Flags => "--stall-after",
            };
            config.stall_after = stall_after(name, v)?;
        }
        if let Some(names) = &self.known_resources {
            config.known_resources = names
                .iter()
                .map(|n| {
                    protocol::ResourceName::new(n.trim())
                        .map_err(|_| ConfigError::KnownResource(n.clone()))
                })
                .collect::<Result<_, _>>()?;
        }
        for (path, weight) in &self.roles {
            let (role, weight) =
                role_weight(path, *weight).map_err(|reason| ConfigError::Role {
                    path: path.clone(),
                    reason,
                })?;
            config.set_role(role, weight);
        }
        Ok(())
    }
}

/// The shortest `stall_after`, in seconds.
pub const MIN_STALL_AFTER_S: f64 = 1.0;

/// The longest `stall_after`, in seconds (one day).
pub const MAX_STALL_AFTER_S: f64 = 86_400.0;

/// A `stall_after`: [`MIN_STALL_AFTER_S`] to [`MAX_STALL_AFTER_S`].
fn stall_after(name: &'static str, value: f64) -> Result<Duration, ConfigError> {
    if !(value.is_finite() && (MIN_STALL_AFTER_S..=MAX_STALL_AFTER_S).contains(&value)) {
        return Err(ConfigError::Duration {
            name,
            value,
            reason: "use a number of seconds from 1 to 86400",
        });
    }
    Ok(Duration::from_secs_f64(value))
}

/// The longest preemption grace, in seconds (one day).
pub const MAX_PREEMPTION_GRACE_S: f64 = 86_400.0;

/// A preemption grace: 0.1 s to [`MAX_PREEMPTION_GRACE_S`].
fn preemption_grace(name: &'static str, value: f64) -> Result<Duration, ConfigError> {
    if !(value.is_finite() && (0.1..=MAX_PREEMPTION_GRACE_S).contains(&value)) {
        return Err(ConfigError::Duration {
            name,
            value,
            reason:
                "use a number of seconds from 0.1 to 86400 (leave it out to turn preemption off)",
        });
    }
    Ok(Duration::from_secs_f64(value))
}

/// A role path and weight, checked.
fn role_weight(path: &str, weight: f64) -> Result<(RolePath, Weight), String> {
    let role = RolePath::new(path).map_err(|e| e.to_string())?;
    let weight = Weight::new(weight).map_err(|e| e.to_string())?;
    Ok((role, weight))
}

/// The `--role PATH=WEIGHT` flag: checked as it is parsed, so a bad one is a usage error.
/// File keys of earlier versions that still load (serde aliases on [`Overrides`]), each with
/// the key that replaced it. Listed here for the reference page, which names them as deprecated;
/// a test loads each one.
pub const DEPRECATED_KEYS: [(&str, &str); 11] = [
    ("allocation_interval_s", "allocation_interval"),
    ("allocation_batch_delay_s", "allocation_batch_delay"),
    ("offer_timeout_s", "offer_timeout"),
    ("agent_heartbeat_interval_s", "agent_heartbeat_interval"),
    (
        "framework_heartbeat_interval_s",
        "framework_heartbeat_interval",
    ),
    ("default_failover_timeout_s", "default_failover_timeout"),
    ("update_resend_interval_s", "update_resend_interval"),
    ("agent_request_timeout_s", "agent_request_timeout"),
    ("max_failover_timeout_s", "max_failover_timeout"),
    ("header_read_timeout_s", "header_read_timeout"),
    ("lost_agent_retention_s", "lost_agent_retention"),
];

/// A setting's default as the reference page shows it, from [`Config::default`] (`key` is the
/// [`Overrides`] field; empty for a key that is not a setting).
pub fn default_text(key: &str) -> String {
    let c = &Config::default();
    let secs = |d: Duration| d.as_secs_f64().to_string();
    let count = |n: usize| n.to_string();
    match key {
        "allocation_interval" => secs(c.allocation_interval),
        "allocation_batch_delay" => secs(c.allocation_batch_delay),
        "offer_timeout" => secs(c.offer_timeout),
        "agent_heartbeat_interval" => secs(c.agent_heartbeat_interval),
        "max_missed_heartbeats" => c.max_missed_heartbeats.to_string(),
        "framework_heartbeat_interval" => secs(c.framework_heartbeat_interval),
        "default_failover_timeout" => secs(c.default_failover_timeout),
        "default_refuse_seconds" => secs(c.default_refuse_seconds),
        "update_resend_interval" => secs(c.update_resend_interval),
        "agent_request_timeout" => secs(c.agent_request_timeout),
        "max_body_bytes" => count(c.max_body_bytes),
        "max_completed_tasks_per_framework" => count(c.max_completed_tasks_per_framework),
        "max_resource_kinds" => count(c.max_resource_kinds),
        "max_frameworks" => count(c.max_frameworks),
        "max_roles" => count(c.max_roles),
        "max_failover_timeout" => secs(c.max_failover_timeout),
        "max_placeholder_frameworks" => count(c.max_placeholder_frameworks),
        "max_removed_frameworks" => count(c.max_removed_frameworks),
        "header_read_timeout" => secs(c.header_read_timeout),
        "lost_agent_retention" => secs(c.lost_agent_retention),
        "max_pending_updates_per_framework" => count(c.max_pending_updates_per_framework),
        "max_stream_queue" => count(c.max_stream_queue),
        "launch_window" => count(c.launch_window),
        "rate_limit_per_s" if c.rate_limit_per_s == 0.0 => "0 (off)".into(),
        "rate_limit_per_s" => c.rate_limit_per_s.to_string(),
        "rate_limit_burst" => c.rate_limit_burst.to_string(),
        "gpu_gating" => if c.gpu_gating { "on" } else { "off" }.into(),
        "preemption_grace_s" => c
            .preemption_grace
            .map_or_else(|| "off".into(), |d| d.as_secs_f64().to_string()),
        "stall_after" => secs(c.stall_after),
        "roles" if c.roles.is_empty() => "none".into(),
        "known_resources" if c.known_resources.is_empty() => "none".into(),
        "tls_cert" | "tls_key" if c.tls_cert.is_none() => "none (plain HTTP)".into(),
        "agent_ca_file" if c.agent_ca_file.is_none() => "built-in roots".into(),
        "credentials" if c.credentials.is_none() => "none (open API)".into(),
        "log_format" => c.log_format.to_string(),
        _ => String::new(),
    }
}

/// The settings table of the book's reference page (`docs/src/reference/config.md`), one row per
/// [`Overrides`] setting, generated from its definition: the file key (and deprecated keys from
/// [`DEPRECATED_KEYS`]), the flag and environment variable (clap's), the default
/// ([`Config::default`]) and the help text (the field's doc comment, as `--help` shows it).
pub fn reference_table() -> String {
    use clap::Args as _;
    use std::fmt::Write as _;

    let command = Overrides::augment_args(clap::Command::new("coordinator"));
    let mut out = String::from(
        "| file key | flag | environment variable | default | meaning |\n|---|---|---|---|---|\n",
    );
    // `listen` is file-only here: its flag belongs to the binary (a socket address).
    let _ = writeln!(
        out,
        "| `listen` | `--listen ADDR` | `PARLEY_LISTEN` | `127.0.0.1:5050` | Address to listen \
         on. |"
    );
    for arg in command.get_arguments() {
        let key = arg.get_id().as_str();
        let mut file = if key == "roles" {
            "`[roles]` table".to_owned()
        } else {
            format!("`{key}`")
        };
        for (old, _) in DEPRECATED_KEYS.iter().filter(|(_, new)| *new == key) {
            let _ = write!(file, "<br>(deprecated: `{old}`)");
        }
        let value = arg
            .get_value_names()
            .map(|v| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let mut flag = format!("`--{} {value}`", arg.get_long().unwrap_or(key));
        if key == "roles" {
            flag.push_str(" (repeatable)");
        }
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| one_line(&h.to_string()).replace('|', "\\|"))
            .unwrap_or_default();
        let default = default_text(key);
        let _ = writeln!(
            out,
            "| {file} | {} | {env} | {} | {help} |",
            flag.replace('|', "\\|"),
            default.replace('|', "\\|")
        );
    }
    out
}

fn parse_role(s: &str) -> Result<(String, f64), String> {
    let (path, weight) = s
        .split_once('=')
        .ok_or("expected PATH=WEIGHT, e.g. eng/batch=2")?;
    let path = path.trim();
    let weight: f64 = weight
        .trim()
        .parse()
        .map_err(|_| format!("weight {weight:?} is not a number"))?;
    role_weight(path, weight)?;
    Ok((path.to_owned(), weight))
}

/// The file's `[roles]` table (path = weight), in path order.
fn roles_table<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(String, f64)>, D::Error> {
    let table = BTreeMap::<String, f64>::deserialize(d)?;
    Ok(table.into_iter().collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_books_default_settings_are_the_configs_defaults() {
        // The books' tests build their settings from `Settings::default()`: it must be what
        // a coordinator with the default config gives them.
        assert_eq!(
            books::Settings::from(&Config::default()),
            books::Settings::default()
        );
    }

    #[test]
    fn defaults_are_valid_and_documented() {
        let c = Config::default();
        c.validate().unwrap();
        assert_eq!(c.allocation_interval, Duration::from_secs(1));
        assert_eq!(c.offer_timeout, Duration::from_secs(60));
        assert_eq!(c.max_missed_heartbeats, 5);
        assert_eq!(c.default_refuse_seconds, Duration::from_secs(5));
        assert_eq!(c.max_completed_tasks_per_framework, 1000);
        assert_eq!(c.max_resource_kinds, 256);
        assert_eq!(c.max_stream_queue, 10_000);
        assert_eq!(c.max_failover_timeout, Duration::from_secs(604_800));
        assert_eq!(c.rate_limit_per_s, 0.0, "off by default");
    }

    #[test]
    fn preemption_is_off_by_default_and_a_bad_grace_is_named() {
        assert_eq!(Config::default().preemption_grace, None);
        let flags = Overrides {
            preemption_grace_s: Some(1.5),
            ..Overrides::default()
        };
        let c = Config::from_layers(None, &flags).unwrap();
        assert_eq!(c.preemption_grace, Some(Duration::from_millis(1500)));
        for bad in [0.0, -1.0, f64::NAN, 1e9] {
            let flags = Overrides {
                preemption_grace_s: Some(bad),
                ..Overrides::default()
            };
            let e = Config::from_layers(None, &flags).unwrap_err().to_string();
            assert!(e.contains("--preemption-grace-s"), "{e}");
        }
        let file = Overrides::from_toml("preemption_grace_s = -2").unwrap();
        let e = Config::from_layers(Some(&file), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("preemption_grace_s"), "{e}");
    }

    #[test]
    fn stall_after_is_30_s_by_default_and_a_bad_one_is_named() {
        assert_eq!(Config::default().stall_after, Duration::from_secs(30));
        let file = Overrides::from_toml("stall_after = 90").unwrap();
        let c = Config::from_layers(Some(&file), &Overrides::default()).unwrap();
        assert_eq!(c.stall_after, Duration::from_secs(90));
        assert_eq!(
            books::Settings::from(&c).stall_after,
            Duration::from_secs(90)
        );
        for bad in [0.0, 0.5, -1.0, f64::NAN, 86_401.0] {
            let flags = Overrides {
                stall_after: Some(bad),
                ..Overrides::default()
            };
            let e = Config::from_layers(None, &flags).unwrap_err().to_string();
            assert!(e.contains("--stall-after"), "{e}");
        }
        let file = Overrides::from_toml("stall_after = 0").unwrap();
        let e = Config::from_layers(Some(&file), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("stall_after"), "{e}");
        let in_code = Config {
            stall_after: Duration::from_millis(10),
            ..Config::default()
        };
        assert!(in_code.validate().is_err());
    }

    #[test]
    fn gpu_gating_is_on_by_default_and_the_file_and_flags_turn_it_off() {
        assert!(Config::default().gpu_gating);
        let file = Overrides::from_toml("gpu_gating = false").unwrap();
        let c = Config::from_layers(Some(&file), &Overrides::default()).unwrap();
        assert!(!c.gpu_gating);
        let flags = Overrides {
            gpu_gating: Some(true),
            ..Overrides::default()
        };
        assert!(Config::from_layers(Some(&file), &flags).unwrap().gpu_gating);
        assert_eq!(parse_on_off("off"), Ok(false));
        assert!(parse_on_off("maybe").unwrap_err().contains("maybe"));
    }

    #[test]
    fn limits_are_read_and_checked() {
        let file = Overrides::from_toml(
            "max_resource_kinds = 8\nmax_frameworks = 3\nmax_failover_timeout_s = 10\n\
             max_stream_queue = 100\nrate_limit_per_s = 5\nrate_limit_burst = 2\n\
             max_placeholder_frameworks = 0\nmax_removed_frameworks = 4\n",
        )
        .unwrap();
        let c = Config::from_layers(Some(&file), &Overrides::default()).unwrap();
        assert_eq!(c.max_resource_kinds, 8);
        assert_eq!(c.max_frameworks, 3);
        assert_eq!(c.max_failover_timeout, Duration::from_secs(10));
        assert_eq!(c.max_stream_queue, 100);
        assert_eq!((c.rate_limit_per_s, c.rate_limit_burst), (5.0, 2));
        assert_eq!(c.max_placeholder_frameworks, 0);
        assert_eq!(c.max_removed_frameworks, 4);
        for bad in [
            "max_resource_kinds = 0",
            "max_frameworks = 0",
            "max_roles = 0",
            "max_stream_queue = 1",
            "rate_limit_per_s = -1",
            "rate_limit_burst = 0",
        ] {
            let file = Overrides::from_toml(bad).unwrap();
            let err = Config::from_layers(Some(&file), &Overrides::default()).unwrap_err();
            let name = bad.split(' ').next().unwrap_or_default();
            assert!(err.to_string().contains(name), "{bad}: {err}");
        }
    }

    #[test]
    fn max_completed_tasks_per_framework_is_read_and_checked() {
        let file = Overrides::from_toml("max_completed_tasks_per_framework = 7\n").unwrap();
        let c = Config::from_layers(Some(&file), &Overrides::default()).unwrap();
        assert_eq!(c.max_completed_tasks_per_framework, 7);

        let file = Overrides::from_toml("max_completed_tasks_per_framework = 0\n").unwrap();
        let mut c = Config::default();
        file.apply(&mut c, Layer::File).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("max_completed_tasks_per_framework"), "{err}");

        let err = Overrides::from_toml("max_completed_tasks_per_framework = -1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_completed_tasks_per_framework"), "{err}");
    }

    #[test]
    fn credentials_are_loaded_from_the_file_key_or_the_flag_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        let hash = crate::auth::SecretHash::of("t").to_hex();
        std::fs::write(
            &good,
            format!("[[principals]]\nname = \"a\"\nkind = \"agent\"\nsecret_sha256 = \"{hash}\"\n"),
        )
        .unwrap();
        let file =
            Overrides::from_toml(&format!("credentials = {:?}\n", good.display().to_string()))
                .unwrap();
        let c = Config::from_layers(Some(&file), &Overrides::default()).unwrap();
        let credentials = c.credentials.unwrap();
        assert_eq!(credentials.principals().len(), 1);
        assert!(credentials.authenticate("t").is_some());

        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            "[[principals]]\nname = \"a\"\nkind = \"agent\"\nsecret = \"x\"\n",
        )
        .unwrap();
        let flags = Overrides {
            credentials: Some(bad.clone()),
            ..Overrides::default()
        };
        let err = Config::from_layers(None, &flags).unwrap_err().to_string();
        assert!(
            err.contains("bad.toml") && err.contains("unknown field"),
            "{err}"
        );
        let missing = Overrides {
            credentials: Some(dir.path().join("nope.toml")),
            ..Overrides::default()
        };
        let err = Config::from_layers(None, &missing).unwrap_err().to_string();
        assert!(err.contains("cannot read credentials file"), "{err}");
        assert_eq!(Config::default().credentials, None, "open by default");
    }

    #[test]
    fn file_settings_apply_and_bad_ones_are_named() {
        let file = Overrides::from_toml(
            "listen = \"127.0.0.1:1\"\noffer_timeout_s = 2.5\n[roles]\n\"eng/batch\" = 2\n",
        )
        .unwrap();
        let mut c = Config::default();
        file.apply(&mut c, Layer::File).unwrap();
        assert_eq!(c.offer_timeout, Duration::from_millis(2500));
        assert_eq!(c.roles.len(), 1);
        assert_eq!(file.listen.as_deref(), Some("127.0.0.1:1"));

        // An unknown key, a value of the wrong type, and a setting given under both its key
        // and its deprecated one are errors naming the key, on one line.
        for (text, key) in [
            ("offer_timeout_secs = 3\n", "offer_timeout_secs"),
            ("offer_timeout = \"soon\"\n", "offer_timeout"),
            ("offer_timeout = 3\noffer_timeout_s = 3\n", "offer_timeout"),
        ] {
            let err = Overrides::from_toml(text).unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }

        let bad = Overrides::from_toml("offer_timeout = -1\n").unwrap();
        let err = bad
            .apply(&mut Config::default(), Layer::File)
            .unwrap_err()
            .to_string();
        assert!(err.contains("offer_timeout"), "{err}");

        let bad = Overrides::from_toml("[roles]\n\"eng\" = 0\n").unwrap();
        let err = bad
            .apply(&mut Config::default(), Layer::File)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"eng\""), "{err}");
    }

    #[test]
    fn flags_override_the_file_and_bad_ones_are_named_as_flags() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            settings: Overrides,
        }
        use clap::Parser;
        let file = Overrides::from_toml(
            "offer_timeout_s = 2\nallocation_interval_s = 3\n[roles]\n\"eng\" = 2\n",
        )
        .unwrap();
        let flags = Cli::try_parse_from(["x", "--offer-timeout", "4", "--role", "eng=3"])
            .unwrap()
            .settings;
        let c = Config::from_layers(Some(&file), &flags).unwrap();
        assert_eq!(c.offer_timeout, Duration::from_secs(4), "the flag wins");
        assert_eq!(c.allocation_interval, Duration::from_secs(3), "the file's");
        assert_eq!(
            c.roles,
            [(RolePath::new("eng").unwrap(), Weight::new(3.0).unwrap())]
        );

        let flags = Cli::try_parse_from(["x", "--offer-timeout", "0"])
            .unwrap()
            .settings;
        let err = Config::from_layers(Some(&file), &flags)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--offer-timeout"), "{err}");
        let flags = Cli::try_parse_from(["x", "--max-body-bytes", "10"])
            .unwrap()
            .settings;
        let err = Config::from_layers(None, &flags).unwrap_err().to_string();
        assert!(err.contains("max_body_bytes"), "validated: {err}");
        let err = Cli::try_parse_from(["x", "--role", "eng=0"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("--role"), "a usage error: {err}");
    }

    #[test]
    fn tls_files_come_from_the_file_and_the_flags_and_must_be_paired() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            settings: Overrides,
        }
        use clap::Parser;
        let file = Overrides::from_toml(
            "tls_cert = \"a.crt\"\ntls_key = \"a.key\"\nagent_ca_file = \"ca.pem\"\n",
        )
        .unwrap();
        let c = Config::from_layers(Some(&file), &Overrides::default()).unwrap();
        assert_eq!(c.tls_cert, Some(PathBuf::from("a.crt")));
        assert_eq!(c.tls_key, Some(PathBuf::from("a.key")));
        assert_eq!(c.agent_ca_file, Some(PathBuf::from("ca.pem")));
        let flags = Cli::try_parse_from(["x", "--tls-cert", "b.crt", "--agent-ca-file", "x.pem"])
            .unwrap()
            .settings;
        let c = Config::from_layers(Some(&file), &flags).unwrap();
        assert_eq!(c.tls_cert, Some(PathBuf::from("b.crt")), "the flag wins");
        assert_eq!(c.tls_key, Some(PathBuf::from("a.key")), "the file's");
        assert_eq!(c.agent_ca_file, Some(PathBuf::from("x.pem")));

        let err = Config::from_layers(None, &flags).unwrap_err().to_string();
        assert!(
            err.contains("--tls-cert") && err.contains("--tls-key"),
            "{err}"
        );
        let flags = Cli::try_parse_from(["x", "--tls-key", "b.key"])
            .unwrap()
            .settings;
        let err = Config::from_layers(None, &flags).unwrap_err().to_string();
        assert!(err.contains("without tls_cert"), "{err}");
        assert_eq!(Config::default().tls_cert, None, "plain HTTP by default");
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

    #[test]
    fn known_resources_come_from_the_file_or_the_flag_and_bad_names_are_named() {
        let file = Overrides::from_toml("known_resources = [\"fpga\", \"ssd\"]\n").unwrap();
        let mut c = Config::default();
        file.apply(&mut c, Layer::File).unwrap();
        let names: Vec<&str> = c.known_resources.iter().map(|n| n.as_str()).collect();
        assert_eq!(names, ["fpga", "ssd"]);
        let settings = books::Settings::from(&c);
        assert_eq!(settings.known_resources.len(), 2);
        let bad = Overrides {
            known_resources: Some(vec!["Bad-Name".into()]),
            ..Overrides::default()
        };
        let mut c = Config::default();
        let err = bad.apply(&mut c, Layer::Flags).unwrap_err().to_string();
        assert!(
            err.contains("\"Bad-Name\"") && err.contains("known_resources"),
            "{err}"
        );
        assert!(c.known_resources.is_empty(), "a bad list changes nothing");
    }
}
