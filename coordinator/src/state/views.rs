//! Operator views of the books (`/api/v1/state`, `/agents`, `/frameworks`, `/tasks`, `/roles`,
//! `/offers`) and the gauges `/metrics` shows.

use std::collections::BTreeMap;

use protocol::messages::{AgentInfo, ClusterState, FrameworkInfo, RoleNode, TaskInfo};
use protocol::{AgentId, FrameworkId, Offer};

use super::{AgentState, Connection, State};

/// Point-in-time counts for the metrics page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    /// Outstanding offers.
    pub outstanding_offers: usize,
    /// Tasks by state name.
    pub tasks_by_state: BTreeMap<&'static str, usize>,
    /// Agents by state (`active`, `lost`).
    pub agents_by_state: BTreeMap<&'static str, usize>,
    /// Frameworks by state (`connected`, `disconnected`).
    pub frameworks_by_state: BTreeMap<&'static str, usize>,
    /// Dominant share per role path (the root is "").
    pub role_shares: Vec<(String, f64)>,
}

impl State {
    /// Outstanding offers, optionally only one framework's and/or one agent's.
    pub fn offers(&self, framework: Option<FrameworkId>, agent: Option<AgentId>) -> Vec<Offer> {
        self.offers
            .values()
            .filter(|r| framework.is_none_or(|f| r.offer.framework_id == f))
            .filter(|r| agent.is_none_or(|a| r.offer.agent_id == a))
            .map(|r| r.offer.clone())
            .collect()
    }

    /// Every agent, active or lost.
    pub fn agents(&self) -> Vec<AgentInfo> {
        self.agents
            .iter()
            .map(|(id, a)| AgentInfo {
                agent_id: *id,
                hostname: a.hostname.clone(),
                endpoint: a.endpoint.clone(),
                resources: a.total.clone(),
                used: a.used.clone(),
                offered: a.offered.clone(),
                attributes: a.attributes.clone(),
                state: agent_state_name(a.state).into(),
                registered_at: a.registered_at,
                last_heartbeat_at: a.last_heartbeat_at,
            })
            .collect()
    }

    /// Every framework (placeholders of adopted tasks included, named `""` with role
    /// `_orphans`).
    pub fn frameworks(&self) -> Vec<FrameworkInfo> {
        self.frameworks
            .iter()
            .map(|(id, f)| FrameworkInfo {
                framework_id: *id,
                name: f.name.clone(),
                role: f.role.clone(),
                state: connection_name(f.connection).into(),
                suppressed: f.suppressed,
                failover_timeout_s: f.failover_timeout_s,
                demand: f.demand.clone(),
                used: f.used.clone(),
                offered: f.offered.clone(),
                dominant_share: self.allocator.dominant_share(*id).unwrap_or(0.0),
                active_tasks: f.active_tasks,
                registered_at: f.registered_at,
            })
            .collect()
    }

    /// Every task the books hold, optionally of one framework.
    pub fn tasks(&self, framework: Option<FrameworkId>) -> Vec<TaskInfo> {
        self.tasks
            .iter()
            .filter(|((f, _), _)| framework.is_none_or(|fw| *f == fw))
            .map(|((fw, id), t)| TaskInfo {
                task_id: id.clone(),
                name: t.name.clone(),
                framework_id: *fw,
                agent_id: t.agent_id,
                state: t.state(),
                resources: t.resources.clone(),
                message: t.latest.message.clone(),
                exit_code: t.latest.exit_code,
                updated_at: t.latest.timestamp,
            })
            .collect()
    }

    /// The role tree with weights, allocations and H-DRF dominant shares.
    pub fn roles(&self) -> RoleNode {
        self.allocator.role_tree()
    }

    /// Everything at once.
    pub fn cluster_state(&self) -> ClusterState {
        ClusterState {
            agents: self.agents(),
            frameworks: self.frameworks(),
            tasks: self.tasks(None),
            roles: self.roles(),
            offers: self.offers(None, None),
        }
    }

    /// Counts for the metrics page.
    pub fn gauges(&self) -> Gauges {
        let mut g = Gauges {
            outstanding_offers: self.offers.len(),
            ..Gauges::default()
        };
        for t in self.tasks.values() {
            *g.tasks_by_state.entry(t.state().as_str()).or_default() += 1;
        }
        for a in self.agents.values() {
            *g.agents_by_state
                .entry(agent_state_name(a.state))
                .or_default() += 1;
        }
        for f in self.frameworks.values() {
            *g.frameworks_by_state
                .entry(connection_name(f.connection))
                .or_default() += 1;
        }
        fn walk(node: &RoleNode, out: &mut Vec<(String, f64)>) {
            out.push((node.path.clone(), node.dominant_share));
            for c in &node.children {
                walk(c, out);
            }
        }
        walk(&self.roles(), &mut g.role_shares);
        g
    }
}

fn agent_state_name(s: AgentState) -> &'static str {
    match s {
        AgentState::Active => "active",
        AgentState::Lost => "lost",
    }
}

pub(super) fn connection_name(c: Connection) -> &'static str {
    match c {
        Connection::Connected { .. } => "connected",
        Connection::Disconnected { .. } => "disconnected",
    }
}
