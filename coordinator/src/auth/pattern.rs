//! [`RolePattern`]: which roles a framework principal may register under: `*` (any role), a
//! subtree `eng/*` (`eng` itself and every role below it), or an exact path `eng/batch`.

use protocol::RolePath;

/// A set of roles named in the credentials file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolePattern {
    /// `*`: every role.
    Any,
    /// `eng/*`: the role `eng` and all its descendants.
    Subtree(RolePath),
    /// `eng/batch`: that role only.
    Exact(RolePath),
}

/// Why a role pattern is refused; the message names the pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RolePatternError {
    /// A `*` elsewhere than as the whole pattern or its last segment.
    #[error("role pattern {pattern:?}: '*' may only be the whole pattern or its last segment (\"eng/*\")")]
    Wildcard {
        /// The pattern.
        pattern: String,
    },
    /// The path is not a valid role path.
    #[error("role pattern {pattern:?}: {source}")]
    Role {
        /// The pattern.
        pattern: String,
        /// Why the path is not a role.
        #[source]
        source: protocol::role::RoleError,
    },
}

impl RolePattern {
    /// Parses `*`, `PATH/*` or `PATH` (a valid role path). Anything else, `eng*` or `*/x` for
    /// example, is refused with the reason.
    pub fn parse(text: &str) -> Result<Self, RolePatternError> {
        if text == "*" {
            return Ok(RolePattern::Any);
        }
        let (path, subtree) = match text.strip_suffix("/*") {
            Some(path) => (path, true),
            None => (text, false),
        };
        if path.contains('*') {
            return Err(RolePatternError::Wildcard {
                pattern: text.to_string(),
            });
        }
        let role = RolePath::new(path).map_err(|source| RolePatternError::Role {
            pattern: text.to_string(),
            source,
        })?;
        Ok(if subtree {
            RolePattern::Subtree(role)
        } else {
            RolePattern::Exact(role)
        })
    }

    /// Whether `role` is in the set.
    pub fn matches(&self, role: &RolePath) -> bool {
        match self {
            RolePattern::Any => true,
            RolePattern::Exact(p) => p == role,
            RolePattern::Subtree(p) => {
                let (p, r) = (p.as_str(), role.as_str());
                r == p
                    || (r.len() > p.len()
                        && r.starts_with(p)
                        && r.as_bytes().get(p.len()) == Some(&b'/'))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn role(s: &str) -> RolePath {
        RolePath::new(s).unwrap()
    }

    #[test]
    fn subtree_matches_the_role_and_its_descendants_only() {
        let p = RolePattern::parse("eng/*").unwrap();
        assert!(p.matches(&role("eng")));
        assert!(p.matches(&role("eng/batch")));
        assert!(p.matches(&role("eng/batch/nightly")));
        assert!(!p.matches(&role("engineering")));
        assert!(!p.matches(&role("ops")));
        assert!(!p.matches(&role("ops/eng")));
    }

    #[test]
    fn exact_and_any() {
        let p = RolePattern::parse("eng/batch").unwrap();
        assert!(p.matches(&role("eng/batch")));
        assert!(!p.matches(&role("eng")));
        assert!(!p.matches(&role("eng/batch/x")));
        assert!(RolePattern::parse("*").unwrap().matches(&role("x/y")));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in ["", "eng*", "*/x", "eng/*/x", "eng/**", "/eng", "eng//x"] {
            assert!(RolePattern::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
