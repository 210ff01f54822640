//! Reservations: part of an agent's total set aside for one role's subtree.
//!
//! An agent's total splits into an *unreserved pool* plus one *pool per reserved role*. Each
//! reserved pool keeps its total, its free part and what each framework holds from it; the
//! agent's `free` and `held` stay the sums over all pools (so capacity, `agent_free` and the
//! tree's sums are unchanged), and the unreserved pool is what is left: `free` minus the
//! reserved pools' free parts.
//!
//! A reserved pool is decided like an agent restricted to its role's subtree: H-DRF walked from
//! the role's node instead of the root (filters, demand hints, GPU gating, pause and limits as
//! usual; the guarantee stage does not apply: a reservation already sets resources aside for
//! its role). An unreserved decision never sees reserved resources. Every decision comes from
//! one pool ([`crate::Decision::reservation`]).
//!
//! Reserved resources count toward a role's share and quota only while offered or used (as any
//! other allocation); an idle reservation counts nothing (Mesos counts it as allocated to the
//! role for quota).
//!
//! With no reservation on an agent, every hook here is one `is_empty` branch.

use std::borrow::Cow;

use protocol::{AgentId, FrameworkId, Resources, RolePath};

use super::kinds::{add_into, fits, is_zero, sub_from, Dense};
use super::reference::Ctx;
use super::tree::NONE;
use super::{Allocator, AllocatorError};

/// One reserved pool of an agent.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    /// The reserved role's node slot.
    pub(crate) node: u32,
    /// The role's path.
    pub(crate) role: RolePath,
    /// What is reserved.
    pub(crate) total: Dense,
    /// What is neither offered nor used (`total - sum of held`).
    pub(crate) free: Dense,
    /// What each framework (leaf slot) holds of it.
    pub(crate) held: Vec<(u32, Dense)>,
    /// `cycle`'s all-blocked memo for this pool (same key as the agent's).
    pub(crate) all_blocked_at: Option<(u64, u64, u64)>,
}

/// One reservation as the operator views show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationView {
    /// The reserved role.
    pub role: RolePath,
    /// What is reserved.
    pub total: Resources,
    /// What of it is neither offered nor used.
    pub free: Resources,
}

impl Allocator {
    /// Sets (replaces) what `agent` reserves for `role` (created as
    /// [`Allocator::set_role_weight`] does when new); an empty `res` removes the reservation.
    /// Refused, changing nothing, when the pool's frameworks hold more than `res`
    /// ([`AllocatorError::ReservationHeld`]) or the unreserved free resources cannot cover the
    /// growth ([`AllocatorError::ReservationDoesNotFit`]).
    pub fn set_reservation(
        &mut self,
        agent: AgentId,
        role: &RolePath,
        res: &Resources,
    ) -> Result<(), AllocatorError> {
        let slot = self.agent_of(agent)?;
        self.kinds.check(res)?;
        let (want, unknown) = self.kinds.dense_lookup(res);
        let unreserved = self.unreserved_free_of(slot);
        let record = self.agents[slot as usize]
            .as_ref()
            .ok_or(AllocatorError::UnknownAgent(agent))?;
        let existing = record.pools.iter().find(|p| p.role == *role);
        let held = existing.map(pool_held).unwrap_or_default();
        if !fits(&held, &want) {
            return Err(AllocatorError::ReservationHeld {
                agent,
                role: role.to_string(),
                held: self.kinds.resources(&held),
            });
        }
        // The pool's free part becomes `want - held`; its growth comes out of the unreserved
        // free resources.
        let mut new_free = want.clone();
        sub_from(&mut new_free, &held);
        let old_free = existing.map(|p| p.free.clone()).unwrap_or_default();
        let mut grow = new_free.clone();
        sub_from(&mut grow, &old_free);
        if unknown || !fits(&grow, &unreserved) {
            return Err(AllocatorError::ReservationDoesNotFit {
                agent,
                role: role.to_string(),
                unreserved: self.kinds.resources(&unreserved),
            });
        }
        // A new role bumps the tree's shape version (the caches see it); an existing one is
        // unchanged: only this agent's pools change (its version is bumped below).
        let node = self.tree.ensure_role(role);
        if let Some(record) = self.agents[slot as usize].as_mut() {
            record.touch(slot, &mut self.changed);
            match record.pools.iter().position(|p| p.role == *role) {
                Some(p) if is_zero(&want) => {
                    record.pools.remove(p);
                }
                Some(p) => {
                    let pool = &mut record.pools[p];
                    pool.total = want;
                    pool.free = new_free;
                    pool.all_blocked_at = None;
                }
                None if is_zero(&want) => {}
                None => record.pools.push(Pool {
                    node,
                    role: role.clone(),
                    total: want,
                    free: new_free,
                    held: Vec::new(),
                    all_blocked_at: None,
                }),
            }
        }
        Ok(())
    }

    /// The agent's reservations (role, total, free), in the order they were made.
    pub fn reservations(&self, agent: AgentId) -> Vec<ReservationView> {
        let Some(Some(record)) = self
            .agent_index
            .get(&agent)
            .and_then(|&s| self.agents.get(s as usize))
        else {
            return Vec::new();
        };
        record
            .pools
            .iter()
            .map(|p| ReservationView {
                role: p.role.clone(),
                total: self.kinds.resources(&p.total),
                free: self.kinds.resources(&p.free),
            })
            .collect()
    }

    /// The agent's unreserved free resources (its free resources less the reserved pools'
    /// free parts).
    pub fn unreserved_free(&self, agent: AgentId) -> Option<Resources> {
        let slot = *self.agent_index.get(&agent)?;
        self.agents.get(slot as usize)?.as_ref()?;
        Some(self.kinds.resources(&self.unreserved_free_of(slot)))
    }

    /// One decision for the free resources of `agent`'s pool reserved for `role`: which
    /// framework of the role's subtree [`Allocator::cycle`] would give them to now. Changes no
    /// books. `None` when the pool is empty, unknown, or every framework there is blocked.
    pub fn pick_reserved(
        &mut self,
        agent: AgentId,
        role: &RolePath,
        now: u64,
    ) -> Option<FrameworkId> {
        let (slot, node, w) = self.pool_free(agent, role)?;
        let ctx = Ctx {
            start: node,
            ..self.ctx(Some(slot), &w, false, now)
        };
        let leaf = self.pick_leaf(&ctx)?;
        self.framework_at(leaf)
    }

    /// The reference (slow) version of [`Allocator::pick_reserved`]: H-DRF straight from
    /// the specification inside the role's subtree. Same answer, always.
    pub fn pick_reserved_reference(
        &self,
        agent: AgentId,
        role: &RolePath,
        now: u64,
    ) -> Option<FrameworkId> {
        let (slot, node, w) = self.pool_free(agent, role)?;
        let ctx = Ctx {
            start: node,
            ..self.ctx(Some(slot), &w, false, now)
        };
        if !ctx.nonempty {
            return None;
        }
        let leaf = self.reference_hdrf_from(node, &ctx)?;
        self.framework_at(leaf)
    }

    /// `(agent slot, role node, free)` of `agent`'s pool reserved for `role`.
    fn pool_free(&self, agent: AgentId, role: &RolePath) -> Option<(u32, u32, Dense)> {
        let slot = *self.agent_index.get(&agent)?;
        let pool = self
            .agents
            .get(slot as usize)?
            .as_ref()?
            .pools
            .iter()
            .find(|p| p.role == *role)?;
        Some((slot, pool.node, pool.free.clone()))
    }

    /// The unreserved free vector of agent `slot`: borrowed from the agent's `free` when it
    /// has no reserved pool (the allocation and decline paths then copy nothing).
    pub(crate) fn unreserved_free_of(&self, slot: u32) -> Cow<'_, [u64]> {
        let Some(Some(record)) = self.agents.get(slot as usize) else {
            return Cow::Owned(Dense::new());
        };
        if record.pools.is_empty() {
            return Cow::Borrowed(&record.free);
        }
        let mut w = record.free.clone();
        for p in &record.pools {
            sub_from(&mut w, &p.free);
        }
        Cow::Owned(w)
    }

    /// Whether role node `role` is `node` or one of its ancestors.
    pub(crate) fn is_ancestor(&self, role: u32, mut node: u32) -> bool {
        while node != NONE {
            if node == role {
                return true;
            }
            node = self.tree.nodes[node as usize].parent;
        }
        false
    }

    /// The index of the pool of `role` on agent `slot` (`Ok(None)`: the unreserved pool).
    fn pool_index(
        &self,
        agent: AgentId,
        slot: u32,
        role: Option<&RolePath>,
    ) -> Result<Option<usize>, AllocatorError> {
        let Some(role) = role else {
            return Ok(None);
        };
        self.agents[slot as usize]
            .as_ref()
            .and_then(|a| a.pools.iter().position(|p| p.role == *role))
            .map(Some)
            .ok_or_else(|| AllocatorError::NoReservation {
                agent,
                role: role.to_string(),
            })
    }

    /// Allocates `res` on `agent` to `fw` from the pool reserved for `pool` (`None`: the
    /// unreserved pool). Fails, changing nothing, when `res` does not fit in that pool's free
    /// resources, the agent has no such reservation, or `fw` is outside the pool's role.
    pub fn allocate_in(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
        pool: Option<&RolePath>,
    ) -> Result<(), AllocatorError> {
        let leaf = self.leaf_of(fw)?;
        let slot = self.agent_of(agent)?;
        let p = self.pool_index(agent, slot, pool)?;
        let (dense, unknown) = self.kinds.dense_lookup(res);
        let free = match p {
            None => self.unreserved_free_of(slot),
            Some(p) => {
                let record = self.agents[slot as usize]
                    .as_ref()
                    .ok_or(AllocatorError::UnknownAgent(agent))?;
                if !self.is_ancestor(record.pools[p].node, leaf) {
                    return Err(AllocatorError::OutsideReservation {
                        framework: fw,
                        role: record.pools[p].role.to_string(),
                    });
                }
                Cow::Borrowed(record.pools[p].free.as_slice())
            }
        };
        if unknown || !fits(&dense, &free) {
            return Err(AllocatorError::Overcommit {
                agent,
                requested: res.clone(),
                free: self.kinds.resources(&free),
            });
        }
        self.book_in(leaf, slot, p, &dense);
        Ok(())
    }

    /// Returns `res` held by `fw` on `agent` to the pool it came from (`None`: the unreserved
    /// pool). Fails, changing nothing, if `fw` holds less than that in that pool.
    pub fn release_in(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
        pool: Option<&RolePath>,
    ) -> Result<(), AllocatorError> {
        let mut dense = std::mem::take(&mut self.buf);
        let checked = self.check_release(fw, agent, res, pool, &mut dense);
        if let Ok((leaf, slot, p)) = checked {
            self.release_dense(leaf, slot, p, &dense);
        }
        self.buf = dense;
        checked.map(|_| ())
    }

    /// An offer declined: [`Allocator::release_in`] of `res`, then
    /// [`Allocator::add_filter`] of `fw` on `agent` refusing `res` until `until`, in one call
    /// that looks the framework, the agent and the vector up once (as Mesos' `recoverResources`
    /// takes the decline's filter). Fails, changing nothing, where `release_in` would.
    pub fn decline(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
        pool: Option<&RolePath>,
        until: u64,
    ) -> Result<(), AllocatorError> {
        let mut dense = std::mem::take(&mut self.buf);
        let checked = self.check_release(fw, agent, res, pool, &mut dense);
        if let Ok((leaf, slot, p)) = checked {
            self.release_dense(leaf, slot, p, &dense);
            self.filter_dense(leaf, slot, &dense, until);
        }
        self.buf = dense;
        checked.map(|_| ())
    }

    /// Checks that `fw` holds `res` in `pool` of `agent`; returns its leaf, the agent's slot
    /// and the pool's index, with `res` as a dense vector in `dense`.
    fn check_release(
        &self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
        pool: Option<&RolePath>,
        dense: &mut Dense,
    ) -> Result<(u32, u32, Option<usize>), AllocatorError> {
        let leaf = self.leaf_of(fw)?;
        let slot = self.agent_of(agent)?;
        let p = self.pool_index(agent, slot, pool)?;
        let unknown = self.kinds.dense_lookup_into(res, dense);
        let held = self.held_in(leaf, slot, p);
        if unknown || !fits(dense, &held) {
            return Err(AllocatorError::ReleaseMoreThanAllocated {
                framework: fw,
                agent,
                requested: res.clone(),
                allocated: self.kinds.resources(&held),
            });
        }
        Ok((leaf, slot, p))
    }

    /// Returns `dense`, checked by [`Allocator::check_release`], from `leaf` on `slot`.
    fn release_dense(&mut self, leaf: u32, slot: u32, p: Option<usize>, dense: &[u64]) {
        if let Some(record) = self.agents[slot as usize].as_mut() {
            take_held(&mut record.held, leaf, dense);
            add_into(&mut record.free, dense);
            record.touch(slot, &mut self.changed);
            if let Some(p) = p {
                let pool = &mut record.pools[p];
                take_held(&mut pool.held, leaf, dense);
                add_into(&mut pool.free, dense);
            }
        }
        self.unbook_tree(leaf, dense);
    }

    /// What `leaf` holds in pool `p` (`None`: unreserved) of agent `slot`: borrowed unless
    /// reserved holdings must be taken off.
    fn held_in(&self, leaf: u32, slot: u32, p: Option<usize>) -> Cow<'_, [u64]> {
        let Some(Some(record)) = self.agents.get(slot as usize) else {
            return Cow::Owned(Dense::new());
        };
        fn of(held: &[(u32, Dense)], leaf: u32) -> Option<&Dense> {
            held.iter().find(|(l, _)| *l == leaf).map(|(_, h)| h)
        }
        match p {
            Some(p) => of(&record.pools[p].held, leaf)
                .map_or(Cow::Owned(Dense::new()), |h| Cow::Borrowed(h.as_slice())),
            None => {
                let Some(all) = of(&record.held, leaf) else {
                    return Cow::Owned(Dense::new());
                };
                if record.pools.is_empty() {
                    return Cow::Borrowed(all);
                }
                let mut h = all.clone();
                for pool in &record.pools {
                    if let Some(r) = of(&pool.held, leaf) {
                        sub_from(&mut h, r);
                    }
                }
                Cow::Owned(h)
            }
        }
    }

    /// Books `v` to `leaf` on agent `slot` from pool `p` (`None`: unreserved).
    pub(crate) fn book_in(&mut self, leaf: u32, slot: u32, p: Option<usize>, v: &[u64]) {
        if let Some(p) = p {
            if let Some(pool) = self.agents[slot as usize]
                .as_mut()
                .and_then(|a| a.pools.get_mut(p))
            {
                sub_from(&mut pool.free, v);
                match pool.held.iter_mut().find(|(l, _)| *l == leaf) {
                    Some((_, h)) => add_into(h, v),
                    None => pool.held.push((leaf, v.to_vec())),
                }
            }
        }
        self.book(leaf, slot, v);
    }

    /// Takes a leaf that leaves the tree out of every pool of agent `slot`, returning its
    /// reserved holdings to their pools' free parts (the agent's own books are done by the
    /// caller).
    pub(crate) fn drop_leaf_from_pools(&mut self, leaf: u32, slot: usize) {
        if let Some(Some(record)) = self.agents.get_mut(slot) {
            for pool in &mut record.pools {
                if let Some(i) = pool.held.iter().position(|(l, _)| *l == leaf) {
                    let (_, h) = pool.held.swap_remove(i);
                    add_into(&mut pool.free, &h);
                }
            }
        }
    }
}

/// The sum of what a pool's frameworks hold.
fn pool_held(p: &Pool) -> Dense {
    let mut sum = Dense::new();
    for (_, h) in &p.held {
        add_into(&mut sum, h);
    }
    sum
}

/// Takes `v` off `leaf`'s entry in `held` (dropping it when empty).
fn take_held(held: &mut Vec<(u32, Dense)>, leaf: u32, v: &[u64]) {
    if let Some(p) = held.iter().position(|(l, _)| *l == leaf) {
        sub_from(&mut held[p].1, v);
        if is_zero(&held[p].1) {
            held.swap_remove(p);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{BlockReason, Policy};

    fn r(s: &str) -> Resources {
        s.parse().unwrap()
    }

    fn role(s: &str) -> RolePath {
        s.parse().unwrap()
    }

    /// One agent `cpus=4,mem=100` with `cpus=2` reserved for `a`; frameworks in `a/x` and `b`.
    fn setup() -> (Allocator, AgentId, FrameworkId, FrameworkId) {
        let mut al = Allocator::new(Policy::Hdrf);
        let (g, fa, fb) = (AgentId::new(), FrameworkId::new(), FrameworkId::new());
        al.add_agent(g, &r("cpus=4,mem=100")).unwrap();
        al.add_framework(fa, &role("a/x")).unwrap();
        al.add_framework(fb, &role("b")).unwrap();
        al.set_reservation(g, &role("a"), &r("cpus=2")).unwrap();
        (al, g, fa, fb)
    }

    #[test]
    fn a_reserved_pool_goes_only_to_its_subtree() {
        let (mut al, g, fa, fb) = setup();
        // `a/x` is not active: the pool stays unoffered, `b` gets only the unreserved rest.
        al.set_active(fa, false).unwrap();
        let d = al.cycle(None, 0);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].framework, d[0].reservation.clone()), (fb, None));
        assert_eq!(d[0].resources, r("cpus=2,mem=100"));
        assert_eq!(
            al.explain(fb, g, 0),
            Some(BlockReason::ReservedFor { role: "a".into() })
        );
        al.set_active(fa, true).unwrap();
        let d = al.cycle(None, 1);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].framework, fa);
        assert_eq!(d[0].reservation, Some(role("a")));
        assert_eq!(d[0].resources, r("cpus=2"));
        // Released, it returns to the reserved pool, not to the unreserved one.
        al.release_in(fa, g, &r("cpus=2"), Some(&role("a")))
            .unwrap();
        assert_eq!(al.reservations(g)[0].free, r("cpus=2"));
        assert_eq!(al.unreserved_free(g), Some(Resources::new()));
        assert!(al.release(fb, g, &r("cpus=3")).is_err());
    }

    #[test]
    fn decline_is_release_then_filter_and_changes_nothing_when_refused() {
        // Two allocators offered the same: one declines through `release_in` + `add_filter`,
        // the other through `decline`; they must agree on everything a cycle can see.
        let (mut one, g, fa, fb) = setup();
        let (mut two, ..) = (one.clone(), ());
        let d1 = one.cycle(None, 0);
        let d2 = two.cycle(None, 0);
        assert_eq!(d1, d2);
        for d in &d1 {
            one.release_in(d.framework, d.agent, &d.resources, d.reservation.as_ref())
                .unwrap();
            one.add_filter(d.framework, d.agent, &d.resources, 10)
                .unwrap();
            two.decline(
                d.framework,
                d.agent,
                &d.resources,
                d.reservation.as_ref(),
                10,
            )
            .unwrap();
        }
        for al in [&one, &two] {
            assert_eq!(al.agent_free(g), Some(r("cpus=4,mem=100")));
            assert_eq!(al.reservations(g)[0].free, r("cpus=2"));
            assert_eq!(al.allocation(fb), Some(Resources::new()));
        }
        for fw in [fa, fb] {
            assert_eq!(one.explain(fw, g, 5), two.explain(fw, g, 5));
        }
        // `b` refused all it can get here; `a` refused its pool only, and more is free to it.
        assert!(two.explain(fb, g, 5).is_some(), "b is filtered until 10");
        assert_eq!(two.explain(fb, g, 10), None);
        assert_eq!(one.cycle(None, 5), two.cycle(None, 5));
        assert_eq!(one.cycle(None, 10), two.cycle(None, 10));

        // Declining more than is held changes nothing: no release, no filter.
        let (mut al, g, _fa, fb) = setup();
        let d = al.cycle(None, 0);
        let held = d.iter().find(|d| d.framework == fb).unwrap();
        let more = r("cpus=3,mem=100");
        assert!(matches!(
            al.decline(fb, g, &more, None, 10),
            Err(AllocatorError::ReleaseMoreThanAllocated { .. })
        ));
        assert_eq!(al.allocation(fb), Some(held.resources.clone()));
        al.release(fb, g, &held.resources).unwrap();
        assert_eq!(al.explain(fb, g, 5), None, "no filter was added");
    }

    #[test]
    fn a_reservation_must_fit_and_cover_what_is_held() {
        let (mut al, g, fa, fb) = setup();
        let before = al.reservations(g);
        assert!(matches!(
            al.set_reservation(g, &role("b"), &r("cpus=3")),
            Err(AllocatorError::ReservationDoesNotFit { .. })
        ));
        assert!(matches!(
            al.set_reservation(g, &role("b"), &r("gpus=1")),
            Err(AllocatorError::ReservationDoesNotFit { .. })
        ));
        al.allocate_in(fa, g, &r("cpus=1"), Some(&role("a")))
            .unwrap();
        assert!(matches!(
            al.set_reservation(g, &role("a"), &r("cpus=0.5")),
            Err(AllocatorError::ReservationHeld { .. })
        ));
        assert!(matches!(
            al.allocate_in(fb, g, &r("cpus=1"), Some(&role("a"))),
            Err(AllocatorError::OutsideReservation { .. })
        ));
        assert!(matches!(
            al.allocate_in(fa, g, &r("cpus=3"), None),
            Err(AllocatorError::Overcommit { .. })
        ));
        assert_eq!(al.reservations(g)[0].total, before[0].total);
        // Growing takes from the unreserved free resources; shrinking gives them back.
        al.set_reservation(g, &role("a"), &r("cpus=3")).unwrap();
        assert_eq!(al.unreserved_free(g), Some(r("cpus=1,mem=100")));
        al.set_reservation(g, &role("a"), &r("cpus=1")).unwrap();
        assert_eq!(al.reservations(g)[0].free, Resources::new());
        assert_eq!(al.unreserved_free(g), Some(r("cpus=3,mem=100")));
    }

    #[test]
    fn a_leaving_framework_returns_its_reserved_holding_to_the_pool() {
        let (mut al, g, fa, _) = setup();
        al.allocate_in(fa, g, &r("cpus=2"), Some(&role("a")))
            .unwrap();
        al.remove_framework(fa).unwrap();
        assert_eq!(al.reservations(g)[0].free, r("cpus=2"));
        assert_eq!(al.agent_free(g), Some(r("cpus=4,mem=100")));
    }
}
