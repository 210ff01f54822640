//! The HTTP/1 accept loop ([`serve_http`]), in place of `axum::serve`, which sets no timer and
//! so no header read timeout: a client that opens connections and sends headers slowly (or
//! never) would hold them forever.
//!
//! Each connection is served by hyper with `header_read_timeout`: the time a connection may take
//! to send a request's headers, counted from when it starts waiting for them, so it bounds
//! both slow headers and idle keep-alive connections (a response in progress, such as an event
//! stream, is not affected). Every request carries the peer address (axum's `ConnectInfo`),
//! which keys the rate limit of clients without a bearer token. On shutdown the listener is
//! dropped, each connection finishes its requests in flight, and the call returns once all
//! have closed.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Serves `app` on `listener` (plain TCP, or `parley_tls::TlsListener` for HTTPS) until
/// `shutdown` is cancelled, then waits for the open connections to finish. See the module docs.
pub async fn serve_http<L>(
    mut listener: L,
    app: Router,
    header_read_timeout: Duration,
    shutdown: CancellationToken,
) where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    let connections = TaskTracker::new();
    loop {
        // A listener's `accept` retries failed accepts itself (with a pause, as on EMFILE).
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        // No TCP_NODELAY, as with `axum::serve`: small event-stream frames may coalesce.
        let service = app.clone().map_request(
            move |mut req: axum::extract::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                req
            },
        );
        let token = shutdown.clone();
        connections.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout);
            let conn =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                done = conn.as_mut() => {
                    if let Err(e) = done {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                    return;
                }
                _ = token.cancelled() => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}
