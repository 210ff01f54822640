//! Preemption toward fair share: who is *starved*, and which running tasks to take
//! back for it. PURE: no I/O, no clock (the coordinator keeps the timers and calls this on a
//! timer, never on the allocation path).
//!
//! # Fair share
//!
//! Shares are dominant shares over the cluster capacity `C`: a node's share is
//! `max_j held_j / C_j`, where `held` is its subtree's plain sum (tasks **and** outstanding
//! offers, as the allocator books them). A node *takes part* at its parent when it has demand
//! (an active, unsuppressed framework in its subtree) or holds something. Fair shares are
//! filled with water down the tree, in dominant-share units: the root is entitled to 1; a
//! node's entitlement `E` is split among its children that take part in proportion to their
//! weights (frameworks weigh 1), except that a child **without** demand is entitled to no more
//! than it holds, and a role with a quota limit to no more than its limit allows
//! (`max_j limit_j / C_j` over the limited kinds), their unused parts going to the others. In
//! numbers: the level `λ` with `Σ_i min(cap_i, w_i λ) = E`, `cap_i` the share of a child without
//! demand, its limit's share for a limited child with demand, unbounded otherwise, and child `i`
//! is entitled to `min(cap_i, w_i λ)`. (Without the limit's cap a limited role could never
//! reach its fair share, and preemption would take tasks it cannot use.) Children that do not take
//! part are entitled to 0.
//!
//! Worked example (the unit test `the_worked_example_of_the_module_docs`): capacity `cpus=12`;
//! role `a` (weight 2) holds all 12 cpus in 1-cpu tasks, role `b` (weight 1) holds nothing and
//! has demand, role `c` holds nothing and has no demand. `c` does not take part; `a` and `b`
//! split 1 as 2:1, so `a`'s fair share is 2/3 and `b`'s 1/3; `b` is starved (share 0 < 1/3).
//! A plan takes 4 tasks from `a` (12/12 down to 8/12 = 2/3, never below). Had `a` no demand
//! and held only 3 cpus, its fair share would be what it holds, 1/4, and `b`'s the rest, 3/4.
//!
//! Summing dominant shares of children that dominate in different kinds is an approximation
//! (their parent's share may be smaller than the sum); it errs toward protecting: a role is
//! never taken below the fair share computed this way.
//!
//! # Starved
//!
//! A role is starved when it has demand and its share is more than [`SHARE_TOLERANCE`] below
//! its fair share, or it holds less than its guarantee (capped at the capacity) in some
//! guaranteed kind. The SDK suppresses a framework once it has no pending task and revives it
//! when one is added, so with SDK frameworks "demand" means "has tasks waiting to launch".
//!
//! # The plan
//!
//! [`plan`] takes back tasks from outside the starved role's subtree until the starved role,
//! were it given everything freed, would reach its fair share and its guarantee. A task is a
//! candidate only if taking it leaves every role on its path below the lowest common ancestor
//! with the starved role (its role, that role's parents; its framework too when the framework
//! itself sits beside the starved role's line) at or above its own fair share and, in each kind
//! the task uses, at or above its guarantee. Frameworks within a role are not protected from
//! each other: the role's lowest-priority tasks go first whichever framework runs them. Among candidates: the
//! lowest `priority` first; then the branch furthest above its fair share; then, to take the
//! fewest tasks, the smallest task that alone finishes the job, else the largest; then the
//! most recently launched task (the least work lost, as Hadoop's fair scheduler chooses);
//! ties by framework id and task id. Same inputs, same plan, whatever the order of the tasks
//! given.
//! A guarantee above the role's fair share is served only as far as the other roles' own fair
//! shares allow.
//!
//! # Layout
//!
//! - this file: the inputs and outputs, and [`crate::Allocator::preemption_input`];
//! - `shares.rs`: [`FairShares`] (dominant shares, water-filling, who is starved);
//! - `plan.rs`: [`plan`] (which tasks to take back);
//! - `tests.rs`: unit tests and the proptest.

mod plan;
mod shares;
#[cfg(test)]
mod tests;

use protocol::{FrameworkId, Resources, TaskId};

pub use plan::plan;
pub use shares::FairShares;

/// How far (in dominant share, 0.1 %) a role may be below its fair share before it counts as
/// starved: tasks are whole, so an exact share is rarely reachable.
pub const SHARE_TOLERANCE: f64 = 1e-3;

/// A role as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleInput {
    /// Its path (`eng/batch`); missing ancestors are created with weight 1.
    pub path: String,
    /// Its weight (> 0).
    pub weight: f64,
    /// Its guarantee, if any.
    pub guarantee: Option<Resources>,
    /// Its limit, if any: it caps the role's fair share (see the module docs).
    pub limit: Option<Resources>,
}

/// A framework as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameworkInput {
    /// Its id.
    pub id: FrameworkId,
    /// Its role's path.
    pub role: String,
    /// Active and not suppressed: it wants more.
    pub demand: bool,
    /// What it holds: its tasks and its outstanding offers.
    pub held: Resources,
}

/// A running (non-terminal) task that may be taken back.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInput {
    /// Its framework.
    pub framework: FrameworkId,
    /// Its id.
    pub task_id: TaskId,
    /// What it uses.
    pub resources: Resources,
    /// Its priority (higher = more important; default 0).
    pub priority: i32,
    /// When it was launched, as a sequence number that only grows (the books count launches):
    /// of otherwise equal candidates the highest, the most recently launched, goes first.
    pub launch_order: u64,
    /// The role whose reserved pool it is booked in (`None`: unreserved). What it frees goes
    /// back to that pool, which only that role's subtree is offered: such a task is taken only
    /// for a starved role inside that subtree.
    pub reserved_for: Option<String>,
}

/// What fair shares are computed from (see [`crate::Allocator::preemption_input`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Input {
    /// The cluster capacity `C`.
    pub capacity: Resources,
    /// The roles (weights and guarantees); roles named only by frameworks weigh 1.
    pub roles: Vec<RoleInput>,
    /// The frameworks.
    pub frameworks: Vec<FrameworkInput>,
}

/// One role's standing.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleShare {
    /// The role's path.
    pub role: String,
    /// Its dominant share now.
    pub share: f64,
    /// Its fair share.
    pub fair: f64,
    /// It has demand.
    pub demand: bool,
    /// It holds less than its guarantee in some guaranteed kind.
    pub below_guarantee: bool,
}

impl RoleShare {
    /// Starved: demand, and below its fair share (beyond [`SHARE_TOLERANCE`]) or its
    /// guarantee.
    pub fn starved(&self) -> bool {
        self.demand && (self.share + SHARE_TOLERANCE < self.fair || self.below_guarantee)
    }
}

/// A task chosen to be taken back.
#[derive(Debug, Clone, PartialEq)]
pub struct Victim {
    /// Its framework.
    pub framework: FrameworkId,
    /// The task.
    pub task_id: TaskId,
    /// Its framework's role.
    pub role: String,
    /// Its priority.
    pub priority: i32,
    /// Why it was chosen, for logs and `explain`.
    pub why: String,
}

/// A preemption plan for one starved role.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The starved role the tasks are taken back for.
    pub for_role: String,
    /// Its share and fair share when planned.
    pub share: f64,
    /// Its fair share.
    pub fair: f64,
    /// The tasks to take back, in the order chosen.
    pub victims: Vec<Victim>,
}

impl crate::Allocator {
    /// What [`FairShares::compute`] needs, from the books: the capacity, every role (weight,
    /// guarantee) and every framework (role, demand = active and not suppressed, what it holds
    /// with its outstanding offers). O(roles + frameworks).
    pub fn preemption_input(&self) -> Input {
        let mut roles: Vec<RoleInput> = self
            .tree
            .roles
            .iter()
            .map(|(path, &node)| RoleInput {
                path: path.clone(),
                weight: self.tree.nodes[node as usize].weight,
                guarantee: self.node_quota(node).0,
                limit: self.node_quota(node).1,
            })
            .collect();
        roles.sort_by(|a, b| a.path.cmp(&b.path));
        let mut frameworks: Vec<FrameworkInput> = self
            .tree
            .frameworks
            .iter()
            .filter_map(|(&id, &leaf)| {
                let node = self.tree.nodes.get(leaf as usize)?;
                let l = node.leaf.as_ref()?;
                let role = self.tree.nodes.get(node.parent as usize)?.path.clone();
                Some(FrameworkInput {
                    id,
                    role,
                    demand: l.active && !l.suppressed,
                    held: self.kinds.resources(&node.raw),
                })
            })
            .collect();
        frameworks.sort_by_key(|f| f.id);
        Input {
            capacity: self.capacity(),
            roles,
            frameworks,
        }
    }
}
