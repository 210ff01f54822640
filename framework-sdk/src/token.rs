//! [`BearerToken`]: the framework principal's secret, sent as `Authorization: Bearer <token>`
//! when the coordinator has a credentials file. Its `Debug` hides the value, so logging a
//! configuration does not leak it.

use std::convert::Infallible;
use std::str::FromStr;

/// A bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// A token with this secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// The `Authorization` header value, marked sensitive (not logged by HTTP tracing).
    pub(crate) fn header(&self) -> Result<reqwest::header::HeaderValue, String> {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", self.0))
            .map_err(|_| "the token has characters a header cannot carry".to_owned())?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl FromStr for BearerToken {
    type Err = Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_secret() {
        let t = BearerToken::new("s3cret");
        assert!(!format!("{t:?}").contains("s3cret"));
        assert_eq!(t.secret(), "s3cret");
        assert!(BearerToken::new("a\nb").header().is_err());
    }
}
