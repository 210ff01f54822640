//! [`Api`]: the coordinator's HTTP API as this tool uses it — the base URL, the bearer token,
//! the CA file for HTTPS — with every failure turned into a [`CtlError`].
//!
//! `--coordinator` may name several coordinators (`http://a:5050,http://b:5050`): requests go
//! to the leader ([`protocol::leader`]). The HTTP client follows no redirect by itself; a
//! follower's `307` sends the same request (and token) again to its `Location`, and a
//! connection error or `503 no_leader` tries the next coordinator after a short wait, for at
//! most [`FAILOVER_BUDGET`].

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use protocol::leader::{self, Attempt, LeaderTracker, Step};

use reqwest::{Method, RequestBuilder, Response};
use serde::de::DeserializeOwned;

use crate::error::{root_cause, CtlError};

/// How long one request may take (streams excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request keeps looking for a leader among several coordinators.
pub const FAILOVER_BUDGET: Duration = Duration::from_secs(15);

/// A client for one coordinator, or the leader among several.
#[derive(Debug, Clone)]
pub struct Api {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
    tracker: Arc<Mutex<LeaderTracker>>,
}

impl Api {
    /// A client for the coordinator at `url` (`http://` or `https://`; `ca_file` is the CA to
    /// trust for HTTPS instead of the built-in roots), sending `token` as a bearer token.
    /// `url` may list several coordinators separated by commas.
    pub fn new(url: &str, token: Option<String>, ca_file: Option<&Path>) -> Result<Self, CtlError> {
        let mut urls = Vec::new();
        for one in url.split(',') {
            let base = one.trim().trim_end_matches('/').to_owned();
            let parsed = reqwest::Url::parse(&base)
                .map_err(|e| CtlError::Usage(format!("--coordinator {one:?} is not a URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(CtlError::Usage(format!(
                    "--coordinator {one:?}: expected an http:// or https:// URL"
                )));
            }
            urls.push(base);
        }
        let tracker = LeaderTracker::new(&urls)
            .map_err(|e| CtlError::Usage(format!("--coordinator: {e}")))?;
        let base = tracker.current().to_owned();
        if let Some(token) = &token {
            if token.is_empty() || token.chars().any(|c| c.is_control() || c == ' ') {
                return Err(CtlError::Usage(
                    "--token / PARLEY_TOKEN: a token is one word of printable characters".into(),
                ));
            }
        }
        let http = parley_tls::client_builder(ca_file)
            .map_err(|e| CtlError::Usage(format!("--ca-file: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| CtlError::Usage(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Self {
            base,
            token,
            http,
            tracker: Arc::new(Mutex::new(tracker)),
        })
    }

    /// The (first) coordinator's base URL, without a trailing `/`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The base URL requests go to now: the leader, once one answered or was named.
    pub fn current(&self) -> String {
        self.tracker().current().to_owned()
    }

    fn tracker(&self) -> std::sync::MutexGuard<'_, LeaderTracker> {
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self
            .http
            .request(method, format!("{}{path}", self.current()));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends `request`; a connection failure is [`CtlError::Unreachable`], an error status
    /// [`CtlError::Api`] with the API's code and message.
    pub(crate) async fn send(&self, request: RequestBuilder) -> Result<Response, CtlError> {
        let resp = self.execute(request).await?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        Err(api_error(status, &text))
    }

    /// Sends `request` to the leader: follows `307`/`308` with the same request, and tries the
    /// next coordinator on a connection error or `503 no_leader` (see the module docs).
    async fn execute(&self, request: RequestBuilder) -> Result<Response, CtlError> {
        let request = request
            .build()
            .map_err(|e| CtlError::Usage(format!("cannot build the request: {e}")))?;
        let url = request.url();
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let mut attempt = Attempt::new(path, FAILOVER_BUDGET);
        let started = Instant::now();
        loop {
            let target = attempt.url(&self.tracker());
            let mut next = request
                .try_clone()
                .ok_or_else(|| CtlError::Protocol("the request cannot be sent again".into()))?;
            *next.url_mut() = reqwest::Url::parse(&target)
                .map_err(|e| CtlError::Protocol(format!("coordinator URL {target:?}: {e}")))?;
            let step = match self.http.execute(next).await {
                Ok(resp) if leader::is_redirect(resp.status().as_u16()) => {
                    let location = resp
                        .headers()
                        .get(reqwest::header::LOCATION)
                        .and_then(|v| v.to_str().ok());
                    let step = match location {
                        Some(l) => attempt.redirected(&mut self.tracker(), l),
                        None => Step::GiveUp,
                    };
                    if step == Step::GiveUp {
                        return Ok(resp);
                    }
                    step
                }
                Ok(resp) if resp.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                    let text = resp.text().await.unwrap_or_default();
                    let step = if leader::is_no_leader(503, &text) {
                        attempt.unavailable(&mut self.tracker(), true, started.elapsed())
                    } else {
                        Step::GiveUp
                    };
                    if step == Step::GiveUp {
                        return Err(api_error(503, &text));
                    }
                    step
                }
                Ok(resp) => {
                    attempt.answered(&mut self.tracker());
                    return Ok(resp);
                }
                Err(e) if e.is_connect() => {
                    let failed = self.unreachable(&e);
                    let step = attempt.unavailable(&mut self.tracker(), false, started.elapsed());
                    if step == Step::GiveUp {
                        return Err(failed);
                    }
                    step
                }
                Err(e) => return Err(self.unreachable(&e)),
            };
            if let Step::Retry(delay) = step {
                if !delay.is_zero() {
                    eprintln!(
                        "parleyctl: {target}: no leader there; trying {} in {} ms",
                        self.current(),
                        delay.as_millis()
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    fn unreachable(&self, e: &reqwest::Error) -> CtlError {
        let reason = if e.is_timeout() {
            "timed out".to_owned()
        } else {
            root_cause(e)
        };
        CtlError::Unreachable {
            url: self.current(),
            reason,
        }
    }

    /// `GET path`: the body as text, unchanged.
    pub async fn get_text(&self, path: &str) -> Result<String, CtlError> {
        let resp = self
            .send(self.request(Method::GET, path).timeout(REQUEST_TIMEOUT))
            .await?;
        resp.text().await.map_err(|e| self.unreachable(&e))
    }

    /// `GET path` with a query: the body's bytes.
    pub async fn get_bytes(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<Vec<u8>, CtlError> {
        let request = self
            .request(Method::GET, path)
            .query(query)
            .timeout(REQUEST_TIMEOUT);
        let resp = self.send(request).await?;
        let bytes = resp.bytes().await.map_err(|e| self.unreachable(&e))?;
        Ok(bytes.to_vec())
    }

    /// `GET path`: the body as text and parsed as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<(String, T), CtlError> {
        let text = self.get_text(path).await?;
        let value = serde_json::from_str(&text)
            .map_err(|e| CtlError::Protocol(format!("GET {path}: {e}")))?;
        Ok((text, value))
    }

    /// `method path` with a JSON body (or none): the answer's body as text.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<String, CtlError> {
        let mut request = self.request(method, path).timeout(REQUEST_TIMEOUT);
        if let Some(body) = body {
            request = request.json(body);
        }
        let resp = self.send(request).await?;
        resp.text().await.map_err(|e| self.unreachable(&e))
    }

    /// `GET path` as an event stream (no overall timeout).
    pub async fn stream(&self, path: &str) -> Result<Response, CtlError> {
        let request = self
            .request(Method::GET, path)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        self.send(request).await
    }

    /// Reads the next chunk of a stream; a broken stream is [`CtlError::Unreachable`].
    pub async fn chunk(&self, resp: &mut Response) -> Result<Option<Vec<u8>>, CtlError> {
        match resp.chunk().await {
            Ok(chunk) => Ok(chunk.map(|c| c.to_vec())),
            Err(e) => Err(self.unreachable(&e)),
        }
    }
}

/// The error for a non-success answer: the API's code and message when the body has them.
fn api_error(status: u16, text: &str) -> CtlError {
    let (code, message) = match serde_json::from_str::<protocol::ErrorBody>(text) {
        Ok(body) => (body.error.code, body.error.message),
        Err(_) => (
            "error".to_owned(),
            text.chars().take(256).collect::<String>().trim().to_owned(),
        ),
    };
    CtlError::Api {
        status,
        code,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_tokens_are_checked() {
        assert!(Api::new("http://127.0.0.1:5050/", None, None).is_ok());
        assert_eq!(
            Api::new("http://h:1/", None, None)
                .map(|a| a.base().to_owned())
                .ok(),
            Some("http://h:1".to_owned())
        );
        for bad in ["127.0.0.1:5050", "ftp://h", "not a url"] {
            assert!(
                matches!(Api::new(bad, None, None), Err(CtlError::Usage(_))),
                "{bad}"
            );
        }
        let api = Api::new("http://a:1/, http://b:2", None, None).unwrap();
        assert_eq!(api.base(), "http://a:1");
        match Api::new("http://a:1,b:2", None, None) {
            Err(CtlError::Usage(m)) => assert!(m.contains("\"b:2\""), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            Api::new("http://h", Some("a b".into()), None),
            Err(CtlError::Usage(_))
        ));
    }
}
