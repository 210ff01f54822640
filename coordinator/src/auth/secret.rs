//! Secrets: bearer tokens are kept only as their SHA-256 hash ([`SecretHash`]) and compared in
//! constant time.
//!
//! A slow password KDF (argon2, bcrypt) is not needed here: the tokens are random (at least
//! 128 bits, e.g. `coordinator new-token`), so there is no dictionary to search, and inverting
//! SHA-256 of a 128-bit random value is out of reach however fast the hash is. Slow KDFs protect
//! low-entropy passwords; they would only add milliseconds to every request.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The SHA-256 of a secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SecretHash([u8; 32]);

impl std::fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHash(..)")
    }
}

/// Why a `secret_sha256` is not a SHA-256 in hex.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretHexError {
    /// Not 64 ASCII characters.
    #[error("expected 64 hex digits (a SHA-256), got {chars} characters")]
    Length {
        /// How many characters were given.
        chars: usize,
    },
    /// Two characters that are not a hex byte.
    #[error("{pair:?} is not a hex byte")]
    NotHex {
        /// The two characters.
        pair: String,
    },
}

impl SecretHash {
    /// The hash of `secret` (its UTF-8 bytes, as sent after `Bearer `).
    pub fn of(secret: &str) -> Self {
        Self(Sha256::digest(secret.as_bytes()).into())
    }

    /// Parses 64 hex digits (either case), as `sha256sum` prints them.
    pub fn from_hex(text: &str) -> Result<Self, SecretHexError> {
        let text = text.trim();
        if text.len() != 64 || !text.is_ascii() {
            return Err(SecretHexError::Length {
                chars: text.chars().count(),
            });
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = text.get(2 * i..2 * i + 2).unwrap_or("");
            *byte = u8::from_str_radix(pair, 16).map_err(|_| SecretHexError::NotHex {
                pair: pair.to_string(),
            })?;
        }
        Ok(Self(out))
    }

    /// 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        use std::fmt::Write;
        self.0.iter().fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// Equal, in time independent of where the hashes differ.
    pub fn ct_eq(&self, other: &SecretHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_sha256sum_and_round_trips_through_hex() {
        // printf %s abc | sha256sum
        let h = SecretHash::of("abc");
        assert_eq!(
            h.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(SecretHash::from_hex(&h.to_hex().to_uppercase()).unwrap(), h);
        assert!(h.ct_eq(&SecretHash::of("abc")));
        assert!(!h.ct_eq(&SecretHash::of("abd")));
    }

    #[test]
    fn bad_hex_is_refused() {
        assert!(SecretHash::from_hex("abc").is_err());
        assert!(SecretHash::from_hex(&"zz".repeat(32)).is_err());
        assert!(SecretHash::from_hex(&"é".repeat(32)).is_err());
    }
}
