//! The dashboard: its page and assets (`/`, `/ui/app.js`, `/ui/style.css`, embedded in the
//! binary), and the small reads it polls so that it stays cheap at thousands of agents and
//! tasks: the history ring (`GET /api/v1/history?after=N`, only samples it has not seen), a page
//! of agents, and one agent or framework with its tasks (capped) and offers. All additions to
//! the HTTP API reference; `GET`s, so operators only when credentials are configured.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use protocol::{AgentId, FrameworkId};
use serde::Serialize;

use super::answers::{AgentPage, AgentView, FrameworkView};
use super::error::ApiError;
use super::extract::Id;
use super::operator::check_query;
use super::params::{AgentPageQuery, AgentPath, FrameworkPath, HistoryQuery};
use super::Route;
use crate::history::{History, Sample};
use crate::runtime::Coordinator;
use crate::state::StateError;

/// Agents per page when `limit` is not given.
const DEFAULT_AGENT_PAGE: usize = 50;

/// The largest agent page, and the most tasks one agent or framework view lists.
const MAX_ROWS: usize = 500;

/// The dashboard's routes.
pub fn routes() -> Vec<Route> {
    vec![
        Route::get("/", page),
        Route::get("/ui/app.js", script),
        Route::get("/ui/style.css", style),
        Route::get("/api/v1/history", history),
        Route::get("/api/v1/dashboard/agents", agent_page),
        Route::get("/api/v1/dashboard/agents/{id}", agent_view),
        Route::get("/api/v1/dashboard/frameworks/{id}", framework_view),
    ]
}

#[utoipa::path(get, path = "/", tag = "dashboard",
    summary = "The dashboard",
    responses((status = 200, description = "The dashboard", content_type = "text/html", body = String)))]
async fn page() -> Html<&'static str> {
    Html(include_str!("../ui/index.html"))
}

#[utoipa::path(get, path = "/ui/app.js", tag = "dashboard",
    summary = "The dashboard's script",
    responses((status = 200, description = "The dashboard's script", content_type = "text/javascript", body = String)))]
async fn script() -> Response {
    asset("text/javascript", include_str!("../ui/app.js"))
}

#[utoipa::path(get, path = "/ui/style.css", tag = "dashboard",
    summary = "The dashboard's style sheet",
    responses((status = 200, description = "The dashboard's style sheet", content_type = "text/css", body = String)))]
async fn style() -> Response {
    asset("text/css", include_str!("../ui/style.css"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// A query parameter that must be a non-negative integer, if given.
fn number(query: &HashMap<String, String>, name: &str) -> Result<Option<u64>, ApiError> {
    query
        .get(name)
        .map(|raw| {
            raw.parse::<u64>().map_err(|_| {
                ApiError::BadQuery(format!("{name}={raw:?} is not a non-negative integer"))
            })
        })
        .transpose()
}

type RawQuery = Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>;

/// `GET /api/v1/history`: the body.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HistoryPage<'a> {
    /// Milliseconds between samples.
    interval_ms: u64,
    /// The most samples kept.
    capacity: usize,
    /// The latest sample's number: below the `after` asked for, the coordinator restarted.
    latest: u64,
    /// The samples, oldest first.
    #[schema(value_type = Vec<super::answers::HistorySample>)]
    samples: Vec<&'a Sample>,
}

#[utoipa::path(get, path = "/api/v1/history", tag = "dashboard",
    summary = "Samples of the books, one a second, for the dashboard's charts",
    params(HistoryQuery),
    responses((status = 200, description = "The samples after `after`", body = HistoryPage)))]
async fn history(State(c): State<Coordinator>, query: RawQuery) -> Result<Response, ApiError> {
    let query = check_query(query, &["after"])?;
    let after = number(&query, "after")?.unwrap_or(0);
    let samples = c.history().after(after);
    let body = HistoryPage {
        interval_ms: u64::try_from(History::INTERVAL.as_millis()).unwrap_or(u64::MAX),
        capacity: History::CAPACITY,
        latest: c.history().latest(),
        samples: samples.iter().map(|s| &**s).collect(),
    };
    Ok(axum::Json(body).into_response())
}

#[utoipa::path(get, path = "/api/v1/dashboard/agents", tag = "dashboard",
    summary = "A page of agents",
    params(AgentPageQuery),
    responses((status = 200, description = "The page and the number of agents in all", body = AgentPage)))]
async fn agent_page(State(c): State<Coordinator>, query: RawQuery) -> Result<Response, ApiError> {
    let query = check_query(query, &["offset", "limit"])?;
    let offset = number(&query, "offset")?.unwrap_or(0);
    let limit = number(&query, "limit")?.unwrap_or(DEFAULT_AGENT_PAGE as u64);
    if limit == 0 || limit > MAX_ROWS as u64 {
        return Err(ApiError::BadQuery(format!(
            "limit={limit} is out of range: 1 to {MAX_ROWS}"
        )));
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(limit).unwrap_or(MAX_ROWS);
    let (agents, total) = c.read(|s| s.agent_page(offset, limit));
    Ok(axum::Json(serde_json::json!({
        "total": total,
        "offset": offset,
        "agents": agents,
    }))
    .into_response())
}

/// Writes `{"<head>":...,"task_count":n,"tasks":[...],"offers":[...]}` with the tasks already
/// JSON.
fn detail_json(
    head: (&str, serde_json::Value),
    tasks: &[Arc<str>],
    task_count: usize,
    offers: serde_json::Value,
) -> Response {
    let mut out = Vec::with_capacity(tasks.iter().map(|t| t.len() + 1).sum::<usize>() + 4096);
    out.extend_from_slice(b"{\"");
    out.extend_from_slice(head.0.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(head.1.to_string().as_bytes());
    out.extend_from_slice(format!(",\"task_count\":{task_count},\"tasks\":[").as_bytes());
    for (i, t) in tasks.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(b"],\"offers\":");
    out.extend_from_slice(offers.to_string().as_bytes());
    out.push(b'}');
    ([(header::CONTENT_TYPE, "application/json")], out).into_response()
}

#[utoipa::path(get, path = "/api/v1/dashboard/agents/{id}", tag = "dashboard",
    summary = "One agent with its tasks (capped) and offers",
    params(AgentPath),
    responses((status = 200, description = "The agent", body = AgentView)))]
async fn agent_view(
    State(c): State<Coordinator>,
    Id(id): Id<AgentId>,
) -> Result<Response, ApiError> {
    let (agent, tasks, count, offers) = c.read(|s| {
        let agent = s.agent(id).ok_or(StateError::UnknownAgent(id))?;
        let (tasks, count) = s.agent_tasks(id, MAX_ROWS);
        Ok::<_, ApiError>((agent, tasks, count, s.offers(None, Some(id))))
    })?;
    Ok(detail_json(
        (
            "agent",
            serde_json::to_value(agent).map_err(|_| ApiError::Internal)?,
        ),
        &tasks,
        count,
        serde_json::to_value(offers).map_err(|_| ApiError::Internal)?,
    ))
}

#[utoipa::path(get, path = "/api/v1/dashboard/frameworks/{id}", tag = "dashboard",
    summary = "One framework with its tasks (capped) and offers",
    params(FrameworkPath),
    responses((status = 200, description = "The framework", body = FrameworkView)))]
async fn framework_view(
    State(c): State<Coordinator>,
    Id(id): Id<FrameworkId>,
) -> Result<Response, ApiError> {
    let (framework, tasks, offers) = c.read(|s| {
        let framework = s
            .frameworks()
            .into_iter()
            .find(|f| f.framework_id == id)
            .ok_or(StateError::UnknownFramework(id))?;
        Ok::<_, ApiError>((framework, s.tasks_json(Some(id)), s.offers(Some(id), None)))
    })?;
    let count = tasks.len();
    Ok(detail_json(
        (
            "framework",
            serde_json::to_value(framework).map_err(|_| ApiError::Internal)?,
        ),
        tasks.get(..MAX_ROWS).unwrap_or(&tasks),
        count,
        serde_json::to_value(offers).map_err(|_| ApiError::Internal)?,
    ))
}
