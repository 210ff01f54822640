//! [`Api`]: the coordinator's HTTP API as this tool uses it — the base URL, the bearer token,
//! the CA file for HTTPS — with every failure turned into a [`CtlError`].

use std::path::Path;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response};
use serde::de::DeserializeOwned;

use crate::error::{root_cause, CtlError};

/// How long one request may take (streams excepted).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client for one coordinator.
#[derive(Debug, Clone)]
pub struct Api {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Api {
    /// A client for the coordinator at `url` (`http://` or `https://`; `ca_file` is the CA to
    /// trust for HTTPS instead of the built-in roots), sending `token` as a bearer token.
    pub fn new(url: &str, token: Option<String>, ca_file: Option<&Path>) -> Result<Self, CtlError> {
        let base = url.trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base)
            .map_err(|e| CtlError::Usage(format!("--coordinator {url:?} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(CtlError::Usage(format!(
                "--coordinator {url:?}: expected an http:// or https:// URL"
            )));
        }
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
            .build()
            .map_err(|e| CtlError::Usage(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Self { base, token, http })
    }

    /// The coordinator's base URL, without a trailing `/`.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends `request`; a connection failure is [`CtlError::Unreachable`], an error status
    /// [`CtlError::Api`] with the API's code and message.
    pub(crate) async fn send(&self, request: RequestBuilder) -> Result<Response, CtlError> {
        let resp = request.send().await.map_err(|e| self.unreachable(&e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let (code, message) = match serde_json::from_str::<protocol::ErrorBody>(&text) {
            Ok(body) => (body.error.code, body.error.message),
            Err(_) => (
                "error".to_owned(),
                text.chars().take(256).collect::<String>().trim().to_owned(),
            ),
        };
        Err(CtlError::Api {
            status,
            code,
            message,
        })
    }

    fn unreachable(&self, e: &reqwest::Error) -> CtlError {
        let reason = if e.is_timeout() {
            "timed out".to_owned()
        } else {
            root_cause(e)
        };
        CtlError::Unreachable {
            url: self.base.clone(),
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
        assert!(matches!(
            Api::new("http://h", Some("a b".into()), None),
            Err(CtlError::Usage(_))
        ));
    }
}
