//! [`Ledger`]: the one owner of holdings and eligibility. It alone calls the allocator's
//! mutating methods, and it derives what each agent and framework has `offered` (outstanding
//! offers) and `used` (non-terminal tasks), incrementally: each change costs a few map lookups
//! and one vector addition or subtraction, never a pass over all tasks.
//!
//! The books are kept so that a change never fails. When one does anyway (the allocator refuses
//! a call, a subtraction would go below zero, a framework or agent leaves while still holding
//! something) that is a bug: it is a [`LedgerError`], logged with `tracing::error!` and counted
//! ([`Ledger::mismatches`]), never silently floored or ignored. The change that could not be
//! made exactly is then made as far as possible, so the coordinator keeps serving.
//!
//! Expected refusals (an adopted task reporting more than its agent has free) are not
//! mismatches: [`Ledger::hold`] returns them to the caller.

use std::collections::HashMap;

use protocol::{AgentId, FrameworkId, Resources, RolePath, Weight};

use allocator::{Allocator, AllocatorError, Decision, Run, Sweep};

/// Who holds resources: an agent or a framework.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// An agent.
    Agent(AgentId),
    /// A framework.
    Framework(FrameworkId),
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::Agent(id) => write!(f, "agent {id}"),
            Holder::Framework(id) => write!(f, "framework {id}"),
        }
    }
}

/// A disagreement in the books: always a bug.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    /// The allocator refused a change the books consider valid.
    #[error("the allocator refused {op}: {error}")]
    Allocator {
        /// The ledger operation.
        op: &'static str,
        /// The allocator's answer.
        error: AllocatorError,
    },
    /// Taking `amount` off a holder's `offered` or `used` would go below zero.
    #[error("{holder}'s {which} is {have}, cannot take {amount} off it")]
    Underflow {
        /// Whose books.
        holder: Holder,
        /// `offered` or `used`.
        which: &'static str,
        /// What the books say it holds.
        have: Resources,
        /// What was to be taken off.
        amount: Resources,
    },
    /// A holder left the books while still holding something.
    #[error("{holder} left while still holding {offered} offered and {used} used")]
    LeftHolding {
        /// Who left.
        holder: Holder,
        /// Its outstanding offers' resources.
        offered: Resources,
        /// Its tasks' resources.
        used: Resources,
    },
    /// The books and the allocator disagree on what a holder holds.
    #[error("{holder} uses {books} by the books, {allocator} by the allocator")]
    Disagree {
        /// Whose books.
        holder: Holder,
        /// What the ledger says it holds.
        books: Resources,
        /// What the allocator says it holds.
        allocator: Resources,
    },
    /// An operation named an agent or framework the ledger does not hold.
    #[error("{op}: {holder} is not in the books")]
    Unknown {
        /// The ledger operation.
        op: &'static str,
        /// Who was named.
        holder: Holder,
    },
}

/// What one agent or framework holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holdings {
    /// Held by outstanding offers.
    pub offered: Resources,
    /// Held by non-terminal tasks.
    pub used: Resources,
}

/// Whether and how a framework may be offered resources.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Eligibility {
    /// Its event stream is open.
    pub active: bool,
    /// It suppressed offers.
    pub suppressed: bool,
    /// Its outstanding offers hold every task it said it wants (see [`Ledger::set_sated`]).
    pub sated: bool,
    /// Its demand hint.
    pub demand: Option<Resources>,
    /// It declared `gpu_resources` (GPU gating lets it have agents with GPUs).
    pub gpu_capable: bool,
}

/// Holdings and eligibility, over the allocator. See the module docs.
#[derive(Debug)]
pub struct Ledger {
    allocator: Allocator,
    agents: HashMap<AgentId, Holdings>,
    frameworks: HashMap<FrameworkId, Holdings>,
    mismatches: u64,
    last_mismatch: Option<LedgerError>,
}

impl Ledger {
    /// Books over `allocator`, which must hold no agents or frameworks yet.
    pub fn new(allocator: Allocator) -> Self {
        Self {
            allocator,
            agents: HashMap::new(),
            frameworks: HashMap::new(),
            mismatches: 0,
            last_mismatch: None,
        }
    }

    /// The allocator, for reading (shares, free resources, explanations, the role tree).
    pub fn allocator(&self) -> &Allocator {
        &self.allocator
    }

    /// How many mismatches were found since the start (each one a bug, each one logged).
    pub fn mismatches(&self) -> u64 {
        self.mismatches
    }

    /// The latest mismatch found, if any.
    #[cfg(test)]
    pub fn last_mismatch(&self) -> Option<&LedgerError> {
        self.last_mismatch.as_ref()
    }

    /// What the agent holds (nothing when it is not in the books, e.g. lost).
    pub fn agent(&self, id: AgentId) -> Holdings {
        self.agents.get(&id).cloned().unwrap_or_default()
    }

    /// What the framework holds.
    pub fn framework(&self, id: FrameworkId) -> Holdings {
        self.frameworks.get(&id).cloned().unwrap_or_default()
    }

    /// Whether the agent's resources are in the capacity.
    pub fn has_agent(&self, id: AgentId) -> bool {
        self.agents.contains_key(&id)
    }

    fn mismatch(&mut self, e: LedgerError) {
        self.mismatches += 1;
        tracing::error!(error = %e, mismatches = self.mismatches, "ledger mismatch (a bug)");
        self.last_mismatch = Some(e);
    }

    fn check(&mut self, op: &'static str, r: Result<(), AllocatorError>) -> bool {
        match r {
            Ok(()) => true,
            Err(error) => {
                self.mismatch(LedgerError::Allocator { op, error });
                false
            }
        }
    }

    /// Refuses `r` if it would take the distinct resource names past `max_resource_kinds`
    /// (agent totals, demand hints); changes nothing.
    pub fn check_kinds(&self, r: &Resources) -> Result<(), super::StateError> {
        self.allocator
            .check_kinds(r)
            .map_err(|_| super::StateError::TooManyResourceKinds {
                known: self.allocator.kinds_len(),
                max: self.allocator.max_kinds(),
            })
    }

    /// Refuses a change that would create roles past `max`; changes nothing.
    pub fn check_roles(&self, role: &RolePath, max: usize) -> Result<(), super::StateError> {
        let new = self.allocator.new_roles(role);
        if new > 0 && self.allocator.roles_len() + new > max {
            return Err(super::StateError::TooManyRoles(max));
        }
        Ok(())
    }

    /// Sets a role's weight (creating the role).
    pub fn set_role_weight(&mut self, role: &RolePath, weight: Weight) {
        self.allocator.set_role_weight(role, weight);
    }

    /// Sets a role's quota (creating the role), checked by the caller; a refusal is a books
    /// mismatch and is logged.
    pub fn set_role_quota(&mut self, role: &RolePath, quota: &crate::records::StoredQuota) {
        let r = self
            .allocator
            .set_role_quota(role, quota.guarantee.as_ref(), quota.limit.as_ref());
        self.check("set_role_quota", r);
    }

    /// An agent joins the capacity with `total`, holding nothing.
    pub fn add_agent(&mut self, id: AgentId, total: &Resources) {
        let r = self.allocator.add_agent(id, total);
        if self.check("add_agent", r) {
            self.agents.insert(id, Holdings::default());
        }
    }

    /// Pauses (a draining agent: no new offers) or resumes an agent in the allocator.
    pub fn pause_agent(&mut self, id: AgentId, paused: bool) {
        let r = self.allocator.set_agent_paused(id, paused);
        self.check("pause_agent", r);
    }

    /// The agent leaves the capacity. Its offers must have ended; what its tasks held leaves
    /// their frameworks' `used` (the tasks no longer hold anything).
    pub fn remove_agent(&mut self, id: AgentId) {
        let Some(held) = self.agents.remove(&id) else {
            self.mismatch(LedgerError::Unknown {
                op: "remove_agent",
                holder: Holder::Agent(id),
            });
            return;
        };
        if !held.offered.is_empty() {
            self.mismatch(LedgerError::LeftHolding {
                holder: Holder::Agent(id),
                offered: held.offered,
                used: held.used.clone(),
            });
        }
        let lost = match self.allocator.remove_agent(id) {
            Ok(lost) => lost,
            Err(error) => {
                self.mismatch(LedgerError::Allocator {
                    op: "remove_agent",
                    error,
                });
                return;
            }
        };
        let mut total = Resources::new();
        for (fw, res) in lost {
            total.add_assign(&res);
            self.take(Holder::Framework(fw), Which::Used, &res);
        }
        if total != held.used {
            self.mismatch(LedgerError::Disagree {
                holder: Holder::Agent(id),
                books: held.used,
                allocator: total,
            });
        }
    }

    /// A framework joins under `role`, holding nothing.
    pub fn add_framework(&mut self, id: FrameworkId, role: &RolePath, e: &Eligibility) {
        let r = self.allocator.add_framework(id, role);
        if !self.check("add_framework", r) {
            return;
        }
        self.frameworks.insert(id, Holdings::default());
        let r = self.allocator.set_active(id, e.active);
        self.check("set_active", r);
        let r = self.allocator.set_demand(id, e.demand.clone());
        self.check("set_demand", r);
        if e.suppressed {
            let r = self.allocator.suppress(id);
            self.check("suppress", r);
        }
        if e.sated {
            self.set_sated(id, true);
        }
        if e.gpu_capable {
            self.set_gpu_capable(id, true);
        }
    }

    /// Whether the framework declared `gpu_resources`.
    pub fn set_gpu_capable(&mut self, id: FrameworkId, capable: bool) {
        let r = self.allocator.set_gpu_capable(id, capable);
        self.check("set_gpu_capable", r);
    }

    /// The framework leaves; it must hold nothing (its offers ended, its tasks released).
    pub fn remove_framework(&mut self, id: FrameworkId) {
        match self.frameworks.remove(&id) {
            Some(h) if h != Holdings::default() => self.mismatch(LedgerError::LeftHolding {
                holder: Holder::Framework(id),
                offered: h.offered,
                used: h.used,
            }),
            Some(_) => {}
            None => self.mismatch(LedgerError::Unknown {
                op: "remove_framework",
                holder: Holder::Framework(id),
            }),
        }
        let r = self.allocator.remove_framework(id);
        self.check("remove_framework", r);
    }

    /// The framework's stream opened (`true`) or closed.
    pub fn set_active(&mut self, id: FrameworkId, active: bool) {
        let r = self.allocator.set_active(id, active);
        self.check("set_active", r);
    }

    /// The framework's demand hint.
    pub fn set_demand(&mut self, id: FrameworkId, demand: Option<Resources>) {
        let r = self.allocator.set_demand(id, demand);
        self.check("set_demand", r);
    }

    /// No offers for the framework until [`Ledger::revive`].
    pub fn suppress(&mut self, id: FrameworkId) {
        let r = self.allocator.suppress(id);
        self.check("suppress", r);
    }

    /// Holds the framework back from offers while its outstanding offers hold what it wants
    /// (see [`allocator::Allocator::set_sated`]).
    pub fn set_sated(&mut self, id: FrameworkId, sated: bool) {
        let r = self.allocator.set_sated(id, sated);
        self.check("set_sated", r);
    }

    /// Offers resume for the framework; its decline filters are cleared.
    pub fn revive(&mut self, id: FrameworkId) {
        let r = self.allocator.revive(id);
        self.check("revive", r);
    }

    /// The framework refuses `refused` on `agent` until `until_ms`.
    pub fn add_filter(&mut self, fw: FrameworkId, agent: AgentId, refused: &Resources, until: u64) {
        let r = self.allocator.add_filter(fw, agent, refused, until);
        self.check("add_filter", r);
    }

    /// Starts an allocation run over the agents `sweep` names (see [`Allocator::start_run`]).
    pub fn start_run(&mut self, sweep: Sweep) -> Run {
        self.allocator.start_run(sweep)
    }

    /// The next part of `run`, at most `max` agents (see [`Allocator::run_part`]): every
    /// decision is booked as `offered` to its framework on its agent. A decision the caller
    /// cannot turn into an offer goes back with [`Ledger::end_offer`].
    /// `sate` is asked about each decision as it is made (see [`Allocator::run_part_with`]).
    pub fn allocate_part(
        &mut self,
        run: &mut Run,
        max: usize,
        now_ms: u64,
        sate: impl FnMut(&Decision) -> bool,
    ) -> Vec<Decision> {
        let decisions = self.allocator.run_part_with(run, max, now_ms, sate);
        for d in &decisions {
            self.give(Holder::Agent(d.agent), Which::Offered, &d.resources);
            self.give(Holder::Framework(d.framework), Which::Offered, &d.resources);
        }
        decisions
    }

    /// An offer of `res` ended unused (declined, rescinded, expired): back to the pool it came
    /// from (`pool`: the reserved role, `None` unreserved).
    pub fn end_offer(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
        pool: Option<&RolePath>,
    ) {
        self.take(Holder::Agent(agent), Which::Offered, res);
        self.take(Holder::Framework(fw), Which::Offered, res);
        let r = self.allocator.release_in(fw, agent, res, pool);
        self.check("end_offer", r);
    }

    /// Sets what `agent` reserves for `role` (empty: none); refused, changing nothing, when it
    /// does not fit (see [`Allocator::set_reservation`]).
    pub fn set_reservation(
        &mut self,
        agent: AgentId,
        role: &RolePath,
        res: &Resources,
    ) -> Result<(), AllocatorError> {
        self.allocator.set_reservation(agent, role, res)
    }

    /// Offers holding `offered`, drawn from the pool reserved for `pool` (`None`:
    /// unreserved), were accepted for tasks needing `needed` (which fits in it): `needed` moves
    /// from offered to used, the rest returns to that pool.
    pub fn accept_in(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        offered: &Resources,
        needed: &Resources,
        pool: Option<&RolePath>,
    ) {
        self.take(Holder::Agent(agent), Which::Offered, offered);
        self.take(Holder::Framework(fw), Which::Offered, offered);
        self.give(Holder::Agent(agent), Which::Used, needed);
        self.give(Holder::Framework(fw), Which::Used, needed);
        let Some(unused) = offered.checked_sub(needed) else {
            // The caller checked that the tasks fit in the offers.
            self.mismatch(LedgerError::Underflow {
                holder: Holder::Framework(fw),
                which: "offered",
                have: offered.clone(),
                amount: needed.clone(),
            });
            return;
        };
        if !unused.is_empty() {
            let r = self.allocator.release_in(fw, agent, &unused, pool);
            self.check("accept", r);
        }
    }

    /// A task already running (adopted, or back after its agent re-registered) holds `res`.
    /// Refused, changing nothing, when it does not fit in the agent's free resources: the
    /// caller decides what the task holds then.
    ///
    /// The task is booked in the first pool reserved for a role of the framework's that holds it
    /// whole, else in the unreserved pool; returns the pool (the reserved role, `None`:
    /// unreserved).
    pub fn hold(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
    ) -> Result<Option<RolePath>, AllocatorError> {
        if !self.agents.contains_key(&agent) {
            return Err(AllocatorError::UnknownAgent(agent));
        }
        let mut pool = None;
        for r in self.allocator.reservations(agent) {
            if res.fits_in(&r.free)
                && self
                    .allocator
                    .allocate_in(fw, agent, res, Some(&r.role))
                    .is_ok()
            {
                pool = Some(r.role);
                break;
            }
        }
        if pool.is_none() {
            self.allocator.allocate(fw, agent, res)?;
        }
        self.give(Holder::Agent(agent), Which::Used, res);
        self.give(Holder::Framework(fw), Which::Used, res);
        Ok(pool)
    }

    /// A task holding `res` ended (or left the books): back to the pool it was booked in
    /// (`pool`: the reserved role, `None` unreserved).
    pub fn release(
        &mut self,
        fw: FrameworkId,
        agent: AgentId,
        res: &Resources,
        pool: Option<&RolePath>,
    ) {
        if res.is_empty() {
            return;
        }
        self.take(Holder::Agent(agent), Which::Used, res);
        self.take(Holder::Framework(fw), Which::Used, res);
        let r = self.allocator.release_in(fw, agent, res, pool);
        self.check("release", r);
    }

    fn slot(&mut self, holder: Holder, which: Which) -> Option<&mut Resources> {
        let h = match holder {
            Holder::Agent(id) => self.agents.get_mut(&id),
            Holder::Framework(id) => self.frameworks.get_mut(&id),
        }?;
        Some(match which {
            Which::Offered => &mut h.offered,
            Which::Used => &mut h.used,
        })
    }

    fn give(&mut self, holder: Holder, which: Which, res: &Resources) {
        match self.slot(holder, which) {
            Some(slot) => slot.add_assign(res),
            None => self.mismatch(LedgerError::Unknown {
                op: which.give_op(),
                holder,
            }),
        }
    }

    fn take(&mut self, holder: Holder, which: Which, res: &Resources) {
        let Some(slot) = self.slot(holder, which) else {
            self.mismatch(LedgerError::Unknown {
                op: which.take_op(),
                holder,
            });
            return;
        };
        match slot.checked_sub(res) {
            Some(left) => *slot = left,
            None => {
                let have = std::mem::replace(slot, slot.saturating_sub(res));
                self.mismatch(LedgerError::Underflow {
                    holder,
                    which: which.name(),
                    have,
                    amount: res.clone(),
                });
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Which {
    Offered,
    Used,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Offered => "offered",
            Which::Used => "used",
        }
    }

    fn give_op(self) -> &'static str {
        match self {
            Which::Offered => "offer",
            Which::Used => "use",
        }
    }

    fn take_op(self) -> &'static str {
        match self {
            Which::Offered => "end offer",
            Which::Used => "release",
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use allocator::{Policy, Sweep};

    fn res(s: &str) -> Resources {
        s.parse().unwrap()
    }

    fn ledger() -> (Ledger, FrameworkId, AgentId) {
        let mut l = Ledger::new(Allocator::new(Policy::Hdrf));
        let (fw, agent) = (FrameworkId::new(), AgentId::new());
        l.add_agent(agent, &res("cpus=4,mem=100"));
        let active = Eligibility {
            active: true,
            ..Eligibility::default()
        };
        l.add_framework(fw, &"eng".parse().unwrap(), &active);
        (l, fw, agent)
    }

    #[test]
    fn offers_and_tasks_are_split_into_offered_and_used() {
        let (mut l, fw, agent) = ledger();
        let mut run = l.start_run(Sweep::All);
        let d = l.allocate_part(&mut run, usize::MAX, 0, |_| false);
        assert!(run.done());
        assert_eq!(d.len(), 1);
        assert_eq!(l.agent(agent).offered, res("cpus=4,mem=100"));
        assert_eq!(l.framework(fw).offered, res("cpus=4,mem=100"));
        l.accept_in(
            fw,
            agent,
            &res("cpus=4,mem=100"),
            &res("cpus=1,mem=10"),
            None,
        );
        let want = Holdings {
            offered: Resources::new(),
            used: res("cpus=1,mem=10"),
        };
        assert_eq!(l.agent(agent), want);
        assert_eq!(l.framework(fw), want);
        assert_eq!(l.allocator().agent_free(agent), Some(res("cpus=3,mem=90")));
        l.release(fw, agent, &res("cpus=1,mem=10"), None);
        assert_eq!(l.agent(agent), Holdings::default());
        assert_eq!(l.mismatches(), 0);
    }

    #[test]
    fn releasing_more_than_is_held_is_reported_not_floored_silently() {
        let (mut l, fw, agent) = ledger();
        l.hold(fw, agent, &res("cpus=1")).unwrap();
        // A bug: the task is released twice.
        l.release(fw, agent, &res("cpus=1"), None);
        assert_eq!(l.mismatches(), 0);
        l.release(fw, agent, &res("cpus=1"), None);
        assert!(l.mismatches() >= 1);
        assert!(
            matches!(
                l.last_mismatch(),
                Some(LedgerError::Allocator { op: "release", .. })
            ),
            "{:?}",
            l.last_mismatch()
        );
        // The agent's and framework's `used` underflowed too: each was reported.
        assert_eq!(l.mismatches(), 3);
        assert_eq!(l.agent(agent), Holdings::default());
    }

    #[test]
    fn a_framework_leaving_with_holdings_is_reported() {
        let (mut l, fw, agent) = ledger();
        l.hold(fw, agent, &res("cpus=2")).unwrap();
        l.remove_framework(fw);
        assert_eq!(l.mismatches(), 1);
        assert!(matches!(
            l.last_mismatch(),
            Some(LedgerError::LeftHolding {
                holder: Holder::Framework(_),
                ..
            })
        ));
    }

    #[test]
    fn a_removed_agent_takes_its_tasks_off_their_frameworks() {
        let (mut l, fw, agent) = ledger();
        l.hold(fw, agent, &res("cpus=2")).unwrap();
        l.remove_agent(agent);
        assert!(!l.has_agent(agent));
        assert_eq!(l.framework(fw), Holdings::default());
        assert!(l.allocator().capacity().is_empty());
        assert_eq!(l.mismatches(), 0);
    }

    #[test]
    fn a_task_that_does_not_fit_is_refused_without_a_mismatch() {
        let (mut l, fw, agent) = ledger();
        assert!(l.hold(fw, agent, &res("cpus=5")).is_err());
        assert_eq!(l.agent(agent), Holdings::default());
        assert_eq!(l.mismatches(), 0);
    }
}
