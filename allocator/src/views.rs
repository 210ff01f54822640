//! Views for the operator API: the role tree with allocations and shares.

use protocol::messages::RoleNode;
use protocol::FrameworkId;

use super::kinds::{add_into, share_over, Dense};
use super::tree::ROOT;
use super::Allocator;

impl Allocator {
    /// The role tree (path "" for the root), with what each subtree holds, its dominant share
    /// against the capacity (over all kinds), child roles and frameworks in creation order.
    /// Each role's `reserved` is what agents reserve for that role itself, summed over agents.
    pub fn role_tree(&self) -> RoleNode {
        let mut reserved: Vec<(u32, Dense)> = Vec::new();
        for pool in self.agents.iter().flatten().flat_map(|a| &a.pools) {
            match reserved.iter_mut().find(|(n, _)| *n == pool.node) {
                Some((_, sum)) => add_into(sum, &pool.total),
                None => reserved.push((pool.node, pool.total.clone())),
            }
        }
        self.role_node(ROOT, &reserved)
    }

    fn role_node(&self, n: u32, reserved: &[(u32, Dense)]) -> RoleNode {
        let node = &self.tree.nodes[n as usize];
        let mut children = Vec::new();
        let mut frameworks = Vec::new();
        for &c in &node.children {
            match &self.tree.nodes[c as usize].leaf {
                Some(l) => frameworks.push(l.id),
                None => children.push(self.role_node(c, reserved)),
            }
        }
        let (guarantee, limit) = if self.has_quota() && n != ROOT {
            self.node_quota(n)
        } else {
            (None, None)
        };
        let guarantee_unmet = guarantee.as_ref().and_then(|g| self.guarantee_unmet(g));
        RoleNode {
            guarantee,
            limit,
            guarantee_unmet,
            path: node.path.clone(),
            weight: node.weight,
            allocated: self.kinds.resources(&node.raw),
            dominant_share: self.plain_share(&node.raw),
            children,
            frameworks,
            reserved: reserved
                .iter()
                .find(|(r, _)| *r == n)
                .map(|(_, v)| self.kinds.resources(v))
                .unwrap_or_default(),
        }
    }

    fn plain_share(&self, v: &[u64]) -> f64 {
        share_over(v, &self.capacity, &vec![true; self.capacity.len()])
    }

    /// The framework's dominant share of the capacity (over all kinds), or `None` if unknown.
    pub fn dominant_share(&self, fw: FrameworkId) -> Option<f64> {
        let leaf = *self.tree.frameworks.get(&fw)?;
        Some(self.plain_share(&self.tree.nodes[leaf as usize].raw))
    }
}
