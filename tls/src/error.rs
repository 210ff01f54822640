//! [`TlsError`]: why a certificate, key or CA file cannot be used. Every message names the file,
//! so a bad setting is a clear one-line error at start.

use std::path::PathBuf;

/// A TLS file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file cannot be read (missing, unreadable).
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// What the file is meant to hold ("TLS certificate", "TLS key", "CA file").
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no PEM item of the kind needed, or a malformed one.
    #[error("{what} {}: {reason}", path.display())]
    Pem {
        /// What the file is meant to hold.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong, e.g. no `BEGIN CERTIFICATE` block.
        reason: String,
    },
    /// A certificate was given without its key, or a key without its certificate.
    #[error(
        "a TLS {given} was given without its {missing}: give both the certificate and the key"
    )]
    Unpaired {
        /// The one given ("certificate" or "key").
        given: &'static str,
        /// The one missing.
        missing: &'static str,
    },
    /// The certificate and the key do not belong together, or rustls refuses them.
    #[error("TLS certificate {} and key {} cannot be used together: {reason}", cert.display(), key.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls' reason (e.g. the key does not match the certificate's public key).
        reason: String,
    },
    /// The HTTP client could not be built with the CA file's certificates.
    #[error("CA file {}: {reason}", path.display())]
    Client {
        /// The CA file.
        path: PathBuf,
        /// reqwest's reason.
        reason: String,
    },
}

/// Reads a whole file, naming it on failure.
pub(crate) fn read(what: &'static str, path: &std::path::Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}
