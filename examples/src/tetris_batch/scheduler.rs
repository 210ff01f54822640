//! The batch scheduler: a queue of tasks, placed on each round of offers by a policy; it tracks
//! what each job holds (for fairness among jobs) and when each job ends.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use framework_sdk::placement::{JobId, OfferSlot, PendingTask, Placement, PlacementInput};
use framework_sdk::prelude::*;

use super::{JobSpec, Outcome};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Queued,
    Launched,
    Finished,
    GaveUp,
}

struct Task {
    job: usize,
    index: usize,
    demand: Resources,
    duration_s: f64,
    attempt: u32,
    phase: Phase,
}

impl Task {
    fn pending(&self) -> PendingTask {
        PendingTask {
            job: self.job as JobId,
            demand: self.demand.clone(),
            duration_s: self.duration_s,
        }
    }
}

struct Job {
    name: String,
    left: usize,
    failed: bool,
    ended_at: Option<Instant>,
}

pub(super) struct Batch {
    policy: Box<dyn Placement>,
    tasks: Vec<Task>,
    jobs: Vec<Job>,
    /// The current attempt's id of each launched task.
    by_id: HashMap<TaskId, usize>,
    /// What each job's running tasks hold.
    usage: BTreeMap<JobId, Resources>,
    /// Every agent seen in an offer, with its total: the framework's view of the cluster.
    agents: BTreeMap<AgentId, Resources>,
    /// The sum of `agents`' totals.
    cluster: Resources,
    /// The queued tasks in task order, and each one as placement sees it, kept up to date as
    /// tasks launch and come back, so an offers event does not rebuild them from the whole list.
    queue: Vec<usize>,
    pending: Vec<PendingTask>,
    simulated: bool,
    max_retries: u32,
    started: Option<Instant>,
    framework_id: Option<FrameworkId>,
}

impl Batch {
    pub(super) fn new(
        specs: &[JobSpec],
        policy: Box<dyn Placement>,
        simulated: bool,
        max_retries: u32,
    ) -> anyhow::Result<Self> {
        let mut tasks = Vec::new();
        let mut jobs = Vec::new();
        for (j, spec) in specs.iter().enumerate() {
            let mut index = 0;
            for group in &spec.tasks {
                for _ in 0..group.count {
                    tasks.push(Task {
                        job: j,
                        index,
                        demand: group.resources.clone(),
                        duration_s: group.duration_s,
                        attempt: 0,
                        phase: Phase::Queued,
                    });
                    index += 1;
                }
            }
            jobs.push(Job {
                name: spec.name.clone(),
                left: index,
                failed: false,
                ended_at: None,
            });
        }
        let queue: Vec<usize> = (0..tasks.len()).collect();
        let pending = tasks.iter().map(Task::pending).collect();
        Ok(Self {
            policy,
            tasks,
            jobs,
            by_id: HashMap::new(),
            usage: BTreeMap::new(),
            agents: BTreeMap::new(),
            cluster: Resources::new(),
            queue,
            pending,
            simulated,
            max_retries,
            started: None,
            framework_id: None,
        })
    }

    pub(super) fn task_count(&self) -> usize {
        self.tasks.len()
    }

    pub(super) fn policy_name(&self) -> &str {
        self.policy.name()
    }

    fn task_spec(&self, t: usize, agent_id: AgentId) -> anyhow::Result<TaskSpec> {
        let task = &self.tasks[t];
        Ok(TaskSpec {
            task_id: TaskId::new(format!("j{}-t{}-a{}", task.job, task.index, task.attempt))?,
            name: format!("{}/{}", self.jobs[task.job].name, task.index),
            agent_id,
            resources: task.demand.clone(),
            command: CommandSpec::Shell(format!("sleep {}", task.duration_s)),
            env: BTreeMap::new(),
            duration_s: self.simulated.then_some(task.duration_s),
            isolation: None,
            health_check: None,
            priority: None,
        })
    }

    /// Marks task `t` launched on `agent_id` and returns its wire spec; `None` (logged) when
    /// it cannot be named.
    fn launch(&mut self, t: usize, agent_id: AgentId) -> Option<TaskSpec> {
        let spec = match self.task_spec(t, agent_id) {
            Ok(spec) => spec,
            Err(e) => {
                tracing::error!(error = %e, "cannot name a task; skipping it");
                return None;
            }
        };
        self.tasks[t].phase = Phase::Launched;
        self.by_id.insert(spec.task_id.clone(), t);
        let job = self.tasks[t].job as JobId;
        self.usage
            .entry(job)
            .or_default()
            .add_assign(&spec.resources);
        Some(spec)
    }

    /// Puts task `t` back in the queue, in task order.
    fn queue_again(&mut self, t: usize) {
        self.tasks[t].phase = Phase::Queued;
        let at = self.queue.partition_point(|&q| q < t);
        if self.queue.get(at) != Some(&t) {
            self.queue.insert(at, t);
            self.pending.insert(at, self.tasks[t].pending());
        }
    }

    fn elapsed(&self, at: Instant) -> f64 {
        self.started
            .map_or(0.0, |s| at.saturating_duration_since(s).as_secs_f64())
    }

    fn all_ended(&self) -> bool {
        self.jobs.iter().all(|j| j.ended_at.is_some())
    }

    /// A task ended for good (finished, or out of retries).
    fn task_done(&mut self, t: usize, phase: Phase) {
        self.tasks[t].phase = phase;
        let job = &mut self.jobs[self.tasks[t].job];
        job.failed |= phase == Phase::GaveUp;
        job.left -= 1;
        if job.left == 0 {
            let now = Instant::now();
            job.ended_at = Some(now);
            let how = if job.failed { "failed" } else { "done" };
            let (name, elapsed) = (job.name.clone(), self.elapsed(now));
            let ended = self.jobs.iter().filter(|j| j.ended_at.is_some()).count();
            println!(
                "{name} {how} at {elapsed:.2} s [{ended}/{} jobs]",
                self.jobs.len()
            );
        }
    }

    pub(super) fn outcome(&self) -> Outcome {
        let completed: Vec<&Job> = self
            .jobs
            .iter()
            .filter(|j| j.ended_at.is_some() && !j.failed)
            .collect();
        let ends: Vec<f64> = self
            .jobs
            .iter()
            .filter_map(|j| j.ended_at)
            .map(|at| self.elapsed(at))
            .collect();
        let jct: Vec<f64> = completed
            .iter()
            .filter_map(|j| j.ended_at)
            .map(|at| self.elapsed(at))
            .collect();
        Outcome {
            policy: self.policy.name().to_owned(),
            jobs: self.jobs.len(),
            tasks_finished: self
                .tasks
                .iter()
                .filter(|t| t.phase == Phase::Finished)
                .count(),
            jobs_failed: self.jobs.iter().filter(|j| j.failed).count(),
            jobs_completed: completed.len(),
            makespan_s: ends.iter().copied().fold(0.0, f64::max),
            avg_job_completion_s: if jct.is_empty() {
                0.0
            } else {
                jct.iter().sum::<f64>() / jct.len() as f64
            },
        }
    }
}

#[async_trait]
impl Scheduler for Batch {
    async fn registered(&mut self, _ctx: &mut Context, id: FrameworkId, reregistered: bool) {
        self.framework_id = Some(id);
        self.started.get_or_insert_with(Instant::now);
        if !reregistered {
            println!("registered as framework {id}");
        }
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let mut grew = false;
        for offer in &offers {
            if self.agents.get(&offer.agent_id) != Some(&offer.agent_total) {
                self.agents
                    .insert(offer.agent_id, offer.agent_total.clone());
                grew = true;
            }
        }
        if grew {
            self.cluster = Resources::new();
            for total in self.agents.values() {
                self.cluster.add_assign(total);
            }
        }
        let slots: Vec<OfferSlot> = offers.iter().map(OfferSlot::from).collect();
        let input = PlacementInput {
            offers: &slots,
            tasks: &self.pending,
            job_usage: &self.usage,
            cluster_total: &self.cluster,
        };
        let assignments = self.policy.place(&input);
        let decisions = Decisions::from_assignments(&offers, &assignments, |task, offer| {
            self.launch(self.queue[task], offer.agent_id)
        });
        let tasks = &self.tasks;
        let mut keep = self.queue.iter().map(|&t| tasks[t].phase == Phase::Queued);
        self.pending.retain(|_| keep.next().unwrap_or(true));
        self.queue.retain(|&t| tasks[t].phase == Phase::Queued);
        decisions
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        let Some(&t) = self.by_id.get(&status.task_id) else {
            return;
        };
        if !status.state.is_terminal() || self.tasks[t].phase != Phase::Launched {
            return;
        }
        self.by_id.remove(&status.task_id);
        let job = self.tasks[t].job as JobId;
        if let Some(held) = self.usage.get_mut(&job) {
            *held = held.saturating_sub(&self.tasks[t].demand);
        }
        if status.state == TaskState::Finished {
            self.task_done(t, Phase::Finished);
        } else if self.tasks[t].attempt < self.max_retries {
            tracing::warn!(task = %status.task_id, state = %status.state, message = ?status.message, "task ended early; retrying");
            self.tasks[t].attempt += 1;
            self.queue_again(t);
        } else {
            tracing::warn!(task = %status.task_id, state = %status.state, "task out of retries");
            self.task_done(t, Phase::GaveUp);
        }
        if self.all_ended() {
            ctx.stop();
        }
    }

    fn requeue(&mut self, spec: TaskSpec) {
        if let Some(t) = self.by_id.remove(&spec.task_id) {
            let job = self.tasks[t].job as JobId;
            if let Some(held) = self.usage.get_mut(&job) {
                *held = held.saturating_sub(&spec.resources);
            }
            // A new attempt id: the coordinator may have recorded the old one.
            self.tasks[t].attempt += 1;
            self.queue_again(t);
        }
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
    }

    fn demand_hint(&self) -> Option<Resources> {
        // The smallest queued demand, per resource: any agent that cannot hold it is useless.
        let mut queued = self.pending.iter().map(|t| &t.demand);
        let first = queued.next()?.clone();
        Some(queued.fold(first, |min, d| {
            let mut out = Resources::new();
            for (name, v) in min.iter() {
                out.set_millis(name.clone(), v.min(d.millis(name.as_str())));
            }
            out
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use framework_sdk::placement::Tetris;

    use super::*;
    use crate::test_support::{offer, status};
    use crate::tetris_batch::TaskGroup;

    #[tokio::test]
    async fn places_retries_and_finishes() {
        let jobs = vec![JobSpec {
            name: "a".into(),
            tasks: vec![TaskGroup {
                resources: "cpus=2,mem=1024".parse().unwrap(),
                duration_s: 1.0,
                count: 3,
            }],
        }];
        let mut batch = Batch::new(&jobs, Box::new(Tetris::default()), true, 1).unwrap();
        let mut ctx = Context::new(None);
        let d = batch.offers(&mut ctx, vec![offer("cpus=4,mem=8192")]).await;
        let framework_sdk::Answer::Launch { tasks, .. } = &d.answers()[0] else {
            panic!()
        };
        assert_eq!(tasks.len(), 2, "two of three fit in 4 cpus");
        assert_eq!(tasks[0].duration_s, Some(1.0));
        assert_eq!(batch.pending_tasks(), 1);
        assert_eq!(batch.demand_hint().unwrap().to_string(), "cpus=2,mem=1024");
        // One fails and is queued again under a new id; the other finishes.
        batch
            .status_update(&mut ctx, &status(&tasks[0], TaskState::Failed))
            .await;
        batch
            .status_update(&mut ctx, &status(&tasks[1], TaskState::Finished))
            .await;
        batch
            .status_update(&mut ctx, &status(&tasks[1], TaskState::Finished))
            .await;
        assert_eq!(batch.pending_tasks(), 2);
        let d = batch.offers(&mut ctx, vec![offer("cpus=8,mem=8192")]).await;
        let framework_sdk::Answer::Launch { tasks, .. } = &d.answers()[0] else {
            panic!()
        };
        assert!(tasks.iter().any(|t| t.task_id.as_str() == "j0-t0-a1"));
        for t in tasks {
            batch
                .status_update(&mut ctx, &status(t, TaskState::Finished))
                .await;
        }
        let outcome = batch.outcome();
        assert_eq!((outcome.tasks_finished, outcome.jobs_completed), (3, 1));
        assert!(ctx.is_stopping());
    }
}
