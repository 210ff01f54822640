//! The follower's middleware: every request except `GET /health`, `GET /version` and
//! `GET /metrics` is answered `307 Temporary Redirect` to the leader (same path and query,
//! body `{"code":"not_leader","leader":URL}`), or `503` with `Retry-After: 1` and
//! `{"code":"no_leader","message":...}` while there is no leader. A leader or a standalone
//! coordinator passes every request on. While no leader is known, or this coordinator has won
//! the election and is still taking over, a request waits up to [`HOLD`] for the outcome
//! before it is answered.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::Role;
use crate::runtime::Coordinator;

/// Whether a request is answered by any coordinator, leader or not.
pub fn served_by_any(method: &Method, path: &str) -> bool {
    method == Method::GET && matches!(path, "/health" | "/version" | "/metrics")
}

/// How long a request waits for an election or a take-over under way to end before it is
/// answered `503 no_leader`: well within a client's try timeout
/// ([`protocol::leader::TRY_TIMEOUT`]), so the client still hears the answer.
pub const HOLD: Duration = Duration::from_secs(2);

/// The middleware (see the module docs).
pub async fn redirect(State(c): State<Coordinator>, req: Request, next: Next) -> Response {
    if served_by_any(req.method(), req.uri().path()) {
        return next.run(req).await;
    }
    // While no leader is known, or this coordinator has been elected and is loading the
    // registry, the request waits for the outcome: a client is then answered as soon as
    // there is a leader, instead of retrying on a backoff that outlasts a short election.
    let (role, leader) = c.ha_status().settled(HOLD).await;
    if matches!(role, Role::Leader | Role::Standalone) {
        return next.run(req).await;
    }
    answer(leader.as_deref(), req.uri())
}

/// The answer of a follower that knows `leader` (or not) to a request for `uri`.
pub fn answer(leader: Option<&str>, uri: &axum::http::Uri) -> Response {
    let Some(leader) = leader else {
        return no_leader();
    };
    let target = format!(
        "{}{}",
        leader.trim_end_matches('/'),
        uri.path_and_query().map_or("/", |pq| pq.as_str())
    );
    let Ok(location) = HeaderValue::from_str(&target) else {
        return no_leader();
    };
    let mut resp = (
        StatusCode::TEMPORARY_REDIRECT,
        Json(serde_json::json!({ "code": "not_leader", "leader": leader })),
    )
        .into_response();
    resp.headers_mut().insert(header::LOCATION, location);
    resp
}

fn no_leader() -> Response {
    let mut resp = (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(serde_json::json!({
            "code": "no_leader",
            "message": "no coordinator is the leader now (an election is under way); retry shortly",
        })),
    )
        .into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_follower_redirects_with_path_and_query_or_says_there_is_no_leader() {
        let uri: axum::http::Uri = "/api/v1/tasks?framework_id=x".parse().unwrap();
        let resp = answer(Some("http://10.0.0.2:5050/"), &uri);
        assert_eq!(resp.status(), StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(
            resp.headers()[header::LOCATION],
            "http://10.0.0.2:5050/api/v1/tasks?framework_id=x"
        );
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["code"], "not_leader");
        assert_eq!(v["leader"], "http://10.0.0.2:5050/");

        let resp = answer(None, &uri);
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["code"], "no_leader");
    }

    #[test]
    fn only_health_version_and_metrics_reads_are_served_by_followers() {
        assert!(served_by_any(&Method::GET, "/health"));
        assert!(served_by_any(&Method::GET, "/metrics"));
        assert!(served_by_any(&Method::GET, "/version"));
        assert!(!served_by_any(&Method::POST, "/health"));
        assert!(!served_by_any(&Method::GET, "/api/v1/state"));
        assert!(!served_by_any(&Method::GET, "/"));
    }
}
