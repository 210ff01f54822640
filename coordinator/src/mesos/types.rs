//! The JSON shapes of the Mesos v1 scheduler calls Parley reads (Mesos' protobuf JSON mapping:
//! snake_case fields, enums as strings). Unknown fields are ignored, as Mesos does: pymesos
//! passes the framework's own dicts through. Numbers are accepted as JSON numbers or numeric
//! strings. Events are built as JSON in [`super::convert`].

use serde::{Deserialize, Deserializer};

/// `{"value": "..."}`: every Mesos id.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Id {
    /// The id.
    pub value: String,
}

/// One call: `POST /api/v1/scheduler`.
#[derive(Debug, Clone, Deserialize)]
pub struct Call {
    /// `SUBSCRIBE`, `ACCEPT`, `DECLINE`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The caller's framework (all calls but a first SUBSCRIBE).
    #[serde(default)]
    pub framework_id: Option<Id>,
    /// SUBSCRIBE.
    #[serde(default)]
    pub subscribe: Option<Subscribe>,
    /// ACCEPT.
    #[serde(default)]
    pub accept: Option<Accept>,
    /// DECLINE.
    #[serde(default)]
    pub decline: Option<Decline>,
    /// ACKNOWLEDGE.
    #[serde(default)]
    pub acknowledge: Option<Acknowledge>,
    /// KILL.
    #[serde(default)]
    pub kill: Option<Kill>,
    /// RECONCILE.
    #[serde(default)]
    pub reconcile: Option<Reconcile>,
}

/// `subscribe`.
#[derive(Debug, Clone, Deserialize)]
pub struct Subscribe {
    /// Who the framework is.
    pub framework_info: FrameworkInfo,
}

/// `FrameworkInfo`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FrameworkInfo {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Set when failing over.
    #[serde(default)]
    pub id: Option<Id>,
    /// Seconds its tasks survive a lost stream.
    #[serde(default, deserialize_with = "number_opt")]
    pub failover_timeout: Option<f64>,
    /// Its role (single-role frameworks).
    #[serde(default)]
    pub role: Option<String>,
    /// Its roles (`MULTI_ROLE` frameworks).
    #[serde(default)]
    pub roles: Vec<String>,
    /// Capabilities, e.g. `MULTI_ROLE`, `PARTITION_AWARE`.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Its web UI, for the dashboard's link.
    #[serde(default)]
    pub webui_url: Option<String>,
}

/// One framework capability.
#[derive(Debug, Clone, Deserialize)]
pub struct Capability {
    /// Its name, e.g. `PARTITION_AWARE`.
    #[serde(rename = "type", default)]
    pub kind: String,
}

/// `filters`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Filters {
    /// Do not offer the resources again for this long.
    #[serde(default, deserialize_with = "number_opt")]
    pub refuse_seconds: Option<f64>,
}

/// `accept`.
#[derive(Debug, Clone, Deserialize)]
pub struct Accept {
    /// Offers used.
    #[serde(default)]
    pub offer_ids: Vec<Id>,
    /// What to do with them (only `LAUNCH` here).
    #[serde(default)]
    pub operations: Vec<Operation>,
    /// Filter for the unused rest.
    #[serde(default)]
    pub filters: Option<Filters>,
}

/// One offer operation.
#[derive(Debug, Clone, Deserialize)]
pub struct Operation {
    /// `LAUNCH`, `RESERVE`, ...
    #[serde(rename = "type", default)]
    pub kind: String,
    /// For `LAUNCH`.
    #[serde(default)]
    pub launch: Option<Launch>,
}

/// `launch`.
#[derive(Debug, Clone, Deserialize)]
pub struct Launch {
    /// The tasks.
    #[serde(default)]
    pub task_infos: Vec<TaskInfo>,
}

/// `TaskInfo`.
#[derive(Debug, Clone, Deserialize)]
pub struct TaskInfo {
    /// A human-readable name.
    #[serde(default)]
    pub name: String,
    /// Chosen by the framework.
    pub task_id: Id,
    /// The agent of the offers.
    pub agent_id: Id,
    /// What it uses.
    #[serde(default)]
    pub resources: Vec<Resource>,
    /// What to run (command tasks).
    #[serde(default)]
    pub command: Option<CommandInfo>,
    /// A custom executor (not supported: refused).
    #[serde(default)]
    pub executor: Option<serde_json::Value>,
    /// A container (not supported: refused).
    #[serde(default)]
    pub container: Option<serde_json::Value>,
    /// A health check (`COMMAND` or `HTTP`; see [`super::health`]).
    #[serde(default)]
    pub health_check: Option<MesosHealthCheck>,
}

/// Mesos' `HealthCheck`, which [`super::health`] turns into Parley's.
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

/// `CommandInfo`.
#[derive(Debug, Clone, Deserialize)]
pub struct CommandInfo {
    /// The shell line (`shell: true`) or the executable (`shell: false`).
    #[serde(default)]
    pub value: Option<String>,
    /// Run `value` with `sh -c` (Mesos' default: true).
    #[serde(default)]
    pub shell: Option<bool>,
    /// With `shell: false`, the argument vector, `argv[0]` first.
    #[serde(default)]
    pub arguments: Vec<String>,
    /// Environment variables.
    #[serde(default)]
    pub environment: Option<Environment>,
}

/// `Environment`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Environment {
    /// The variables.
    #[serde(default)]
    pub variables: Vec<Variable>,
}

/// One environment variable.
#[derive(Debug, Clone, Deserialize)]
pub struct Variable {
    /// Its name.
    pub name: String,
    /// `VALUE` (default) or `SECRET` (not supported).
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// Its value.
    #[serde(default)]
    pub value: Option<String>,
}

/// `Resource`.
#[derive(Debug, Clone, Deserialize)]
pub struct Resource {
    /// `cpus`, `mem`, ...
    pub name: String,
    /// `SCALAR` (the only type Parley has), `RANGES`, `SET`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// The amount of a scalar.
    #[serde(default)]
    pub scalar: Option<Scalar>,
}

/// `Value.Scalar`.
#[derive(Debug, Clone, Deserialize)]
pub struct Scalar {
    /// The amount.
    #[serde(deserialize_with = "number")]
    pub value: f64,
}

/// `decline`.
#[derive(Debug, Clone, Deserialize)]
pub struct Decline {
    /// Offers given back.
    #[serde(default)]
    pub offer_ids: Vec<Id>,
    /// The filter.
    #[serde(default)]
    pub filters: Option<Filters>,
}

/// `acknowledge`.
#[derive(Debug, Clone, Deserialize)]
pub struct Acknowledge {
    /// The task.
    pub task_id: Id,
    /// The status' uuid, as sent (base64 of 16 bytes).
    pub uuid: String,
}

/// `kill`.
#[derive(Debug, Clone, Deserialize)]
pub struct Kill {
    /// The task.
    pub task_id: Id,
}

/// `reconcile`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Reconcile {
    /// Tasks asked about; empty means every task (implicit reconciliation).
    #[serde(default)]
    pub tasks: Vec<ReconcileTask>,
}

/// One task of a reconcile call.
#[derive(Debug, Clone, Deserialize)]
pub struct ReconcileTask {
    /// The task.
    pub task_id: Id,
    /// The agent the framework believes runs it, if it says.
    #[serde(default)]
    pub agent_id: Option<Id>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Number {
    Float(f64),
    Text(String),
}

fn to_f64<E: serde::de::Error>(n: Number) -> Result<f64, E> {
    match n {
        Number::Float(f) => Ok(f),
        Number::Text(s) => s
            .trim()
            .parse()
            .map_err(|_| E::custom(format!("{s:?} is not a number"))),
    }
}

/// A number given as a JSON number or a numeric string.
fn number<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    to_f64(Number::deserialize(d)?)
}

/// An optional [`number`].
fn number_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Option::<Number>::deserialize(d)?.map(to_f64).transpose()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_pymesos_accept_parses_and_unknown_fields_are_ignored() {
        let call: Call = serde_json::from_str(
            r#"{"type":"ACCEPT","framework_id":{"value":"F"},"accept":{"offer_ids":[{"value":"O1"}],
            "operations":[{"type":"LAUNCH","launch":{"task_infos":[{"task_id":{"value":"T"},
            "agent_id":{"value":"A"},"name":"echo","command":{"value":"echo hi","shell":true},
            "resources":[{"name":"cpus","type":"SCALAR","scalar":{"value":"0.5"}}],
            "whatever":{"x":1}}]}}],"filters":{"refuse_seconds":5}}}"#,
        )
        .unwrap();
        let accept = call.accept.unwrap();
        assert_eq!(accept.offer_ids[0].value, "O1");
        let task = &accept.operations[0].launch.as_ref().unwrap().task_infos[0];
        assert_eq!(task.resources[0].scalar.as_ref().unwrap().value, 0.5);
        assert_eq!(accept.filters.unwrap().refuse_seconds, Some(5.0));
    }

    #[test]
    fn a_non_numeric_string_is_refused() {
        let bad = serde_json::from_str::<Filters>(r#"{"refuse_seconds":"soon"}"#);
        assert!(bad.unwrap_err().to_string().contains("soon"));
    }
}
