//! The subcommands, one file per kind of work, and what they share: naming a framework by id
//! or by name ([`resolve_framework`]), an agent by id or hostname ([`resolve_agent`]), a task
//! by its id ([`resolve_task`]), and printing the API's JSON as it is ([`print_raw`]).
//!
//! - [`list`]: `agents`, `frameworks`, `tasks`, `offers` (tables).
//! - [`roles`]: the role tree, indented.
//! - [`describe`]: `describe task|agent|framework`, one thing in labelled lines.
//! - [`explain`]: why a framework is or is not offered.
//! - [`change`]: `weight`, `teardown`.
//! - [`task`]: `task kill`.
//! - [`apply`]: `apply -f roles.toml`, a file's role weights and quotas, idempotently.
//! - [`logs`]: a task's output.
//! - [`maintenance`]: `drain`, `reactivate`.
//! - [`watch`]: `offers --watch`, the offer event stream as lines.
//! - [`completions`]: `completions bash|zsh|fish`, a shell completion script.
//! - [`jobs`]: the jobs service's `run FILE [--wait]`, `jobs`, `job status|stop|scale|restart|delete|logs|run`.

pub mod apply;
pub mod change;
pub mod describe;
pub mod explain;
pub mod jobs;
pub mod list;
pub mod logs;
pub mod maintenance;
pub mod roles;
pub mod task;
pub mod watch;

use std::io::Write;

use protocol::messages::{AgentList, FrameworkList, TaskInfo, TaskList};
use protocol::{AgentId, FrameworkId, TaskId};

use crate::client::Api;
use crate::error::CtlError;

/// The framework `name_or_id` names: an id as is (the coordinator answers 404 if unknown),
/// else the one framework of that name.
pub async fn resolve_framework(api: &Api, name_or_id: &str) -> Result<FrameworkId, CtlError> {
    if let Ok(id) = name_or_id.parse::<FrameworkId>() {
        return Ok(id);
    }
    let (_, list): (_, FrameworkList) = api.get("/api/v1/frameworks").await?;
    let matching: Vec<FrameworkId> = list
        .frameworks
        .iter()
        .filter(|f| f.name == name_or_id)
        .map(|f| f.framework_id)
        .collect();
    match matching.as_slice() {
        [id] => Ok(*id),
        [] => Err(CtlError::NotFound(format!(
            "no framework has the id or name {name_or_id:?}; see `parleyctl frameworks`"
        ))),
        several => Err(CtlError::NotFound(format!(
            "{} frameworks are named {name_or_id:?} ({}); name one by its id",
            several.len(),
            several
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The agent `name_or_id` names: an id as is (the coordinator answers 404 if unknown), else
/// the one agent with that hostname.
pub async fn resolve_agent(api: &Api, name_or_id: &str) -> Result<AgentId, CtlError> {
    if let Ok(id) = name_or_id.parse::<AgentId>() {
        return Ok(id);
    }
    let (_, list): (_, AgentList) = api.get("/api/v1/agents").await?;
    let matching: Vec<AgentId> = list
        .agents
        .iter()
        .filter(|a| a.hostname == name_or_id)
        .map(|a| a.agent_id)
        .collect();
    match matching.as_slice() {
        [id] => Ok(*id),
        [] => Err(CtlError::NotFound(format!(
            "no agent has the id or hostname {name_or_id:?}; see `parleyctl agents`"
        ))),
        several => Err(CtlError::NotFound(format!(
            "{} agents have the hostname {name_or_id:?}; name one by its id",
            several.len()
        ))),
    }
}

/// The one task `task` names (of `framework` when given, by its id or unique name): its record.
/// A malformed id is a usage error naming `TASK`; no such task, or one id in several
/// frameworks, is [`CtlError::NotFound`] saying what to do.
pub async fn resolve_task(
    api: &Api,
    task: &str,
    framework: Option<&str>,
) -> Result<TaskInfo, CtlError> {
    let id: TaskId = task
        .parse()
        .map_err(|e| CtlError::Usage(format!("TASK: {e}")))?;
    let path = match framework {
        Some(f) => format!(
            "/api/v1/tasks?framework_id={}",
            resolve_framework(api, f).await?
        ),
        None => "/api/v1/tasks".to_owned(),
    };
    let (_, list): (_, TaskList) = api.get(&path).await?;
    let mut matching: Vec<TaskInfo> = list.tasks.into_iter().filter(|t| t.task_id == id).collect();
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 => Err(CtlError::NotFound(match framework {
            Some(f) => {
                format!("framework {f} has no task {id}; see `parleyctl tasks --framework {f}`")
            }
            None => format!("no task {id} is known to the coordinator; see `parleyctl tasks`"),
        })),
        n => Err(CtlError::NotFound(format!(
            "{n} frameworks have a task {id}; name one with --framework"
        ))),
    }
}

/// Writes the completion script of `shell` for the whole command line (every subcommand and
/// flag, from [`crate::Cli`]'s clap definition, so it cannot miss one).
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<(), CtlError> {
    use clap::CommandFactory;
    let mut command = crate::Cli::command();
    clap_complete::generate(shell, &mut command, "parleyctl", out);
    Ok(())
}

/// Writes an API answer unchanged, with a final newline.
pub fn print_raw(out: &mut dyn Write, body: &str) -> Result<(), CtlError> {
    out.write_all(body.as_bytes())?;
    if !body.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}
