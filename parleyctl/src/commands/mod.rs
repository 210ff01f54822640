//! The subcommands, one file per kind of work, and what they share: naming a framework by id
//! or by name ([`resolve_framework`]) and printing the API's JSON as it is ([`print_raw`]).
//!
//! - [`list`]: `agents`, `frameworks`, `tasks`, `offers` (tables).
//! - [`roles`]: the role tree, indented.
//! - [`explain`]: why a framework is or is not offered.
//! - [`change`]: `weight`, `teardown`.
//! - [`apply`]: `apply -f roles.toml`, a file's role weights and quotas, idempotently.
//! - [`logs`]: a task's output.
//! - [`maintenance`]: `drain`, `reactivate`.
//! - [`watch`]: `offers --watch`, the offer event stream as lines.
//! - [`completions`]: `completions bash|zsh|fish`, a shell completion script.
//! - [`jobs`]: the jobs service's `run FILE [--wait]`, `jobs`, `job status|stop|scale|restart|delete|logs`.

pub mod apply;
pub mod change;
pub mod explain;
pub mod jobs;
pub mod list;
pub mod logs;
pub mod maintenance;
pub mod roles;
pub mod watch;

use std::io::Write;

use protocol::messages::FrameworkList;
use protocol::FrameworkId;

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
