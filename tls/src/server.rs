//! [`ServerTls`]: a server's certificate chain and private key, read from PEM files, checked to
//! belong together, and turned into a rustls server configuration (ring; TLS 1.2 and 1.3;
//! ALPN `http/1.1`; no client certificates).
//!
//! The certificate can be replaced while serving ([`ServerTls::reload`], on SIGHUP): the
//! configuration's certificate resolver reads the current pair from a lock on every handshake,
//! so new connections get the new certificate and open ones, already past their handshake, are
//! not touched. A pair that does not load replaces nothing.

use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use tokio_rustls::TlsAcceptor;

use crate::client::pem_certificates;
use crate::error::{read, TlsError};

/// A loaded server certificate and key, ready to accept TLS connections. Cheap to clone; the
/// clones share the certificate, so [`ServerTls::reload`] on one changes them all.
#[derive(Clone)]
pub struct ServerTls {
    acceptor: TlsAcceptor,
    current: Arc<CurrentCert>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls")
    }
}

/// The certificate handshakes get: the last pair loaded.
#[derive(Debug)]
struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // A writer never panics while holding the lock, but a poisoned one still holds a
        // whole pair: use it.
        let guard = self.0.read().unwrap_or_else(|e| e.into_inner());
        Some(Arc::clone(&guard))
    }
}

/// Reads and checks a certificate chain and its key.
fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = pem_certificates("TLS certificate", cert, &read("TLS certificate", cert)?)?;
    let key_pem = read("TLS key", key)?;
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Pem {
        what: "TLS key",
        path: key.to_path_buf(),
        reason: match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "no PEM private key (BEGIN PRIVATE KEY) in it".to_string()
            }
            other => format!("malformed PEM: {other}"),
        },
    })?;
    // Parses the key and checks it is the certificate's (rustls' own check).
    CertifiedKey::from_der(chain, private, &crate::provider()).map_err(|e| TlsError::Mismatch {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        reason: e.to_string(),
    })
}

impl ServerTls {
    /// Loads `cert` (PEM: the server's certificate first, then any intermediates) and `key`
    /// (PEM: PKCS#8, PKCS#1 or SEC1). Fails, naming the file, when one cannot be read, holds
    /// no certificate or key, or when the key is not the certificate's.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let current = Arc::new(CurrentCert(RwLock::new(Arc::new(load_pair(cert, key)?))));
        let mut config = rustls::ServerConfig::builder_with_provider(crate::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Mismatch {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
                reason: e.to_string(),
            })?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&current) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            current,
        })
    }

    /// Reads `cert` and `key` again, checked as [`ServerTls::from_pem_files`] does, and makes
    /// them the certificate of every handshake from now on. On an error (which names the file)
    /// the certificate in use stays.
    pub fn reload(&self, cert: &Path, key: &Path) -> Result<(), TlsError> {
        let pair = Arc::new(load_pair(cert, key)?);
        let mut guard = self.current.0.write().unwrap_or_else(|e| e.into_inner());
        *guard = pair;
        Ok(())
    }

    /// The optional pair of settings: `None` when neither is given (plain HTTP), the loaded
    /// certificate when both are, and [`TlsError::Unpaired`] when only one is.
    pub fn from_options(cert: Option<&Path>, key: Option<&Path>) -> Result<Option<Self>, TlsError> {
        match (cert, key) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => Self::from_pem_files(cert, key).map(Some),
            (Some(_), None) => Err(TlsError::Unpaired {
                given: "certificate",
                missing: "key",
            }),
            (None, Some(_)) => Err(TlsError::Unpaired {
                given: "key",
                missing: "certificate",
            }),
        }
    }

    pub(crate) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A self-signed certificate for `localhost` and its key, written as PEM files.
    fn write_pair(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let cert_path = dir.join(format!("{name}.crt"));
        let key_path = dir.join(format!("{name}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    #[test]
    fn a_matching_pair_loads() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "a");
        ServerTls::from_pem_files(&cert, &key).unwrap();
        assert!(ServerTls::from_options(Some(&cert), Some(&key))
            .unwrap()
            .is_some());
        assert!(ServerTls::from_options(None, None).unwrap().is_none());
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = write_pair(dir.path(), "a");
        let (_, other_key) = write_pair(dir.path(), "b");
        let err = ServerTls::from_pem_files(&cert, &other_key)
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot be used together"), "{err}");
        assert!(err.contains("a.crt") && err.contains("b.key"), "{err}");
    }

    #[test]
    fn a_reload_swaps_the_pair_and_a_bad_one_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "a");
        let (cert_b, key_b) = write_pair(dir.path(), "b");
        let tls = ServerTls::from_pem_files(&cert, &key).unwrap();
        let served = |tls: &ServerTls| tls.current.0.read().unwrap().cert[0].to_vec();
        let first = served(&tls);
        let err = tls.reload(&cert, &key_b).unwrap_err().to_string();
        assert!(err.contains("cannot be used together"), "{err}");
        assert_eq!(served(&tls), first, "a bad pair replaces nothing");
        tls.clone().reload(&cert_b, &key_b).unwrap();
        assert_ne!(served(&tls), first, "clones share the certificate");
        assert_eq!(
            served(&tls),
            pem_certificates("c", &cert_b, &std::fs::read(&cert_b).unwrap()).unwrap()[0].to_vec()
        );
    }

    #[test]
    fn one_without_the_other_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "a");
        let err = ServerTls::from_options(Some(&cert), None).unwrap_err();
        assert!(
            matches!(err, TlsError::Unpaired { missing: "key", .. }),
            "{err}"
        );
        let err = ServerTls::from_options(None, Some(&key)).unwrap_err();
        assert!(
            matches!(
                err,
                TlsError::Unpaired {
                    missing: "certificate",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn missing_files_and_wrong_contents_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "a");
        let missing = dir.path().join("missing.pem");
        let err = ServerTls::from_pem_files(&missing, &key)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot read TLS certificate") && err.contains("missing.pem"),
            "{err}"
        );
        let err = ServerTls::from_pem_files(&cert, &missing)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot read TLS key") && err.contains("missing.pem"),
            "{err}"
        );
        // The files swapped: a key where the certificate goes, and the other way round.
        let err = ServerTls::from_pem_files(&key, &key)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no PEM certificate") && err.contains("a.key"),
            "{err}"
        );
        let err = ServerTls::from_pem_files(&cert, &cert)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no PEM private key") && err.contains("a.crt"),
            "{err}"
        );
    }
}
