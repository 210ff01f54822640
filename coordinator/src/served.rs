//! [`Served`]: a coordinator serving in a background task of the current tokio runtime, for a
//! process that embeds one (the end-to-end harness, the coordinator's own tests, the
//! benchmark's in-process run): its address, whether it stopped by itself, and a stop that
//! waits for its result. Dropping it stops it too, without waiting.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::Config;
use crate::server::{serve, ServeError};

/// A coordinator serving on a listener in a background task; see the module docs.
#[derive(Debug)]
pub struct Served {
    addr: SocketAddr,
    stop: CancellationToken,
    join: JoinHandle<Result<(), ServeError>>,
    /// Stops it when dropped without [`Served::stop`].
    _stop_on_drop: DropGuard,
}

impl Served {
    /// Serves `config` on `listener` ([`serve`]) in a task of the current runtime.
    pub fn spawn(config: Config, listener: TcpListener) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let join = tokio::spawn(serve(config, listener, stop.clone().cancelled_owned()));
        Ok(Self {
            addr,
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
            join,
        })
    }

    /// Binds `addr` (`127.0.0.1:0` for any free port) and serves `config` on it.
    pub async fn bind(config: Config, addr: SocketAddr) -> std::io::Result<Self> {
        Self::spawn(config, TcpListener::bind(addr).await?)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether it has stopped (by itself, since [`Served::stop`] consumes it): a bad setting,
    /// a registry that failed, a lost leadership.
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }

    /// Stops it (as a shutdown signal would: streams end, in-flight requests finish) and
    /// returns what serving returned. A panic of the serving task is resumed here.
    pub async fn stop(self) -> Result<(), ServeError> {
        let Self { stop, join, .. } = self;
        stop.cancel();
        match join.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled only with its runtime, which is what is ending then.
            Err(_) => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;

    const LOOPBACK: ([u8; 4], u16) = ([127, 0, 0, 1], 0);

    async fn health(addr: SocketAddr) -> Option<u16> {
        let url = format!("http://{addr}/health");
        let response = reqwest::get(url).await.ok()?;
        Some(response.status().as_u16())
    }

    /// A coordinator with the default settings, answering `/health`.
    async fn serving() -> (Served, SocketAddr) {
        let served = Served::bind(Config::default(), LOOPBACK.into())
            .await
            .unwrap();
        let addr = served.addr();
        assert_eq!(health(addr).await, Some(200));
        (served, addr)
    }

    #[tokio::test]
    async fn it_serves_until_stopped_and_stop_returns_what_serving_returned() {
        let (served, addr) = serving().await;
        assert!(!served.is_finished());
        served.stop().await.unwrap();
        assert_eq!(health(addr).await, None, "nothing listens after the stop");

        let bad = Config {
            allocation_interval: Duration::ZERO,
            ..Config::default()
        };
        let served = Served::bind(bad, LOOPBACK.into()).await.unwrap();
        testkit::wait_for(
            Duration::from_secs(5),
            "the bad coordinator to stop",
            || std::future::ready(served.is_finished()),
        )
        .await
        .unwrap();
        let error = served.stop().await.unwrap_err().to_string();
        assert!(error.contains("allocation_interval"), "{error}");
    }

    #[tokio::test]
    async fn dropping_it_stops_it() {
        let (served, addr) = serving().await;
        drop(served);
        testkit::wait_for(Duration::from_secs(5), "the port to close", || async move {
            health(addr).await.is_none()
        })
        .await
        .unwrap();
    }
}
