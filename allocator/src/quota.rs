//! Quota per role: guarantees served first, limits never exceeded.
//!
//! A role may carry a *guarantee* and a *limit*, each a list of `(kind, amount)` pairs (a kind
//! not named is neither guaranteed nor limited). What a role "holds" is its subtree's plain sum
//! `raw`, which the allocator books at offer time: allocation **plus outstanding offers**.
//!
//! - **Limit** (applies to the whole subtree): a leaf is blocked for `W` when some role on its
//!   path has a limited kind present in `W` with no headroom left (`raw_j >= limit_j`); such a
//!   leaf is blocked exactly as one whose demand hint does not fit (its siblings are rescaled
//!   without it). Otherwise what it is given is `W` cut, kind by kind, to the smallest headroom
//!   on its path ([`Allocator::limit_cut`]).
//! - **Guarantee**: before H-DRF, the roles below their guarantee for `W` (a guaranteed kind
//!   present in `W` with `raw_j < guarantee_j`) are tried, smallest fulfilled ratio
//!   (`min_j raw_j / guarantee_j` over those kinds) first, ties by role creation order; the first
//!   whose subtree has a leaf not blocked for `W` gets the decision, chosen by H-DRF inside that
//!   subtree (the reference procedure: only roles under their guarantee pay for it).
//!
//! Amounts are [`Resources`] (thousandths): a zero amount is the same as leaving the kind out.
//!
//! With no quota set anywhere, none of this runs: every hook is one `is_empty` branch.

use protocol::{Resources, RolePath};

use super::kinds::at;
use super::reference::Ctx;
use super::tree::{NONE, ROOT};
use super::{Allocator, AllocatorError, BlockReason};

/// One role's quota in dense kinds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RoleQuota {
    /// The role's node slot.
    pub(crate) node: u32,
    /// `(kind, thousandths)` guaranteed.
    pub(crate) guarantee: Vec<(usize, u64)>,
    /// `(kind, thousandths)` the subtree may hold at most.
    pub(crate) limit: Vec<(usize, u64)>,
}

impl Allocator {
    /// Sets (replaces) a role's guarantee and limit, creating the role as
    /// [`Allocator::set_role_weight`] does; `None` clears either. Refuses a limit below the
    /// guarantee in any kind ([`AllocatorError::LimitBelowGuarantee`]) and too many new kinds,
    /// changing nothing then. Amounts are validated by [`Resources`] (finite, non-negative,
    /// bounded).
    pub fn set_role_quota(
        &mut self,
        role: &RolePath,
        guarantee: Option<&Resources>,
        limit: Option<&Resources>,
    ) -> Result<(), AllocatorError> {
        for r in [guarantee, limit].into_iter().flatten() {
            self.kinds.check(r)?;
        }
        if let (Some(g), Some(l)) = (guarantee, limit) {
            for (name, gv) in g.iter() {
                let lv = l.millis(name.as_str());
                if lv > 0 && lv < gv {
                    return Err(AllocatorError::LimitBelowGuarantee(name.to_string()));
                }
            }
        }
        let node = self.tree.ensure_role(role);
        self.tree.shape_version += 1;
        let mut pairs = |r: Option<&Resources>| -> Vec<(usize, u64)> {
            r.map(|r| r.iter().map(|(n, v)| (self.kinds.intern(n), v)).collect())
                .unwrap_or_default()
        };
        let guarantee = pairs(guarantee);
        let limit = pairs(limit);
        self.quotas.retain(|q| q.node != node);
        if !guarantee.is_empty() || !limit.is_empty() {
            self.quotas.push(RoleQuota {
                node,
                guarantee,
                limit,
            });
            self.quotas
                .sort_by_key(|q| self.tree.nodes[q.node as usize].role_ix);
        }
        self.eligibility_version += 1;
        Ok(())
    }

    /// A role's `(guarantee, limit)`; `None` where unset (or the role does not exist).
    pub fn role_quota(&self, role: &RolePath) -> (Option<Resources>, Option<Resources>) {
        match self.tree.roles.get(role.as_str()) {
            Some(&node) => self.node_quota(node),
            None => (None, None),
        }
    }

    /// Why `guarantee` cannot be met now (a kind above the cluster's capacity), if so.
    pub(crate) fn guarantee_unmet(&self, guarantee: &Resources) -> Option<String> {
        let capacity = self.kinds.resources(&self.capacity);
        let over: Vec<String> = guarantee
            .iter()
            .filter(|(n, g)| capacity.millis(n.as_str()) < *g)
            .map(|(n, _)| n.to_string())
            .collect();
        (!over.is_empty()).then(|| {
            format!(
                "the guarantee exceeds the cluster's capacity ({capacity}) in {}: it cannot be met now",
                over.join(", ")
            )
        })
    }

    /// The `(guarantee, limit)` of role node `node`.
    pub(crate) fn node_quota(&self, node: u32) -> (Option<Resources>, Option<Resources>) {
        let Some(q) = self.quotas.iter().find(|q| q.node == node) else {
            return (None, None);
        };
        let res = |pairs: &[(usize, u64)]| {
            (!pairs.is_empty()).then(|| {
                let mut dense = vec![0; self.kinds.len()];
                for &(j, v) in pairs {
                    dense[j] = v;
                }
                self.kinds.resources(&dense)
            })
        };
        (res(&q.guarantee), res(&q.limit))
    }

    /// Whether any role has a guarantee or a limit.
    #[inline]
    pub fn has_quota(&self) -> bool {
        !self.quotas.is_empty()
    }

    /// The quota of role node `node`, if any.
    fn quota_of(&self, node: u32) -> Option<&RoleQuota> {
        self.quotas.iter().find(|q| q.node == node)
    }

    /// The role (path) whose limit blocks `leaf` for `W`, if one does: a limited kind present
    /// in `W` with no headroom left.
    pub(crate) fn limit_block(&self, leaf: u32, w: &[u64]) -> Option<String> {
        let mut n = self.tree.nodes.get(leaf as usize)?.parent;
        while n != NONE {
            let node = &self.tree.nodes[n as usize];
            if let Some(q) = self.quota_of(n) {
                if q.limit
                    .iter()
                    .any(|&(j, l)| at(w, j) > 0 && at(&node.raw, j) >= l)
                {
                    return Some(node.path.clone());
                }
            }
            n = node.parent;
        }
        None
    }

    /// Whether role node `role` is limit-blocked for `W` itself.
    fn role_limit_blocked(&self, q: &RoleQuota, w: &[u64]) -> bool {
        let raw = &self.tree.nodes[q.node as usize].raw;
        q.limit
            .iter()
            .any(|&(j, l)| at(w, j) > 0 && at(raw, j) >= l)
    }

    /// The roles whose limit blocks every leaf below them for `W` (for the fast path's stamping).
    pub(crate) fn limit_blocked_roles(&self, w: &[u64]) -> Vec<u32> {
        self.quotas
            .iter()
            .filter(|q| self.role_limit_blocked(q, w))
            .map(|q| q.node)
            .collect()
    }

    /// `W` cut, kind by kind, to the headroom under every limit on `leaf`'s path.
    pub(crate) fn limit_cut(&self, leaf: u32, w: &[u64]) -> Vec<u64> {
        let mut out = w.to_vec();
        let mut n = self
            .tree
            .nodes
            .get(leaf as usize)
            .map_or(NONE, |x| x.parent);
        while n != NONE {
            let node = &self.tree.nodes[n as usize];
            if let Some(q) = self.quota_of(n) {
                for &(j, l) in &q.limit {
                    if let Some(o) = out.get_mut(j) {
                        *o = (*o).min(l.saturating_sub(at(&node.raw, j)));
                    }
                }
            }
            n = node.parent;
        }
        out
    }

    /// The roles below their guarantee for `W`, neediest first: `(role node)` ordered by the
    /// smallest `raw_j / guarantee_j` over guaranteed kinds present in `W`, then creation.
    fn unmet_guarantees(&self, w: &[u64]) -> Vec<u32> {
        let mut out: Vec<(f64, u32, u32)> = Vec::new();
        for q in &self.quotas {
            let node = &self.tree.nodes[q.node as usize];
            let mut ratio = f64::INFINITY;
            let mut below = false;
            for &(j, g) in &q.guarantee {
                if g == 0 || at(w, j) == 0 {
                    continue;
                }
                let have = at(&node.raw, j);
                if have < g {
                    below = true;
                }
                ratio = ratio.min(have as f64 / g as f64);
            }
            if below {
                out.push((ratio, node.role_ix, q.node));
            }
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        out.into_iter().map(|(_, _, n)| n).collect()
    }

    /// The guarantee stage: the leaf a role under its guarantee gets `W` for, if any.
    pub(crate) fn guarantee_pick(&self, ctx: &Ctx<'_>) -> Option<u32> {
        if !ctx.nonempty {
            return None;
        }
        self.unmet_guarantees(ctx.w)
            .into_iter()
            .find_map(|role| self.reference_hdrf_from(role, ctx))
    }

    /// The role whose unmet guarantee takes `W` ahead of `leaf` (not in that role's subtree), if
    /// one does: for `explain`.
    pub(crate) fn guarantee_ahead(&self, leaf: u32, ctx: &Ctx<'_>) -> Option<String> {
        let winner = self.guarantee_pick(ctx)?;
        let mut n = winner;
        let mut role = None;
        // The guaranteed role the winner was chosen for: its nearest ancestor below guarantee.
        let unmet = self.unmet_guarantees(ctx.w);
        while n != NONE && n != ROOT {
            if unmet.contains(&n) {
                role = Some(n);
                break;
            }
            n = self.tree.nodes[n as usize].parent;
        }
        let role = role?;
        let mut a = leaf;
        while a != NONE {
            if a == role {
                return None;
            }
            a = self.tree.nodes[a as usize].parent;
        }
        Some(self.tree.nodes[role as usize].path.clone())
    }

    /// The limit-aware block reason of `leaf` for `explain`.
    pub(crate) fn quota_block(&self, leaf: u32, ctx: &Ctx<'_>) -> Option<BlockReason> {
        if !self.has_quota() {
            return None;
        }
        if let Some(role) = self.limit_block(leaf, ctx.w) {
            return Some(BlockReason::LimitReached { role });
        }
        self.guarantee_ahead(leaf, ctx)
            .map(|role| BlockReason::GuaranteeFirst { role })
    }
}

impl Allocator {
    /// What an offer of `w` to `fw` is cut to under every limit on its role's path (`w` itself
    /// with no limit); `None` for an unknown framework. `cycle` books exactly this.
    pub fn limit_offer(&self, fw: protocol::FrameworkId, w: &Resources) -> Option<Resources> {
        let leaf = self.leaf_of(fw).ok()?;
        let (dense, _) = self.kinds.dense_lookup(w);
        Some(self.kinds.resources(&self.limit_cut(leaf, &dense)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use protocol::{AgentId, FrameworkId, Resources, RolePath};
    use uuid::Uuid;

    use crate::{Allocator, AllocatorError, BlockReason, Policy};

    fn r(s: &str) -> Resources {
        s.parse().unwrap()
    }

    fn role(s: &str) -> RolePath {
        RolePath::new(s).unwrap()
    }

    #[test]
    fn a_limit_cuts_offers_and_then_blocks() {
        let mut a = Allocator::new(Policy::Hdrf);
        let f = FrameworkId(Uuid::from_u128(1));
        a.add_framework(f, &role("a")).unwrap();
        for i in 0..3 {
            a.add_agent(AgentId(Uuid::from_u128(10 + i)), &r("cpus=8,mem=8"))
                .unwrap();
        }
        a.set_role_quota(&role("a"), None, Some(&r("cpus=10")))
            .unwrap();
        let got = a.cycle(None, 0);
        let cpus: u64 = got.iter().map(|d| d.resources.millis("cpus")).sum();
        assert_eq!(cpus, 10_000, "{got:?}");
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].resources, r("cpus=2,mem=8"));
        let third = AgentId(Uuid::from_u128(12));
        assert_eq!(
            a.explain(f, third, 0),
            Some(BlockReason::LimitReached { role: "a".into() })
        );
        assert!(a.cycle(None, 1).is_empty());
        assert_eq!(a.role_quota(&role("a")), (None, Some(r("cpus=10"))));
    }

    #[test]
    fn a_guarantee_wins_over_hdrf_order_and_limits_refuse_below_it() {
        let mut a = Allocator::new(Policy::Hdrf);
        let (first, g) = (
            FrameworkId(Uuid::from_u128(1)),
            FrameworkId(Uuid::from_u128(2)),
        );
        a.add_framework(first, &role("first")).unwrap();
        a.add_framework(g, &role("g")).unwrap();
        let ag = AgentId(Uuid::from_u128(10));
        a.add_agent(ag, &r("cpus=4,mem=4")).unwrap();
        a.add_agent(AgentId(Uuid::from_u128(11)), &r("cpus=4,mem=4"))
            .unwrap();
        // Without quota, `first` (created first, equal shares) wins the first agent.
        assert_eq!(a.pick(Some(ag), &r("cpus=4,mem=4"), 0), Some(first));
        assert_eq!(
            a.set_role_quota(&role("g"), Some(&r("cpus=8")), Some(&r("cpus=2"))),
            Err(AllocatorError::LimitBelowGuarantee("cpus".into()))
        );
        assert_eq!(a.role_quota(&role("g")), (None, None), "nothing changed");
        a.set_role_quota(&role("g"), Some(&r("cpus=8")), None)
            .unwrap();
        assert_eq!(a.pick(Some(ag), &r("cpus=4,mem=4"), 0), Some(g));
        assert_eq!(
            a.explain(first, ag, 0),
            Some(BlockReason::GuaranteeFirst { role: "g".into() })
        );
        let got = a.cycle(None, 0);
        assert!(got.iter().all(|d| d.framework == g), "{got:?}");
        a.set_role_quota(&role("g"), None, None).unwrap();
        assert!(!a.has_quota());
    }
}
