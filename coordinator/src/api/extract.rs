//! Extractors that answer bad input with the API's error body instead of axum's plain-text
//! rejections: [`Body`] (JSON, size-limited, empty = `{}`), [`Id`] (a path id).

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
        serde_json::from_slice(text)
            .map(Body)
            .map_err(|e| ApiError::BadBody(e.to_string()))
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
