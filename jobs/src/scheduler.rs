//! [`JobsScheduler`]: the SDK [`Scheduler`] that launches the book's tasks on offers, with
//! each job's placement policy and constraints, and records every attempt before its launch
//! is sent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use framework_sdk::constraints::{self, Constraint, TaskPlaces};
use framework_sdk::placement::{self, Assignment, JobId, PendingTask, Placement};
use framework_sdk::prelude::*;

use crate::book::{task_id, Candidate, Effect, Estimator, Input};
use crate::clock::{now_ms, Millis};
use crate::spec::{JobSpec, PlacementPolicy};
use crate::state::{Applied, Shared};
use crate::store::Write;

/// The most tasks placed in one answer to offers; the rest wait for the next offers, so one
/// huge array never makes a single callback slow.
pub const MAX_PER_ROUND: usize = 5_000;

/// A task placed this round: its wire spec, its job, and its offer's slot.
type Planned = (TaskSpec, JobId, usize);

/// The jobs of this round's candidates: their specs and task-length estimates, by name.
type Specs = BTreeMap<String, (JobSpec, Estimator)>;

/// The jobs service's framework.
pub struct JobsScheduler {
    shared: Arc<Shared>,
    places: TaskPlaces,
    tetris: placement::Tetris,
}

impl std::fmt::Debug for JobsScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobsScheduler").finish_non_exhaustive()
    }
}

impl JobsScheduler {
    /// A scheduler over the service's shared state.
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            places: TaskPlaces::new(),
            tetris: placement::Tetris::default(),
        }
    }

    /// This round's placements under the book's lock: what the book launched (its writes
    /// handed to the writer), each placed task with its job and offer slot, and the ids the
    /// book launched. `None` when nothing is to launch.
    fn plan(
        &self,
        offers: &[Offer],
        now: Millis,
    ) -> Option<(Applied, Vec<Planned>, BTreeSet<TaskId>)> {
        let mut book = self.shared.lock_book();
        // Ask for no more candidates than the offers can hold: offers often come a few at a
        // time, and a round's cost grows with its candidates.
        let limit = book
            .least_demand(now)
            .map_or(0, |least| room_for(offers, &least));
        let cands = book.candidates(now, limit);
        if cands.is_empty() {
            return None;
        }
        // Each job once: a round's candidates are mostly indexes of the same few jobs.
        let mut specs: Specs = BTreeMap::new();
        let mut seqs: BTreeMap<String, JobId> = BTreeMap::new();
        for c in &cands {
            if seqs.contains_key(&c.job) {
                continue;
            }
            if let Some(job) = book.job(&c.job) {
                specs.insert(c.job.clone(), (job.spec().clone(), job.estimator()));
                seqs.insert(c.job.clone(), job.seq());
            }
        }
        // One placement per policy, best jobs first; each sees what the earlier left.
        let mut groups: Vec<(PlacementPolicy, Vec<(Candidate, JobId)>)> = Vec::new();
        for c in cands {
            let (Some((spec, _)), Some(seq)) = (specs.get(&c.job), seqs.get(&c.job)) else {
                continue;
            };
            let policy = spec.placement;
            match groups.iter_mut().find(|(p, _)| *p == policy) {
                Some((_, list)) => list.push((c, *seq)),
                None => groups.push((policy, vec![(c, *seq)])),
            }
        }
        let mut room = offers.to_vec();
        // Each placed task: its wire spec, its job, and its offer's slot.
        let mut planned: Vec<Planned> = Vec::new();
        let mut placed = Vec::new();
        for (policy, group) in groups {
            for a in self.place_group(policy, &room, &group, &specs) {
                let (Some((c, job)), Some(offer)) = (group.get(a.task), room.get_mut(a.offer))
                else {
                    continue;
                };
                let Some((spec, _)) = specs.get(&c.job) else {
                    continue;
                };
                let Some(left) = offer.resources.checked_sub(&spec.resources) else {
                    continue;
                };
                offer.resources = left;
                planned.push((task_spec(spec, c, offer), *job, a.offer));
                placed.push((c.clone(), offer.agent_id));
            }
        }
        let effects = match book.handle(Input::Launch(placed), now) {
            Ok(effects) => effects,
            Err(e) => {
                tracing::error!(error = %e, "the book refused this round's launches");
                Vec::new()
            }
        };
        // The book launches every candidate it gave out under this lock; any other is left.
        let launched: BTreeSet<TaskId> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::StoreAttempt(r) => Some(task_id(&r.job, r.index, r.attempt)),
                _ => None,
            })
            .collect();
        let applied = self.shared.carry_out(&book, effects);
        Some((applied, planned, launched))
    }

    /// Places `cands` on `offers` (whose free resources shrink as tasks are placed): the
    /// assignments, by index into `cands` and `offers`.
    fn place_group(
        &self,
        policy: PlacementPolicy,
        offers: &[Offer],
        cands: &[(Candidate, JobId)],
        specs: &Specs,
    ) -> Vec<Assignment> {
        let tasks: Vec<PendingTask> = cands
            .iter()
            .filter_map(|(c, job)| {
                let (spec, estimate) = specs.get(&c.job)?;
                Some(PendingTask {
                    job: *job,
                    demand: spec.resources.clone(),
                    duration_s: estimate.task_s(c.index),
                })
            })
            .collect();
        if tasks.len() != cands.len() {
            return Vec::new();
        }
        let mut rules: BTreeMap<JobId, Vec<Constraint>> = BTreeMap::new();
        for (c, job) in cands {
            if let Some((spec, _)) = specs.get(&c.job) {
                if !spec.constraints.is_empty() {
                    rules.insert(*job, spec.constraints.clone());
                }
            }
        }
        let usage = BTreeMap::new();
        let total = Resources::new();
        let run = |p: &dyn Placement| {
            constraints::place(p, offers, &tasks, &usage, &total, &rules, &self.places)
        };
        match policy {
            PlacementPolicy::Tetris => run(&self.tetris),
            PlacementPolicy::FirstFit => run(&placement::FirstFit),
            PlacementPolicy::BestFit => run(&placement::BestFit),
            PlacementPolicy::Spread => spread(offers, &tasks, &rules),
        }
    }
}

/// At most how many tasks `offers` can hold together when none asks less than `least` of any
/// resource, capped at [`MAX_PER_ROUND`].
fn room_for(offers: &[Offer], least: &Resources) -> usize {
    offers
        .iter()
        .map(|o| {
            // `iter` yields only the non-zero amounts.
            least
                .iter()
                .map(|(name, d)| {
                    usize::try_from(o.resources.millis(name.as_str()) / d).unwrap_or(usize::MAX)
                })
                .min()
                .unwrap_or(MAX_PER_ROUND)
        })
        .fold(0, usize::saturating_add)
        .min(MAX_PER_ROUND)
}

/// Deals tasks out round-robin over the offers, so an array spreads over every agent that
/// has room before any agent takes a second task. Each constraint's test of an agent's
/// attributes ([`Constraint::admits`]) is kept; counting constraints are only checked to
/// name an attribute the agent has (use another policy to count).
fn spread(
    offers: &[Offer],
    tasks: &[PendingTask],
    rules: &BTreeMap<JobId, Vec<Constraint>>,
) -> Vec<Assignment> {
    let mut free: Vec<Resources> = offers.iter().map(|o| o.resources.clone()).collect();
    let mut out = Vec::new();
    let mut next = 0usize;
    for (t, task) in tasks.iter().enumerate() {
        let job_rules = rules.get(&task.job).map(Vec::as_slice).unwrap_or_default();
        for k in 0..offers.len() {
            let o = (next + k) % offers.len();
            let admits = job_rules.iter().all(|c| c.admits(&offers[o].attributes));
            if !admits {
                continue;
            }
            if let Some(left) = free[o].checked_sub(&task.demand) {
                free[o] = left;
                out.push(Assignment { task: t, offer: o });
                next = o + 1;
                break;
            }
        }
    }
    out
}

/// The wire spec of one attempt on one offer.
fn task_spec(spec: &JobSpec, c: &Candidate, offer: &Offer) -> TaskSpec {
    let mut env = spec.env.clone();
    env.insert("PARLEY_JOB".into(), spec.name.clone());
    env.insert("PARLEY_TASK_INDEX".into(), c.index.to_string());
    env.insert("PARLEY_TASK_ATTEMPT".into(), c.attempt.to_string());
    TaskSpec {
        task_id: task_id(&c.job, c.index, c.attempt),
        name: format!("{}[{}]", spec.name, c.index),
        agent_id: offer.agent_id,
        resources: spec.resources.clone(),
        command: spec.command.clone(),
        env,
        duration_s: spec.duration_s,
        isolation: None,
        health_check: spec.health_check.clone(),
        priority: None,
    }
}

#[async_trait]
impl Scheduler for JobsScheduler {
    async fn registered(
        &mut self,
        _ctx: &mut Context,
        framework_id: FrameworkId,
        reregistered: bool,
    ) {
        tracing::info!(%framework_id, reregistered, "jobs service registered");
        self.shared
            .writer
            .send(vec![Write::FrameworkId(Some(framework_id))], false);
        self.shared.registered(framework_id);
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let now = now_ms();
        self.shared.offers_seen(now);
        let Some((applied, planned, launched)) = self.plan(&offers, now) else {
            return Decisions::launch_or_decline(&offers, |_| Vec::new());
        };
        // Stored before it is sent: a restarted service must know every task it may have
        // launched.
        if let Err(e) = applied.stored().await {
            tracing::error!(error = %e, "cannot record this round's launches; none is sent");
            let not = Input::NotLaunched {
                tasks: launched.into_iter().collect(),
                why: "could not be recorded".into(),
            };
            // Each attempt ends as never launched; its index runs again under the next id.
            let _ = self.shared.apply(not, now_ms());
            return Decisions::launch_or_decline(&offers, |_| Vec::new());
        }
        let mut launches: Vec<Vec<TaskSpec>> = vec![Vec::new(); offers.len()];
        for (task, job, o) in planned {
            if launched.contains(&task.task_id) {
                self.places.launched(task.task_id.clone(), job, &offers[o]);
                launches[o].push(task);
            }
        }
        let mut launches = launches.into_iter();
        Decisions::launch_or_decline(&offers, |_| launches.next().unwrap_or_default())
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        self.places.status(status);
        let input = Input::Status {
            task: status.task_id.clone(),
            state: status.state,
            exit_code: status.exit_code,
            message: status.message.clone(),
            healthy: status.healthy,
        };
        // A status is never refused; its writes (an end) may wait, so nothing is awaited.
        if let Ok(applied) = self.shared.apply(input, now_ms()) {
            for id in applied.kills {
                ctx.kill(id);
            }
        }
    }

    fn requeue(&mut self, task: TaskSpec) {
        let input = Input::NotLaunched {
            tasks: vec![task.task_id.clone()],
            why: "the coordinator did not launch it".into(),
        };
        // Stored in order with everything else; nothing waits on it here.
        let _ = self.shared.apply(input, now_ms());
        self.places.forget(&task.task_id);
    }

    fn pending_tasks(&self) -> usize {
        self.shared.lock_book().pending(now_ms())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn offer(resources: &str) -> Offer {
        Offer {
            offer_id: OfferId::new(),
            framework_id: FrameworkId::new(),
            agent_id: AgentId::new(),
            hostname: "h".into(),
            resources: resources.parse().unwrap(),
            agent_total: resources.parse().unwrap(),
            attributes: Default::default(),
            created_at: protocol::now(),
            expires_at: protocol::now(),
            reservation: None,
        }
    }

    #[test]
    fn room_for_bounds_the_tasks_offers_can_hold() {
        let least: Resources = "cpus=1,mem=256".parse().unwrap();
        // 4 by cpus, 2 by mem; then 3 by cpus; then none.
        let offers = [
            offer("cpus=4,mem=512"),
            offer("cpus=3.5,mem=4096"),
            offer("cpus=0.5,mem=4096"),
        ];
        assert_eq!(room_for(&offers, &least), 2 + 3);
        assert_eq!(room_for(&[], &least), 0);
        assert_eq!(
            room_for(&offers[..1], &Resources::new()),
            MAX_PER_ROUND,
            "tasks that ask nothing are bounded by the round's cap"
        );
        let many: Vec<Offer> = (0..100).map(|_| offer("cpus=1000,mem=1000000")).collect();
        assert_eq!(room_for(&many, &least), MAX_PER_ROUND);
    }
}
