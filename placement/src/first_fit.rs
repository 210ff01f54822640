//! [`FirstFit`]: the fair baseline. Jobs are served in DRF order; each gets one task placed on
//! the first offer it fits, then shares are recomputed.
//!
//! Fast on big queues: tasks are handled by class (equal demand within a job), each class keeps
//! a pointer to the first offer it may fit, and jobs sit in an ordered set by share, so a
//! placement costs a few set operations rather than a scan of the queue.

use super::problem::Problem;
use super::{Assignment, ConstraintInput, Placement, PlacementInput};

/// DRF-ordered first fit: repeatedly take the job furthest below its fair share that has a task
/// fitting some offer, and put its first such task on the first offer (in input order) it fits.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstFit;

impl Placement for FirstFit {
    fn name(&self) -> &str {
        "first-fit"
    }

    fn place(&self, input: &PlacementInput<'_>) -> Vec<Assignment> {
        run(Problem::new(input))
    }

    fn place_constrained(
        &self,
        input: &PlacementInput<'_>,
        constraints: &ConstraintInput<'_>,
    ) -> Vec<Assignment> {
        run(Problem::constrained(input, constraints))
    }
}

/// First fit on a prepared problem. `Problem::fits` includes the constraint stage; counts only
/// grow, so an offer a class may not use stays so and the pointers stay valid.
fn run(mut p: Problem) -> Vec<Assignment> {
    // Per class, the first offer it may fit: offers only shrink, so an offer a class did not
    // fit stays unfit and the pointer only moves forward.
    let mut first_fit = vec![0usize; p.classes.len()];
    while let Some(j) = p.first_job() {
        // The job's first unplaced task that fits some offer is the head of its first live
        // class (in head order) that fits one; classes that fit nothing die.
        let mut choice = None;
        while let Some(&(_, c)) = p.jobs[j].live.first() {
            let at = &mut first_fit[c];
            while *at < p.offers && !p.fits(c, *at) {
                *at += 1;
            }
            if *at < p.offers {
                choice = Some((c, *at));
                break;
            }
            p.kill_class(c);
        }
        match choice {
            Some((c, o)) => {
                p.place(c, o);
            }
            None => p.retire(j),
        }
    }
    p.assignments
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::tests_support::{input, slot, task};

    #[test]
    fn first_offer_that_fits_in_drf_order() {
        let offers = [
            slot("cpus=1,mem=1", "cpus=4,mem=4"),
            slot("cpus=4,mem=4", "cpus=4,mem=4"),
        ];
        // Job 1 already holds a lot, so job 2 goes first even though job 1's task comes first.
        let tasks = [
            task(1, "cpus=2,mem=1"),
            task(2, "cpus=1,mem=1"),
            task(2, "cpus=3,mem=3"),
        ];
        let mut usage = BTreeMap::new();
        usage.insert(1, "cpus=4".parse().unwrap());
        let got = FirstFit.place(&input(&offers, &tasks, &usage));
        assert_eq!(
            got,
            vec![
                Assignment { task: 1, offer: 0 },
                Assignment { task: 2, offer: 1 }
            ],
            "job 2 (share 0) first; then job 2 again (3/8 < 4/8); then task 0 no longer fits"
        );
    }
}
