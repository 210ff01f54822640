//! [`ApiError`]: every way a request fails, mapped to a status and the API's error body
//! `{"error": {"code", "message"}}`. Internal errors are logged, never shown in detail.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::ErrorBody;

use crate::state::StateError;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The registry refused the operation (its own status: 403, 404, 409, 422, 400).
    #[error(transparent)]
    State(#[from] StateError),
    /// The body is not JSON of the expected shape.
    #[error("invalid request body: {0}")]
    BadBody(String),
    /// The body is larger than the limit.
    #[error("request body is too large (the limit is the coordinator's max_body_bytes)")]
    BodyTooLarge,
    /// A path parameter is malformed.
    #[error("{0}")]
    BadPath(String),
    /// A query parameter is malformed.
    #[error("invalid query: {0}")]
    BadQuery(String),
    /// No such route.
    #[error("no such endpoint: {0}; see API.md for the endpoints")]
    NoRoute(String),
    /// The route exists, the method does not.
    #[error("method not allowed on this endpoint; see API.md")]
    MethodNotAllowed,
    /// A bug or an unexpected failure; details are logged.
    #[error("internal error; see the coordinator's log")]
    Internal,
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::State(e) => (
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST),
                e.code(),
            ),
            ApiError::BadBody(_) => (StatusCode::BAD_REQUEST, "invalid_body"),
            ApiError::BodyTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            ApiError::BadPath(_) => (StatusCode::BAD_REQUEST, "invalid_path"),
            ApiError::BadQuery(_) => (StatusCode::BAD_REQUEST, "invalid_query"),
            ApiError::NoRoute(_) => (StatusCode::NOT_FOUND, "no_such_endpoint"),
            ApiError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        (status, Json(ErrorBody::new(code, self.to_string()))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_contract() {
        let offer = protocol::OfferId::new();
        let cases = [
            (ApiError::BadBody("x".into()), 400),
            (ApiError::BodyTooLarge, 413),
            (ApiError::State(StateError::UnknownOffer(offer)), 404),
            (ApiError::State(StateError::OfferNotYours(offer)), 403),
            (
                ApiError::State(StateError::OfferGone {
                    offer,
                    how: "expired",
                }),
                409,
            ),
            (ApiError::State(StateError::NoOffers), 422),
        ];
        for (err, status) in cases {
            assert_eq!(err.status_and_code().0.as_u16(), status, "{err}");
        }
    }
}
