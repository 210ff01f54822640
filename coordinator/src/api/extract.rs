//! Extractors that answer bad input with the API's error body instead of axum's plain-text
//! rejections: [`Body`] (JSON, size-limited, empty = `{}`), [`Id`] (a path id), [`TaskPath`]
//! (a framework's id and a task's in the path).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON request body. The body limit answers 413; JSON that does not parse or has the wrong
/// shape answers 400 naming the problem. An empty body reads as `{}`, so bodiless POSTs work
/// for requests whose fields are all optional.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::BodyTooLarge
            } else {
                ApiError::BadBody(e.body_text())
            }
        })?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        parse(text).map(Body).map_err(ApiError::BadBody)
    }
}

/// Parses a JSON body; the error names the field at fault (`pending_tasks: invalid value…`)
/// where there is one. A body that parses pays nothing for that: only a refused one is parsed
/// again, tracking the path.
fn parse<T: DeserializeOwned>(text: &[u8]) -> Result<T, String> {
    if let Ok(value) = serde_json::from_slice(text) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        }
    })?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::parse;
    use protocol::messages::ReviveRequest;

    #[test]
    fn a_bad_body_names_the_field_at_fault() {
        let e = parse::<ReviveRequest>(br#"{"pending_tasks": -1}"#).unwrap_err();
        assert!(e.starts_with("pending_tasks: invalid value"), "{e}");
        let e = parse::<ReviveRequest>(br#"{"demand": {"cpus": "x"}}"#).unwrap_err();
        assert!(e.starts_with("demand"), "{e}");
        let e = parse::<ReviveRequest>(br#"{"nope": 1}"#).unwrap_err();
        assert!(e.contains("unknown field `nope`"), "{e}");
        let e = parse::<ReviveRequest>(br#"{} {}"#).unwrap_err();
        assert!(e.contains("trailing characters"), "{e}");
        let ok = parse::<ReviveRequest>(br#"{"pending_tasks": 3}"#).unwrap();
        assert_eq!(ok.pending_tasks, Some(3));
    }
}

/// Ids that appear in paths.
pub trait PathId: std::str::FromStr {
    /// What the id is, for the error message.
    const WHAT: &'static str;
}

impl PathId for protocol::FrameworkId {
    const WHAT: &'static str = "framework id (a UUID)";
}

impl PathId for protocol::AgentId {
    const WHAT: &'static str = "agent id (a UUID)";
}

/// The route's single path parameter, parsed as an id (400 if malformed).
#[derive(Debug)]
pub struct Id<T>(pub T);

impl<S: Send + Sync, T: PathId> FromRequestParts<S> for Id<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadPath(e.body_text()))?;
        raw.parse::<T>()
            .map(Id)
            .map_err(|_| ApiError::BadPath(format!("{raw:?} is not a valid {}", T::WHAT)))
    }
}

/// The path parameters of a route naming one task of one framework (`{id}` and `{task_id}`),
/// parsed: a malformed one is 400 naming it.
#[derive(Debug)]
pub struct TaskPath(pub protocol::FrameworkId, pub protocol::TaskId);

impl<S: Send + Sync> FromRequestParts<S> for TaskPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path((framework, task)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadPath(e.body_text()))?;
        let framework = framework.parse().map_err(|_| {
            ApiError::BadPath(format!("{framework:?} is not a framework id (a UUID)"))
        })?;
        let task = protocol::TaskId::new(task).map_err(|e| ApiError::BadPath(e.to_string()))?;
        Ok(TaskPath(framework, task))
    }
}
