//! `parleyctl describe task|agent|framework ID`: one thing in detail, as labelled lines (like
//! `kubectl describe`), made of the API's own answers:
//!
//! - a task: its record in `GET /api/v1/tasks`, with its framework's name and its agent's
//!   hostname from `GET /api/v1/frameworks` and `GET /api/v1/agents`;
//! - an agent: `GET /api/v1/dashboard/agents/{id}` (the agent, its tasks, its offers);
//! - a framework: `GET /api/v1/dashboard/frameworks/{id}` and
//!   `GET /api/v1/frameworks/{id}/explain`.
//!
//! With `--json`, the answers as JSON: the task's record, the agent's view, or the framework's
//! view with the explanation under `explain`.

use std::io::Write;

use protocol::messages::{
    AgentInfo, AgentList, FrameworkExplanation, FrameworkInfo, FrameworkList, TaskInfo,
};
use protocol::{Offer, Timestamp};
use serde::Deserialize;
use serde_json::Value;

use super::{print_raw, resolve_agent, resolve_framework, resolve_task};
use crate::client::Api;
use crate::error::CtlError;
use crate::format;
use crate::table::Table;

/// The labels' width: values start in one column.
const LABEL: usize = 17;

/// `GET /api/v1/dashboard/agents/{id}`.
#[derive(Debug, Deserialize)]
struct AgentView {
    agent: AgentInfo,
    task_count: usize,
    tasks: Vec<TaskInfo>,
    offers: Vec<Offer>,
}

/// `GET /api/v1/dashboard/frameworks/{id}`.
#[derive(Debug, Deserialize)]
struct FrameworkView {
    framework: FrameworkInfo,
    task_count: usize,
    tasks: Vec<TaskInfo>,
    offers: Vec<Offer>,
}

/// Writes `label:` padded to [`LABEL`], then the value (`-` when empty).
fn line(out: &mut dyn Write, label: &str, value: &str) -> std::io::Result<()> {
    let value = if value.is_empty() { "-" } else { value };
    let label = format!("{label}:");
    writeln!(out, "{label:<LABEL$} {value}")
}

/// `2026-01-01 10:00:00 UTC (12s ago)`.
fn when(at: &Timestamp, now: &Timestamp) -> String {
    format!(
        "{} ({})",
        at.format("%Y-%m-%d %H:%M:%S UTC"),
        format::relative(at, now)
    )
}

/// A table under a heading, its lines indented, or `heading: none`.
fn section(out: &mut dyn Write, heading: &str, table: &Table) -> Result<(), CtlError> {
    if table.is_empty() {
        line(out, heading, "none")?;
        return Ok(());
    }
    writeln!(out, "{heading}:")?;
    let mut text = Vec::new();
    table.write(&mut text)?;
    for row in String::from_utf8_lossy(&text).lines() {
        writeln!(out, "  {row}")?;
    }
    Ok(())
}

fn offers_table(offers: &[Offer], now: &Timestamp, by_agent: bool) -> Table {
    let who = if by_agent { "FRAMEWORK" } else { "AGENT" };
    let mut t = Table::new(&["OFFER", who, "RESOURCES", "EXPIRES"]);
    for o in offers {
        t.row(vec![
            o.offer_id.to_string(),
            if by_agent {
                o.framework_id.to_string()
            } else {
                format!("{} ({})", o.agent_id, o.hostname)
            },
            format::resources(&o.resources),
            format::relative(&o.expires_at, now),
        ]);
    }
    t
}

fn serialize(what: &str, value: &impl serde::Serialize) -> Result<String, CtlError> {
    serde_json::to_string(value).map_err(|e| CtlError::Protocol(format!("{what}: {e}")))
}

/// `parleyctl describe task TASK [--framework F]`.
pub async fn task(
    api: &Api,
    task: &str,
    framework: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let t = resolve_task(api, task, framework).await?;
    if json {
        return print_raw(out, &serialize("the task", &t)?);
    }
    let (_, frameworks): (_, FrameworkList) = api.get("/api/v1/frameworks").await?;
    let (_, agents): (_, AgentList) = api.get("/api/v1/agents").await?;
    let fw = frameworks
        .frameworks
        .iter()
        .find(|f| f.framework_id == t.framework_id);
    let agent = agents.agents.iter().find(|a| a.agent_id == t.agent_id);
    let now = chrono::Utc::now();
    line(out, "Task", t.task_id.as_str())?;
    line(out, "Name", &t.name)?;
    line(
        out,
        "Framework",
        &match fw {
            Some(f) => format!("{} ({}, role {})", t.framework_id, f.name, f.role),
            None => format!("{} (no longer registered)", t.framework_id),
        },
    )?;
    line(
        out,
        "Agent",
        &match agent {
            Some(a) => format!(
                "{} ({}, {}, {})",
                t.agent_id, a.hostname, a.endpoint, a.state
            ),
            None => format!("{} (no longer known)", t.agent_id),
        },
    )?;
    let ended = if t.state.is_terminal() {
        " (ended)"
    } else {
        ""
    };
    line(out, "State", &format!("{}{ended}", t.state))?;
    line(out, "Since", &when(&t.updated_at, &now))?;
    line(out, "Resources", &format::resources(&t.resources))?;
    line(
        out,
        "Exit code",
        &t.exit_code.map(|c| c.to_string()).unwrap_or_default(),
    )?;
    line(out, "Reason", t.reason.as_deref().unwrap_or_default())?;
    line(
        out,
        "Healthy",
        &t.healthy.map(|h| h.to_string()).unwrap_or_default(),
    )?;
    if let Some(gpus) = &t.gpu_devices {
        line(out, "GPUs", &gpus.join(", "))?;
    }
    let message: String = t
        .message
        .as_deref()
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    line(out, "Message", &message)?;
    Ok(())
}

/// `parleyctl describe agent AGENT`.
pub async fn agent(
    api: &Api,
    agent: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let id = resolve_agent(api, agent).await?;
    let (raw, view): (_, AgentView) = api.get(&format!("/api/v1/dashboard/agents/{id}")).await?;
    if json {
        return print_raw(out, &raw);
    }
    let a = &view.agent;
    let now = chrono::Utc::now();
    line(out, "Agent", &a.agent_id.to_string())?;
    line(out, "Hostname", &a.hostname)?;
    line(out, "Endpoint", &a.endpoint)?;
    line(out, "State", &a.state)?;
    if let Some(deadline) = &a.drain_deadline {
        line(out, "Drain deadline", &when(deadline, &now))?;
    }
    line(out, "Registered", &when(&a.registered_at, &now))?;
    line(out, "Last heartbeat", &when(&a.last_heartbeat_at, &now))?;
    let attributes: Vec<String> = a
        .attributes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    line(out, "Attributes", &attributes.join(", "))?;
    writeln!(out, "Resources:")?;
    let free = a
        .resources
        .saturating_sub(&a.used)
        .saturating_sub(&a.offered);
    for (label, r) in [
        ("  Total", &a.resources),
        ("  Used", &a.used),
        ("  Offered", &a.offered),
        ("  Free", &free),
    ] {
        line(out, label, &format::resources(r))?;
    }
    line(out, "Reservations", &format::reservations(&a.reservations))?;
    if !a.gpu_devices.is_empty() {
        let gpus: Vec<String> = a
            .gpu_devices
            .iter()
            .map(|g| format!("{} ({}, {} MiB)", g.uuid, g.model, g.memory_mib))
            .collect();
        line(out, "GPUs", &gpus.join(", "))?;
    }
    tasks_and_offers(out, view.task_count, &view.tasks, &view.offers, true)
}

/// The tasks and offers of an agent (`by_agent`: each row names the framework) or of a
/// framework (each row names the agent), as indented tables.
fn tasks_and_offers(
    out: &mut dyn Write,
    task_count: usize,
    tasks: &[TaskInfo],
    offers: &[Offer],
    by_agent: bool,
) -> Result<(), CtlError> {
    let who = if by_agent { "FRAMEWORK" } else { "AGENT" };
    let mut table = Table::new(&["TASK", who, "STATE", "RESOURCES", "MESSAGE"]);
    for t in tasks {
        table.row(vec![
            t.task_id.to_string(),
            if by_agent {
                t.framework_id.to_string()
            } else {
                t.agent_id.to_string()
            },
            t.state.to_string(),
            format::resources(&t.resources),
            t.message.clone().unwrap_or_default(),
        ]);
    }
    section(out, &tasks_heading(task_count, tasks.len()), &table)?;
    let heading = format!("Offers ({})", offers.len());
    let now = chrono::Utc::now();
    section(out, &heading, &offers_table(offers, &now, by_agent))
}

/// `Tasks (3)`, or `Tasks (600, the first 500 shown)`.
fn tasks_heading(count: usize, shown: usize) -> String {
    if shown < count {
        format!("Tasks ({count}, the first {shown} shown)")
    } else {
        format!("Tasks ({count})")
    }
}

/// `parleyctl describe framework FRAMEWORK`.
pub async fn framework(
    api: &Api,
    framework: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let id = resolve_framework(api, framework).await?;
    let (raw_view, view): (_, FrameworkView) = api
        .get(&format!("/api/v1/dashboard/frameworks/{id}"))
        .await?;
    let (raw_explain, e): (_, FrameworkExplanation) =
        api.get(&format!("/api/v1/frameworks/{id}/explain")).await?;
    if json {
        let mut whole: Value = serde_json::from_str(&raw_view)
            .map_err(|err| CtlError::Protocol(format!("the framework's view: {err}")))?;
        let explain: Value = serde_json::from_str(&raw_explain)
            .map_err(|err| CtlError::Protocol(format!("the explanation: {err}")))?;
        if let Value::Object(fields) = &mut whole {
            fields.insert("explain".into(), explain);
        }
        return print_raw(out, &serialize("the framework", &whole)?);
    }
    let f = &view.framework;
    let now = chrono::Utc::now();
    line(out, "Framework", &f.framework_id.to_string())?;
    line(out, "Name", &f.name)?;
    line(out, "Role", f.role.as_str())?;
    let mut state = f.state.clone();
    if f.suppressed {
        state.push_str(" (suppressed)");
    } else if let Some(n) = f.pending_tasks {
        state.push_str(&format!(" (wants {n} more task(s))"));
    }
    line(out, "State", &state)?;
    line(out, "Registered", &when(&f.registered_at, &now))?;
    line(
        out,
        "Failover timeout",
        &format!("{}s", format::weight(f.failover_timeout_s)),
    )?;
    line(out, "Capabilities", &f.capabilities.join(", "))?;
    if let Some(url) = &f.webui_url {
        line(out, "Web UI", url)?;
    }
    line(out, "Dominant share", &format::share(f.dominant_share))?;
    line(out, "Used", &format::resources(&f.used))?;
    line(out, "Offered", &format::resources(&f.offered))?;
    line(
        out,
        "Demand",
        &f.demand.as_ref().map(format::resources).unwrap_or_default(),
    )?;
    line(out, "Active tasks", &f.active_tasks.to_string())?;
    tasks_and_offers(out, view.task_count, &view.tasks, &view.offers, false)?;
    writeln!(out, "Offers explained:")?;
    let a = &e.agents;
    line(
        out,
        "  Agents",
        &format!(
            "{} active: {} offered to it, {} eligible, {} nothing free, {} filtered, {} demand does not fit",
            a.active, a.offered_to_it, a.eligible, a.nothing_free, a.filtered, a.demand_does_not_fit
        ),
    )?;
    if let Some(s) = e.stalled_for_s {
        line(out, "  Stalled", &format!("for {s:.1}s"))?;
    }
    if let Some(s) = e.next_filter_ends_in_s {
        line(out, "  Filter ends", &format!("in {s:.1}s"))?;
    }
    if !e.held_back_by.is_empty() {
        line(out, "  Held back by", &e.held_back_by.join("; "))?;
    }
    if !e.no_agent_offers.is_empty() {
        line(out, "  No agent has", &e.no_agent_offers.join(", "))?;
    }
    for p in &e.preemption {
        line(out, "  Preemption", p)?;
    }
    line(out, "  Summary", &e.summary)?;
    Ok(())
}
