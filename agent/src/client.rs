//! Talking to the coordinator: registration (and re-registration with the agent's tasks),
//! heartbeats at the interval the coordinator asks for, and reliable status updates, retried
//! with capped exponential backoff and jitter until the coordinator answers `200`.
//!
//! A `404` on a heartbeat or an update means the coordinator does not know this agent (it
//! restarted and lost its books, or declared the agent lost): the agent registers again with
//! the same `agent_id` and the latest status of each task, then carries on sending.

use std::sync::Arc;
use std::time::Duration;

use protocol::messages::{AgentRegistered, RegisterAgent};
use protocol::UpdateId;
use rand::Rng;
use serde::Serialize;

use crate::state::Agent;

/// Why a request to the coordinator failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// The coordinator does not know the agent: register again.
    #[error("coordinator answered 404: {0}")]
    NotFound(String),
    /// Any other non-2xx answer.
    #[error("coordinator answered {status}: {body}")]
    Status { status: u16, body: String },
    /// No answer (connection refused, timeout, ...).
    #[error("coordinator unreachable: {0}")]
    Transport(#[from] reqwest::Error),
}

/// Delay before retry number `attempt` (0-based): `min * 2^attempt`, capped at `max`, then
/// scaled by a random factor in [0.5, 1] so that many agents do not retry in lockstep.
pub(crate) fn backoff(attempt: u32, min: Duration, max: Duration) -> Duration {
    let exp = min.saturating_mul(1u32 << attempt.min(20));
    exp.min(max)
        .mul_f64(rand::thread_rng().gen_range(0.5..=1.0))
}

/// The heartbeat interval the coordinator asked for, made sane: at least `min`, at most an hour,
/// 15 s when the value is not a finite positive number.
pub(crate) fn heartbeat_interval(secs: f64, min: Duration) -> Duration {
    Duration::try_from_secs_f64(secs)
        .unwrap_or(Duration::from_secs(15))
        .clamp(min, Duration::from_secs(3600))
}

/// POSTs a JSON body and returns the answer, or why it was not a success.
pub(crate) async fn post_json<T: Serialize + ?Sized>(
    http: &reqwest::Client,
    url: &str,
    body: &T,
    timeout: Duration,
) -> Result<reqwest::Response, RequestError> {
    let resp = http.post(url).json(body).timeout(timeout).send().await?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let text = resp.text().await.unwrap_or_default();
    if status == reqwest::StatusCode::NOT_FOUND {
        Err(RequestError::NotFound(text))
    } else {
        Err(RequestError::Status {
            status: status.as_u16(),
            body: text,
        })
    }
}

/// Registers (or re-registers) and returns the id and heartbeat interval given.
pub(crate) async fn register(
    http: &reqwest::Client,
    coordinator: &str,
    body: &RegisterAgent,
    timeout: Duration,
) -> Result<AgentRegistered, RequestError> {
    let url = format!("{coordinator}/api/v1/agents");
    Ok(post_json(http, &url, body, timeout).await?.json().await?)
}

/// Why a session with the coordinator ended.
enum SessionEnd {
    /// The coordinator no longer knows the agent.
    Reregister,
}

/// Registers, then heartbeats and sends updates until the coordinator forgets the agent (then
/// registers again) or the agent shuts down.
pub(crate) async fn connection_loop(agent: Arc<Agent>) {
    let timing = agent.config.timing.clone();
    let mut attempt = 0;
    // Survives sessions: counts 404s to the same update across re-registrations.
    let mut not_found: Option<(UpdateId, u32)> = None;
    loop {
        let body = RegisterAgent {
            hostname: agent.hostname.clone(),
            endpoint: agent.endpoint.clone(),
            resources: agent.resources.clone(),
            attributes: agent.config.attributes.clone(),
            agent_id: agent.agent_id(),
            tasks: agent.statuses(),
        };
        let result = tokio::select! {
            r = register(&agent.http, &agent.config.coordinator, &body, timing.request_timeout) => r,
            () = agent.cancel.cancelled() => return,
        };
        let registered = match result {
            Ok(r) => r,
            Err(e) => {
                let delay = backoff(attempt, timing.backoff_min, timing.backoff_max);
                tracing::warn!(attempt, ?delay, "registration failed: {e}");
                attempt = attempt.saturating_add(1);
                tokio::select! {
                    () = tokio::time::sleep(delay) => continue,
                    () = agent.cancel.cancelled() => return,
                }
            }
        };
        attempt = 0;
        agent.set_agent_id(registered.agent_id);
        let interval = heartbeat_interval(registered.heartbeat_interval_s, timing.min_heartbeat);
        tracing::info!(agent_id = %registered.agent_id, tasks = body.tasks.len(), ?interval, "registered");
        let end = tokio::select! {
            end = heartbeat_loop(&agent, interval) => end,
            end = status_loop(&agent, &mut not_found) => end,
            () = agent.cancel.cancelled() => return,
        };
        match end {
            SessionEnd::Reregister => {
                tracing::info!("coordinator does not know this agent; registering again")
            }
        }
    }
}

async fn heartbeat_loop(agent: &Agent, interval: Duration) -> SessionEnd {
    let timing = &agent.config.timing;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // The first tick is immediate; registering was the first sign of life.
    loop {
        tick.tick().await;
        let Some(id) = agent.agent_id() else {
            return SessionEnd::Reregister;
        };
        let url = format!("{}/api/v1/agents/{id}/heartbeat", agent.config.coordinator);
        match post_json(
            &agent.http,
            &url,
            &serde_json::json!({}),
            timing.request_timeout,
        )
        .await
        {
            Ok(_) => {}
            Err(RequestError::NotFound(_)) => return SessionEnd::Reregister,
            // Keep heartbeating on the same beat: when the coordinator is back it either knows
            // the agent (200) or says 404 and the agent registers again.
            Err(e) => tracing::warn!("heartbeat failed: {e}"),
        }
    }
}

async fn status_loop(agent: &Agent, not_found: &mut Option<(UpdateId, u32)>) -> SessionEnd {
    let timing = &agent.config.timing;
    let mut attempt = 0;
    loop {
        let Some(status) = agent.next_unacked() else {
            agent.wake.notified().await;
            continue;
        };
        let url = format!(
            "{}/api/v1/agents/{}/status",
            agent.config.coordinator, status.agent_id
        );
        match post_json(&agent.http, &url, &status, timing.request_timeout).await {
            Ok(_) => {
                attempt = 0;
                *not_found = None;
                agent.ack(status.update_id);
            }
            Err(RequestError::NotFound(body)) => {
                // Normally the coordinator forgot the agent. If the same update keeps getting 404
                // right after registering again, the coordinator rejects the update itself:
                // drop it rather than block every later update behind it.
                let count = match *not_found {
                    Some((id, n)) if id == status.update_id => n + 1,
                    _ => 1,
                };
                *not_found = Some((status.update_id, count));
                if count >= 3 {
                    tracing::error!(task_id = %status.task_id, "coordinator keeps answering 404 to an update; dropping it: {body}");
                    agent.ack(status.update_id);
                    *not_found = None;
                    continue;
                }
                return SessionEnd::Reregister;
            }
            Err(RequestError::Status { status: code, body }) if (400..500).contains(&code) => {
                // The coordinator will never accept this update; retrying would block the queue.
                tracing::error!(task_id = %status.task_id, code, "coordinator refused an update; dropping it: {body}");
                agent.ack(status.update_id);
            }
            Err(e) => {
                let delay = backoff(attempt, timing.backoff_min, timing.backoff_max);
                tracing::warn!(task_id = %status.task_id, ?delay, "status update failed, will retry: {e}");
                attempt = attempt.saturating_add(1);
                tokio::time::sleep(delay).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let min = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        for attempt in 0..40 {
            let d = backoff(attempt, min, max);
            let full = min.saturating_mul(1 << attempt.min(20)).min(max);
            assert!(d <= full && d >= full / 2, "attempt {attempt}: {d:?}");
        }
        assert!(backoff(30, min, max) <= max);
    }

    #[test]
    fn heartbeat_interval_is_sane() {
        let min = Duration::from_millis(10);
        assert_eq!(heartbeat_interval(0.5, min), Duration::from_millis(500));
        assert_eq!(heartbeat_interval(0.0, min), min);
        assert_eq!(heartbeat_interval(f64::NAN, min), Duration::from_secs(15));
        assert_eq!(heartbeat_interval(-1.0, min), Duration::from_secs(15));
        assert_eq!(heartbeat_interval(1e12, min), Duration::from_secs(3600));
    }
}
