//! Reads of the books for the dashboard: one history sample ([`State::history_sample`]), a
//! page of agents ([`State::agent_page`]), and one agent's tasks ([`State::agent_tasks`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use protocol::messages::AgentInfo;
use protocol::{AgentId, TaskState};

use super::views::ResourceUse;
use super::State;

/// At most this many roles and frameworks (the largest shares) go into one sample, so a
/// sample stays small however many frameworks register.
pub const SAMPLE_MAX_SHARES: usize = 32;

/// What the books say at one moment, for the history ring (the coordinator's `history`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct BookSample {
    /// Outstanding offers.
    pub outstanding_offers: usize,
    /// Tasks by state name.
    pub tasks: BTreeMap<&'static str, usize>,
    /// Agents by state (`active`, `lost`).
    pub agents: BTreeMap<&'static str, usize>,
    /// Each resource across the active agents.
    pub resources: BTreeMap<String, ResourceUse>,
    /// Dominant share per role path (the root is `""`), the [`SAMPLE_MAX_SHARES`] largest.
    pub roles: BTreeMap<String, f64>,
    /// Dominant share per framework id, the [`SAMPLE_MAX_SHARES`] largest.
    pub frameworks: BTreeMap<String, f64>,
}

/// Keeps the `max` entries with the largest values.
fn largest(mut all: Vec<(String, f64)>, max: usize) -> BTreeMap<String, f64> {
    if all.len() > max {
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(max);
    }
    all.into_iter().collect()
}

impl State {
    /// One sample for the history ring: O(agents + roles + frameworks) (the books keep the
    /// tasks counted by state), no serialization.
    pub fn history_sample(&self) -> BookSample {
        let mut s = BookSample {
            outstanding_offers: self.offers.len(),
            ..BookSample::default()
        };
        for (state, n) in TaskState::ALL.iter().zip(self.tasks.state_counts()) {
            if *n > 0 {
                s.tasks.insert(state.as_str(), *n);
            }
        }
        for a in self.agents.records() {
            *s.agents.entry(a.state.name()).or_default() += 1;
        }
        s.resources = self.resource_use();
        let mut roles = Vec::new();
        fn walk(node: &protocol::messages::RoleNode, out: &mut Vec<(String, f64)>) {
            out.push((node.path.clone(), node.dominant_share));
            for c in &node.children {
                walk(c, out);
            }
        }
        walk(&self.roles(), &mut roles);
        s.roles = largest(roles, SAMPLE_MAX_SHARES);
        let allocator = self.ledger.allocator();
        let frameworks = self
            .frameworks
            .iter()
            .map(|(id, _)| (id.to_string(), allocator.dominant_share(*id).unwrap_or(0.0)))
            .collect();
        s.frameworks = largest(frameworks, SAMPLE_MAX_SHARES);
        s
    }

    /// Each resource's total, used and offered amounts across the active agents.
    pub fn resource_use(&self) -> BTreeMap<String, ResourceUse> {
        // Summed in thousandths under borrowed names; named and scaled once at the end.
        let mut sums: BTreeMap<&str, [u128; 3]> = BTreeMap::new();
        for (id, a) in self.agents.iter() {
            if a.state != super::AgentState::Active {
                continue;
            }
            let held = self.ledger.agent(*id);
            for (name, millis) in a.total.iter() {
                let sum = sums.entry(name.as_str()).or_default();
                sum[0] += u128::from(millis);
                sum[1] += u128::from(held.used.millis(name.as_str()));
                sum[2] += u128::from(held.offered.millis(name.as_str()));
            }
        }
        let units = |millis: u128| millis as f64 / protocol::resources::MILLIS_PER_UNIT as f64;
        sums.into_iter()
            .map(|(name, [total, used, offered])| {
                let r = ResourceUse {
                    total: units(total),
                    used: units(used),
                    offered: units(offered),
                };
                (name.to_owned(), r)
            })
            .collect()
    }

    /// Agents `offset..offset + limit` in id order, and how many there are.
    pub fn agent_page(&self, offset: usize, limit: usize) -> (Vec<AgentInfo>, usize) {
        let page = self
            .agents
            .iter()
            .skip(offset)
            .take(limit)
            .map(|(id, a)| self.agent_info(*id, a))
            .collect();
        (page, self.agents.len())
    }

    /// Agent `id` as operators see it, if the books know it.
    pub fn agent(&self, id: AgentId) -> Option<AgentInfo> {
        self.agents.get(id).map(|a| self.agent_info(id, a))
    }

    /// The first `limit` tasks on agent `id` (as cached JSON, see [`State::tasks_json`]),
    /// and how many it has in all.
    pub fn agent_tasks(&self, id: AgentId, limit: usize) -> (Vec<Arc<str>>, usize) {
        let mut tasks = Vec::new();
        let mut count = 0;
        for ((fw, tid), t) in self.tasks.on_agent(id) {
            if count < limit {
                tasks.push(super::views::task_json(*fw, tid, t));
            }
            count += 1;
        }
        (tasks, count)
    }
}
