//! [`BestFit`]: jobs in DRF order; each task goes where it leaves the least room.
//!
//! Fast on big queues: tasks are handled by class (equal demand within a job) and each class
//! remembers its best offer. Placing a task shrinks one offer, which can only make that offer
//! tighter (a better fit) for the classes that still fit it, so only they are compared again;
//! a class scans all offers only when its best one no longer fits it.

use super::problem::{leftover, Problem};
use super::{Assignment, ConstraintInput, Placement, PlacementInput};

/// DRF-ordered best fit: like [`FirstFit`](super::FirstFit), but the task goes to the offer
/// whose leftover, normalised by the agent's total and summed over resources, is smallest
/// (ties to the earlier offer).
#[derive(Debug, Clone, Copy, Default)]
pub struct BestFit;

/// What a class knows of its best offer.
#[derive(Clone, Copy)]
enum Best {
    /// Not known: scan the offers when asked.
    Unknown,
    /// `(leftover, offer)`: the tightest offer it fits, ties to the earlier offer.
    At(f64, usize),
    /// It fits no offer (and never will again in this call: offers only shrink).
    Nowhere,
}

/// True when `(lo, o)` is a better best fit than `(best_lo, best_o)`.
fn better(lo: f64, o: usize, best_lo: f64, best_o: usize) -> bool {
    lo.total_cmp(&best_lo).then(o.cmp(&best_o)) == std::cmp::Ordering::Less
}

fn scan(p: &Problem, c: usize) -> Best {
    let demand = &p.classes[c].demand;
    let mut best = Best::Nowhere;
    for o in 0..p.offers {
        if !p.fits(c, o) {
            continue;
        }
        let lo = leftover(p.free_of(o), demand, p.total_of(o));
        best = match best {
            Best::At(b, bo) if !better(lo, o, b, bo) => best,
            _ => Best::At(lo, o),
        };
    }
    best
}

impl Placement for BestFit {
    fn name(&self) -> &str {
        "best-fit"
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

/// Best fit on a prepared problem (`Problem::fits` includes the constraint stage).
fn run(mut p: Problem) -> Vec<Assignment> {
    let mut best = vec![Best::Unknown; p.classes.len()];
    // Classes whose best offer is known, to update when an offer shrinks.
    let mut known: Vec<usize> = Vec::new();
    while let Some(j) = p.first_job() {
        // The job's first unplaced task that fits some offer is the head of its first live
        // class (in head order) that fits one.
        let mut choice = None;
        while let Some(&(_, c)) = p.jobs[j].live.first() {
            if let Best::Unknown = best[c] {
                best[c] = scan(&p, c);
                known.push(c);
            }
            if let Best::At(_, o) = best[c] {
                choice = Some((c, o));
                break;
            }
            p.kill_class(c);
        }
        let Some((c, o)) = choice else {
            p.retire(j);
            continue;
        };
        p.place(c, o);
        if p.tightened {
            // A count of the job reached its limit: offers its classes' bests were on may
            // be closed to them now; those classes scan again when next asked.
            let j = p.classes[c].job;
            known.retain(|&k| {
                if p.classes[k].job == j {
                    best[k] = Best::Unknown;
                    false
                } else {
                    true
                }
            });
        }
        // Offer `o` shrank: its leftover fell for every class that still fits it, so it may
        // become their best; a class whose best it was and that no longer fits it must scan
        // again. Every other offer is as it was.
        let free = &p.free[o * p.r..(o + 1) * p.r];
        let total = p.total_of(o);
        known.retain(|&k| {
            let class = &p.classes[k];
            if class.left() == 0 {
                return false;
            }
            let Best::At(b, bo) = best[k] else {
                return false;
            };
            if !p.fits(k, o) {
                if bo == o {
                    best[k] = Best::Unknown;
                    return false;
                }
                return true;
            }
            let lo = leftover(free, &class.demand, total);
            if bo == o || better(lo, o, b, bo) {
                best[k] = Best::At(lo, o);
            }
            true
        });
    }
    p.assignments
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::tests_support::{input, slot, task};

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
