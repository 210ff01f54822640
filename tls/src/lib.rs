//! TLS for Parley: the coordinator's and the agents' HTTPS serving, and the CA file every
//! client (SDK, agents, the coordinator calling agents, the examples) may trust.
//!
//! One crypto provider everywhere: **ring** (it builds with a C compiler alone; rustls' default,
//! aws-lc-rs, also needs cmake and on some systems nasm). Every rustls crate in the workspace has
//! its default features off and `ring` on, and the code below names the provider explicitly, so
//! no process-wide default is needed.
//!
//! # Modules
//!
//! - [`error`]: [`TlsError`], every way a certificate, key or CA file can be unusable; each
//!   message names the file.
//! - [`client`]: [`client_builder`], a reqwest client builder that trusts a CA file (only it) or,
//!   without one, the built-in Mozilla roots; [`ca_certificates`] reads a CA file.
//! - `server` (feature `server`): `ServerTls`, a certificate chain and its key loaded from PEM
//!   files and checked to match, ready to accept connections.
//! - `listener` (feature `server`): `TlsListener`, an `axum::serve::Listener` that runs TLS
//!   handshakes concurrently (each with a time limit) over a `TcpListener`, and `serve`, which
//!   serves an axum app over plain HTTP or HTTPS.
//! - `pki` (feature `pki`): `Ca`, a cluster certificate authority and the server certificates
//!   it signs, as PEM (rcgen).
//! - `testing` (feature `testing`): `TestPki`, a throwaway CA and server certificate as files.

pub mod client;
pub mod error;
#[cfg(feature = "server")]
mod listener;
#[cfg(feature = "pki")]
pub mod pki;
#[cfg(feature = "server")]
mod server;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{ca_certificates, client_builder, POOL_IDLE_TIMEOUT};
pub use error::TlsError;
#[cfg(feature = "server")]
pub use listener::{serve, TlsListener, HANDSHAKE_TIMEOUT, MAX_HANDSHAKES};
#[cfg(feature = "server")]
pub use server::ServerTls;

/// The crypto provider every TLS configuration of Parley uses: ring.
pub fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
