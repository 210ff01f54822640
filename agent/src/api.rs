//! The agent's own HTTP API (`docs/src/reference/api.md`, prefix `/api/v1`): launch, kill, list
//! tasks, read their output (bounded, regular files only: [`crate::output`]), health. Launches,
//! kills and output reads need the agent's token ([`crate::auth`]). Errors are the contract's
//! `{"error": {"code", "message"}}` bodies.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use protocol::messages::{Empty, KillTask, LaunchTasks, TaskStatusList};
use protocol::{FrameworkId, TaskId};

pub(crate) use crate::api_error::ApiError;
use crate::auth;
use crate::engine::KillOrder;
use crate::output::{read_bounded, OutputError, MAX_OUTPUT_BYTES};
use crate::real::{LaunchError, RealAgent};

/// Parses and checks a launch body: JSON shape, commands, environment names, durations.
pub(crate) fn parse_launch(body: &[u8]) -> Result<LaunchTasks, ApiError> {
    let launch: LaunchTasks = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid launch body: {e}; expected {{\"framework_id\", \"tasks\": [TaskSpec]}}"
        ))
    })?;
    for spec in &launch.tasks {
        let id = &spec.task_id;
        spec.command
            .validate()
            .map_err(|e| ApiError::bad_request(format!("task {id}: {e}")))?;
        for name in spec.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(ApiError::bad_request(format!(
                    "task {id}: invalid environment variable name {name:?}"
                )));
            }
        }
        if spec.env.values().any(|v| v.contains('\0')) {
            return Err(ApiError::bad_request(format!(
                "task {id}: an environment value contains a NUL byte"
            )));
        }
        if let Some(d) = spec.duration_s {
            if !d.is_finite() || d < 0.0 {
                return Err(ApiError::bad_request(format!(
                    "task {id}: duration_s must be a non-negative number"
                )));
            }
        }
        if let Some(check) = &spec.health_check {
            check
                .validate(spec.isolation.as_ref())
                .map_err(|e| ApiError::bad_request(format!("task {id}: {e}")))?;
        }
    }
    if let Some(secs) = launch.partition_timeout_s {
        protocol::partition::check_partition_timeout(secs)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    Ok(launch)
}

/// A launch's partition timeout (see [`protocol::partition`]), checked by [`parse_launch`].
pub(crate) fn partition_timeout(launch: &LaunchTasks) -> Option<std::time::Duration> {
    launch
        .partition_timeout_s
        .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
}

/// Parses a task id from a path.
pub(crate) fn parse_task_id(raw: &str) -> Result<TaskId, ApiError> {
    TaskId::new(raw).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// A kill body: empty, `{}`, or `{"framework_id": ..., "reason": ...}`.
pub(crate) fn parse_kill(body: &[u8]) -> Result<KillOrder, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(KillOrder {
            framework_id: None,
            fence: false,
        });
    }
    let kill: KillTask = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid kill body: {e}; expected {{}} or {{\"framework_id\": ID}}"
        ))
    })?;
    let fence = match kill.reason.as_deref() {
        None => false,
        Some(protocol::task::REASON_AGENT_PARTITIONED) => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "reason: unknown kill reason {other:?}; the only one is \"{}\"",
                protocol::task::REASON_AGENT_PARTITIONED
            )))
        }
    };
    Ok(KillOrder {
        framework_id: kill.framework_id,
        fence,
    })
}

/// A call-back body (`POST /api/v1/reconnect`): empty, or a JSON object whose fields are
/// ignored (the call carries nothing the agent acts on but the call itself).
pub(crate) fn parse_call_back(body: &[u8]) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(ApiError::bad_request(
            "invalid reconnect body: expected nothing or a JSON object",
        )),
    }
}

/// The query of an output read: which framework's task, and which bytes.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct OutputQuery {
    /// The task's framework; needed when several frameworks have a task of that id here.
    pub framework_id: Option<FrameworkId>,
    /// The first byte to return; without it, the end of the file.
    pub offset: Option<u64>,
    /// How many bytes at most (capped at [`MAX_OUTPUT_BYTES`]).
    pub limit: Option<u64>,
}

/// The router of one real agent. Launches, kills and output reads need the agent's token
/// ([`crate::auth`]); `GET /tasks` (statuses only: no environment, no output), `GET /health`
/// and `GET /metrics` (counts only, see [`crate::metrics`]) stay open for operators and
/// monitoring.
pub(crate) fn app(agent: Arc<RealAgent>) -> Router {
    let registry = Arc::new(crate::metrics::registry(&agent));
    Router::new()
        .route(
            "/metrics",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, observe::CONTENT_TYPE)],
                    observe::encode(&registry),
                )
            }),
        )
        .route("/api/v1/tasks", post(launch).get(list))
        .route("/api/v1/tasks/{task_id}/kill", post(kill))
        .route("/api/v1/tasks/{task_id}/stdout", get(stdout))
        .route("/api/v1/tasks/{task_id}/stderr", get(stderr))
        .route("/api/v1/health", get(health))
        .route("/api/v1/reconnect", post(reconnect))
        .with_state(agent)
}

async fn launch(
    State(agent): State<Arc<RealAgent>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    auth::require(&headers, &agent.api_token)?;
    let launch = parse_launch(&body)?;
    agent
        .launch(
            launch.framework_id,
            partition_timeout(&launch),
            launch.tasks,
        )
        .await
        .map_err(|e| match e {
            LaunchError::Refused(refused) => refused.into(),
            LaunchError::Sandbox { .. } | LaunchError::Journal(_) => {
                tracing::error!("launch failed: {e}");
                agent.metrics().count_launch_failure();
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the agent cannot record the launch; see its log",
                )
            }
        })?;
    Ok((StatusCode::ACCEPTED, Json(Empty {})).into_response())
}

async fn list(State(agent): State<Arc<RealAgent>>) -> Json<TaskStatusList> {
    Json(TaskStatusList {
        tasks: agent.statuses(),
    })
}

async fn kill(
    State(agent): State<Arc<RealAgent>>,
    Path(task_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    auth::require(&headers, &agent.api_token)?;
    let id = parse_task_id(&task_id)?;
    let order = parse_kill(&body)?;
    agent.kill(order, &id)?;
    Ok((StatusCode::ACCEPTED, Json(Empty {})).into_response())
}

async fn stdout(
    state: State<Arc<RealAgent>>,
    path: Path<String>,
    query: Query<OutputQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    output(state, path, query, headers, "stdout").await
}

async fn stderr(
    state: State<Arc<RealAgent>>,
    path: Path<String>,
    query: Query<OutputQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    output(state, path, query, headers, "stderr").await
}

async fn output(
    State(agent): State<Arc<RealAgent>>,
    Path(task_id): Path<String>,
    Query(query): Query<OutputQuery>,
    headers: HeaderMap,
    which: &'static str,
) -> Result<Response, ApiError> {
    auth::require(&headers, &agent.api_token)?;
    let id = parse_task_id(&task_id)?;
    let sandbox = agent
        .sandbox(query.framework_id, &id)?
        .ok_or_else(|| ApiError::unknown_task(&task_id))?;
    let limit = query.limit.unwrap_or(MAX_OUTPUT_BYTES);
    let file = sandbox.join(which);
    let read = tokio::task::spawn_blocking(move || read_bounded(&file, query.offset, limit)).await;
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e @ OutputError::NotRegular)) => {
            tracing::warn!(%task_id, "refusing to read {which}: {e}");
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "output_unavailable",
                format!("{e} ({which})"),
            ));
        }
        Ok(Err(OutputError::Io(e))) => {
            tracing::warn!(%task_id, "cannot read {which}: {e}");
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("cannot read the task's {which}"),
            ));
        }
        Err(e) => {
            tracing::error!(%task_id, "output read panicked: {e}");
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("cannot read the task's {which}"),
            ));
        }
    };
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response())
}

async fn health() -> Json<Empty> {
    Json(Empty {})
}

/// A coordinator asks the agent to contact the leader now ([`crate::engine::Engine::call_back`]).
/// Open, like `/health`: coordinators keep no agent tokens, and the call only brings the next
/// heartbeat forward (at most once a second).
async fn reconnect(
    State(agent): State<Arc<RealAgent>>,
    body: Bytes,
) -> Result<(StatusCode, Json<Empty>), ApiError> {
    parse_call_back(&body)?;
    agent.feed(|core, now, out| core.call_back(now, out));
    Ok((StatusCode::ACCEPTED, Json(Empty {})))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn call_back_bodies_are_nothing_or_an_object() {
        for ok in ["", " \n", "{}", "{\"leader\": \"x\"}"] {
            assert!(parse_call_back(ok.as_bytes()).is_ok(), "{ok:?}");
        }
        for bad in ["[]", "1", "{", "null"] {
            let e = parse_call_back(bad.as_bytes()).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad:?}");
            assert!(e.message.contains("reconnect body"), "{}", e.message);
        }
    }

    #[test]
    fn launch_bodies_are_checked() {
        let fw = protocol::FrameworkId::new();
        let agent = protocol::AgentId::new();
        let ok = format!(
            r#"{{"framework_id":"{fw}","tasks":[{{"task_id":"t","agent_id":"{agent}","resources":{{"cpus":1}},"command":{{"shell":"true"}}}}]}}"#
        );
        assert_eq!(parse_launch(ok.as_bytes()).unwrap().tasks.len(), 1);
        for (bad, needle) in [
            ("not json".to_string(), "invalid launch body"),
            (ok.replace("\"true\"", "\"  \""), "command.shell is empty"),
            (
                ok.replace(r#""resources""#, r#""env":{"A=B":"x"},"resources""#),
                "environment variable name",
            ),
            (
                ok.replace(r#""resources""#, r#""duration_s":-1,"resources""#),
                "duration_s",
            ),
            (ok.replace(r#"{"cpus":1}"#, r#"{"cpus":-1}"#), "negative"),
            (
                ok.replace(
                    r#""resources""#,
                    r#""health_check":{"http":{"port":0}},"resources""#,
                ),
                "health_check.http.port",
            ),
        ] {
            let err = parse_launch(bad.as_bytes()).unwrap_err();
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{bad}");
            assert!(err.message.contains(needle), "{bad}: {}", err.message);
        }
    }
}
