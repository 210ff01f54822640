//! Agents and the books: who holds what where. Every change keeps, exactly, for every agent
//! `free + sum of held = total`, and for every node `raw = sum of its leaves' allocations`.

use protocol::{AgentId, FrameworkId, Resources};

use super::filters::AgentFilters;
use super::kinds::{add_into, sub_from};
use super::{Agent, Allocator, AllocatorError};

impl Allocator {
    /// Registers an agent; its total joins the cluster capacity `R`.
    pub fn add_agent(&mut self, agent: AgentId, total: &Resources) -> Result<(), AllocatorError> {
        if self.agent_index.contains_key(&agent) {
            return Err(AllocatorError::DuplicateAgent(agent));
        }
        self.kinds.check(total)?;
        let has_gpus = protocol::capability::has_gpus(total);
        let total = self.kinds.dense(total);
        add_into(&mut self.capacity, &total);
        let record = Agent {
            id: agent,
            free: total.clone(),
            total,
            held: Vec::new(),
            filters: AgentFilters::new(),
            version: 0,
            all_blocked_at: None,
            paused: false,
            has_gpus,
            pools: Vec::new(),
            changed: false,
        };
        let slot = match self.free_agent_slots.pop() {
            Some(s) => {
                self.agents[s as usize] = Some(record);
                s
            }
            None => {
                self.agents.push(Some(record));
                (self.agents.len() - 1) as u32
            }
        };
        if let Some(record) = self.agents[slot as usize].as_mut() {
            record.mark(slot, &mut self.changed);
        }
        self.agent_index.insert(agent, slot);
        self.capacity_changed();
        Ok(())
    }

    /// Pauses (`true`) or resumes an agent: a paused agent is skipped by [`Allocator::cycle`]
    /// (a draining agent makes no offers) at the cost of one flag test per agent; its holdings,
    /// releases and capacity are unchanged.
    pub fn set_agent_paused(&mut self, agent: AgentId, paused: bool) -> Result<(), AllocatorError> {
        let slot = self.agent_of(agent)?;
        if let Some(Some(record)) = self.agents.get_mut(slot as usize) {
            if record.paused && !paused {
                // Resumed: its free resources are offered again by the next changed run.
                record.mark(slot, &mut self.changed);
            }
            record.paused = paused;
        }
        Ok(())
    }

    /// Whether the agent is paused (`None` for an unknown agent).
    pub fn agent_paused(&self, agent: AgentId) -> Option<bool> {
        let slot = *self.agent_index.get(&agent)?;
        self.agents.get(slot as usize)?.as_ref().map(|a| a.paused)
    }

    /// Removes the agent, releasing everything allocated on it; returns what each framework lost
    /// (in the order the frameworks first got resources there).
    pub fn remove_agent(
        &mut self,
        agent: AgentId,
    ) -> Result<Vec<(FrameworkId, Resources)>, AllocatorError> {
        let slot = self.agent_of(agent)?;
        let Some(record) = self.agents[slot as usize].take() else {
            return Err(AllocatorError::UnknownAgent(agent));
        };
        self.agent_index.remove(&agent);
        self.free_agent_slots.push(slot);
        let mut lost = Vec::new();
        for (leaf, held) in &record.held {
            self.unbook_tree(*leaf, held);
            if let Some(l) = &self.tree.nodes[*leaf as usize].leaf {
                lost.push((l.id, self.kinds.resources(held)));
            }
        }
        for f in &record.filters.list {
            self.refused.release(f.refused);
        }
        sub_from(&mut self.capacity, &record.total);
        self.capacity_changed();
        Ok(lost)
    }

    /// Allocates `res` on `agent` to `fw` (an offer or a task) from the unreserved pool. Fails,
    /// changing nothing, if `res` does not fit in the agent's unreserved free resources (see
    /// [`Allocator::allocate_in`]).
    pub fn allocate(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
    ) -> Result<(), AllocatorError> {
        self.allocate_in(fw, agent, res, None)
    }

    /// Returns `res` held by `fw` on `agent` to the unreserved pool. Fails, changing nothing, if
    /// `fw` holds less than that there outside reserved pools (see [`Allocator::release_in`]).
    pub fn release(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
    ) -> Result<(), AllocatorError> {
        self.release_in(fw, agent, res, None)
    }

    /// The agent's free resources (total minus allocated).
    pub fn agent_free(&self, agent: AgentId) -> Option<Resources> {
        let slot = *self.agent_index.get(&agent)?;
        let a = self.agents.get(slot as usize)?.as_ref()?;
        Some(self.kinds.resources(&a.free))
    }

    /// Whether anything of the agent's is free (unreserved or in a reservation), without
    /// building the resources: a cheap first look for checks that visit every agent. False for
    /// an unknown agent.
    pub fn agent_has_free(&self, agent: AgentId) -> bool {
        let Some(&slot) = self.agent_index.get(&agent) else {
            return false;
        };
        self.agents
            .get(slot as usize)
            .and_then(Option::as_ref)
            .is_some_and(|a| !crate::kinds::is_zero(&a.free))
    }

    /// The agent's total resources.
    pub fn agent_total(&self, agent: AgentId) -> Option<Resources> {
        let slot = *self.agent_index.get(&agent)?;
        let a = self.agents.get(slot as usize)?.as_ref()?;
        Some(self.kinds.resources(&a.total))
    }

    /// What the framework holds, summed over all agents.
    pub fn allocation(&self, fw: FrameworkId) -> Option<Resources> {
        let leaf = *self.tree.frameworks.get(&fw)?;
        Some(self.kinds.resources(&self.tree.nodes[leaf as usize].raw))
    }

    /// The cluster capacity `R`: the sum of the agents' totals.
    pub fn capacity(&self) -> Resources {
        self.kinds.resources(&self.capacity)
    }

    /// Books `v` (which fits in the agent's free) to `leaf` on agent `slot`.
    pub(crate) fn book(&mut self, leaf: u32, slot: u32, v: &[u64]) {
        if let Some(record) = self.agents[slot as usize].as_mut() {
            record.touch(slot, &mut self.changed);
            sub_from(&mut record.free, v);
            match record.held.iter_mut().find(|(l, _)| *l == leaf) {
                Some((_, h)) => add_into(h, v),
                None => record.held.push((leaf, v.to_vec())),
            }
        }
        let mut n = leaf;
        while n != super::tree::NONE {
            let node = &mut self.tree.nodes[n as usize];
            add_into(&mut node.raw, v);
            n = node.parent;
        }
        self.allocation_changed(leaf);
    }

    /// Returns `v`, no longer held by `leaf` (already removed from the agent's `held`), to agent
    /// `slot`'s free pool and takes it off the tree.
    pub(crate) fn unbook(&mut self, leaf: u32, slot: u32, v: &[u64]) {
        if let Some(record) = self.agents[slot as usize].as_mut() {
            record.touch(slot, &mut self.changed);
            add_into(&mut record.free, v);
        }
        self.unbook_tree(leaf, v);
    }

    /// Takes `v` off `leaf`'s allocation and its ancestors' sums.
    pub(crate) fn unbook_tree(&mut self, leaf: u32, v: &[u64]) {
        let mut n = leaf;
        while n != super::tree::NONE {
            let node = &mut self.tree.nodes[n as usize];
            sub_from(&mut node.raw, v);
            n = node.parent;
        }
        self.allocation_changed(leaf);
    }

    /// Hook: a leaf's allocation changed (caches along its path are stale).
    pub(crate) fn allocation_changed(&mut self, leaf: u32) {
        if !self.quotas.is_empty() {
            self.quota_version += 1;
        }
        let nodes = self.tree.nodes.len();
        if let Some(fast) = &mut self.fast {
            fast.allocation_changed(leaf, nodes);
        }
    }

    /// Hook: the capacity changed (every cached share is stale).
    pub(crate) fn capacity_changed(&mut self) {
        self.capacity_version += 1;
    }
}
