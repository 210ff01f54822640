//! The allocator: PURE (no I/O, no clock, no tokio) and synchronous. It keeps the role tree, what
//! each framework holds on each agent, decline filters, and decides with H-DRF (or flat DRF, or
//! Mesos-style plain sums) which framework gets an agent's free resources.
//!
//! Time is an argument (`now`, milliseconds on a caller-chosen monotonic clock). Same inputs, same
//! decisions (ARCHITECTURE invariant 1).
//!
//! # Layout
//!
//! - [`error`]: [`AllocatorError`] and [`BlockReason`].
//! - `idhash`: a fast deterministic hasher for the internal maps.
//! - `kinds`: resource kinds interned to small integers; dense `Vec<u64>` vectors.
//! - `tree`: the role tree (roles and framework leaves in one slot vector).
//! - `filters`: the compact per-agent decline-filter store.
//! - `accounting`: agents, allocate / release, removal.
//! - `decide`: `pick`, `cycle`, `explain` (blocking rules).
//! - `runs`: allocation runs in parts, over every agent or only the changed ones ([`Sweep`]).
//! - `fast`: the fast H-DRF decision (cached node vectors, per-decision work only where this
//!   agent's blocking differs).
//! - `order`: a node's non-blocked children in share order (a sorted vector, a B-tree set past 64
//!   children), for `fast`.
//! - `quota`: per-role guarantees (served before H-DRF) and limits (blocking and cutting
//!   offers).
//! - `reservation`: reserved pools per agent (static and dynamic reservations): a
//!   pool is decided by H-DRF walked from its role's node; the unreserved pool is the rest.
//! - [`preempt`]: preemption toward fair share (pure): fair shares by water-filling
//!   down the tree, who is starved, and the plan of tasks to take back.
//! - `numeric`: the exact, order-independent share arithmetic H-DRF is computed in.
//! - `reference`: the decision procedures straight from the specification (the oracle the fast path
//!   is tested against).
//! - `views`: the operator views (`role_tree`, `dominant_share`).
//! - [`sim`]: the task-by-task scenario runner behind the `hdrf-sim` binary (`src/bin/`, which
//!   does the file and stdin reading).
//!
//! # Data structures
//!
//! Everything is indexed densely: resource kinds are interned to `usize`, roles and frameworks are
//! slots in one node vector (`u32`), agents are slots in an agent vector (`u32`). Each node keeps
//! `raw`, the plain sum of what its subtree holds (for a leaf, its allocation `U`), updated along
//! the path to the root on every allocate / release. Each agent keeps its total, its free vector,
//! what each framework holds on it, and its decline filters (16 bytes each, sorted by framework
//! slot, expired ones swept lazily).
//!
//! The fast H-DRF decision (`fast`) caches every node's H-DRF vector for the agent-independent
//! blocking and keeps it current incrementally (O(depth x log children) per allocate / release);
//! a decision only re-evaluates the subtrees holding a leaf blocked for this agent and `W`
//! (filters, demand hints), so it costs O(depth) with no such leaf and O(|B| x depth) with `|B|`
//! of them. H-DRF is computed in the exact, order-independent arithmetic of `numeric`, so the fast
//! path and the reference agree bit for bit (property-tested decision for decision). Under
//! [`FilterMode::SkipOnly`] filters are not stamped at all: the decision walks the cached order
//! depth first and skips filtered leaves, and whole roles whose leaves all carry a filter covering
//! `W` (per-agent counts per role, kept by the filter store), so it costs O(depth x children
//! visited) however many filters the agent has. An agent on
//! which every framework is blocked is skipped by `cycle` in O(1) until its free resources, its
//! filters or the eligibility of any framework change.
//!
//! # Changes from the brief's API sketch
//!
//! Additive only: [`Allocator::policy`], [`Allocator::pick_reference`] (the slow oracle, public
//! so integration tests can compare), [`BlockReason::UnknownFramework`], and [`FilterMode`] with
//! [`Allocator::filter_mode`] / [`Allocator::set_filter_mode`]. There is no
//! `RoleIsFramework` error: roles and frameworks live in separate namespaces (a framework is a
//! leaf *under* its role), so a role path can never collide with a framework. `Policy::Drf` and
//! `Policy::PlainSum` (used by `hdrf-sim`) always run on the reference procedures. The fast path
//! handles up to 4 resource kinds in `W` (cpus, mem, disk, gpus); more falls back to the reference.
//!
//! # Semantics (see `docs/src/internals/algorithms.md`)
//!
//! A leaf is blocked for `W` (an agent's free resources) when it is inactive, suppressed, sated
//! (its outstanding offers hold the tasks it said it wants), has a live decline filter on that
//! agent whose refused vector contains `W`, or has a demand hint that does not fit in `W`.
//! Under [`FilterMode::SkipOnly`] (the default) the decline filter does not block for the
//! H-DRF values: the filtered leaf is only skipped when picking (see [`FilterMode`] and the
//! "Allocator notes" in ARCHITECTURE.md). Shares are taken over the kinds present in `W`.
//! Frameworks are leaves of weight 1 under their role; the children of a role (child roles and frameworks alike) are
//! ordered by creation, which is the tie-break order. Agents are walked by `cycle` in the order
//! given, or in slot order (registration order, freed slots reused) when no order is given.

mod accounting;
mod decide;
pub mod error;
mod fast;
mod filters;
mod idhash;
mod kinds;
mod numeric;
mod order;
pub mod preempt;
mod quota;
mod reference;
mod reservation;
mod runs;
pub mod sim;
#[cfg(test)]
mod tests;
mod tree;
mod views;

pub use error::{AllocatorError, BlockReason};
pub use kinds::DEFAULT_MAX_KINDS;
pub use reservation::ReservationView;
pub use runs::{Run, Sweep};

use protocol::{AgentId, FrameworkId, Resources, RolePath, Weight};

use filters::{AgentFilters, RefusedTable};
use kinds::{Dense, Kinds};
use tree::Tree;

/// How shares are compared (see `docs/src/internals/algorithms.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Hierarchical DRF: rescaling to the weighted minimum among non-blocked siblings.
    #[default]
    Hdrf,
    /// The tree flattened (each leaf weighted by the product of `w / sum of sibling weights` along
    /// its path), then weighted DRF over the leaves.
    Drf,
    /// Hierarchical with plain sums (Hadoop / Mesos role trees): a parent's usage is the plain sum
    /// of its children's, shares over all resources, no rescaling.
    PlainSum,
}

/// How a decline filter on an agent weighs in an H-DRF decision for that agent (see the "Allocator
/// notes" in ARCHITECTURE.md). Other blocking (inactive, suppressed, a demand hint that does not
/// fit) is always exact: such a leaf is blocked and its siblings are rescaled without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterMode {
    /// A filtered framework is a blocked leaf for that agent's decision, exactly as the
    /// specification states: its ancestors' vectors are re-evaluated without it. Exact, but a
    /// decision costs O(filtered leaves x depth), which makes the middle rounds of `DeclineOffers`
    /// 10k x 1k slow.
    Exact,
    /// Shares are computed as if no filter blocked anything; the decision walks the tree in
    /// share order and skips the frameworks filtered on that agent (and subtrees holding only
    /// such frameworks), as Mesos' sorter does.
    #[default]
    SkipOnly,
}

/// One decision of a cycle: `framework` gets `resources` (the whole free vector of one of the
/// agent's pools) on `agent`.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The agent.
    pub agent: AgentId,
    /// The framework chosen.
    pub framework: FrameworkId,
    /// What it gets (now allocated to it).
    pub resources: Resources,
    /// The role the resources are reserved for; `None` for the unreserved pool.
    pub reservation: Option<RolePath>,
}

/// One agent's books.
#[derive(Debug, Clone)]
pub(crate) struct Agent {
    pub(crate) id: AgentId,
    pub(crate) total: Dense,
    pub(crate) free: Dense,
    /// What each framework (leaf slot) holds here; small, unsorted.
    pub(crate) held: Vec<(u32, Dense)>,
    pub(crate) filters: AgentFilters,
    /// Bumped when this agent's free resources change or a filter on it goes away.
    pub(crate) version: u64,
    /// `(shape, eligibility, agent version)` at which every framework was found blocked for this
    /// agent's free resources: while all three are unchanged, a cycle skips the agent in O(1).
    pub(crate) all_blocked_at: Option<(u64, u64, u64)>,
    /// Paused (the agent is draining): `cycle` offers nothing of it; what it holds
    /// stays booked and counts in the capacity.
    pub(crate) paused: bool,
    /// Its total has `gpus > 0` (GPU gating applies to it while gating is on).
    pub(crate) has_gpus: bool,
    /// Its reserved pools (empty without reservations: every hook is one branch).
    pub(crate) pools: Vec<reservation::Pool>,
    /// Queued for the next changed run (see `runs`).
    pub(crate) changed: bool,
}

/// The allocator. See the module docs.
#[derive(Debug, Clone)]
pub struct Allocator {
    pub(crate) policy: Policy,
    pub(crate) filter_mode: FilterMode,
    pub(crate) kinds: Kinds,
    pub(crate) tree: Tree,
    pub(crate) agents: Vec<Option<Agent>>,
    pub(crate) free_agent_slots: Vec<u32>,
    pub(crate) agent_index: idhash::IdMap<AgentId, u32>,
    /// `R`: the sum of the agents' totals.
    pub(crate) capacity: Dense,
    pub(crate) refused: RefusedTable,
    /// Bumped whenever which leaves are active, suppressed, filtered-then-revived or hinted
    /// changes.
    pub(crate) eligibility_version: u64,
    /// Bumped when a framework is let go again after being held back ([`Allocator::set_sated`]):
    /// part of the all-blocked memos' key, not of the fast caches' (which follow the flag).
    pub(crate) unblock_version: u64,
    /// Bumped whenever the capacity changes.
    pub(crate) capacity_version: u64,
    /// Leaves with a demand hint (checked per decision).
    pub(crate) demand_leaves: Vec<u32>,
    /// The least of every demand hint, kind by kind: a `W` it does not fit fits no hint.
    pub(crate) demand_floor: Vec<u64>,
    /// The fast path's caches (`None` before the first pick).
    pub(crate) fast: Option<Box<fast::Fast>>,
    /// GPU gating: agents with GPUs go only to frameworks that declared `gpu_resources`.
    pub(crate) gpu_gating: bool,
    /// Roles with a guarantee or a limit, by role creation order (empty: no quota anywhere,
    /// and every quota hook is one branch).
    pub(crate) quotas: Vec<quota::RoleQuota>,
    /// Under quota, bumped on every allocation change (what roles hold decides which
    /// frameworks a limit blocks); stays 0 without quota. Part of `cycle`'s all-blocked memo.
    pub(crate) quota_version: u64,
    /// The agents changed since a run last visited them (see `runs`).
    pub(crate) changed: runs::Changed,
    /// A vector reused for the free resources `cycle` decides on and the amount `decline` and
    /// `release_in` give back, so that neither allocates one per agent or per call. Its content
    /// means nothing between calls.
    pub(crate) buf: Dense,
}

impl Allocator {
    /// An empty allocator deciding with `policy`.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            filter_mode: FilterMode::default(),
            kinds: Kinds::default(),
            tree: Tree::default(),
            agents: Vec::new(),
            free_agent_slots: Vec::new(),
            agent_index: Default::default(),
            capacity: Vec::new(),
            refused: RefusedTable::default(),
            eligibility_version: 0,
            unblock_version: 0,
            capacity_version: 0,
            demand_leaves: Vec::new(),
            demand_floor: Vec::new(),
            fast: None,
            gpu_gating: false,
            quotas: Vec::new(),
            quota_version: 0,
            changed: runs::Changed::default(),
            buf: Dense::new(),
        }
    }

    /// Turns GPU gating on or off (off by default): while on, an agent whose total has
    /// `gpus > 0` is offered only to frameworks marked with [`Allocator::set_gpu_capable`]
    /// (Mesos' `GPU_RESOURCES` capability). Others are blocked there
    /// ([`BlockReason::GpuGated`]) exactly as an inactive framework is.
    pub fn set_gpu_gating(&mut self, on: bool) {
        if self.gpu_gating != on {
            self.gpu_gating = on;
            self.eligibility_version += 1;
        }
    }

    /// Whether GPU gating is on.
    pub fn gpu_gating(&self) -> bool {
        self.gpu_gating
    }

    /// Marks whether the framework declared the `gpu_resources` capability (frameworks start
    /// without it).
    pub fn set_gpu_capable(
        &mut self,
        fw: FrameworkId,
        capable: bool,
    ) -> Result<(), AllocatorError> {
        self.leaf_mut(fw)?.gpu_capable = capable;
        Ok(())
    }

    /// Whether GPU gating applies to decisions on agent `slot` (gating on, the agent has GPUs).
    #[inline]
    pub(crate) fn gated(&self, slot: Option<u32>) -> bool {
        self.gpu_gating
            && slot
                .and_then(|s| self.agents.get(s as usize))
                .and_then(Option::as_ref)
                .is_some_and(|a| a.has_gpus)
    }

    /// Caps the distinct resource kinds (default [`DEFAULT_MAX_KINDS`]): a change that would
    /// intern more is refused with [`AllocatorError::TooManyKinds`] and changes nothing.
    pub fn set_max_kinds(&mut self, max: usize) {
        self.kinds.set_max(max);
    }

    /// The cap on distinct resource kinds.
    pub fn max_kinds(&self) -> usize {
        self.kinds.max()
    }

    /// How many distinct resource kinds are known (they are never forgotten).
    pub fn kinds_len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether `r` could be added (agent totals, a demand, a filter) without taking the kinds
    /// past the cap: `Err(TooManyKinds)` if not. Changes nothing.
    pub fn check_kinds(&self, r: &Resources) -> Result<(), AllocatorError> {
        self.kinds.check(r)
    }

    /// How many roles exist, the root not counted (every path prefix of every role counts;
    /// roles are never removed).
    pub fn roles_len(&self) -> usize {
        self.tree.roles.len()
    }

    /// How many roles adding a framework under `role` (or setting its weight) would create:
    /// the prefixes of its path that do not exist yet.
    pub fn new_roles(&self, role: &RolePath) -> usize {
        let mut path = String::new();
        let mut new = 0;
        for seg in role.segments() {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(seg);
            if !self.tree.roles.contains_key(&path) {
                new += 1;
            }
        }
        new
    }

    /// The policy in use.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// How decline filters weigh in H-DRF decisions.
    pub fn filter_mode(&self) -> FilterMode {
        self.filter_mode
    }

    /// Chooses how decline filters weigh in H-DRF decisions (the other policies decide the same
    /// either way: filtering a leaf changes no other node's value there).
    pub fn set_filter_mode(&mut self, mode: FilterMode) {
        self.filter_mode = mode;
        self.eligibility_version += 1;
    }

    /// Sets a role's weight, creating the role (and its ancestors, weight 1) if new.
    pub fn set_role_weight(&mut self, role: &RolePath, weight: Weight) {
        let i = self.tree.ensure_role(role);
        self.tree.nodes[i as usize].weight = weight.get();
        self.tree.shape_version += 1;
    }

    /// A role's weight, or `None` if the role does not exist.
    pub fn role_weight(&self, role: &RolePath) -> Option<Weight> {
        let i = *self.tree.roles.get(role.as_str())?;
        Weight::new(self.tree.nodes[i as usize].weight).ok()
    }

    /// Registers a framework as a leaf under `role` (created on demand). It starts active, not
    /// suppressed, without a demand hint, after its role's existing children in tie order.
    pub fn add_framework(
        &mut self,
        fw: FrameworkId,
        role: &RolePath,
    ) -> Result<(), AllocatorError> {
        if self.tree.frameworks.contains_key(&fw) {
            return Err(AllocatorError::DuplicateFramework(fw));
        }
        self.tree.add_leaf(fw, role);
        Ok(())
    }

    /// The leaf slot of `fw`.
    ///
    /// (Both lookups build their error only on a miss: an error made eagerly and dropped costs
    /// a call to its destructor on every hit, one per decline.)
    pub(crate) fn leaf_of(&self, fw: FrameworkId) -> Result<u32, AllocatorError> {
        match self.tree.frameworks.get(&fw) {
            Some(&leaf) => Ok(leaf),
            None => Err(AllocatorError::UnknownFramework(fw)),
        }
    }

    /// The agent slot of `agent`.
    pub(crate) fn agent_of(&self, agent: AgentId) -> Result<u32, AllocatorError> {
        match self.agent_index.get(&agent) {
            Some(&slot) => Ok(slot),
            None => Err(AllocatorError::UnknownAgent(agent)),
        }
    }

    /// The leaf of `fw`, for a change of its eligibility.
    fn leaf_mut(&mut self, fw: FrameworkId) -> Result<&mut tree::Leaf, AllocatorError> {
        let i = self.leaf_of(fw)?;
        self.eligibility_version += 1;
        self.tree.nodes[i as usize]
            .leaf
            .as_mut()
            .ok_or(AllocatorError::UnknownFramework(fw))
    }

    /// Removes the framework's leaf, its filters, and releases everything it holds on every agent.
    pub fn remove_framework(&mut self, fw: FrameworkId) -> Result<(), AllocatorError> {
        let leaf = self.leaf_of(fw)?;
        for slot in 0..self.agents.len() {
            let held = match self.agents[slot].as_mut() {
                Some(agent) => {
                    if let Some(f) = agent.filters.remove(&self.tree, leaf) {
                        self.refused.release(f.refused);
                    }
                    agent
                        .held
                        .iter()
                        .position(|(l, _)| *l == leaf)
                        .map(|p| agent.held.remove(p).1)
                }
                None => None,
            };
            if let Some(held) = held {
                self.drop_leaf_from_pools(leaf, slot);
                self.unbook(leaf, slot as u32, &held);
            }
        }
        self.tree.remove_leaf(leaf);
        self.demand_leaves.retain(|&l| l != leaf);
        self.refresh_demand_floor();
        self.eligibility_version += 1;
        Ok(())
    }

    /// Marks the framework subscribed (`true`) or not; inactive leaves are blocked.
    pub fn set_active(&mut self, fw: FrameworkId, active: bool) -> Result<(), AllocatorError> {
        self.leaf_mut(fw)?.active = active;
        Ok(())
    }

    /// Takes the framework out of allocation until [`Allocator::revive`].
    pub fn suppress(&mut self, fw: FrameworkId) -> Result<(), AllocatorError> {
        self.leaf_mut(fw)?.suppressed = true;
        Ok(())
    }

    /// Unsuppresses the framework and clears all its decline filters.
    pub fn revive(&mut self, fw: FrameworkId) -> Result<(), AllocatorError> {
        let leaf = self.leaf_of(fw)?;
        self.leaf_mut(fw)?.suppressed = false;
        for agent in self.agents.iter_mut().flatten() {
            if let Some(f) = agent.filters.remove(&self.tree, leaf) {
                self.refused.release(f.refused);
            }
        }
        Ok(())
    }

    /// Holds the framework back from offers (`true`) or lets it be offered again, leaving its
    /// suppression and decline filters as they are. A sated leaf is blocked everywhere, as a
    /// suppressed one is. The books set it while a framework's outstanding offers already hold
    /// every task it said it still wants, so it is not offered agents it would only decline.
    pub fn set_sated(&mut self, fw: FrameworkId, sated: bool) -> Result<(), AllocatorError> {
        let i = self.leaf_of(fw)?;
        let leaf = self.tree.nodes[i as usize]
            .leaf
            .as_mut()
            .ok_or(AllocatorError::UnknownFramework(fw))?;
        if leaf.sated == sated {
            return Ok(());
        }
        leaf.sated = sated;
        // The cached H-DRF vectors follow the flip incrementally, as they follow an
        // allocation, so the caches are not rebuilt. Only a flip that may unblock someone
        // (a framework let go; under quota, a guarantee's demand changed) invalidates the
        // all-blocked memos: a framework held back blocks no one else.
        if !sated || self.has_quota() {
            self.unblock_version += 1;
        }
        let nodes = self.tree.nodes.len();
        if let Some(fast) = &mut self.fast {
            fast.allocation_changed(i, nodes);
        }
        Ok(())
    }

    /// Whether the framework is held back ([`Allocator::set_sated`]); `None` when unknown.
    pub fn is_sated(&self, fw: FrameworkId) -> Option<bool> {
        let i = self.leaf_of(fw).ok()?;
        self.tree.nodes[i as usize].leaf.as_ref().map(|l| l.sated)
    }

    /// Sets (or clears, with `None`) the framework's demand hint: a leaf whose demand does not fit
    /// in `W` is blocked for `W`. An empty demand is the same as none.
    pub fn set_demand(
        &mut self,
        fw: FrameworkId,
        demand: Option<Resources>,
    ) -> Result<(), AllocatorError> {
        self.leaf_of(fw)?;
        if let Some(d) = &demand {
            self.kinds.check(d)?;
        }
        let dense = demand
            .filter(|d| !d.is_empty())
            .map(|d| self.kinds.dense(&d));
        let has = dense.is_some();
        self.leaf_mut(fw)?.demand = dense;
        let leaf = self.leaf_of(fw)?;
        self.demand_leaves.retain(|&l| l != leaf);
        if has {
            self.demand_leaves.push(leaf);
            self.demand_leaves.sort_unstable();
        }
        self.refresh_demand_floor();
        Ok(())
    }

    /// Recomputes [`Allocator::demand_floor`] from the hints (a kind a hint lacks counts 0).
    fn refresh_demand_floor(&mut self) {
        let mut floor: Option<Vec<u64>> = None;
        for &leaf in &self.demand_leaves {
            let Some(d) = self.tree.nodes[leaf as usize]
                .leaf
                .as_ref()
                .and_then(|l| l.demand.as_ref())
            else {
                continue;
            };
            floor = Some(match floor {
                None => d.clone(),
                Some(f) => f.iter().zip(d).map(|(&a, &b)| a.min(b)).collect(),
            });
        }
        self.demand_floor = floor.unwrap_or_default();
    }

    /// Adds (or replaces) the decline filter of `fw` on `agent`: it blocks `fw` for that agent
    /// while `now < until` and the agent's free resources fit in `refused`.
    pub fn add_filter(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        refused: &Resources,
        until: u64,
    ) -> Result<(), AllocatorError> {
        let leaf = self.leaf_of(fw)?;
        let slot = self.agent_of(agent)?;
        self.kinds.check(refused)?;
        let dense = self.kinds.dense(refused);
        self.filter_dense(leaf, slot, &dense, until);
        Ok(())
    }

    /// Adds (or replaces) the filter of `leaf` on agent `slot` refusing `dense` until `until`.
    pub(crate) fn filter_dense(&mut self, leaf: u32, slot: u32, dense: &[u64], until: u64) {
        let r = self.refused.acquire(dense);
        if let Some(agent) = self.agents[slot as usize].as_mut() {
            if let Some(old) = agent.filters.insert(
                &self.tree,
                filters::Filter {
                    leaf,
                    refused: r,
                    until,
                },
            ) {
                self.refused.release(old);
            }
            // A replaced filter may be narrower or shorter: the agent may no longer be blocked
            // for everyone, so `cycle`'s all-blocked memo must not skip it.
            agent.touch(slot, &mut self.changed);
        } else {
            self.refused.release(r);
        }
    }
}
