//! Stand-ins for the coordinators of a highly available cluster that are not the leader, so the
//! clients' leader-following is tested without etcd: a [`FakeFollower`] answers every request
//! `307` to the real coordinator (as a follower does, `Location` = the leader's URL with the
//! same path and query), or `503 no_leader` (as every coordinator does while none leads); and
//! [`dead_url`], a loopback port nothing listens on.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What a fake follower answers.
#[derive(Debug, Clone)]
enum Answer {
    /// `307` to this leader base URL.
    Redirect(String),
    /// `503 no_leader`.
    NoLeader,
}

/// A fake follower on `127.0.0.1:0`; stopped when dropped.
#[derive(Debug)]
pub struct FakeFollower {
    /// Its base URL.
    pub url: String,
    hits: Arc<AtomicUsize>,
    stop: CancellationToken,
}

impl FakeFollower {
    /// A follower that redirects every request to the coordinator at `leader`.
    pub async fn redirecting_to(leader: &str) -> anyhow::Result<Self> {
        Self::start(Answer::Redirect(leader.trim_end_matches('/').to_owned())).await
    }

    /// A coordinator that knows no leader: `503 {"code":"no_leader"}` with `Retry-After: 1`.
    pub async fn without_leader() -> anyhow::Result<Self> {
        Self::start(Answer::NoLeader).await
    }

    /// How many requests it has answered.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    async fn start(answer: Answer) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let app = axum::Router::new()
            .fallback(answer_any)
            .with_state((answer, hits.clone()));
        let stopped = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await;
        });
        Ok(Self { url, hits, stop })
    }
}

impl Drop for FakeFollower {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn answer_any(
    State((answer, hits)): State<(Answer, Arc<AtomicUsize>)>,
    uri: Uri,
) -> Response {
    hits.fetch_add(1, Ordering::SeqCst);
    match answer {
        Answer::Redirect(leader) => {
            let path = uri.path_and_query().map_or("/", |p| p.as_str());
            let location = format!("{leader}{path}");
            let body = serde_json::json!({"code": "not_leader", "leader": leader});
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, location)],
                axum::Json(body),
            )
                .into_response()
        }
        Answer::NoLeader => {
            let body = serde_json::json!({"code": "no_leader", "message": "no leader elected yet"});
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "1")],
                axum::Json(body),
            )
                .into_response()
        }
    }
}

/// A loopback address nothing listens on, below the ephemeral range (see
/// [`testkit::free_port`]).
pub async fn free_addr() -> anyhow::Result<SocketAddr> {
    Ok(SocketAddr::from(([127, 0, 0, 1], testkit::free_port())))
}

/// A base URL nothing listens on: connections to it are refused.
pub async fn dead_url() -> anyhow::Result<String> {
    Ok(format!("http://{}", free_addr().await?))
}
