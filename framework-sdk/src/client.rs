//! [`CoordinatorClient`]: the framework API of the coordinator as typed async calls.
//!
//! Every call maps a non-success answer to [`SdkError`] (a 4xx keeps the coordinator's code and
//! message). The driver uses it; frameworks and tests may use it directly as well.

use std::path::Path;
use std::time::Duration;

use protocol::messages::{
    AcceptRequest, AcceptResponse, AcknowledgeBatch, AcknowledgeBatchResponse, AcknowledgeRequest,
    AgentList, DeclineRequest, Empty, FrameworkExplanation, FrameworkRegistered, KillRequest,
    ReconcileRequest, RegisterFramework, ReviveRequest,
};
use protocol::{FrameworkId, TaskId, UpdateId};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::SdkError;

/// The answer to a registration: who we are, and whether the coordinator kept an existing
/// framework (`200`) or created a new one (`201`).
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// The coordinator's answer body.
    pub registered: FrameworkRegistered,
    /// True when an existing framework (and its tasks) was taken over.
    pub reregistered: bool,
}

/// How a [`CoordinatorClient`] reaches the coordinator, beyond its URL.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// A PEM CA file to trust instead of the built-in roots (for an `https://` coordinator).
    pub ca_file: Option<std::path::PathBuf>,
    /// The bearer token sent on every call (a coordinator with a credentials file requires one).
    pub token: Option<crate::BearerToken>,
}

/// A client of the coordinator's framework API (`/api/v1/frameworks/...`).
#[derive(Debug, Clone)]
pub struct CoordinatorClient {
    http: reqwest::Client,
    base: String,
    request_timeout: Duration,
}

impl CoordinatorClient {
    /// A client for the coordinator at `base` (e.g. `http://127.0.0.1:5050`). Each call except
    /// the event stream gives up after `request_timeout`. An `https://` coordinator must have a
    /// certificate from a publicly trusted CA; see [`CoordinatorClient::with_ca_file`].
    pub fn new(base: &str, request_timeout: Duration) -> Result<Self, SdkError> {
        Self::connect(base, request_timeout, &Connection::default())
    }

    /// As [`CoordinatorClient::new`], trusting only the CA certificates of `ca_file` (PEM) for
    /// an `https://` coordinator, or the built-in Mozilla roots when `None`. A CA file that
    /// cannot be read or holds no certificate is [`SdkError::InvalidConfig`], naming it.
    pub fn with_ca_file(
        base: &str,
        request_timeout: Duration,
        ca_file: Option<&Path>,
    ) -> Result<Self, SdkError> {
        let connection = Connection {
            ca_file: ca_file.map(Path::to_path_buf),
            ..Connection::default()
        };
        Self::connect(base, request_timeout, &connection)
    }

    /// As [`CoordinatorClient::new`], sending `Authorization: Bearer <token>` on every call
    /// when a token is given (a coordinator with a credentials file requires it).
    pub fn with_token(
        base: &str,
        request_timeout: Duration,
        token: Option<&crate::BearerToken>,
    ) -> Result<Self, SdkError> {
        let connection = Connection {
            token: token.cloned(),
            ..Connection::default()
        };
        Self::connect(base, request_timeout, &connection)
    }

    /// A client with every connection setting: the CA file to trust and the bearer token.
    pub fn connect(
        base: &str,
        request_timeout: Duration,
        connection: &Connection,
    ) -> Result<Self, SdkError> {
        let base = base.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(SdkError::InvalidConfig(format!(
                "coordinator URL {base:?} must start with http:// or https://"
            )));
        }
        let mut builder = parley_tls::client_builder(connection.ca_file.as_deref())
            .map_err(|e| SdkError::InvalidConfig(e.to_string()))?
            .connect_timeout(request_timeout);
        if let Some(token) = &connection.token {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(
                reqwest::header::AUTHORIZATION,
                token.header().map_err(SdkError::InvalidConfig)?,
            );
            builder = builder.default_headers(headers);
        }
        let http = builder.build().map_err(SdkError::Transport)?;
        Ok(Self {
            http,
            base,
            request_timeout,
        })
    }

    /// The coordinator's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base)
    }

    fn framework_url(&self, id: FrameworkId, action: &str) -> String {
        self.url(&format!("/frameworks/{id}/{action}"))
    }

    /// `POST /frameworks`: registers, or re-registers when `request.framework_id` is set.
    pub async fn register(&self, request: &RegisterFramework) -> Result<Registration, SdkError> {
        let response = self
            .http
            .post(self.url("/frameworks"))
            .timeout(self.request_timeout)
            .json(request)
            .send()
            .await?;
        let reregistered = response.status() == reqwest::StatusCode::OK;
        let registered = read_json(response).await?;
        Ok(Registration {
            registered,
            reregistered,
        })
    }

    /// `GET /frameworks/{id}/events`: opens the event stream. The answer's body is the stream;
    /// read it with [`reqwest::Response::bytes_stream`] and [`crate::sse::SseParser`].
    pub async fn events(&self, id: FrameworkId) -> Result<reqwest::Response, SdkError> {
        // No total timeout: the stream is meant to stay open. The driver watches heartbeats.
        let response = self
            .http
            .get(self.url(&format!("/frameworks/{id}/events")))
            .header("accept", "text/event-stream")
            .send()
            .await?;
        check(response).await
    }

    /// `POST /frameworks/{id}/accept`.
    pub async fn accept(
        &self,
        id: FrameworkId,
        request: &AcceptRequest,
    ) -> Result<AcceptResponse, SdkError> {
        self.post(self.framework_url(id, "accept"), request).await
    }

    /// `POST /frameworks/{id}/decline`.
    pub async fn decline(&self, id: FrameworkId, request: &DeclineRequest) -> Result<(), SdkError> {
        self.post_empty(self.framework_url(id, "decline"), request)
            .await
    }

    /// `POST /frameworks/{id}/suppress`.
    pub async fn suppress(&self, id: FrameworkId) -> Result<(), SdkError> {
        self.post_empty(self.framework_url(id, "suppress"), &Empty {})
            .await
    }

    /// `POST /frameworks/{id}/revive`.
    pub async fn revive(&self, id: FrameworkId, request: &ReviveRequest) -> Result<(), SdkError> {
        self.post_empty(self.framework_url(id, "revive"), request)
            .await
    }

    /// `POST /frameworks/{id}/kill`.
    pub async fn kill(&self, id: FrameworkId, task_id: &TaskId) -> Result<(), SdkError> {
        let body = KillRequest {
            task_id: task_id.clone(),
        };
        self.post_empty(self.framework_url(id, "kill"), &body).await
    }

    /// `POST /frameworks/{id}/acknowledge`.
    pub async fn acknowledge(
        &self,
        id: FrameworkId,
        task_id: &TaskId,
        update_id: UpdateId,
    ) -> Result<(), SdkError> {
        let body = AcknowledgeRequest {
            task_id: task_id.clone(),
            update_id,
        };
        self.post_empty(self.framework_url(id, "acknowledge"), &body)
            .await
    }

    /// `POST /frameworks/{id}/acknowledgements`: several acknowledgements in one call. The
    /// answer lists those the coordinator did not know (they changed nothing).
    pub async fn acknowledge_many(
        &self,
        id: FrameworkId,
        acknowledgements: Vec<AcknowledgeRequest>,
    ) -> Result<AcknowledgeBatchResponse, SdkError> {
        let body = AcknowledgeBatch { acknowledgements };
        self.post(self.framework_url(id, "acknowledgements"), &body)
            .await
    }

    /// `POST /frameworks/{id}/reconcile`; an empty list asks for all tasks.
    pub async fn reconcile(&self, id: FrameworkId, task_ids: Vec<TaskId>) -> Result<(), SdkError> {
        let body = ReconcileRequest { task_ids };
        self.post_empty(self.framework_url(id, "reconcile"), &body)
            .await
    }

    /// `GET /agents` (operator API): every agent the coordinator knows, with its total and
    /// state. Frameworks use it to check, before they start, that their tasks fit somewhere.
    pub async fn agents(&self) -> Result<AgentList, SdkError> {
        let response = self
            .http
            .get(self.url("/agents"))
            .timeout(self.request_timeout)
            .send()
            .await?;
        read_json(response).await
    }

    /// `GET /frameworks/{id}/explain`: why the framework is, or is not, getting offers (e.g.
    /// `no_agent_offers: ["gpus"]` when its demand asks for a resource no agent has).
    pub async fn explain(&self, id: FrameworkId) -> Result<FrameworkExplanation, SdkError> {
        let response = self
            .http
            .get(self.framework_url(id, "explain"))
            .timeout(self.request_timeout)
            .send()
            .await?;
        read_json(response).await
    }

    /// `GET /frameworks/{id}/tasks/{task_id}/output?file=stdout` (an operator route where
    /// credentials are configured): the start of the task's stdout, as text.
    pub async fn task_stdout(&self, id: FrameworkId, task_id: &TaskId) -> Result<String, SdkError> {
        let response = self
            .http
            .get(self.framework_url(id, &format!("tasks/{task_id}/output?file=stdout")))
            .timeout(self.request_timeout)
            .send()
            .await?;
        let response = check(response).await?;
        Ok(response.text().await?)
    }

    /// `DELETE /frameworks/{id}`: kills the framework's tasks and forgets it.
    pub async fn unregister(&self, id: FrameworkId) -> Result<(), SdkError> {
        let response = self
            .http
            .delete(self.url(&format!("/frameworks/{id}")))
            .timeout(self.request_timeout)
            .send()
            .await?;
        check(response).await.map(drop)
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        url: String,
        body: &B,
    ) -> Result<T, SdkError> {
        let response = self
            .http
            .post(url)
            .timeout(self.request_timeout)
            .json(body)
            .send()
            .await?;
        read_json(response).await
    }

    async fn post_empty<B: Serialize>(&self, url: String, body: &B) -> Result<(), SdkError> {
        let response = self
            .http
            .post(url)
            .timeout(self.request_timeout)
            .json(body)
            .send()
            .await?;
        check(response).await.map(drop)
    }
}

/// Turns a non-success answer into an error, reading its body for the code and message.
async fn check(response: reqwest::Response) -> Result<reqwest::Response, SdkError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    Err(SdkError::from_response(status.as_u16(), &body))
}

async fn read_json<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, SdkError> {
    let response = check(response).await?;
    let bytes = response.bytes().await?;
    serde_json::from_slice(&bytes).map_err(|e| SdkError::Protocol(e.to_string()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_ca_file_is_a_config_error_naming_it() {
        let timeout = Duration::from_secs(1);
        let err = CoordinatorClient::with_ca_file(
            "https://localhost:5050",
            timeout,
            Some(Path::new("/nonexistent/ca.pem")),
        )
        .unwrap_err();
        assert!(
            matches!(&err, SdkError::InvalidConfig(m) if m.contains("/nonexistent/ca.pem")),
            "{err}"
        );
        let dir = std::env::temp_dir().join(format!("sdk-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let err =
            CoordinatorClient::with_ca_file("https://h:1", timeout, Some(&empty)).unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);

        assert!(CoordinatorClient::new("http://127.0.0.1:1", timeout).is_ok());
    }
}
