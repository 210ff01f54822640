//! How the coordinator calls agents (launch, kill): an HTTP client that follows no redirects
//! and times out, the agent's token as a bearer credential, and error bodies cut to an excerpt.
//!
//! An agent chooses its own endpoint, so a call to it must not be turned into a request
//! elsewhere (a redirect to an internal service), and what it answers must not be copied
//! whole into task messages that frameworks and operators read.

use std::time::Duration;

use crate::state::AgentToken;

/// The most bytes of an agent's error body copied into a task message.
pub const MAX_ERROR_EXCERPT: usize = 256;

/// The client for calls to agents, from `builder` (which holds the CAs to trust): no
/// redirects, `timeout` to connect and for the whole call.
pub fn client(
    builder: reqwest::ClientBuilder,
    timeout: Duration,
) -> reqwest::Result<reqwest::Client> {
    builder
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
}

/// Adds `Authorization: Bearer TOKEN` when the agent registered with a token.
pub fn authorized(
    request: reqwest::RequestBuilder,
    token: Option<&AgentToken>,
) -> reqwest::RequestBuilder {
    match token {
        Some(token) => request.bearer_auth(token.expose()),
        None => request,
    }
}

/// At most [`MAX_ERROR_EXCERPT`] bytes of the body (read no further), control characters
/// replaced, cut at a character boundary, `…` when cut.
pub async fn error_excerpt(mut resp: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    let mut cut = false;
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = MAX_ERROR_EXCERPT - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    excerpt(&bytes, cut)
}

/// An error and its causes on one line (`a: b: c`): reqwest's own message names the URL but
/// not why the request failed (connection refused, timed out), which is in its sources.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

fn excerpt(bytes: &[u8], cut: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    // A multi-byte character cut in two reads as U+FFFD at the end: drop it.
    if cut {
        while out.ends_with('\u{FFFD}') {
            out.pop();
        }
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_and_printable() {
        assert_eq!(excerpt(b"bad\ninput", false), "bad input");
        let cut = "é".repeat(200);
        let bytes = &cut.as_bytes()[..MAX_ERROR_EXCERPT - 1];
        let out = excerpt(bytes, true);
        assert!(out.ends_with("é…"), "{out}");
        assert!(out.len() <= MAX_ERROR_EXCERPT + '…'.len_utf8());
    }
}
