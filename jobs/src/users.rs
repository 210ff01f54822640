//! [`Users`]: who may use the jobs API, read from a TOML file (`--users FILE`), and how many
//! tasks each user's jobs may run at once.
//!
//! ```toml
//! [[user]]
//! name = "alice"
//! # printf %s "$TOKEN" | sha256sum (or `coordinator hash-secret`)
//! secret_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! max_running = 200   # optional: else --max-running-per-user, else no limit
//! ```
//!
//! Only hashes are kept: tokens are random, so one SHA-256 is as good as a slow hash here
//! (there is nothing to guess), and a lookup costs one hash per request. A user sees every
//! job but may stop, scale, update, restart or delete only its own.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::book::UserLimits;

/// A users file that cannot be used; the message names the file and the entry.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// The file cannot be read.
    #[error("users file {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// An entry is wrong.
    #[error("users file {path}: {field}: {reason}")]
    Entry {
        /// The file.
        path: String,
        /// The entry's field (`user[1].secret_sha256`).
        field: String,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    user: Vec<RawUser>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUser {
    name: String,
    secret_sha256: String,
    max_running: Option<i64>,
}

/// One user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its name: the owner of the jobs it submits.
    pub name: String,
    /// Its token's SHA-256.
    hash: [u8; 32],
    /// The most tasks its jobs may run at once, if it has a limit of its own.
    pub max_running: Option<u32>,
}

/// The users of the jobs API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    users: Vec<User>,
}

impl Users {
    /// Reads and checks a users file.
    pub fn load(path: &Path) -> Result<Self, UsersError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| UsersError::Read {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        Self::parse(&text).map_err(|e| match e {
            UsersError::Read { reason, .. } => UsersError::Read {
                path: shown,
                reason,
            },
            UsersError::Entry { field, reason, .. } => UsersError::Entry {
                path: shown,
                field,
                reason,
            },
        })
    }

    /// Checks a users file's text (errors name no file; [`Users::load`] adds it).
    pub fn parse(text: &str) -> Result<Self, UsersError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| UsersError::Read {
            path: String::new(),
            reason: e.to_string(),
        })?;
        let entry = |field: String, reason: &str| UsersError::Entry {
            path: String::new(),
            field,
            reason: reason.to_owned(),
        };
        let mut users: Vec<User> = Vec::new();
        for (i, u) in raw.user.iter().enumerate() {
            let at = |f: &str| format!("user[{i}].{f}");
            if !is_user_name(&u.name) {
                return Err(entry(
                    at("name"),
                    "use 1 to 63 letters, digits, '-', '_' or '.', starting with a letter or digit",
                ));
            }
            if users.iter().any(|o| o.name == u.name) {
                return Err(entry(at("name"), "is given twice"));
            }
            let hash = parse_hash(&u.secret_sha256)
                .ok_or_else(|| entry(at("secret_sha256"), "is not 64 hex digits"))?;
            if users.iter().any(|o| o.hash == hash) {
                return Err(entry(
                    at("secret_sha256"),
                    "is another user's: give each user its own token",
                ));
            }
            let max_running = match u.max_running {
                None => None,
                Some(n) => Some(
                    u32::try_from(n)
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| entry(at("max_running"), "must be 1 to 4294967295"))?,
                ),
            };
            users.push(User {
                name: u.name.clone(),
                hash,
                max_running,
            });
        }
        Ok(Self { users })
    }

    /// The user whose token this is (compared in constant time, every user tried).
    pub fn who(&self, token: &str) -> Option<&User> {
        let given: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for u in &self.users {
            if bool::from(u.hash.ct_eq(&given)) {
                found = Some(u);
            }
        }
        found
    }

    /// Every user, in the file's order.
    pub fn iter(&self) -> impl Iterator<Item = &User> {
        self.users.iter()
    }

    /// The book's limits: each user's own, and `default` for the rest.
    pub fn limits(&self, default: Option<u32>) -> UserLimits {
        UserLimits {
            per_user: self
                .users
                .iter()
                .filter_map(|u| Some((u.name.clone(), u.max_running?)))
                .collect::<BTreeMap<_, _>>(),
            default,
        }
    }
}

/// 1 to 63 letters, digits, `-`, `_` or `.`, starting with a letter or digit.
fn is_user_name(name: &str) -> bool {
    name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `printf %s test | sha256sum`.
    const TEST_HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn a_token_names_its_user_and_limits_come_out() {
        let users = Users::parse(&format!(
            "[[user]]\nname = \"alice\"\nsecret_sha256 = \"{TEST_HASH}\"\nmax_running = 3\n\
             [[user]]\nname = \"bob\"\nsecret_sha256 = \"{}\"\n",
            "00".repeat(32)
        ))
        .unwrap();
        assert_eq!(users.who("test").unwrap().name, "alice");
        assert!(users.who("tes").is_none());
        let limits = users.limits(Some(10));
        assert_eq!(limits.of("alice"), Some(3));
        assert_eq!(limits.of("bob"), Some(10));
        assert_eq!(limits.of("anonymous"), Some(10));
        assert_eq!(users.limits(None).of("bob"), None);
    }

    #[test]
    fn bad_entries_are_refused_naming_the_field() {
        let cases = [
            ("[[user]]\nname = \"a\"\n", "secret_sha256"),
            (
                "[[user]]\nname = \"a\"\nsecret_sha256 = \"xyz\"\n",
                "user[0].secret_sha256: is not 64 hex digits",
            ),
            (
                &format!("[[user]]\nname = \"a b\"\nsecret_sha256 = \"{TEST_HASH}\"\n"),
                "user[0].name",
            ),
            (
                &format!(
                    "[[user]]\nname = \"a\"\nsecret_sha256 = \"{TEST_HASH}\"\n\
                     [[user]]\nname = \"a\"\nsecret_sha256 = \"{}\"\n",
                    "11".repeat(32)
                ),
                "user[1].name: is given twice",
            ),
            (
                &format!(
                    "[[user]]\nname = \"a\"\nsecret_sha256 = \"{TEST_HASH}\"\n\
                     [[user]]\nname = \"b\"\nsecret_sha256 = \"{TEST_HASH}\"\n"
                ),
                "user[1].secret_sha256: is another user's",
            ),
            (
                &format!(
                    "[[user]]\nname = \"a\"\nsecret_sha256 = \"{TEST_HASH}\"\nmax_running = 0\n"
                ),
                "user[0].max_running",
            ),
            (
                &format!("[[user]]\nname = \"a\"\nsecret_sha256 = \"{TEST_HASH}\"\nrole = 1\n"),
                "unknown field `role`",
            ),
        ];
        for (text, want) in cases {
            let err = Users::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
