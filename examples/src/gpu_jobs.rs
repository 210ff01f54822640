//! `gpu-jobs`: runs N tasks that ask for one whole GPU each (`gpus=1`), registered with the
//! `gpu_resources` capability, and prints what device each task was given (`nvidia-smi -L` where
//! it exists, and `CUDA_VISIBLE_DEVICES` always) and what the agent measured (the status's
//! `usage`). With one GPU in the cluster the tasks run one after the other: each waits for the
//! device.
//!
//! It does not wait in silence for GPUs that are not there: while tasks are pending it asks the
//! coordinator's `explain` every `--explain-interval-s`, and when that says no agent offers
//! `gpus` it stops (unregistering) and fails with that message.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use framework_sdk::prelude::*;
use framework_sdk::protocol;
use framework_sdk::CoordinatorClient;

use crate::common::{seconds, CommonArgs};

/// The default command: the device(s) the task can see.
pub const REPORT_COMMAND: &str = "echo \"CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset} \
NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES-unset}\"; \
if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L; fi";

/// Flags of `gpu-jobs`.
#[derive(Debug, Clone, clap::Parser)]
#[command(about = "Run N one-GPU tasks on a Parley cluster; each prints the device it was given")]
pub struct Args {
    /// Where and as whom to run.
    #[command(flatten)]
    pub common: CommonArgs,
    /// How many tasks to launch.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub tasks: u32,
    /// What each task needs (`gpus` must be a whole number).
    #[arg(long, default_value = "cpus=0.1,mem=64,gpus=1")]
    pub resources: Resources,
    /// The shell command each task runs (default: print the visible devices).
    #[arg(long, default_value = REPORT_COMMAND)]
    pub command: String,
    /// Seconds each task keeps its device after the command (so a second task visibly waits).
    #[arg(long, default_value_t = 1.0)]
    pub hold_s: f64,
    /// For simulated agents: each task "runs" this many seconds.
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// How often to ask `explain` whether any agent offers `gpus` at all.
    #[arg(long, default_value_t = 1.0)]
    pub explain_interval_s: f64,
}

/// One task's end, as reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Its final state.
    pub state: TaskState,
    /// Its stdout (what it saw), or why it could not be read.
    pub output: String,
    /// The agent's measurements from the final status (JSON), if any.
    pub usage: Option<String>,
}

/// How the run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The framework's id.
    pub framework_id: Option<FrameworkId>,
    /// How many tasks were asked for.
    pub total: usize,
    /// Every ended task's report.
    pub reports: BTreeMap<TaskId, Report>,
}

impl Outcome {
    /// True when every task finished successfully.
    pub fn all_finished(&self) -> bool {
        self.reports.len() == self.total
            && self
                .reports
                .values()
                .all(|r| r.state == TaskState::Finished)
    }
}

/// Runs `gpu-jobs` until every task has ended, `shutdown` resolves, or `explain` says no agent
/// offers `gpus` (an error carrying the coordinator's sentence).
pub async fn run(args: Args, shutdown: impl Future<Output = ()>) -> anyhow::Result<Outcome> {
    protocol::capability::check_whole_gpus("--resources", &args.resources)
        .map_err(anyhow::Error::msg)?;
    if !protocol::capability::has_gpus(&args.resources) {
        anyhow::bail!("--resources asks for no gpus; give e.g. cpus=0.1,mem=64,gpus=1");
    }
    let hold = seconds("--hold-s", args.hold_s)?;
    let interval = seconds("--explain-interval-s", args.explain_interval_s)?;
    if interval.is_zero() {
        anyhow::bail!("--explain-interval-s must be > 0");
    }
    let command = if hold.is_zero() {
        args.command.clone()
    } else {
        format!("{}; sleep {}", args.command, hold.as_secs_f64())
    };
    let mut config = args.common.driver_config("gpu-jobs")?;
    config.gpu_resources = true;
    let client = CoordinatorClient::connect(
        &config.coordinator,
        config.request_timeout,
        &framework_sdk::Connection {
            ca_file: config.ca_file.clone(),
            token: config.token.clone(),
        },
    )?;
    let id_cell: Arc<Mutex<Option<FrameworkId>>> = Arc::default();
    let jobs = Jobs {
        task: Task::shell(&command)
            .name("gpu-job")
            .resources(args.resources.clone())
            .duration_s(args.duration_s)
            .build()?,
        queue: (0..args.tasks)
            .map(|i| TaskId::new(format!("gpu-{i}")))
            .collect::<Result<_, _>>()?,
        launched: BTreeMap::new(),
        reports: BTreeMap::new(),
        framework_id: None,
        id_cell: id_cell.clone(),
        client: client.clone(),
        started: Instant::now(),
    };
    let verdict: Arc<Mutex<Option<String>>> = Arc::default();
    let watch = no_gpus_verdict(&client, &id_cell, interval);
    let stop = async {
        tokio::select! {
            _ = shutdown => {}
            reason = watch => {
                if let Ok(mut v) = verdict.lock() {
                    *v = Some(reason);
                }
            }
        }
    };
    let jobs = Driver::new(config, jobs)?.run_until(stop).await?;
    if let Some(reason) = verdict.lock().ok().and_then(|mut v| v.take()) {
        anyhow::bail!("{reason}");
    }
    Ok(Outcome {
        framework_id: jobs.framework_id,
        total: args.tasks as usize,
        reports: jobs.reports,
    })
}

/// Resolves, with the coordinator's summary, once `explain` says that no agent offers `gpus`.
async fn no_gpus_verdict(
    client: &CoordinatorClient,
    id: &Mutex<Option<FrameworkId>>,
    interval: Duration,
) -> String {
    let mut tick = tokio::time::interval(interval);
    loop {
        tick.tick().await;
        let Some(id) = id.lock().ok().and_then(|g| *g) else {
            continue;
        };
        match client.explain(id).await {
            Ok(x)
                if x.no_agent_offers
                    .iter()
                    .any(|k| k == protocol::capability::GPUS) =>
            {
                return x.summary;
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "explain failed; asking again"),
        }
    }
}

struct Jobs {
    task: Task,
    queue: VecDeque<TaskId>,
    /// Launched tasks, not ended yet.
    launched: BTreeMap<TaskId, TaskState>,
    reports: BTreeMap<TaskId, Report>,
    framework_id: Option<FrameworkId>,
    /// The framework id, for the `explain` watcher.
    id_cell: Arc<Mutex<Option<FrameworkId>>>,
    client: CoordinatorClient,
    started: Instant,
}

impl Jobs {
    fn at(&self) -> String {
        format!("{:6.2}s", self.started.elapsed().as_secs_f64())
    }
}

#[async_trait]
impl Scheduler for Jobs {
    async fn registered(&mut self, _ctx: &mut Context, id: FrameworkId, _reregistered: bool) {
        self.framework_id = Some(id);
        if let Ok(mut cell) = self.id_cell.lock() {
            *cell = Some(id);
        }
        println!(
            "{} registered as framework {id} with capability gpu_resources",
            self.at()
        );
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let mut fresh = Vec::new();
        let d = Decisions::pack(&offers, &self.task, || {
            let id = self.queue.pop_front()?;
            fresh.push(id.clone());
            Some(id)
        });
        for id in fresh {
            println!("{} {id}: launching (gpus=1)", self.at());
            self.launched.insert(id, TaskState::Staging);
        }
        d
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        let Some(state) = self.launched.get_mut(&status.task_id) else {
            return; // Ended already, or not ours.
        };
        *state = status.state;
        let at = self.at();
        println!("{at} {}: {}", status.task_id, status.state);
        if !status.state.is_terminal() {
            return;
        }
        self.launched.remove(&status.task_id);
        let output = match self.framework_id {
            Some(fw) => match self.client.task_stdout(fw, &status.task_id).await {
                Ok(text) => text.trim().to_owned(),
                Err(e) => format!("(output not available: {e})"),
            },
            None => "(output not available)".into(),
        };
        let usage = status
            .usage
            .as_ref()
            .and_then(|u| serde_json::to_string(u).ok());
        for line in output.lines() {
            println!("{at} {} saw: {line}", status.task_id);
        }
        if let Some(u) = &usage {
            println!("{at} {} usage: {u}", status.task_id);
        }
        self.reports.insert(
            status.task_id.clone(),
            Report {
                state: status.state,
                output,
                usage,
            },
        );
        if self.launched.is_empty() && self.queue.is_empty() {
            ctx.stop();
        }
    }

    fn requeue(&mut self, task: TaskSpec) {
        self.launched.remove(&task.task_id);
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

    fn jobs(n: usize) -> Jobs {
        Jobs {
            task: Task::shell("true")
                .resources("cpus=0.1,gpus=1")
                .build()
                .unwrap(),
            queue: (0..n)
                .map(|i| TaskId::new(format!("gpu-{i}")).unwrap())
                .collect(),
            launched: BTreeMap::new(),
            reports: BTreeMap::new(),
            framework_id: None,
            id_cell: Arc::default(),
            client: CoordinatorClient::new("http://127.0.0.1:9", Duration::from_secs(1)).unwrap(),
            started: Instant::now(),
        }
    }

    /// One device on the offer: one task launches, the other waits for the next offer.
    #[tokio::test]
    async fn a_task_takes_one_whole_device_and_the_next_waits() {
        let mut j = jobs(2);
        let mut ctx = Context::new(None);
        let d = j
            .offers(&mut ctx, vec![offer("cpus=4,mem=100,gpus=1")])
            .await;
        let (launches, _) = launched(&d);
        assert_eq!(launches[0].len(), 1);
        assert_eq!(j.pending_tasks(), 1);
        let d = j.offers(&mut ctx, vec![offer("cpus=3.9,mem=100")]).await;
        let (more, declines) = launched(&d);
        assert!(more.is_empty());
        assert_eq!(declines, 1, "no GPU left: declined");
        j.status_update(&mut ctx, &status(&launches[0][0], TaskState::Finished))
            .await;
        assert!(!ctx.is_stopping(), "one task is still queued");
        assert_eq!(j.reports.len(), 1);
        assert_eq!(j.demand_hint().unwrap(), "cpus=0.1,gpus=1".parse().unwrap());
    }

    #[tokio::test]
    async fn fractional_or_missing_gpus_are_refused_before_registering() {
        let mut args = <Args as clap::Parser>::parse_from(["gpu-jobs"]);
        args.resources = "cpus=1,gpus=0.5".parse().unwrap();
        let err = run(args.clone(), std::future::pending()).await.unwrap_err();
        assert!(err.to_string().contains("--resources.gpus"), "{err}");
        args.resources = "cpus=1".parse().unwrap();
        let err = run(args, std::future::pending()).await.unwrap_err();
        assert!(err.to_string().contains("no gpus"), "{err}");
    }
}
