//! The offer book: allocation decisions become offers; accept, decline, expiry and rescind end
//! them. Offer ids are single use: an ended offer is remembered (bounded) so a reuse is told
//! apart (409) from an id never issued (404).

use std::collections::{BTreeMap, HashSet};

use protocol::events::{OfferEvent, OfferOutcome};
use protocol::messages::LaunchTasks;
use protocol::{
    AgentId, FrameworkEvent, FrameworkId, Offer, OfferId, Resources, RolePath, TaskId, TaskState,
    TaskStatus,
};

use allocator::{Run, Sweep};

use super::offer_book::OfferRecord;
use super::{Accept, Decline, Effect, Effects, Now, State, StateError};

/// How an offer ended, for the operator stream and for the 409 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Accepted,
    Declined,
    Rescinded,
    Expired,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Ending::Accepted => "accepted",
            Ending::Declined => "declined",
            Ending::Rescinded => "rescinded",
            Ending::Expired => "expired",
        }
    }
}

/// An allocation run in progress: [`State::start_run`] makes it, [`State::allocate_part`]
/// advances it until [`AllocationRun::done`].
#[derive(Debug, Clone)]
pub struct AllocationRun {
    run: Run,
    started_ms: u64,
}

impl AllocationRun {
    /// Whether every part has run.
    pub fn done(&self) -> bool {
        self.run.done()
    }

    /// Whether the run visits every agent (see [`Sweep`]).
    pub fn full(&self) -> bool {
        self.run.full()
    }

    /// How many agents it has visited so far.
    pub fn visited(&self) -> usize {
        self.run.visited()
    }
}

impl State {
    /// One allocation run over every agent: H-DRF picks a framework for each agent's free
    /// resources; each decision becomes an offer, sent to its framework in one `offers` event.
    /// Returns the number of offers made.
    pub fn allocate(&mut self, now: &Now, fx: &mut Effects) -> usize {
        let mut run = self.start_run(Sweep::All, now);
        self.allocate_part(&mut run, usize::MAX, now, fx)
    }

    /// Starts an allocation run over every agent, or only the agents whose free resources or
    /// filters changed since a run last visited them (see [`Sweep`]).
    pub fn start_run(&mut self, sweep: Sweep, now: &Now) -> AllocationRun {
        AllocationRun {
            run: self.ledger.start_run(sweep),
            started_ms: now.ms,
        }
    }

    /// The next part of `run`: at most `max` agents, decided as [`State::allocate`] does (the
    /// part's offers go to each framework in one `offers` event). Parts run one after another,
    /// other calls in between, until the run is done. Returns the offers made.
    pub fn allocate_part(
        &mut self,
        run: &mut AllocationRun,
        max: usize,
        now: &Now,
        fx: &mut Effects,
    ) -> usize {
        // Each decision's tasks are counted as it is made, so a framework whose offers now
        // hold what it wants is held back for the rest of the part (`sated.rs`).
        let mut holds = Vec::new();
        let frameworks = &mut self.frameworks;
        let decisions = self.ledger.allocate_part(&mut run.run, max, now.ms, |d| {
            let Some(fw) = frameworks.get_mut(d.framework) else {
                holds.push(0);
                return false;
            };
            let n = super::sated::tasks_held(fw.demand.as_ref(), &d.resources);
            holds.push(n);
            fw.offer_made(n)
        });
        let mut batches: BTreeMap<FrameworkId, Vec<Offer>> = BTreeMap::new();
        let expires_ms = now.ms.saturating_add(self.timing.offer_timeout_ms);
        let expires_at = now.wall
            + chrono::Duration::milliseconds(
                i64::try_from(self.timing.offer_timeout_ms).unwrap_or(i64::MAX / 2),
            );
        for (d, holds) in decisions.into_iter().zip(holds) {
            let usable =
                self.frameworks.contains(d.framework) && self.agents.active(d.agent).is_some();
            let Some(agent) = self.agents.get_mut(d.agent).filter(|_| usable) else {
                // Cannot happen while the allocator mirrors the books; give the resources back.
                tracing::error!(agent = %d.agent, framework = %d.framework, "stale decision");
                self.ledger
                    .end_offer(d.framework, d.agent, &d.resources, d.reservation.as_ref());
                self.offer_gone(d.framework, holds, fx);
                continue;
            };
            let offer = Offer {
                offer_id: self.ids.offer_id(),
                framework_id: d.framework,
                agent_id: d.agent,
                hostname: agent.hostname.clone(),
                resources: d.resources.clone(),
                agent_total: agent.total.clone(),
                attributes: agent.attributes.clone(),
                created_at: now.wall,
                expires_at,
                reservation: d
                    .reservation
                    .map(|role| protocol::reservation::OfferReservation { role }),
            };
            self.offers.insert(offer.clone(), now.ms, expires_ms, holds);
            fx.push(Effect::Offer(OfferEvent::OfferCreated(offer.clone())));
            batches.entry(d.framework).or_default().push(offer);
            if let Some(since) = self.freed_at.remove(&d.agent) {
                self.offer_waits.push(now.ms.saturating_sub(since));
            }
        }
        if run.done() {
            // Freed since the run started: maybe after its part passed; the next run offers it.
            let started = run.started_ms;
            self.freed_at.retain(|_, since| *since > started);
        }
        let made = batches.values().map(Vec::len).sum();
        for (fw, offers) in batches {
            // The stall check counts from the last offer sent (`stall.rs`).
            if let Some(record) = self.frameworks.get_mut(fw) {
                record.last_offer_ms = Some(now.ms);
            }
            fx.push(Effect::ToFramework(fw, FrameworkEvent::Offers { offers }));
        }
        made
    }

    /// Checks that every offer exists, is outstanding, and belongs to `fw`; returns them.
    pub(crate) fn check_offers(
        &self,
        fw: FrameworkId,
        ids: &[OfferId],
    ) -> Result<Vec<&OfferRecord>, StateError> {
        if ids.is_empty() {
            return Err(StateError::NoOffers);
        }
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if !seen.insert(*id) {
                return Err(StateError::DuplicateOffer(*id));
            }
            match self.offers.get(id) {
                Some(rec) if rec.offer().framework_id != fw => {
                    return Err(StateError::OfferNotYours(*id))
                }
                Some(rec) => out.push(rec),
                None => {
                    return Err(match self.offers.ended(id) {
                        Some(how) => StateError::OfferGone { offer: *id, how },
                        None => StateError::UnknownOffer(*id),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Accepts offers of one agent, launching tasks on it. Validates everything first; on
    /// success the tasks are `staging`, sent to the agent, and the unused rest of the offers
    /// returns to the pool filtered for this framework for `refuse_seconds`.
    pub fn accept(
        &mut self,
        fw: FrameworkId,
        req: Accept,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<Vec<TaskId>, StateError> {
        self.live_framework_mut(fw)?;
        let checked = self.check_accept(fw, &req)?;
        Ok(self.apply_accept(fw, req, checked, now, fx))
    }

    /// Checks an accept of one agent's offers as [`State::accept`] does, changing nothing:
    /// what applying it needs.
    pub(crate) fn check_accept(
        &self,
        fw: FrameworkId,
        req: &Accept,
    ) -> Result<CheckedAccept, StateError> {
        let offers = self.check_offers(fw, &req.offer_ids)?;
        let first = offers[0].offer().clone();
        let agent_id = first.agent_id;
        let mut offered = Resources::new();
        for rec in &offers {
            if rec.offer().agent_id != agent_id {
                return Err(StateError::OffersOnSeveralAgents(
                    first.offer_id,
                    rec.offer().offer_id,
                ));
            }
            offered.add_assign(&rec.offer().resources);
        }
        let mut needed = Resources::new();
        let mut ids = HashSet::new();
        for task in &req.tasks {
            if task.agent_id != agent_id {
                return Err(StateError::TaskAgentMismatch {
                    task: task.task_id.clone(),
                    given: task.agent_id,
                    expected: agent_id,
                });
            }
            if let Some(iso) = &task.isolation {
                iso.check_agent(&first.attributes).map_err(|reason| {
                    StateError::IsolationUnavailable {
                        task: task.task_id.clone(),
                        reason: reason.to_string(),
                    }
                })?;
            }
            if !ids.insert(task.task_id.clone()) {
                return Err(StateError::DuplicateTaskInRequest(task.task_id.clone()));
            }
            if self.tasks.contains(&(fw, task.task_id.clone())) {
                return Err(StateError::TaskExists(task.task_id.clone()));
            }
            needed.add_assign(&task.resources);
        }
        let Some(unused) = offered.checked_sub(&needed) else {
            return Err(StateError::InsufficientResources { needed, offered });
        };
        let (pools, task_pools) = assign_pools(&offers, &req.tasks)?;
        Ok(CheckedAccept {
            agent_id,
            unused,
            pools,
            task_pools,
        })
    }

    /// Applies an accept [`State::check_accept`] passed: the offers end, the tasks are
    /// `staging` and sent to the agent, the unused rest returns to the pool.
    pub(crate) fn apply_accept(
        &mut self,
        fw: FrameworkId,
        req: Accept,
        checked: CheckedAccept,
        now: &Now,
        fx: &mut Effects,
    ) -> Vec<TaskId> {
        let refuse_ms = self.refuse_ms(req.refuse);
        let CheckedAccept {
            agent_id,
            unused,
            pools,
            task_pools,
        } = checked;
        // Everything checked: change the books.
        self.tasks_per_offer
            .observe(req.tasks.len(), req.offer_ids.len());
        let launched: Vec<TaskId> = req.tasks.iter().map(|t| t.task_id.clone()).collect();
        for id in &req.offer_ids {
            self.end_offer(*id, Ending::Accepted, None, &launched, false, fx);
        }
        // Offered to used; the unused rest returns to the pool it came from.
        for p in &pools {
            self.ledger
                .accept_in(fw, agent_id, &p.offered, &p.needed, p.role.as_ref());
        }
        if !unused.is_empty() {
            self.freed(agent_id, now.ms);
            if refuse_ms > 0 {
                let until = now.ms.saturating_add(refuse_ms);
                self.ledger.add_filter(fw, agent_id, &unused, until);
            }
            fx.push(Effect::Allocate);
        }
        if req.tasks.is_empty() {
            return launched;
        }
        let endpoint = self
            .agents
            .get(agent_id)
            .map(|a| a.endpoint.clone())
            .unwrap_or_default();
        for (task, pool) in req.tasks.iter().zip(task_pools) {
            let latest = TaskStatus {
                task_id: task.task_id.clone(),
                framework_id: fw,
                agent_id,
                state: TaskState::Staging,
                message: None,
                exit_code: None,
                update_id: self.ids.update_id(),
                timestamp: now.wall,
                resources: Some(task.resources.clone()),
                reason: None,
                usage: None,
                gpu_devices: None,
                healthy: None,
            };
            let record = self.tasks.take_in(
                (fw, task.task_id.clone()),
                task.name.clone(),
                agent_id,
                task.resources.clone(),
                latest,
            );
            record.pool = pool;
            record.priority = task.priority.map_or(0, protocol::preempt::Priority::get);
        }
        let mut partition_timeout_s = None;
        if let Some(f) = self.frameworks.get_mut(fw) {
            f.active_tasks += req.tasks.len();
            partition_timeout_s = f.partition_timeout_s;
        }
        fx.push(Effect::Launch {
            agent_id,
            endpoint,
            body: LaunchTasks {
                framework_id: fw,
                tasks: req.tasks,
                partition_timeout_s,
            },
        });
        launched
    }

    /// Accepts several sets of offers, each as [`State::accept`] and on its own: one refused
    /// changes nothing and leaves the others to go on. Refused as a whole only when the
    /// framework is unknown or removed.
    pub fn accept_many(
        &mut self,
        fw: FrameworkId,
        reqs: Vec<Accept>,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<Vec<Result<Vec<TaskId>, StateError>>, StateError> {
        self.live_framework_mut(fw)?;
        Ok(reqs
            .into_iter()
            .map(|req| self.accept(fw, req, now, fx))
            .collect())
    }

    /// Declines offers: they return to the pool, filtered for this framework on their agents
    /// for `refuse_seconds` (default 5).
    pub fn decline(
        &mut self,
        fw: FrameworkId,
        req: Decline,
        now: &Now,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        self.live_framework_mut(fw)?;
        let refuse_ms = self.refuse_ms(req.refuse);
        let offers: Vec<Offer> = self
            .check_offers(fw, &req.offer_ids)?
            .into_iter()
            .map(|r| r.offer().clone())
            .collect();
        // One filter per agent covering every declined offer there (an agent may have made
        // several: one per pool, reserved and unreserved, or cut by a limit); a filter per
        // offer would replace the one before it.
        let mut refused: BTreeMap<AgentId, Resources> = BTreeMap::new();
        for offer in offers {
            self.end_offer(offer.offer_id, Ending::Declined, None, &[], true, fx);
            self.freed(offer.agent_id, now.ms);
            refused
                .entry(offer.agent_id)
                .or_default()
                .add_assign(&offer.resources);
        }
        if refuse_ms > 0 {
            let until = now.ms.saturating_add(refuse_ms);
            for (agent, res) in refused {
                self.ledger.add_filter(fw, agent, &res, until);
            }
        }
        fx.push(Effect::Allocate);
        Ok(())
    }

    /// Ends an offer consumed by a reserve or unreserve (published as accepted, with no
    /// tasks): its resources return to the pool they were offered from.
    pub(crate) fn end_offer_consumed(&mut self, id: OfferId, fx: &mut Effects) {
        self.end_offer(
            id,
            Ending::Accepted,
            Some("consumed by a reserve or unreserve operation"),
            &[],
            true,
            fx,
        );
    }

    /// Rescinds every offer whose time is up.
    pub fn expire_offers(&mut self, now: &Now, fx: &mut Effects) {
        let due = self.offers.ids_where(|r| r.expires_ms() <= now.ms);
        for id in &due {
            if let Some(rec) = self.offers.get(id) {
                let agent = rec.offer().agent_id;
                self.freed(agent, now.ms);
            }
            self.end_offer(
                *id,
                Ending::Expired,
                Some("offer_timeout passed"),
                &[],
                true,
                fx,
            );
        }
        if !due.is_empty() {
            fx.push(Effect::Allocate);
        }
    }

    /// Rescinds every outstanding offer on an agent (before it leaves or changes).
    pub(crate) fn rescind_agent_offers(&mut self, agent: AgentId, reason: &str, fx: &mut Effects) {
        for id in self.offers.on_agent(agent) {
            self.end_offer(id, Ending::Rescinded, Some(reason), &[], true, fx);
        }
    }

    /// Makes room for `needed` on an agent: while `needed` does not fit in the agent's free
    /// resources, rescinds one of its outstanding offers that holds a resource in short supply
    /// (so offers that do not conflict survive). Returns the agent's free resources afterwards,
    /// which `needed` may still exceed when no offer is left to rescind.
    pub(crate) fn make_room(
        &mut self,
        agent: AgentId,
        needed: &Resources,
        reason: &str,
        fx: &mut Effects,
    ) -> Resources {
        let mut rescinded = false;
        let free = loop {
            let free = self
                .ledger
                .allocator()
                .agent_free(agent)
                .unwrap_or_default();
            let short = needed.saturating_sub(&free);
            if short.is_empty() {
                break free;
            }
            let victim = self.offers.on_agent(agent).into_iter().find(|id| {
                self.offers.get(id).is_some_and(|r| {
                    short
                        .names()
                        .any(|n| r.offer().resources.millis(n.as_str()) > 0)
                })
            });
            let Some(id) = victim else {
                break free;
            };
            self.end_offer(id, Ending::Rescinded, Some(reason), &[], true, fx);
            rescinded = true;
        };
        if rescinded {
            // Whatever the rescinded offers held beyond `needed` can be offered again.
            fx.push(Effect::Allocate);
        }
        free
    }

    /// Rescinds every outstanding offer of a framework.
    pub(crate) fn rescind_framework_offers(
        &mut self,
        fw: FrameworkId,
        reason: &str,
        fx: &mut Effects,
    ) {
        let ids = self.offers.ids_where(|r| r.offer().framework_id == fw);
        for id in ids {
            self.end_offer(id, Ending::Rescinded, Some(reason), &[], true, fx);
        }
    }

    /// Ends one outstanding offer: off the books, remembered as ended, published; `release`
    /// gives its resources back to the pool (an accept moves them to used instead, see
    /// [`super::ledger::Ledger::accept`]). Rescinds and expiries also tell the
    /// framework.
    fn end_offer(
        &mut self,
        id: OfferId,
        how: Ending,
        reason: Option<&str>,
        tasks: &[TaskId],
        release: bool,
        fx: &mut Effects,
    ) {
        let Some(rec) = self.offers.end(id, how.as_str()) else {
            return;
        };
        let holds = rec.holds();
        let offer = rec.into_offer();
        self.offer_gone(offer.framework_id, holds, fx);
        if release {
            self.ledger.end_offer(
                offer.framework_id,
                offer.agent_id,
                &offer.resources,
                offer.reservation.as_ref().map(|r| &r.role),
            );
        }
        let outcome = OfferOutcome {
            offer_id: id,
            framework_id: offer.framework_id,
            agent_id: offer.agent_id,
            tasks: tasks.to_vec(),
            reason: reason.map(str::to_owned),
        };
        let event = match how {
            Ending::Accepted => OfferEvent::OfferAccepted(outcome),
            Ending::Declined => OfferEvent::OfferDeclined(outcome),
            Ending::Rescinded => OfferEvent::OfferRescinded(outcome),
            Ending::Expired => OfferEvent::OfferExpired(outcome),
        };
        if matches!(how, Ending::Rescinded | Ending::Expired) {
            fx.push(Effect::ToFramework(
                offer.framework_id,
                FrameworkEvent::Rescind { offer_id: id },
            ));
        }
        fx.push(Effect::Offer(event));
    }
}

/// An accept of one agent's offers, checked: what applying it needs.
#[derive(Debug)]
pub(crate) struct CheckedAccept {
    agent_id: AgentId,
    /// What the offers hold beyond the tasks: back to the pool.
    unused: Resources,
    pools: Vec<PoolDraw>,
    /// Each task's pool (the reserved role, `None`: unreserved).
    task_pools: Vec<Option<RolePath>>,
}

/// The accepted offers of one pool of the agent, and what its tasks need of it.
#[derive(Debug)]
struct PoolDraw {
    /// The reserved role (`None`: unreserved).
    role: Option<RolePath>,
    offered: Resources,
    needed: Resources,
}

/// Books each task against one pool of the accepted offers: the first reserved pool (in
/// offer order) with room for it whole, else the unreserved one. A task that fits in no single
/// pool is refused ([`StateError::TaskSpansPools`]). Returns the pools and each task's pool.
#[allow(clippy::type_complexity)]
fn assign_pools(
    offers: &[&OfferRecord],
    tasks: &[protocol::TaskSpec],
) -> Result<(Vec<PoolDraw>, Vec<Option<RolePath>>), StateError> {
    let mut pools: Vec<PoolDraw> = Vec::new();
    for rec in offers {
        let role = rec.offer().reservation.as_ref().map(|r| r.role.clone());
        match pools.iter_mut().find(|p| p.role == role) {
            Some(p) => p.offered.add_assign(&rec.offer().resources),
            None => pools.push(PoolDraw {
                role,
                offered: rec.offer().resources.clone(),
                needed: Resources::new(),
            }),
        }
    }
    // Reserved pools first (stable: in offer order), the unreserved one last.
    pools.sort_by_key(|p| p.role.is_none());
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        let p = pools
            .iter_mut()
            .find(|p| p.needed.add(&task.resources).fits_in(&p.offered))
            .ok_or_else(|| StateError::TaskSpansPools(task.task_id.clone()))?;
        p.needed.add_assign(&task.resources);
        out.push(p.role.clone());
    }
    Ok((pools, out))
}
