//! The agent API's error answer, [`ApiError`]: a status and the contract's
//! `{"error": {"code", "message"}}` body. Below the API and the token check, which both answer
//! with it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::ErrorBody;

use crate::engine;

/// An error answer: a status and the contract's error body.
#[derive(Debug)]
pub(crate) struct ApiError {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// The body's stable `code`.
    pub(crate) code: &'static str,
    /// The body's `message`.
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub(crate) fn unknown_task(task_id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "task_not_found",
            format!("no task {task_id:?} on this agent; GET /api/v1/tasks lists them"),
        )
    }
}

impl From<engine::LaunchError> for ApiError {
    fn from(e: engine::LaunchError) -> Self {
        match e {
            engine::LaunchError::Duplicate(_) => {
                ApiError::new(StatusCode::CONFLICT, "task_exists", e.to_string())
            }
            engine::LaunchError::ShuttingDown => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                e.to_string(),
            ),
        }
    }
}

impl From<engine::UnknownTask> for ApiError {
    fn from(e: engine::UnknownTask) -> Self {
        match e {
            engine::UnknownTask::Unknown(id) => ApiError::unknown_task(id.as_str()),
            engine::UnknownTask::Ambiguous(_) => {
                ApiError::new(StatusCode::CONFLICT, "ambiguous_task", e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody::new(self.code, self.message))).into_response()
    }
}
