//! [`Tetris`]: multi-resource packing (Grandl et al., SIGCOMM 2014), exactly as `ALGORITHMS.md`
//! states it.
//!
//! Each round: the candidate jobs are the `ceil((1 - F) * |jobs|)` jobs furthest below their fair
//! share (DRF among the framework's jobs with pending tasks); every (task, offer) pair of a
//! candidate job where the task fits is scored `A + eps * P`, with alignment `A`, remaining-work
//! score `P` of the task's job and `eps = mean(A) / mean(P)` over the candidate pairs; the best
//! pair is placed and its demand subtracted from the offer; repeat until nothing fits.
//!
//! **Decision:** when counting the `ceil((1 - F) * |jobs|)` candidates, a job none of whose tasks
//! fits any offer is skipped (as DRF skips a user whose next task does not fit), so a fairness
//! knob near 1 never leaves resources idle that another job could use.

use super::problem::Problem;
use super::{Assignment, JobId, Placement, PlacementInput};

/// Alignment `A(t, o) = sum_j (d_j / T_j) * (W_j / T_j)` of a demand `d` with an offer's free
/// room `W` on an agent of total `T`, all in the same units. Resources the agent lacks add
/// nothing.
pub fn alignment(demand: &[f64], free: &[f64], total: &[f64]) -> f64 {
    demand
        .iter()
        .zip(free)
        .zip(total)
        .filter(|(_, t)| **t > 0.0)
        .map(|((d, w), t)| (d / t) * (w / t))
        .sum()
}

/// Remaining-work score `P(job) = 1 / sum over pending tasks of (duration * sum_j d_j / R_j)`
/// for a job's pending tasks given as `(duration_s, demand)`, against cluster capacity `R`.
/// Zero when the job has no measurable remaining work (no durations known).
pub fn remaining_work<'a>(
    tasks: impl IntoIterator<Item = (f64, &'a [f64])>,
    cluster: &[f64],
) -> f64 {
    let work: f64 = tasks
        .into_iter()
        .map(|(duration, demand)| {
            let size: f64 = demand
                .iter()
                .zip(cluster)
                .filter(|(_, r)| **r > 0.0)
                .map(|(d, r)| d / r)
                .sum();
            duration * size
        })
        .sum();
    if work > 0.0 && work.is_finite() {
        1.0 / work
    } else {
        0.0
    }
}

/// Why a [`Tetris`] could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TetrisError {
    /// The fairness knob must lie in `[0, 1)`.
    #[error(
        "fairness knob {0} is outside [0, 1); use 0 for pure packing, values near 1 for fairness"
    )]
    BadFairness(f64),
}

/// The Tetris policy with fairness knob `F`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tetris {
    fairness: f64,
}

impl Default for Tetris {
    /// `F = 0.25`: near-perfect fairness at little cost in packing, per the paper.
    fn default() -> Self {
        Self { fairness: 0.25 }
    }
}

impl Tetris {
    /// A Tetris policy with fairness knob `fairness` in `[0, 1)`: 0 is pure efficiency, values
    /// near 1 serve only the job furthest below its fair share.
    pub fn new(fairness: f64) -> Result<Self, TetrisError> {
        if !(0.0..1.0).contains(&fairness) {
            return Err(TetrisError::BadFairness(fairness));
        }
        Ok(Self { fairness })
    }

    /// The fairness knob.
    pub fn fairness(&self) -> f64 {
        self.fairness
    }

    /// The jobs that may place in this round.
    fn candidate_jobs(&self, p: &Problem) -> Vec<JobId> {
        let jobs = p.jobs_by_share();
        let k = ((1.0 - self.fairness) * jobs.len() as f64).ceil().max(1.0) as usize;
        jobs.into_iter()
            .filter(|&j| p.job_can_place(j))
            .take(k)
            .collect()
    }
}

fn units(v: &[u64]) -> Vec<f64> {
    v.iter().map(|x| *x as f64).collect()
}

impl Placement for Tetris {
    fn name(&self) -> &str {
        "tetris"
    }

    fn place(&self, input: &PlacementInput<'_>) -> Vec<Assignment> {
        let mut p = Problem::new(input);
        let cluster = units(&p.cluster);
        let demands: Vec<Vec<f64>> = p.demand.iter().map(|d| units(d)).collect();
        let totals: Vec<Vec<f64>> = p.total.iter().map(|t| units(t)).collect();
        loop {
            let jobs = self.candidate_jobs(&p);
            let free: Vec<Vec<f64>> = p.free.iter().map(|f| units(f)).collect();
            // (task, offer, alignment, remaining-work score of the task's job)
            let mut pairs: Vec<(usize, usize, f64, f64)> = Vec::new();
            for &job in &jobs {
                let pending: Vec<usize> = p.unplaced_of(job).collect();
                let score_p = remaining_work(
                    pending
                        .iter()
                        .map(|&t| (p.duration[t], demands[t].as_slice())),
                    &cluster,
                );
                for &t in &pending {
                    for o in 0..p.free.len() {
                        if p.fits(t, o) {
                            let a = alignment(&demands[t], &free[o], &totals[o]);
                            pairs.push((t, o, a, score_p));
                        }
                    }
                }
            }
            if pairs.is_empty() {
                return p.assignments;
            }
            let n = pairs.len() as f64;
            let mean_a = pairs.iter().map(|x| x.2).sum::<f64>() / n;
            let mean_p = pairs.iter().map(|x| x.3).sum::<f64>() / n;
            let eps = if mean_p > 0.0 { mean_a / mean_p } else { 0.0 };
            let mut best = pairs[0];
            let mut best_score = best.2 + eps * best.3;
            for &pair in &pairs[1..] {
                let score = pair.2 + eps * pair.3;
                // Strictly better only: ties keep the earlier pair (fairer job, earlier task).
                if score > best_score {
                    best = pair;
                    best_score = score;
                }
            }
            p.place(best.0, best.1);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::placement::tests_support::{input, slot, task, task_d};

    #[test]
    fn alignment_matches_the_hand_computed_example() {
        // Agent total <16 cpus, 32 GB>, free <8, 8>.
        let (free, total) = ([8.0, 8.0], [16.0, 32.0]);
        assert_eq!(alignment(&[4.0, 2.0], &free, &total), 0.140625);
        assert_eq!(alignment(&[2.0, 6.0], &free, &total), 0.109375);
    }

    #[test]
    fn the_better_aligned_task_is_placed_first() {
        let offers = [slot("cpus=8,mem=8", "cpus=16,mem=32")];
        // Same job, so the same remaining-work score: alignment alone decides.
        let tasks = [task(1, "cpus=2,mem=6"), task(1, "cpus=4,mem=2")];
        let got = Tetris::new(0.0)
            .unwrap()
            .place(&input(&offers, &tasks, &BTreeMap::new()));
        assert_eq!(got[0], Assignment { task: 1, offer: 0 });
        assert_eq!(got.len(), 2, "both fit together: <6, 8> <= <8, 8>");
    }

    #[test]
    fn remaining_work_by_hand() {
        // Cluster <10, 100>; tasks (2 s, <1, 10>) and (3 s, <5, 0>):
        // work = 2 * (0.1 + 0.1) + 3 * 0.5 = 1.9.
        let got = remaining_work(
            [(2.0, &[1.0, 10.0][..]), (3.0, &[5.0, 0.0][..])],
            &[10.0, 100.0],
        );
        assert!((got - 1.0 / 1.9).abs() < 1e-12, "{got}");
        assert_eq!(remaining_work([(0.0, &[1.0, 1.0][..])], &[10.0, 10.0]), 0.0);
    }

    #[test]
    fn a_nearly_done_job_goes_first_when_alignment_ties() {
        let offers = [slot("cpus=4,mem=4", "cpus=8,mem=8")];
        // Job 1 has one short task left; job 2 has three long ones. Same demands, so A ties and
        // P decides: job 1's task is placed first.
        let tasks = [
            task_d(2, "cpus=2,mem=2", 30.0),
            task_d(2, "cpus=2,mem=2", 30.0),
            task_d(2, "cpus=2,mem=2", 30.0),
            task_d(1, "cpus=2,mem=2", 5.0),
        ];
        let got = Tetris::new(0.0)
            .unwrap()
            .place(&input(&offers, &tasks, &BTreeMap::new()));
        assert_eq!(got[0], Assignment { task: 3, offer: 0 });
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn fairness_knob_near_one_serves_the_poorest_job() {
        let offers = [slot("cpus=8,mem=8", "cpus=16,mem=32")];
        // Job 1 has the best-aligned task but already holds half the cluster; job 2 holds less.
        let tasks = [task(1, "cpus=4,mem=2"), task(2, "cpus=1,mem=1")];
        let mut usage = BTreeMap::new();
        usage.insert(1, "cpus=8".parse().unwrap());
        usage.insert(2, "cpus=2".parse().unwrap());
        let fair = Tetris::new(0.99)
            .unwrap()
            .place(&input(&offers, &tasks, &usage));
        assert_eq!(fair[0], Assignment { task: 1, offer: 0 });
        let packing = Tetris::new(0.0)
            .unwrap()
            .place(&input(&offers, &tasks, &usage));
        assert_eq!(packing[0], Assignment { task: 0, offer: 0 });
    }

    #[test]
    fn a_job_that_cannot_fit_does_not_block_the_others() {
        let offers = [slot("cpus=2,mem=2", "cpus=16,mem=32")];
        let tasks = [task(1, "cpus=4,mem=4"), task(2, "cpus=1,mem=1")];
        let mut usage = BTreeMap::new();
        usage.insert(2, "cpus=8".parse().unwrap());
        let got = Tetris::new(0.99)
            .unwrap()
            .place(&input(&offers, &tasks, &usage));
        assert_eq!(got, vec![Assignment { task: 1, offer: 0 }]);
    }

    #[test]
    fn the_knob_is_validated() {
        assert!(Tetris::new(1.0).is_err());
        assert!(Tetris::new(-0.1).is_err());
        assert!(Tetris::new(f64::NAN).is_err());
        assert_eq!(Tetris::default().fairness(), 0.25);
    }
}
