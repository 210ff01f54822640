//! Decisions: `pick` (one decision, no change to the books), `cycle` (a pass over agents, allocating),
//! and `explain` ("why was I not offered?").

use protocol::{AgentId, FrameworkId, Resources};

use super::kinds::{is_zero, sub_from, Dense};
use super::reference::Ctx;
use super::tree::ROOT;
use super::{Allocator, BlockReason, Decision, Policy, Sweep};

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

    /// The reference (slow, straight from the specification, `docs/src/internals/algorithms.md`)
    /// version of [`Allocator::pick`], for tests and comparisons. Same answer as `pick`, always.
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

    pub(crate) fn framework_at(&self, leaf: u32) -> Option<FrameworkId> {
        self.tree
            .nodes
            .get(leaf as usize)?
            .leaf
            .as_ref()
            .map(|l| l.id)
    }

    /// The context of one decision on `w` (of agent `slot`, if any), with GPU gating as it
    /// applies to that agent.
    pub(crate) fn ctx<'w>(
        &self,
        slot: Option<u32>,
        w: &'w [u64],
        unknown: bool,
        now: u64,
    ) -> Ctx<'w> {
        Ctx {
            gated: self.gated(slot),
            ..Ctx::new(slot, w, unknown, now)
        }
    }

    /// The decision procedure used by `pick` and `cycle`.
    pub(crate) fn pick_leaf(&mut self, ctx: &Ctx<'_>) -> Option<u32> {
        if ctx.start != ROOT {
            // A reserved pool: H-DRF inside the role's subtree.
            return match self.policy {
                Policy::Hdrf if ctx.nonempty => self.fast_pick(ctx),
                _ if ctx.nonempty => self.reference_hdrf_from(ctx.start, ctx),
                _ => None,
            };
        }
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
    /// all agents in slot order when `None` (a whole [`Sweep::All`] run). For each agent, each
    /// reserved pool with free resources goes to a framework in its role's subtree, then the
    /// unreserved free resources to any framework: each decision allocates the pool's whole
    /// free vector (cut to a limit's headroom under quota). Returns the decisions in order.
    pub fn cycle(&mut self, agents: Option<&[AgentId]>, now: u64) -> Vec<Decision> {
        match agents {
            Some(ids) => {
                let mut out = Vec::new();
                for id in ids {
                    if let Some(&slot) = self.agent_index.get(id) {
                        self.visit(slot, now, &mut out);
                    }
                }
                out
            }
            None => {
                let mut run = self.start_run(Sweep::All);
                self.run_part(&mut run, usize::MAX, now)
            }
        }
    }

    /// The decisions of one cycle on agent `slot`: its reserved pools, then its unreserved
    /// free resources.
    pub(crate) fn cycle_slot(&mut self, slot: u32, now: u64, out: &mut Vec<Decision>) {
        self.sweep_filters(slot, now);
        let memo_key = self.memo_key();
        let Some(Some(agent)) = self.agents.get(slot as usize) else {
            return;
        };
        if agent.paused {
            return;
        }
        let agent_id = agent.id;
        let w = if agent.pools.is_empty() {
            if is_zero(&agent.free)
                || agent.all_blocked_at == Some((memo_key.0, memo_key.1, agent.version))
            {
                return;
            }
            // Into the reused vector (`decide_pool` hands it back): no allocation per agent.
            let mut w = std::mem::take(&mut self.buf);
            w.clone_from(&agent.free);
            w
        } else {
            self.cycle_pools(slot, agent_id, memo_key, now, out);
            let w = self.unreserved_free_of(slot).into_owned();
            let Some(Some(agent)) = self.agents.get(slot as usize) else {
                return;
            };
            if is_zero(&w) || agent.all_blocked_at == Some((memo_key.0, memo_key.1, agent.version))
            {
                return;
            }
            w
        };
        self.decide_pool(slot, agent_id, None, w, memo_key, now, out);
    }

    /// The reserved pools' decisions on agent `slot` (one pool after another, in the order the
    /// reservations were made).
    fn cycle_pools(
        &mut self,
        slot: u32,
        agent_id: AgentId,
        memo_key: (u64, u64),
        now: u64,
        out: &mut Vec<Decision>,
    ) {
        let n = self.agents[slot as usize]
            .as_ref()
            .map_or(0, |a| a.pools.len());
        for p in 0..n {
            let Some(Some(agent)) = self.agents.get(slot as usize) else {
                return;
            };
            let Some(pool) = agent.pools.get(p) else {
                return;
            };
            if is_zero(&pool.free)
                || pool.all_blocked_at == Some((memo_key.0, memo_key.1, agent.version))
            {
                continue;
            }
            let w = pool.free.clone();
            self.decide_pool(slot, agent_id, Some(p), w, memo_key, now, out);
        }
    }

    /// Decides `w`, the free resources of pool `pool` (`None`: unreserved) of agent `slot`:
    /// one decision, or (under a limit that cut the offer) one per framework until the pool is
    /// empty or no one can take the rest. Each cut leaves its role at its limit in some kind,
    /// so the loop ends.
    #[allow(clippy::too_many_arguments)]
    fn decide_pool(
        &mut self,
        slot: u32,
        agent_id: AgentId,
        pool: Option<usize>,
        mut w: Dense,
        memo_key: (u64, u64),
        now: u64,
        out: &mut Vec<Decision>,
    ) {
        let quota = self.has_quota();
        let (start, reservation) = match pool.and_then(|p| {
            self.agents[slot as usize]
                .as_ref()
                .and_then(|a| a.pools.get(p))
        }) {
            Some(p) => (p.node, Some(p.role.clone())),
            None => (ROOT, None),
        };
        loop {
            let ctx = Ctx {
                start,
                ..self.ctx(Some(slot), &w, false, now)
            };
            let Some(leaf) = self.pick_leaf(&ctx) else {
                if let Some(Some(agent)) = self.agents.get_mut(slot as usize) {
                    let memo = Some((memo_key.0, memo_key.1, agent.version));
                    match pool.and_then(|p| agent.pools.get_mut(p)) {
                        Some(pool) => pool.all_blocked_at = memo,
                        None => agent.all_blocked_at = memo,
                    }
                }
                break;
            };
            let Some(fw) = self.framework_at(leaf) else {
                break;
            };
            if !quota {
                // The whole pool goes (no limit can cut it): one decision, and no copy of `w`.
                if !is_zero(&w) {
                    self.book_in(leaf, slot, pool, &w);
                    out.push(Decision {
                        agent: agent_id,
                        framework: fw,
                        resources: self.kinds.resources(&w),
                        reservation,
                    });
                }
                break;
            }
            let give = self.limit_cut(leaf, &w);
            if is_zero(&give) {
                break;
            }
            self.book_in(leaf, slot, pool, &give);
            out.push(Decision {
                agent: agent_id,
                framework: fw,
                resources: self.kinds.resources(&give),
                reservation: reservation.clone(),
            });
            if give == w {
                break;
            }
            sub_from(&mut w, &give);
            if is_zero(&w) {
                break;
            }
        }
        // Its room is reused by the next agent's offer.
        self.buf = w;
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
                agent.touch(slot, &mut self.changed);
            }
        }
    }

    /// Why `fw` would not be picked for `agent`'s free resources at `now`; `None` when it is
    /// eligible (it may still lose to a framework with a lower share).
    pub fn explain(&self, fw: FrameworkId, agent: AgentId, now: u64) -> Option<BlockReason> {
        self.explain_with(fw, agent, now, |leaf, ctx, free, reserved| {
            match self.leaf_block(leaf, ctx) {
                Some(
                    r @ (BlockReason::Inactive | BlockReason::Suppressed | BlockReason::Sated),
                ) => Some(r),
                _ if is_zero(free) => Some(nothing_free(reserved)),
                None => self.quota_block(leaf, ctx),
                other => other,
            }
        })
    }

    /// The agent-specific answer of [`Allocator::explain`] (nothing free, a decline filter, the
    /// demand hint, a quota limit, another role's unmet guarantee), whether or not the framework is subscribed or suppressed: what blocks it on
    /// this agent, or would once it subscribes and revives. `None`: it can use the agent.
    pub fn explain_agent(&self, fw: FrameworkId, agent: AgentId, now: u64) -> Option<BlockReason> {
        self.explain_with(fw, agent, now, |leaf, ctx, free, reserved| {
            if is_zero(free) {
                Some(nothing_free(reserved))
            } else {
                self.leaf_agent_block(leaf, ctx).or_else(|| {
                    (self.has_quota() && ctx.start == ROOT)
                        .then(|| self.guarantee_ahead(leaf, ctx))
                        .flatten()
                        .map(|role| BlockReason::GuaranteeFirst { role })
                })
            }
        })
    }

    /// Looks up the framework's leaf and the free resources it could be offered on the agent
    /// (the unreserved ones, or else a reserved pool of its role's subtree with something
    /// free), then asks `why`; the last argument names a role whose reservation holds the
    /// agent's free resources when none of them is open to the framework.
    fn explain_with(
        &self,
        fw: FrameworkId,
        agent: AgentId,
        now: u64,
        why: impl FnOnce(u32, &Ctx<'_>, &[u64], Option<String>) -> Option<BlockReason>,
    ) -> Option<BlockReason> {
        let Some(&leaf) = self.tree.frameworks.get(&fw) else {
            return Some(BlockReason::UnknownFramework);
        };
        let Some(&slot) = self.agent_index.get(&agent) else {
            return Some(BlockReason::UnknownAgent);
        };
        let record = self.agents.get(slot as usize)?.as_ref()?;
        if record.pools.is_empty() {
            let ctx = self.ctx(Some(slot), &record.free, false, now);
            return why(leaf, &ctx, &record.free, None);
        }
        let unreserved = self.unreserved_free_of(slot);
        let mine = record
            .pools
            .iter()
            .find(|p| !is_zero(&p.free) && self.is_ancestor(p.node, leaf));
        let (w, start) = match mine {
            Some(p) if is_zero(&unreserved) => (p.free.clone(), p.node),
            _ => (unreserved.into_owned(), ROOT),
        };
        let other = record
            .pools
            .iter()
            .find(|p| !is_zero(&p.free) && !self.is_ancestor(p.node, leaf))
            .map(|p| p.role.to_string());
        let ctx = Ctx {
            start,
            ..self.ctx(Some(slot), &w, false, now)
        };
        why(leaf, &ctx, &w, other)
    }
}

/// `NothingFree`, or `ReservedFor` when what is free is reserved for another role.
fn nothing_free(reserved: Option<String>) -> BlockReason {
    match reserved {
        Some(role) => BlockReason::ReservedFor { role },
        None => BlockReason::NothingFree,
    }
}
