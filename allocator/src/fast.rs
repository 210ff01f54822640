//! The fast H-DRF decision: cached node values kept current incrementally, plus per-decision work
//! only on the subtrees where this agent's blocking differs from the cached state.
//!
//! # How it works
//!
//! A *mask cache* (one per kind set `Y`; a few are kept, least recently used dropped) holds, for
//! every node, in the exact arithmetic of `numeric`: its vector `x`, weighted share `ws`,
//! direction `t`, the sums `T` (directions of non-blocked children) and `G` (vectors of blocked
//! children), `rawx` (the sum of its leaves' vectors, i.e. its vector when everything below is
//! blocked), the number of eligible leaves below it, and its eligible children ordered by
//! `(ws, position)` (`order`: a sorted vector, a B-tree set past 64 children), whose first entry
//! is the minimum child. Only agent-independent blocking (inactive, suppressed, sated) is in the
//! cache; a sated flip is replayed like an allocation change (`apply_leaf`), not rebuilt.
//! A change of a leaf's allocation is logged; before its next decision a cache replays the log,
//! updating each leaf's path bottom-up with exact deltas of `T`, `G` and `rawx` and moving the
//! changed child's entry in each parent's order (O(depth x log children) per change, plus a copy
//! of at most 64 entries per level); the root's own vector, share and direction, which nothing
//! reads, are not replayed. Every cached vector holds four entries, zeros past the kinds of `Y`,
//! so the arithmetic runs in fixed-length loops. Shape, weight, eligibility or capacity changes
//! rebuild the cache (O(tree)).
//!
//! A decision for `W` on an agent collects `B`, the eligible leaves blocked only for this
//! decision (that agent's filters covering `W`, demand hints not fitting `W`), and stamps their
//! ancestors with the number of `B`-leaves below and a list of touched *role* children
//! (epoch-stamped scratch, never cleared). A blocked leaf is not linked into its parent's list:
//! its `t` and `rawx` are added straight into the parent's scratch sums `dT` and `dG` as it is
//! stamped, so re-evaluating a role costs O(its touched role children), not O(its blocked
//! leaves). Whether `W` fits in a filter's refused vector is memoised per decision by the refused
//! vector's index (the offers of one agent shape all refuse the same interned vector). It then
//! walks down from the root: at an untouched node the answer is the cached minimum child; at a
//! touched node the candidates are the first untouched child in the order and the partially
//! blocked touched role children, re-evaluated bottom-up from the cached sums:
//! `T' = T - dT - t_c + t'_c` over touched role children `c`, `G' = G + dG + rawx_c` over the
//! fully blocked ones. A decision costs O(|B| x depth) plus O(depth x log children); a fully
//! blocked agent is skipped by `cycle` in O(1) until something changes.
//!
//! Because the sums are exact integers, the result is bit-identical to the reference
//! (`reference.rs`), including tie-breaking; the property tests check it decision for decision.

use super::kinds::{at, fits};
use super::numeric::{self, add, add_wide, combine, direction, max_entry, sub, sub_wide, weighted};
use super::order::Order;
use super::reference::Ctx;
use super::tree::{Node, NONE, ROOT};
use super::{Allocator, FilterMode};

/// The most kinds in `Y` the fast path handles (more falls back to the reference).
pub(crate) const MAX_KY: usize = 4;
/// How many mask caches are kept (a kind set with and without GPU gating are two).
const MAX_CACHES: usize = 6;

type Vk = [u64; MAX_KY];
type Wk = [u128; MAX_KY];

/// The cached values for one kind set `Y`.
///
/// Every vector holds [`MAX_KY`] entries, the kinds of `Y` first and zeros after them, and every
/// operation runs over all of them: zeros stay zero (a zero entry's direction, scaled sum and
/// delta are zero, and it never raises a maximum), so the first entries are exactly what an
/// operation on `Y`'s kinds alone gives, while the loops have a fixed length and compile to
/// straight-line code.
#[derive(Debug, Clone)]
struct MaskCache {
    /// (Y as a bit mask of kinds, shape version, eligibility version, capacity version, GPU
    /// gating applies: leaves without the capability are blocked like inactive ones).
    key: (u64, u64, u64, u64, bool),
    /// The kind indices of Y.
    y: Vec<usize>,
    /// Log position replayed up to.
    seen: u64,
    last_used: u64,
    /// Each node's vector; with `t` and `ws`, only its parent reads it, so the root's three are
    /// set when the cache is built and not kept current afterwards.
    x: Vec<Vk>,
    t: Vec<Vk>,
    tsum: Vec<Wk>,
    gsum: Vec<Vk>,
    rawx: Vec<Vk>,
    ws: Vec<f64>,
    gblocked: Vec<bool>,
    elig: Vec<u32>,
    /// The number of leaves below each node, eligible or not (a leaf counts itself).
    nleaves: Vec<u32>,
    pos: Vec<u32>,
    order: Vec<Order>,
    /// Each node's parent (a compact copy of the tree's, for the per-filter walk).
    parent: Vec<u32>,
}

/// Per-decision scratch, epoch-stamped so nothing is cleared between decisions.
#[derive(Debug, Clone, Default)]
struct Scratch {
    epoch: u32,
    stamp: Vec<u32>,
    count: Vec<u32>,
    first_child: Vec<u32>,
    next_sib: Vec<u32>,
    eval_stamp: Vec<u32>,
    ews: Vec<f64>,
    et: Vec<Vk>,
    /// Per touched node: the sums of `t` and of `rawx` over its blocked *leaf* children (leaves
    /// are not linked into `first_child`; their terms are aggregated here as they are stamped).
    dt: Vec<Wk>,
    dg: Vec<Vk>,
    /// Per evaluated node: its first untouched child in the cached order (`NONE` if none).
    fu: Vec<u32>,
    /// Per refused-vector index: whether `W` fits in it (memoised per decision).
    cov_stamp: Vec<u32>,
    cov_val: Vec<bool>,
}

/// The fast path's state: mask caches, the log of allocation changes, scratch. A plain field of
/// the [`Allocator`] (boxed, `None` until the first pick): `pick` takes `&mut self` to bring the
/// caches up to date, and a clone carries the caches with it (a clone decides exactly as the
/// original, caches or not).
#[derive(Debug, Clone, Default)]
pub(crate) struct Fast {
    caches: Vec<MaskCache>,
    /// Leaves whose allocation changed; `log[i]` is change number `log_base + i`.
    log: Vec<u32>,
    log_base: u64,
    uses: u64,
    scratch: Scratch,
}

/// Orders non-negative floats by their bits.
#[inline]
fn key_bits(x: f64) -> u64 {
    if x > 0.0 {
        x.to_bits()
    } else {
        0
    }
}

impl Fast {
    /// Logs that `leaf`'s allocation changed.
    pub(crate) fn allocation_changed(&mut self, leaf: u32, nodes: usize) {
        if self.caches.is_empty() {
            return;
        }
        self.log.push(leaf);
        if self.log.len() > 4 * nodes + 4096 {
            // Caches that lag this far rebuild anyway; drop them rather than keep the log.
            self.invalidate();
        }
    }

    /// Forgets every cache.
    pub(crate) fn invalidate(&mut self) {
        self.caches.clear();
        self.log_base += self.log.len() as u64;
        self.log.clear();
    }
}

impl Allocator {
    /// The fast H-DRF pick. Same result as `reference_pick` under `Policy::Hdrf`.
    pub(crate) fn fast_pick(&mut self, ctx: &Ctx<'_>) -> Option<u32> {
        let mut ymask = 0u64;
        let mut ky = 0;
        for (j, (&w, &r)) in ctx.w.iter().zip(&self.capacity).enumerate() {
            if w > 0 && r > 0 {
                if j >= 64 {
                    return self.reference_pick_from(ctx);
                }
                ymask |= 1 << j;
                ky += 1;
            }
        }
        if ky > MAX_KY {
            return self.reference_pick_from(ctx);
        }
        // The caches are updated while the rest of the books are read: take them out for the
        // decision (moving one pointer; moving the whole `Fast` cost about 30 ns per pick).
        // Should the decision panic, the allocator is left without caches, and the next pick
        // builds them afresh.
        let mut fast = self.fast.take().unwrap_or_default();
        let picked = self.fast_pick_with(&mut fast, ymask, ctx);
        self.fast = Some(fast);
        picked
    }

    /// [`Allocator::fast_pick`] for the kind set `ymask`, with the caches taken out of `self`.
    /// Whether every eligible leaf has a demand hint that `w` cannot hold: then nothing is
    /// pickable, and the decision ends without stamping each leaf (the common case of an agent
    /// whose rest is one kind only, e.g. memory with no CPUs, under many frameworks with hints).
    fn no_demand_fits(&self, cache: &MaskCache, w: &[u64]) -> bool {
        let eligible = cache.elig[ROOT as usize] as usize;
        if eligible == 0 || self.demand_leaves.len() < eligible {
            // Some eligible leaf has no hint (it takes anything), or none is eligible (the
            // walk says so at once).
            return false;
        }
        if !fits(&self.demand_floor, w) {
            // Every hint needs more than `w` has of some kind: the eligible leaves are all
            // blocked when each of them has a hint.
            let hinted = self
                .demand_leaves
                .iter()
                .filter(|&&leaf| !cache.gblocked[leaf as usize])
                .count();
            return hinted == eligible;
        }
        let nodes = &self.tree.nodes;
        let mut blocked = 0;
        for &leaf in &self.demand_leaves {
            if cache.gblocked[leaf as usize] {
                continue;
            }
            let demand = nodes[leaf as usize]
                .leaf
                .as_ref()
                .and_then(|l| l.demand.as_ref());
            match demand {
                Some(d) if !fits(d, w) => blocked += 1,
                _ => return false,
            }
        }
        blocked == eligible
    }

    fn fast_pick_with(&self, fast: &mut Fast, ymask: u64, ctx: &Ctx<'_>) -> Option<u32> {
        let ci = self.cache_for(fast, ymask, ctx.gated);
        let Fast {
            caches, scratch, ..
        } = fast;
        let cache = &caches[ci];
        if cache.gblocked[ROOT as usize] || cache.gblocked[ctx.start as usize] {
            return None;
        }
        let nodes = &self.tree.nodes;
        scratch.next_epoch(nodes.len());
        if ctx.start == ROOT && self.no_demand_fits(cache, ctx.w) {
            return None;
        }
        // B: eligible leaves blocked for this decision only.
        let mut any = false;
        let skip_only = self.filter_mode == FilterMode::SkipOnly;
        let agent = ctx
            .agent
            .and_then(|slot| self.agents.get(slot as usize))
            .and_then(Option::as_ref);
        if !skip_only {
            if let Some(agent) = agent {
                for f in &agent.filters.list {
                    if ctx.now >= f.until || cache.gblocked[f.leaf as usize] {
                        continue;
                    }
                    // `covers` = not expired (checked above) and `W` fits in the refused
                    // vector; the latter depends only on the refused index: memoised.
                    if scratch.covers_memo(f.refused, || {
                        let refused = self.refused.get(f.refused);
                        super::filters::covers(refused, f.until, ctx.w, ctx.w_unknown, ctx.now)
                    }) {
                        scratch.stamp_leaf(cache, f.leaf);
                        any = true;
                    }
                }
            }
        }
        for &leaf in &self.demand_leaves {
            if cache.gblocked[leaf as usize] || scratch.stamp[leaf as usize] == scratch.epoch {
                continue;
            }
            let demand = nodes[leaf as usize]
                .leaf
                .as_ref()
                .and_then(|l| l.demand.as_ref());
            if demand.is_some_and(|d| !fits(d, ctx.w)) {
                scratch.stamp_leaf(cache, leaf);
                any = true;
            }
        }
        if self.has_quota() {
            // The leaves under a role whose limit has no headroom in a kind of `W` are blocked
            // for this decision exactly as a demand hint that does not fit: the role is stamped
            // fully blocked at once (O(depth), however many leaves it has).
            for role in self.limit_blocked_roles(ctx.w) {
                if ctx.start != ROOT && self.is_ancestor(role, ctx.start) {
                    // A reserved pool whose role (or an ancestor) is at its limit.
                    return None;
                }
                if cache.elig[role as usize] > 0 && !scratch.under_blocked(cache, role) {
                    scratch.stamp_role_blocked(cache, role);
                    any = true;
                }
            }
        }
        if skip_only {
            let filters = agent.map(|a| &a.filters);
            // When every filter on the agent is live and covers `W`, a role whose leaves all
            // have a filter here holds nothing pickable: the walk skips it in O(1).
            let all_cover = filters.is_some_and(|f| {
                !f.list.is_empty()
                    && ctx.now < f.min_until
                    && f.refused_used.iter().all(|&(r, _)| {
                        scratch.covers_memo(r, || {
                            let refused = self.refused.get(r);
                            super::filters::covers(refused, u64::MAX, ctx.w, ctx.w_unknown, 0)
                        })
                    })
            });
            let mut walk = SkipWalk {
                nodes,
                cache,
                sc: scratch,
                any,
                store: filters,
                under: filters.filter(|_| all_cover).map(|f| f.under.as_slice()),
                alloc: self,
                ctx,
            };
            return walk.first_pickable(ctx.start);
        }
        let mut cur = ctx.start;
        loop {
            let i = cur as usize;
            if nodes[i].leaf.is_some() {
                return Some(cur);
            }
            if !any || scratch.stamp[i] != scratch.epoch {
                cur = cache.order[i].first()?.2;
                continue;
            }
            if scratch.count[i] >= cache.elig[i] {
                return None;
            }
            let fu = if scratch.eval_stamp[i] == scratch.epoch {
                Some(scratch.fu[i]).filter(|&u| u != NONE)
            } else {
                first_untouched(cache, scratch, cur)
            };
            let mut best: Option<(f64, u32, u32)> =
                fu.map(|c| (cache.ws[c as usize], cache.pos[c as usize], c));
            let mut c = scratch.first_child[i];
            while c != NONE {
                let ci = c as usize;
                if scratch.count[ci] < cache.elig[ci] {
                    eval(nodes, cache, scratch, c);
                    let cand = (scratch.ews[ci], cache.pos[ci], c);
                    if best.is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                        best = Some(cand);
                    }
                }
                c = scratch.next_sib[ci];
            }
            cur = best?.2;
        }
    }

    /// The index of an up-to-date cache for `y`, building or refreshing one.
    fn cache_for(&self, fast: &mut Fast, ymask: u64, gated: bool) -> usize {
        let key = (
            ymask,
            self.tree.shape_version,
            self.eligibility_version,
            self.capacity_version,
            gated,
        );
        fast.uses += 1;
        let uses = fast.uses;
        let end = fast.log_base + fast.log.len() as u64;
        let ci = match fast.caches.iter().position(|c| c.key == key) {
            Some(ci) => {
                let cache = &mut fast.caches[ci];
                let from = (cache.seen.max(fast.log_base) - fast.log_base) as usize;
                if cache.seen < fast.log_base || fast.log.len() - from > self.tree.nodes.len() {
                    *cache = self.build(key, end);
                } else {
                    for k in from..fast.log.len() {
                        self.apply_leaf(cache, fast.log[k]);
                    }
                    cache.seen = end;
                }
                ci
            }
            None => {
                fast.caches
                    .retain(|c| c.key.1 == key.1 && c.key.2 == key.2 && c.key.3 == key.3);
                if fast.caches.len() >= MAX_CACHES {
                    if let Some(lru) =
                        (0..fast.caches.len()).min_by_key(|&i| fast.caches[i].last_used)
                    {
                        fast.caches.swap_remove(lru);
                    }
                }
                fast.caches.push(self.build(key, end));
                fast.caches.len() - 1
            }
        };
        fast.caches[ci].last_used = uses;
        // Trim the log up to what every cache has seen.
        let min_seen = fast.caches.iter().map(|c| c.seen).min().unwrap_or(end);
        if min_seen > fast.log_base {
            let n = (min_seen - fast.log_base) as usize;
            fast.log.drain(..n.min(fast.log.len()));
            fast.log_base = min_seen;
        }
        ci
    }

    /// A leaf's own vector in cache `c`'s kinds.
    fn leaf_x(&self, c: &MaskCache, node: &Node) -> Vk {
        let mut x = [0u64; MAX_KY];
        for (k, &j) in c.y.iter().enumerate() {
            x[k] = numeric::share_units(at(&node.raw, j), self.capacity[j]);
        }
        x
    }

    /// Builds a cache from scratch.
    fn build(&self, key: (u64, u64, u64, u64, bool), seen: u64) -> MaskCache {
        let n = self.tree.nodes.len();
        let y: Vec<usize> = (0..64).filter(|j| key.0 & (1 << j) != 0).collect();
        let zero = [0u64; MAX_KY];
        let wzero = [0u128; MAX_KY];
        let mut c = MaskCache {
            key,
            y,
            seen,
            last_used: 0,
            x: vec![zero; n],
            t: vec![zero; n],
            tsum: vec![wzero; n],
            gsum: vec![zero; n],
            rawx: vec![zero; n],
            ws: vec![0.0; n],
            gblocked: vec![true; n],
            elig: vec![0; n],
            nleaves: vec![0; n],
            pos: vec![0; n],
            order: vec![Order::default(); n],
            parent: self.tree.nodes.iter().map(|nd| nd.parent).collect(),
        };
        for node in &self.tree.nodes {
            for (p, &ch) in node.children.iter().enumerate() {
                c.pos[ch as usize] = p as u32;
            }
        }
        let mut post = Vec::with_capacity(n);
        let mut stack = vec![(ROOT, false)];
        while let Some((v, done)) = stack.pop() {
            if done {
                post.push(v);
                continue;
            }
            stack.push((v, true));
            for &ch in &self.tree.nodes[v as usize].children {
                stack.push((ch, false));
            }
        }
        for v in post {
            let i = v as usize;
            let node = &self.tree.nodes[i];
            match &node.leaf {
                Some(leaf) => {
                    let x = self.leaf_x(&c, node);
                    c.x[i] = x;
                    c.rawx[i] = x;
                    c.gblocked[i] = !leaf.active
                        || leaf.suppressed
                        || leaf.sated
                        || (key.4 && !leaf.gpu_capable);
                    c.elig[i] = u32::from(!c.gblocked[i]);
                    c.nleaves[i] = 1;
                }
                None => {
                    let (mut t, mut g, mut raw) = (wzero, zero, zero);
                    let mut elig = 0;
                    for &ch in &node.children {
                        let chi = ch as usize;
                        elig += c.elig[chi];
                        c.nleaves[i] += c.nleaves[chi];
                        add(&mut raw[..], &c.rawx[chi][..]);
                        if c.gblocked[chi] {
                            add(&mut g[..], &c.x[chi][..]);
                        } else {
                            add_wide(&mut t[..], &c.t[chi][..]);
                            c.order[i].push_unsorted((key_bits(c.ws[chi]), c.pos[chi], ch));
                        }
                    }
                    c.order[i].sort();
                    c.tsum[i] = t;
                    c.gsum[i] = g;
                    c.rawx[i] = raw;
                    c.elig[i] = elig;
                    c.gblocked[i] = c.order[i].is_empty();
                    let m = min_of(&c, v);
                    let mut x = zero;
                    combine(m, &t[..], &g[..], &mut x[..]);
                    c.x[i] = x;
                }
            }
            finish(&mut c, v, node.weight);
        }
        c
    }

    /// Replays a change of `leaf`'s allocation, or of its held-back flag, into cache `c`.
    fn apply_leaf(&self, c: &mut MaskCache, leaf: u32) {
        let nodes = &self.tree.nodes;
        let Some(node) = nodes.get(leaf as usize) else {
            return;
        };
        if !node.live || node.leaf.is_none() {
            return;
        }
        let i = leaf as usize;
        let new_x = self.leaf_x(c, node);
        // Its agent-independent blocking, which a held-back flip changes without a rebuild.
        let blocked = node
            .leaf
            .as_ref()
            .is_some_and(|l| !l.active || l.suppressed || l.sated || (c.key.4 && !l.gpu_capable));
        // rawx along the path.
        let old_x = c.x[i];
        let mut v = leaf;
        while v != NONE {
            let vi = v as usize;
            add(&mut c.rawx[vi][..], &new_x[..]);
            sub(&mut c.rawx[vi][..], &old_x[..]);
            v = nodes[vi].parent;
        }
        // The leaf itself, then each ancestor from its child's old and new values.
        let mut child = leaf;
        let mut old = (c.x[i], c.t[i], c.ws[i], c.gblocked[i]);
        c.x[i] = new_x;
        finish(c, leaf, node.weight);
        if blocked != c.gblocked[i] {
            c.gblocked[i] = blocked;
            let mut v = leaf;
            while v != NONE {
                let vi = v as usize;
                c.elig[vi] = if blocked {
                    c.elig[vi].saturating_sub(1)
                } else {
                    c.elig[vi] + 1
                };
                v = nodes[vi].parent;
            }
        }
        let mut p = node.parent;
        while p != NONE {
            let pi = p as usize;
            let chi = child as usize;
            let pos = c.pos[chi];
            let old_key = (key_bits(old.2), pos, child);
            if old.3 {
                sub(&mut c.gsum[pi][..], &old.0[..]);
            } else {
                sub_wide(&mut c.tsum[pi][..], &old.1[..]);
            }
            if c.gblocked[chi] {
                if !old.3 {
                    c.order[pi].remove(&old_key);
                }
                let x = c.x[chi];
                add(&mut c.gsum[pi][..], &x[..]);
            } else {
                let t = c.t[chi];
                add_wide(&mut c.tsum[pi][..], &t[..]);
                let new_key = (key_bits(c.ws[chi]), pos, child);
                if old.3 {
                    c.order[pi].insert(new_key);
                } else if new_key != old_key {
                    c.order[pi].replace(&old_key, new_key);
                }
            }
            old = (c.x[pi], c.t[pi], c.ws[pi], c.gblocked[pi]);
            c.gblocked[pi] = c.order[pi].is_empty();
            if nodes[pi].parent == NONE {
                // The root: no parent reads its vector, share or direction (see `x`).
                break;
            }
            let m = min_of(c, p);
            let (t, g) = (c.tsum[pi], c.gsum[pi]);
            combine(m, &t[..], &g[..], &mut c.x[pi][..]);
            finish(c, p, nodes[pi].weight);
            child = p;
            p = nodes[pi].parent;
        }
    }
}

/// The minimum weighted share among `v`'s non-blocked children (infinite when none).
#[inline]
fn min_of(c: &MaskCache, v: u32) -> f64 {
    c.order[v as usize]
        .first()
        .map_or(f64::INFINITY, |(_, _, ch)| c.ws[ch as usize])
}

/// Sets `ws` and `t` of `v` from its `x`.
#[inline]
fn finish(c: &mut MaskCache, v: u32, weight: f64) {
    let i = v as usize;
    let s = max_entry(&c.x[i][..]);
    c.ws[i] = weighted(s, weight);
    let x = c.x[i];
    direction(&x[..], s, weight, &mut c.t[i][..]);
}

/// The first child of `v` in the cached order that this decision did not touch.
#[inline]
fn first_untouched(c: &MaskCache, sc: &Scratch, v: u32) -> Option<u32> {
    c.order[v as usize]
        .iter()
        .map(|e| e.2)
        .find(|&ch| sc.stamp[ch as usize] != sc.epoch)
}

/// Evaluates a partially blocked (touched, not fully blocked) node into the scratch.
fn eval(nodes: &[Node], c: &MaskCache, sc: &mut Scratch, v: u32) {
    let i = v as usize;
    if sc.eval_stamp[i] == sc.epoch {
        return;
    }
    let mut t = c.tsum[i];
    let mut g = c.gsum[i];
    // Blocked leaf children, aggregated when they were stamped.
    for k in 0..MAX_KY {
        t[k] = t[k].wrapping_sub(sc.dt[i][k]);
        g[k] = g[k].wrapping_add(sc.dg[i][k]);
    }
    let mut m = f64::INFINITY;
    let mut ch = sc.first_child[i];
    while ch != NONE {
        let chi = ch as usize;
        sub_wide(&mut t[..], &c.t[chi][..]);
        if sc.count[chi] >= c.elig[chi] {
            add(&mut g[..], &c.rawx[chi][..]);
        } else {
            eval(nodes, c, sc, ch);
            let et = sc.et[chi];
            add_wide(&mut t[..], &et[..]);
            m = m.min(sc.ews[chi]);
        }
        ch = sc.next_sib[chi];
    }
    let fu = first_untouched(c, sc, v);
    if let Some(u) = fu {
        m = m.min(c.ws[u as usize]);
    }
    sc.fu[i] = fu.unwrap_or(NONE);
    let mut x = [0u64; MAX_KY];
    combine(m, &t[..], &g[..], &mut x[..]);
    let s = max_entry(&x[..]);
    let w = nodes[i].weight;
    sc.ews[i] = weighted(s, w);
    direction(&x[..], s, w, &mut sc.et[i][..]);
    sc.eval_stamp[i] = sc.epoch;
}

/// One skip-only decision's walk (see [`FilterMode::SkipOnly`]): depth first over the non-blocked
/// children in (weighted share, position) order, the first leaf not filtered on the agent wins.
/// Blocked leaves (demand hints) were stamped and their ancestors evaluated exactly as in the
/// exact mode; filters only make a leaf unpickable.
struct SkipWalk<'a> {
    nodes: &'a [Node],
    cache: &'a MaskCache,
    sc: &'a mut Scratch,
    /// Whether any leaf was stamped blocked for this decision.
    any: bool,
    /// The agent's filter store.
    store: Option<&'a super::filters::AgentFilters>,
    /// When every filter on the agent covers `W`: per role number, how many leaves below have
    /// one.
    under: Option<&'a [u32]>,
    alloc: &'a Allocator,
    ctx: &'a Ctx<'a>,
}

impl SkipWalk<'_> {
    /// Whether `leaf` has a live filter covering `W` on the agent.
    #[inline]
    fn filtered(&mut self, leaf: u32) -> bool {
        if !self.store.is_some_and(|f| f.has(leaf)) {
            return false;
        }
        if self.under.is_some() {
            // Every filter on the agent is live and covers `W`.
            return true;
        }
        let Some(&f) = self.store.and_then(|a| a.get(leaf)) else {
            return false;
        };
        if self.ctx.now >= f.until {
            return false;
        }
        let (alloc, ctx) = (self.alloc, self.ctx);
        self.sc.covers_memo(f.refused, || {
            let refused = alloc.refused.get(f.refused);
            super::filters::covers(refused, f.until, ctx.w, ctx.w_unknown, ctx.now)
        })
    }

    /// The first pickable leaf below `v` (a non-blocked node), if any.
    fn first_pickable(&mut self, v: u32) -> Option<u32> {
        let i = v as usize;
        if self.nodes[i].leaf.is_some() {
            return (!self.filtered(v)).then_some(v);
        }
        let cache = self.cache;
        if let Some(under) = self.under {
            let filtered = under
                .get(self.nodes[i].role_ix as usize)
                .copied()
                .unwrap_or(0);
            if filtered >= cache.nleaves[i] {
                return None;
            }
        }
        if !self.any || self.sc.stamp[i] != self.sc.epoch {
            // Untouched: the cached order is this decision's order.
            for (_, _, c) in cache.order[i].iter() {
                if let Some(l) = self.first_pickable(c) {
                    return Some(l);
                }
            }
            return None;
        }
        if self.sc.count[i] >= cache.elig[i] {
            return None;
        }
        // Touched: merge the untouched children (cached order) with the partially blocked
        // touched role children (evaluated exactly), both by (weighted share, position).
        let mut touched: Vec<(f64, u32, u32)> = Vec::new();
        let mut c = self.sc.first_child[i];
        while c != NONE {
            let ci = c as usize;
            if self.sc.count[ci] < cache.elig[ci] {
                eval(self.nodes, cache, self.sc, c);
                touched.push((self.sc.ews[ci], cache.pos[ci], c));
            }
            c = self.sc.next_sib[ci];
        }
        touched.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut t = touched.into_iter().peekable();
        let mut u = cache.order[i]
            .iter()
            .map(|(_, p, c)| (cache.ws[c as usize], p, c))
            .filter(|&(_, _, c)| self.sc.stamp[c as usize] != self.sc.epoch)
            .peekable();
        let mut next = Vec::new();
        loop {
            let pick_t = match (t.peek(), u.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => (a.0, a.1) < (b.0, b.1),
            };
            let item = if pick_t { t.next() } else { u.next() };
            if let Some((_, _, c)) = item {
                next.push(c);
            }
        }
        next.into_iter().find_map(|c| self.first_pickable(c))
    }
}

impl Scratch {
    fn next_epoch(&mut self, n: usize) {
        if self.stamp.len() < n {
            self.stamp.resize(n, 0);
            self.count.resize(n, 0);
            self.first_child.resize(n, NONE);
            self.next_sib.resize(n, NONE);
            self.eval_stamp.resize(n, 0);
            self.ews.resize(n, 0.0);
            self.et.resize(n, [0; MAX_KY]);
            self.dt.resize(n, [0; MAX_KY]);
            self.dg.resize(n, [0; MAX_KY]);
            self.fu.resize(n, NONE);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.eval_stamp.iter_mut().for_each(|s| *s = 0);
            self.cov_stamp.iter_mut().for_each(|s| *s = 0);
            self.epoch = 1;
        }
    }

    /// Whether `W` fits in refused vector `r`, computed by `f` once per decision.
    #[inline]
    fn covers_memo(&mut self, r: u32, f: impl FnOnce() -> bool) -> bool {
        let ri = r as usize;
        if ri >= self.cov_stamp.len() {
            self.cov_stamp.resize(ri + 1, 0);
            self.cov_val.resize(ri + 1, false);
        }
        if self.cov_stamp[ri] != self.epoch {
            self.cov_val[ri] = f();
            self.cov_stamp[ri] = self.epoch;
        }
        self.cov_val[ri]
    }

    /// Stamps `leaf` (eligible in `c`, not yet stamped) as blocked for this decision: adds its
    /// `t` and `rawx` to its parent's leaf aggregates, counts it in every ancestor, and links
    /// newly stamped roles into their parent's list of touched children.
    fn stamp_leaf(&mut self, c: &MaskCache, leaf: u32) {
        let epoch = self.epoch;
        let li = leaf as usize;
        self.stamp[li] = epoch;
        self.count[li] = 1;
        self.first_child[li] = NONE;
        let p = c.parent[li];
        if p == NONE {
            return;
        }
        let pi = p as usize;
        if self.stamp[pi] != epoch {
            self.touch_and_link(c, p);
        }
        self.count[pi] += 1;
        let (t, x) = (&c.t[li], &c.rawx[li]);
        let (dt, dg) = (&mut self.dt[pi], &mut self.dg[pi]);
        for k in 0..MAX_KY {
            dt[k] = dt[k].wrapping_add(t[k] as u128);
            dg[k] = dg[k].wrapping_add(x[k]);
        }
        let mut v = c.parent[pi];
        while v != NONE {
            self.count[v as usize] += 1;
            v = c.parent[v as usize];
        }
    }

    /// Whether `role` or one of its ancestors is stamped fully blocked for this decision.
    fn under_blocked(&self, c: &MaskCache, role: u32) -> bool {
        let mut v = role;
        while v != NONE {
            let i = v as usize;
            if self.stamp[i] == self.epoch && self.count[i] >= c.elig[i] {
                return true;
            }
            v = c.parent[i];
        }
        false
    }

    /// Stamps `role` (with eligible leaves, not under a fully blocked role) as fully blocked for
    /// this decision: every eligible leaf below counts as blocked, and its parent takes its
    /// `rawx` as a blocked child's vector. Leaves below stamped before are not counted twice.
    fn stamp_role_blocked(&mut self, c: &MaskCache, role: u32) {
        let epoch = self.epoch;
        let ri = role as usize;
        let before = if self.stamp[ri] == epoch {
            self.count[ri]
        } else {
            self.touch_and_link(c, role);
            0
        };
        let add = c.elig[ri].saturating_sub(before);
        self.count[ri] = c.elig[ri];
        let mut v = c.parent[ri];
        while v != NONE {
            self.count[v as usize] += add;
            v = c.parent[v as usize];
        }
    }

    /// Stamps `node` (not yet touched by this decision) as touched, and links it into its
    /// parent's child list, touching and linking each ancestor in turn up to the first one
    /// this decision had already touched.
    fn touch_and_link(&mut self, c: &MaskCache, node: u32) {
        let epoch = self.epoch;
        self.touch(node as usize);
        let mut child = node;
        let mut v = c.parent[node as usize];
        while v != NONE {
            let i = v as usize;
            let new = self.stamp[i] != epoch;
            if new {
                self.touch(i);
            }
            self.next_sib[child as usize] = self.first_child[i];
            self.first_child[i] = child;
            if !new {
                break;
            }
            child = v;
            v = c.parent[i];
        }
    }

    /// Stamps role `i` as touched by this decision, with empty lists and aggregates.
    #[inline]
    fn touch(&mut self, i: usize) {
        self.stamp[i] = self.epoch;
        self.count[i] = 0;
        self.first_child[i] = NONE;
        self.dt[i] = [0; MAX_KY];
        self.dg[i] = [0; MAX_KY];
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use protocol::{AgentId, FrameworkId, Resources, RolePath};
    use uuid::Uuid;

    use crate::{Allocator, Policy};

    fn r(s: &str) -> Resources {
        s.parse().unwrap()
    }

    /// The caches are a plain field: a clone carries them, and the clone and the original keep
    /// deciding alike (and as the reference) as their books diverge and their caches are replayed.
    #[test]
    fn a_clone_carries_the_caches_and_decides_as_the_original() {
        let fw = |i: u128| FrameworkId(Uuid::from_u128(i));
        let agent = AgentId(Uuid::from_u128(100));
        let mut a = Allocator::new(Policy::Hdrf);
        for (i, role) in [(1, "a/x"), (2, "a/y"), (3, "b")] {
            a.add_framework(fw(i), &RolePath::new(role).unwrap())
                .unwrap();
        }
        a.add_agent(agent, &r("cpus=10,mem=10")).unwrap();
        a.allocate(fw(3), agent, &r("cpus=2")).unwrap();
        assert_eq!(a.pick(Some(agent), &r("cpus=1"), 0), Some(fw(1)));
        let caches = |x: &Allocator| x.fast.as_ref().map_or(0, |f| f.caches.len());
        assert_eq!(caches(&a), 1, "the pick built a cache");

        let mut b = a.clone();
        assert_eq!(caches(&b), 1, "the clone keeps it");
        for round in 0..3 {
            for x in [&mut a, &mut b] {
                let picked = x.pick(Some(agent), &r("cpus=1"), 0);
                assert_eq!(picked, x.pick_reference(Some(agent), &r("cpus=1"), 0));
                x.allocate(picked.unwrap(), agent, &r("cpus=1")).unwrap();
            }
            let seen = |x: &Allocator| x.fast.as_ref().map(|f| f.caches[0].seen);
            assert_eq!(seen(&a), seen(&b), "round {round}");
        }
        // The original alone changes: the clone is not affected, and both still agree with the
        // reference.
        a.release(fw(1), agent, &r("cpus=1")).unwrap();
        for x in [&mut a, &mut b] {
            let picked = x.pick(Some(agent), &r("cpus=1"), 0);
            assert_eq!(picked, x.pick_reference(Some(agent), &r("cpus=1"), 0));
        }
        assert_eq!(a.pick(Some(agent), &r("cpus=1"), 0), Some(fw(1)));
        assert_ne!(b.agent_free(agent), a.agent_free(agent));
    }
}
