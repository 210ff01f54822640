//! [`CoordinatorClient`]: the framework API of the coordinator as typed async calls.
//!
//! Every call maps a non-success answer to [`SdkError`] (a 4xx keeps the coordinator's code and
//! message). The driver uses it; frameworks and tests may use it directly as well.
//!
//! The client may be given several coordinators (`http://a:5050,http://b:5050`) and follows
//! the leader among them ([`protocol::leader`]): it follows no redirect automatically, so a
//! follower's `307` is answered by sending the same request (method, body, bearer token) again
//! to the leader named in `Location`, streams included; a connection error or `503 no_leader`
//! moves to the next URL, round-robin, with a short bounded backoff, for at most the request
//! timeout. [`CoordinatorClient::leader_generation`] changes when another coordinator answers.
//!
//! A coordinator older than `pending_tasks` refuses a request carrying it (`400 invalid_body`,
//! unknown field): the client then sends the request again without it, and leaves it out of
//! every later request, so a newer SDK works against an older coordinator.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use protocol::leader::{self, Attempt, LeaderTracker, Step};

use protocol::messages::{
    AcceptBatch, AcceptBatchResponse, AcceptRequest, AcceptResponse, AcknowledgeBatch,
    AcknowledgeBatchResponse, AcknowledgeRequest, AgentList, DeclineRequest, Empty,
    FrameworkExplanation, FrameworkRegistered, KillRequest, ReconcileRequest, RegisterFramework,
    ReviveRequest,
};
use protocol::{ErrorBody, FrameworkId, TaskId, UpdateId};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::faults::{Call, Fault, FaultInjector, REFUSING_URL};
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

/// A client of the coordinator's framework API (`/api/v1/frameworks/...`). Clones share the
/// leader they follow.
#[derive(Debug, Clone)]
pub struct CoordinatorClient {
    http: reqwest::Client,
    base: String,
    tracker: Arc<Mutex<LeaderTracker>>,
    request_timeout: Duration,
    /// The coordinator refused `pending_tasks` once: it is no longer sent.
    no_pending_tasks: Arc<AtomicBool>,
    /// Faults to inject into calls (tests only; see [`crate::faults`]).
    faults: Option<Arc<dyn FaultInjector>>,
}

impl CoordinatorClient {
    /// A client for the coordinator at `base` (e.g. `http://127.0.0.1:5050`, or several
    /// separated by commas: see the [module docs](self)). Each call except
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
        let tracker = LeaderTracker::parse(base)
            .map_err(|e| SdkError::InvalidConfig(format!("coordinator: {e}")))?;
        let base = tracker.current().to_owned();
        // Redirects are followed by `execute`, which keeps the method, body and token.
        let mut builder = parley_tls::client_builder(connection.ca_file.as_deref())
            .map_err(|e| SdkError::InvalidConfig(e.to_string()))?
            .redirect(reqwest::redirect::Policy::none())
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
            tracker: Arc::new(Mutex::new(tracker)),
            request_timeout,
            no_pending_tasks: Arc::new(AtomicBool::new(false)),
            faults: None,
        })
    }

    /// The same client, with `faults` deciding what happens to each call (see
    /// [`crate::faults`]): for tests of failure paths.
    pub fn with_faults(mut self, faults: Arc<dyn FaultInjector>) -> Self {
        self.faults = Some(faults);
        self
    }

    /// The first coordinator's base URL (see [`CoordinatorClient::current_url`] for the one
    /// calls go to now).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The base URL calls go to now: the leader, once one answered or was named by a redirect.
    pub fn current_url(&self) -> String {
        self.tracker().current().to_owned()
    }

    /// Changes each time a different coordinator answers than the one before (a new leader).
    pub fn leader_generation(&self) -> u64 {
        self.tracker().generation()
    }

    fn tracker(&self) -> std::sync::MutexGuard<'_, LeaderTracker> {
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The URL of an API path on the current coordinator; [`CoordinatorClient::execute`] sends
    /// it wherever the leader is.
    fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.tracker().current())
    }

    /// Sends `request`, following the leader: a `307`/`308` sends it again where `Location`
    /// says; a connection error or `503 no_leader` tries the next coordinator after a short
    /// wait, for at most the request timeout (with one coordinator, a connection error is
    /// returned at once). Any other answer is returned as it is.
    async fn execute(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SdkError> {
        let request = request.build()?;
        let url = request.url();
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let fault = self.faults.as_ref().and_then(|f| {
            f.fault(&Call {
                method: request.method().as_str(),
                path: &path,
                body_bytes: request
                    .body()
                    .and_then(reqwest::Body::as_bytes)
                    .map_or(0, <[u8]>::len),
            })
        });
        match &fault {
            Some(Fault::Answer { status, code }) => {
                let body = ErrorBody::new(code.clone(), "injected fault");
                let body = serde_json::to_string(&body).unwrap_or_default();
                return Err(SdkError::from_response(*status, &body));
            }
            Some(Fault::Delay(wait)) => tokio::time::sleep(*wait).await,
            Some(Fault::Refuse) => {
                let mut refused = request.try_clone().ok_or_else(|| {
                    SdkError::Protocol("a streaming body cannot be re-sent".into())
                })?;
                *refused.url_mut() = reqwest::Url::parse(&format!("{REFUSING_URL}{path}"))
                    .map_err(|e| SdkError::Protocol(e.to_string()))?;
                return match self.http.execute(refused).await {
                    Ok(_) => Err(SdkError::Protocol("a refused call was answered".into())),
                    Err(e) => Err(e.into()),
                };
            }
            Some(Fault::LoseAnswer) | None => {}
        }
        let lose_answer = fault == Some(Fault::LoseAnswer);
        let mut attempt = Attempt::new(path, self.request_timeout);
        let started = Instant::now();
        loop {
            let target = attempt.url(&self.tracker());
            let mut next = request
                .try_clone()
                .ok_or_else(|| SdkError::Protocol("a streaming body cannot be re-sent".into()))?;
            *next.url_mut() = reqwest::Url::parse(&target)
                .map_err(|e| SdkError::Protocol(format!("coordinator URL {target:?}: {e}")))?;
            let step = match self.http.execute(next).await {
                Ok(resp) if leader::is_redirect(resp.status().as_u16()) => {
                    let location = resp
                        .headers()
                        .get(reqwest::header::LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let step = match &location {
                        Some(l) => attempt.redirected(&mut self.tracker(), l),
                        None => Step::GiveUp,
                    };
                    if step == Step::GiveUp {
                        return Ok(resp);
                    }
                    tracing::debug!(from = %target, to = ?location, "following the leader");
                    step
                }
                Ok(resp) if resp.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                    let body = resp.text().await.unwrap_or_default();
                    if !leader::is_no_leader(503, &body) {
                        attempt.answered(&mut self.tracker());
                        return Err(SdkError::from_response(503, &body));
                    }
                    let step = attempt.unavailable(&mut self.tracker(), true, started.elapsed());
                    if step == Step::GiveUp {
                        return Err(SdkError::from_response(503, &body));
                    }
                    step
                }
                Ok(resp) => {
                    attempt.answered(&mut self.tracker());
                    if lose_answer {
                        // Read to the end, so the call is carried out, then dropped.
                        let _ = resp.bytes().await;
                        return Err(SdkError::Interrupted(
                            "the connection reset after the request was sent (injected)".into(),
                        ));
                    }
                    return Ok(resp);
                }
                Err(e) if e.is_connect() => {
                    let step = attempt.unavailable(&mut self.tracker(), false, started.elapsed());
                    if step == Step::GiveUp {
                        return Err(e.into());
                    }
                    step
                }
                Err(e) => {
                    // Timed out or broke mid-call: it may have been carried out, so it is not
                    // sent again; the next call tries the next coordinator.
                    attempt.abandoned(&mut self.tracker());
                    return Err(e.into());
                }
            };
            if let Step::Retry(delay) = step {
                if !delay.is_zero() {
                    tracing::info!(
                        unreachable = %target,
                        next = %self.tracker().current(),
                        wait_ms = delay.as_millis() as u64,
                        "no leader there; trying the next coordinator"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
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
            .json(request);
        let response = self.execute(response).await?;
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
            .header("accept", "text/event-stream");
        let response = self.execute(response).await?;
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

    /// `POST /frameworks/{id}/accepts`: several accepts, each on its own agent, in one call
    /// (at most [`AcceptBatch::MAX`]). Each is carried out or refused on its own; the answer has
    /// one result per accept, in order.
    pub async fn accept_many(
        &self,
        id: FrameworkId,
        batch: &AcceptBatch,
    ) -> Result<AcceptBatchResponse, SdkError> {
        let url = self.framework_url(id, "accepts");
        let without = || AcceptBatch {
            accepts: batch.accepts.clone(),
            pending_tasks: None,
        };
        self.send_counted(
            batch.pending_tasks,
            || self.post(url.clone(), batch),
            || async { self.post(url.clone(), &without()).await },
        )
        .await
    }

    /// `POST /frameworks/{id}/gang-accepts`: a gang launched from offers of several agents,
    /// all or none (one accept per agent). Refused as a whole, it launched nothing; launched,
    /// its members end together: when one fails, the coordinator kills the others and the
    /// scheduler hears [`crate::Scheduler::gang_failed`].
    pub async fn gang_accept(
        &self,
        id: FrameworkId,
        request: &protocol::gang::GangAccept,
    ) -> Result<AcceptResponse, SdkError> {
        self.post(self.framework_url(id, "gang-accepts"), request)
            .await
    }

    /// `POST /frameworks/{id}/decline`.
    pub async fn decline(&self, id: FrameworkId, request: &DeclineRequest) -> Result<(), SdkError> {
        let url = self.framework_url(id, "decline");
        let without = || DeclineRequest {
            pending_tasks: None,
            ..request.clone()
        };
        self.send_counted(
            request.pending_tasks,
            || self.post_empty(url.clone(), request),
            || async { self.post_empty(url.clone(), &without()).await },
        )
        .await
    }

    /// Sends a request that may carry `pending_tasks` (`pending`) as it is (`with`), unless
    /// the coordinator refused the field before; when it refuses it now, or refused it
    /// before, the request goes without it (`without`), and so does every later one.
    async fn send_counted<R, A, B>(
        &self,
        pending: Option<u32>,
        with: impl FnOnce() -> A,
        without: impl FnOnce() -> B,
    ) -> Result<R, SdkError>
    where
        A: std::future::Future<Output = Result<R, SdkError>>,
        B: std::future::Future<Output = Result<R, SdkError>>,
    {
        if pending.is_none() {
            return with().await;
        }
        if !self.no_pending_tasks.load(Ordering::Relaxed) {
            match with().await {
                Err(e) if refuses_pending(&e) => {
                    tracing::info!(
                        "the coordinator does not know pending_tasks; no longer sending it"
                    );
                    self.no_pending_tasks.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        without().await
    }

    /// `POST /frameworks/{id}/suppress`.
    pub async fn suppress(&self, id: FrameworkId) -> Result<(), SdkError> {
        self.post_empty(self.framework_url(id, "suppress"), &Empty {})
            .await
    }

    /// `POST /frameworks/{id}/revive`.
    pub async fn revive(&self, id: FrameworkId, request: &ReviveRequest) -> Result<(), SdkError> {
        let url = self.framework_url(id, "revive");
        let without = || ReviveRequest {
            pending_tasks: None,
            ..request.clone()
        };
        self.send_counted(
            request.pending_tasks,
            || self.post_empty(url.clone(), request),
            || async { self.post_empty(url.clone(), &without()).await },
        )
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
        self.acknowledge_batch(id, &AcknowledgeBatch { acknowledgements })
            .await
    }

    /// As [`CoordinatorClient::acknowledge_many`], sending `batch` as it is (the caller keeps
    /// it, to send again in parts when it is refused as too large).
    pub async fn acknowledge_batch(
        &self,
        id: FrameworkId,
        batch: &AcknowledgeBatch,
    ) -> Result<AcknowledgeBatchResponse, SdkError> {
        self.post(self.framework_url(id, "acknowledgements"), batch)
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
            .timeout(self.request_timeout);
        let response = self.execute(response).await?;
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
            .timeout(self.request_timeout);
        let response = self.execute(response).await?;
        check(response).await.map(drop)
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        url: String,
        body: &B,
    ) -> Result<T, SdkError> {
        let response = self.http.post(url).timeout(self.request_timeout).json(body);
        let response = self.execute(response).await?;
        read_json(response).await
    }

    async fn post_empty<B: Serialize>(&self, url: String, body: &B) -> Result<(), SdkError> {
        let response = self.http.post(url).timeout(self.request_timeout).json(body);
        let response = self.execute(response).await?;
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

/// Whether `e` is an older coordinator refusing the `pending_tasks` field it does not know.
fn refuses_pending(e: &SdkError) -> bool {
    matches!(e, SdkError::Rejected { code, message, .. }
        if code == "invalid_body" && message.contains("pending_tasks"))
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
