//! [`FairShares`]: every role's and framework's dominant share and fair share (water-filling
//! down the tree, see the module docs of `preempt`), and who is starved.

use std::collections::BTreeMap;

use protocol::{FrameworkId, Resources};

use super::{FrameworkInput, Input, RoleInput, RoleShare};

const NO_PARENT: usize = usize::MAX;

#[derive(Debug, Clone)]
pub(super) struct Node {
    /// A framework leaf (not a role).
    pub(super) leaf: bool,
    pub(super) parent: usize,
    pub(super) children: Vec<usize>,
    pub(super) path: String,
    pub(super) weight: f64,
    pub(super) held: Vec<f64>,
    pub(super) guarantee: Vec<f64>,
    /// The most dominant share its limit lets it hold (`max_j limit_j / C_j` over the limited
    /// kinds); infinite without a limit.
    pub(super) limit_cap: f64,
    pub(super) demand: bool,
    pub(super) share: f64,
    pub(super) fair: f64,
}

/// Fair shares of every role and framework (see the module docs).
#[derive(Debug, Clone)]
pub struct FairShares {
    pub(super) kinds: Vec<String>,
    pub(super) cap: Vec<f64>,
    pub(super) nodes: Vec<Node>,
    pub(super) roles: BTreeMap<String, usize>,
    pub(super) frameworks: BTreeMap<FrameworkId, usize>,
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

    pub(super) fn dense(&self, r: &Resources) -> Vec<f64> {
        self.kinds.iter().map(|k| r.millis(k) as f64).collect()
    }

    pub(super) fn share_of(&self, v: &[f64]) -> f64 {
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

    pub(super) fn standing(&self, i: usize) -> RoleShare {
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

    pub(super) fn is_ancestor(&self, a: usize, mut n: usize) -> bool {
        while n != NO_PARENT {
            if n == a {
                return true;
            }
            n = self.nodes[n].parent;
        }
        false
    }

    /// The nodes from `leaf` up to, not including, its lowest common ancestor with `s`.
    pub(super) fn path_below_lca(&self, leaf: usize, s: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut n = leaf;
        while n != NO_PARENT && !self.is_ancestor(n, s) {
            out.push(n);
            n = self.nodes[n].parent;
        }
        out
    }
}
