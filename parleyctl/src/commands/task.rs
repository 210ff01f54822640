//! `parleyctl task kill TASK [--framework F]`: an operator's kill of one task,
//! `POST /api/v1/frameworks/{id}/tasks/{task_id}/kill`. An admin operation when the
//! coordinator has credentials.

use std::io::Write;

use protocol::messages::TaskInfo;
use reqwest::Method;

use super::{print_raw, resolve_task};
use crate::client::Api;
use crate::error::CtlError;

/// `parleyctl task kill TASK`: the task is found by its id (among `--framework`'s tasks when
/// given), then killed; the coordinator refuses one that has already ended (409).
pub async fn kill(
    api: &Api,
    task: &str,
    framework: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let found = resolve_task(api, task, framework).await?;
    let path = format!(
        "/api/v1/frameworks/{}/tasks/{}/kill",
        found.framework_id, found.task_id
    );
    let raw = api.call(Method::POST, &path, None).await?;
    if json {
        return print_raw(out, &raw);
    }
    let killed: TaskInfo =
        serde_json::from_str(&raw).map_err(|e| CtlError::Protocol(format!("POST {path}: {e}")))?;
    writeln!(
        out,
        "task {} of framework {}: kill sent to agent {} (it was {}); its end reaches the framework as a status update",
        killed.task_id, killed.framework_id, killed.agent_id, killed.state
    )?;
    Ok(())
}
