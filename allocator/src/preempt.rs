//! Preemption toward fair share (issue #17): who is *starved*, and which running tasks to take
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
//! fewest tasks, the smallest task that alone finishes the job, else the largest; ties by
//! framework id and task id. Same inputs, same plan, whatever the order of the tasks given.
//! A guarantee above the role's fair share is served only as far as the other roles' own fair
//! shares allow.

use std::collections::BTreeMap;

use protocol::{FrameworkId, Resources, TaskId};

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

const NO_PARENT: usize = usize::MAX;

#[derive(Debug, Clone)]
struct Node {
    /// A framework leaf (not a role).
    leaf: bool,
    parent: usize,
    children: Vec<usize>,
    path: String,
    weight: f64,
    held: Vec<f64>,
    guarantee: Vec<f64>,
    /// The most dominant share its limit lets it hold (`max_j limit_j / C_j` over the limited
    /// kinds); infinite without a limit.
    limit_cap: f64,
    demand: bool,
    share: f64,
    fair: f64,
}

/// Fair shares of every role and framework (see the module docs).
#[derive(Debug, Clone)]
pub struct FairShares {
    kinds: Vec<String>,
    cap: Vec<f64>,
    nodes: Vec<Node>,
    roles: BTreeMap<String, usize>,
    frameworks: BTreeMap<FrameworkId, usize>,
}

impl FairShares {
    /// Computes every node's share and fair share: O(roles + frameworks) (plus a sort of each
    /// node's children).
    pub fn compute(input: &Input) -> Self {
        let kinds: Vec<String> = input
            .capacity
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(n, _)| n.to_string())
            .collect();
        let cap: Vec<f64> = kinds
            .iter()
            .map(|k| input.capacity.millis(k) as f64)
            .collect();
        let mut me = Self {
            nodes: vec![Node {
                leaf: false,
                parent: NO_PARENT,
                children: Vec::new(),
                path: String::new(),
                weight: 1.0,
                held: vec![0.0; kinds.len()],
                guarantee: vec![0.0; kinds.len()],
                limit_cap: f64::INFINITY,
                demand: false,
                share: 0.0,
                fair: 1.0,
            }],
            kinds,
            cap,
            roles: BTreeMap::new(),
            frameworks: BTreeMap::new(),
        };
        let mut roles: BTreeMap<&str, &RoleInput> = BTreeMap::new();
        for r in &input.roles {
            roles.insert(r.path.as_str(), r);
        }
        let mut paths: Vec<&str> = roles.keys().copied().collect();
        paths.extend(input.frameworks.iter().map(|f| f.role.as_str()));
        paths.sort_unstable();
        for p in paths {
            me.ensure_role(p);
        }
        for (path, r) in &roles {
            if let Some(&i) = me.roles.get(*path) {
                me.nodes[i].weight = if r.weight > 0.0 { r.weight } else { 1.0 };
                if let Some(g) = &r.guarantee {
                    me.nodes[i].guarantee = me.dense(g);
                }
                if let Some(l) = &r.limit {
                    let cap = me
                        .kinds
                        .iter()
                        .zip(&me.cap)
                        .filter(|(k, _)| l.millis(k) > 0)
                        .map(|(k, c)| l.millis(k) as f64 / c)
                        .fold(f64::NEG_INFINITY, f64::max);
                    if cap.is_finite() {
                        me.nodes[i].limit_cap = cap;
                    }
                }
            }
        }
        let mut fws: Vec<&FrameworkInput> = input.frameworks.iter().collect();
        fws.sort_by_key(|f| f.id);
        for f in fws {
            let parent = me.ensure_role(&f.role);
            let held = me.dense(&f.held);
            let i = me.nodes.len();
            me.nodes.push(Node {
                leaf: true,
                parent,
                children: Vec::new(),
                path: f.role.clone(),
                weight: 1.0,
                held: held.clone(),
                guarantee: vec![0.0; me.kinds.len()],
                limit_cap: f64::INFINITY,
                demand: f.demand,
                share: 0.0,
                fair: 0.0,
            });
            me.nodes[parent].children.push(i);
            me.frameworks.insert(f.id, i);
            let mut n = parent;
            while n != NO_PARENT {
                for (h, v) in me.nodes[n].held.iter_mut().zip(&held) {
                    *h += v;
                }
                me.nodes[n].demand |= f.demand;
                n = me.nodes[n].parent;
            }
        }
        for i in 0..me.nodes.len() {
            me.nodes[i].share = me.share_of(&me.nodes[i].held);
        }
        me.fill(0);
        me
    }

    fn ensure_role(&mut self, path: &str) -> usize {
        if let Some(&i) = self.roles.get(path) {
            return i;
        }
        let mut parent = 0;
        let mut prefix = String::new();
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(seg);
            parent = match self.roles.get(&prefix) {
                Some(&i) => i,
                None => {
                    let i = self.nodes.len();
                    self.nodes.push(Node {
                        leaf: false,
                        parent,
                        children: Vec::new(),
                        path: prefix.clone(),
                        weight: 1.0,
                        held: vec![0.0; self.kinds.len()],
                        guarantee: vec![0.0; self.kinds.len()],
                        limit_cap: f64::INFINITY,
                        demand: false,
                        share: 0.0,
                        fair: 0.0,
                    });
                    self.nodes[parent].children.push(i);
                    self.roles.insert(prefix.clone(), i);
                    i
                }
            };
        }
        parent
    }

    fn dense(&self, r: &Resources) -> Vec<f64> {
        self.kinds.iter().map(|k| r.millis(k) as f64).collect()
    }

    fn share_of(&self, v: &[f64]) -> f64 {
        v.iter()
            .zip(&self.cap)
            .map(|(h, c)| h / c)
            .fold(0.0, f64::max)
    }

    /// Water-fills `node`'s fair share into its children, then recurses.
    fn fill(&mut self, node: usize) {
        let children = self.nodes[node].children.clone();
        let mut part: Vec<(f64, usize)> = Vec::new();
        for &c in &children {
            let n = &self.nodes[c];
            if n.demand || n.share > 0.0 {
                let cap = if n.demand { n.limit_cap } else { n.share };
                part.push((cap / n.weight, c));
            } else {
                self.nodes[c].fair = 0.0;
            }
        }
        part.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut rest = self.nodes[node].fair;
        let mut weights: f64 = part.iter().map(|&(_, c)| self.nodes[c].weight).sum();
        for (i, &(per_weight, c)) in part.iter().enumerate() {
            let level = if weights > 0.0 { rest / weights } else { 0.0 };
            if per_weight < level {
                // Entitled to what it holds only; the rest is shared by the others.
                let w = self.nodes[c].weight;
                self.nodes[c].fair = per_weight * w;
                rest = (rest - per_weight * w).max(0.0);
                weights -= w;
                continue;
            }
            for &(_, c) in &part[i..] {
                self.nodes[c].fair = self.nodes[c].weight * level;
            }
            break;
        }
        for c in children {
            self.fill(c);
        }
    }

    /// A role's standing (`None` for an unknown role).
    pub fn role(&self, path: &str) -> Option<RoleShare> {
        let &i = self.roles.get(path)?;
        Some(self.standing(i))
    }

    fn standing(&self, i: usize) -> RoleShare {
        let n = &self.nodes[i];
        let below_guarantee = n
            .guarantee
            .iter()
            .zip(&n.held)
            .zip(&self.cap)
            .any(|((g, h), c)| *g > 0.0 && *h < g.min(*c));
        RoleShare {
            role: n.path.clone(),
            share: n.share,
            fair: n.fair,
            demand: n.demand,
            below_guarantee,
        }
    }

    /// Every role's standing, by path.
    pub fn roles(&self) -> Vec<RoleShare> {
        self.roles.values().map(|&i| self.standing(i)).collect()
    }

    /// The starved roles, by path.
    pub fn starved(&self) -> Vec<String> {
        self.roles()
            .into_iter()
            .filter(RoleShare::starved)
            .map(|r| r.role)
            .collect()
    }

    /// A framework's `(share, fair share)` among its role's children.
    pub fn framework(&self, fw: FrameworkId) -> Option<(f64, f64)> {
        let &i = self.frameworks.get(&fw)?;
        Some((self.nodes[i].share, self.nodes[i].fair))
    }

    fn is_ancestor(&self, a: usize, mut n: usize) -> bool {
        while n != NO_PARENT {
            if n == a {
                return true;
            }
            n = self.nodes[n].parent;
        }
        false
    }

    /// The nodes from `leaf` up to, not including, its lowest common ancestor with `s`.
    fn path_below_lca(&self, leaf: usize, s: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut n = leaf;
        while n != NO_PARENT && !self.is_ancestor(n, s) {
            out.push(n);
            n = self.nodes[n].parent;
        }
        out
    }
}

/// Tasks of one framework with the same priority and resources: the planner picks among
/// groups, then takes the group's tasks in task id order, so a plan costs
/// O(victims x groups), not O(victims x tasks).
struct Group<'a> {
    framework: FrameworkId,
    priority: i32,
    res: Vec<f64>,
    size: f64,
    /// The nodes from the framework's leaf up to (not including) the lowest common ancestor
    /// with the starved role.
    path: Vec<usize>,
    tasks: Vec<&'a TaskInput>,
    next: usize,
}

/// `max_j (a_j + b_j + c_j) / cap_j`.
fn share3(cap: &[f64], a: &[f64], b: &[f64], c: &[f64]) -> f64 {
    let mut m = 0.0f64;
    for j in 0..cap.len() {
        m = m.max((a[j] + b[j] + c[j]) / cap[j]);
    }
    m
}

/// `max_j (a_j - b_j - c_j) / cap_j`.
fn share_less(cap: &[f64], a: &[f64], b: &[f64], c: &[f64]) -> f64 {
    let mut m = 0.0f64;
    for j in 0..cap.len() {
        m = m.max((a[j] - b[j] - c[j]) / cap[j]);
    }
    m
}

/// Chooses tasks to take back for the starved role `for_role` (see the module docs); `None`
/// when the role is unknown or not starved, or no task can be taken without taking some role
/// below its fair share or guarantee. Tasks of unknown frameworks are ignored. Costs
/// O(tasks log tasks) to group the tasks, then O(groups x depth x kinds) per victim.
pub fn plan(shares: &FairShares, for_role: &str, tasks: &[TaskInput]) -> Option<Plan> {
    let &s = shares.roles.get(for_role)?;
    let standing = shares.standing(s);
    if !standing.starved() {
        return None;
    }
    let k = shares.kinds.len();
    let cap = &shares.cap;
    let zero = vec![0.0; k];
    let s_held = &shares.nodes[s].held;
    let g_target: Vec<f64> = shares.nodes[s]
        .guarantee
        .iter()
        .zip(cap)
        .map(|(g, c)| g.min(*c))
        .collect();
    let fair = shares.nodes[s].fair;
    let satisfied = |freed: &[f64], more: &[f64]| {
        share3(cap, s_held, freed, more) + SHARE_TOLERANCE >= fair
            && (0..k).all(|j| s_held[j] + freed[j] + more[j] >= g_target[j])
    };
    // Group the candidates by (framework, priority, resources in thousandths).
    let mut groups: BTreeMap<(FrameworkId, i32, Vec<u64>), Vec<&TaskInput>> = BTreeMap::new();
    for t in tasks {
        let Some(&leaf) = shares.frameworks.get(&t.framework) else {
            continue;
        };
        if shares.is_ancestor(s, leaf) {
            continue;
        }
        let millis: Vec<u64> = shares.kinds.iter().map(|n| t.resources.millis(n)).collect();
        if millis.iter().all(|v| *v == 0) {
            continue;
        }
        groups
            .entry((t.framework, t.priority, millis))
            .or_default()
            .push(t);
    }
    let mut groups: Vec<Group<'_>> = groups
        .into_iter()
        .map(|((framework, priority, millis), mut list)| {
            list.sort_by(|a, b| a.task_id.cmp(&b.task_id));
            let res: Vec<f64> = millis.iter().map(|v| *v as f64).collect();
            let leaf = shares.frameworks[&framework];
            Group {
                framework,
                priority,
                size: shares.share_of(&res),
                res,
                path: shares.path_below_lca(leaf, s),
                tasks: list,
                next: 0,
            }
        })
        .collect();
    let mut taken: Vec<Vec<f64>> = vec![Vec::new(); shares.nodes.len()];
    let mut freed = vec![0.0; k];
    let mut victims = Vec::new();
    while !satisfied(&freed, &zero) {
        let now_share = share3(cap, s_held, &freed, &zero);
        let short_of_share = now_share + SHARE_TOLERANCE < fair;
        // Smallest key wins: (priority, -excess, covers first, covers ? size : -size, group).
        let mut best: Option<(i32, f64, bool, f64, usize)> = None;
        for (gi, g) in groups.iter().enumerate() {
            if g.next >= g.tasks.len() {
                continue;
            }
            let gains_share = short_of_share && share3(cap, s_held, &freed, &g.res) > now_share;
            let gains_guarantee =
                (0..k).any(|j| g.res[j] > 0.0 && s_held[j] + freed[j] < g_target[j]);
            if !gains_share && !gains_guarantee {
                continue;
            }
            let floor_ok = g.path.iter().enumerate().all(|(i, &n)| {
                let node = &shares.nodes[n];
                // Roles are protected; a framework only where it is the branch itself (it
                // sits directly beside the starved role's line).
                if node.leaf && i + 1 < g.path.len() {
                    return true;
                }
                let t = if taken[n].is_empty() {
                    &zero
                } else {
                    &taken[n]
                };
                share_less(cap, &node.held, t, &g.res) + 1e-12 >= node.fair
                    && (0..k).all(|j| {
                        g.res[j] == 0.0
                            || node.guarantee[j] == 0.0
                            || node.held[j] - t[j] - g.res[j] >= node.guarantee[j]
                    })
            });
            if !floor_ok {
                continue;
            }
            let branch = g.path.last().copied().unwrap_or(0);
            let bt = if taken[branch].is_empty() {
                &zero
            } else {
                &taken[branch]
            };
            let excess =
                share_less(cap, &shares.nodes[branch].held, bt, &zero) - shares.nodes[branch].fair;
            let covers = satisfied(&freed, &g.res);
            let key = (
                g.priority,
                -excess,
                !covers,
                if covers { g.size } else { -g.size },
                gi,
            );
            let better = best.as_ref().is_none_or(|b| {
                key.0
                    .cmp(&b.0)
                    .then(key.1.total_cmp(&b.1))
                    .then(key.2.cmp(&b.2))
                    .then(key.3.total_cmp(&b.3))
                    .then(key.4.cmp(&b.4))
                    .is_lt()
            });
            if better {
                best = Some(key);
            }
        }
        let Some((_, excess_neg, _, _, gi)) = best else {
            break;
        };
        let g = &mut groups[gi];
        let task = g.tasks[g.next];
        g.next += 1;
        for &n in &g.path {
            if taken[n].is_empty() {
                taken[n] = vec![0.0; k];
            }
            for (t, r) in taken[n].iter_mut().zip(&g.res) {
                *t += r;
            }
        }
        for (f, r) in freed.iter_mut().zip(&g.res) {
            *f += r;
        }
        let role = g
            .path
            .first()
            .map(|&n| shares.nodes[n].path.clone())
            .unwrap_or_default();
        let branch = g.path.last().copied().unwrap_or(0);
        victims.push(Victim {
            framework: g.framework,
            task_id: task.task_id.clone(),
            role: role.clone(),
            priority: g.priority,
            why: format!(
                "role {role:?} (priority {} task) is {:.1} % above the fair share of {:?} ({:.1} %); {for_role:?} is at {:.1} % of its {:.1} %",
                g.priority,
                -excess_neg * 100.0,
                shares.nodes[branch].path,
                shares.nodes[branch].fair * 100.0,
                standing.share * 100.0,
                fair * 100.0
            ),
        });
    }
    (!victims.is_empty()).then(|| Plan {
        for_role: for_role.to_string(),
        share: standing.share,
        fair,
        victims,
    })
}

#[cfg(test)]
#[path = "preempt_tests.rs"]
mod tests;

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
