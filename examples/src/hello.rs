//! The smallest framework: launch N copies of a shell command, print each state change, and
//! stop once every task has ended. Success means every task finished (exit code 0).

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use framework_sdk::{Context, Decisions, Scheduler, SdkError};
use protocol::{
    CommandSpec, FrameworkId, Offer, Resources, TaskId, TaskSpec, TaskState, TaskStatus,
};

use crate::common::{run_driver, CommonArgs};

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
    let command = CommandSpec::Shell(args.command.clone());
    command
        .validate()
        .map_err(|e| anyhow::anyhow!("--command: {e}"))?;
    if args.resources.is_empty() {
        anyhow::bail!("--resources is empty; give e.g. cpus=0.1,mem=32");
    }
    if let Some(d) = args.duration_s {
        crate::common::seconds("--duration-s", d)?;
    }
    let config = args.common.driver_config("hello")?;
    let hello = Hello {
        queue: (0..args.tasks)
            .map(|i| TaskId::new(format!("hello-{i}")))
            .collect::<Result<_, _>>()?,
        total: args.tasks as usize,
        command,
        resources: args.resources,
        duration_s: args.duration_s,
        states: BTreeMap::new(),
        ended: 0,
        framework_id: None,
    };
    let hello = run_driver(config, hello, shutdown).await?;
    Ok(Outcome {
        framework_id: hello.framework_id,
        total: hello.total,
        states: hello.states,
    })
}

struct Hello {
    queue: VecDeque<TaskId>,
    total: usize,
    command: CommandSpec,
    resources: Resources,
    duration_s: Option<f64>,
    /// Latest state of each launched task.
    states: BTreeMap<TaskId, TaskState>,
    /// How many of them have ended.
    ended: usize,
    framework_id: Option<FrameworkId>,
}

impl Hello {
    fn ended(&self) -> usize {
        self.ended
    }
}

#[async_trait::async_trait]
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
        Decisions::launch_or_decline(&offers, |offer| {
            let mut room = offer.resources.clone();
            let mut tasks = Vec::new();
            while let Some(left) = room.checked_sub(&self.resources) {
                let Some(task_id) = self.queue.pop_front() else {
                    break;
                };
                room = left;
                self.states.insert(task_id.clone(), TaskState::Staging);
                tasks.push(TaskSpec {
                    task_id,
                    name: "hello".into(),
                    agent_id: offer.agent_id,
                    resources: self.resources.clone(),
                    command: self.command.clone(),
                    env: BTreeMap::new(),
                    duration_s: self.duration_s,
                });
            }
            tasks
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
        if state.is_terminal() {
            self.ended += 1;
        }
        match &status.message {
            Some(m) => println!("{}: {} ({m})", status.task_id, status.state),
            None => println!("{}: {}", status.task_id, status.state),
        }
        if self.ended() == self.total {
            ctx.stop();
        }
    }

    async fn launch_failed(&mut self, _ctx: &mut Context, tasks: Vec<TaskSpec>, reason: &SdkError) {
        tracing::warn!(error = %reason, "launch failed; trying again on another offer");
        for task in tasks {
            self.states.remove(&task.task_id);
            self.queue.push_back(task.task_id);
        }
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
    }

    fn demand_hint(&self) -> Option<Resources> {
        Some(self.resources.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_support::{launched, offer, status};

    fn hello(n: usize) -> Hello {
        Hello {
            queue: (0..n)
                .map(|i| TaskId::new(format!("hello-{i}")).unwrap())
                .collect(),
            total: n,
            command: CommandSpec::Shell("echo hi".into()),
            resources: "cpus=1,mem=100".parse().unwrap(),
            duration_s: None,
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
