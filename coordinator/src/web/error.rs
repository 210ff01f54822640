//! [`ApiError`]: every way a request fails, mapped to a status and the API's error body
//! `{"error": {"code", "message"}}`. The registry's refusals ([`StateError`]) get their status
//! and code here ([`state_status_and_code`]), so the books know nothing of HTTP. Internal
//! errors are logged, never shown in detail.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::ErrorBody;

use crate::auth::Denial;
use crate::state::StateError;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The registry refused the operation (403, 404, 409, 422 or 400, see
    /// [`state_status_and_code`]).
    #[error(transparent)]
    State(#[from] StateError),
    /// A field has an invalid value (well-formed JSON, impossible value).
    #[error("invalid {field}: {reason}")]
    InvalidField {
        /// The field.
        field: &'static str,
        /// What is allowed.
        reason: String,
    },
    /// A task is malformed in a way its type cannot rule out.
    #[error("task {task}: {reason}")]
    InvalidTask {
        /// The task.
        task: protocol::TaskId,
        /// What is wrong.
        reason: String,
    },
    /// The change was made but could not be written to the durable registry.
    #[error("the change could not be written to the registry; see the coordinator's log")]
    Unavailable,
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
    #[error("no such endpoint: {0}; the endpoints are in docs/src/reference/api.md")]
    NoRoute(String),
    /// The route exists, the method does not.
    #[error("method not allowed on this endpoint; see docs/src/reference/api.md")]
    MethodNotAllowed,
    /// The client's request rate is over `rate_limit_per_s` (429 with `Retry-After`).
    #[error(
        "too many requests: retry after {retry_after_s} s (the coordinator's rate_limit_per_s)"
    )]
    RateLimited {
        /// Seconds until a request will be accepted.
        retry_after_s: u64,
    },
    /// A bug or an unexpected failure; details are logged.
    #[error("internal error; see the coordinator's log")]
    Internal,
    /// The coordinator keeps no durable registry (its books are in memory only).
    #[error("this coordinator keeps its books in memory only (--in-memory): it has no registry")]
    NoRegistry,
    /// No or bad credentials (401, with `WWW-Authenticate: Bearer`).
    #[error("{1}")]
    Unauthenticated(Denial, String),
    /// The principal may not do this (403).
    #[error("{1}")]
    Forbidden(Denial, String),
    /// One entry of a batch (`{field}[{index}]`) was refused: the batch changed nothing.
    #[error("{field}[{index}]: {error}")]
    InBatch {
        /// The batch's list, e.g. `accepts`.
        field: &'static str,
        /// The entry's position in it, from 0.
        index: usize,
        /// Why that entry was refused.
        error: Box<ApiError>,
    },
    /// A request body that is not `Content-Type: application/json` (415).
    #[error("send request bodies as JSON with Content-Type: application/json")]
    UnsupportedMediaType,
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::State(e) => state_status_and_code(e),
            ApiError::InvalidField { .. } => (StatusCode::BAD_REQUEST, "invalid_field"),
            ApiError::InvalidTask { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_task"),
            ApiError::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "registry_unavailable"),
            ApiError::BadBody(_) => (StatusCode::BAD_REQUEST, "invalid_body"),
            ApiError::BodyTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            ApiError::BadPath(_) => (StatusCode::BAD_REQUEST, "invalid_path"),
            ApiError::BadQuery(_) => (StatusCode::BAD_REQUEST, "invalid_query"),
            ApiError::NoRoute(_) => (StatusCode::NOT_FOUND, "no_such_endpoint"),
            ApiError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            ApiError::NoRegistry => (StatusCode::CONFLICT, "no_registry"),
            ApiError::Unauthenticated(..) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(..) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::InBatch { error, .. } => error.status_and_code(),
            ApiError::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
        }
    }

    /// The HTTP status this error answers with.
    pub fn status(&self) -> StatusCode {
        self.status_and_code().0
    }

    /// The code and message of the error body, for answers that carry several outcomes.
    pub fn detail(&self) -> protocol::ErrorDetail {
        protocol::ErrorDetail {
            code: self.status_and_code().1.to_owned(),
            message: self.to_string(),
        }
    }
}

/// The HTTP status and the stable snake_case code (`docs/src/reference/errors.md`) for each refusal
/// of the registry.
pub fn state_status_and_code(e: &StateError) -> (StatusCode, &'static str) {
    use StateError::*;
    match e {
        UnknownFramework(_) => (StatusCode::NOT_FOUND, "framework_not_found"),
        UnknownAgent(_) => (StatusCode::NOT_FOUND, "agent_not_found"),
        UnknownOffer(_) => (StatusCode::NOT_FOUND, "offer_not_found"),
        UnknownTask(_) => (StatusCode::NOT_FOUND, "task_not_found"),
        TaskNotYetKnown { .. } => (StatusCode::CONFLICT, "task_not_yet_known"),
        TaskTerminal { .. } => (StatusCode::CONFLICT, "task_terminal"),
        UnknownUpdate { .. } => (StatusCode::NOT_FOUND, "update_not_found"),
        OfferNotYours(_) => (StatusCode::FORBIDDEN, "offer_not_yours"),
        AgentTokenMismatch(_) => (StatusCode::FORBIDDEN, "agent_token_mismatch"),
        OfferGone { .. } => (StatusCode::CONFLICT, "offer_not_outstanding"),
        TaskExists(_) => (StatusCode::CONFLICT, "task_exists"),
        GangExists(_) => (StatusCode::CONFLICT, "gang_exists"),
        FrameworkRemoved(_) => (StatusCode::CONFLICT, "framework_removed"),
        ReservedRole => (StatusCode::BAD_REQUEST, "invalid_field"),
        InvalidQuota { .. } => (StatusCode::BAD_REQUEST, "invalid_field"),
        InvalidReservation { .. } => (StatusCode::BAD_REQUEST, "invalid_field"),
        TaskSpansPools(_) => (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_resources"),
        TooManyResourceKinds { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, "too_many_resource_kinds")
        }
        TooManyFrameworks(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_frameworks"),
        TooManyRoles(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_roles"),
        TooManyTaskIds { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "too_many_task_ids"),
        NoOffers => (StatusCode::UNPROCESSABLE_ENTITY, "no_offers"),
        DuplicateOffer(_) => (StatusCode::UNPROCESSABLE_ENTITY, "duplicate_offer"),
        OffersOnSeveralAgents(..) => (StatusCode::UNPROCESSABLE_ENTITY, "offers_on_several_agents"),
        TaskAgentMismatch { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "task_agent_mismatch"),
        IsolationUnavailable { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "isolation_unavailable"),
        DuplicateTaskInRequest(_) => (StatusCode::UNPROCESSABLE_ENTITY, "duplicate_task"),
        InsufficientResources { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_resources")
        }
        AgentMismatch { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "agent_mismatch"),
    }
}

impl From<crate::runtime::RegistryWriteFailed> for ApiError {
    fn from(_: crate::runtime::RegistryWriteFailed) -> Self {
        ApiError::Unavailable
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let mut response = (status, Json(ErrorBody::new(code, self.to_string()))).into_response();
        if let ApiError::Unauthenticated(denial, _) | ApiError::Forbidden(denial, _) = &self {
            // Read by the auth middleware, which logs and counts every refusal.
            response.extensions_mut().insert(*denial);
        }
        if let ApiError::Unauthenticated(..) = &self {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        if let ApiError::RateLimited { retry_after_s } = self {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(retry_after_s),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

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
            (ApiError::State(StateError::ReservedRole), 400),
            (
                ApiError::InvalidTask {
                    task: "t".parse().unwrap(),
                    reason: "x".into(),
                },
                422,
            ),
            (ApiError::Unavailable, 503),
            (ApiError::Unauthenticated(Denial::Missing, "x".into()), 401),
            (ApiError::Forbidden(Denial::NotOwner, "x".into()), 403),
            (ApiError::UnsupportedMediaType, 415),
            (
                ApiError::State(StateError::TooManyResourceKinds { known: 1, max: 1 }),
                422,
            ),
            (ApiError::State(StateError::TooManyFrameworks(1)), 429),
            (
                ApiError::State(StateError::TooManyTaskIds { given: 2, max: 1 }),
                422,
            ),
        ];
        for (err, status) in cases {
            assert_eq!(err.status_and_code().0.as_u16(), status, "{err}");
        }
    }
}
