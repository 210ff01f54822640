//! `agents`, `frameworks`, `tasks` and `offers` (without `--watch`): one GET each, shown as a
//! table, or as the API's JSON with `--json`.

use std::io::Write;

use protocol::messages::{AgentList, FrameworkList, OfferList, TaskList};

use super::{print_raw, resolve_framework};
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

/// `parleyctl tasks [--framework F] [--state S]`: both filters go to the API
/// (`?framework_id=`, `?state=`); `--json` prints its answer as is.
pub async fn tasks(
    api: &Api,
    framework: Option<&str>,
    state: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let mut params = Vec::new();
    if let Some(f) = framework {
        params.push(format!("framework_id={}", resolve_framework(api, f).await?));
    }
    if let Some(state) = state {
        // Checked by the command line against the known states: no escaping needed.
        params.push(format!("state={state}"));
    }
    let path = if params.is_empty() {
        "/api/v1/tasks".to_owned()
    } else {
        format!("/api/v1/tasks?{}", params.join("&"))
    };
    let (raw, list): (_, TaskList) = api.get(&path).await?;
    if json {
        return print_raw(out, &raw);
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
