//! `parleyctl logs TASK [--framework F] [--stderr] [--follow]`: the task's output, read from
//! its agent through `GET /api/v1/frameworks/{id}/tasks/{task_id}/output`. Without `--follow`,
//! the last MiB; with it, everything from the start, then new output as it comes, until the
//! task has ended and nothing more is left.

use std::io::Write;
use std::time::Duration;

use protocol::messages::TaskList;
use protocol::{FrameworkId, TaskId};

use super::{resolve_framework, resolve_task};
use crate::client::Api;
use crate::error::CtlError;

/// How often `--follow` asks for new output when there was none.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// `parleyctl logs`. `--json` does not apply (the output is text) and is ignored.
pub async fn logs(
    api: &Api,
    task: &str,
    framework: Option<&str>,
    stderr: bool,
    follow: bool,
    out: &mut dyn Write,
) -> Result<(), CtlError> {
    let task: TaskId = task
        .parse()
        .map_err(|e| CtlError::Usage(format!("TASK: {e}")))?;
    let framework = match framework {
        Some(f) => resolve_framework(api, f).await?,
        None => resolve_task(api, task.as_str(), None).await?.framework_id,
    };
    let path = format!("/api/v1/frameworks/{framework}/tasks/{task}/output");
    let file = if stderr { "stderr" } else { "stdout" };
    if !follow {
        let bytes = api.get_bytes(&path, &[("file", file.to_owned())]).await?;
        out.write_all(&bytes)?;
        return Ok(out.flush()?);
    }
    let mut offset: u64 = 0;
    loop {
        let query = [("file", file.to_owned()), ("offset", offset.to_string())];
        let bytes = api.get_bytes(&path, &query).await?;
        if !bytes.is_empty() {
            out.write_all(&bytes)?;
            out.flush()?;
            offset += bytes.len() as u64;
            continue;
        }
        if task_ended(api, framework, &task).await? {
            // One more read: output written just before the end.
            let query = [("file", file.to_owned()), ("offset", offset.to_string())];
            let bytes = api.get_bytes(&path, &query).await?;
            out.write_all(&bytes)?;
            return Ok(out.flush()?);
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

/// Whether the task is terminal (or gone from the books).
async fn task_ended(api: &Api, framework: FrameworkId, task: &TaskId) -> Result<bool, CtlError> {
    let (_, list): (_, TaskList) = api
        .get(&format!("/api/v1/tasks?framework_id={framework}"))
        .await?;
    Ok(list
        .tasks
        .iter()
        .find(|t| &t.task_id == task)
        .is_none_or(|t| t.state.is_terminal()))
}
