//! Frameworks: registration and failover, the event stream's lifecycle, removal, suppress and
//! revive.

use protocol::messages::FrameworkRegistered;
use protocol::{FrameworkEvent, FrameworkId, Resources, RolePath};

use super::input::FrameworkRegistration;
use super::ledger::Eligibility;
use super::{Connection, Effect, Effects, FrameworkRecord, Now, State, StateError, ORPHAN_ROLE};
use crate::records::{Change, StoredFramework};

/// A registration checked against the books and computed, not applied
/// ([`State::plan_registration`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RegistrationPlan {
    /// The framework's id (a new one drawn from the id source).
    pub id: FrameworkId,
    /// Whether the framework is new (else it re-registers, a placeholder becoming real).
    pub new: bool,
    /// The record the registry is to keep.
    pub record: StoredFramework,
}

impl State {
    /// Registers a framework, or re-registers one with its `framework_id` (keeping its tasks).
    /// A `framework_id` this coordinator never saw is adopted (see the module docs); one it
    /// removed is refused. Returns the id and whether the framework is new. Its record is
    /// queued for the registry after the books changed; the API writes it first instead
    /// ([`State::plan_registration`], [`State::apply_written_registration`]).
    pub fn register_framework(
        &mut self,
        req: FrameworkRegistration,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<(FrameworkId, bool), StateError> {
        let plan = self.plan_registration(&req, now)?;
        self.apply_registration(req, &plan, now, fx);
        self.persist_framework(plan.id, fx);
        Ok((plan.id, plan.new))
    }

    /// Checks a registration against the books and computes what it would do, changing
    /// nothing but the id source (a new framework's id is drawn here).
    pub fn plan_registration(
        &mut self,
        req: &FrameworkRegistration,
        now: &Now,
    ) -> Result<RegistrationPlan, StateError> {
        if req.role.as_str().starts_with('_') {
            return Err(StateError::ReservedRole);
        }
        // Longer than the ceiling is clamped to it (documented with `max_failover_timeout`).
        let failover_timeout_s = req
            .failover_timeout_s
            .unwrap_or(self.timing.default_failover_timeout_ms as f64 / 1000.0)
            .min(self.timing.max_failover_timeout_ms as f64 / 1000.0);
        if let Some(demand) = &req.demand {
            self.ledger.check_kinds(demand)?;
        }
        self.ledger.check_roles(&req.role, self.timing.max_roles)?;
        let known = req
            .framework_id
            .is_some_and(|id| self.frameworks.contains(id));
        if !known && self.frameworks.len() >= self.timing.max_frameworks {
            return Err(StateError::TooManyFrameworks(self.timing.max_frameworks));
        }
        if let Some(id) = req.framework_id {
            if self.frameworks.was_removed(id) {
                return Err(StateError::FrameworkRemoved(id));
            }
        }
        let existing = req.framework_id.and_then(|id| self.frameworks.get(id));
        let id = req.framework_id.unwrap_or_else(|| self.ids.framework_id());
        let (registered_at, owner) = match existing {
            Some(fw) => (fw.registered_at, req.owner.clone().or(fw.owner.clone())),
            None => (now.wall, req.owner.clone()),
        };
        Ok(RegistrationPlan {
            id,
            new: !known,
            record: StoredFramework {
                id,
                name: req.name.clone(),
                role: req.role.clone(),
                failover_timeout_s,
                registered_at,
                owner: owner.as_deref().map(str::to_owned),
                gpu_resources: req.gpu_resources,
                partition_timeout_s: req.partition_timeout_s,
            },
        })
    }

    /// Applies a registration whose record `written` is already durable. The books may have
    /// moved while it was written (a failover removal, a placeholder, limits reached), so it
    /// is checked again: if it still passes it is applied (and its record queued again if it
    /// now differs); if not, the books stay unchanged, the error is returned, and the change
    /// that puts the registry back to what the books say of the framework is queued.
    pub fn apply_written_registration(
        &mut self,
        mut req: FrameworkRegistration,
        written: &RegistrationPlan,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<(FrameworkId, bool), StateError> {
        req.framework_id = Some(written.id);
        let mut plan = match self.plan_registration(&req, now) {
            Ok(plan) => plan,
            Err(e) => {
                self.persist_books_record(written.id, fx);
                return Err(e);
            }
        };
        if plan.new {
            plan.record.registered_at = written.record.registered_at;
        }
        self.apply_registration(req, &plan, now, fx);
        if plan.record != written.record {
            self.persist_framework(plan.id, fx);
        }
        Ok((plan.id, plan.new))
    }

    /// Leaves the books unchanged for a registration whose record `written` is already
    /// durable but which is refused at apply for a reason outside the books (its caller's
    /// rights): queues the change that puts the registry back to what the books say of the
    /// framework.
    pub fn refuse_written_registration(&self, written: &RegistrationPlan, fx: &mut Effects) {
        self.persist_books_record(written.id, fx);
    }

    /// Applies a registration `plan` made under this same lock (so it cannot fail).
    fn apply_registration(
        &mut self,
        req: FrameworkRegistration,
        plan: &RegistrationPlan,
        now: &Now,
        fx: &mut Effects,
    ) {
        let id = plan.id;
        let failover_timeout_s = plan.record.failover_timeout_s;
        if let Some(fw) = self.frameworks.get_mut(id) {
            fw.name = req.name;
            fw.failover_timeout_s = failover_timeout_s;
            // A new session states its wants anew (the SDK's next revive or answer says them).
            fw.pending_tasks = None;
            if req.demand.is_some() {
                fw.demand = req.demand.clone();
            }
            if req.owner.is_some() {
                fw.owner = req.owner;
            }
            // A re-registration states the capabilities anew (as a Mesos re-subscribe does).
            let gpu_changed = fw.gpu_resources != req.gpu_resources;
            fw.gpu_resources = req.gpu_resources;
            fw.partition_timeout_s = req.partition_timeout_s;
            fw.wants_since_ms = now.ms;
            if gpu_changed {
                self.ledger.set_gpu_capable(id, req.gpu_resources);
            }
            let move_role = fw.placeholder || fw.role != req.role;
            fw.placeholder = false;
            if move_role {
                self.move_framework(id, req.role, fx);
            } else if req.demand.is_some() {
                self.ledger.set_demand(id, req.demand);
            }
            self.refresh_sated(id);
            fx.push(Effect::Allocate);
            return;
        }
        let record = FrameworkRecord::new(
            req.name,
            req.role,
            failover_timeout_s,
            req.demand,
            false,
            now,
        );
        self.add_framework_record(id, record);
        if let Some(fw) = self.frameworks.get_mut(id) {
            fw.owner = req.owner;
            fw.registered_at = plan.record.registered_at;
            fw.gpu_resources = req.gpu_resources;
            fw.partition_timeout_s = req.partition_timeout_s;
        }
        if req.gpu_resources {
            self.ledger.set_gpu_capable(id, true);
        }
    }

    /// Queues the change that makes the registry say what the books say of framework `id`:
    /// its record, its removal, or nothing (forgotten).
    fn persist_books_record(&self, id: FrameworkId, fx: &mut Effects) {
        if self.frameworks.get(id).is_some_and(|fw| !fw.placeholder) {
            self.persist_framework(id, fx);
        } else if self.frameworks.was_removed(id) {
            fx.push(Effect::Persist(Change::RemoveFramework(id)));
        } else {
            fx.push(Effect::Persist(Change::ForgetFramework(id)));
        }
    }

    /// Queues the framework's record for the durable registry.
    fn persist_framework(&self, id: FrameworkId, fx: &mut Effects) {
        if let Some(record) = self.stored_framework(id) {
            fx.push(Effect::Persist(Change::PutFramework(record)));
        }
    }

    /// The registry's record of framework `id` as the books hold it (none for an unknown
    /// framework or a placeholder, which the registry does not keep).
    pub fn stored_framework(&self, id: FrameworkId) -> Option<StoredFramework> {
        let fw = self.frameworks.get(id).filter(|fw| !fw.placeholder)?;
        Some(StoredFramework {
            id,
            name: fw.name.clone(),
            role: fw.role.clone(),
            failover_timeout_s: fw.failover_timeout_s,
            registered_at: fw.registered_at,
            owner: fw.owner.as_deref().map(str::to_owned),
            gpu_resources: fw.gpu_resources,
            partition_timeout_s: fw.partition_timeout_s,
        })
    }

    /// Adds a new framework record (see [`FrameworkRecord::new`]) and its allocator leaf
    /// (inactive, not GPU-capable, with the record's demand).
    pub(crate) fn add_framework_record(&mut self, id: FrameworkId, record: FrameworkRecord) {
        let eligibility = Eligibility {
            active: false,
            suppressed: false,
            sated: false,
            demand: record.demand.clone(),
            gpu_capable: false,
        };
        self.ledger.add_framework(id, &record.role, &eligibility);
        self.frameworks.add(id, record);
    }

    /// Sets framework `id`'s web UI URL, as its latest registration stated it (checked by the
    /// API layer with [`protocol::messages::check_webui_url`]).
    pub fn set_framework_webui_url(&mut self, id: FrameworkId, url: Option<String>) {
        if let Some(fw) = self.frameworks.get_mut(id) {
            fw.webui_url = url;
        }
    }

    /// The placeholder framework that holds adopted tasks of an unknown framework. False when
    /// there is none and none may be made: `max_placeholder_frameworks` (or `max_frameworks`)
    /// reached.
    pub(crate) fn ensure_placeholder(&mut self, id: FrameworkId, now: &Now) -> bool {
        if self.frameworks.contains(id) {
            return true;
        }
        // Counted only when a new one is asked for (an unknown framework id: rare).
        let placeholders = self.frameworks.placeholders();
        if placeholders >= self.timing.max_placeholder_frameworks
            || self.frameworks.len() >= self.timing.max_frameworks
        {
            return false;
        }
        let Ok(role) = RolePath::new(ORPHAN_ROLE) else {
            return false;
        };
        let timeout = self.timing.default_failover_timeout_ms as f64 / 1000.0;
        let record = FrameworkRecord::new(String::new(), role, timeout, None, true, now);
        self.add_framework_record(id, record);
        true
    }

    /// Moves a framework to another role: a fresh allocator leaf, its tasks re-accounted.
    fn move_framework(&mut self, id: FrameworkId, role: RolePath, fx: &mut Effects) {
        self.rescind_framework_offers(id, "framework re-registered", fx);
        let Some(fw) = self.frameworks.get_mut(id) else {
            return;
        };
        fw.role = role.clone();
        let eligibility = Eligibility {
            active: matches!(fw.connection, Connection::Connected { .. }),
            suppressed: fw.suppressed,
            sated: fw.is_sated(),
            demand: fw.demand.clone(),
            gpu_capable: fw.gpu_resources,
        };
        let held: Vec<_> = self
            .tasks
            .of_framework(id)
            .filter(|(_, t)| t.holds())
            .map(|(k, t)| {
                (
                    k.1.clone(),
                    t.agent_id(),
                    t.resources.clone(),
                    t.pool.clone(),
                )
            })
            .collect();
        // Off the old leaf, onto the new one: the same holdings on the same agents (in a pool
        // reserved for the new role where one holds them, else unreserved).
        for (_, agent, res, pool) in &held {
            self.ledger.release(id, *agent, res, pool.as_ref());
        }
        self.ledger.remove_framework(id);
        self.ledger.add_framework(id, &role, &eligibility);
        for (task, agent, res, _) in held {
            match self.ledger.hold(id, agent, &res) {
                Ok(pool) => {
                    if let Some(mut t) = self.tasks.get_mut(&(id, task)) {
                        t.pool = pool;
                    }
                }
                // Just released on the same agent: cannot happen while the books are right
                // (unless it was reserved for the old role and the unreserved rest is short).
                Err(e) => tracing::error!(framework = %id, %agent, error = %e, "task does not fit"),
            }
        }
    }

    /// Opens a new event stream for the framework, replacing any older one. Queues the
    /// `subscribed` event and every unacknowledged update. Returns the stream's number.
    pub fn subscribe(
        &mut self,
        id: FrameworkId,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<u64, StateError> {
        let heartbeat_interval_s = self.framework_heartbeat_s();
        let fw = self
            .frameworks
            .get_mut(id)
            .ok_or(StateError::UnknownFramework(id))?;
        if fw.placeholder {
            return Err(StateError::UnknownFramework(id));
        }
        fw.generation += 1;
        let generation = fw.generation;
        fw.connection = Connection::Connected { generation };
        fw.wants_since_ms = now.ms;
        fx.push(Effect::ToFramework(
            id,
            FrameworkEvent::Subscribed(FrameworkRegistered {
                framework_id: id,
                heartbeat_interval_s,
                limits: None,
            }),
        ));
        let resend_ms = self.timing.update_resend_interval_ms;
        // The `subscribed` event and at most a queue's worth less one of updates; the rest
        // follow with the re-sends.
        let limit = self.timing.max_stream_queue.saturating_sub(1);
        for status in fw.pending.replay(now.ms, resend_ms, limit) {
            fx.push(Effect::ToFramework(id, FrameworkEvent::Update { status }));
        }
        self.ledger.set_active(id, true);
        fx.push(Effect::Allocate);
        Ok(generation)
    }

    /// The framework's stream number `generation` ended. If it is still the current one, the
    /// framework is disconnected: its offers are rescinded and its failover timeout starts.
    pub fn stream_closed(&mut self, id: FrameworkId, generation: u64, now: &Now, fx: &mut Effects) {
        let Some(fw) = self.frameworks.get_mut(id) else {
            return;
        };
        if fw.connection != (Connection::Connected { generation }) {
            return;
        }
        fw.connection = Connection::Disconnected {
            since_ms: now.ms,
            ever: true,
        };
        self.ledger.set_active(id, false);
        self.rescind_framework_offers(id, "framework disconnected", fx);
        fx.push(Effect::Allocate);
    }

    /// Removes every disconnected framework whose failover timeout has passed. A framework that
    /// never subscribed gets at least one heartbeat interval to open its stream.
    pub fn check_failover(&mut self, now: &Now, fx: &mut Effects) {
        let grace = self.timing.framework_heartbeat_interval_ms;
        let expired: Vec<FrameworkId> = self
            .frameworks
            .iter()
            .filter(|(_, fw)| match fw.connection {
                Connection::Disconnected { since_ms, ever } => {
                    let timeout = if ever || fw.placeholder {
                        fw.failover_ms()
                    } else {
                        fw.failover_ms().max(grace)
                    };
                    now.ms >= since_ms.saturating_add(timeout)
                }
                Connection::Connected { .. } => false,
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            tracing::info!(framework = %id, "failover timeout passed: removing framework");
            if let Err(e) = self.remove_framework(id, "failover timeout passed", fx) {
                tracing::error!(framework = %id, error = %e, "failover removal refused");
            }
        }
    }

    /// Removes a framework: kills its tasks, rescinds its offers, forgets it (remembering its id
    /// as removed), and ends its stream with an `error` event.
    pub fn remove_framework(
        &mut self,
        id: FrameworkId,
        reason: &str,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        self.drop_framework(id, reason, true, fx)
    }

    /// The registry change that removing framework `id` writes, if it can be removed.
    pub fn plan_removal(&self, id: FrameworkId) -> Result<Change, StateError> {
        if !self.frameworks.contains(id) {
            return Err(StateError::UnknownFramework(id));
        }
        Ok(Change::RemoveFramework(id))
    }

    /// [`State::remove_framework`] once its removal is already durable: the same, without
    /// queuing the registry change again.
    pub fn remove_written_framework(
        &mut self,
        id: FrameworkId,
        reason: &str,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        self.drop_framework(id, reason, false, fx)
    }

    /// Removes a framework, queuing its registry change if `persist`.
    fn drop_framework(
        &mut self,
        id: FrameworkId,
        reason: &str,
        persist: bool,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        if !self.frameworks.contains(id) {
            return Err(StateError::UnknownFramework(id));
        }
        self.rescind_framework_offers(id, reason, fx);
        let keys: Vec<_> = self
            .tasks
            .of_framework(id)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some(task) = self.tasks.remove(&key) else {
                continue;
            };
            if !task.holds() {
                // Ended, or unreachable (its agent is lost; a task it still runs when it
                // returns is killed as a removed framework's).
                continue;
            }
            self.ledger
                .release(id, task.agent_id(), &task.resources, task.pool.as_ref());
            if let Some(agent) = self.agents.get(task.agent_id()) {
                if agent.state == super::AgentState::Active {
                    fx.push(Effect::Kill {
                        agent_id: task.agent_id(),
                        framework_id: id,
                        endpoint: agent.endpoint.clone(),
                        task_id: key.1.clone(),
                    });
                }
            }
        }
        self.ledger.remove_framework(id);
        self.frameworks.remove(id);
        if persist {
            fx.push(Effect::Persist(Change::RemoveFramework(id)));
        }
        fx.push(Effect::ToFramework(
            id,
            FrameworkEvent::Error {
                message: format!("framework removed: {reason}"),
            },
        ));
        fx.push(Effect::CloseStream(id));
        fx.push(Effect::Allocate);
        Ok(())
    }

    /// No offers for the framework until it revives.
    pub fn suppress(&mut self, id: FrameworkId) -> Result<(), StateError> {
        let fw = self.live_framework_mut(id)?;
        fw.suppressed = true;
        self.ledger.suppress(id);
        Ok(())
    }

    /// Offers resume: clears suppression and every decline filter; optionally a new demand hint.
    /// The stall check counts from `now` again.
    pub fn revive(
        &mut self,
        id: FrameworkId,
        demand: Option<Resources>,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        self.live_framework_mut(id)?;
        if let Some(d) = &demand {
            self.ledger.check_kinds(d)?;
        }
        let fw = self.live_framework_mut(id)?;
        fw.suppressed = false;
        fw.wants_since_ms = now.ms;
        if demand.is_some() {
            fw.demand = demand.clone();
            self.ledger.set_demand(id, demand);
        }
        self.ledger.revive(id);
        fx.push(Effect::Allocate);
        Ok(())
    }

    /// A registered (non-placeholder) framework.
    pub(crate) fn live_framework_mut(
        &mut self,
        id: FrameworkId,
    ) -> Result<&mut FrameworkRecord, StateError> {
        self.frameworks.live_mut(id)
    }
}
