//! Job specs: one versioned schema, read from TOML or JSON, checked field by field.
//!
//! Parsing is strict: an unknown key is an error that names it (and, in TOML, its line), and
//! every value is range-checked here, before anything is queued, so the rest of the service
//! only ever sees a [`JobSpec`] that can run. Numbers are read wide (`i64`, `f64`) and checked
//! by hand, so that `count = -1` says "count must be at least 1" rather than a serde message
//! about `u32`.

use std::collections::BTreeMap;

use framework_sdk::placement::Constraint;
use protocol::Resources;
use serde::{Deserialize, Serialize};

/// The schema version this service reads (the spec's `version`, default 1).
pub const SPEC_VERSION: u32 = 1;

/// The largest array (`count`).
pub const MAX_COUNT: i64 = 10_000_000;

/// The most retries of one index.
pub const MAX_RETRIES: i64 = 100;

/// A service's `max_unavailable` when not given: a rolling update keeps every replica up.
pub const DEFAULT_MAX_UNAVAILABLE: i64 = 0;

/// A service's `max_surge` when not given: one successor at a time, started before the replica
/// it replaces is killed.
pub const DEFAULT_MAX_SURGE: i64 = 1;

/// The longest job name (it becomes part of every task id).
pub const MAX_NAME_LEN: usize = 63;

pub use crate::spec_error::SpecError;

/// The format a spec is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// TOML (`.toml`).
    Toml,
    /// JSON (`.json`).
    Json,
}

impl Format {
    /// Guesses the format of `text`: JSON when it starts with `{`, TOML otherwise.
    pub fn sniff(text: &str) -> Self {
        if text.trim_start().starts_with('{') {
            Self::Json
        } else {
            Self::Toml
        }
    }
}

/// What a job runs: kept as written (for `GET` and the store), checked by [`RawSpec::check`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpec {
    /// The schema version; only [`SPEC_VERSION`] is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The job's name, unique in the service.
    pub name: String,
    /// `batch` (the default) or `service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// For a service: how many copies run at once; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// For a service: how the agent checks that a replica is healthy (the SDK's
    /// `HealthCheck`: `command` or `http`, and timings); an unhealthy replica is killed and
    /// started again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<protocol::HealthCheck>,
    /// For a service: how many replicas a rolling update may take down below `replicas` at
    /// once (killed before their successors run); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<i64>,
    /// For a service: how many replicas a rolling update may start above `replicas` at once
    /// (successors started before the replicas they replace are killed); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<i64>,
    /// For a periodic job: a cron pattern (five fields, or six with seconds first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// For a periodic job: the IANA time zone the pattern is read in; default `UTC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// For a periodic job: `forbid` (default), `allow` or `replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<String>,
    /// A shell line (`sh -c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A program and its arguments, run without a shell (instead of `command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// What each task needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<RawResources>,
    /// How many tasks (an array); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// Environment variables for every task.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// How many times a failed task is tried again; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<i64>,
    /// The first retry's delay in seconds; it doubles with each retry. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_s: Option<f64>,
    /// The longest retry delay in seconds. Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backoff_s: Option<f64>,
    /// A task running longer than this many seconds is killed (and counts as failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Jobs that must succeed before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Higher runs first; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// The most tasks of this job running at once; default unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<i64>,
    /// `tetris` (default), `first-fit`, `best-fit` or `spread`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// Where the tasks may run, by agent attribute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<RawConstraint>,
    /// Meaningful on simulated agents only (`agent --simulate`): each task "runs" this many
    /// seconds and finishes. Real agents ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Each index's declared size (any unit: input bytes, rows, frames), one per task of a
    /// batch array: the service learns how long a task runs per unit of size, so index `i`
    /// is expected to run that long times `sizes[i]` (Tetris' remaining-work term).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<f64>>,
}

/// `[resources]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResources {
    /// CPUs (fractions allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Memory in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem: Option<f64>,
    /// Disk in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<f64>,
    /// Whole GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
}

/// One `[[constraints]]` entry as written: an attribute and exactly one test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConstraint {
    /// The agent attribute (`zone`, `rack`).
    pub attribute: String,
    /// The attribute must have this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// The attribute must not have this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_equals: Option<String>,
    /// At most one task per value of the attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<bool>,
    /// At most this many tasks per value of the attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_per_value: Option<i64>,
}

/// What kind of job a spec describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Tasks that run to an end: the job succeeds when every index has succeeded once.
    Batch,
    /// Replicas that should run forever: each is started again whenever it ends.
    Service,
    /// A batch job started on a schedule: each run is a batch job of its own, named
    /// `NAME-UNIXSECONDS`.
    Periodic,
}

/// The placement policy a job's tasks are placed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementPolicy {
    /// Alignment packing with shortest remaining work (the SDK's `Tetris`).
    Tetris,
    /// Each task on the first offer it fits.
    FirstFit,
    /// Each task on the offer it leaves the least room in.
    BestFit,
    /// Tasks dealt out across agents, one per agent per round.
    Spread,
}

impl PlacementPolicy {
    /// The spelling in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tetris => "tetris",
            Self::FirstFit => "first-fit",
            Self::BestFit => "best-fit",
            Self::Spread => "spread",
        }
    }
}

/// A checked job spec: everything the queue and the scheduler need, in their types.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// The spec as written (normalised to the schema), for the API and the store.
    pub raw: RawSpec,
    /// The job's name.
    pub name: String,
    /// Batch or service.
    pub kind: Kind,
    /// What each task runs.
    pub command: protocol::CommandSpec,
    /// What each task needs.
    pub resources: Resources,
    /// How many tasks (a batch job's `count`, a service's `replicas`).
    pub count: u32,
    /// Environment for every task (besides `PARLEY_JOB` and `PARLEY_TASK_INDEX`).
    pub env: BTreeMap<String, String>,
    /// Retries per index.
    pub max_retries: u32,
    /// The first retry delay, in milliseconds.
    pub backoff_ms: u64,
    /// The longest retry delay, in milliseconds.
    pub max_backoff_ms: u64,
    /// The per-task time limit, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Jobs that must succeed first.
    pub depends_on: Vec<String>,
    /// Higher first.
    pub priority: i64,
    /// The most tasks running at once.
    pub max_running: Option<u32>,
    /// How tasks are placed.
    pub placement: PlacementPolicy,
    /// For a periodic job: when it runs.
    pub periodic: Option<crate::schedule::Periodic>,
    /// For a service: its replicas' health check.
    pub health_check: Option<protocol::HealthCheck>,
    /// Where tasks may run.
    pub constraints: Vec<Constraint>,
    /// A service's rolling update: replicas it may take down at once.
    pub max_unavailable: u32,
    /// A service's rolling update: replicas it may start above `count` at once.
    pub max_surge: u32,
    /// How long each task runs on a simulated agent.
    pub duration_s: Option<f64>,
    /// Each index's declared size (shared: the scheduler copies specs every round).
    pub sizes: Option<std::sync::Arc<[f64]>>,
    /// Who submitted it: the jobs API's user, [`ANONYMOUS`] without a users file. Set by the
    /// service, never read from the spec; the user's `max_running` counts its tasks.
    pub owner: String,
}

/// The owner of jobs submitted without a users file (to an open API, or with the one
/// `--api-token`).
pub const ANONYMOUS: &str = "anonymous";

/// Reads and checks a spec written in `format`.
pub fn parse(text: &str, format: Format) -> Result<JobSpec, SpecError> {
    let raw: RawSpec = match format {
        Format::Toml => toml::from_str(text).map_err(|e| toml_error(text, &e))?,
        Format::Json => serde_json::from_str(text).map_err(|e| json_error(&e))?,
    };
    raw.check().map_err(|mut e| {
        if format == Format::Toml && e.line.is_none() {
            e.line = line_of_key(text, &e.field);
        }
        e
    })
}

/// Reads a spec in whichever format it looks like ([`Format::sniff`]).
pub fn parse_any(text: &str) -> Result<JobSpec, SpecError> {
    parse(text, Format::sniff(text))
}

/// The key named in a serde message such as "unknown field `x`, expected ...".
fn named_key(message: &str) -> Option<String> {
    for marker in ["unknown field `", "missing field `", "duplicate field `"] {
        if let Some(start) = message.find(marker) {
            let rest = &message[start + marker.len()..];
            return rest.find('`').map(|end| rest[..end].to_owned());
        }
    }
    None
}

fn toml_error(text: &str, e: &toml::de::Error) -> SpecError {
    let message = e.message().trim().to_owned();
    let line = observe::settings_file::error_line(text, e);
    let field = named_key(&message)
        .or_else(|| line.and_then(|l| key_on_line(text, l)))
        .unwrap_or_else(|| "spec".into());
    SpecError {
        field,
        message,
        line,
    }
}

fn json_error(e: &serde_json::Error) -> SpecError {
    let full = e.to_string();
    // serde_json appends " at line L column C"; the line is kept separately.
    let message = full
        .rsplit_once(" at line ")
        .map_or(full.as_str(), |(m, _)| m)
        .to_owned();
    SpecError {
        field: named_key(&message).unwrap_or_else(|| "spec".into()),
        message,
        line: (e.line() > 0).then_some(e.line()),
    }
}

/// The key assigned on a TOML line (`key = value`), if any.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let (key, _) = l.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.starts_with('#') && !key.starts_with('[')).then(|| key.to_owned())
}

/// The first line that assigns the last part of a dotted `field` (best effort, for errors
/// found after parsing).
fn line_of_key(text: &str, field: &str) -> Option<usize> {
    let key = field.rsplit('.').next()?;
    let key = key.split('[').next()?;
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

/// Checks a job name: `[a-z0-9]` and `-` inside, at most [`MAX_NAME_LEN`] characters.
pub fn check_name(field: &str, name: &str) -> Result<(), SpecError> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    // `events` is the API's event stream, `/api/v1/jobs/events`.
    let ok = !name.is_empty()
        && name != "events"
        && name.len() <= MAX_NAME_LEN
        && name.chars().all(|c| ok_char(c) || c == '-')
        && name.starts_with(ok_char)
        && name.ends_with(ok_char);
    if ok {
        Ok(())
    } else {
        Err(SpecError::new(
            field,
            format!(
                "{name:?} is not a job name: use 1 to {MAX_NAME_LEN} lowercase letters, digits \
                 and inner dashes"
            ),
        ))
    }
}

/// Checks an array size or a replica count.
pub fn check_count(field: &str, count: i64) -> Result<(), SpecError> {
    let min = if field == "replicas" { 0 } else { 1 };
    if (min..=MAX_COUNT).contains(&count) {
        Ok(())
    } else {
        Err(SpecError::new(
            field,
            format!("{count} is out of range: give between {min} and {MAX_COUNT}"),
        ))
    }
}

fn seconds_to_ms(field: &str, value: f64, min: f64) -> Result<u64, SpecError> {
    // A week is more than any retry delay or task limit this service is meant for.
    const MAX_S: f64 = 7.0 * 24.0 * 3600.0;
    if !value.is_finite() || value < min || value > MAX_S {
        return Err(SpecError::new(
            field,
            format!("{value} is out of range: give seconds between {min} and {MAX_S}"),
        ));
    }
    Ok((value * 1000.0).round() as u64)
}

impl RawSpec {
    /// Checks every field; the error names the first bad one.
    pub fn check(&self) -> Result<JobSpec, SpecError> {
        if let Some(v) = self.version {
            if v != i64::from(SPEC_VERSION) {
                return Err(SpecError::new(
                    "version",
                    format!("version {v} is not known; this service reads version {SPEC_VERSION}"),
                ));
            }
        }
        check_name("name", &self.name)?;
        let kind = match self.kind.as_deref() {
            None | Some("batch") => Kind::Batch,
            Some("service") => Kind::Service,
            Some("periodic") => Kind::Periodic,
            Some(other) => {
                return Err(SpecError::new(
                    "kind",
                    format!(
                        "{other:?} is not a kind of job; use \"batch\", \"service\" or \"periodic\""
                    ),
                ))
            }
        };
        let periodic = self.periodic(kind)?;
        if let Some(check) = &self.health_check {
            if kind != Kind::Service {
                return Err(SpecError::new(
                    "health_check",
                    "only a service's replicas have a health check",
                ));
            }
            check
                .validate(None)
                .map_err(|e| SpecError::new(e.field(), e.to_string()))?;
        }
        let (max_unavailable, max_surge) = self.rolling(kind)?;
        let duration_s = match self.duration_s {
            Some(d) if !d.is_finite() || !(0.0..=7.0 * 24.0 * 3600.0).contains(&d) => {
                return Err(SpecError::new(
                    "duration_s",
                    format!("{d} is out of range: give seconds between 0 and one week"),
                ))
            }
            d => d,
        };
        if kind == Kind::Service {
            for (field, given) in [
                ("count", self.count.is_some()),
                ("max_retries", self.max_retries.is_some()),
                ("timeout_s", self.timeout_s.is_some()),
            ] {
                if given {
                    return Err(SpecError::new(
                        field,
                        "not a service field: a service runs `replicas` copies and restarts each whenever it ends",
                    ));
                }
            }
        } else if self.replicas.is_some() {
            return Err(SpecError::new(
                "replicas",
                "only a service has replicas; a batch job has `count` tasks",
            ));
        }
        let command = match (&self.command, &self.argv) {
            (Some(line), None) => protocol::CommandSpec::Shell(line.clone()),
            (None, Some(argv)) => protocol::CommandSpec::Argv(argv.clone()),
            (Some(_), Some(_)) => {
                return Err(SpecError::new(
                    "argv",
                    "give either command or argv, not both",
                ))
            }
            (None, None) => {
                return Err(SpecError::new(
                    "command",
                    "missing: give a shell line (command = \"...\") or argv = [...]",
                ))
            }
        };
        command.validate().map_err(|m| {
            let field = if self.command.is_some() {
                "command"
            } else {
                "argv"
            };
            SpecError::new(field, m.to_string())
        })?;
        let resources = self.resources()?;
        let (count, count_field) = match kind {
            Kind::Batch | Kind::Periodic => (self.count.unwrap_or(1), "count"),
            Kind::Service => (self.replicas.unwrap_or(1), "replicas"),
        };
        check_count(count_field, count)?;
        let sizes = self.check_sizes(kind, count)?;
        for key in self.env.keys() {
            let ok = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(SpecError::new(
                    format!("env.{key}"),
                    "not a variable name: use letters, digits and _",
                ));
            }
            if key.starts_with("PARLEY_") {
                return Err(SpecError::new(
                    format!("env.{key}"),
                    "PARLEY_ variables are set by the service",
                ));
            }
        }
        let max_retries = self.max_retries.unwrap_or(0);
        if !(0..=MAX_RETRIES).contains(&max_retries) {
            return Err(SpecError::new(
                "max_retries",
                format!("{max_retries} is out of range: give between 0 and {MAX_RETRIES}"),
            ));
        }
        let backoff_ms = seconds_to_ms("backoff_s", self.backoff_s.unwrap_or(1.0), 0.0)?;
        let max_backoff_ms =
            seconds_to_ms("max_backoff_s", self.max_backoff_s.unwrap_or(60.0), 0.0)?;
        if max_backoff_ms < backoff_ms {
            return Err(SpecError::new(
                "max_backoff_s",
                "must be at least backoff_s",
            ));
        }
        let timeout_ms = self
            .timeout_s
            .map(|t| seconds_to_ms("timeout_s", t, 0.001))
            .transpose()?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, dep) in self.depends_on.iter().enumerate() {
            let field = format!("depends_on[{i}]");
            check_name(&field, dep)?;
            if dep == &self.name {
                return Err(SpecError::new(
                    field,
                    "a job cannot depend on itself (a cycle)",
                ));
            }
            if !seen.insert(dep) {
                return Err(SpecError::new(field, format!("{dep:?} is listed twice")));
            }
        }
        let priority = self.priority.unwrap_or(0);
        if !(-1000..=1000).contains(&priority) {
            return Err(SpecError::new(
                "priority",
                format!("{priority} is out of range: give between -1000 and 1000"),
            ));
        }
        let max_running = match self.max_running {
            None => None,
            Some(n) if (1..=i64::from(u32::MAX)).contains(&n) => Some(n as u32),
            Some(n) => {
                return Err(SpecError::new(
                    "max_running",
                    format!("{n} is out of range: give at least 1"),
                ))
            }
        };
        let placement = match self.placement.as_deref() {
            None | Some("tetris") => PlacementPolicy::Tetris,
            Some("first-fit") => PlacementPolicy::FirstFit,
            Some("best-fit") => PlacementPolicy::BestFit,
            Some("spread") => PlacementPolicy::Spread,
            Some(other) => {
                return Err(SpecError::new(
                    "placement",
                    format!("{other:?} is not a policy: use tetris, first-fit, best-fit or spread"),
                ))
            }
        };
        let constraints = self
            .constraints
            .iter()
            .enumerate()
            .map(|(i, c)| c.check(&format!("constraints[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(JobSpec {
            raw: self.clone(),
            name: self.name.clone(),
            kind,
            periodic,
            health_check: self.health_check.clone(),
            command,
            resources,
            count: count as u32,
            env: self.env.clone(),
            max_retries: max_retries as u32,
            backoff_ms,
            max_backoff_ms,
            timeout_ms,
            depends_on: self.depends_on.clone(),
            priority,
            max_running,
            placement,
            constraints,
            max_unavailable,
            max_surge,
            duration_s,
            sizes,
            owner: ANONYMOUS.to_owned(),
        })
    }

    /// `sizes`: one positive number per index, for a batch or periodic job only.
    fn check_sizes(
        &self,
        kind: Kind,
        count: i64,
    ) -> Result<Option<std::sync::Arc<[f64]>>, SpecError> {
        let Some(sizes) = &self.sizes else {
            return Ok(None);
        };
        if kind == Kind::Service {
            return Err(SpecError::new(
                "sizes",
                "is for batch and periodic jobs: a service's replicas have no sizes",
            ));
        }
        if sizes.len() as i64 != count {
            return Err(SpecError::new(
                "sizes",
                format!(
                    "has {} entries for {count} tasks: give one size per index",
                    sizes.len()
                ),
            ));
        }
        if let Some((i, s)) = sizes
            .iter()
            .enumerate()
            .find(|(_, s)| !s.is_finite() || **s <= 0.0 || **s > 1e15)
        {
            return Err(SpecError::new(
                format!("sizes[{i}]"),
                format!("{s} is not a size: give a number above 0 and at most 1e15"),
            ));
        }
        Ok(Some(sizes.as_slice().into()))
    }

    /// A service's rolling-update bounds (`max_unavailable`, `max_surge`); other kinds may not
    /// give them.
    fn rolling(&self, kind: Kind) -> Result<(u32, u32), SpecError> {
        let given = [
            ("max_unavailable", self.max_unavailable),
            ("max_surge", self.max_surge),
        ];
        if kind != Kind::Service {
            if let Some((field, _)) = given.iter().find(|(_, v)| v.is_some()) {
                return Err(SpecError::new(
                    *field,
                    "only a service has a rolling update; give it with kind = \"service\"",
                ));
            }
            return Ok((0, 0));
        }
        for (field, value) in given {
            if let Some(v) = value {
                if !(0..=MAX_COUNT).contains(&v) {
                    return Err(SpecError::new(
                        field,
                        format!("{v} is out of range: give between 0 and {MAX_COUNT}"),
                    ));
                }
            }
        }
        let unavailable = self.max_unavailable.unwrap_or(DEFAULT_MAX_UNAVAILABLE) as u32;
        let surge = self.max_surge.unwrap_or(DEFAULT_MAX_SURGE) as u32;
        if unavailable == 0 && surge == 0 {
            return Err(SpecError::new(
                "max_surge",
                "max_unavailable and max_surge are both 0: a rolling update could replace no \
                 replica; give at least 1 to one of them",
            ));
        }
        Ok((unavailable, surge))
    }

    /// The schedule of a periodic job (`None` for the other kinds, which may not have one).
    fn periodic(&self, kind: Kind) -> Result<Option<crate::schedule::Periodic>, SpecError> {
        use crate::schedule::{Concurrency, Periodic, Schedule};
        if kind != Kind::Periodic {
            for (field, given) in [
                ("schedule", self.schedule.is_some()),
                ("time_zone", self.time_zone.is_some()),
                ("concurrency", self.concurrency.is_some()),
            ] {
                if given {
                    return Err(SpecError::new(field, "only a periodic job has a schedule"));
                }
            }
            return Ok(None);
        }
        // Each run is named NAME-UNIXSECONDS, which must still be a job name.
        if self.name.len() > MAX_NAME_LEN - 11 {
            return Err(SpecError::new(
                "name",
                format!(
                    "a periodic job's name is at most {} characters",
                    MAX_NAME_LEN - 11
                ),
            ));
        }
        for (field, given) in [
            ("depends_on", !self.depends_on.is_empty()),
            ("replicas", self.replicas.is_some()),
        ] {
            if given {
                return Err(SpecError::new(field, "not a periodic job field"));
            }
        }
        let Some(pattern) = &self.schedule else {
            return Err(SpecError::new(
                "schedule",
                "missing: give a cron pattern, e.g. schedule = \"0 3 * * *\"",
            ));
        };
        let schedule = Schedule::parse(pattern, self.time_zone.as_deref().unwrap_or("UTC"))?;
        let concurrency = Concurrency::parse(self.concurrency.as_deref().unwrap_or("forbid"))?;
        Ok(Some(Periodic {
            schedule,
            concurrency,
        }))
    }

    fn resources(&self) -> Result<Resources, SpecError> {
        let Some(r) = &self.resources else {
            return Err(SpecError::new(
                "resources",
                "missing: give what each task needs, e.g. [resources] cpus = 0.1, mem = 32",
            ));
        };
        let mut pairs = Vec::new();
        for (name, value) in [
            ("cpus", r.cpus),
            ("mem", r.mem),
            ("disk", r.disk),
            ("gpus", r.gpus),
        ] {
            let Some(value) = value else { continue };
            let field = format!("resources.{name}");
            if !value.is_finite() || value < 0.0 {
                return Err(SpecError::new(
                    field,
                    format!("{value} must be a number >= 0"),
                ));
            }
            if name == "gpus" && value.fract() != 0.0 {
                return Err(SpecError::new(
                    field,
                    format!("{value} is not a whole number of GPUs"),
                ));
            }
            pairs.push((name, value));
        }
        let resources =
            Resources::from_units(pairs).map_err(|e| SpecError::new("resources", e.to_string()))?;
        if resources.is_empty() {
            return Err(SpecError::new(
                "resources",
                "asks for nothing: give some cpus or mem",
            ));
        }
        Ok(resources)
    }
}

impl JobSpec {
    /// The delays between a task's retries: none before its first failure, then
    /// `backoff_ms`, doubling with each failure in a row, at most `max_backoff_ms`
    /// (`retry_backoff().after(failures)`; no jitter, so a job's schedule is reproducible).
    pub fn retry_backoff(&self) -> protocol::Backoff {
        protocol::Backoff::new(
            std::time::Duration::from_millis(self.backoff_ms),
            std::time::Duration::from_millis(self.max_backoff_ms),
        )
    }

    /// The spec of one run of a periodic job: its batch job, named `name`.
    pub fn run(&self, name: &str) -> JobSpec {
        let mut run = self.clone();
        run.kind = Kind::Batch;
        run.periodic = None;
        run.name = name.to_owned();
        run.raw.name = name.to_owned();
        run.raw.kind = None;
        run.raw.schedule = None;
        run.raw.time_zone = None;
        run.raw.concurrency = None;
        run
    }
}

impl RawConstraint {
    fn check(&self, field: &str) -> Result<Constraint, SpecError> {
        if self.attribute.trim().is_empty() {
            return Err(SpecError::new(
                format!("{field}.attribute"),
                "is empty: name an agent attribute",
            ));
        }
        let a = self.attribute.clone();
        let tests = [
            self.equals.is_some(),
            self.not_equals.is_some(),
            self.spread.is_some(),
            self.max_per_value.is_some(),
        ];
        if tests.iter().filter(|t| **t).count() != 1 {
            return Err(SpecError::new(
                field,
                "give exactly one of equals, not_equals, spread, max_per_value",
            ));
        }
        Ok(
            match (
                &self.equals,
                &self.not_equals,
                self.spread,
                self.max_per_value,
            ) {
                (Some(v), ..) => Constraint::equals(a, v.clone()),
                (_, Some(v), ..) => Constraint::not_equals(a, v.clone()),
                (_, _, Some(true), _) => Constraint::spread(a),
                (_, _, Some(false), _) => {
                    return Err(SpecError::new(
                        format!("{field}.spread"),
                        "spread = false means nothing; leave the constraint out",
                    ))
                }
                (_, _, _, Some(n)) if (1..=i64::from(u32::MAX)).contains(&n) => {
                    Constraint::max_per_value(a, n as u32)
                }
                (_, _, _, Some(n)) => {
                    return Err(SpecError::new(
                        format!("{field}.max_per_value"),
                        format!("{n} is out of range: give at least 1"),
                    ))
                }
                _ => return Err(SpecError::new(field, "no test given")),
            },
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn err(text: &str) -> SpecError {
        parse_any(text).unwrap_err()
    }

    #[test]
    fn retries_wait_nothing_first_then_backoff_doubling_up_to_the_max() {
        let spec = parse_any(
            "name = \"a\"\ncommand = \"x\"\nbackoff_s = 0.5\nmax_backoff_s = 3\n[resources]\ncpus = 1\n",
        )
        .unwrap();
        let waits: Vec<u128> = (0..6)
            .map(|failures| spec.retry_backoff().after(failures).as_millis())
            .collect();
        assert_eq!(waits, [0, 500, 1000, 2000, 3000, 3000]);
        assert_eq!(
            spec.retry_backoff().after(u64::MAX),
            std::time::Duration::from_secs(3)
        );
    }

    #[test]
    fn sizes_are_one_positive_number_per_index_of_a_batch_job() {
        let res = "[resources]\ncpus = 1\n";
        let batch = "name = \"a\"\ncommand = \"x\"\ncount = 3\n";
        let ok = parse_any(&format!("{batch}sizes = [1, 2.5, 4]\n{res}")).unwrap();
        assert_eq!(ok.sizes.as_deref(), Some(&[1.0, 2.5, 4.0][..]));
        for (sizes, field, says) in [
            ("[1, 2]", "sizes", "has 2 entries for 3 tasks"),
            ("[1, 0, 2]", "sizes[1]", "is not a size"),
            ("[1, 2, -3]", "sizes[2]", "is not a size"),
        ] {
            let e = err(&format!("{batch}sizes = {sizes}\n{res}"));
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(says), "{e}");
        }
        let e = err(&format!(
            "name = \"w\"\nkind = \"service\"\ncommand = \"x\"\nsizes = [1]\n{res}"
        ));
        assert_eq!(e.field, "sizes", "{e}");
    }

    #[test]
    fn rolling_update_bounds_are_a_service_s_and_checked() {
        let service = "name = \"web\"\nkind = \"service\"\ncommand = \"x\"\n";
        let res = "[resources]\ncpus = 1\n";
        let ok = parse_any(&format!("{service}{res}")).unwrap();
        assert_eq!((ok.max_unavailable, ok.max_surge), (0, 1));
        let given = parse_any(&format!(
            "{service}max_unavailable = 2\nmax_surge = 0\n{res}"
        ))
        .unwrap();
        assert_eq!((given.max_unavailable, given.max_surge), (2, 0));
        let e = err(&format!(
            "{service}max_unavailable = 0\nmax_surge = 0\n{res}"
        ));
        assert_eq!((e.field.as_str(), e.line), ("max_surge", Some(5)), "{e}");
        let e = err(&format!("{service}max_surge = -1\n{res}"));
        assert_eq!(e.field, "max_surge", "{e}");
        let e = err(&format!("{service}max_unavailable = 1.5\n{res}"));
        assert_eq!(e.field, "max_unavailable", "{e}");
        let e = err(&format!(
            "name = \"b\"\ncommand = \"x\"\nmax_surge = 1\n{res}"
        ));
        assert_eq!(e.field, "max_surge", "{e}");
        let e = err(&format!(
            "name = \"b\"\ncommand = \"x\"\nduration_s = -1\n{res}"
        ));
        assert_eq!(e.field, "duration_s", "{e}");
        let d = parse_any(&format!(
            "name = \"b\"\ncommand = \"x\"\nduration_s = 0.5\n{res}"
        ))
        .unwrap();
        assert_eq!(d.duration_s, Some(0.5));
    }

    const GOOD: &str = r#"
name = "render"
command = "echo $PARLEY_TASK_INDEX"
count = 10
max_retries = 2
timeout_s = 30
depends_on = ["prep"]
placement = "best-fit"

[resources]
cpus = 0.5
mem = 64

[[constraints]]
attribute = "zone"
equals = "b"
"#;

    #[test]
    fn a_good_spec_reads_the_same_in_toml_and_json() {
        let spec = parse(GOOD, Format::Toml).unwrap();
        assert_eq!(spec.count, 10);
        assert_eq!(spec.max_retries, 2);
        assert_eq!(spec.timeout_ms, Some(30_000));
        assert_eq!(spec.placement, PlacementPolicy::BestFit);
        assert_eq!(spec.resources, "cpus=0.5,mem=64".parse().unwrap());
        assert_eq!(spec.constraints, [Constraint::equals("zone", "b")]);
        let json = serde_json::to_string(&spec.raw).unwrap();
        assert_eq!(parse(&json, Format::Json).unwrap(), spec);
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line() {
        let e = err("name = \"a\"\ncommand = \"true\"\ncuont = 3\n[resources]\ncpus = 1\n");
        assert_eq!((e.field.as_str(), e.line), ("cuont", Some(3)), "{e}");
        let e = err("name = \"a\"\ncommand = \"true\"\n[resources]\ncpus = 1\ngpu = 1\n");
        assert_eq!((e.field.as_str(), e.line), ("gpu", Some(5)), "{e}");
        let e = err(r#"{"name": "a", "command": "true", "resources": {"cpus": 1}, "colour": 1}"#);
        assert_eq!(e.field, "colour", "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let base = "name = \"a\"\ncommand = \"true\"\n[resources]\ncpus = 1\n";
        let with = |extra: &str| format!("{extra}\n{base}");
        let cases = [
            (with("count = -1"), "count", Some(1)),
            (with("count = 0"), "count", Some(1)),
            (with("max_retries = -2"), "max_retries", Some(1)),
            (with("timeout_s = 0"), "timeout_s", Some(1)),
            (with("placement = \"random\""), "placement", Some(1)),
            (with("kind = \"cron\""), "kind", Some(1)),
            (with("kind = \"periodic\""), "schedule", None),
            (
                with("kind = \"periodic\"\nschedule = \"99 * * * *\""),
                "schedule",
                Some(2),
            ),
            (with("schedule = \"* * * * *\""), "schedule", Some(1)),
            (with("kind = \"service\"\ncount = 2"), "count", Some(2)),
            (with("replicas = 2"), "replicas", Some(1)),
            (
                format!("kind = \"service\"\n{base}[health_check]\ninterval_s = -1\nhttp = {{ port = 80, path = \"/\" }}\n"),
                "health_check.interval_s",
                None,
            ),
            (
                format!("{base}[health_check]\nhttp = {{ port = 80, path = \"/\" }}\n"),
                "health_check",
                None,
            ),
            (
                with("kind = \"service\"\nreplicas = -1"),
                "replicas",
                Some(2),
            ),
            (with("version = 2"), "version", Some(1)),
            (with("depends_on = [\"a\"]"), "depends_on[0]", None),
            (format!("{base}gpus = 0.5\n"), "resources.gpus", Some(5)),
            (format!("{base}mem = -3\n"), "resources.mem", Some(5)),
            (
                "name = \"Bad_Name\"\ncommand = \"true\"\n[resources]\ncpus = 1\n".into(),
                "name",
                Some(1),
            ),
            (
                "name = \"a\"\n[resources]\ncpus = 1\n".into(),
                "command",
                None,
            ),
            (
                "name = \"a\"\ncommand = \"true\"\n".into(),
                "resources",
                None,
            ),
            (
                format!("{base}[[constraints]]\nattribute = \"zone\"\n"),
                "constraints[0]",
                None,
            ),
        ];
        for (text, field, line) in cases {
            let e = err(&text);
            assert_eq!(e.field, field, "{text}: {e}");
            if line.is_some() {
                assert_eq!(e.line, line, "{text}: {e}");
            }
        }
    }

    #[test]
    fn the_example_specs_are_valid() {
        for (file, text) in [
            ("array.toml", include_str!("../../examples/jobs/array.toml")),
            (
                "service.toml",
                include_str!("../../examples/jobs/service.toml"),
            ),
            (
                "periodic.toml",
                include_str!("../../examples/jobs/periodic.toml"),
            ),
        ] {
            if let Err(e) = parse(text, Format::Toml) {
                panic!("examples/jobs/{file}: {e}");
            }
        }
    }

    #[test]
    fn syntax_errors_have_a_line() {
        let e = err("name = \"a\"\ncommand = \n");
        assert_eq!(e.line, Some(2), "{e}");
        let e = err("{\"name\": 3}");
        assert_eq!(e.line, Some(1), "{e}");
    }
}
