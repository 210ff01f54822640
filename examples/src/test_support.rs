//! Builders for the examples' unit tests.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use framework_sdk::protocol::{self, UpdateId};
use framework_sdk::{AgentId, FrameworkId, Offer, OfferId, TaskSpec, TaskState, TaskStatus};

/// An offer of `free` on a fresh agent of `cpus=8,mem=8192`.
pub(crate) fn offer(free: &str) -> Offer {
    let now = protocol::now();
    Offer {
        offer_id: OfferId::new(),
        framework_id: FrameworkId::new(),
        agent_id: AgentId::new(),
        hostname: "h".into(),
        resources: free.parse().unwrap(),
        agent_total: "cpus=8,mem=8192".parse().unwrap(),
        attributes: BTreeMap::new(),
        created_at: now,
        expires_at: now,
        reservation: None,
    }
}

/// A status update for a launched task.
pub(crate) fn status(spec: &TaskSpec, state: TaskState) -> TaskStatus {
    TaskStatus {
        task_id: spec.task_id.clone(),
        framework_id: FrameworkId::new(),
        agent_id: spec.agent_id,
        state,
        message: None,
        exit_code: None,
        update_id: UpdateId::new(),
        timestamp: protocol::now(),
        resources: Some(spec.resources.clone()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}

/// The tasks of the launches among `decisions`, and how many offers were declined.
pub(crate) fn launched(decisions: &framework_sdk::Decisions) -> (Vec<Vec<TaskSpec>>, usize) {
    let mut launches = Vec::new();
    let mut declines = 0;
    for answer in decisions.answers() {
        match answer {
            framework_sdk::Answer::Launch { tasks, .. } => launches.push(tasks.clone()),
            framework_sdk::Answer::LaunchGang { parts, .. } => {
                launches.extend(parts.iter().map(|(_, t)| t.clone()));
            }
            framework_sdk::Answer::Decline { .. } => declines += 1,
            _ => {}
        }
    }
    (launches, declines)
}
