//! [`BestFit`]: jobs in DRF order; each task goes where it leaves the least room.

use super::problem::Problem;
use super::{Assignment, Placement, PlacementInput};

/// DRF-ordered best fit: like [`FirstFit`](super::FirstFit), but the task goes to the offer
/// whose leftover, normalised by the agent's total and summed over resources, is smallest
/// (ties to the earlier offer).
#[derive(Debug, Clone, Copy, Default)]
pub struct BestFit;

/// The room an offer keeps after taking a task, each resource as a fraction of the agent.
fn leftover(p: &Problem, task: usize, offer: usize) -> f64 {
    p.free[offer]
        .iter()
        .zip(&p.demand[task])
        .zip(&p.total[offer])
        .filter(|(_, t)| **t > 0)
        .map(|((f, d), t)| f.saturating_sub(*d) as f64 / *t as f64)
        .sum()
}

impl Placement for BestFit {
    fn name(&self) -> &str {
        "best-fit"
    }

    fn place(&self, input: &PlacementInput<'_>) -> Vec<Assignment> {
        let mut p = Problem::new(input);
        'round: loop {
            for job in p.jobs_by_share() {
                let choice = p.unplaced_of(job).find_map(|t| {
                    (0..p.free.len())
                        .filter(|&o| p.fits(t, o))
                        .map(|o| (leftover(&p, t, o), o))
                        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
                        .map(|(_, o)| (t, o))
                });
                if let Some((t, o)) = choice {
                    p.place(t, o);
                    continue 'round;
                }
            }
            return p.assignments;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::placement::tests_support::{input, slot, task};

    #[test]
    fn tightest_offer_wins() {
        let offers = [
            slot("cpus=8,mem=8", "cpus=8,mem=8"),
            slot("cpus=2,mem=2", "cpus=8,mem=8"),
            slot("cpus=3,mem=3", "cpus=8,mem=8"),
        ];
        let tasks = [task(1, "cpus=2,mem=2"), task(1, "cpus=3,mem=2")];
        let got = BestFit.place(&input(&offers, &tasks, &BTreeMap::new()));
        assert_eq!(
            got,
            vec![
                Assignment { task: 0, offer: 1 },
                Assignment { task: 1, offer: 2 }
            ],
            "each task where it leaves least room"
        );
    }
}
