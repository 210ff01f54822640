//! The REST API under `/api/v1/jobs`: submit (`POST`, a TOML or JSON spec), list, get (with
//! every running attempt, retry and failure), one task, stop, scale and restart (a service),
//! delete, update (a service's new spec: scaled or rolled), the event stream of changes
//! (`/api/v1/jobs/events`, SSE), and the jobs page at `/`; [`router`] builds it
//! over the service's [`Shared`] state. Errors are `{"error": {"code", "message"}}`, with
//! `field` (and `line`) for a bad spec; a refused submission changes nothing.

use std::sync::Arc;

use axum::extract::{Extension, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;

use crate::book::{BookError, Input, JobSummary};
use crate::spec::{self, Format, SpecError, ANONYMOUS};
use crate::state::{ChangeError, Shared};
use framework_sdk::TaskId;

/// The largest spec accepted, in bytes.
pub const MAX_SPEC_BYTES: usize = 1 << 20;

/// An API error: a status, a stable code, a message, and for specs the field and line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    status: StatusCode,
    /// A stable snake_case code, e.g. `invalid_spec`.
    pub code: &'static str,
    /// What was wrong and how to fix it.
    pub message: String,
    /// The spec field at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Its line, for TOML.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            line: None,
        }
    }

    fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "jobs API");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the jobs service failed; see its log",
        )
    }
}

impl From<ChangeError> for ApiError {
    fn from(e: ChangeError) -> Self {
        match e {
            ChangeError::Book(e) => e.into(),
            ChangeError::Store(e) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_failed",
                format!("{e}; the change is lost unless it is made again after the restart"),
            ),
        }
    }
}

impl From<SpecError> for ApiError {
    fn from(e: SpecError) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_spec",
            message: e.to_string(),
            field: Some(e.field),
            line: e.line,
        }
    }
}

impl From<BookError> for ApiError {
    fn from(e: BookError) -> Self {
        let message = e.to_string();
        match e {
            BookError::Exists(_) => Self::new(StatusCode::CONFLICT, "job_exists", message),
            BookError::NotFound(_) => Self::new(StatusCode::NOT_FOUND, "job_not_found", message),
            BookError::NotService(_) => Self::new(StatusCode::CONFLICT, "not_a_service", message),
            BookError::NotOwner { .. } => Self::new(StatusCode::FORBIDDEN, "not_owner", message),
            BookError::UnknownDependency { field, .. }
            | BookError::Cycle { field, .. }
            | BookError::Unchangeable { field, .. } => Self {
                field: Some(field),
                ..Self::new(StatusCode::BAD_REQUEST, "invalid_spec", message)
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(serde_json::json!({ "error": self }))).into_response()
    }
}

/// The API over `shared`.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/v1/jobs", post(submit).get(list))
        .route("/api/v1/jobs/events", get(events))
        .route("/api/v1/jobs/{name}", get(show).put(update).delete(delete))
        .route("/api/v1/jobs/{name}/stop", post(stop))
        .route("/api/v1/jobs/{name}/scale", post(scale))
        .route("/api/v1/jobs/{name}/restart", post(restart))
        .route("/api/v1/jobs/{name}/tasks/{index}", get(task))
        .layer(middleware::from_fn_with_state(shared.clone(), authorize))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_SPEC_BYTES))
        // The page holds no data (it reads the API, with the token), so it needs none.
        .route("/", get(page))
        .with_state(shared)
}

/// The jobs page: every job with its progress, read from `GET /api/v1/jobs` every two seconds
/// (the coordinator's dashboard links here: it is the framework's `webui_url`).
pub const PAGE: &str = include_str!("page.html");

/// `GET /`: [`PAGE`].
async fn page() -> axum::response::Html<&'static str> {
    axum::response::Html(PAGE)
}

/// Who is calling: a user of the users file, else [`ANONYMOUS`]. Jobs it submits are its
/// own; it may change no other user's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

/// Checks the bearer token: a user's, when the service has a users file (then the request
/// runs as that user), else the one API token, when it has one (compared in constant time).
async fn authorize(
    State(shared): State<Arc<Shared>>,
    mut request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let caller = if let Some(users) = &shared.users {
        match users.who(given) {
            Some(user) => user.name.clone(),
            None => {
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "give your jobs API token: Authorization: Bearer TOKEN",
                )
                .into_response();
            }
        }
    } else {
        if let Some(want) = &shared.api_token {
            let same: bool =
                subtle::ConstantTimeEq::ct_eq(given.as_bytes(), want.as_bytes()).into();
            if !same {
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "give the jobs service's token: Authorization: Bearer TOKEN",
                )
                .into_response();
            }
        }
        ANONYMOUS.to_owned()
    };
    request.extensions_mut().insert(Caller(caller));
    next.run(request).await
}

/// Reads a spec in the format its `Content-Type` names, else by its first character.
fn read_spec(headers: &HeaderMap, body: &str) -> Result<spec::JobSpec, SpecError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let format = if content_type.contains("json") {
        Format::Json
    } else if content_type.contains("toml") {
        Format::Toml
    } else {
        Format::sniff(body)
    };
    spec::parse(body, format)
}

/// `POST /api/v1/jobs`: a spec, TOML or JSON (by `Content-Type`, else by its first character).
async fn submit(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: String,
) -> Result<(StatusCode, Json<JobSummary>), ApiError> {
    let mut spec = read_spec(&headers, &body)?;
    spec.owner = caller.0;
    let name = spec.name.clone();
    shared.change(Input::Submit(spec)).await?;
    let summary = shared
        .lock_book()
        .summary(&name)
        .ok_or_else(|| ApiError::internal("a submitted job is missing"))?;
    tracing::info!(job = %name, "job submitted");
    Ok((StatusCode::CREATED, Json(summary)))
}

/// `PUT /api/v1/jobs/{name}`: a service's new spec (TOML or JSON, as for a submission). A
/// changed `replicas` scales it; any change to what a replica runs starts a rolling update,
/// bounded by the new spec's `max_unavailable` and `max_surge`. Answers with the job.
async fn update(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Result<Response, ApiError> {
    let mut spec = read_spec(&headers, &body)?;
    spec.owner.clone_from(&caller.0);
    if spec.name != name {
        return Err(SpecError {
            field: "name".into(),
            message: format!(
                "the spec names {:?} but the request is for {name:?}; a job keeps its name",
                spec.name
            ),
            line: None,
        }
        .into());
    }
    let kill = shared.change(Input::Update(spec)).await?;
    tracing::info!(job = %name, "service updated");
    kill_and_show(&shared, &name, &kill).await
}

/// The answer to `GET /api/v1/jobs`.
#[derive(Debug, Serialize)]
struct JobList {
    jobs: Vec<JobSummary>,
}

async fn list(State(shared): State<Arc<Shared>>) -> Json<JobList> {
    Json(JobList {
        jobs: shared.lock_book().summaries(),
    })
}

/// `GET /api/v1/jobs/events`: Server-Sent Events, one per change to a job — `job` with its
/// summary, `deleted` with its name — from the moment of connecting; `lagged` when this
/// reader fell so far behind that events were dropped (list the jobs again).
async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl futures::Stream<Item = Result<Event, std::convert::Infallible>>> {
    use futures::StreamExt;
    use tokio_stream::wrappers::BroadcastStream;
    let stopped = shared.stop.clone().cancelled_owned();
    let stream = BroadcastStream::new(shared.subscribe()).map(|item| {
        Ok(match item {
            Ok(event) => Event::default()
                .event(event.name())
                .json_data(&event)
                .unwrap_or_else(|_| Event::default().event("error")),
            Err(tokio_stream::wrappers::errors::BroadcastStreamRecvError::Lagged(n)) => {
                Event::default().event("lagged").data(n.to_string())
            }
        })
    });
    Sse::new(stream.take_until(stopped)).keep_alive(KeepAlive::default())
}

/// Kills `kill`, then answers with job `name` as it is now.
async fn kill_and_show(shared: &Shared, name: &str, kill: &[TaskId]) -> Result<Response, ApiError> {
    shared.kill(kill).await;
    let view = shared
        .lock_book()
        .view(name)
        .ok_or_else(|| not_found(name))?;
    Ok(Json(view).into_response())
}

fn not_found(name: &str) -> ApiError {
    BookError::NotFound(name.to_owned()).into()
}

async fn show(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let view = shared
        .lock_book()
        .view(&name)
        .ok_or_else(|| not_found(&name))?;
    Ok(Json(view).into_response())
}

async fn task(
    State(shared): State<Arc<Shared>>,
    Path((name, index)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let index: u32 = index.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_index",
            format!("{index:?} is not a task index"),
        )
    })?;
    let view = shared.lock_book().task(&name, index).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "task_not_found",
            format!("job {name:?} has no task {index}"),
        )
    })?;
    Ok(Json(view).into_response())
}

/// `POST /api/v1/jobs/{name}/stop`: nothing more is launched, running tasks are killed.
async fn stop(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let kill = shared
        .change(Input::Stop {
            name: name.clone(),
            by: caller.0,
        })
        .await?;
    kill_and_show(&shared, &name, &kill).await
}

/// The body of `POST /api/v1/jobs/{name}/scale`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ScaleRequest {
    replicas: i64,
}

/// `POST /api/v1/jobs/{name}/scale` `{"replicas": N}`: a service's new replica count.
async fn scale(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: String,
) -> Result<Response, ApiError> {
    let request: ScaleRequest = serde_json::from_str(&body).map_err(|e| ApiError {
        field: Some("replicas".into()),
        ..ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("expected {{\"replicas\": N}}: {e}"),
        )
    })?;
    spec::check_count("replicas", request.replicas)?;
    let replicas = request.replicas as u32;
    let input = Input::Scale {
        name: name.clone(),
        replicas,
        by: caller.0,
    };
    let kill = shared.change(input).await?;
    kill_and_show(&shared, &name, &kill).await
}

/// `POST /api/v1/jobs/{name}/restart`: a service's replicas are killed and start again at
/// once.
async fn restart(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let kill = shared
        .change(Input::Restart {
            name: name.clone(),
            by: caller.0,
        })
        .await?;
    kill_and_show(&shared, &name, &kill).await
}

/// `DELETE /api/v1/jobs/{name}`: forgets the job (killing what still runs).
async fn delete(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let kill = shared
        .change(Input::Delete {
            name: name.clone(),
            by: caller.0,
        })
        .await?;
    shared.kill(&kill).await;
    Ok(Json(serde_json::json!({ "deleted": name })).into_response())
}
