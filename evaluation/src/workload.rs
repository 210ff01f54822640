//! Part 2's trace-like batch workload, generated from a seed: jobs arriving as a Poisson
//! process, a heavy-tailed number of tasks per job, one task shape per job over CPU, memory,
//! disk and network bandwidth (weakly correlated: memory follows CPU with noise, disk and
//! network are drawn independently, some jobs heavy in one of them), and heavy-tailed durations
//! (Pareto), as in the production traces the Tetris paper describes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The resource kinds of the packing experiments, in vector order.
pub const KINDS: [&str; 4] = ["cpus", "mem", "disk", "net"];

/// The kinds whose over-subscription slows tasks down (rates); memory is a hard limit.
pub const RATE_KINDS: [bool; 4] = [true, false, true, true];

/// Workload parameters (all printed in the document).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// The seed.
    pub seed: u64,
    /// Number of jobs.
    pub jobs: usize,
    /// Mean seconds between job arrivals.
    pub mean_interarrival_s: f64,
    /// Pareto shape of the tasks-per-job distribution (minimum 1, capped at `max_tasks`).
    pub tasks_alpha: f64,
    /// The most tasks of one job.
    pub max_tasks: usize,
    /// Pareto shape of task durations.
    pub duration_alpha: f64,
    /// Minimum task duration, seconds.
    pub min_duration_s: f64,
    /// Maximum task duration (the Pareto tail is truncated here), seconds.
    pub max_duration_s: f64,
    /// Number of agents.
    pub agents: usize,
    /// Each agent's capacity: cpus, mem (GB), disk and net (bandwidth units).
    pub agent: [f64; 4],
}

impl WorkloadSpec {
    /// The full-size workload of `docs/src/evaluation.md`.
    pub fn full(seed: u64) -> Self {
        Self {
            seed,
            jobs: 500,
            mean_interarrival_s: 1.0,
            tasks_alpha: 0.9,
            max_tasks: 300,
            duration_alpha: 1.6,
            min_duration_s: 20.0,
            max_duration_s: 300.0,
            agents: 20,
            agent: [16.0, 64.0, 8.0, 8.0],
        }
    }

    /// A tiny one for tests.
    pub fn tiny(seed: u64) -> Self {
        Self {
            jobs: 30,
            max_tasks: 30,
            agents: 4,
            ..Self::full(seed)
        }
    }
}

/// One job: its tasks share a shape and a duration distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Arrival time, seconds.
    pub arrival_s: f64,
    /// Each task's demand, in [`KINDS`] order.
    pub demand: [f64; 4],
    /// Each task's duration at full speed, seconds.
    pub durations: Vec<f64>,
}

fn pareto(rng: &mut StdRng, min: f64, alpha: f64) -> f64 {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    min / u.powf(1.0 / alpha)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Generates the jobs of `spec`.
pub fn generate(spec: &WorkloadSpec) -> Vec<Job> {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut t = 0.0;
    (0..spec.jobs)
        .map(|_| {
            t += -spec.mean_interarrival_s * rng.gen_range(f64::EPSILON..1.0f64).ln();
            let n = (pareto(&mut rng, 1.0, spec.tasks_alpha) as usize).clamp(1, spec.max_tasks);
            let cpus: f64 = rng.gen_range(0.5..4.0);
            let mem = (cpus * rng.gen_range(1.0..4.0) + rng.gen_range(0.0..6.0)).min(16.0);
            // A third of the jobs are disk-heavy, a third network-heavy (shuffles), the rest light.
            let kind: u8 = rng.gen_range(0..3);
            let heavy = |rng: &mut StdRng| rng.gen_range(1.0..3.0);
            let light = |rng: &mut StdRng| rng.gen_range(0.1..0.6);
            let (disk, net) = match kind {
                0 => (heavy(&mut rng), light(&mut rng)),
                1 => (light(&mut rng), heavy(&mut rng)),
                _ => (light(&mut rng), light(&mut rng)),
            };
            let base =
                pareto(&mut rng, spec.min_duration_s, spec.duration_alpha).min(spec.max_duration_s);
            let durations = (0..n)
                .map(|_| round1(base * rng.gen_range(0.8..1.2)))
                .collect();
            Job {
                arrival_s: round1(t),
                demand: [round1(cpus), round1(mem), round1(disk), round1(net)],
                durations,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_heavy_tailed() {
        let a = generate(&WorkloadSpec::full(1));
        assert_eq!(a, generate(&WorkloadSpec::full(1)));
        assert_ne!(a, generate(&WorkloadSpec::full(2)));
        let tasks: usize = a.iter().map(|j| j.durations.len()).sum();
        assert!(tasks > 1_000, "thousands of tasks: {tasks}");
        let mut d: Vec<f64> = a.iter().flat_map(|j| j.durations.clone()).collect();
        d.sort_by(f64::total_cmp);
        let median = d[d.len() / 2];
        assert!(d[d.len() - 1] > 10.0 * median, "heavy tail");
        assert!(a.iter().all(|j| j.demand.iter().all(|&x| x > 0.0)));
    }
}
