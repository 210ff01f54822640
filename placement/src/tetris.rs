//! [`Tetris`]: multi-resource packing (Grandl et al., SIGCOMM 2014), exactly as
//! `docs/src/internals/algorithms.md` states it.
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
//!
//! **Decision:** `eps = sum(A) / sum(P)` over the candidate pairs (the ratio of the means), with
//! each alignment and each task's remaining work summed exactly (as fixed-point integers), so
//! sums kept up to date as offers shrink equal sums recomputed from scratch; within a job the
//! pair with the highest `A` competes (its `eps * P` is the job's), ties to the earlier task,
//! then the earlier offer; across jobs the higher score wins, ties to the job further below its
//! share. In real numbers this is the best pair by `A + eps * P`; it differs from listing every
//! pair only in floating-point rounding.

use super::problem::{fits, quantize_align, remaining_score, work, Problem, ALIGN_SCALE};
use super::ConstraintInput;
use super::{Assignment, Placement, PlacementInput};

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
}

/// A class's scored offer, ordered by alignment, ties to the earlier offer (which is greater). The
/// entry is current while `version` matches the offer's; a stale one over-estimates (offers only
/// shrink, and alignment falls with free room) and is re-scored when it reaches the top.
#[derive(Clone, Copy)]
struct Scored {
    a: f64,
    offer: u32,
    version: u32,
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.a
            .total_cmp(&other.a)
            .then(other.offer.cmp(&self.offer))
    }
}

/// Alignment's factors, divided once: each offer's free room and each class's demand, resource
/// by resource, over the agent's total (0 where the total is 0), the demand per distinct total.
/// `A = sum_j (d_j / T_j) * (W_j / T_j)` is then one multiply-add per resource, with exactly the
/// value `problem::align` computes.
struct Norm {
    r: usize,
    /// Per offer, `W_j / T_j`.
    free: Vec<f64>,
    /// Per offer, its distinct total.
    group: Vec<usize>,
    groups: usize,
    /// Per class and distinct total, `d_j / T_j`.
    demand: Vec<f64>,
}

impl Norm {
    fn new(p: &Problem) -> Self {
        let r = p.r;
        let mut totals: Vec<&[u64]> = Vec::new();
        let group: Vec<usize> = (0..p.offers)
            .map(|o| {
                let t = p.total_of(o);
                totals.iter().position(|x| *x == t).unwrap_or_else(|| {
                    totals.push(t);
                    totals.len() - 1
                })
            })
            .collect();
        let ratio = |x: u64, t: u64| if t > 0 { x as f64 / t as f64 } else { 0.0 };
        let mut demand = Vec::with_capacity(p.classes.len() * totals.len() * r);
        for class in &p.classes {
            for t in &totals {
                demand.extend(
                    class
                        .demand
                        .iter()
                        .zip(t.iter())
                        .map(|(d, t)| ratio(*d, *t)),
                );
            }
        }
        let mut norm = Self {
            r,
            free: vec![0.0; p.offers * r],
            group,
            groups: totals.len(),
            demand,
        };
        for o in 0..p.offers {
            norm.refresh(p, o);
        }
        norm
    }

    /// Offer `o`'s free room changed.
    fn refresh(&mut self, p: &Problem, o: usize) {
        let r = self.r;
        for ((n, f), t) in self.free[o * r..(o + 1) * r]
            .iter_mut()
            .zip(p.free_of(o))
            .zip(p.total_of(o))
        {
            *n = if *t > 0 { *f as f64 / *t as f64 } else { 0.0 };
        }
    }

    /// `A(c, o)` with offer `o`'s normalised free room `free`.
    fn align_with(&self, c: usize, o: usize, free: &[f64]) -> f64 {
        let at = (c * self.groups + self.group[o]) * self.r;
        let mut a = 0.0;
        for (d, w) in self.demand[at..at + self.r].iter().zip(free) {
            a += d * w;
        }
        a
    }

    /// `A(c, o)` now.
    fn align(&self, c: usize, o: usize) -> f64 {
        self.align_with(c, o, &self.free[o * self.r..(o + 1) * self.r])
    }
}

/// How many of its best offers a class tracks between scans (few in tests, so that the tests'
/// small inputs exercise the refills).
const TRACKED: usize = if cfg!(test) { 2 } else { 128 };

/// What Tetris keeps per class between rounds.
struct ClassScore {
    /// Offers the class fits.
    fits: u64,
    /// Exact sum of the class's alignments over those offers.
    sum_a: i128,
    /// Some of its best offers, best last. Stale entries over-estimate (see [`Scored`]).
    top: Vec<Scored>,
    /// The best offer not in `top` when it was last filled, `None` when all are in it. Untracked
    /// offers only fall, so they all stay below it; an entry re-scored below it leaves `top`,
    /// and an empty `top` is filled by a new scan.
    floor: Option<Scored>,
}

/// The offers class `c` fits, scored, with the best `TRACKED` in `s.top` and the next in
/// `s.floor`.
/// `all` is scratch space, reused between scans.
fn scan(
    p: &Problem,
    norm: &Norm,
    versions: &[u32],
    c: usize,
    s: &mut ClassScore,
    all: &mut Vec<Scored>,
) {
    all.clear();
    for (o, &version) in versions.iter().enumerate() {
        if p.fits(c, o) {
            all.push(Scored {
                a: norm.align(c, o),
                offer: o as u32,
                version,
            });
        }
    }
    s.floor = None;
    if all.len() > TRACKED {
        let at = all.len() - TRACKED - 1;
        all.select_nth_unstable(at);
        s.floor = Some(all[at]);
        all.drain(..=at);
    }
    all.sort_unstable();
    s.top.clear();
    s.top.extend_from_slice(all);
}

/// The class's best offer `(alignment, offer)`, re-scoring stale entries on the way (and
/// scanning again, with `scratch`, when none is left above the floor).
fn best_offer(
    p: &Problem,
    norm: &Norm,
    versions: &[u32],
    c: usize,
    s: &mut ClassScore,
    scratch: &mut Vec<Scored>,
) -> Option<(f64, usize)> {
    loop {
        let Some(&top) = s.top.last() else {
            s.floor?;
            scan(p, norm, versions, c, s, scratch);
            continue;
        };
        let o = top.offer as usize;
        if versions[o] == top.version {
            return Some((top.a, o));
        }
        s.top.pop();
        if p.fits(c, o) {
            let now = Scored {
                a: norm.align(c, o),
                offer: top.offer,
                version: versions[o],
            };
            if s.floor.is_none_or(|f| now > f) {
                let at = s.top.partition_point(|e| *e < now);
                s.top.insert(at, now);
            }
        }
    }
}

impl Placement for Tetris {
    fn name(&self) -> &str {
        "tetris"
    }

    /// Each round needs, per candidate job, its best pair and its share of the means; the pairs
    /// themselves are never listed. Per class (equal demand within a job) the offers it fits are
    /// tracked by alignment (the best few, see `ClassScore`), with their count and exact alignment sum; a job's pair count
    /// and alignment sum are its classes' weighted by their unplaced tasks. Placing a task
    /// changes one offer, so each class's count and sum move by that offer's terms only, and its
    /// best offers are corrected lazily. Remaining work is kept per job, exactly, and DRF order in an
    /// ordered set. The choices are those of scoring every pair (`reference::tetris` in the
    /// tests checks so on random inputs).
    fn place(&self, input: &PlacementInput<'_>) -> Vec<Assignment> {
        self.run(Problem::new(input))
    }

    fn place_constrained(
        &self,
        input: &PlacementInput<'_>,
        constraints: &ConstraintInput<'_>,
    ) -> Vec<Assignment> {
        self.run(Problem::constrained(input, constraints))
    }
}

/// Counts the offers class `c` fits (the constraint stage included) and sums its alignments
/// there, from scratch, then fills its best offers. False when it fits none.
fn score_class(
    p: &Problem,
    norm: &Norm,
    versions: &[u32],
    c: usize,
    s: &mut ClassScore,
    scratch: &mut Vec<Scored>,
) -> bool {
    s.fits = 0;
    s.sum_a = 0;
    for o in 0..p.offers {
        if p.fits(c, o) {
            s.fits += 1;
            s.sum_a = s.sum_a.wrapping_add(quantize_align(norm.align(c, o)));
        }
    }
    if s.fits == 0 {
        s.top.clear();
        s.floor = None;
        return false;
    }
    scan(p, norm, versions, c, s, scratch);
    true
}

impl Tetris {
    /// Tetris on a prepared problem (`Problem::fits` includes the constraint stage).
    fn run(&self, mut p: Problem) -> Vec<Assignment> {
        if p.offers > u32::MAX as usize {
            return p.assignments;
        }
        let mut versions = vec![0u32; p.offers];
        let mut scratch: Vec<Scored> = Vec::with_capacity(p.offers);
        let mut norm = Norm::new(&p);
        let mut scores: Vec<ClassScore> = Vec::with_capacity(p.classes.len());
        let mut live: Vec<usize> = Vec::new();
        for c in 0..p.classes.len() {
            let mut s = ClassScore {
                fits: 0,
                sum_a: 0,
                top: Vec::new(),
                floor: None,
            };
            if score_class(&p, &norm, &versions, c, &mut s, &mut scratch) {
                live.push(c);
            } else {
                p.kill_class(c);
            }
            scores.push(s);
        }
        // Remaining work per job, exact.
        let mut job_work: Vec<i128> = vec![0; p.jobs.len()];
        for class in &p.classes {
            for &t in &class.tasks {
                job_work[class.job] = job_work[class.job].wrapping_add(work(
                    p.duration[t],
                    &class.demand,
                    &p.cluster,
                ));
            }
        }

        let mut candidates: Vec<usize> = Vec::new();
        let mut retired: Vec<usize> = Vec::new();
        // Per candidate: (class, offer, alignment) of its best pair, and its score P.
        let mut best_of: Vec<((usize, usize, f64), f64)> = Vec::new();
        let mut old_free: Vec<u64> = vec![0; p.r];
        let mut old_norm: Vec<f64> = vec![0.0; p.r];
        loop {
            let k = ((1.0 - self.fairness) * p.with_unplaced as f64)
                .ceil()
                .max(1.0) as usize;
            candidates.clear();
            retired.clear();
            for &(_, _, j) in &p.order {
                if p.jobs[j].live.is_empty() {
                    retired.push(j);
                } else {
                    candidates.push(j);
                    if candidates.len() == k {
                        break;
                    }
                }
            }
            for &j in &retired {
                p.retire(j);
            }
            if candidates.is_empty() {
                return p.assignments;
            }
            let mut sum_a: i128 = 0;
            let mut sum_p = 0.0;
            best_of.clear();
            for &j in &candidates {
                let score_p = remaining_score(job_work[j]);
                let mut pairs = 0u64;
                // (alignment, head task, class, offer)
                let mut best: Option<(f64, usize, usize, usize)> = None;
                for &(head, c) in &p.jobs[j].live {
                    let s = &mut scores[c];
                    let left = p.classes[c].left() as u64;
                    pairs += left * s.fits;
                    sum_a = sum_a.wrapping_add((left as i128).wrapping_mul(s.sum_a));
                    if let Some((a, o)) = best_offer(&p, &norm, &versions, c, s, &mut scratch) {
                        let wins = match best {
                            None => true,
                            Some((ba, bh, _, _)) => a > ba || (a == ba && head < bh),
                        };
                        if wins {
                            best = Some((a, head, c, o));
                        }
                    }
                }
                sum_p += pairs as f64 * score_p;
                if let Some((a, _, c, o)) = best {
                    best_of.push(((c, o, a), score_p));
                }
            }
            let Some(&first) = best_of.first() else {
                return p.assignments;
            };
            let eps = if sum_p > 0.0 {
                (sum_a as f64 / ALIGN_SCALE) / sum_p
            } else {
                0.0
            };
            let mut chosen = first.0;
            let mut best_score = chosen.2 + eps * first.1;
            for &(pair, score_p) in &best_of[1..] {
                let score = pair.2 + eps * score_p;
                // Strictly better only: ties keep the earlier job (further below its share).
                if score > best_score {
                    chosen = pair;
                    best_score = score;
                }
            }
            let (c, o, _) = chosen;
            old_free.copy_from_slice(p.free_of(o));
            old_norm.copy_from_slice(&norm.free[o * p.r..(o + 1) * p.r]);
            let task = p.place(c, o);
            let j = p.classes[c].job;
            job_work[j] =
                job_work[j].wrapping_sub(work(p.duration[task], &p.classes[c].demand, &p.cluster));
            versions[o] = versions[o].wrapping_add(1);
            // Offer `o` shrank: move each live class's count and sum by its terms.
            norm.refresh(&p, o);
            let mut died = Vec::new();
            // A count of job `j` reached its limit: its classes are scored again from scratch
            // below (other jobs' constraints did not change).
            let mut rescore = Vec::new();
            let tightened = p.tightened;
            live.retain(|&l| {
                let class = &p.classes[l];
                if class.left() == 0 {
                    return false;
                }
                if tightened && class.job == j {
                    rescore.push(l);
                    return true;
                }
                // The constraints on offer `o` are as they were for this class.
                if !(fits(&class.demand, &old_free) && p.allows(class.job, o)) {
                    return true;
                }
                let s = &mut scores[l];
                let before = quantize_align(norm.align_with(l, o, &old_norm));
                s.sum_a = s.sum_a.wrapping_sub(before);
                if p.fits(l, o) {
                    let after = quantize_align(norm.align(l, o));
                    s.sum_a = s.sum_a.wrapping_add(after);
                    true
                } else {
                    s.fits -= 1;
                    if s.fits == 0 {
                        died.push(l);
                        false
                    } else {
                        true
                    }
                }
            });
            for l in rescore {
                if !score_class(&p, &norm, &versions, l, &mut scores[l], &mut scratch) {
                    live.retain(|&x| x != l);
                    died.push(l);
                }
            }
            for l in died {
                p.kill_class(l);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::tests_support::{input, slot, task, task_d};

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
