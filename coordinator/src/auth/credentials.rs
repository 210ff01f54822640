//! [`Credentials`]: the principals of the credentials file (`--credentials FILE`, TOML), each
//! with its kind, its secret's hash and what it may do; and bearer-token lookup.
//!
//! ```toml
//! [[principals]]
//! name = "batch"                 # shown in logs; owns the frameworks it registers
//! kind = "framework"
//! secret_sha256 = "9f86d0…"      # `coordinator hash-secret` or `printf %s "$TOKEN" | sha256sum`
//! roles = ["eng/*", "ops/batch"] # where it may register: "*", "PATH/*" (subtree), "PATH"
//! max_frameworks = 4             # optional: frameworks it may have registered at once
//!
//! [[principals]]
//! name = "node-pool"
//! kind = "agent"                 # may register agents and act as the agents it registered
//! secret_sha256 = "…"
//!
//! [[principals]]
//! name = "alice"
//! kind = "operator"
//! access = "admin"               # "read": every GET but the registry backup; "admin": all
//! secret_sha256 = "…"
//! ```
//!
//! Unknown keys, a missing or misplaced key, a bad hash or role pattern, and duplicate names or
//! secrets are errors naming the principal, found when the file is loaded (at start).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use protocol::RolePath;
use serde::Deserialize;

use super::pattern::{RolePattern, RolePatternError};
use super::secret::{SecretHash, SecretHexError};

/// Why a credentials file is refused; the message is one line naming the file (when read from
/// one) and the principal.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file could not be read.
    #[error("cannot read credentials file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file's text was refused.
    #[error("invalid credentials file {}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        #[source]
        source: Box<CredentialsError>,
    },
    /// Not TOML, or not this file's shape (the parser's message, on one line).
    #[error("{message}")]
    Toml {
        /// What the parser said.
        message: String,
    },
    /// No principal at all.
    #[error("no [[principals]]: every request would be refused")]
    NoPrincipals,
    /// Two principals with one name.
    #[error("principal {name:?} is named twice")]
    NamedTwice {
        /// The name.
        name: String,
    },
    /// Two principals with one secret.
    #[error("principals {first:?} and {second:?} have the same secret; give each its own")]
    SameSecret {
        /// The first's name.
        first: String,
        /// The second's name.
        second: String,
    },
    /// A principal's name is empty, too long or holds control characters.
    #[error("principal {name:?}: name must be 1 to 128 printable characters")]
    BadName {
        /// The name given.
        name: String,
    },
    /// A principal's entry is wrong.
    #[error("principal {name:?}: {problem}")]
    Principal {
        /// The principal's name.
        name: String,
        /// What is wrong.
        problem: PrincipalProblem,
    },
}

/// What is wrong in one `[[principals]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalProblem {
    /// `secret_sha256` is not a SHA-256 in hex.
    #[error("secret_sha256: {0}")]
    Secret(SecretHexError),
    /// A key of another kind of principal.
    #[error("{key} is only for kind = \"{kind}\"")]
    OnlyFor {
        /// The key.
        key: &'static str,
        /// The kind it is for.
        kind: &'static str,
    },
    /// A framework principal without roles.
    #[error("a framework principal needs roles = [..] (e.g. [\"eng/*\"] or [\"*\"])")]
    NoRoles,
    /// A role pattern is refused.
    #[error(transparent)]
    Pattern(RolePatternError),
    /// An operator without `access`.
    #[error("an operator needs access = \"read\" or \"admin\"")]
    NoAccess,
}

/// What an operator may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Every `GET` (state, offers and their stream, metrics, the dashboard).
    Read,
    /// `read`, plus `PUT /api/v1/roles/..` and `DELETE /api/v1/frameworks/..`.
    Admin,
}

/// The kind of a principal, with what it is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A framework (scheduler).
    Framework {
        /// Roles it may register under.
        roles: Vec<RolePattern>,
        /// How many frameworks it may have registered at once; `None`: no limit.
        max_frameworks: Option<usize>,
    },
    /// An agent.
    Agent,
    /// A person or tool watching (and, as admin, steering) the cluster.
    Operator(Access),
}

/// One principal of the credentials file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Its unique name; frameworks and agents it registers are owned by this name.
    pub name: Arc<str>,
    /// What it is and may do.
    pub kind: Kind,
    hash: SecretHash,
}

impl Principal {
    /// A principal whose token hashes to `hash`.
    pub fn new(name: &str, kind: Kind, hash: SecretHash) -> Self {
        Self {
            name: Arc::from(name),
            kind,
            hash,
        }
    }

    /// Whether it may register a framework under `role` (framework principals only).
    pub fn may_use_role(&self, role: &RolePath) -> bool {
        match &self.kind {
            Kind::Framework { roles, .. } => roles.iter().any(|p| p.matches(role)),
            _ => false,
        }
    }

    /// An operator with at least `read` access.
    pub fn is_operator(&self) -> bool {
        matches!(self.kind, Kind::Operator(_))
    }

    /// An operator with `admin` access.
    pub fn is_admin(&self) -> bool {
        matches!(self.kind, Kind::Operator(Access::Admin))
    }

    /// A framework principal.
    pub fn is_framework(&self) -> bool {
        matches!(self.kind, Kind::Framework { .. })
    }

    /// An agent principal.
    pub fn is_agent(&self) -> bool {
        matches!(self.kind, Kind::Agent)
    }

    /// The kind's name, for logs and error messages.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Framework { .. } => "framework",
            Kind::Agent => "agent",
            Kind::Operator(Access::Read) => "operator (read)",
            Kind::Operator(Access::Admin) => "operator (admin)",
        }
    }
}

/// Every principal; looks a bearer token up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    principals: Vec<Arc<Principal>>,
}

/// The file's form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    principals: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    kind: EntryKind,
    secret_sha256: String,
    #[serde(default)]
    roles: Option<Vec<String>>,
    #[serde(default)]
    max_frameworks: Option<usize>,
    #[serde(default)]
    access: Option<Access>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum EntryKind {
    Framework,
    Agent,
    Operator,
}

impl Credentials {
    /// Reads and checks a credentials file.
    pub fn load(path: &Path) -> Result<Self, CredentialsError> {
        let text = std::fs::read_to_string(path).map_err(|source| CredentialsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text).map_err(|e| CredentialsError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Parses and checks the file's text.
    pub fn from_toml(text: &str) -> Result<Self, CredentialsError> {
        let file: File = toml::from_str(text).map_err(|e| CredentialsError::Toml {
            message: one_line(&e.to_string()),
        })?;
        let mut credentials = Credentials::default();
        for entry in file.principals {
            let principal = entry_to_principal(entry)?;
            credentials.add(principal)?;
        }
        if credentials.principals.is_empty() {
            return Err(CredentialsError::NoPrincipals);
        }
        Ok(credentials)
    }

    /// Adds a principal (`--dev` adds one for its local agents); its name and secret must be
    /// new.
    pub fn add(&mut self, principal: Principal) -> Result<(), CredentialsError> {
        if self.principals.iter().any(|p| p.name == principal.name) {
            return Err(CredentialsError::NamedTwice {
                name: principal.name.to_string(),
            });
        }
        if let Some(p) = self.principals.iter().find(|p| p.hash == principal.hash) {
            return Err(CredentialsError::SameSecret {
                first: p.name.to_string(),
                second: principal.name.to_string(),
            });
        }
        self.principals.push(Arc::new(principal));
        Ok(())
    }

    /// The principals.
    pub fn principals(&self) -> &[Arc<Principal>] {
        &self.principals
    }

    /// The principal whose secret is `token`. Every principal's hash is compared, in constant
    /// time, so the answer's timing does not tell which one (or how much of one) matched.
    pub fn authenticate(&self, token: &str) -> Option<&Arc<Principal>> {
        let hash = SecretHash::of(token);
        let mut found = None;
        for p in &self.principals {
            if p.hash.ct_eq(&hash) {
                found = Some(p);
            }
        }
        found
    }
}

fn entry_to_principal(e: Entry) -> Result<Principal, CredentialsError> {
    let name = e.name.trim();
    if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
        return Err(CredentialsError::BadName { name: e.name });
    }
    let err = |problem: PrincipalProblem| CredentialsError::Principal {
        name: name.to_string(),
        problem,
    };
    let hash =
        SecretHash::from_hex(&e.secret_sha256).map_err(|r| err(PrincipalProblem::Secret(r)))?;
    let only_for =
        |key: &'static str, kind: &'static str| err(PrincipalProblem::OnlyFor { key, kind });
    if !matches!(e.kind, EntryKind::Framework) {
        if e.roles.is_some() {
            return Err(only_for("roles", "framework"));
        }
        if e.max_frameworks.is_some() {
            return Err(only_for("max_frameworks", "framework"));
        }
    }
    if !matches!(e.kind, EntryKind::Operator) && e.access.is_some() {
        return Err(only_for("access", "operator"));
    }
    let kind = match e.kind {
        EntryKind::Framework => {
            let roles = e.roles.unwrap_or_default();
            if roles.is_empty() {
                return Err(err(PrincipalProblem::NoRoles));
            }
            let roles = roles
                .iter()
                .map(|r| RolePattern::parse(r))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| err(PrincipalProblem::Pattern(e)))?;
            Kind::Framework {
                roles,
                max_frameworks: e.max_frameworks,
            }
        }
        EntryKind::Agent => Kind::Agent,
        EntryKind::Operator => {
            Kind::Operator(e.access.ok_or_else(|| err(PrincipalProblem::NoAccess))?)
        }
    };
    Ok(Principal::new(name, kind, hash))
}

/// The first line of a (TOML) error, which spans several with a caret.
fn one_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join(" ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn names(c: &Credentials) -> HashSet<&str> {
        c.principals.iter().map(|p| &*p.name).collect()
    }

    fn h(token: &str) -> String {
        SecretHash::of(token).to_hex()
    }

    fn sample() -> String {
        format!(
            r#"
[[principals]]
name = "batch"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*", "ops/batch"]
max_frameworks = 2

[[principals]]
name = "nodes"
kind = "agent"
secret_sha256 = "{}"

[[principals]]
name = "alice"
kind = "operator"
access = "admin"
secret_sha256 = "{}"

[[principals]]
name = "bob"
kind = "operator"
access = "read"
secret_sha256 = "{}"
"#,
            h("fw-token"),
            h("agent-token"),
            h("admin-token"),
            h("read-token")
        )
    }

    #[test]
    fn a_file_is_read_and_tokens_find_their_principal() {
        let c = Credentials::from_toml(&sample()).unwrap();
        assert_eq!(names(&c).len(), 4);
        let fw = c.authenticate("fw-token").unwrap();
        assert_eq!(&*fw.name, "batch");
        assert!(fw.may_use_role(&RolePath::new("eng/x").unwrap()));
        assert!(fw.may_use_role(&RolePath::new("ops/batch").unwrap()));
        assert!(!fw.may_use_role(&RolePath::new("ops").unwrap()));
        assert!(c.authenticate("agent-token").unwrap().is_agent());
        assert!(c.authenticate("admin-token").unwrap().is_admin());
        let bob = c.authenticate("read-token").unwrap();
        assert!(bob.is_operator() && !bob.is_admin());
        assert!(!bob.may_use_role(&RolePath::new("eng").unwrap()));
        assert!(c.authenticate("fw-token ").is_none());
        assert!(c.authenticate("").is_none());
    }

    #[test]
    fn mistakes_in_the_file_are_named() {
        let fw = |extra: &str| {
            format!(
                "[[principals]]\nname = \"a\"\nkind = \"framework\"\nsecret_sha256 = \"{}\"\n{extra}",
                h("x")
            )
        };
        let cases = [
            (fw("roles = [\"eng/*\"]\ncolour = 1"), "unknown field"),
            (fw("roles = [\"eng*\"]"), "role pattern"),
            (fw(""), "needs roles"),
            (fw("roles = [\"*\"]\naccess = \"read\""), "access is only for"),
            (
                "[[principals]]\nname = \"a\"\nkind = \"agent\"\nsecret_sha256 = \"abc\"".into(),
                "64 hex digits",
            ),
            (
                format!("[[principals]]\nname = \"a\"\nkind = \"operator\"\nsecret_sha256 = \"{}\"", h("x")),
                "needs access",
            ),
            (
                format!("[[principals]]\nname = \"a\"\nkind = \"agent\"\nsecret_sha256 = \"{}\"\nroles = [\"*\"]", h("x")),
                "roles is only for",
            ),
            (
                format!("[[principals]]\nname = \"a\"\nkind = \"root\"\nsecret_sha256 = \"{}\"", h("x")),
                "unknown variant",
            ),
            ("".into(), "no [[principals]]"),
        ];
        for (text, expected) in cases {
            let err = Credentials::from_toml(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{err:?} lacks {expected:?}");
        }
    }

    #[test]
    fn duplicate_names_and_secrets_are_refused() {
        let two = |n1: &str, t1: &str, n2: &str, t2: &str| {
            format!(
                "[[principals]]\nname = \"{n1}\"\nkind = \"agent\"\nsecret_sha256 = \"{}\"\n\
                 [[principals]]\nname = \"{n2}\"\nkind = \"agent\"\nsecret_sha256 = \"{}\"\n",
                h(t1),
                h(t2)
            )
        };
        assert!(Credentials::from_toml(&two("a", "x", "a", "y"))
            .unwrap_err()
            .to_string()
            .contains("named twice"));
        assert!(Credentials::from_toml(&two("a", "x", "b", "x"))
            .unwrap_err()
            .to_string()
            .contains("same secret"));
        Credentials::from_toml(&two("a", "x", "b", "y")).unwrap();
    }
}
