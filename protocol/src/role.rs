//! Role paths and weights.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The deepest role path accepted.
pub const MAX_ROLE_DEPTH: usize = 16;
/// The longest role segment.
pub const MAX_SEGMENT_LEN: usize = 64;

/// A path in the role tree, e.g. `eng/batch`: one or more `/`-separated segments of
/// `[a-z0-9_-]`, each 1 to 64 characters, at most 16 deep. The root itself has no path.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "String", into = "String")]
pub struct RolePath(String);

/// A role path or weight that was rejected, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    /// The path is malformed.
    #[error("invalid role {0:?}: use segments of [a-z0-9_-] (1 to 64 characters) separated by '/', at most 16 deep, e.g. \"eng/batch\"")]
    BadPath(String),
    /// The weight is not a positive finite number.
    #[error("invalid weight {0}: a weight must be a finite number > 0 and <= 1e6")]
    BadWeight(String),
}

impl RolePath {
    /// Validates a role path.
    pub fn new(path: impl Into<String>) -> Result<Self, RoleError> {
        let path = path.into();
        let segments: Vec<&str> = path.split('/').collect();
        let ok = segments.len() <= MAX_ROLE_DEPTH
            && segments.iter().all(|s| {
                !s.is_empty()
                    && s.len() <= MAX_SEGMENT_LEN
                    && s.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'
                    })
            });
        if ok {
            Ok(Self(path))
        } else {
            Err(RoleError::BadPath(path))
        }
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments, top-down.
    pub fn segments(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.split('/')
    }
}

impl TryFrom<String> for RolePath {
    type Error = RoleError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<RolePath> for String {
    fn from(p: RolePath) -> String {
        p.0
    }
}

impl fmt::Display for RolePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RolePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RolePath({})", self.0)
    }
}

impl std::str::FromStr for RolePath {
    type Err = RoleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// The largest weight accepted.
pub const MAX_WEIGHT: f64 = 1e6;

/// A role's weight: a finite number in `(0, 1e6]`. Default 1.
#[derive(Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(try_from = "f64", into = "f64")]
pub struct Weight(f64);

impl Weight {
    /// Weight 1.
    pub const ONE: Weight = Weight(1.0);

    /// Validates a weight.
    pub fn new(w: f64) -> Result<Self, RoleError> {
        if w.is_finite() && w > 0.0 && w <= MAX_WEIGHT {
            Ok(Self(w))
        } else {
            Err(RoleError::BadWeight(w.to_string()))
        }
    }

    /// The weight as a number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Default for Weight {
    fn default() -> Self {
        Self::ONE
    }
}

impl TryFrom<f64> for Weight {
    type Error = RoleError;
    fn try_from(w: f64) -> Result<Self, Self::Error> {
        Self::new(w)
    }
}

impl From<Weight> for f64 {
    fn from(w: Weight) -> f64 {
        w.0
    }
}

impl fmt::Debug for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Weight({})", self.0)
    }
}

impl fmt::Display for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_validated() {
        assert_eq!(RolePath::new("eng/batch").unwrap().segments().count(), 2);
        for bad in [
            "",
            "/",
            "eng/",
            "/eng",
            "Eng",
            "a//b",
            "a b",
            &"a/".repeat(16),
        ] {
            assert!(RolePath::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn weights_are_validated() {
        assert!(Weight::new(2.5).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e7] {
            assert!(Weight::new(bad).is_err(), "{bad} accepted");
        }
        assert!(serde_json::from_str::<Weight>("0").is_err());
    }
}
