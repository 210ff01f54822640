//! HTTP to the coordinator for both shells: turns an engine [`Request`] into a call
//! (`POST /api/v1/agents`, `.../heartbeat`, `.../statuses`) and its answer into a [`Reply`].
//!
//! With several coordinators (`--coordinator http://a:5050,http://b:5050`) every call follows
//! the leader ([`Leader`], over [`protocol::leader`]): a follower's `307` sends the same POST
//! again to the leader it names (the client follows no redirect by itself, so the body and the
//! bearer token go with it); a connection error, a try with no answer within
//! [`protocol::leader::TRY_TIMEOUT`] (a stopped coordinator) or `503 no_leader` tries the next
//! coordinator after a short bounded wait, within the request timeout. [`changed_coordinator`] tells a
//! shell when another coordinator answers than the one the agent registered with.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use protocol::leader::{self, Attempt, LeaderTracker, Step};

use protocol::messages::{AgentRegistered, Empty, RegisterAgent, StatusBatch};
use protocol::Resources;
use serde::Serialize;

use crate::engine::{Failure, Reply, Request};

/// Adds `Authorization: Bearer <token>` to every request of the client (marked sensitive, so
/// it is never logged). A token that is not a valid header value is left out (and logged): the
/// coordinator then answers 401, which says what is wrong.
pub(crate) fn with_token(
    builder: reqwest::ClientBuilder,
    token: Option<&str>,
) -> reqwest::ClientBuilder {
    let Some(token) = token else {
        return builder;
    };
    match reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")) {
        Ok(mut value) => {
            value.set_sensitive(true);
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(reqwest::header::AUTHORIZATION, value);
            builder.default_headers(headers)
        }
        Err(_) => {
            tracing::error!("the coordinator token is not a valid header value; not sent");
            builder
        }
    }
}

/// Who the agent is, for its registrations.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub hostname: String,
    pub endpoint: String,
    pub resources: Resources,
    pub attributes: std::collections::BTreeMap<String, String>,
    /// The token the coordinator must present to the agent.
    pub api_token: Option<String>,
    /// Its GPUs (empty without).
    pub gpu_devices: Vec<protocol::gpu::GpuDevice>,
    /// Its static reservations (empty without).
    pub reservations: Vec<protocol::reservation::Reservation>,
}

/// The coordinators an agent (or a simulated fleet) talks to, and which of them leads.
#[derive(Debug)]
pub(crate) struct Leader {
    tracker: Mutex<LeaderTracker>,
}

impl Leader {
    /// The leader among `coordinators`, a comma-separated list of checked base URLs.
    pub fn new(coordinators: &str) -> Result<Self, crate::config::ConfigError> {
        let tracker = LeaderTracker::parse(coordinators)
            .map_err(|_| crate::config::ConfigError::BadCoordinator(coordinators.to_owned()))?;
        Ok(Self {
            tracker: Mutex::new(tracker),
        })
    }

    fn tracker(&self) -> std::sync::MutexGuard<'_, LeaderTracker> {
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes each time a different coordinator answers than the one before.
    pub fn generation(&self) -> u64 {
        self.tracker().generation()
    }
}

/// Called with every reply and the [`Leader::generation`] it was answered at; `registered_at`
/// is the generation of the agent's last registration. True when another coordinator answered
/// than the one the agent registered with: the agent must register again (with its running
/// tasks) before the new leader hears more. A failed status update is then turned into
/// "unreachable", so it is sent again after the registration instead of being dropped as
/// refused.
pub(crate) fn changed_coordinator(
    reply: &mut Reply,
    generation: u64,
    registered_at: &mut u64,
) -> bool {
    match reply {
        Reply::Registered(Ok(_)) => {
            *registered_at = generation;
            false
        }
        Reply::Registered(Err(_)) => false,
        Reply::Heartbeat { .. } | Reply::Statuses(_) if generation == *registered_at => false,
        Reply::Heartbeat { .. } | Reply::Statuses(_) => {
            *registered_at = generation;
            if let Reply::Statuses(result @ Err(_)) = reply {
                *result = Err(Failure::Unreachable("another coordinator answered".into()));
            }
            true
        }
    }
}

/// A request ready to go: its path and body.
#[derive(Debug)]
pub(crate) struct Call {
    path: String,
    body: Body,
}

#[derive(Debug)]
enum Body {
    Register(RegisterAgent),
    Heartbeat(u32),
    Statuses(StatusBatch),
}

impl Call {
    /// Builds the call for `request`; `identity` is asked for only by a registration.
    pub fn new(request: Request, identity: impl FnOnce() -> Identity) -> Self {
        match request {
            Request::Register { agent_id, tasks } => {
                let me = identity();
                Call {
                    path: "/api/v1/agents".to_owned(),
                    body: Body::Register(RegisterAgent {
                        hostname: me.hostname,
                        endpoint: me.endpoint,
                        resources: me.resources,
                        attributes: me.attributes,
                        agent_id,
                        tasks,
                        api_token: me.api_token,
                        gpu_devices: me.gpu_devices,
                        reservations: me.reservations,
                    }),
                }
            }
            Request::Heartbeat { agent_id, epoch } => Call {
                path: format!("/api/v1/agents/{agent_id}/heartbeat"),
                body: Body::Heartbeat(epoch),
            },
            Request::Statuses { agent_id, statuses } => Call {
                path: format!("/api/v1/agents/{agent_id}/statuses"),
                body: Body::Statuses(StatusBatch { statuses }),
            },
        }
    }

    /// Sends it to the leader and returns the answer as the engine takes it, with the
    /// [`Leader::generation`] it was answered at.
    pub async fn send(
        self,
        http: &reqwest::Client,
        leader: &Leader,
        timeout: Duration,
    ) -> (Reply, u64) {
        let to = Target {
            http,
            leader,
            path: &self.path,
            timeout,
        };
        let reply = match self.body {
            Body::Register(body) => {
                let result = async {
                    let resp = post_json(&to, &body).await?;
                    resp.json::<AgentRegistered>()
                        .await
                        .map_err(|e| Failure::Unreachable(e.to_string()))
                };
                Reply::Registered(result.await)
            }
            Body::Heartbeat(epoch) => Reply::Heartbeat {
                epoch,
                result: post_json(&to, &Empty {}).await.map(|_| ()),
            },
            Body::Statuses(batch) => Reply::Statuses(post_json(&to, &batch).await.map(|_| ())),
        };
        (reply, leader.generation())
    }
}

/// Where one call goes.
struct Target<'a> {
    http: &'a reqwest::Client,
    leader: &'a Leader,
    path: &'a str,
    timeout: Duration,
}

/// POSTs a JSON body to the leader and returns the answer, or why it was not a success.
async fn post_json<T: Serialize + ?Sized>(
    to: &Target<'_>,
    body: &T,
) -> Result<reqwest::Response, Failure> {
    let mut attempt = Attempt::new(to.path, to.timeout);
    let started = Instant::now();
    let resp = loop {
        let url = attempt.url(&to.leader.tracker());
        let try_timeout = attempt.try_timeout(&to.leader.tracker(), started.elapsed());
        let sent = to
            .http
            .post(&url)
            .json(body)
            .timeout(try_timeout)
            .send()
            .await;
        let step = match sent {
            Ok(resp) if leader::is_redirect(resp.status().as_u16()) => {
                let location = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok());
                let step = match location {
                    Some(l) => attempt.redirected(&mut to.leader.tracker(), l),
                    None => Step::GiveUp,
                };
                if step == Step::GiveUp {
                    return failure(resp).await;
                }
                step
            }
            Ok(resp) if resp.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                let text = resp.text().await.unwrap_or_default();
                let step = if leader::is_no_leader(503, &text) {
                    attempt.unavailable(&mut to.leader.tracker(), true, started.elapsed())
                } else {
                    attempt.answered(&mut to.leader.tracker());
                    Step::GiveUp
                };
                if step == Step::GiveUp {
                    return Err(Failure::Status {
                        code: 503,
                        body: text,
                    });
                }
                step
            }
            Ok(resp) => {
                attempt.answered(&mut to.leader.tracker());
                break resp;
            }
            // Every call of an agent is safe to send again (a registration with its id, a
            // heartbeat, statuses with their update ids): a try that got no answer in time
            // (a stopped coordinator) moves on to the next coordinator like a refused
            // connection, within the call's budget.
            Err(e) if e.is_connect() || e.is_timeout() => {
                let step = attempt.unavailable(&mut to.leader.tracker(), false, started.elapsed());
                if step == Step::GiveUp {
                    return Err(Failure::Unreachable(e.to_string()));
                }
                step
            }
            Err(e) => {
                // It may have been carried out: not sent again; the next call tries the next
                // coordinator.
                attempt.abandoned(&mut to.leader.tracker());
                return Err(Failure::Unreachable(e.to_string()));
            }
        };
        if let Step::Retry(delay) = step {
            if !delay.is_zero() {
                tracing::info!(
                    unreachable = %url,
                    next = %to.leader.tracker().current(),
                    wait_ms = delay.as_millis() as u64,
                    "no leader there; trying the next coordinator"
                );
                tokio::time::sleep(delay).await;
            }
        }
    };
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    failure(resp).await
}

/// The failure a non-success answer says.
async fn failure(resp: reqwest::Response) -> Result<reqwest::Response, Failure> {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if status == reqwest::StatusCode::NOT_FOUND {
        Err(Failure::NotFound(text))
    } else {
        Err(Failure::Status {
            code: status.as_u16(),
            body: text,
        })
    }
}

/// Logs a failed request (the engine decides what follows); `quiet` shells log at debug level.
pub(crate) fn log_failure(reply: &Reply, level: LogLevel) {
    let (what, failure) = match reply {
        Reply::Registered(Err(e)) => ("registration", e),
        Reply::Heartbeat { result: Err(e), .. } => ("heartbeat", e),
        Reply::Statuses(Err(e)) => ("status update", e),
        _ => return,
    };
    match level {
        LogLevel::Warn => tracing::warn!("{what} failed: {failure}"),
        LogLevel::Debug => tracing::debug!("{what} failed: {failure}"),
    }
}

/// How loudly a shell logs failed requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogLevel {
    /// One agent: every failure matters.
    Warn,
    /// Thousands of simulated agents.
    Debug,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn registered() -> Reply {
        Reply::Registered(Ok(AgentRegistered {
            agent_id: protocol::AgentId::new(),
            heartbeat_interval_s: 1.0,
            agent_timeout_s: None,
        }))
    }

    #[test]
    fn another_coordinator_answering_means_registering_again() {
        let mut at = 0;
        // The registration's answer sets the generation.
        assert!(!changed_coordinator(&mut registered(), 3, &mut at));
        assert_eq!(at, 3);
        let mut beat = Reply::Heartbeat {
            epoch: 1,
            result: Ok(()),
        };
        assert!(!changed_coordinator(&mut beat, 3, &mut at));
        // Another coordinator answered: once, and a failed update becomes a retry.
        let mut refused = Reply::Statuses(Err(Failure::NotFound("unknown task".into())));
        assert!(changed_coordinator(&mut refused, 4, &mut at));
        assert!(matches!(
            refused,
            Reply::Statuses(Err(Failure::Unreachable(_)))
        ));
        assert!(!changed_coordinator(&mut beat, 4, &mut at));
        // A failed registration changes nothing.
        let mut failed = Reply::Registered(Err(Failure::Unreachable("down".into())));
        assert!(!changed_coordinator(&mut failed, 5, &mut at));
        assert_eq!(at, 4);
        // An accepted update stays accepted.
        let mut ok = Reply::Statuses(Ok(()));
        assert!(changed_coordinator(&mut ok, 6, &mut at));
        assert_eq!(ok, Reply::Statuses(Ok(())));
    }

    #[test]
    fn a_bad_coordinator_list_names_it() {
        assert!(Leader::new("http://a:1,http://b:2").is_ok());
        assert!(Leader::new("").is_err());
    }
}
