//! The decision procedures written straight from the specification
//! (`docs/src/internals/algorithms.md`), recomputing everything for every
//! decision. Slow (O(tree) per decision) but obviously right: the fast path is tested against it,
//! decision for decision, and `hdrf-sim` can run on it.

use super::kinds::{at, fits};
use super::numeric;
use super::tree::ROOT;
use super::{Allocator, BlockReason, FilterMode, Policy};

/// One decision's inputs: the agent (for filters), `W` and the time.
#[derive(Debug, Clone)]
pub(crate) struct Ctx<'a> {
    pub(crate) agent: Option<u32>,
    pub(crate) w: &'a [u64],
    /// `W` holds a kind the allocator has never seen (no filter can cover it).
    pub(crate) w_unknown: bool,
    pub(crate) now: u64,
    /// `W` has some non-zero amount.
    pub(crate) nonempty: bool,
    /// GPU gating applies: gating is on and the agent's total has GPUs, so leaves without the
    /// capability are blocked (set by [`Allocator::gated`] after `new`).
    pub(crate) gated: bool,
    /// Where the H-DRF walk starts: the root, or a reserved pool's role node (only frameworks
    /// in that subtree can be picked).
    pub(crate) start: u32,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(agent: Option<u32>, w: &'a [u64], w_unknown: bool, now: u64) -> Self {
        let nonempty = w.iter().any(|&x| x > 0);
        Self {
            agent,
            w,
            w_unknown,
            now,
            nonempty,
            gated: false,
            start: ROOT,
        }
    }
}

/// The share of `v` (floats) against `total`, over the kinds in `mask` where `total > 0`.
pub(crate) fn share_f(v: &[f64], total: &[u64], mask: &[bool]) -> f64 {
    let mut s = 0.0f64;
    for (j, &t) in total.iter().enumerate() {
        if t > 0 && mask.get(j).copied().unwrap_or(false) {
            let x = v.get(j).copied().unwrap_or(0.0) / t as f64;
            if x > s {
                s = x;
            }
        }
    }
    s
}

/// One node's H-DRF evaluation: vector `x`, weighted share, direction `t`, blocked.
#[derive(Debug, Clone)]
struct HdrfEval {
    x: Vec<u64>,
    ws: f64,
    t: Vec<u64>,
    blocked: bool,
}

impl Allocator {
    /// Why `leaf` is blocked for this decision, if it is (checked in a fixed order).
    pub(crate) fn leaf_block(&self, leaf: u32, ctx: &Ctx<'_>) -> Option<BlockReason> {
        let l = self.tree.nodes[leaf as usize].leaf.as_ref()?;
        if !l.active {
            return Some(BlockReason::Inactive);
        }
        if l.suppressed {
            return Some(BlockReason::Suppressed);
        }
        if l.sated {
            return Some(BlockReason::Sated);
        }
        self.leaf_agent_block(leaf, ctx)
    }

    /// The agent-specific part of [`Allocator::leaf_block`]: GPU gating, a decline filter
    /// covering `W`, or a demand hint that does not fit in it.
    pub(crate) fn leaf_agent_block(&self, leaf: u32, ctx: &Ctx<'_>) -> Option<BlockReason> {
        let l = self.tree.nodes[leaf as usize].leaf.as_ref()?;
        if ctx.gated && !l.gpu_capable {
            return Some(BlockReason::GpuGated);
        }
        if let Some(slot) = ctx.agent {
            if let Some(Some(agent)) = self.agents.get(slot as usize) {
                if let Some(f) = agent.filters.get(leaf) {
                    let refused = self.refused.get(f.refused);
                    if super::filters::covers(refused, f.until, ctx.w, ctx.w_unknown, ctx.now) {
                        return Some(BlockReason::Filtered { until: f.until });
                    }
                }
            }
        }
        if let Some(d) = &l.demand {
            if !fits(d, ctx.w) {
                return Some(BlockReason::DemandDoesNotFit);
            }
        }
        if self.has_quota() {
            if let Some(role) = self.limit_block(leaf, ctx.w) {
                return Some(BlockReason::LimitReached { role });
            }
        }
        None
    }

    /// Whether `leaf` is blocked for the H-DRF *values* of this decision: under
    /// [`FilterMode::SkipOnly`] a decline filter does not count (it only makes the leaf
    /// unpickable, see [`Allocator::leaf_filtered`]).
    fn leaf_blocked_for_values(&self, leaf: u32, ctx: &Ctx<'_>) -> bool {
        match self.filter_mode {
            FilterMode::Exact => self.leaf_block(leaf, ctx).is_some(),
            FilterMode::SkipOnly => {
                let Some(l) = self.tree.nodes[leaf as usize].leaf.as_ref() else {
                    return true;
                };
                !l.active
                    || l.suppressed
                    || l.sated
                    || (ctx.gated && !l.gpu_capable)
                    || l.demand.as_ref().is_some_and(|d| !fits(d, ctx.w))
                    || (self.has_quota() && self.limit_block(leaf, ctx.w).is_some())
            }
        }
    }

    /// Whether a live decline filter of `leaf` on this decision's agent covers `W`.
    pub(crate) fn leaf_filtered(&self, leaf: u32, ctx: &Ctx<'_>) -> bool {
        matches!(
            self.leaf_agent_block(leaf, ctx),
            Some(BlockReason::Filtered { .. })
        )
    }

    /// [`Allocator::reference_pick`], or H-DRF from a reserved pool's role node when `ctx` is
    /// a pool's (the fast path's fallback).
    pub(crate) fn reference_pick_from(&self, ctx: &Ctx<'_>) -> Option<u32> {
        if ctx.start == ROOT {
            self.reference_pick(ctx)
        } else if ctx.nonempty {
            self.reference_hdrf_from(ctx.start, ctx)
        } else {
            None
        }
    }

    /// The reference decision for `ctx` under the allocator's policy.
    pub(crate) fn reference_pick(&self, ctx: &Ctx<'_>) -> Option<u32> {
        if !ctx.nonempty {
            return None;
        }
        match self.policy {
            Policy::Hdrf => self.reference_hdrf(ctx),
            Policy::PlainSum => self.reference_walk(ctx),
            Policy::Drf => self.reference_drf(ctx),
        }
    }

    /// H-DRF straight from the specification (UpdateS bottom-up, then Alloc top-down), in the share
    /// units of `numeric`.
    fn reference_hdrf(&self, ctx: &Ctx<'_>) -> Option<u32> {
        self.reference_hdrf_from(ROOT, ctx)
    }

    /// H-DRF inside the subtree of `start` (the whole tree from the root; a guaranteed role's
    /// subtree for the quota stage).
    pub(crate) fn reference_hdrf_from(&self, start: u32, ctx: &Ctx<'_>) -> Option<u32> {
        let y = numeric::y_kinds(ctx.w, &self.capacity);
        let mut memo: Vec<Option<HdrfEval>> = vec![None; self.tree.nodes.len()];
        self.reference_hdrf_eval(start, ctx, &y, &mut memo);
        if memo[start as usize].as_ref().is_none_or(|e| e.blocked) {
            return None;
        }
        match self.filter_mode {
            FilterMode::Exact => {
                let mut cur = start;
                loop {
                    let node = &self.tree.nodes[cur as usize];
                    if node.leaf.is_some() {
                        return Some(cur);
                    }
                    let mut best: Option<(u32, f64)> = None;
                    for &c in &node.children {
                        let Some(e) = &memo[c as usize] else { continue };
                        if e.blocked {
                            continue;
                        }
                        if best.is_none_or(|(_, b)| e.ws < b) {
                            best = Some((c, e.ws));
                        }
                    }
                    cur = best?.0;
                }
            }
            FilterMode::SkipOnly => self.reference_skip_walk(start, ctx, &memo),
        }
    }

    /// The skip-only walk: the non-blocked children of `n` in (weighted share, position) order,
    /// depth first; the first leaf not filtered on this agent wins.
    fn reference_skip_walk(&self, n: u32, ctx: &Ctx<'_>, memo: &[Option<HdrfEval>]) -> Option<u32> {
        let node = &self.tree.nodes[n as usize];
        if node.leaf.is_some() {
            return (!self.leaf_filtered(n, ctx)).then_some(n);
        }
        let mut order: Vec<(f64, usize, u32)> = node
            .children
            .iter()
            .enumerate()
            .filter_map(|(pos, &c)| {
                let e = memo[c as usize].as_ref()?;
                (!e.blocked).then_some((e.ws, pos, c))
            })
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        order
            .into_iter()
            .find_map(|(_, _, c)| self.reference_skip_walk(c, ctx, memo))
    }

    fn reference_hdrf_eval(
        &self,
        n: u32,
        ctx: &Ctx<'_>,
        y: &[usize],
        memo: &mut Vec<Option<HdrfEval>>,
    ) {
        let node = &self.tree.nodes[n as usize];
        let ky = y.len();
        let (x, blocked) = if node.leaf.is_some() {
            let x: Vec<u64> = y
                .iter()
                .map(|&j| numeric::share_units(at(&node.raw, j), self.capacity[j]))
                .collect();
            (x, self.leaf_blocked_for_values(n, ctx))
        } else {
            let mut m = f64::INFINITY;
            let mut t_sum = vec![0u128; ky];
            let mut g_sum = vec![0u64; ky];
            for &c in &node.children {
                self.reference_hdrf_eval(c, ctx, y, memo);
                let Some(e) = &memo[c as usize] else { continue };
                if e.blocked {
                    numeric::add(&mut g_sum, &e.x);
                } else {
                    m = m.min(e.ws);
                    numeric::add_wide(&mut t_sum, &e.t);
                }
            }
            let mut x = vec![0u64; ky];
            numeric::combine(m, &t_sum, &g_sum, &mut x);
            (x, m.is_infinite())
        };
        let s = numeric::max_entry(&x);
        let ws = numeric::weighted(s, node.weight);
        let mut t = vec![0u64; ky];
        numeric::direction(&x, s, node.weight, &mut t);
        memo[n as usize] = Some(HdrfEval { x, ws, t, blocked });
    }

    /// Plain sums (no rescaling), shares over all kinds: evaluate bottom-up, then walk down.
    fn reference_walk(&self, ctx: &Ctx<'_>) -> Option<u32> {
        let mask = vec![true; self.capacity.len()];
        // Per node: (vector, weighted share, blocked).
        let mut memo: Vec<Option<(Vec<f64>, f64, bool)>> = vec![None; self.tree.nodes.len()];
        self.reference_eval(ROOT, ctx, &mask, &mut memo);
        let mut cur = ROOT;
        loop {
            let node = &self.tree.nodes[cur as usize];
            if node.leaf.is_some() {
                return Some(cur);
            }
            let mut best: Option<(u32, f64)> = None;
            for &c in &node.children {
                let Some((_, ws, blocked)) = &memo[c as usize] else {
                    continue;
                };
                if *blocked {
                    continue;
                }
                if best.is_none_or(|(_, b)| *ws < b) {
                    best = Some((c, *ws));
                }
            }
            cur = best?.0;
        }
    }

    fn reference_eval(
        &self,
        n: u32,
        ctx: &Ctx<'_>,
        mask: &[bool],
        memo: &mut Vec<Option<(Vec<f64>, f64, bool)>>,
    ) {
        let node = &self.tree.nodes[n as usize];
        let kinds = self.capacity.len();
        if node.leaf.is_some() {
            let v: Vec<f64> = (0..kinds).map(|j| at(&node.raw, j) as f64).collect();
            let s = share_f(&v, &self.capacity, mask) / node.weight;
            let blocked = self.leaf_block(n, ctx).is_some();
            memo[n as usize] = Some((v, s, blocked));
            return;
        }
        let mut v = vec![0.0f64; kinds];
        let mut blocked = true;
        for &c in &node.children {
            self.reference_eval(c, ctx, mask, memo);
            if let Some(e) = &memo[c as usize] {
                blocked &= e.2;
                for (acc, x) in v.iter_mut().zip(&e.0) {
                    *acc += x;
                }
            }
        }
        let s = share_f(&v, &self.capacity, mask) / node.weight;
        memo[n as usize] = Some((v, s, blocked));
    }

    /// Flattened weighted DRF over the leaves in tree order.
    fn reference_drf(&self, ctx: &Ctx<'_>) -> Option<u32> {
        let mask: Vec<bool> = ctx.w.iter().map(|&x| x > 0).collect();
        let mut best: Option<(u32, f64)> = None;
        for (leaf, weight) in self.flattened_weights() {
            if self.leaf_block(leaf, ctx).is_some() {
                continue;
            }
            let node = &self.tree.nodes[leaf as usize];
            let v: Vec<f64> = node.raw.iter().map(|&x| x as f64).collect();
            let s = share_f(&v, &self.capacity, &mask) / weight;
            if best.is_none_or(|(_, b)| s < b) {
                best = Some((leaf, s));
            }
        }
        best.map(|(l, _)| l)
    }

    /// Each leaf in tree order with its flattened weight: the product, along its path, of its
    /// weight over the sum of its siblings' weights (itself included).
    pub(crate) fn flattened_weights(&self) -> Vec<(u32, f64)> {
        let mut out = Vec::new();
        let mut stack = vec![(ROOT, 1.0f64)];
        while let Some((n, w)) = stack.pop() {
            let node = &self.tree.nodes[n as usize];
            if node.leaf.is_some() {
                out.push((n, w));
                continue;
            }
            let total: f64 = node
                .children
                .iter()
                .map(|&c| self.tree.nodes[c as usize].weight)
                .sum();
            for &c in node.children.iter().rev() {
                stack.push((c, w * self.tree.nodes[c as usize].weight / total));
            }
        }
        out
    }
}
