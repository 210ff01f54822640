//! [`TestPki`] (feature `testing`): a throwaway certificate authority and a server certificate
//! it signed ([`crate::pki::Ca`]), written as PEM files, for tests that serve HTTPS.

use std::path::{Path, PathBuf};

use crate::pki::{Ca, PkiError};

/// Why the test PKI could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TestPkiError {
    /// A certificate or key could not be made.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// A file could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A CA and a server certificate (for `localhost`, `127.0.0.1` and `::1`, or the names given),
/// as files.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The CA certificate (what clients trust): `ca.pem`.
    pub ca_file: PathBuf,
    /// The server certificate, signed by the CA: `server.crt`.
    pub cert_file: PathBuf,
    /// The server certificate's private key: `server.key`.
    pub key_file: PathBuf,
}

impl TestPki {
    /// Generates the CA and the server certificate (ECDSA P-256, ring) and writes them in `dir`.
    pub fn generate(dir: &Path) -> Result<Self, TestPkiError> {
        Self::generate_for(dir, &["localhost", "127.0.0.1", "::1"])
    }

    /// As [`TestPki::generate`], with a server certificate for `names` (host names or IP
    /// addresses, each a `subjectAltName`; the first is also its common name), e.g. the
    /// addresses of several machines that share one certificate in a test.
    pub fn generate_for(dir: &Path, names: &[&str]) -> Result<Self, TestPkiError> {
        let ca = Ca::generate("Parley test CA")?;
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let server = ca.issue_server(&names)?;
        let pki = Self {
            ca_file: dir.join("ca.pem"),
            cert_file: dir.join("server.crt"),
            key_file: dir.join("server.key"),
        };
        let write = |path: &Path, pem: String| {
            std::fs::write(path, pem).map_err(|source| TestPkiError::Write {
                path: path.to_path_buf(),
                source,
            })
        };
        write(&pki.ca_file, ca.cert_pem())?;
        write(&pki.cert_file, server.cert_pem)?;
        write(&pki.key_file, server.key_pem)?;
        Ok(pki)
    }
}
