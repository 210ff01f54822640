//! [`TestPki`] (feature `testing`): a throwaway certificate authority and a server certificate
//! it signed, written as PEM files, for tests that serve HTTPS.

use std::path::{Path, PathBuf};

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
    pub fn generate(dir: &Path) -> Result<Self, String> {
        Self::generate_for(dir, &["localhost", "127.0.0.1", "::1"])
    }

    /// As [`TestPki::generate`], with a server certificate for `names` (host names or IP
    /// addresses, each a `subjectAltName`; the first is also its common name), e.g. the
    /// addresses of several machines that share one certificate in a test.
    pub fn generate_for(dir: &Path, names: &[&str]) -> Result<Self, String> {
        let text = |e: rcgen::Error| e.to_string();
        let ca_key = rcgen::KeyPair::generate().map_err(text)?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(text)?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Parley test CA");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let ca = ca_params.self_signed(&ca_key).map_err(text)?;

        let key = rcgen::KeyPair::generate().map_err(text)?;
        let first = names.first().copied().unwrap_or("localhost");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).map_err(text)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, first);
        let cert = params.signed_by(&key, &ca, &ca_key).map_err(text)?;

        let pki = Self {
            ca_file: dir.join("ca.pem"),
            cert_file: dir.join("server.crt"),
            key_file: dir.join("server.key"),
        };
        let write = |path: &Path, pem: String| {
            std::fs::write(path, pem).map_err(|e| format!("{}: {e}", path.display()))
        };
        write(&pki.ca_file, ca.pem())?;
        write(&pki.cert_file, cert.pem())?;
        write(&pki.key_file, key.serialize_pem())?;
        Ok(pki)
    }
}
