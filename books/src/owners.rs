//! Who owns a framework or an agent id: the principal that registered it, with credentials
//! configured (the coordinator's `auth`; the API layer decides who may act, from these answers).
//! Functions over the sub-book they read; `State`'s entry points are in `entry.rs`.

use std::sync::Arc;

use protocol::{AgentId, FrameworkId};

use crate::agent_book::AgentBook;
use crate::framework_book::FrameworkBook;

/// Who owns a registered framework: `None` if there is no such framework (or only a
/// placeholder for adopted tasks), `Some(None)` if it was registered without credentials.
pub(crate) fn framework_owner(frameworks: &FrameworkBook, id: FrameworkId) -> Option<Option<&str>> {
    frameworks
        .get(id)
        .filter(|fw| !fw.placeholder)
        .map(|fw| fw.owner.as_deref())
}

/// How many registered frameworks `principal` owns (for `max_frameworks`).
pub(crate) fn frameworks_owned_by(frameworks: &FrameworkBook, principal: &str) -> usize {
    frameworks
        .records()
        .filter(|fw| !fw.placeholder && fw.owner.as_deref() == Some(principal))
        .count()
}

/// Who owns an agent: `None` if the agent is unknown, `Some(None)` if it registered without
/// credentials.
pub(crate) fn agent_owner(agents: &AgentBook, id: AgentId) -> Option<Option<&str>> {
    agents.get(id).map(|a| a.owner.as_deref())
}

/// Records the principal that registered the agent (after a successful registration).
pub(crate) fn set_agent_owner(agents: &mut AgentBook, id: AgentId, owner: Arc<str>) {
    if let Some(agent) = agents.get_mut(id) {
        agent.owner = Some(owner);
    }
}
