//! `agents`, `frameworks`, `tasks` and `offers` (without `--watch`): one GET each, shown as a
//! table, or as the API's JSON with `--json`.

use std::io::Write;

use protocol::messages::{AgentList, FrameworkList, OfferList, TaskList};

use super::{print_raw, resolve_agent, resolve_framework};
use crate::client::Api;
use crate::error::CtlError;
use crate::format;
use crate::table::Table;

/// `parleyctl agents`.
pub async fn agents(api: &Api, json: bool, out: &mut dyn Write) -> Result<(), CtlError> {
    let (raw, list): (_, AgentList) = api.get("/api/v1/agents").await?;
    if json {
        return print_raw(out, &raw);
    }
    let mut t = Table::new(&[
        "AGENT",
        "HOSTNAME",
        "STATE",
        "RESOURCES",
        "USED",
        "OFFERED",
        "RESERVED",
    ]);
    for a in &list.agents {
        t.row(vec![
            a.agent_id.to_string(),
            a.hostname.clone(),
            a.state.clone(),
            format::resources(&a.resources),
            format::resources(&a.used),
            format::resources(&a.offered),
            format::reservations(&a.reservations),
        ]);
    }
    Ok(t.write(out)?)
}

/// `parleyctl frameworks`.
pub async fn frameworks(api: &Api, json: bool, out: &mut dyn Write) -> Result<(), CtlError> {
    let (raw, list): (_, FrameworkList) = api.get("/api/v1/frameworks").await?;
    if json {
        return print_raw(out, &raw);
    }
    let mut t = Table::new(&[
        "FRAMEWORK",
        "NAME",
        "ROLE",
        "STATE",
        "SHARE",
        "TASKS",
        "USED",
        "OFFERED",
    ]);
    for f in &list.frameworks {
        let state = match (f.suppressed, f.pending_tasks) {
            (true, _) => format!("{} (suppressed)", f.state),
            (false, Some(n)) => format!("{} (wants {n})", f.state),
            (false, None) => f.state.clone(),
        };
        t.row(vec![
            f.framework_id.to_string(),
            f.name.clone(),
            f.role.to_string(),
            state,
            format::share(f.dominant_share),
            f.active_tasks.to_string(),
            format::resources(&f.used),
            format::resources(&f.offered),
        ]);
    }
    Ok(t.write(out)?)
}

/// The filters of `parleyctl tasks`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskFilter<'a> {
    /// `--framework`: its id or unique name.
    pub framework: Option<&'a str>,
    /// `--agent`: its id or unique hostname.
    pub agent: Option<&'a str>,
    /// `--state`: one of [`crate::cli::TASK_STATES`].
    pub state: Option<&'a str>,
}

/// `parleyctl tasks [--framework F] [--agent A] [--state S]`: the framework and state filters
/// go to the API (`?framework_id=`, `?state=`), the agent filter is applied here; `--json`
/// prints the API's answer as is (the list filtered to the agent's tasks with `--agent`).
pub async fn tasks(
    api: &Api,
    filter: TaskFilter<'_>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let mut params = Vec::new();
    if let Some(f) = filter.framework {
        params.push(format!("framework_id={}", resolve_framework(api, f).await?));
    }
    let agent = match filter.agent {
        Some(a) => Some(resolve_agent(api, a).await?),
        None => None,
    };
    if let Some(state) = filter.state {
        // Checked by the command line against the known states: no escaping needed.
        params.push(format!("state={state}"));
    }
    let path = if params.is_empty() {
        "/api/v1/tasks".to_owned()
    } else {
        format!("/api/v1/tasks?{}", params.join("&"))
    };
    let (raw, mut list): (_, TaskList) = api.get(&path).await?;
    if let Some(agent) = agent {
        list.tasks.retain(|t| t.agent_id == agent);
        if list.tasks.is_empty() {
            // No task there, or no such agent: an id is taken as given, so ask.
            let (_, agents): (_, AgentList) = api.get("/api/v1/agents").await?;
            if !agents.agents.iter().any(|a| a.agent_id == agent) {
                return Err(CtlError::NotFound(format!(
                    "--agent: no agent has the id {agent}; see `parleyctl agents`"
                )));
            }
        }
    }
    if json {
        return match agent {
            None => print_raw(out, &raw),
            Some(_) => {
                let text = serde_json::to_string(&list)
                    .map_err(|e| CtlError::Protocol(format!("GET {path}: {e}")))?;
                print_raw(out, &text)
            }
        };
    }
    let mut t = Table::new(&[
        "TASK",
        "FRAMEWORK",
        "AGENT",
        "STATE",
        "RESOURCES",
        "EXIT",
        "MESSAGE",
    ]);
    for task in &list.tasks {
        t.row(vec![
            task.task_id.to_string(),
            task.framework_id.to_string(),
            task.agent_id.to_string(),
            task.state.to_string(),
            format::resources(&task.resources),
            task.exit_code.map(|c| c.to_string()).unwrap_or_default(),
            task.message.clone().unwrap_or_default(),
        ]);
    }
    Ok(t.write(out)?)
}

/// `parleyctl offers`: the outstanding offers.
pub async fn offers(api: &Api, json: bool, out: &mut dyn Write) -> Result<(), CtlError> {
    let (raw, list): (_, OfferList) = api.get("/api/v1/offers").await?;
    if json {
        return print_raw(out, &raw);
    }
    let now = chrono::Utc::now();
    let mut t = Table::new(&[
        "OFFER",
        "FRAMEWORK",
        "AGENT",
        "HOSTNAME",
        "RESOURCES",
        "EXPIRES",
    ]);
    for o in &list.offers {
        t.row(vec![
            o.offer_id.to_string(),
            o.framework_id.to_string(),
            o.agent_id.to_string(),
            o.hostname.clone(),
            format::resources(&o.resources),
            format::relative(&o.expires_at, &now),
        ]);
    }
    Ok(t.write(out)?)
}
