//! Reading a task's `stdout` / `stderr` from its agent for an operator
//! (`GET /api/v1/frameworks/{id}/tasks/{task_id}/output`): agents answer only the coordinator
//! (their API token), so the coordinator fetches with the agent's token, through the same
//! client as launches and kills ([`super::agent_call`]: no redirects, timeouts), and reads at
//! most [`MAX_OUTPUT_BYTES`] of the answer, as the agent itself bounds a read.

use protocol::{FrameworkId, TaskId};

use super::{agent_call, Coordinator};
use crate::state::StateError;

/// The most bytes one output read returns (1 MiB, the agent's own bound).
pub const MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// Which of a task's output files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFile {
    /// `stdout`.
    Stdout,
    /// `stderr`.
    Stderr,
}

impl OutputFile {
    /// The file's name, as the agent's route spells it.
    pub fn name(self) -> &'static str {
        match self {
            OutputFile::Stdout => "stdout",
            OutputFile::Stderr => "stderr",
        }
    }
}

/// Which bytes of which file to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputRead {
    /// The file.
    pub file: OutputFile,
    /// The first byte; `None`: the last `limit` bytes.
    pub offset: Option<u64>,
    /// At most this many bytes (capped at [`MAX_OUTPUT_BYTES`]).
    pub limit: u64,
}

/// Why a task's output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OutputFetchError {
    /// The framework or the task is unknown (404).
    #[error(transparent)]
    Unknown(#[from] StateError),
    /// The agent does not have the task's output (404): its sandbox was collected, or the
    /// agent is simulated.
    #[error("agent {agent} has no output for task {task}: {excerpt}")]
    NotOnAgent {
        /// The agent.
        agent: protocol::AgentId,
        /// The task.
        task: TaskId,
        /// The agent's message, cut short.
        excerpt: String,
    },
    /// The agent could not be reached, or answered with an error (502).
    #[error("{0}")]
    Agent(String),
}

impl Coordinator {
    /// Up to `read.limit` bytes of task `task` of `framework`'s output, from its agent.
    pub async fn task_output(
        &self,
        framework: FrameworkId,
        task: &TaskId,
        read: OutputRead,
    ) -> Result<Vec<u8>, OutputFetchError> {
        let contact = self.read(|s| s.task_agent(framework, task))?;
        let (agent, endpoint, token) = (contact.agent_id, contact.endpoint, contact.token);
        let limit = read.limit.min(MAX_OUTPUT_BYTES);
        let url = format!("{endpoint}/api/v1/tasks/{task}/{}", read.file.name());
        let mut query = vec![
            ("framework_id", framework.to_string()),
            ("limit", limit.to_string()),
        ];
        if let Some(offset) = read.offset {
            query.push(("offset", offset.to_string()));
        }
        let request = agent_call::authorized(self.shared.http.get(&url), token.as_ref());
        let mut resp = request.query(&query).send().await.map_err(|e| {
            OutputFetchError::Agent(format!(
                "cannot reach agent {agent} at {endpoint}: {}",
                agent_call::error_chain(&e)
            ))
        })?;
        let status = resp.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(OutputFetchError::NotOnAgent {
                agent,
                task: task.clone(),
                excerpt: agent_call::error_excerpt(resp).await,
            });
        }
        if !status.is_success() {
            let excerpt = agent_call::error_excerpt(resp).await;
            return Err(OutputFetchError::Agent(format!(
                "agent {agent} answered {status} to the output read: {excerpt}"
            )));
        }
        // Read no more than asked for, whatever the agent sends.
        let cap = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut bytes = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    let room = cap - bytes.len();
                    bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if chunk.len() >= room {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(OutputFetchError::Agent(format!(
                        "agent {agent} broke off the output read: {}",
                        agent_call::error_chain(&e)
                    )))
                }
            }
        }
        Ok(bytes)
    }
}
