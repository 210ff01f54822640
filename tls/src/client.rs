//! The client side: a CA file (PEM, one or more `CERTIFICATE` blocks) that an HTTP client trusts.
//!
//! With a CA file the client trusts **only** its certificates (a private cluster CA should not
//! share trust with every public CA); without one it trusts the built-in Mozilla roots, so an
//! `https://` coordinator with a publicly trusted certificate works with no file. Plain `http://`
//! URLs are unaffected either way.

use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::error::{read, TlsError};

const WHAT: &str = "CA file";

/// Reads the certificates of a CA file; an empty file, or one with no `CERTIFICATE` block, is an
/// error.
pub fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, TlsError> {
    let pem = read(WHAT, path)?;
    let ders = pem_certificates(WHAT, path, &pem)?;
    ders.iter()
        .map(|der| {
            reqwest::Certificate::from_der(der).map_err(|e| TlsError::Pem {
                what: WHAT,
                path: path.to_path_buf(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// How long a client keeps an idle connection for reuse: less than the 30 s after which
/// Parley's servers close an idle connection (the coordinator's `header_read_timeout`), so a
/// request is not sent on a connection the server is closing at that moment, which fails it
/// with "error sending request" (reqwest's own default is 90 s).
pub const POOL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// A reqwest client builder that trusts the CA file's certificates only, or the built-in roots
/// when `ca_file` is `None`, and keeps idle connections for [`POOL_IDLE_TIMEOUT`]. Callers add
/// their own settings (timeouts, pools) and build it.
pub fn client_builder(ca_file: Option<&Path>) -> Result<reqwest::ClientBuilder, TlsError> {
    let builder = reqwest::Client::builder().pool_idle_timeout(POOL_IDLE_TIMEOUT);
    let Some(path) = ca_file else {
        return Ok(builder);
    };
    let mut builder = builder.tls_built_in_root_certs(false);
    for cert in ca_certificates(path)? {
        builder = builder.add_root_certificate(cert);
    }
    Ok(builder)
}

/// The `CERTIFICATE` blocks of a PEM text; at least one.
pub(crate) fn pem_certificates(
    what: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem_error = |reason: String| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(format!("malformed PEM: {e}")))?;
    if certs.is_empty() {
        return Err(pem_error(
            "no PEM certificate (BEGIN CERTIFICATE) in it".into(),
        ));
    }
    Ok(certs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn a_ca_file_with_certificates_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, format!("{}{}", ca_pem(), ca_pem())).unwrap();
        assert_eq!(ca_certificates(&path).unwrap().len(), 2);
        client_builder(Some(&path)).unwrap().build().unwrap();
        client_builder(None).unwrap().build().unwrap();
    }

    #[test]
    fn missing_empty_and_keyless_ca_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let err = ca_certificates(&missing).unwrap_err().to_string();
        assert!(
            err.contains("cannot read CA file") && err.contains("nope.pem"),
            "{err}"
        );

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let err = ca_certificates(&empty).unwrap_err().to_string();
        assert!(
            err.contains("no PEM certificate") && err.contains("empty.pem"),
            "{err}"
        );

        let key_only = dir.path().join("key.pem");
        let key = rcgen::KeyPair::generate().unwrap();
        std::fs::write(&key_only, key.serialize_pem()).unwrap();
        let err = client_builder(Some(&key_only)).unwrap_err().to_string();
        assert!(err.contains("no PEM certificate"), "{err}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\n!!!\n").unwrap();
        let err = ca_certificates(&garbage).unwrap_err().to_string();
        assert!(err.contains("garbage.pem"), "{err}");
    }
}
