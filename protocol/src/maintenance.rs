//! Agent maintenance: draining an agent before it goes away.
//!
//! An operator drains an agent with `POST /api/v1/agents/{id}/drain` ([`DrainAgent`]): it makes
//! no new offers, its outstanding offers are rescinded, every framework with tasks there gets
//! [`AgentDraining`] on its stream (and the offer stream carries it too), and tasks still running
//! at the deadline are killed with reason [`crate::task::REASON_AGENT_DRAINED`].
//! `POST /api/v1/agents/{id}/reactivate` ends the drain. The agent's `state` in
//! `/api/v1/agents` is one of the `AGENT_*` names here.

use serde::{Deserialize, Serialize};

use crate::{AgentId, FrameworkId, TaskId, Timestamp};

/// The agent is registered and offers its resources.
pub const AGENT_ACTIVE: &str = "active";
/// The agent missed its heartbeats.
pub const AGENT_LOST: &str = "lost";
/// The agent is being drained: no new offers; its tasks run until the deadline.
pub const AGENT_DRAINING: &str = "draining";
/// The agent was drained and none of its tasks is left; it offers nothing until reactivated.
pub const AGENT_DRAINED: &str = "drained";

/// The longest drain deadline accepted, in seconds (30 days).
pub const MAX_DRAIN_DEADLINE_S: f64 = 30.0 * 24.0 * 3600.0;

/// `POST /api/v1/agents/{id}/drain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DrainAgent {
    /// Seconds from now until the tasks still running there are killed; `0` kills them now.
    /// At most [`MAX_DRAIN_DEADLINE_S`].
    pub deadline_s: f64,
}

impl DrainAgent {
    /// The field [`DrainAgent::validate`] checks.
    pub const FIELD: &'static str = "deadline_s";

    /// Checks the deadline; the error says what is accepted (the field is
    /// [`DrainAgent::FIELD`]).
    pub fn validate(&self) -> Result<(), DrainDeadlineError> {
        let d = self.deadline_s;
        if !d.is_finite() || !(0.0..=MAX_DRAIN_DEADLINE_S).contains(&d) {
            return Err(DrainDeadlineError { deadline_s: d });
        }
        Ok(())
    }
}

/// A drain deadline out of range (the field is [`DrainAgent::FIELD`]; the caller names it).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{deadline_s} is not a number of seconds between 0 and {MAX_DRAIN_DEADLINE_S}")]
pub struct DrainDeadlineError {
    /// The value given.
    pub deadline_s: f64,
}

/// The answer to a drain or reactivate: the agent's state afterwards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentMaintenance {
    /// The agent.
    pub agent_id: AgentId,
    /// Its state now: `active`, `draining`, `drained` (or `lost`).
    pub state: String,
    /// When its remaining tasks are (or were) killed, while draining or drained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub deadline: Option<Timestamp>,
    /// How many outstanding offers on it were rescinded by this call.
    #[serde(default)]
    pub rescinded_offers: usize,
}

/// The `agent_draining` event: on the stream of each framework with tasks on the agent (its own
/// tasks only) and on the offer stream (every framework's tasks, one event per framework).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentDraining {
    /// The agent being drained.
    pub agent_id: AgentId,
    /// The framework whose tasks these are.
    pub framework_id: FrameworkId,
    /// When tasks still running there are killed (reason `agent_drained`).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub deadline: Timestamp,
    /// The framework's non-terminal tasks on the agent.
    pub task_ids: Vec<TaskId>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_checked_and_the_error_names_the_field() {
        for ok in [0.0, 1.5, MAX_DRAIN_DEADLINE_S] {
            assert!(DrainAgent { deadline_s: ok }.validate().is_ok(), "{ok}");
        }
        for bad in [-1.0, f64::NAN, f64::INFINITY, MAX_DRAIN_DEADLINE_S + 1.0] {
            let e = DrainAgent { deadline_s: bad }
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains("between 0 and"), "{e}");
        }
        assert!(serde_json::from_str::<DrainAgent>(r#"{"deadline_s":"10"}"#).is_err());
        assert!(serde_json::from_str::<DrainAgent>(r#"{"deadline":10}"#).is_err());
        assert!(serde_json::from_str::<DrainAgent>(r#"{}"#).is_err());
    }
}
