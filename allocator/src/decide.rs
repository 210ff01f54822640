//! Decisions: `pick` (one decision, no change to the books), `cycle` (a pass over agents, allocating),
//! and `explain` ("why was I not offered?").

use protocol::{AgentId, FrameworkId, Resources};

use super::kinds::{is_zero, sub_from};
use super::reference::Ctx;
use super::{Allocator, BlockReason, Decision, Policy};

impl Allocator {
    /// One decision: which framework gets `W = free` (on `agent`, whose filters apply; `None` means
    /// no agent, so no filters). Changes no books (`&mut self` only brings the fast path's caches
    /// up to date). `None` when every framework is blocked or `W` is empty.
    pub fn pick(
        &mut self,
        agent: Option<AgentId>,
        free: &Resources,
        now: u64,
    ) -> Option<FrameworkId> {
        let slot = match agent {
            Some(a) => Some(*self.agent_index.get(&a)?),
            None => None,
        };
        let (w, unknown) = self.kinds.dense_lookup(free);
        let ctx = self.ctx(slot, &w, unknown, now);
        let leaf = self.pick_leaf(&ctx)?;
        self.framework_at(leaf)
    }

    /// The reference (slow, straight from ALGORITHMS.md) version of [`Allocator::pick`], for
    /// tests and comparisons. Same answer as `pick`, always.
    pub fn pick_reference(
        &self,
        agent: Option<AgentId>,
        free: &Resources,
        now: u64,
    ) -> Option<FrameworkId> {
        let slot = match agent {
            Some(a) => Some(*self.agent_index.get(&a)?),
            None => None,
        };
        let (w, unknown) = self.kinds.dense_lookup(free);
        let ctx = self.ctx(slot, &w, unknown, now);
        let leaf = match self
            .has_quota()
            .then(|| self.guarantee_pick(&ctx))
            .flatten()
        {
            Some(l) => l,
            None => self.reference_pick(&ctx)?,
        };
        self.framework_at(leaf)
    }

    fn framework_at(&self, leaf: u32) -> Option<FrameworkId> {
        self.tree
            .nodes
            .get(leaf as usize)?
            .leaf
            .as_ref()
            .map(|l| l.id)
    }

    /// The context of one decision on `w` (of agent `slot`, if any), with GPU gating as it
    /// applies to that agent.
    fn ctx<'w>(&self, slot: Option<u32>, w: &'w [u64], unknown: bool, now: u64) -> Ctx<'w> {
        Ctx {
            gated: self.gated(slot),
            ..Ctx::new(slot, w, unknown, now)
        }
    }

    /// The decision procedure used by `pick` and `cycle`.
    pub(crate) fn pick_leaf(&mut self, ctx: &Ctx<'_>) -> Option<u32> {
        if self.has_quota() {
            if let Some(leaf) = self.guarantee_pick(ctx) {
                return Some(leaf);
            }
        }
        match self.policy {
            Policy::Hdrf if ctx.nonempty => self.fast_pick(ctx),
            _ => self.reference_pick(ctx),
        }
    }

    /// One allocation cycle over `agents` (in the order given; unknown ids are skipped), or over
    /// all agents in slot order when `None`. For each agent with non-empty free resources, picks a
    /// framework and allocates the agent's whole free vector to it. Returns the decisions in order.
    pub fn cycle(&mut self, agents: Option<&[AgentId]>, now: u64) -> Vec<Decision> {
        let slots: Vec<u32> = match agents {
            Some(ids) => ids
                .iter()
                .filter_map(|a| self.agent_index.get(a).copied())
                .collect(),
            None => (0..self.agents.len() as u32).collect(),
        };
        let mut out = Vec::new();
        for slot in slots {
            self.sweep_filters(slot, now);
            // Under quota, what roles hold (`quota_version`) also decides who is blocked; both
            // counters only grow, so their sum changes whenever either does.
            let memo_key = (
                self.tree.shape_version,
                self.eligibility_version.wrapping_add(self.quota_version),
            );
            let Some(Some(agent)) = self.agents.get(slot as usize) else {
                continue;
            };
            let quota = self.has_quota();
            if agent.paused
                || is_zero(&agent.free)
                || agent.all_blocked_at == Some((memo_key.0, memo_key.1, agent.version))
            {
                continue;
            }
            let agent_id = agent.id;
            let mut w = agent.free.clone();
            // One decision, or (under a limit that cut the offer) one per framework until the
            // agent is empty or no one can take the rest: each cut leaves its role at its limit
            // in some kind, so the loop ends.
            loop {
                let ctx = self.ctx(Some(slot), &w, false, now);
                let Some(leaf) = self.pick_leaf(&ctx) else {
                    if let Some(Some(agent)) = self.agents.get_mut(slot as usize) {
                        agent.all_blocked_at = Some((memo_key.0, memo_key.1, agent.version));
                    }
                    break;
                };
                let Some(fw) = self.framework_at(leaf) else {
                    break;
                };
                let give = if quota {
                    self.limit_cut(leaf, &w)
                } else {
                    w.clone()
                };
                if is_zero(&give) {
                    break;
                }
                self.book(leaf, slot, &give);
                out.push(Decision {
                    agent: agent_id,
                    framework: fw,
                    resources: self.kinds.resources(&give),
                });
                if give == w {
                    break;
                }
                sub_from(&mut w, &give);
                if is_zero(&w) {
                    break;
                }
            }
        }
        out
    }

    /// Drops agent `slot`'s filters that expired by `now`.
    pub(crate) fn sweep_filters(&mut self, slot: u32, now: u64) {
        if let Some(Some(agent)) = self.agents.get_mut(slot as usize) {
            let refused = &mut self.refused;
            let mut dropped = false;
            agent.filters.sweep(&self.tree, now, |f| {
                refused.release(f.refused);
                dropped = true;
            });
            if dropped {
                agent.version += 1;
            }
        }
    }

    /// Why `fw` would not be picked for `agent`'s free resources at `now`; `None` when it is
    /// eligible (it may still lose to a framework with a lower share).
    pub fn explain(&self, fw: FrameworkId, agent: AgentId, now: u64) -> Option<BlockReason> {
        self.explain_with(fw, agent, now, |leaf, ctx, free| {
            match self.leaf_block(leaf, ctx) {
                Some(r @ (BlockReason::Inactive | BlockReason::Suppressed)) => Some(r),
                _ if is_zero(free) => Some(BlockReason::NothingFree),
                None => self.quota_block(leaf, ctx),
                other => other,
            }
        })
    }

    /// The agent-specific answer of [`Allocator::explain`] (nothing free, a decline filter, the
    /// demand hint, a quota limit, another role's unmet guarantee), whether or not the framework is subscribed or suppressed: what blocks it on
    /// this agent, or would once it subscribes and revives. `None`: it can use the agent.
    pub fn explain_agent(&self, fw: FrameworkId, agent: AgentId, now: u64) -> Option<BlockReason> {
        self.explain_with(fw, agent, now, |leaf, ctx, free| {
            if is_zero(free) {
                Some(BlockReason::NothingFree)
            } else {
                self.leaf_agent_block(leaf, ctx).or_else(|| {
                    self.has_quota()
                        .then(|| self.guarantee_ahead(leaf, ctx))
                        .flatten()
                        .map(|role| BlockReason::GuaranteeFirst { role })
                })
            }
        })
    }

    /// Looks up the framework's leaf and the agent's free resources, then asks `why`.
    fn explain_with(
        &self,
        fw: FrameworkId,
        agent: AgentId,
        now: u64,
        why: impl FnOnce(u32, &Ctx<'_>, &[u64]) -> Option<BlockReason>,
    ) -> Option<BlockReason> {
        let Some(&leaf) = self.tree.frameworks.get(&fw) else {
            return Some(BlockReason::UnknownFramework);
        };
        let Some(&slot) = self.agent_index.get(&agent) else {
            return Some(BlockReason::UnknownAgent);
        };
        let record = self.agents.get(slot as usize)?.as_ref()?;
        let ctx = self.ctx(Some(slot), &record.free, false, now);
        why(leaf, &ctx, &record.free)
    }
}
