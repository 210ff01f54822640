//! Agent maintenance: `drain AGENT --deadline-s N` and `reactivate AGENT`. Both are
//! admin operations when the coordinator has credentials. An agent is named by its id or by its
//! unique hostname.

use std::io::Write;

use protocol::maintenance::{AgentMaintenance, DrainAgent};
use reqwest::Method;

use super::{print_raw, resolve_agent};
use crate::client::Api;
use crate::error::CtlError;

fn print_state(out: &mut dyn Write, answer: &AgentMaintenance) -> Result<(), CtlError> {
    match answer.deadline {
        Some(deadline) => writeln!(
            out,
            "agent {}: {} (tasks still running at {} are killed; {} offer(s) rescinded)",
            answer.agent_id,
            answer.state,
            deadline.format("%Y-%m-%d %H:%M:%S UTC"),
            answer.rescinded_offers
        )?,
        None => writeln!(out, "agent {}: {}", answer.agent_id, answer.state)?,
    }
    Ok(())
}

/// `parleyctl drain AGENT --deadline-s N`: `POST /api/v1/agents/{id}/drain`. The deadline is
/// checked here first (the coordinator's rule), so a typo is a usage error.
pub async fn drain(
    api: &Api,
    agent: &str,
    deadline_s: f64,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let request = DrainAgent { deadline_s };
    request
        .validate()
        .map_err(|e| CtlError::Usage(format!("--deadline-s: {e}")))?;
    let id = resolve_agent(api, agent).await?;
    let body = serde_json::json!({ "deadline_s": deadline_s });
    let raw = api
        .call(
            Method::POST,
            &format!("/api/v1/agents/{id}/drain"),
            Some(&body),
        )
        .await?;
    if json {
        return print_raw(out, &raw);
    }
    let answer: AgentMaintenance =
        serde_json::from_str(&raw).map_err(|e| CtlError::Protocol(format!("drain answer: {e}")))?;
    print_state(out, &answer)
}

/// `parleyctl reactivate AGENT`: `POST /api/v1/agents/{id}/reactivate`.
pub async fn reactivate(
    api: &Api,
    agent: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let id = resolve_agent(api, agent).await?;
    let body = serde_json::json!({});
    let raw = api
        .call(
            Method::POST,
            &format!("/api/v1/agents/{id}/reactivate"),
            Some(&body),
        )
        .await?;
    if json {
        return print_raw(out, &raw);
    }
    let answer: AgentMaintenance = serde_json::from_str(&raw)
        .map_err(|e| CtlError::Protocol(format!("reactivate answer: {e}")))?;
    print_state(out, &answer)
}
