//! [`TlsListener`]: HTTPS for `axum::serve`. A background task accepts TCP connections and runs
//! each TLS handshake in a task of its own, so a slow or silent client (or a plain-HTTP one)
//! never holds up the others; a handshake gets [`HANDSHAKE_TIMEOUT`], and at most
//! [`MAX_HANDSHAKES`] run at once (past that, accepting waits). Finished handshakes reach
//! `axum::serve` through a channel. [`serve`] picks plain HTTP or HTTPS.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;

use crate::server::ServerTls;

/// How long a client has to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How many TLS handshakes may be in progress at once.
pub const MAX_HANDSHAKES: usize = 1024;

/// Completed handshakes waiting for `axum::serve` to take them.
const READY_CAPACITY: usize = 64;

type Ready = (TlsStream<TcpStream>, SocketAddr);

/// A TLS listener over a TCP listener; give it to `axum::serve`. Dropping it stops accepting
/// (the TCP listener is closed).
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<Ready>,
    local: SocketAddr,
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting TLS connections on `listener` (must be called inside a tokio runtime).
    pub fn new(listener: TcpListener, tls: ServerTls) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_CAPACITY);
        let acceptor = tokio::spawn(accept_loop(listener, tls, tx));
        Ok(Self {
            ready,
            local,
            acceptor,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accept loop ends only when this receiver is dropped, so this means it
            // panicked: say so, and accept nothing more (the server drains on shutdown).
            None => {
                tracing::error!("the TLS accept loop ended; no new connections are accepted");
                std::future::pending().await
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

async fn accept_loop(listener: TcpListener, tls: ServerTls, ready: mpsc::Sender<Ready>) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let permit = tokio::select! {
            _ = ready.closed() => return,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (tcp, addr) = tokio::select! {
            _ = ready.closed() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Per-connection errors (reset before accept) and resource exhaustion
                    // (EMFILE): log, pause briefly, go on, as axum's own TCP listener does.
                    tracing::debug!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = tls.acceptor().clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = ready.send((stream, addr)).await;
                }
                Ok(Err(e)) => tracing::debug!(%addr, "TLS handshake failed: {e}"),
                Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
            }
        });
    }
}

/// Serves `app` on `listener` until `shutdown` resolves (then drains, as `axum::serve`'s
/// graceful shutdown does): over HTTPS with `tls`, plain HTTP without.
pub async fn serve(
    listener: TcpListener,
    tls: Option<ServerTls>,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(tls) => {
            axum::serve(TlsListener::new(listener, tls)?, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::testing::TestPki;

    async fn start(pki: &TestPki) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let tls = ServerTls::from_pem_files(&pki.cert_file, &pki.key_file).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, Some(tls), app, async move {
            let _ = stopped.await;
        }));
        (addr, stop)
    }

    #[tokio::test]
    async fn https_works_for_a_client_trusting_the_ca_only() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::generate(dir.path()).unwrap();
        let (addr, _stop) = start(&pki).await;
        let url = format!("https://localhost:{}/", addr.port());

        let trusting = crate::client_builder(Some(&pki.ca_file))
            .unwrap()
            .build()
            .unwrap();
        // A client that connects and never says anything does not hold up the others.
        let _silent = TcpStream::connect(addr).await.unwrap();
        let body = trusting
            .get(&url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(body, "hello");
        let by_ip = format!("https://127.0.0.1:{}/", addr.port());
        assert!(trusting
            .get(&by_ip)
            .send()
            .await
            .unwrap()
            .status()
            .is_success());

        // The built-in roots do not include the test CA: a certificate error.
        let default = crate::client_builder(None).unwrap().build().unwrap();
        let err = default.get(&url).send().await.unwrap_err();
        let chain = format!("{:?}", err);
        assert!(err.is_connect(), "{chain}");
        assert!(chain.contains("UnknownIssuer"), "{chain}");

        // Plain HTTP to the TLS port gets no answer.
        let plain = format!("http://127.0.0.1:{}/", addr.port());
        assert!(trusting.get(&plain).send().await.is_err());
    }
}
