//! [`JobsScheduler`]: the SDK [`Scheduler`] that launches the book's tasks on offers, with
//! each job's placement policy and constraints, and records every attempt before its launch
//! is sent.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework_sdk::constraints::{self, Constraint, TaskPlaces};
use framework_sdk::placement::{self, Assignment, JobId, PendingTask, Placement};
use framework_sdk::prelude::*;

use crate::book::{task_id, AttemptRecord, Candidate, Estimator};
use crate::clock::now_ms;
use crate::spec::{JobSpec, PlacementPolicy};
use crate::state::Shared;

/// The most tasks placed in one answer to offers; the rest wait for the next offers, so one
/// huge array never makes a single callback slow.
pub const MAX_PER_ROUND: usize = 5_000;

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

    fn store_or_log(&self, records: &[AttemptRecord]) -> bool {
        match self.shared.put_attempts(records) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(error = %e, "cannot record attempts");
                false
            }
        }
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
        if let Err(e) = self.shared.store.set_framework_id(framework_id) {
            tracing::error!(error = %e, "cannot record the framework id");
        }
        self.shared.registered(framework_id);
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let now = now_ms();
        self.shared.offers_seen(now);
        let mut book = self.shared.lock_book();
        // Ask for no more candidates than the offers can hold: offers often come a few at a
        // time, and a round's cost grows with its candidates.
        let limit = book
            .least_demand(now)
            .map_or(0, |least| room_for(&offers, &least));
        let cands = book.candidates(now, limit);
        if cands.is_empty() {
            drop(book);
            return Decisions::launch_or_decline(&offers, |_| Vec::new());
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
        let mut room = offers.clone();
        let mut launches: Vec<Vec<TaskSpec>> = vec![Vec::new(); offers.len()];
        let mut records = Vec::new();
        let mut placed: Vec<(TaskId, JobId, usize)> = Vec::new();
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
                let Some(record) = book.launched(c, offer.agent_id, now) else {
                    continue;
                };
                offer.resources = left;
                launches[a.offer].push(task_spec(spec, c, offer));
                placed.push((task_id(&c.job, c.index, c.attempt), *job, a.offer));
                records.push(record);
            }
        }
        if !self.store_or_log(&records) {
            // Not recorded, so not launched: each attempt ends as never launched, and its
            // index runs again later under the next attempt's id.
            for r in &records {
                let id = task_id(&r.job, r.index, r.attempt);
                book.not_launched(&id, "could not be recorded", now);
            }
            drop(book);
            return Decisions::launch_or_decline(&offers, |_| Vec::new());
        }
        let touched: std::collections::BTreeSet<&str> =
            records.iter().map(|r| r.job.as_str()).collect();
        for job in touched {
            self.shared.publish(&book, job);
        }
        drop(book);
        for (id, job, o) in placed {
            self.places.launched(id, job, &offers[o]);
        }
        let mut launches = launches.into_iter();
        Decisions::launch_or_decline(&offers, |_| launches.next().unwrap_or_default())
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        self.places.status(status);
        let now = now_ms();
        let (record, known, retire) = {
            let mut book = self.shared.lock_book();
            let healthy = status
                .healthy
                .is_some_and(|h| book.health(&status.task_id, h));
            let record = book.update(
                &status.task_id,
                status.state,
                status.exit_code,
                status.message.clone(),
                now,
            );
            if let Some(r) = &record {
                self.shared.publish(&book, &r.job);
            }
            // A replica that came up, went or turned healthy may let a rolling update move on.
            let retire = if record.is_some() || healthy {
                book.roll_task(&status.task_id)
            } else {
                Vec::new()
            };
            (record, book.is_current(&status.task_id), retire)
        };
        for id in retire {
            ctx.kill(id);
        }
        if status.healthy == Some(false) && self.shared.lock_book().unhealthy(&status.task_id) {
            // An unhealthy replica is replaced: killed here, started again when its end arrives.
            tracing::warn!(task_id = %status.task_id, "replica unhealthy; replacing it");
            ctx.kill(status.task_id.clone());
        }
        if let Some(record) = record {
            // Only launches and ends must survive a restart (reconciliation brings back the
            // states in between), so a `running` update costs no write.
            if record.state.is_terminal() {
                self.shared.record_end(record);
            }
        } else if !known && !status.state.is_terminal() {
            // A task no job is waiting on (its job was deleted, or a newer attempt of its
            // index runs): it must not run on.
            tracing::warn!(task_id = %status.task_id, "killing a task no job is waiting on");
            ctx.kill(status.task_id.clone());
        }
    }

    fn requeue(&mut self, task: TaskSpec) {
        let now = now_ms();
        let record = self.shared.lock_book().not_launched(
            &task.task_id,
            "the coordinator did not launch it",
            now,
        );
        self.places.forget(&task.task_id);
        if let Some(r) = record {
            self.store_or_log(&[r]);
        }
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
