//! The Mesos v1 scheduler HTTP API (`POST /api/v1/scheduler`) and `GET /version`, served beside
//! Parley's own API on the same port, over the same books: each Mesos call becomes the
//! registry operation the native API would run (so a Mesos framework takes part in H-DRF, the
//! offer event stream, the dashboard and `explain` exactly like a native one), and each
//! [`protocol::FrameworkEvent`] becomes a Mesos event on a chunked RecordIO stream. What
//! `pymesos` 0.3.15 sends and expects is in `docs/src/internals/mesos-v1-api.md`;
//! `docs/src/frameworks/mesos.md` has the mapping table.
//!
//! - [`types`]: the JSON shapes of the calls read (unknown fields ignored).
//! - [`convert`]: ids, roles, resources, attributes, task states, status uuids, commands and
//!   events, both ways.
//! - [`health`]: `TaskInfo.health_check` (`COMMAND`, `HTTP`) as a Parley health check.
//! - [`recordio`]: the stream framing (and a decoder for clients and tests).
//! - [`stream`]: SUBSCRIBE: registration, the `Mesos-Stream-Id`, the event stream with
//!   heartbeats; [`Sessions`], the live streams by framework.
//! - [`calls`]: every other call, checked against the framework's stream id.
//!
//! Content types and credentials are checked by the API's middleware in front of every route
//! (`crate::web::auth`): a body that is not `application/json` (e.g. protobuf) is 415; with a
//! credentials file the call needs the framework principal's `Authorization: Bearer` token
//! (or `Basic` with the principal's name and token, which is what pymesos' `principal` and
//! `secret` send).

pub mod calls;
pub mod convert;
pub mod health;
pub mod recordio;
pub mod stream;
pub mod types;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use protocol::ErrorBody;
use serde_json::json;

use crate::runtime::Coordinator;
use crate::web::auth::Caller;
use crate::web::error::ApiError;
use crate::web::Route;
pub use stream::Sessions;

/// The Mesos version `GET /version` reports: dotted integers only (pymesos parses it).
pub const MESOS_VERSION: &str = "1.11.0";

/// The state of the Mesos routes: the coordinator and the live Mesos streams.
#[derive(Clone)]
pub struct Mesos {
    /// The books.
    pub coordinator: Coordinator,
    /// The live streams by framework.
    pub sessions: Sessions,
}

/// `POST /api/v1/scheduler` and `GET /version`, for one coordinator: routes of the coordinator's table
/// (`crate::router::routes`), with the Mesos streams as their own state.
pub fn routes(coordinator: Coordinator) -> Vec<Route> {
    let mesos = Mesos {
        coordinator,
        sessions: Sessions::default(),
    };
    vec![
        Route::with(
            Method::POST,
            "/api/v1/scheduler",
            post(scheduler).with_state(mesos.clone()),
        ),
        Route::with(Method::GET, "/version", get(version).with_state(mesos)),
    ]
}

/// Why a Mesos call is refused: a status the Mesos API prescribes (400 for a stream id
/// missing or wrong, 403 for no live stream), or the API's own error.
#[derive(Debug)]
pub enum Refusal {
    /// A status, an error code and a message, in the API's error body.
    Mesos(StatusCode, &'static str, String),
    /// The API's error (validation, the books' refusals, ownership).
    Api(ApiError),
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        Refusal::Api(e)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Mesos(status, code, message) => {
                (status, Json(ErrorBody::new(code, message))).into_response()
            }
            Refusal::Api(e) => e.into_response(),
        }
    }
}

/// The Mesos API's operations for the OpenAPI document (`crate::router::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(scheduler, version))]
pub struct MesosDoc;

/// `GET /version` (the Mesos API's).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct MesosVersion {
    /// The Mesos version spoken, dotted integers.
    pub version: String,
    /// Always `parley`.
    pub build_user: String,
    /// The coordinator's version.
    pub parley_version: String,
}

#[utoipa::path(get, path = "/version", tag = "mesos",
    summary = "The Mesos version this API speaks",
    responses((status = 200, description = "`version` (Mesos), `build_user` and `parley_version`", body = MesosVersion)))]
async fn version() -> Json<serde_json::Value> {
    Json(json!({
        "version": MESOS_VERSION,
        "build_user": "parley",
        "parley_version": env!("CARGO_PKG_VERSION"),
    }))
}

#[utoipa::path(post, path = "/api/v1/scheduler", tag = "mesos",
    summary = "The Mesos v1 scheduler API",
    description = "A Mesos v1 scheduler `Call` as JSON. `SUBSCRIBE` answers 200 with a RecordIO stream of Mesos events (`Mesos-Stream-Id` header); the other calls answer 202 with no body. See the book's Mesos page for the calls supported.",
    request_body(content = Object, description = "A Mesos scheduler call", content_type = "application/json"),
    responses(
        (status = 200, description = "SUBSCRIBE: the event stream", content_type = "application/recordio", body = String),
        (status = 202, description = "Any other call: accepted"),
    ))]
async fn scheduler(
    State(m): State<Mesos>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let call: types::Call = match serde_json::from_slice(&body) {
        Ok(call) => call,
        Err(e) => {
            return ApiError::BadBody(format!("not a Mesos scheduler call: {e}")).into_response()
        }
    };
    if call.kind == "SUBSCRIBE" {
        match stream::subscribe(&m, &caller, call).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        }
    } else {
        calls::call(&m, &caller, &headers, call).await
    }
}
