//! Who owns a framework or an agent id: the principal that registered it, with credentials
//! configured (the coordinator's `auth`; the API layer decides who may act, from these answers).

use std::sync::Arc;

use protocol::{AgentId, FrameworkId};

use super::State;

impl State {
    /// Who owns a registered framework: `None` if there is no such framework (or only a
    /// placeholder for adopted tasks), `Some(None)` if it was registered without credentials.
    pub fn framework_owner(&self, id: FrameworkId) -> Option<Option<&str>> {
        self.frameworks
            .get(id)
            .filter(|fw| !fw.placeholder)
            .map(|fw| fw.owner.as_deref())
    }

    /// Whether framework `id` is only a placeholder for adopted tasks (nobody's until a
    /// framework principal registers it with its id).
    pub fn framework_is_placeholder(&self, id: FrameworkId) -> bool {
        self.frameworks.get(id).is_some_and(|fw| fw.placeholder)
    }

    /// How many registered frameworks `principal` owns (for `max_frameworks`).
    pub fn frameworks_owned_by(&self, principal: &str) -> usize {
        self.frameworks
            .records()
            .filter(|fw| !fw.placeholder && fw.owner.as_deref() == Some(principal))
            .count()
    }

    /// Who owns an agent: `None` if the agent is unknown, `Some(None)` if it registered
    /// without credentials.
    pub fn agent_owner(&self, id: AgentId) -> Option<Option<&str>> {
        self.agents.get(id).map(|a| a.owner.as_deref())
    }

    /// Records the principal that registered the agent (after a successful registration).
    pub fn set_agent_owner(&mut self, id: AgentId, owner: Arc<str>) {
        if let Some(agent) = self.agents.get_mut(id) {
            agent.owner = Some(owner);
        }
    }
}
