//! HTTP to the coordinator for both shells: turns a core [`Request`] into a call
//! (`POST /api/v1/agents`, `.../heartbeat`, `.../statuses`) and its answer into a [`Reply`].

use std::time::Duration;

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
}

/// A request ready to go: its URL and body.
#[derive(Debug)]
pub(crate) struct Call {
    url: String,
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
    pub fn new(coordinator: &str, request: Request, identity: impl FnOnce() -> Identity) -> Self {
        match request {
            Request::Register { agent_id, tasks } => {
                let me = identity();
                Call {
                    url: format!("{coordinator}/api/v1/agents"),
                    body: Body::Register(RegisterAgent {
                        hostname: me.hostname,
                        endpoint: me.endpoint,
                        resources: me.resources,
                        attributes: me.attributes,
                        agent_id,
                        tasks,
                        api_token: me.api_token,
                        gpu_devices: me.gpu_devices,
                    }),
                }
            }
            Request::Heartbeat { agent_id, epoch } => Call {
                url: format!("{coordinator}/api/v1/agents/{agent_id}/heartbeat"),
                body: Body::Heartbeat(epoch),
            },
            Request::Statuses { agent_id, statuses } => Call {
                url: format!("{coordinator}/api/v1/agents/{agent_id}/statuses"),
                body: Body::Statuses(StatusBatch { statuses }),
            },
        }
    }

    /// Sends it and returns the answer as the core takes it.
    pub async fn send(self, http: &reqwest::Client, timeout: Duration) -> Reply {
        match self.body {
            Body::Register(body) => {
                let result = async {
                    let resp = post_json(http, &self.url, &body, timeout).await?;
                    resp.json::<AgentRegistered>()
                        .await
                        .map_err(|e| Failure::Unreachable(e.to_string()))
                };
                Reply::Registered(result.await)
            }
            Body::Heartbeat(epoch) => Reply::Heartbeat {
                epoch,
                result: post_json(http, &self.url, &Empty {}, timeout)
                    .await
                    .map(|_| ()),
            },
            Body::Statuses(batch) => Reply::Statuses(
                post_json(http, &self.url, &batch, timeout)
                    .await
                    .map(|_| ()),
            ),
        }
    }
}

/// POSTs a JSON body and returns the answer, or why it was not a success.
async fn post_json<T: Serialize + ?Sized>(
    http: &reqwest::Client,
    url: &str,
    body: &T,
    timeout: Duration,
) -> Result<reqwest::Response, Failure> {
    let resp = http
        .post(url)
        .json(body)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| Failure::Unreachable(e.to_string()))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
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

/// Logs a failed request (the core decides what follows); `quiet` shells log at debug level.
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
