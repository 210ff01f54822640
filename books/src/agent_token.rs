//! [`AgentToken`]: the secret an agent registers with, which the coordinator presents
//! (`Authorization: Bearer …`) on every call to that agent. It never appears in `Debug`
//! output, operator views or logs, and is compared in constant time.

/// The longest token accepted.
const MAX_LEN: usize = 512;

/// An agent's API token.
#[derive(Clone, PartialEq, Eq)]
pub struct AgentToken(String);

impl std::fmt::Debug for AgentToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentToken(…)")
    }
}

impl AgentToken {
    /// Checks a token: 16 to 512 visible ASCII characters (it travels in an HTTP header).
    pub fn new(token: String) -> Result<Self, &'static str> {
        let visible = token.bytes().all(|b| b.is_ascii_graphic());
        if token.len() < 16 || token.len() > MAX_LEN || !visible {
            return Err("give 16 to 512 visible ASCII characters");
        }
        Ok(Self(token))
    }

    /// The token, for the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether a registration may replace `known` with `given`: an agent registered without a
    /// token has nothing to prove; one registered with a token must present the same one.
    pub(crate) fn same(known: Option<&AgentToken>, given: Option<&AgentToken>) -> bool {
        match (known, given) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => constant_time_eq(a.0.as_bytes(), b.0.as_bytes()),
        }
    }
}

/// Equal bytes, in a time that depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_compared_and_never_printed() {
        assert!(AgentToken::new("short".into()).is_err());
        assert!(AgentToken::new("a token with spaces!".into()).is_err());
        let a = AgentToken::new("0123456789abcdef".into()).unwrap();
        let b = AgentToken::new("0123456789abcdeX".into()).unwrap();
        assert!(AgentToken::same(None, Some(&a)));
        assert!(AgentToken::same(None, None));
        assert!(AgentToken::same(Some(&a), Some(&a.clone())));
        assert!(!AgentToken::same(Some(&a), Some(&b)));
        assert!(!AgentToken::same(Some(&a), None));
        assert!(!format!("{a:?}").contains("0123"));
    }
}
