//! `service`: keeps K replicas of a long-running command alive. A replica whose task ends for any
//! reason (failed, killed, lost, even finished) is replaced by a new task, until shutdown. With
//! `--health-check SHELL`, each task carries a command health check (run by its agent in the
//! task's sandbox); a task reported unhealthy is killed and replaced at once, keeping the replica
//! count (its late updates are ignored, as an old generation's).
//!
//! It is partition-aware: while a replica's agent cannot reach the coordinator the replica is
//! `unreachable` (it may well still serve) and is left alone; it comes back `running`, or is
//! replaced once it is `gone` (after `--partition-timeout-s`, when its agent has killed it).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use framework_sdk::prelude::*;

use crate::common::CommonArgs;

/// Flags of `service`.
#[derive(Debug, Clone, clap::Parser)]
#[command(about = "Keep K replicas of a command running on a Parley cluster")]
pub struct Args {
    /// Where and as whom to run.
    #[command(flatten)]
    pub common: CommonArgs,
    /// How many replicas to keep running.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub replicas: u32,
    /// The command each replica runs.
    #[arg(long, default_value = "sleep 3600")]
    pub command: String,
    /// What each replica needs.
    #[arg(long, default_value = "cpus=0.1,mem=64")]
    pub resources: Resources,
    /// The service's name; task ids are `<name>-<replica>-<generation>`.
    #[arg(long, default_value = "svc")]
    pub name: String,
    /// The replicas' health check.
    #[command(flatten)]
    pub health: HealthArgs,
    /// How long a replica whose agent cannot reach the coordinator stays `unreachable` (left
    /// alone) before it is `gone` and replaced.
    #[arg(long, default_value_t = 300.0)]
    pub partition_timeout_s: f64,
}

/// The health check flags of `service`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HealthArgs {
    /// A shell line each replica's agent runs in the task's sandbox as its health check (exit 0:
    /// healthy); a replica reported unhealthy is replaced. None by default.
    #[arg(long)]
    pub health_check: Option<String>,
    /// Seconds between health checks (default 10).
    #[arg(long)]
    pub health_interval_s: Option<f64>,
    /// Failing checks in a row that make a replica unhealthy (default 3).
    #[arg(long)]
    pub health_failures: Option<u32>,
    /// Seconds after a replica starts during which failing checks are ignored (default 0).
    #[arg(long)]
    pub health_grace_s: Option<f64>,
}

impl HealthArgs {
    /// The health check these flags describe, if any.
    pub fn check(&self) -> Option<HealthCheck> {
        let line = self.health_check.as_ref()?;
        let mut check = HealthCheck::command(CommandSpec::Shell(line.clone()));
        check.interval_s = self.health_interval_s;
        check.consecutive_failures = self.health_failures;
        check.grace_period_s = self.health_grace_s;
        Some(check)
    }
}

/// How the service ran.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The framework's id.
    pub framework_id: Option<FrameworkId>,
    /// Replacements started after a replica ended.
    pub replacements: usize,
}

/// Live counters a caller can watch while the service runs.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Replicas whose current task is running.
    pub running: Arc<AtomicUsize>,
    /// Replacements started so far.
    pub replacements: Arc<AtomicUsize>,
    /// Replicas whose current task was last reported healthy.
    pub healthy: Arc<AtomicUsize>,
    /// Tasks killed and replaced because they were reported unhealthy.
    pub unhealthy_replaced: Arc<AtomicUsize>,
}

/// Runs the service until `shutdown` resolves.
pub async fn run(args: Args, shutdown: impl Future<Output = ()>) -> anyhow::Result<Outcome> {
    run_with_progress(args, Progress::default(), shutdown).await
}

/// [`run`], updating `progress` as replicas start and end.
pub async fn run_with_progress(
    args: Args,
    progress: Progress,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<Outcome> {
    let mut task = Task::shell(&args.command).resources(args.resources);
    if let Some(check) = args.health.check() {
        task = task.health_check(check);
    }
    let task = task.build()?;
    // The name becomes part of task ids, so check it makes valid ones.
    TaskId::new(format!("{}-0-0", args.name))
        .map_err(|e| anyhow::anyhow!("--name {:?} cannot name tasks: {e}", args.name))?;
    let mut config = args
        .common
        .driver_config(&format!("service-{}", args.name))?;
    config.partition_aware = Some(
        std::time::Duration::try_from_secs_f64(args.partition_timeout_s)
            .map_err(|e| anyhow::anyhow!("--partition-timeout-s: {e}"))?,
    );
    let service = Service {
        name: args.name,
        task,
        replicas: (0..args.replicas)
            .map(|_| Replica {
                generation: 0,
                task: None,
                healthy: None,
            })
            .collect(),
        progress,
        framework_id: None,
    };
    let service = Driver::new(config, service)?.run_until(shutdown).await?;
    if args.common.no_unregister {
        if let Some(id) = service.framework_id {
            println!("replicas left running; resume with --framework-id {id}");
        }
    }
    Ok(Outcome {
        framework_id: service.framework_id,
        replacements: service.progress.replacements.load(Ordering::Relaxed),
    })
}

struct Replica {
    generation: u32,
    /// The current task and its latest state; `None` while a launch is wanted.
    task: Option<(TaskId, TaskState)>,
    /// The current task's latest reported health.
    healthy: Option<bool>,
}

struct Service {
    name: String,
    /// What every replica runs and needs.
    task: Task,
    replicas: Vec<Replica>,
    progress: Progress,
    framework_id: Option<FrameworkId>,
}

impl Service {
    fn publish(&self) {
        let running = self
            .replicas
            .iter()
            .filter(|r| matches!(r.task, Some((_, TaskState::Running))))
            .count();
        self.progress.running.store(running, Ordering::Relaxed);
        let healthy = self
            .replicas
            .iter()
            .filter(|r| r.task.is_some() && r.healthy == Some(true))
            .count();
        self.progress.healthy.store(healthy, Ordering::Relaxed);
    }

    fn wanted(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.replicas.len()).filter(|&i| self.replicas[i].task.is_none())
    }

    /// Marks replica `i` as wanting a new task.
    fn replace(&mut self, i: usize) {
        self.replicas[i].task = None;
        self.replicas[i].healthy = None;
        self.replicas[i].generation += 1;
    }
}

#[async_trait]
impl Scheduler for Service {
    async fn registered(&mut self, _ctx: &mut Context, id: FrameworkId, reregistered: bool) {
        // After a re-registration the driver reconciles, so updates confirm or end our tasks.
        self.framework_id = Some(id);
        println!(
            "{} as framework {id}",
            if reregistered {
                "re-registered"
            } else {
                "registered"
            }
        );
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let mut decisions = Decisions::new();
        let mut wanted: Vec<usize> = self.wanted().collect();
        wanted.reverse();
        for offer in &offers {
            // One replica per offer (so per agent) spreads replicas over machines.
            let Some(&i) = wanted.last().filter(|_| self.task.fits(offer)) else {
                decisions.decline(offer.offer_id, None);
                continue;
            };
            wanted.pop();
            let task_id =
                match TaskId::new(format!("{}-{i}-{}", self.name, self.replicas[i].generation)) {
                    Ok(id) => id,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot name a replica task");
                        decisions.decline(offer.offer_id, None);
                        continue;
                    }
                };
            self.replicas[i].task = Some((task_id.clone(), TaskState::Staging));
            let mut spec = self.task.on(offer, task_id);
            spec.name = format!("{} replica {i}", self.name);
            spec.env.insert("REPLICA".to_owned(), i.to_string());
            decisions.launch(offer.offer_id, vec![spec]);
        }
        decisions
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        let Some(i) = self
            .replicas
            .iter()
            .position(|r| r.task.as_ref().is_some_and(|(id, _)| *id == status.task_id))
        else {
            return; // An old generation, already replaced.
        };
        println!("{}: {}", status.task_id, status.state);
        if !status.state.is_terminal() && status.healthy == Some(false) {
            println!("replica {i} is unhealthy; killing it and starting a replacement");
            ctx.kill(status.task_id.clone());
            self.replace(i);
            self.progress.replacements.fetch_add(1, Ordering::Relaxed);
            self.progress
                .unhealthy_replaced
                .fetch_add(1, Ordering::Relaxed);
        } else if status.state.is_terminal() {
            println!(
                "replica {i} ended ({}); starting a replacement",
                status.state
            );
            self.replace(i);
            self.progress.replacements.fetch_add(1, Ordering::Relaxed);
        } else if let Some((_, state)) = &mut self.replicas[i].task {
            *state = status.state;
            if status.healthy.is_some() {
                self.replicas[i].healthy = status.healthy;
            }
        }
        self.publish();
    }

    fn requeue(&mut self, spec: TaskSpec) {
        if let Some(i) = self
            .replicas
            .iter()
            .position(|r| r.task.as_ref().is_some_and(|(id, _)| *id == spec.task_id))
        {
            self.replace(i);
        }
    }

    fn pending_tasks(&self) -> usize {
        self.wanted().count()
    }

    fn demand_hint(&self) -> Option<Resources> {
        Some(self.task.resources().clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_support::{launched, offer, status};

    #[tokio::test]
    async fn one_replica_per_offer_and_replacements_for_ended_ones() {
        let mut s = Service {
            name: "web".into(),
            task: Task::shell("sleep 600")
                .resources("cpus=1,mem=100")
                .build()
                .unwrap(),
            replicas: (0..2)
                .map(|_| Replica {
                    generation: 0,
                    task: None,
                    healthy: None,
                })
                .collect(),
            progress: Progress::default(),
            framework_id: None,
        };
        let mut ctx = Context::new(None);
        let offers = vec![
            offer("cpus=4,mem=1000"),
            offer("cpus=4,mem=1000"),
            offer("cpus=4,mem=1000"),
        ];
        let (launches, declines) = launched(&s.offers(&mut ctx, offers).await);
        assert_eq!(
            (launches.len(), declines),
            (2, 1),
            "spread: one replica per offer"
        );
        assert_eq!(s.pending_tasks(), 0);
        for tasks in &launches {
            s.status_update(&mut ctx, &status(&tasks[0], TaskState::Running))
                .await;
        }
        assert_eq!(s.progress.running.load(Ordering::Relaxed), 2);
        s.status_update(&mut ctx, &status(&launches[0][0], TaskState::Killed))
            .await;
        assert_eq!(s.pending_tasks(), 1);
        assert_eq!(s.progress.replacements.load(Ordering::Relaxed), 1);
        // A late update about the replaced task changes nothing.
        s.status_update(&mut ctx, &status(&launches[0][0], TaskState::Lost))
            .await;
        assert_eq!(s.progress.replacements.load(Ordering::Relaxed), 1);
        let (again, _) = launched(&s.offers(&mut ctx, vec![offer("cpus=4,mem=1000")]).await);
        assert_eq!(
            again[0][0].task_id.as_str(),
            "web-0-1",
            "next generation of replica 0"
        );
    }

    #[tokio::test]
    async fn an_unhealthy_replica_is_killed_and_replaced() {
        let check = HealthArgs {
            health_check: Some("test -f ok".into()),
            health_interval_s: Some(1.0),
            ..HealthArgs::default()
        }
        .check()
        .unwrap();
        let mut s = Service {
            name: "web".into(),
            task: Task::shell("sleep 600")
                .resources("cpus=1,mem=100")
                .health_check(check.clone())
                .build()
                .unwrap(),
            replicas: vec![Replica {
                generation: 0,
                task: None,
                healthy: None,
            }],
            progress: Progress::default(),
            framework_id: None,
        };
        let mut ctx = Context::new(None);
        let (launches, _) = launched(&s.offers(&mut ctx, vec![offer("cpus=4,mem=1000")]).await);
        let spec = &launches[0][0];
        assert_eq!(
            spec.health_check.as_ref(),
            Some(&check),
            "the check travels"
        );
        let mut up = status(spec, TaskState::Running);
        up.healthy = Some(true);
        s.status_update(&mut ctx, &up).await;
        assert_eq!(s.progress.healthy.load(Ordering::Relaxed), 1);
        assert_eq!(s.pending_tasks(), 0);
        up.healthy = Some(false);
        s.status_update(&mut ctx, &up).await;
        assert_eq!(s.pending_tasks(), 1, "a replacement is wanted");
        assert_eq!(s.progress.unhealthy_replaced.load(Ordering::Relaxed), 1);
        assert_eq!(s.progress.healthy.load(Ordering::Relaxed), 0);
        // The kill's own update changes nothing more.
        s.status_update(&mut ctx, &status(spec, TaskState::Killed))
            .await;
        assert_eq!(s.progress.replacements.load(Ordering::Relaxed), 1);
    }
}
