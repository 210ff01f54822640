//! Run with:
//!
//! ```text
//! cargo run --release -p examples --bin placement-sim -- --agents 20 --jobs 60 --max-tasks 40 --seeds 5
//! ```
//!
//! Simulates one batch framework (no coordinator, simulated time) under each placement policy
//! on the same generated workloads, and prints makespan and average job completion time.

use clap::Parser;
use framework_sdk::placement::{BestFit, FirstFit, Placement, Tetris};
use framework_sdk::Resources;

/// Flags of `placement-sim`.
#[derive(Debug, Parser)]
#[command(about = "Compare placement policies in a discrete-event simulation")]
struct Args {
    /// Identical agents in the cluster.
    #[arg(long, default_value_t = 20)]
    agents: usize,
    /// Each agent's capacity.
    #[arg(long, default_value = "cpus=8,mem=16384")]
    agent_resources: Resources,
    /// Jobs per workload.
    #[arg(long, default_value_t = 60)]
    jobs: usize,
    /// The most tasks per job.
    #[arg(long, default_value_t = 40)]
    max_tasks: usize,
    /// Workloads to average over (seeds 1..=N).
    #[arg(long, default_value_t = 5)]
    seeds: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.agents == 0 || args.jobs == 0 || args.max_tasks == 0 || args.seeds == 0 {
        anyhow::bail!("--agents, --jobs, --max-tasks and --seeds must be at least 1");
    }
    let policies: Vec<Box<dyn Placement>> = vec![
        Box::new(FirstFit),
        Box::new(BestFit),
        Box::new(Tetris::new(0.0)?),
        Box::new(Tetris::new(0.25)?),
        Box::new(Tetris::new(0.5)?),
    ];
    let labels = [
        "first-fit (DRF)",
        "best-fit (DRF)",
        "tetris F=0",
        "tetris F=0.25",
        "tetris F=0.5",
    ];
    let mut sums = vec![(0.0, 0.0); policies.len()];
    for seed in 1..=args.seeds {
        let jobs = examples::tetris_batch::workload::generate(seed, args.jobs, args.max_tasks, 1.0);
        for (i, policy) in policies.iter().enumerate() {
            let r = examples::placement_sim::simulate(
                &jobs,
                args.agents,
                &args.agent_resources,
                policy.as_ref(),
            );
            sums[i].0 += r.makespan_s;
            sums[i].1 += r.avg_job_completion_s;
        }
    }
    let n = args.seeds as f64;
    let (base_m, base_j) = (sums[0].0 / n, sums[0].1 / n);
    println!(
        "{:<16} {:>12} {:>8} {:>14} {:>8}",
        "policy", "makespan s", "vs FF", "avg JCT s", "vs FF"
    );
    for (label, (m, j)) in labels.iter().zip(&sums) {
        let (m, j) = (m / n, j / n);
        println!(
            "{label:<16} {m:>12.2} {:>7.1}% {j:>14.2} {:>7.1}%",
            100.0 * (m - base_m) / base_m,
            100.0 * (j - base_j) / base_j
        );
    }
    Ok(())
}
