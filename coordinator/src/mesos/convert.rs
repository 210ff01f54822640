//! Mesos' shapes ↔ Parley's: ids, roles, resources, attributes, task states, status uuids,
//! commands, and each [`FrameworkEvent`] as Mesos event JSON.
//!
//! | Parley `TaskState` | Mesos `TaskState` |
//! |---|---|
//! | `staging` | `TASK_STAGING` |
//! | `starting` | `TASK_STARTING` |
//! | `running` | `TASK_RUNNING` (also from `TASK_KILLING`) |
//! | `finished` | `TASK_FINISHED` |
//! | `failed` | `TASK_FAILED` |
//! | `killed` | `TASK_KILLED` |
//! | `lost` | `TASK_LOST` (also from `TASK_DROPPED`, `TASK_UNKNOWN`) |
//! | `unreachable` | `TASK_UNREACHABLE` (partition-aware frameworks only) |
//! | `gone` | `TASK_GONE` (also from `TASK_GONE_BY_OPERATOR`; partition-aware frameworks only) |
//! | `error` | `TASK_ERROR` |
//!
//! Reconciliation of a task Parley does not know answers `TASK_UNKNOWN` to a `PARTITION_AWARE`
//! framework and `TASK_LOST` to others, as Mesos does.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use protocol::{
    CommandSpec, FrameworkEvent, Offer, Resources, RolePath, TaskId, TaskSpec, TaskState,
    TaskStatus, Timestamp, UpdateId,
};
use serde_json::{json, Value};

use super::types::{self, FrameworkInfo};
use crate::web::error::ApiError;

/// The Parley role Mesos' default role `"*"` (and a framework naming no role) maps to.
pub const DEFAULT_ROLE: &str = "default";

fn invalid(field: &'static str, reason: impl Into<String>) -> ApiError {
    ApiError::InvalidField {
        field,
        reason: reason.into(),
    }
}

/// The framework's Mesos role (`roles[0]` for `MULTI_ROLE`, else `role`, else `"*"`) and the
/// Parley role it runs under (`"*"` is [`DEFAULT_ROLE`]; others must be valid role paths).
pub fn role(info: &FrameworkInfo) -> Result<(String, RolePath), ApiError> {
    let mesos = info
        .roles
        .first()
        .or(info.role.as_ref())
        .cloned()
        .unwrap_or_else(|| "*".to_owned());
    let parley = if mesos == "*" { DEFAULT_ROLE } else { &mesos };
    let path = RolePath::new(parley).map_err(|e| invalid("framework_info.role", e.to_string()))?;
    Ok((mesos, path))
}

/// A Mesos `Resource` list as Parley resources: `SCALAR` only, amounts of one name summed
/// (Mesos lists one name once per role or reservation).
pub fn resources(list: &[types::Resource], field: &'static str) -> Result<Resources, ApiError> {
    let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
    for r in list {
        match r.kind.as_deref() {
            None | Some("SCALAR") => {}
            Some(other) => {
                return Err(invalid(
                    field,
                    format!(
                        "resource {:?} has type {other}; Parley's resources are SCALAR only",
                        r.name
                    ),
                ))
            }
        }
        let value = r
            .scalar
            .as_ref()
            .ok_or_else(|| invalid(field, format!("resource {:?} has no scalar", r.name)))?
            .value;
        *sums.entry(r.name.as_str()).or_default() += value;
    }
    Resources::from_units(sums).map_err(|e| invalid(field, e.to_string()))
}

/// Parley resources as a Mesos `Resource` list, unreserved (`"role": "*"`); with `allocated`
/// (a `MULTI_ROLE` framework's role) each carries `allocation_info`.
pub fn resources_json(r: &Resources, allocated: Option<&str>) -> Value {
    r.iter()
        .map(|(name, millis)| {
            let mut v = json!({
                "name": name.as_str(),
                "type": "SCALAR",
                "scalar": {"value": millis as f64 / 1000.0},
                "role": "*",
            });
            if let Some(role) = allocated {
                v["allocation_info"] = json!({ "role": role });
            }
            v
        })
        .collect()
}

/// Agent attributes: `SCALAR` when the value is a number, else `TEXT`.
pub fn attributes_json(attributes: &BTreeMap<String, String>) -> Value {
    attributes
        .iter()
        .map(|(k, v)| match v.trim().parse::<f64>() {
            Ok(n) if n.is_finite() => json!({"name": k, "type": "SCALAR", "scalar": {"value": n}}),
            _ => json!({"name": k, "type": "TEXT", "text": {"value": v}}),
        })
        .collect()
}

/// A Parley task state as Mesos'.
pub fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Staging => "TASK_STAGING",
        TaskState::Starting => "TASK_STARTING",
        TaskState::Running => "TASK_RUNNING",
        TaskState::Finished => "TASK_FINISHED",
        TaskState::Failed => "TASK_FAILED",
        TaskState::Killed => "TASK_KILLED",
        TaskState::Lost => "TASK_LOST",
        TaskState::Error => "TASK_ERROR",
        TaskState::Unreachable => "TASK_UNREACHABLE",
        TaskState::Gone => "TASK_GONE",
    }
}

/// A Mesos task state as Parley's (`None` for a name Mesos does not have).
pub fn state_from_name(name: &str) -> Option<TaskState> {
    Some(match name {
        "TASK_STAGING" => TaskState::Staging,
        "TASK_STARTING" => TaskState::Starting,
        "TASK_RUNNING" | "TASK_KILLING" => TaskState::Running,
        "TASK_FINISHED" => TaskState::Finished,
        "TASK_FAILED" => TaskState::Failed,
        "TASK_KILLED" => TaskState::Killed,
        "TASK_LOST" | "TASK_DROPPED" | "TASK_UNKNOWN" => TaskState::Lost,
        "TASK_UNREACHABLE" => TaskState::Unreachable,
        "TASK_GONE" | "TASK_GONE_BY_OPERATOR" => TaskState::Gone,
        "TASK_ERROR" => TaskState::Error,
        _ => return None,
    })
}

/// An update id as a Mesos status `uuid`: base64 of its 16 bytes.
pub fn uuid_of(id: UpdateId) -> String {
    STANDARD.encode(id.0.as_bytes())
}

/// A status `uuid` sent back in an ACKNOWLEDGE, as the update id it came from.
pub fn update_id(uuid: &str) -> Result<UpdateId, ApiError> {
    let bytes = STANDARD
        .decode(uuid.trim())
        .map_err(|e| invalid("acknowledge.uuid", format!("not base64: {e}")))?;
    let bytes: [u8; 16] = bytes.try_into().map_err(|b: Vec<u8>| {
        invalid(
            "acknowledge.uuid",
            format!("{} bytes; a status uuid is 16", b.len()),
        )
    })?;
    Ok(UpdateId(uuid::Uuid::from_bytes(bytes)))
}

/// Seconds since the epoch, as Mesos' `timestamp`.
pub fn seconds(t: Timestamp) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

/// A Mesos task id as Parley's (validated: it names a sandbox directory).
pub fn task_id(id: &types::Id, field: &'static str) -> Result<TaskId, ApiError> {
    TaskId::new(id.value.clone()).map_err(|e| invalid(field, e.to_string()))
}

/// A coordinator-chosen id (framework, agent, offer) from its Mesos form.
pub fn uuid_id<T: std::str::FromStr>(id: &types::Id, field: &'static str) -> Result<T, ApiError> {
    id.value.parse().map_err(|_| {
        invalid(
            field,
            format!("{:?} is not an id this coordinator issued", id.value),
        )
    })
}

/// A `LAUNCH`ed `TaskInfo` as a Parley task: a command task (custom executors and containers
/// are refused), `shell: true` (the default) runs `value` with `sh -c`, `shell: false` execs
/// `value` with `arguments` as its argument vector (`arguments[0]` is `argv[0]`, as in Mesos;
/// the program is always `value`).
pub fn task_spec(t: &types::TaskInfo) -> Result<TaskSpec, ApiError> {
    const FIELD: &str = "accept.operations.launch.task_infos";
    let task_id = task_id(&t.task_id, "accept.operations.launch.task_infos.task_id")?;
    let task_err = |reason: &str| ApiError::InvalidTask {
        task: task_id.clone(),
        reason: reason.to_owned(),
    };
    if t.executor.is_some() {
        return Err(task_err(
            "custom executors (TaskInfo.executor) are not supported; give a command",
        ));
    }
    if t.container.is_some() {
        return Err(task_err(
            "TaskInfo.container is not supported; give a plain command",
        ));
    }
    let Some(cmd) = &t.command else {
        return Err(task_err("TaskInfo.command is missing"));
    };
    let value = cmd.value.clone().unwrap_or_default();
    let command = if cmd.shell.unwrap_or(true) {
        CommandSpec::Shell(value)
    } else {
        let mut argv = vec![value];
        argv.extend(cmd.arguments.iter().skip(1).cloned());
        CommandSpec::Argv(argv)
    };
    let mut env = BTreeMap::new();
    for var in cmd.environment.iter().flat_map(|e| &e.variables) {
        if var.kind.as_deref().is_some_and(|k| k != "VALUE") {
            return Err(task_err(
                "environment variables of type SECRET are not supported",
            ));
        }
        env.insert(var.name.clone(), var.value.clone().unwrap_or_default());
    }
    let health_check = match &t.health_check {
        Some(h) => Some(super::health::health_check(h).map_err(|e| task_err(&e.to_string()))?),
        None => None,
    };
    Ok(TaskSpec {
        task_id: task_id.clone(),
        name: t.name.clone(),
        agent_id: uuid_id(&t.agent_id, "accept.operations.launch.task_infos.agent_id")?,
        resources: resources(&t.resources, FIELD)?,
        command,
        env,
        duration_s: None,
        isolation: None,
        health_check,
        priority: None,
    })
}

/// What the stream of one framework needs to know to shape its events.
#[derive(Debug, Clone, Default)]
pub struct Shape {
    /// The framework's role, for `allocation_info` (set for `MULTI_ROLE` frameworks only).
    pub allocation_role: Option<String>,
}

fn offer_json(o: &Offer, shape: &Shape) -> Value {
    let mut resources = resources_json(&o.resources, shape.allocation_role.as_deref());
    if let Some(r) = &o.reservation {
        mark_reserved(&mut resources, r.role.as_str());
    }
    json!({
        "id": {"value": o.offer_id.to_string()},
        "framework_id": {"value": o.framework_id.to_string()},
        "agent_id": {"value": o.agent_id.to_string()},
        "hostname": o.hostname,
        "resources": resources,
        "attributes": attributes_json(&o.attributes),
    })
}

/// Marks the resources of an offer drawn from a reserved pool as Mesos shows
/// reserved resources: the pre-1.9 `role` field set to the role, and a one-entry `reservations`
/// stack (`STATIC`: Mesos-API frameworks cannot UNRESERVE here). The default role maps back to
/// `"*"` only for unreserved resources, so a pool reserved for it keeps its Parley name.
fn mark_reserved(resources: &mut Value, role: &str) {
    if let Value::Array(list) = resources {
        for r in list {
            r["role"] = json!(role);
            r["reservations"] = json!([{"type": "STATIC", "role": role}]);
        }
    }
}

/// A status update as Mesos' `TaskStatus`, with `uuid` (so the framework acknowledges it).
pub fn status_json(s: &TaskStatus) -> Value {
    let mut v = json!({
        "task_id": {"value": s.task_id.as_str()},
        "state": state_name(s.state),
        "agent_id": {"value": s.agent_id.to_string()},
        "source": if s.state == TaskState::Lost { "SOURCE_MASTER" } else { "SOURCE_EXECUTOR" },
        "timestamp": seconds(s.timestamp),
        "uuid": uuid_of(s.update_id),
    });
    if let Some(m) = &s.message {
        v["message"] = json!(m);
    }
    if let Some(healthy) = s.healthy {
        v["healthy"] = json!(healthy);
        if s.state == TaskState::Running {
            v["reason"] = json!("REASON_TASK_HEALTH_CHECK_STATUS_UPDATED");
        }
    }
    if s.reason.as_deref() == Some(protocol::task::REASON_MEMORY_LIMIT) {
        v["reason"] = json!("REASON_CONTAINER_LIMITATION_MEMORY");
        v["source"] = json!("SOURCE_AGENT");
    }
    if s.reason.as_deref() == Some(protocol::task::REASON_PREEMPTED) {
        v["reason"] = json!("REASON_CONTAINER_PREEMPTED");
        v["source"] = json!("SOURCE_MASTER");
    }
    v
}

/// A reconciliation answer (no `uuid`: not acknowledged), from the master.
pub fn reconciled_json(
    task_id: &str,
    state: &str,
    agent: Option<String>,
    message: Option<&str>,
    at: f64,
) -> Value {
    let mut v = json!({
        "task_id": {"value": task_id},
        "state": state,
        "source": "SOURCE_MASTER",
        "reason": "REASON_RECONCILIATION",
        "timestamp": at,
    });
    if let Some(a) = agent {
        v["agent_id"] = json!({ "value": a });
    }
    if let Some(m) = message {
        v["message"] = json!(m);
    }
    v
}

/// An UPDATE event around a status.
pub fn update_event(status: Value) -> Value {
    json!({"type": "UPDATE", "update": {"status": status}})
}

/// The INVERSE_OFFERS event that tells a framework an agent it runs tasks on is being drained:
/// one inverse offer for the whole agent (no `resources`, as Mesos sends for maintenance),
/// whose `unavailability.start` is the drain's deadline. Its id is derived from the agent and the
/// framework, so the same drain told again has the same id. ACCEPT_INVERSE_OFFERS and
/// DECLINE_INVERSE_OFFERS are answered 202 and change nothing: the deadline holds either way.
pub fn inverse_offers_event(d: &protocol::maintenance::AgentDraining) -> Value {
    let start_ns = d.deadline.timestamp_nanos_opt().unwrap_or(i64::MAX);
    json!({"type": "INVERSE_OFFERS", "inverse_offers": {"inverse_offers": [{
        "id": {"value": format!("drain-{}-{}", d.agent_id, d.framework_id)},
        "framework_id": {"value": d.framework_id.to_string()},
        "agent_id": {"value": d.agent_id.to_string()},
        "unavailability": {"start": {"nanoseconds": start_ns}},
        "resources": [],
    }]}})
}

/// A Parley framework event as the Mesos events it becomes (SUBSCRIBED is followed by a
/// HEARTBEAT, as Mesos does).
pub fn events(event: &FrameworkEvent, shape: &Shape) -> Vec<Value> {
    match event {
        FrameworkEvent::Subscribed(r) => vec![
            json!({"type": "SUBSCRIBED", "subscribed": {
                "framework_id": {"value": r.framework_id.to_string()},
                "heartbeat_interval_seconds": r.heartbeat_interval_s,
            }}),
            json!({"type": "HEARTBEAT"}),
        ],
        FrameworkEvent::Offers { offers } => vec![json!({"type": "OFFERS", "offers": {
            "offers": offers.iter().map(|o| offer_json(o, shape)).collect::<Vec<_>>(),
        }})],
        FrameworkEvent::Rescind { offer_id } => vec![json!({"type": "RESCIND", "rescind": {
            "offer_id": {"value": offer_id.to_string()},
        }})],
        FrameworkEvent::Update { status } => vec![update_event(status_json(status))],
        FrameworkEvent::Heartbeat {} => vec![json!({"type": "HEARTBEAT"})],
        FrameworkEvent::Error { message } => {
            vec![json!({"type": "ERROR", "error": {"message": message}})]
        }
        // A drain is Mesos maintenance: an inverse offer for the agent, whose
        // unavailability starts at the drain's deadline (when the tasks still there are killed).
        FrameworkEvent::AgentDraining(d) => vec![inverse_offers_event(d)],
        // Preemption is not announced to Mesos frameworks (Mesos has no such
        // event): at the deadline they get TASK_KILLED, reason REASON_CONTAINER_PREEMPTED.
        FrameworkEvent::Preemption(_) => Vec::new(),
        // Mesos frameworks launch no gang (an accept names one agent's offers); the event
        // cannot reach them, and Mesos has none to map it to.
        FrameworkEvent::GangFailed(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use protocol::{AgentId, FrameworkId};

    fn res(name: &str, kind: &str, value: f64) -> types::Resource {
        serde_json::from_value(json!({"name": name, "type": kind, "scalar": {"value": value}}))
            .unwrap()
    }

    #[test]
    fn an_offer_from_a_reserved_pool_shows_its_resources_reserved() {
        let mut offer: Offer = serde_json::from_value(json!({
            "offer_id": protocol::OfferId::new(), "framework_id": FrameworkId::new(),
            "agent_id": AgentId::new(), "hostname": "h", "resources": {"cpus": 2, "mem": 64},
            "agent_total": {"cpus": 4}, "created_at": "2026-11-23T00:00:00Z",
            "expires_at": "2026-11-23T00:01:00Z",
        }))
        .unwrap();
        let plain = offer_json(&offer, &Shape::default());
        assert!(plain["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["role"] == "*" && r.get("reservations").is_none()));
        offer.reservation = Some(protocol::reservation::OfferReservation {
            role: "eng/batch".parse().unwrap(),
        });
        let reserved = offer_json(&offer, &Shape::default());
        for r in reserved["resources"].as_array().unwrap() {
            assert_eq!(r["role"], "eng/batch", "{r}");
            assert_eq!(
                r["reservations"],
                json!([{"type": "STATIC", "role": "eng/batch"}])
            );
        }
    }

    #[test]
    fn a_drain_becomes_one_inverse_offer_starting_at_its_deadline() {
        let (agent, fw) = (AgentId::new(), FrameworkId::new());
        let deadline = chrono::DateTime::from_timestamp(1_700_000_600, 5).unwrap();
        let drain = protocol::maintenance::AgentDraining {
            agent_id: agent,
            framework_id: fw,
            deadline,
            task_ids: vec!["t".parse().unwrap()],
        };
        let out = events(
            &FrameworkEvent::AgentDraining(drain.clone()),
            &Shape::default(),
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["type"], "INVERSE_OFFERS");
        let offers = out[0]["inverse_offers"]["inverse_offers"]
            .as_array()
            .unwrap();
        assert_eq!(offers.len(), 1);
        assert_eq!(offers[0]["agent_id"]["value"], agent.to_string());
        assert_eq!(offers[0]["framework_id"]["value"], fw.to_string());
        assert_eq!(
            offers[0]["unavailability"]["start"]["nanoseconds"],
            1_700_000_600_000_000_005i64
        );
        // Told again, the same id.
        let again = events(&FrameworkEvent::AgentDraining(drain), &Shape::default());
        assert_eq!(
            again[0]["inverse_offers"]["inverse_offers"][0]["id"],
            offers[0]["id"]
        );
    }

    #[test]
    fn resources_go_both_ways_and_names_are_summed() {
        let r = resources(
            &[
                res("cpus", "SCALAR", 0.5),
                res("mem", "SCALAR", 32.0),
                res("cpus", "SCALAR", 1.0),
            ],
            "f",
        )
        .unwrap();
        assert_eq!(r, "cpus=1.5,mem=32".parse().unwrap());
        let back = resources_json(&r, None);
        assert_eq!(
            back[0],
            json!({"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.5}, "role": "*"})
        );
        let again: Vec<types::Resource> = serde_json::from_value(back).unwrap();
        assert_eq!(resources(&again, "f").unwrap(), r);
        assert!(resources(&[res("ports", "RANGES", 1.0)], "f").is_err());
        assert!(resources(&[res("cpus", "SCALAR", -1.0)], "f").is_err());
    }

    #[test]
    fn every_state_maps_back_to_itself() {
        for s in [
            TaskState::Staging,
            TaskState::Starting,
            TaskState::Running,
            TaskState::Finished,
            TaskState::Failed,
            TaskState::Killed,
            TaskState::Lost,
            TaskState::Error,
            TaskState::Unreachable,
            TaskState::Gone,
        ] {
            assert_eq!(state_from_name(state_name(s)), Some(s));
        }
        assert_eq!(state_from_name("TASK_UNKNOWN"), Some(TaskState::Lost));
        assert_eq!(state_from_name("RUNNING"), None);
    }

    #[test]
    fn a_status_uuid_is_24_base64_characters_and_comes_back() {
        let id = UpdateId::new();
        let uuid = uuid_of(id);
        assert_eq!(uuid.len(), 24);
        assert_eq!(update_id(&uuid).unwrap(), id);
        assert!(update_id("not base64!").is_err());
        assert!(update_id("AAAA").is_err());
    }

    #[test]
    fn star_is_the_default_role_and_multi_role_takes_the_first() {
        let info = |v: Value| serde_json::from_value::<FrameworkInfo>(v).unwrap();
        assert_eq!(role(&info(json!({}))).unwrap().1.as_str(), DEFAULT_ROLE);
        assert_eq!(role(&info(json!({"role": "*"}))).unwrap().0, "*");
        let (mesos, parley) =
            role(&info(json!({"role": "x", "roles": ["eng/batch", "y"]}))).unwrap();
        assert_eq!(
            (mesos.as_str(), parley.as_str()),
            ("eng/batch", "eng/batch")
        );
        assert!(role(&info(json!({"role": "Bad Role"}))).is_err());
    }

    #[test]
    fn a_memory_limit_end_reads_as_mesos_container_limitation() {
        let mut st = TaskStatus {
            task_id: protocol::TaskId::new("hog").unwrap(),
            framework_id: protocol::FrameworkId::new(),
            agent_id: AgentId::new(),
            state: TaskState::Failed,
            message: Some("memory_limit: 64 MiB".into()),
            exit_code: None,
            update_id: UpdateId::new(),
            timestamp: protocol::now(),
            resources: None,
            reason: Some("memory_limit".into()),
            usage: None,
            gpu_devices: None,
            healthy: None,
        };
        let v = status_json(&st);
        assert_eq!(v["state"], "TASK_FAILED");
        assert_eq!(v["reason"], "REASON_CONTAINER_LIMITATION_MEMORY");
        st.reason = None;
        assert!(status_json(&st).get("reason").is_none());
        // Preemption toward fair share: Mesos' closest reason.
        st.state = TaskState::Killed;
        st.reason = Some(protocol::task::REASON_PREEMPTED.into());
        let v = status_json(&st);
        assert_eq!(v["state"], "TASK_KILLED");
        assert_eq!(v["reason"], "REASON_CONTAINER_PREEMPTED");
        assert_eq!(v["source"], "SOURCE_MASTER");
    }

    #[test]
    fn health_changes_read_as_mesos_healthy() {
        let mut st = TaskStatus {
            task_id: protocol::TaskId::new("web").unwrap(),
            framework_id: protocol::FrameworkId::new(),
            agent_id: AgentId::new(),
            state: TaskState::Running,
            message: None,
            exit_code: None,
            update_id: UpdateId::new(),
            timestamp: protocol::now(),
            resources: None,
            reason: None,
            usage: None,
            gpu_devices: None,
            healthy: None,
        };
        assert!(status_json(&st).get("healthy").is_none());
        st.healthy = Some(false);
        let v = status_json(&st);
        assert_eq!(v["healthy"], false);
        assert_eq!(v["reason"], "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED");
        st.healthy = Some(true);
        assert_eq!(status_json(&st)["healthy"], true);
    }

    #[test]
    fn commands_become_shell_lines_or_argument_vectors() {
        let agent = AgentId::new();
        let task = |cmd: Value| {
            let t: types::TaskInfo = serde_json::from_value(json!({
                "task_id": {"value": "t1"}, "agent_id": {"value": agent.to_string()},
                "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}],
                "command": cmd,
            }))
            .unwrap();
            task_spec(&t)
        };
        let shell = task(json!({"value": "echo hi", "environment": {"variables": [{"name": "A", "value": "b"}]}})).unwrap();
        assert_eq!(shell.command, CommandSpec::Shell("echo hi".into()));
        assert_eq!(shell.env["A"], "b");
        let argv =
            task(json!({"value": "/bin/echo", "shell": false, "arguments": ["echo", "a", "b"]}))
                .unwrap();
        assert_eq!(
            argv.command,
            CommandSpec::Argv(vec!["/bin/echo".into(), "a".into(), "b".into()])
        );
        let bad_id: types::TaskInfo = serde_json::from_value(json!({
            "task_id": {"value": "../etc"}, "agent_id": {"value": agent.to_string()},
            "command": {"value": "true"}}))
        .unwrap();
        assert!(task_spec(&bad_id)
            .unwrap_err()
            .to_string()
            .contains("task_id"));
    }

    #[test]
    fn offers_nest_and_subscribed_is_followed_by_a_heartbeat() {
        let fw = FrameworkId::new();
        let subscribed = events(
            &FrameworkEvent::Subscribed(protocol::messages::FrameworkRegistered {
                framework_id: fw,
                heartbeat_interval_s: 15.0,
                limits: None,
            }),
            &Shape::default(),
        );
        assert_eq!(
            subscribed[0]["subscribed"]["framework_id"]["value"],
            fw.to_string()
        );
        assert_eq!(subscribed[1]["type"], "HEARTBEAT");
        let err = events(
            &FrameworkEvent::Error {
                message: "gone".into(),
            },
            &Shape::default(),
        );
        assert_eq!(err[0]["error"]["message"], "gone");
        let attrs = attributes_json(
            &[
                ("rack".to_owned(), "r1".to_owned()),
                ("n".to_owned(), "2".to_owned()),
            ]
            .into(),
        );
        assert_eq!(attrs[0]["scalar"]["value"], 2.0);
        assert_eq!(attrs[1]["text"]["value"], "r1");
    }
}
