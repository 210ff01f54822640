//! The agent's API token: only its holder (the coordinator, which received it in the agent's
//! registration) may launch, kill or read output. The token is given (`--api-token`,
//! `PARLEY_AGENT_API_TOKEN`) or generated at first start and kept in `WORK_DIR/api_token`
//! (mode 0600), so a restarted agent registers again with the same one.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use axum::http::{header, HeaderMap, StatusCode};

use crate::api_error::ApiError;
use crate::config::ConfigError;

/// The file in the work dir holding the generated token.
pub const API_TOKEN_FILE: &str = "api_token";

/// A fresh random token: 32 random bytes, hex.
pub fn generate() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks a token's form: 16 to 512 visible ASCII characters (the coordinator's rule).
pub fn check_form(token: &str) -> Result<(), ConfigError> {
    if (16..=512).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(ConfigError::BadApiToken)
    }
}

/// The given token, else the one kept in `work_dir`, else a new one, kept there (0600).
pub fn load_or_create(given: Option<&str>, work_dir: &Path) -> Result<String, ConfigError> {
    if let Some(token) = given {
        check_form(token)?;
        return Ok(token.to_string());
    }
    let path = work_dir.join(API_TOKEN_FILE);
    let fail = |e: std::io::Error| ConfigError::WorkDir {
        path: path.clone(),
        reason: e.to_string(),
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let token = text.trim().to_string();
            check_form(&token)?;
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = generate();
            let tmp = work_dir.join(format!("{API_TOKEN_FILE}.tmp"));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(fail)?;
            f.write_all(token.as_bytes()).map_err(fail)?;
            f.sync_all().map_err(fail)?;
            std::fs::rename(&tmp, &path).map_err(fail)?;
            Ok(token)
        }
        Err(e) => Err(fail(e)),
    }
}

/// `401` unless the request carries `Authorization: Bearer TOKEN` (compared in constant time).
pub(crate) fn require(headers: &HeaderMap, token: &str) -> Result<(), ApiError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(given) if constant_time_eq(given.trim().as_bytes(), token.as_bytes()) => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this agent takes launches, kills and output reads only from its coordinator \
             (Authorization: Bearer with the agent's api_token)",
        )),
    }
}

/// Equal bytes, in a time that depends on the lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_token_is_generated_once_kept_private_and_required() {
        let dir = tempfile::tempdir().unwrap();
        let token = load_or_create(None, dir.path()).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(load_or_create(None, dir.path()).unwrap(), token);
        let mode = std::fs::metadata(dir.path().join(API_TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            load_or_create(Some("given-token-0123456"), dir.path()).unwrap(),
            "given-token-0123456"
        );
        assert!(load_or_create(Some("short"), dir.path()).is_err());

        let mut headers = HeaderMap::new();
        assert!(require(&headers, &token).is_err());
        headers.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert!(require(&headers, &token).is_err());
        headers.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        assert!(require(&headers, &token).is_ok());
    }
}
