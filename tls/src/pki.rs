//! [`Ca`] (feature `pki`): a certificate authority for one cluster, and the server certificates
//! it signs, as PEM text. `coordinator tls init` writes them as a cluster's files;
//! `testing::TestPki` (feature `testing`) makes a throwaway one for tests.
//!
//! Keys are ECDSA P-256, generated with ring. Certificates carry the names and addresses given
//! (DNS names, or IP addresses when a name parses as one) as subject alternative names, which
//! is what clients check; the common name is only a label. rcgen gives a certificate with no
//! set serial a serial derived from its public key, so every freshly generated certificate has
//! a serial of its own.

/// Why a certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A subject alternative name is neither a DNS name nor an IP address.
    #[error("invalid certificate name {name:?}: {reason}")]
    Name {
        /// The name given.
        name: String,
        /// rcgen's reason.
        reason: String,
    },
    /// A certificate names nothing: clients would accept it for no host.
    #[error("a server certificate needs at least one name or address")]
    NoNames,
    /// Key generation or signing failed.
    #[error("cannot make the certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
}

/// A certificate and its private key, as PEM.
#[derive(Clone)]
pub struct Issued {
    /// The certificate (`BEGIN CERTIFICATE`).
    pub cert_pem: String,
    /// Its private key, PKCS#8 (`BEGIN PRIVATE KEY`): keep it secret.
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").finish_non_exhaustive()
    }
}

/// A self-signed certificate authority that signs server certificates.
pub struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A new CA named `common_name`, with a fresh key; it may sign certificates and nothing
    /// else (key usages `keyCertSign` and `cRLSign`).
    pub fn generate(common_name: &str) -> Result<Self, PkiError> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let cert = params.self_signed(&key)?;
        Ok(Self { cert, key })
    }

    /// The CA certificate, what clients trust (`ca.pem`).
    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA's private key (`ca.key`): whoever holds it can make certificates the cluster
    /// trusts.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A server certificate for `names` (DNS names and IP addresses; the first is also its
    /// common name), with a fresh key, signed by this CA, for TLS servers only
    /// (`serverAuth`).
    pub fn issue_server(&self, names: &[String]) -> Result<Issued, PkiError> {
        let first = names.first().ok_or(PkiError::NoNames)?;
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        for name in names {
            params.subject_alt_names.push(san(name)?);
        }
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, first.as_str());
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// One subject alternative name: an IP address when it parses as one, else a DNS name.
fn san(name: &str) -> Result<rcgen::SanType, PkiError> {
    if let Ok(ip) = name.parse::<std::net::IpAddr>() {
        return Ok(rcgen::SanType::IpAddress(ip));
    }
    let bad = |reason: String| PkiError::Name {
        name: name.to_string(),
        reason,
    };
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && (label == "*" || label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !valid {
        return Err(bad(
            "expected a DNS name (letters, digits, '-' and '.') or an IP address".into(),
        ));
    }
    let dns = rcgen::Ia5String::try_from(name).map_err(|e| bad(e.to_string()))?;
    Ok(rcgen::SanType::DnsName(dns))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_names_or_addresses_and_bad_ones_are_named() {
        assert!(matches!(
            san("198.18.0.2").unwrap(),
            rcgen::SanType::IpAddress(_)
        ));
        assert!(matches!(san("::1").unwrap(), rcgen::SanType::IpAddress(_)));
        assert!(matches!(
            san("coord1.example").unwrap(),
            rcgen::SanType::DnsName(_)
        ));
        for bad in ["", "a..b", "-a.example", "a b", "ü.example", "a/b"] {
            let err = san(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        let ca = Ca::generate("test").unwrap();
        assert!(matches!(ca.issue_server(&[]), Err(PkiError::NoNames)));
    }

    #[test]
    fn each_certificate_has_its_own_key() {
        let ca = Ca::generate("test").unwrap();
        let names = ["localhost".to_string()];
        let (a, b) = (
            ca.issue_server(&names).unwrap(),
            ca.issue_server(&names).unwrap(),
        );
        assert_ne!(a.cert_pem, b.cert_pem);
        assert_ne!(a.key_pem, b.key_pem);
        assert!(ca.cert_pem().contains("BEGIN CERTIFICATE"));
        assert!(ca.key_pem().contains("BEGIN PRIVATE KEY"));
    }
}
