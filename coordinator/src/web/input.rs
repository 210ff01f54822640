//! The API edge: wire requests ([`protocol::messages`]) become the registry's domain inputs
//! ([`crate::state::input`](crate::state)), validated here. A malformed request is refused
//! with the API's error body before the books are locked.

use std::time::Duration;

use protocol::messages::{
    AcceptBatch, AcceptRequest, DeclineRequest, RegisterAgent, RegisterFramework,
};
use protocol::TaskSpec;

use super::error::ApiError;
use crate::state::{Accept, AgentRegistration, AgentToken, Decline, FrameworkRegistration};

/// The longest framework name.
const MAX_NAME: usize = 256;
/// The longest failover timeout or decline filter accepted, in seconds (one year).
const MAX_SECONDS: f64 = 31_536_000.0;
/// The most attributes an agent may declare.
const MAX_ATTRIBUTES: usize = 64;
/// The longest hostname, endpoint, attribute key or value, or task name.
const MAX_TEXT: usize = 1024;

fn invalid(field: &'static str, reason: impl std::fmt::Display) -> ApiError {
    ApiError::InvalidField {
        field,
        reason: reason.to_string(),
    }
}

/// [`invalid`] for a field named at run time (`reservations[2].role`).
fn invalid_owned(field: String, reason: String) -> ApiError {
    ApiError::State(crate::state::StateError::InvalidReservation { field, reason })
}

/// A framework's registration.
pub fn framework_registration(req: RegisterFramework) -> Result<FrameworkRegistration, ApiError> {
    if req.name.trim().is_empty() || req.name.len() > MAX_NAME {
        return Err(invalid("name", "give a name of 1 to 256 characters"));
    }
    if req.role.as_str().starts_with('_') {
        return Err(invalid("role", "roles starting with '_' are reserved"));
    }
    if let Some(s) = req.failover_timeout_s {
        if !(s.is_finite() && (0.0..=MAX_SECONDS).contains(&s)) {
            return Err(invalid(
                "failover_timeout_s",
                format!("{s} is not a number of seconds from 0 to {MAX_SECONDS}"),
            ));
        }
    }
    if let Some(demand) = &req.demand {
        protocol::capability::check_whole_gpus("demand", demand)
            .map_err(|reason| invalid("demand", reason))?;
    }
    protocol::capability::check_capabilities(&req.capabilities)
        .map_err(|reason| invalid("capabilities", reason))?;
    if let Some(url) = &req.webui_url {
        protocol::messages::check_webui_url(url).map_err(|reason| invalid("webui_url", reason))?;
    }
    let partition_aware = protocol::partition::declares_partition_aware(&req.capabilities);
    let partition_timeout_s = match (partition_aware, req.partition_timeout_s) {
        (false, Some(_)) => {
            return Err(invalid(
                "partition_timeout_s",
                "only a framework that declares the partition_aware capability sets it",
            ))
        }
        (false, None) => None,
        (true, given) => {
            let secs = given.unwrap_or(protocol::partition::DEFAULT_PARTITION_TIMEOUT_S);
            protocol::partition::check_partition_timeout(secs)
                .map_err(|reason| invalid("partition_timeout_s", reason))?;
            Some(secs)
        }
    };
    Ok(FrameworkRegistration {
        framework_id: req.framework_id,
        name: req.name,
        role: req.role,
        failover_timeout_s: req.failover_timeout_s,
        demand: req.demand,
        owner: None,
        gpu_resources: protocol::capability::declares_gpu_resources(&req.capabilities),
        partition_timeout_s,
    })
}

/// The most GPUs one agent may list.
const MAX_GPU_DEVICES: usize = 256;

/// An agent's `gpu_devices`: at most [`MAX_GPU_DEVICES`], one per device its `gpus` resource
/// counts, each with a distinct index and a distinct, non-empty UUID of sane length.
fn check_gpu_devices(req: &RegisterAgent) -> Result<(), ApiError> {
    let devices = &req.gpu_devices;
    if devices.is_empty() {
        return Ok(());
    }
    let gpus = req.resources.millis(protocol::gpu::GPUS);
    if devices.len() > MAX_GPU_DEVICES || gpus != devices.len() as u64 * 1000 {
        return Err(invalid(
            "gpu_devices",
            format!(
                "list one entry per GPU the agent's resources count (gpus={}, {} listed, at most {MAX_GPU_DEVICES})",
                req.resources.units(protocol::gpu::GPUS),
                devices.len()
            ),
        ));
    }
    let mut indices = std::collections::HashSet::new();
    let mut uuids = std::collections::HashSet::new();
    for d in devices {
        if d.uuid.trim().is_empty() || d.uuid.len() > 256 || d.model.len() > MAX_TEXT {
            return Err(invalid(
                "gpu_devices",
                "each device needs a uuid (1 to 256 characters) and a model of at most 1024",
            ));
        }
        if !indices.insert(d.index) || !uuids.insert(d.uuid.as_str()) {
            return Err(invalid(
                "gpu_devices",
                format!(
                    "device index {} or uuid {:?} is listed twice",
                    d.index, d.uuid
                ),
            ));
        }
    }
    Ok(())
}

/// The most static reservations one agent may send.
pub const MAX_RESERVATIONS: usize = 64;

/// An agent's static reservations: each non-empty, each role once, the sum within
/// the agent's resources (role existence is the books' to check).
fn check_reservations(req: &RegisterAgent) -> Result<(), ApiError> {
    if req.reservations.len() > MAX_RESERVATIONS {
        return Err(invalid(
            "reservations",
            format!("at most {MAX_RESERVATIONS} reservations"),
        ));
    }
    let mut sum = protocol::Resources::new();
    for (i, r) in req.reservations.iter().enumerate() {
        if r.resources.is_empty() {
            return Err(invalid_owned(
                format!("reservations[{i}].resources"),
                "a reservation must reserve something, e.g. {\"cpus\": 2}".into(),
            ));
        }
        if req.reservations[..i].iter().any(|o| o.role == r.role) {
            return Err(invalid_owned(
                format!("reservations[{i}].role"),
                format!(
                    "role {} is reserved twice; give one reservation per role",
                    r.role
                ),
            ));
        }
        if r.role.as_str().starts_with('_') {
            return Err(invalid_owned(
                format!("reservations[{i}].role"),
                "roles starting with '_' belong to the coordinator".into(),
            ));
        }
        sum.add_assign(&r.resources);
    }
    if !sum.fits_in(&req.resources) {
        return Err(invalid(
            "reservations",
            format!(
                "the reservations sum to {sum}, more than the agent's resources {}",
                req.resources
            ),
        ));
    }
    Ok(())
}

/// An agent's registration; its endpoint loses any trailing `/`.
pub fn agent_registration(req: RegisterAgent) -> Result<AgentRegistration, ApiError> {
    if req.hostname.trim().is_empty() || req.hostname.len() > MAX_TEXT {
        return Err(invalid(
            "hostname",
            "give the node's hostname (1 to 1024 characters)",
        ));
    }
    let url = reqwest::Url::parse(&req.endpoint).map_err(|e| {
        invalid(
            "endpoint",
            format!(
                "{:?} is not a URL ({e}); give e.g. http://10.0.0.5:5051",
                req.endpoint
            ),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host().is_none()
        || req.endpoint.len() > MAX_TEXT
    {
        return Err(invalid(
            "endpoint",
            "use an http:// or https:// base URL with a host",
        ));
    }
    if req.resources.is_empty() {
        return Err(invalid(
            "resources",
            "an agent must offer some resources, e.g. {\"cpus\": 4}",
        ));
    }
    if req.attributes.len() > MAX_ATTRIBUTES
        || req
            .attributes
            .iter()
            .any(|(k, v)| k.is_empty() || k.len() > MAX_TEXT || v.len() > MAX_TEXT)
    {
        return Err(invalid(
            "attributes",
            "at most 64 attributes with non-empty keys",
        ));
    }
    check_gpu_devices(&req)?;
    check_reservations(&req)?;
    if !req.tasks.is_empty() && req.agent_id.is_none() {
        return Err(invalid("tasks", "reported tasks need the agent's agent_id"));
    }
    Ok(AgentRegistration {
        agent_id: req.agent_id,
        hostname: req.hostname,
        endpoint: req.endpoint.trim_end_matches('/').to_owned(),
        resources: req.resources,
        attributes: req.attributes,
        gpu_devices: req.gpu_devices,
        reservations: req.reservations,
        tasks: req.tasks,
        api_token: req
            .api_token
            .map(AgentToken::new)
            .transpose()
            .map_err(|reason| invalid("api_token", reason))?,
    })
}

/// An accept: every task well formed.
pub fn accept(req: AcceptRequest) -> Result<Accept, ApiError> {
    let refuse = refuse(req.refuse_seconds)?;
    for task in &req.tasks {
        check_task(task)?;
    }
    Ok(Accept {
        offer_ids: req.offer_ids,
        tasks: req.tasks,
        refuse,
    })
}

/// A batch of accepts: at most [`AcceptBatch::MAX`], every one well formed; the first that is
/// not is named by its place in `accepts`.
pub fn accept_batch(req: AcceptBatch) -> Result<Vec<Accept>, ApiError> {
    if req.accepts.len() > AcceptBatch::MAX {
        return Err(invalid(
            "accepts",
            format!(
                "{} accepts in one call; send at most {}",
                req.accepts.len(),
                AcceptBatch::MAX
            ),
        ));
    }
    req.accepts
        .into_iter()
        .enumerate()
        .map(|(index, a)| {
            accept(a).map_err(|e| ApiError::InBatch {
                field: "accepts",
                index,
                error: Box::new(e),
            })
        })
        .collect()
}

/// A gang's accepts: a well-formed id, at least one accept and at most
/// [`AcceptBatch::MAX`], every one well formed, at most [`protocol::gang::MAX_MEMBERS`] tasks
/// in all.
pub fn gang_accept(req: protocol::gang::GangAccept) -> Result<(String, Vec<Accept>), ApiError> {
    protocol::gang::check_id(&req.gang_id).map_err(|e| invalid("gang_id", e.message))?;
    if req.accepts.is_empty() {
        return Err(invalid(
            "accepts",
            "name one accept for each agent of the gang",
        ));
    }
    let members: usize = req.accepts.iter().map(|a| a.tasks.len()).sum();
    if members > protocol::gang::MAX_MEMBERS as usize {
        return Err(invalid(
            "accepts",
            format!(
                "{members} tasks in one gang; a gang has at most {}",
                protocol::gang::MAX_MEMBERS
            ),
        ));
    }
    let accepts = accept_batch(AcceptBatch {
        accepts: req.accepts,
        pending_tasks: None,
    })?;
    Ok((req.gang_id, accepts))
}

/// A decline.
pub fn decline(req: DeclineRequest) -> Result<Decline, ApiError> {
    Ok(Decline {
        refuse: refuse(req.refuse_seconds)?,
        offer_ids: req.offer_ids,
    })
}

/// `refuse_seconds`: from 0 to one year, whole milliseconds.
fn refuse(seconds: Option<f64>) -> Result<Option<Duration>, ApiError> {
    match seconds {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.0..=MAX_SECONDS).contains(&s) => {
            Ok(Some(Duration::from_millis((s * 1000.0) as u64)))
        }
        Some(s) => Err(invalid(
            "refuse_seconds",
            format!("{s} is not a number of seconds from 0 to 31536000"),
        )),
    }
}

/// What a task's type cannot rule out: a bad command, no resources, a long name, a bad
/// duration, a fraction of a GPU (`gpus` counts whole devices). Public to the crate: the Mesos
/// API's LAUNCH runs the same check.
pub(crate) fn check_task(task: &TaskSpec) -> Result<(), ApiError> {
    let invalid = |reason: String| ApiError::InvalidTask {
        task: task.task_id.clone(),
        reason,
    };
    task.command
        .validate()
        .map_err(|e| invalid(e.to_string()))?;
    if let Some(iso) = &task.isolation {
        iso.validate().map_err(|e| invalid(e.to_string()))?;
    }
    if let Some(check) = &task.health_check {
        check
            .validate(task.isolation.as_ref())
            .map_err(|e| invalid(e.to_string()))?;
    }
    if task.resources.is_empty() {
        return Err(invalid(
            "resources are empty; a task must use something".into(),
        ));
    }
    if task.name.len() > MAX_TEXT {
        return Err(invalid("name is longer than 1024 characters".into()));
    }
    protocol::capability::check_whole_gpus("resources", &task.resources)
        .map_err(|e| invalid(e.to_string()))?;
    if let Some(d) = task.duration_s {
        if !d.is_finite() || d < 0.0 {
            return Err(invalid("duration_s must be a finite number >= 0".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn agent(endpoint: &str) -> RegisterAgent {
        RegisterAgent {
            hostname: "h".into(),
            endpoint: endpoint.into(),
            resources: "cpus=1".parse().unwrap(),
            attributes: Default::default(),
            agent_id: None,
            tasks: vec![],
            api_token: None,
            gpu_devices: Vec::new(),
            reservations: Vec::new(),
        }
    }

    fn field_of(e: ApiError) -> &'static str {
        match e {
            ApiError::InvalidField { field, .. } => field,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn an_agent_endpoint_must_be_an_http_url_and_loses_its_trailing_slash() {
        let ok = agent_registration(agent("http://10.0.0.5:5051/")).unwrap();
        assert_eq!(ok.endpoint, "http://10.0.0.5:5051");
        let err = agent_registration(agent("ftp://x")).unwrap_err();
        assert_eq!(field_of(err), "endpoint");
        let err = agent_registration(agent("not a url")).unwrap_err();
        assert_eq!(field_of(err), "endpoint");
    }

    #[test]
    fn refuse_seconds_must_be_a_number_of_seconds_within_a_year() {
        assert_eq!(refuse(None).unwrap(), None);
        assert_eq!(
            refuse(Some(1.5)).unwrap(),
            Some(Duration::from_millis(1500))
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, MAX_SECONDS + 1.0] {
            assert_eq!(field_of(refuse(Some(bad)).unwrap_err()), "refuse_seconds");
        }
    }

    #[test]
    fn a_reserved_role_or_an_empty_name_is_refused() {
        let req = |name: &str, role: &str| RegisterFramework {
            name: name.into(),
            role: role.parse().unwrap(),
            failover_timeout_s: None,
            framework_id: None,
            demand: None,
            capabilities: vec![],
            partition_timeout_s: None,
            webui_url: None,
        };
        let err = framework_registration(req("f", "_orphans")).unwrap_err();
        assert_eq!(field_of(err), "role");
        let err = framework_registration(req(" ", "eng")).unwrap_err();
        assert_eq!(field_of(err), "name");
        assert!(framework_registration(req("f", "eng")).is_ok());
    }

    #[test]
    fn gpu_devices_must_match_the_gpus_resource_and_be_distinct() {
        let gpu = |index: u32, uuid: &str| protocol::gpu::GpuDevice {
            index,
            uuid: uuid.into(),
            model: "m".into(),
            memory_mib: 1,
        };
        let with = |gpus: &str, devices: Vec<protocol::gpu::GpuDevice>| {
            let mut a = agent("http://h:1");
            a.resources = format!("cpus=1{gpus}").parse().unwrap();
            a.gpu_devices = devices;
            agent_registration(a)
        };
        let ok = with(",gpus=2", vec![gpu(0, "GPU-a"), gpu(1, "GPU-b")]).unwrap();
        assert_eq!(ok.gpu_devices.len(), 2);
        assert!(with(",gpus=1", vec![]).is_ok(), "the list is optional");
        for bad in [
            with(",gpus=1", vec![gpu(0, "GPU-a"), gpu(1, "GPU-b")]),
            with("", vec![gpu(0, "GPU-a")]),
            with(",gpus=2", vec![gpu(0, "GPU-a"), gpu(0, "GPU-b")]),
            with(",gpus=2", vec![gpu(0, "GPU-a"), gpu(1, "GPU-a")]),
            with(",gpus=1", vec![gpu(0, " ")]),
        ] {
            assert_eq!(field_of(bad.unwrap_err()), "gpu_devices");
        }
    }

    #[test]
    fn capabilities_map_to_gpu_resources_and_unknown_ones_are_ignored() {
        let req = |caps: &[&str], demand: Option<&str>| RegisterFramework {
            name: "f".into(),
            role: "eng".parse().unwrap(),
            failover_timeout_s: None,
            framework_id: None,
            demand: demand.map(|d| d.parse().unwrap()),
            capabilities: caps.iter().map(|c| c.to_string()).collect(),
            partition_timeout_s: None,
            webui_url: None,
        };
        assert!(
            framework_registration(req(&["gpu_resources"], None))
                .unwrap()
                .gpu_resources
        );
        assert!(
            framework_registration(req(&["GPU_RESOURCES", "x"], None))
                .unwrap()
                .gpu_resources
        );
        assert!(
            !framework_registration(req(&["partition_aware"], None))
                .unwrap()
                .gpu_resources
        );
        assert!(
            !framework_registration(req(&[], None))
                .unwrap()
                .gpu_resources
        );
        let err = framework_registration(req(&[""], None)).unwrap_err();
        assert_eq!(field_of(err), "capabilities");
        let err = framework_registration(req(&[], Some("cpus=1,gpus=0.5"))).unwrap_err();
        assert_eq!(field_of(err), "demand");
    }

    #[test]
    fn a_task_asking_for_part_of_a_gpu_is_refused_naming_the_field() {
        let task = |res: &str| -> TaskSpec {
            serde_json::from_value(serde_json::json!({
                "task_id": "t1", "name": "t1",
                "agent_id": protocol::AgentId::new(),
                "command": {"shell": "true"},
                "resources": serde_json::from_str::<serde_json::Value>(res).unwrap(),
            }))
            .unwrap()
        };
        assert!(check_task(&task(r#"{"cpus": 1, "gpus": 1}"#)).is_ok());
        match check_task(&task(r#"{"cpus": 1, "gpus": 0.5}"#)).unwrap_err() {
            ApiError::InvalidTask { reason, .. } => {
                assert!(reason.contains("resources.gpus"), "{reason}")
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_bad_health_check_is_refused_naming_the_field() {
        let task = |check: serde_json::Value, isolation: serde_json::Value| -> TaskSpec {
            serde_json::from_value(serde_json::json!({
                "task_id": "t1", "agent_id": protocol::AgentId::new(),
                "command": {"shell": "true"}, "resources": {"cpus": 1},
                "health_check": check, "isolation": isolation,
            }))
            .unwrap()
        };
        let none = serde_json::Value::Null;
        let ok = serde_json::json!({"command": {"shell": "test -f ok"}, "interval_s": 1});
        assert!(check_task(&task(ok, none.clone())).is_ok());
        let cases = [
            (
                serde_json::json!({"http": {"port": 0}}),
                none.clone(),
                "health_check.http.port",
            ),
            (
                serde_json::json!({"command": {"shell": "x"}, "consecutive_failures": 0}),
                none.clone(),
                "health_check.consecutive_failures",
            ),
            (
                serde_json::json!({"http": {"port": 80}}),
                serde_json::json!({"network": "loopback"}),
                "health_check.http",
            ),
        ];
        for (check, isolation, field) in cases {
            match check_task(&task(check, isolation)).unwrap_err() {
                ApiError::InvalidTask { reason, .. } => {
                    assert!(reason.contains(field), "{field}: {reason}")
                }
                other => panic!("{other}"),
            }
        }
    }
}
