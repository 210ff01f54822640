//! The error body every endpoint answers with: `{"error": {"code", "message"}}`.

use serde::{Deserialize, Serialize};

/// The error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// A stable snake_case code, e.g. `offer_not_found`.
    pub code: String,
    /// What was wrong and how to fix it.
    pub message: String,
}

impl ErrorBody {
    /// Builds an error body.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            error: ErrorDetail {
                code: code.into(),
                message: message.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_matches_the_contract() {
        let body = ErrorBody::new("offer_not_found", "no such offer");
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            serde_json::json!({"error": {"code": "offer_not_found", "message": "no such offer"}})
        );
    }
}
