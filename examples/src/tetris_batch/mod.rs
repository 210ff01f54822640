//! `tetris-batch`: runs a queue of jobs, placing their tasks with Tetris (or FirstFit/BestFit to
//! compare), and reports makespan and average job completion time.

mod scheduler;
pub mod workload;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use framework_sdk::placement::{BestFit, FirstFit, Placement, Tetris};
use framework_sdk::{CoordinatorClient, Driver, DriverConfig};

use crate::common::CommonArgs;
use scheduler::Batch;
pub use workload::{JobSpec, TaskGroup};

/// The placement policies to choose from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    /// Alignment packing with remaining-work priority and the fairness knob.
    Tetris,
    /// Jobs in DRF order, each task on the first offer it fits.
    FirstFit,
    /// Jobs in DRF order, each task where it leaves the least room.
    BestFit,
}

/// Flags of `tetris-batch`.
#[derive(Debug, Clone, clap::Parser)]
#[command(about = "Run a batch of jobs on a Parley cluster with Tetris placement")]
pub struct Args {
    /// Where and as whom to run.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Read jobs from this JSON file instead of generating them.
    #[arg(long)]
    pub jobs_file: Option<PathBuf>,
    /// How many jobs to generate.
    #[arg(long, default_value_t = 8)]
    pub jobs: usize,
    /// The most tasks per generated job.
    #[arg(long, default_value_t = 10)]
    pub max_tasks: usize,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Multiplies generated durations (1 to 10 s).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// The placement policy.
    #[arg(long, value_enum, default_value_t = Policy::Tetris)]
    pub policy: Policy,
    /// Tetris' fairness knob F in [0, 1).
    #[arg(long, default_value_t = 0.25)]
    pub fairness: f64,
    /// Set `duration_s` on tasks, for simulated agents (tasks still run `sleep` on real ones).
    #[arg(long)]
    pub simulated: bool,
    /// How often a failed or lost task is retried before its job counts as failed.
    #[arg(long, default_value_t = 2)]
    pub max_retries: u32,
}

/// How a batch went.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The policy used.
    pub policy: String,
    /// Jobs run.
    pub jobs: usize,
    /// Tasks that finished.
    pub tasks_finished: usize,
    /// Jobs with a task that failed more than `max_retries` times.
    pub jobs_failed: usize,
    /// Jobs that completed (all tasks finished).
    pub jobs_completed: usize,
    /// From registration to the last job's end, in seconds.
    pub makespan_s: f64,
    /// Mean over completed jobs of the time from registration to the job's end, in seconds.
    pub avg_job_completion_s: f64,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "policy {}: {} of {} jobs completed ({} failed), {} tasks finished; makespan {:.2} s, average job completion {:.2} s",
            self.policy,
            self.jobs_completed,
            self.jobs,
            self.jobs_failed,
            self.tasks_finished,
            self.makespan_s,
            self.avg_job_completion_s
        )
    }
}

/// Runs the batch until every job has ended or `shutdown` resolves.
pub async fn run(args: Args, shutdown: impl Future<Output = ()>) -> anyhow::Result<Outcome> {
    let jobs = match &args.jobs_file {
        Some(path) => workload::load(path)?,
        None => {
            if args.jobs == 0 || args.max_tasks == 0 {
                anyhow::bail!("--jobs and --max-tasks must be at least 1");
            }
            if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
                anyhow::bail!("--time-scale must be a positive number");
            }
            let jobs = workload::generate(args.seed, args.jobs, args.max_tasks, args.time_scale);
            workload::validate(&jobs)?;
            jobs
        }
    };
    let policy: Box<dyn Placement> = match args.policy {
        Policy::Tetris => Box::new(Tetris::new(args.fairness)?),
        Policy::FirstFit => Box::new(FirstFit),
        Policy::BestFit => Box::new(BestFit),
    };
    let config = args.common.driver_config("tetris-batch")?;
    preflight(&config, &jobs).await?;
    let batch = Batch::new(&jobs, policy, args.simulated, args.max_retries)?;
    println!(
        "{} jobs, {} tasks, policy {}",
        jobs.len(),
        batch.task_count(),
        batch.policy_name()
    );
    let batch = Driver::new(config, batch)?.run_until(shutdown).await?;
    let outcome = batch.outcome();
    println!("{outcome}");
    Ok(outcome)
}

/// Before registering, checks that every task fits on at least one active agent, so a task
/// larger than every machine fails the run with a clear message instead of waiting forever.
/// With no agents yet (or no answer) it only says so: agents may still join.
async fn preflight(config: &DriverConfig, jobs: &[JobSpec]) -> anyhow::Result<()> {
    let client = CoordinatorClient::connect(
        &config.coordinator,
        Duration::from_secs(10),
        &framework_sdk::Connection {
            ca_file: config.ca_file.clone(),
            token: config.token.clone(),
        },
    )?;
    let agents = match client.agents().await {
        Ok(list) => list.agents,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the agents; not checking that tasks fit");
            return Ok(());
        }
    };
    let totals: Vec<_> = agents
        .iter()
        .filter(|a| a.state == "active")
        .map(|a| &a.resources)
        .collect();
    let Some(example) = totals.first() else {
        println!("no active agents yet; waiting for offers");
        return Ok(());
    };
    if let Some(unplaceable) = unplaceable(jobs, &totals) {
        anyhow::bail!(
            "{unplaceable}, more than any of the {} active agents has (e.g. {example}); \
             lower the demand or add a larger agent",
            totals.len()
        );
    }
    Ok(())
}

/// The first task group that fits in none of `totals`, described.
fn unplaceable(jobs: &[JobSpec], totals: &[&framework_sdk::Resources]) -> Option<String> {
    jobs.iter().find_map(|job| {
        job.tasks
            .iter()
            .find(|g| !totals.iter().any(|t| g.resources.fits_in(t)))
            .map(|g| format!("job {:?}: its tasks need {}", job.name, g.resources))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_task_larger_than_every_agent_is_named() {
        let jobs: Vec<JobSpec> = serde_json::from_str(
            r#"[{"name": "ok", "tasks": [{"resources": {"cpus": 2}, "duration_s": 1}]},
                {"name": "big", "tasks": [{"resources": {"cpus": 1, "mem": 4096}, "duration_s": 1}]}]"#,
        )
        .unwrap();
        let small: framework_sdk::Resources = "cpus=2,mem=1024".parse().unwrap();
        let wide: framework_sdk::Resources = "cpus=1,mem=8192".parse().unwrap();
        assert_eq!(
            unplaceable(&jobs, &[&small]).unwrap(),
            "job \"big\": its tasks need cpus=1,mem=4096"
        );
        // Each task fits somewhere: nothing to complain about.
        assert_eq!(unplaceable(&jobs, &[&small, &wide]), None);
    }
}
