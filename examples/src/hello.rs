//! The smallest framework: launch N copies of a shell command, print each state change, and
//! stop once every task has ended. Success means every task finished (exit code 0).
//!
//! It is not partition-aware: a task whose agent the coordinator cannot reach is `lost` (its
//! agent kills it by then), and `hello` counts it as ended, not as finished.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use framework_sdk::prelude::*;

use crate::common::CommonArgs;

/// Flags of `hello`.
#[derive(Debug, Clone, clap::Parser)]
#[command(about = "Launch N shell commands on a Parley cluster and wait for them")]
pub struct Args {
    /// Where and as whom to run.
    #[command(flatten)]
    pub common: CommonArgs,
    /// How many tasks to launch.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub tasks: u32,
    /// The shell command each task runs.
    #[arg(long, default_value = "echo hi")]
    pub command: String,
    /// What each task needs.
    #[arg(long, default_value = "cpus=0.1,mem=32")]
    pub resources: Resources,
    /// For simulated agents: each task "runs" this many seconds.
    #[arg(long)]
    pub duration_s: Option<f64>,
}

/// How the run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The framework's id.
    pub framework_id: Option<FrameworkId>,
    /// How many tasks were asked for.
    pub total: usize,
    /// The final state of every task.
    pub states: BTreeMap<TaskId, TaskState>,
}

impl Outcome {
    /// True when every task finished successfully.
    pub fn all_finished(&self) -> bool {
        self.states.len() == self.total && self.states.values().all(|s| *s == TaskState::Finished)
    }
}

/// Runs `hello` until every task has ended or `shutdown` resolves.
pub async fn run(args: Args, shutdown: impl Future<Output = ()>) -> anyhow::Result<Outcome> {
    let hello = Hello {
        task: Task::shell(&args.command)
            .name("hello")
            .resources(args.resources)
            .duration_s(args.duration_s)
            .build()?,
        queue: (0..args.tasks)
            .map(|i| TaskId::new(format!("hello-{i}")))
            .collect::<Result<_, _>>()?,
        states: BTreeMap::new(),
        ended: 0,
        framework_id: None,
    };
    let mut config = args.common.driver_config("hello")?;
    // Tasks that ask for GPUs need offers from GPU agents, which (with GPU gating on) go only to
    // frameworks that declare the capability.
    config.gpu_resources = framework_sdk::protocol::capability::has_gpus(hello.task.resources());
    let hello = Driver::new(config, hello)?.run_until(shutdown).await?;
    Ok(Outcome {
        framework_id: hello.framework_id,
        total: args.tasks as usize,
        states: hello.states,
    })
}

struct Hello {
    /// What every task runs and needs.
    task: Task,
    /// Tasks not launched yet.
    queue: VecDeque<TaskId>,
    /// The latest state of each launched task.
    states: BTreeMap<TaskId, TaskState>,
    /// How many of them have ended.
    ended: usize,
    framework_id: Option<FrameworkId>,
}

#[async_trait]
impl Scheduler for Hello {
    async fn registered(&mut self, _ctx: &mut Context, id: FrameworkId, reregistered: bool) {
        self.framework_id = Some(id);
        let how = if reregistered {
            "re-registered"
        } else {
            "registered"
        };
        println!("{how} as framework {id}");
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        Decisions::pack(&offers, &self.task, || {
            let id = self.queue.pop_front()?;
            self.states.insert(id.clone(), TaskState::Staging);
            Some(id)
        })
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        let Some(state) = self.states.get_mut(&status.task_id) else {
            return;
        };
        if state.is_terminal() {
            return; // A repeated update of a task that has already ended.
        }
        *state = status.state;
        match &status.message {
            Some(m) => println!("{}: {} ({m})", status.task_id, status.state),
            None => println!("{}: {}", status.task_id, status.state),
        }
        if status.state.is_terminal() {
            self.ended += 1;
            if self.ended == self.states.len() && self.queue.is_empty() {
                ctx.stop();
            }
        }
    }

    fn requeue(&mut self, task: TaskSpec) {
        self.states.remove(&task.task_id);
        self.queue.push_back(task.task_id);
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
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

    fn hello(n: usize) -> Hello {
        Hello {
            task: Task::shell("echo hi")
                .resources("cpus=1,mem=100")
                .build()
                .unwrap(),
            queue: (0..n)
                .map(|i| TaskId::new(format!("hello-{i}")).unwrap())
                .collect(),
            states: BTreeMap::new(),
            ended: 0,
            framework_id: None,
        }
    }

    #[tokio::test]
    async fn packs_offers_and_stops_when_all_ended() {
        let mut h = hello(3);
        let mut ctx = Context::new(None);
        let d = h
            .offers(
                &mut ctx,
                vec![offer("cpus=2,mem=1000"), offer("cpus=0.5,mem=1000")],
            )
            .await;
        let (launches, declines) = launched(&d);
        assert_eq!((launches.len(), launches[0].len(), declines), (1, 2, 1));
        assert_eq!(h.pending_tasks(), 1);
        let d = h.offers(&mut ctx, vec![offer("cpus=4,mem=1000")]).await;
        let (more, _) = launched(&d);
        assert_eq!(more[0].len(), 1, "only the one left");
        let all: Vec<TaskSpec> = launches[0].iter().chain(&more[0]).cloned().collect();
        h.status_update(&mut ctx, &status(&all[0], TaskState::Finished))
            .await;
        // A repeated terminal update does not count twice, nor undo the end.
        h.status_update(&mut ctx, &status(&all[0], TaskState::Running))
            .await;
        h.status_update(&mut ctx, &status(&all[1], TaskState::Finished))
            .await;
        assert!(!ctx.is_stopping());
        h.status_update(&mut ctx, &status(&all[2], TaskState::Failed))
            .await;
        assert!(ctx.is_stopping());
        let outcome = Outcome {
            framework_id: None,
            total: 3,
            states: h.states,
        };
        assert!(!outcome.all_finished());
    }

    #[tokio::test]
    async fn failed_launches_are_retried() {
        let mut h = hello(1);
        let mut ctx = Context::new(None);
        let d = h.offers(&mut ctx, vec![offer("cpus=2,mem=1000")]).await;
        let (launches, _) = launched(&d);
        let err = SdkError::Protocol("gone".into());
        h.launch_failed(&mut ctx, launches[0].clone(), &err).await;
        assert_eq!(h.pending_tasks(), 1);
        assert!(h.states.is_empty());
    }
}
