//! [`shutdown_signal`]: the one way every Parley server (the coordinator, the agent, the jobs
//! service, `parley --dev`) learns that it is asked to stop.

/// Completes on the first Ctrl-C (SIGINT) or SIGTERM, which is how an operator or a service
/// manager (systemd's `KillSignal`) asks a server to stop; logs which one came at info level.
///
/// The handlers are installed when the future is first polled (it needs a tokio runtime with
/// its signal driver, which the servers' multi-threaded runtime has), and from then on the
/// signals no longer end the process by themselves. One that cannot be installed is logged
/// as an error and never completes, so the other still works.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "SIGINT",
            Err(e) => {
                tracing::error!("cannot listen for Ctrl-C: {e}");
                std::future::pending().await
            }
        }
    };
    let term = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
                "SIGTERM"
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending().await
            }
        }
    };
    let signal = tokio::select! {
        s = ctrl_c => s,
        s = term => s,
    };
    tracing::info!(signal, "shutting down");
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::shutdown_signal;

    #[tokio::test]
    async fn sigterm_completes_it_and_nothing_else_does() {
        let mut stop = pin!(shutdown_signal());
        // The first poll installs the handlers; nothing has come yet.
        let pending = stop.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert_eq!(pending, Poll::Pending);
        let early = tokio::time::timeout(Duration::from_millis(50), stop.as_mut()).await;
        assert!(early.is_err(), "it completed with no signal");
        // Handled by tokio now, so it does not end the test process.
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).expect("raising SIGTERM");
        tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("SIGTERM did not complete it");
    }
}
