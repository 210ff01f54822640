//! The books' public entry points for the rules kept as functions over the sub-books they
//! name (`quota.rs`, `drain.rs`, `preempt.rs`, `owners.rs`): each method here splits
//! [`State`] into those parts and calls the rule, so the coordinator calls `State` methods
//! while no rule borrows more of the books than it reads or changes.

use std::sync::Arc;

use protocol::maintenance::AgentMaintenance;
use protocol::messages::SetWeight;
use protocol::{AgentId, FrameworkId, OfferEvent, RolePath, Timestamp};

use crate::records::{Change, StoredQuota};
use crate::{drain, owners, preempt, quota, Effect, Effects, Now, State, StateError};

impl State {
    /// A role's quota as it is now.
    pub fn role_quota(&self, role: &RolePath) -> StoredQuota {
        quota::role_quota(&self.ledger, role)
    }

    /// Whether any role has a guarantee or a limit.
    pub fn has_quota(&self) -> bool {
        self.ledger.allocator().has_quota()
    }

    /// The registry changes that `req` on `role` writes, if it may be applied (see
    /// `quota.rs` for the rules); changes nothing.
    pub fn plan_role_update(
        &self,
        role: &RolePath,
        req: &SetWeight,
    ) -> Result<Vec<Change>, StateError> {
        quota::plan(
            &self.ledger,
            &self.known_resources,
            self.timing.max_roles,
            role,
            req,
        )
    }

    /// Applies `req` checked by [`State::plan_role_update`] without queuing a registry change
    /// (the caller wrote it already); runs an allocation soon.
    pub fn apply_role_update(&mut self, role: &RolePath, req: &SetWeight, fx: &mut Effects) {
        quota::apply(&mut self.ledger, role, req, fx);
    }

    /// Drains an agent (see `drain.rs`): `deadline_s` (checked by the caller: finite, not
    /// negative) from now its remaining tasks are killed. Draining a draining agent sets the new
    /// deadline and tells its frameworks again. A lost agent may be drained: it stays out of
    /// service when it comes back. Unknown agents are [`StateError::UnknownAgent`].
    pub fn drain_agent(
        &mut self,
        id: AgentId,
        deadline_s: f64,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<AgentMaintenance, StateError> {
        let delay_ms = (deadline_s.max(0.0) * 1000.0) as u64;
        let deadline = now.wall
            + chrono::Duration::milliseconds(i64::try_from(delay_ms).unwrap_or(i64::MAX / 2));
        self.drain_until(id, delay_ms, deadline, now, fx)
    }

    /// [`State::drain_agent`] with the deadline given both ways: `delay_ms` from `now` on the
    /// monotonic clock and `deadline` on the wall clock. Pauses the agent and rescinds its
    /// offers (which touch every sub-book), then starts the drain.
    fn drain_until(
        &mut self,
        id: AgentId,
        delay_ms: u64,
        deadline: Timestamp,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<AgentMaintenance, StateError> {
        if !self.agents.contains(id) {
            return Err(StateError::UnknownAgent(id));
        }
        if self.ledger.has_agent(id) {
            self.ledger.pause_agent(id, true);
        }
        let before = fx.len();
        self.rescind_agent_offers(id, "agent draining", fx);
        let rescinded_offers = fx[before..]
            .iter()
            .filter(|e| matches!(e, Effect::Offer(OfferEvent::OfferRescinded(_))))
            .count();
        let State { agents, tasks, .. } = self;
        let plan = drain::until(delay_ms, deadline, now);
        drain::start(agents, tasks, id, plan, rescinded_offers, fx)
    }

    /// Puts back a drain the registry kept (see `drain.rs`) on agent `id`, which has just
    /// re-registered with its tasks: the same as draining it again with the stored deadline.
    pub(crate) fn restore_drain(
        &mut self,
        id: AgentId,
        deadline: Timestamp,
        now: &Now,
        fx: &mut Effects,
    ) {
        if self.agents.get(id).is_some_and(|a| a.drain.is_some()) {
            return;
        }
        tracing::info!(agent = %id, %deadline, "drain restored from the registry");
        let delay_ms = drain::restored_delay_ms(deadline, now);
        if let Err(e) = self.drain_until(id, delay_ms, deadline, now, fx) {
            tracing::error!(agent = %id, error = %e, "could not restore the agent's drain");
        }
    }

    /// Ends an agent's drain: it is offered again (an allocation runs soon). Reactivating an
    /// agent that is not draining changes nothing and succeeds (idempotent). Unknown agents are
    /// [`StateError::UnknownAgent`].
    pub fn reactivate_agent(
        &mut self,
        id: AgentId,
        fx: &mut Effects,
    ) -> Result<AgentMaintenance, StateError> {
        let State { agents, ledger, .. } = self;
        drain::reactivate(agents, ledger, id, fx)
    }

    /// The maintenance tick's part for drains: kills what still runs on agents past their
    /// deadline (again every update re-send interval while it runs) and marks agents with no
    /// task left `drained`.
    pub fn check_drains(&mut self, now: &Now, fx: &mut Effects) {
        let State {
            agents,
            tasks,
            drain_kills,
            timing,
            ..
        } = self;
        drain::check(
            agents,
            tasks,
            drain_kills,
            timing.update_resend_interval_ms,
            now,
            fx,
        );
    }

    /// How many tasks drains killed since the start (each counted once).
    pub fn drain_kills(&self) -> u64 {
        self.drain_kills
    }

    /// Who owns a registered framework: `None` if there is no such framework (or only a
    /// placeholder for adopted tasks), `Some(None)` if it was registered without credentials.
    pub fn framework_owner(&self, id: FrameworkId) -> Option<Option<&str>> {
        owners::framework_owner(&self.frameworks, id)
    }

    /// Whether framework `id` is only a placeholder for adopted tasks (nobody's until a
    /// framework principal registers it with its id).
    pub fn framework_is_placeholder(&self, id: FrameworkId) -> bool {
        self.frameworks.get(id).is_some_and(|fw| fw.placeholder)
    }

    /// How many registered frameworks `principal` owns (for `max_frameworks`).
    pub fn frameworks_owned_by(&self, principal: &str) -> usize {
        owners::frameworks_owned_by(&self.frameworks, principal)
    }

    /// Who owns an agent: `None` if the agent is unknown, `Some(None)` if it registered
    /// without credentials.
    pub fn agent_owner(&self, id: AgentId) -> Option<Option<&str>> {
        owners::agent_owner(&self.agents, id)
    }

    /// Records the principal that registered the agent (after a successful registration).
    pub fn set_agent_owner(&mut self, id: AgentId, owner: Arc<str>) {
        owners::set_agent_owner(&mut self.agents, id, owner);
    }

    /// The maintenance tick's part for preemption toward fair share (see `preempt.rs`);
    /// nothing when off.
    pub fn check_preemption(&mut self, now: &Now, fx: &mut Effects) {
        let State {
            preempt,
            ledger,
            tasks,
            agents,
            timing,
            ..
        } = self;
        preempt::check(
            preempt,
            ledger,
            tasks,
            agents,
            timing.update_resend_interval_ms,
            now,
            fx,
        );
    }

    /// Preemption plans made since the start.
    pub fn preemptions(&self) -> u64 {
        self.preempt.preemptions
    }

    /// Tasks killed by preemption since the start.
    pub fn tasks_preempted(&self) -> u64 {
        self.preempt.tasks_preempted
    }

    /// Roles starved now (as of the last check).
    pub fn starved_roles(&self) -> usize {
        self.preempt.starved_since.len()
    }
}
