//! Tasks: what a framework asks to run ([`TaskSpec`]) and what becomes of it ([`TaskStatus`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{AgentId, CommandSpec, FrameworkId, Resources, TaskId, Timestamp, UpdateId};

/// A task to launch on an agent, as sent in an accept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskSpec {
    /// Chosen by the framework; unique within it.
    pub task_id: TaskId,
    /// A human-readable name.
    #[serde(default)]
    pub name: String,
    /// The agent to run on; must be the agent of the offers accepted.
    pub agent_id: AgentId,
    /// What the task uses; must fit in the offers accepted.
    pub resources: Resources,
    /// What to run.
    pub command: CommandSpec,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// For simulated agents only: the task finishes after this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// How the task is isolated on its agent: pids limit, network, user, image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<crate::Isolation>,
    /// How the agent checks that the running task is healthy; none when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<crate::HealthCheck>,
    /// Its priority for preemption toward fair share: higher is more important,
    /// the lowest is taken back first; absent means 0. An integer from -1000 to 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<crate::preempt::Priority>,
}

/// The states of a task. `finished`, `failed`, `killed`, `lost`, `error` and `gone` are
/// terminal; `unreachable` is not (see [`crate::partition`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Accepted by the coordinator, on its way to the agent.
    Staging,
    /// The agent is starting it.
    Starting,
    /// Its process runs.
    Running,
    /// Exited with status 0.
    Finished,
    /// Exited non-zero, was signalled, or could not start.
    Failed,
    /// Killed on request.
    Killed,
    /// Its agent was lost, or could not be reached.
    Lost,
    /// The task could not be launched as described.
    Error,
    /// Its agent cannot be reached; the task may still run (partition-aware frameworks only:
    /// see [`crate::partition`]). It comes back with its real state when the agent returns, or
    /// becomes `gone` after the framework's partition timeout.
    Unreachable,
    /// Its agent stayed unreachable past the framework's partition timeout: the task is not
    /// running, and is killed if the agent ever returns with it (partition-aware frameworks
    /// only).
    Gone,
}

impl TaskState {
    /// True for the states a task never leaves.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Finished
                | TaskState::Failed
                | TaskState::Killed
                | TaskState::Lost
                | TaskState::Error
                | TaskState::Gone
        )
    }

    /// The wire name, e.g. `"running"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Staging => "staging",
            TaskState::Starting => "starting",
            TaskState::Running => "running",
            TaskState::Finished => "finished",
            TaskState::Failed => "failed",
            TaskState::Killed => "killed",
            TaskState::Lost => "lost",
            TaskState::Error => "error",
            TaskState::Unreachable => "unreachable",
            TaskState::Gone => "gone",
        }
    }
}

impl TaskState {
    /// Every state, in lifecycle order.
    pub const ALL: [TaskState; 10] = [
        TaskState::Staging,
        TaskState::Starting,
        TaskState::Running,
        TaskState::Unreachable,
        TaskState::Finished,
        TaskState::Failed,
        TaskState::Killed,
        TaskState::Lost,
        TaskState::Error,
        TaskState::Gone,
    ];
}

/// A name that is not a [`TaskState`]'s; the message lists the names that are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a task state; one of {}", TaskState::ALL.map(TaskState::as_str).join(", "))]
pub struct TaskStateError {
    /// The name given.
    pub value: String,
}

impl std::str::FromStr for TaskState {
    type Err = TaskStateError;

    /// The wire name (`"running"`); anything else says which names exist.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| TaskStateError {
                value: s.to_string(),
            })
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change of one task, as reported by an agent and relayed to the framework.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskStatus {
    /// The task.
    pub task_id: TaskId,
    /// Its framework.
    pub framework_id: FrameworkId,
    /// Its agent.
    pub agent_id: AgentId,
    /// The new state.
    pub state: TaskState,
    /// Why, for failures and losses (e.g. "exited with code 3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The process exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Identifies this update; the framework acknowledges it by this id.
    pub update_id: UpdateId,
    /// When the state changed.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub timestamp: Timestamp,
    /// What the task uses; agents set it so a coordinator that lost its books can account
    /// adopted tasks. Optional on the wire: absent means unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Why, in one word for programs, when the agent knows: `memory_limit` when the kernel
    /// killed the task at its memory limit (Mesos' `REASON_CONTAINER_LIMITATION_MEMORY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What an isolated task used, measured by its cgroup, on its terminal status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TaskUsage>,
    /// The GPUs the agent gave the task (their UUIDs), when it asked for `gpus`; absent for a
    /// task without GPUs and from older agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_devices: Option<Vec<String>>,
    /// The task's health, for a task with a health check, once known: `true` after its first
    /// passing check, `false` after `consecutive_failures` failing ones. Agents send a
    /// `running` update when it changes and carry the latest value on later updates; absent
    /// for tasks without a health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// The reason of a task the kernel killed at its memory limit.
pub const REASON_MEMORY_LIMIT: &str = "memory_limit";

/// The reason of a task killed because its agent was drained and the drain deadline passed.
pub const REASON_AGENT_DRAINED: &str = "agent_drained";

/// The reason of a task killed because preemption toward fair share took it back and its
/// deadline passed.
pub const REASON_PREEMPTED: &str = "preempted";

/// The reason of a task killed because its agent could not reach the coordinator for longer
/// than the framework's tasks may outlive that (see [`crate::partition`]): killed by the agent
/// itself, or by the coordinator's order when the agent returned after the framework had been
/// told the task was `lost` or `gone`.
pub const REASON_AGENT_PARTITIONED: &str = "agent_partitioned";

/// What an isolated task used over its life, as its cgroup counted it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskUsage {
    /// The most memory it held at once, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// CPU time used, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Time its CPU quota held it back, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_seconds: Option<f64>,
    /// The most GPU memory its devices held at once, in bytes (NVML, sampled while it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_bytes: Option<u64>,
    /// The mean utilisation of its GPUs while it ran, in percent (NVML, sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_utilization_percent: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_spec_parses_the_documented_shape() {
        let json = format!(
            r#"{{"task_id": "t1", "name": "x", "agent_id": "{}", "resources": {{"cpus": 1}},
                "command": {{"shell": "sleep 10"}}, "env": {{"A": "b"}}}}"#,
            AgentId::new()
        );
        let spec: TaskSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(spec.command, CommandSpec::Shell("sleep 10".into()));
        assert_eq!(spec.env["A"], "b");
        let argv: CommandSpec = serde_json::from_str(r#"{"argv": ["sleep", "10"]}"#).unwrap();
        assert!(argv.validate().is_ok());
        assert!(serde_json::from_str::<CommandSpec>(r#"{"shell": "a", "argv": []}"#).is_err());
        assert!(CommandSpec::Argv(vec![]).validate().is_err());
        assert!(CommandSpec::Shell(" ".into()).validate().is_err());
    }

    #[test]
    fn terminal_states() {
        let terminal: Vec<_> = TaskState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .map(TaskState::as_str)
            .collect();
        assert_eq!(
            terminal,
            ["finished", "failed", "killed", "lost", "error", "gone"]
        );
        for s in TaskState::ALL {
            assert_eq!(s.as_str().parse::<TaskState>(), Ok(s));
        }
    }

    #[test]
    fn task_status_resources_are_optional_on_the_wire() {
        let json = format!(
            r#"{{"task_id": "t1", "framework_id": "{}", "agent_id": "{}", "state": "running",
                "update_id": "{}", "timestamp": "2026-01-01T00:00:00Z"}}"#,
            FrameworkId::new(),
            AgentId::new(),
            UpdateId::new()
        );
        let mut status: TaskStatus = serde_json::from_str(&json).unwrap();
        assert_eq!(
            status.resources, None,
            "an older agent's status still parses"
        );
        let plain = serde_json::to_value(&status).unwrap();
        assert!(plain.get("resources").is_none(), "None is not serialized");
        status.resources = Some("cpus=1.5,mem=64".parse().unwrap());
        let with = serde_json::to_value(&status).unwrap();
        assert_eq!(with["resources"]["cpus"], 1.5);
        let back: TaskStatus = serde_json::from_value(with).unwrap();
        assert_eq!(back, status);
    }
}
