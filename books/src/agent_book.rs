//! The agents in the books, as a sub-book with private fields: each agent's record, the
//! agents the durable registry knew at load that have not re-registered yet, and the dynamic
//! reservations by agent (kept while an agent is away, forgotten with it). It owns three
//! rules: an agent that registers is no longer awaited, a dynamic reservation that becomes
//! empty is dropped, and forgetting an agent forgets its dynamic reservations.

use std::collections::BTreeMap;

use protocol::{AgentId, Resources, RolePath, Timestamp};

use crate::records::StoredAgent;
use crate::{AgentRecord, AgentState, Now};

/// The agents in the books. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct AgentBook {
    agents: BTreeMap<AgentId, AgentRecord>,
    /// Agents the durable registry knew at load that have not re-registered yet, with when
    /// they were loaded (see `State::check_agents`).
    awaited: BTreeMap<AgentId, (StoredAgent, u64)>,
    /// Dynamic reservations by agent and role, kept (and persisted) while the agent is away
    /// and applied when it registers (`reservations.rs`). No empty entries.
    dynamic: BTreeMap<AgentId, BTreeMap<RolePath, Resources>>,
}

impl AgentBook {
    /// How many agents the books hold (active or lost).
    pub(crate) fn len(&self) -> usize {
        self.agents.len()
    }

    /// Whether the books hold agent `id`.
    pub(crate) fn contains(&self, id: AgentId) -> bool {
        self.agents.contains_key(&id)
    }

    /// Agent `id`'s record.
    pub(crate) fn get(&self, id: AgentId) -> Option<&AgentRecord> {
        self.agents.get(&id)
    }

    /// Agent `id`'s record, to change it.
    pub(crate) fn get_mut(&mut self, id: AgentId) -> Option<&mut AgentRecord> {
        self.agents.get_mut(&id)
    }

    /// Agent `id`'s record if it is active.
    pub(crate) fn active(&self, id: AgentId) -> Option<&AgentRecord> {
        self.agents
            .get(&id)
            .filter(|a| a.state == AgentState::Active)
    }

    /// Every agent, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&AgentId, &AgentRecord)> + '_ {
        self.agents.iter()
    }

    /// Every agent's record, in id order.
    pub(crate) fn records(&self) -> impl Iterator<Item = &AgentRecord> + '_ {
        self.agents.values()
    }

    /// Agent `id` registers (or re-registers): its record, a new one (active since `now`,
    /// everything else empty) if the books do not hold it, for the caller to fill in. It is
    /// no longer awaited; returns also the drain deadline the registry kept for it.
    pub(crate) fn register(
        &mut self,
        id: AgentId,
        now: &Now,
    ) -> (&mut AgentRecord, Option<Timestamp>) {
        let stored_drain = self
            .awaited
            .remove(&id)
            .and_then(|(stored, _)| stored.drain_deadline);
        let record = self.agents.entry(id).or_insert_with(|| AgentRecord {
            hostname: String::new(),
            endpoint: String::new(),
            api_token: None,
            total: Default::default(),
            attributes: Default::default(),
            gpu_devices: Vec::new(),
            state: AgentState::Active,
            registered_at: now.wall,
            last_heartbeat_at: now.wall,
            last_heartbeat_ms: now.ms,
            owner: None,
            drain: None,
            static_reservations: Vec::new(),
        });
        (record, stored_drain)
    }

    /// Adds (or replaces) agent `id`'s record.
    pub(crate) fn insert(&mut self, id: AgentId, record: AgentRecord) {
        self.agents.insert(id, record);
    }

    /// Forgets agent `id` and its dynamic reservations; returns the roles those were for (the
    /// caller persists their removal), empty if it had none.
    pub(crate) fn forget(&mut self, id: AgentId) -> Vec<RolePath> {
        self.agents.remove(&id);
        self.dynamic
            .remove(&id)
            .map(|d| d.into_keys().collect())
            .unwrap_or_default()
    }

    /// What the durable registry keeps of agent `id` (with its drain, if any), as last seen
    /// at `last_seen`.
    pub(crate) fn stored(&self, id: AgentId, last_seen: Timestamp) -> Option<StoredAgent> {
        let a = self.agents.get(&id)?;
        Some(StoredAgent {
            id,
            hostname: a.hostname.clone(),
            endpoint: a.endpoint.clone(),
            last_seen,
            drain_deadline: a.drain.as_ref().map(|d| d.deadline),
        })
    }

    /// What the registry holds of agent `id`: the record loaded for it while it is awaited,
    /// else the one its registration wrote (stamped with when it registered).
    pub(crate) fn kept(&self, id: AgentId) -> Option<StoredAgent> {
        match self.awaited.get(&id) {
            Some((stored, _)) => Some(stored.clone()),
            None => {
                let at = self.agents.get(&id)?.registered_at;
                self.stored(id, at)
            }
        }
    }

    /// Awaits an agent the durable registry kept, from `since_ms`.
    pub(crate) fn await_stored(&mut self, agent: StoredAgent, since_ms: u64) {
        self.awaited.insert(agent.id, (agent, since_ms));
    }

    /// How many agents are awaited.
    pub(crate) fn awaited_len(&self) -> usize {
        self.awaited.len()
    }

    /// Whether agent `id` is awaited.
    pub(crate) fn is_awaited(&self, id: AgentId) -> bool {
        self.awaited.contains_key(&id)
    }

    /// The awaited agents and the endpoints the registry kept for them, in id order.
    pub(crate) fn awaited_endpoints(&self) -> Vec<(AgentId, String)> {
        self.awaited
            .iter()
            .map(|(id, (stored, _))| (*id, stored.endpoint.clone()))
            .collect()
    }

    /// Stops awaiting the agents awaited for longer than `limit_ms` at `now_ms`; returns them.
    pub(crate) fn take_overdue(&mut self, now_ms: u64, limit_ms: u64) -> Vec<StoredAgent> {
        let overdue: Vec<AgentId> = self
            .awaited
            .iter()
            .filter(|(_, (_, since))| now_ms.saturating_sub(*since) > limit_ms)
            .map(|(id, _)| *id)
            .collect();
        overdue
            .into_iter()
            .filter_map(|id| self.awaited.remove(&id).map(|(stored, _)| stored))
            .collect()
    }

    /// Agent `agent`'s dynamic reservations, by role.
    pub(crate) fn dynamic_of(
        &self,
        agent: AgentId,
    ) -> impl Iterator<Item = (&RolePath, &Resources)> + '_ {
        self.dynamic.get(&agent).into_iter().flatten()
    }

    /// Agent `agent`'s dynamic reservation for `role`, if any.
    pub(crate) fn dynamic_for(&self, agent: AgentId, role: &RolePath) -> Option<&Resources> {
        self.dynamic.get(&agent).and_then(|d| d.get(role))
    }

    /// Whether no agent has a dynamic reservation.
    #[cfg(test)]
    pub(crate) fn no_dynamic_reservations(&self) -> bool {
        self.dynamic.is_empty()
    }

    /// Sets agent `agent`'s dynamic reservation for `role` (empty: none).
    pub(crate) fn set_dynamic(&mut self, agent: AgentId, role: &RolePath, res: &Resources) {
        let entry = self.dynamic.entry(agent).or_default();
        if res.is_empty() {
            entry.remove(role);
        } else {
            entry.insert(role.clone(), res.clone());
        }
        if entry.is_empty() {
            self.dynamic.remove(&agent);
        }
    }

    /// Agent `agent`'s static reservation for `role` (as it registered it).
    pub(crate) fn static_reserved(&self, agent: AgentId, role: &RolePath) -> Resources {
        let mut sum = Resources::new();
        for r in self
            .agents
            .get(&agent)
            .into_iter()
            .flat_map(|a| &a.static_reservations)
            .filter(|r| r.role == *role)
        {
            sum.add_assign(&r.resources);
        }
        sum
    }

    /// Static plus dynamic reservation per role of `agent`.
    pub(crate) fn reserved_per_role(&self, agent: AgentId) -> BTreeMap<RolePath, Resources> {
        let mut out: BTreeMap<RolePath, Resources> = BTreeMap::new();
        for r in self
            .agents
            .get(&agent)
            .into_iter()
            .flat_map(|a| &a.static_reservations)
        {
            out.entry(r.role.clone())
                .or_default()
                .add_assign(&r.resources);
        }
        for (role, res) in self.dynamic_of(agent) {
            out.entry(role.clone()).or_default().add_assign(res);
        }
        out
    }
}
