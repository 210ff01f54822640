//! Reloading the TLS certificate and the credentials file while serving ([`reload`]; on
//! SIGHUP with `Config::reload_on_sighup`, [`reload_on_sighup`]).
//!
//! Each file is read and checked in full before it replaces anything: a bad new certificate or
//! credentials file is logged with the reason (naming the file) and the one in use stays. New
//! TLS handshakes get the new certificate; connections already open, event streams included,
//! are not touched. New requests are checked against the new principals (a removed token gets
//! 401 on its next request); a stream already open stays open, as its request was let in.

use std::sync::Arc;

use crate::auth::Credentials;
use crate::runtime::Coordinator;

/// What one reload did with each file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// `None`: no certificate is served (plain HTTP); `Some(Ok)`: replaced; `Some(Err)`: kept
    /// the old one, for this reason.
    pub tls: Option<Result<(), String>>,
    /// `None`: no credentials file; otherwise as for `tls`.
    pub credentials: Option<Result<(), String>>,
}

/// Reads the certificate, its key and the credentials file again and uses each that loads;
/// logs what it did.
pub fn reload(c: &Coordinator) -> Reloaded {
    let config = c.config();
    let tls = match (c.server_tls(), &config.tls_cert, &config.tls_key) {
        (Some(tls), Some(cert), Some(key)) => {
            Some(tls.reload(cert, key).map_err(|e| e.to_string()))
        }
        _ => None,
    };
    let credentials = config.credentials_file.as_ref().map(|path| {
        let loaded = Credentials::load(path).map_err(|e| e.to_string())?;
        c.set_credentials(Arc::new(loaded));
        Ok(())
    });
    for (what, outcome) in [("TLS certificate", &tls), ("credentials", &credentials)] {
        match outcome {
            Some(Ok(())) => tracing::info!("reloaded the {what}"),
            Some(Err(reason)) => {
                tracing::error!(%reason, "cannot reload the {what}; keeping the one in use")
            }
            None => {}
        }
    }
    Reloaded { tls, credentials }
}

/// Calls [`reload`] on every SIGHUP until the coordinator shuts down. Listening starts before
/// this returns, so a SIGHUP sent once it has is never lost (nor does it kill the process).
pub fn reload_on_sighup(c: Coordinator) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        let token = c.shutdown_token().clone();
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                got = hangups.recv() => {
                    if got.is_none() {
                        return;
                    }
                    tracing::info!("SIGHUP: reloading the TLS certificate and the credentials");
                    reload(&c);
                }
            }
        }
    }))
}
