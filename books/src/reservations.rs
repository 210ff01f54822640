//! Reservations in the books: static ones from the agent's registration, dynamic
//! ones made and taken back by frameworks on offers they hold (persisted as
//! [`Change::SetReservation`], re-applied when the agent registers again).
//!
//! Rules (`docs/src/operating/reservations.md`):
//! - a static reservation's role must exist (set by `PUT /api/v1/roles/{path}` or created by a
//!   framework registering under it): unlike Mesos, which takes any role name, a typo is
//!   refused at registration instead of setting resources aside for no one;
//! - what an agent reserves for a role in the allocator is its static plus its dynamic
//!   reservation for that role; a role's pool is offered only to frameworks in its subtree;
//! - `reserve` takes part of an *unreserved* offer of the framework and reserves it for the
//!   framework's own role; `unreserve` gives back part of an offer drawn from the pool of the
//!   framework's own role, at most what was reserved dynamically (static reservations belong
//!   to the agent's flags). Either consumes the offer: the resources come back in a later
//!   offer, now reserved (or unreserved).

use protocol::reservation::{
    AgentReservation, Reservation, ReservationKind, ReserveRequest, ReserveResponse,
};
use protocol::{AgentId, FrameworkId, Resources, RolePath};

use super::{Effect, Effects, Now, State, StateError};
use crate::records::Change;

/// Which of the two calls on an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationOp {
    /// `reserve`: part of an unreserved offer becomes reserved for the framework's role.
    Reserve,
    /// `unreserve`: part of a reserved offer of the framework's role goes back.
    Unreserve,
}

/// A reserve or unreserve checked against the books ([`State::plan_reservation`]): what the
/// agent's dynamic reservation for the role becomes.
#[derive(Debug, Clone)]
pub struct ReservationPlan {
    fw: FrameworkId,
    req: ReserveRequest,
    op: ReservationOp,
    offer: protocol::Offer,
    role: RolePath,
    dynamic: Resources,
}

impl ReservationPlan {
    /// The registry change that records it.
    pub fn change(&self) -> Change {
        Change::SetReservation(self.offer.agent_id, self.role.clone(), self.dynamic.clone())
    }
}

impl State {
    /// Checks an agent's static reservations against the books (each role must exist);
    /// changes nothing. Their form and sum were checked at the API edge.
    pub(crate) fn check_static_reservations(&self, list: &[Reservation]) -> Result<(), StateError> {
        for (i, r) in list.iter().enumerate() {
            if self.ledger.allocator().role_weight(&r.role).is_none() {
                return Err(StateError::InvalidReservation {
                    field: format!("reservations[{i}].role"),
                    reason: format!(
                        "role {} does not exist; create it first (PUT /api/v1/roles/{}) or register a framework under it",
                        r.role, r.role
                    ),
                });
            }
        }
        Ok(())
    }

    /// Puts the agent's reservations (static plus dynamic, per role) into the allocator. One
    /// that no longer fits (the agent came back smaller) is applied without its dynamic part,
    /// or not at all, and logged.
    pub(crate) fn apply_reservations(&mut self, agent: AgentId) {
        for (role, res) in self.agents.reserved_per_role(agent) {
            if let Err(e) = self.ledger.set_reservation(agent, &role, &res) {
                tracing::error!(%agent, %role, error = %e, "reservation does not fit the agent");
                let statics = self.agents.static_reserved(agent, &role);
                if let Err(e) = self.ledger.set_reservation(agent, &role, &statics) {
                    tracing::error!(%agent, %role, error = %e, "static reservation does not fit");
                }
            }
        }
    }

    /// The agent's reservations as operators see them: static ones, then dynamic ones.
    pub(crate) fn agent_reservations(&self, agent: AgentId) -> Vec<AgentReservation> {
        let mut out: Vec<AgentReservation> = self
            .agents
            .get(agent)
            .into_iter()
            .flat_map(|a| &a.static_reservations)
            .map(|r| AgentReservation {
                role: r.role.clone(),
                resources: r.resources.clone(),
                kind: ReservationKind::Static,
            })
            .collect();
        out.extend(
            self.agents
                .dynamic_of(agent)
                .map(|(role, res)| AgentReservation {
                    role: role.clone(),
                    resources: res.clone(),
                    kind: ReservationKind::Dynamic,
                }),
        );
        out
    }

    /// `POST /api/v1/frameworks/{id}/reserve`: reserves `req.resources` of the framework's
    /// unreserved offer `req.offer_id` for the framework's role. The offer is consumed; the
    /// change is queued for the registry ([`State::plan_reservation`] and
    /// [`State::commit_reservation`] are the write-first halves the API uses).
    pub fn reserve(
        &mut self,
        fw: FrameworkId,
        req: ReserveRequest,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<ReserveResponse, StateError> {
        let plan = self.plan_reservation(fw, &req, ReservationOp::Reserve)?;
        fx.push(Effect::Persist(plan.change()));
        Ok(self.apply_reservation(plan, now, fx))
    }

    /// `POST /api/v1/frameworks/{id}/unreserve`: gives back `req.resources` of offer
    /// `req.offer_id`, drawn from the pool of the framework's own role, to the agent's
    /// unreserved resources (at most what that role holds there dynamically). The offer is
    /// consumed; the change is queued for the registry.
    pub fn unreserve(
        &mut self,
        fw: FrameworkId,
        req: ReserveRequest,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<ReserveResponse, StateError> {
        let plan = self.plan_reservation(fw, &req, ReservationOp::Unreserve)?;
        fx.push(Effect::Persist(plan.change()));
        Ok(self.apply_reservation(plan, now, fx))
    }

    /// Checks a reserve or unreserve against the books and says what it would do, changing
    /// nothing: the write-first API writes [`ReservationPlan::change`] before
    /// [`State::commit_reservation`] applies it.
    pub fn plan_reservation(
        &self,
        fw: FrameworkId,
        req: &ReserveRequest,
        op: ReservationOp,
    ) -> Result<ReservationPlan, StateError> {
        let role = self
            .frameworks
            .get(fw)
            .filter(|f| !f.placeholder)
            .ok_or(StateError::UnknownFramework(fw))?
            .role
            .clone();
        let offer = self.check_offers_one(fw, req)?;
        match (op, &offer.reservation) {
            (ReservationOp::Reserve, Some(r)) => {
                return Err(StateError::InvalidReservation {
                    field: "offer_id".into(),
                    reason: format!(
                    "offer {} is already reserved for role {}; reserve from an unreserved offer",
                    offer.offer_id, r.role
                ),
                })
            }
            (ReservationOp::Unreserve, None) => {
                return Err(StateError::InvalidReservation {
                    field: "offer_id".into(),
                    reason: format!(
                        "offer {} is not reserved; unreserve from an offer marked reservation",
                        offer.offer_id
                    ),
                })
            }
            (ReservationOp::Unreserve, Some(r)) if r.role != role => {
                return Err(StateError::InvalidReservation {
                    field: "offer_id".into(),
                    reason: format!(
                        "offer {} is reserved for role {}, not for this framework's role {role}",
                        offer.offer_id, r.role
                    ),
                })
            }
            _ => {}
        }
        check_amounts(&req.resources, &offer.resources, "the offer holds")?;
        let agent = offer.agent_id;
        let mut dynamic = self
            .agents
            .dynamic_for(agent, &role)
            .cloned()
            .unwrap_or_default();
        match op {
            ReservationOp::Reserve => dynamic.add_assign(&req.resources),
            ReservationOp::Unreserve => {
                check_amounts(
                    &req.resources,
                    &dynamic,
                    "the agent's dynamic reservation for this role is",
                )?;
                dynamic = dynamic.saturating_sub(&req.resources);
            }
        }
        Ok(ReservationPlan {
            fw,
            req: req.clone(),
            op,
            offer,
            role,
            dynamic,
        })
    }

    /// Applies a planned reserve or unreserve once its change is durable. The books may have
    /// moved since the plan (the offer expired or was rescinded meanwhile): it is checked
    /// again, and when it no longer passes, or would now reserve something else than was
    /// written, the answer is what the books now say and the change that puts the registry
    /// back to the books is queued.
    pub fn commit_reservation(
        &mut self,
        written: ReservationPlan,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<ReserveResponse, StateError> {
        match self.plan_reservation(written.fw, &written.req, written.op) {
            Ok(plan)
                if plan.dynamic == written.dynamic
                    && plan.offer.agent_id == written.offer.agent_id =>
            {
                Ok(self.apply_reservation(plan, now, fx))
            }
            other => {
                let (agent, role) = (written.offer.agent_id, written.role);
                let books = self
                    .agents
                    .dynamic_for(agent, &role)
                    .cloned()
                    .unwrap_or_default();
                fx.push(Effect::Persist(Change::SetReservation(agent, role, books)));
                match other {
                    Err(e) => Err(e),
                    Ok(_) => Err(StateError::InvalidReservation {
                        field: "offer_id".into(),
                        reason: "the agent's reservations changed meanwhile; try again on a new \
                                 offer"
                            .into(),
                    }),
                }
            }
        }
    }

    /// Consumes the plan's offer and sets the agent's dynamic reservation for the role (the
    /// registry's change is the caller's).
    fn apply_reservation(
        &mut self,
        plan: ReservationPlan,
        now: &Now,
        fx: &mut Effects,
    ) -> ReserveResponse {
        let agent = plan.offer.agent_id;
        self.consume_offer(&plan.offer, now, fx);
        self.set_dynamic(agent, &plan.role, plan.dynamic.clone());
        ReserveResponse {
            role: plan.role,
            reserved: plan.dynamic,
        }
    }

    /// The one outstanding offer of `fw` a reserve / unreserve names, and the amounts' form.
    fn check_offers_one(
        &self,
        fw: FrameworkId,
        req: &ReserveRequest,
    ) -> Result<protocol::Offer, StateError> {
        if req.resources.is_empty() {
            return Err(StateError::InvalidReservation {
                field: "resources".into(),
                reason: "name what to reserve or unreserve, e.g. {\"cpus\": 2}".into(),
            });
        }
        let offers = self.check_offers(fw, &[req.offer_id])?;
        Ok(offers[0].offer().clone())
    }

    /// Ends `offer` (consumed by a reserve / unreserve): its resources return to the pool
    /// they were offered from.
    fn consume_offer(&mut self, offer: &protocol::Offer, now: &Now, fx: &mut Effects) {
        self.end_offer_consumed(offer.offer_id, fx);
        self.freed(offer.agent_id, now.ms);
        fx.push(Effect::Allocate);
    }

    /// Records `agent`'s dynamic reservation for `role` (empty: none) and applies static plus
    /// dynamic to the allocator.
    fn set_dynamic(&mut self, agent: AgentId, role: &RolePath, res: Resources) {
        self.agents.set_dynamic(agent, role, &res);
        let mut total = self.agents.static_reserved(agent, role);
        total.add_assign(&res);
        if let Err(e) = self.ledger.set_reservation(agent, role, &total) {
            // The offer just returned what changes to the pool: cannot happen while the books
            // are right.
            tracing::error!(%agent, %role, error = %e, "dynamic reservation refused");
        }
    }
}

/// Checks that every amount of `want` is at most the same amount of `have`, naming the field.
fn check_amounts(want: &Resources, have: &Resources, what: &str) -> Result<(), StateError> {
    for (name, v) in want.iter() {
        let h = have.millis(name.as_str());
        if v > h {
            return Err(StateError::InvalidReservation {
                field: format!("resources.{name}"),
                reason: format!(
                    "{} {name} asked for, but {what} {}",
                    v as f64 / 1000.0,
                    h as f64 / 1000.0
                ),
            });
        }
    }
    Ok(())
}
