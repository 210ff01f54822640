//! A task's output for operators: `GET /api/v1/frameworks/{id}/tasks/{task_id}/output`
//! (`?file=stdout|stderr&offset=&limit=`), read from the task's agent by the coordinator with
//! the agent's token (`crate::runtime::task_output`), since agents answer only the coordinator.
//! An operator route (the route policy's default for `GET`).
//!
//! Answers `200` with the bytes as `text/plain`, `404` for an unknown framework or task (or
//! output its agent no longer has), `400` for a bad parameter, `502 agent_unreachable` when
//! the agent cannot be reached or fails the read.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use protocol::ErrorBody;

use super::error::ApiError;
use super::extract::TaskPath;
use super::params::{OutputPath, OutputQuery};
use super::Route;
use crate::runtime::task_output::{OutputFetchError, OutputFile, OutputRead, MAX_OUTPUT_BYTES};
use crate::runtime::Coordinator;

/// The output route.
pub fn routes() -> Vec<Route> {
    vec![Route::get(
        "/api/v1/frameworks/{id}/tasks/{task_id}/output",
        output,
    )]
}

type RawQuery = Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>;

#[utoipa::path(get, path = "/api/v1/frameworks/{id}/tasks/{task_id}/output", tag = "operator",
    summary = "A task's stdout or stderr, read from its agent",
    params(OutputPath, OutputQuery),
    responses((status = 200, description = "The bytes read", content_type = "text/plain", body = String)))]
async fn output(
    State(c): State<Coordinator>,
    TaskPath(framework, task): TaskPath,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let read = parse_query(query)?;
    match c.task_output(framework, &task, read).await {
        Ok(bytes) => {
            Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response())
        }
        Err(OutputFetchError::Unknown(e)) => Err(ApiError::State(e)),
        Err(e @ OutputFetchError::NotOnAgent { .. }) => Ok(error(
            StatusCode::NOT_FOUND,
            "output_not_found",
            e.to_string(),
        )),
        Err(OutputFetchError::Agent(message)) => {
            tracing::warn!(framework = %framework, task = %task, %message, "output read failed");
            Ok(error(StatusCode::BAD_GATEWAY, "agent_unreachable", message))
        }
    }
}

fn error(status: StatusCode, code: &str, message: String) -> Response {
    (status, Json(ErrorBody::new(code, message))).into_response()
}

/// `file` (default `stdout`), `offset` (default: the end), `limit` (default and cap 1 MiB).
fn parse_query(query: RawQuery) -> Result<OutputRead, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    const ALLOWED: [&str; 3] = ["file", "offset", "limit"];
    if let Some(unknown) = query.keys().find(|k| !ALLOWED.contains(&k.as_str())) {
        return Err(ApiError::BadQuery(format!(
            "unknown parameter {unknown:?}; allowed: {}",
            ALLOWED.join(", ")
        )));
    }
    let file = match query.get("file").map(String::as_str) {
        None | Some("stdout") => OutputFile::Stdout,
        Some("stderr") => OutputFile::Stderr,
        Some(other) => {
            return Err(ApiError::BadQuery(format!(
                "file={other:?}: expected stdout or stderr"
            )))
        }
    };
    let number = |name: &str| {
        query
            .get(name)
            .map(|raw| {
                raw.parse::<u64>().map_err(|_| {
                    ApiError::BadQuery(format!("{name}={raw:?} is not a non-negative integer"))
                })
            })
            .transpose()
    };
    Ok(OutputRead {
        file,
        offset: number("offset")?,
        limit: number("limit")?
            .unwrap_or(MAX_OUTPUT_BYTES)
            .min(MAX_OUTPUT_BYTES),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::http::Uri;

    fn parse(q: &str) -> Result<OutputRead, ApiError> {
        let uri: Uri = format!("/x?{q}").parse().unwrap();
        parse_query(Query::try_from_uri(&uri))
    }

    #[test]
    fn queries_are_checked_and_bounded() {
        let read = parse("").unwrap();
        assert_eq!(read.file, OutputFile::Stdout);
        assert_eq!((read.offset, read.limit), (None, MAX_OUTPUT_BYTES));
        let read = parse("file=stderr&offset=5&limit=99999999").unwrap();
        assert_eq!(read.file, OutputFile::Stderr);
        assert_eq!((read.offset, read.limit), (Some(5), MAX_OUTPUT_BYTES));
        for (bad, needle) in [
            ("file=journal", "stdout or stderr"),
            ("offset=-1", "offset"),
            ("limit=x", "limit"),
            ("tail=1", "unknown parameter"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
    }
}
