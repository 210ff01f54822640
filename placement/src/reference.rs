//! Straightforward versions of the policies, kept to check the fast ones against: they rescan
//! every task and every offer each round, as the policies are defined. FirstFit and BestFit are
//! the implementations the fast ones replaced; Tetris is the definition with the sums the fast
//! one keeps exactly (see `problem.rs`).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use protocol::ResourceName;

use super::problem::{align, fits, leftover, quantize_align, remaining_score, work};
use super::{agents_total, Assignment, JobId, PlacementInput};

struct Naive {
    free: Vec<Vec<u64>>,
    total: Vec<Vec<u64>>,
    demand: Vec<Vec<u64>>,
    job: Vec<JobId>,
    duration: Vec<f64>,
    cluster: Vec<u64>,
    usage: BTreeMap<JobId, Vec<u64>>,
    placed: Vec<bool>,
    assignments: Vec<Assignment>,
}

impl Naive {
    fn new(input: &PlacementInput<'_>) -> Self {
        let mut names: Vec<ResourceName> = Vec::new();
        let mut note = |r: &protocol::Resources| {
            for name in r.names() {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        };
        for o in input.offers {
            note(&o.free);
            note(&o.total);
        }
        for t in input.tasks {
            note(&t.demand);
        }
        let cluster_total = if input.cluster_total.is_empty() {
            agents_total(input.offers)
        } else {
            input.cluster_total.clone()
        };
        let dense = |r: &protocol::Resources| -> Vec<u64> {
            names.iter().map(|n| r.millis(n.as_str())).collect()
        };
        let mut usage: BTreeMap<JobId, Vec<u64>> = BTreeMap::new();
        for t in input.tasks {
            usage.entry(t.job).or_insert_with(|| vec![0; names.len()]);
        }
        for (job, held) in input.job_usage {
            usage.insert(*job, dense(held));
        }
        Self {
            free: input.offers.iter().map(|o| dense(&o.free)).collect(),
            total: input.offers.iter().map(|o| dense(&o.total)).collect(),
            demand: input.tasks.iter().map(|t| dense(&t.demand)).collect(),
            job: input.tasks.iter().map(|t| t.job).collect(),
            duration: input
                .tasks
                .iter()
                .map(|t| {
                    if t.duration_s.is_finite() && t.duration_s > 0.0 {
                        t.duration_s
                    } else {
                        0.0
                    }
                })
                .collect(),
            cluster: dense(&cluster_total),
            usage,
            placed: vec![false; input.tasks.len()],
            assignments: Vec::new(),
        }
    }

    fn fits(&self, task: usize, offer: usize) -> bool {
        fits(&self.demand[task], &self.free[offer])
    }

    fn place(&mut self, task: usize, offer: usize) {
        for (f, d) in self.free[offer].iter_mut().zip(&self.demand[task]) {
            *f = f.saturating_sub(*d);
        }
        let n = self.demand[task].len();
        let held = self
            .usage
            .entry(self.job[task])
            .or_insert_with(|| vec![0; n]);
        for (u, d) in held.iter_mut().zip(&self.demand[task]) {
            *u = u.saturating_add(*d);
        }
        self.placed[task] = true;
        self.assignments.push(Assignment { task, offer });
    }

    fn share(&self, job: JobId) -> f64 {
        self.usage.get(&job).map_or(0.0, |held| {
            held.iter()
                .zip(&self.cluster)
                .filter(|(_, c)| **c > 0)
                .map(|(u, c)| *u as f64 / *c as f64)
                .fold(0.0, f64::max)
        })
    }

    fn unplaced_of(&self, job: JobId) -> impl Iterator<Item = usize> + '_ {
        (0..self.job.len()).filter(move |&t| !self.placed[t] && self.job[t] == job)
    }

    fn jobs_by_share(&self) -> Vec<JobId> {
        let mut jobs: Vec<JobId> = (0..self.job.len())
            .filter(|&t| !self.placed[t])
            .map(|t| self.job[t])
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        let mut keyed: Vec<(f64, JobId)> = jobs.into_iter().map(|j| (self.share(j), j)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        keyed.into_iter().map(|(_, j)| j).collect()
    }

    fn job_can_place(&self, job: JobId) -> bool {
        self.unplaced_of(job)
            .any(|t| (0..self.free.len()).any(|o| self.fits(t, o)))
    }
}

/// DRF-ordered first fit, task by task.
pub(crate) fn first_fit(input: &PlacementInput<'_>) -> Vec<Assignment> {
    let mut p = Naive::new(input);
    'round: loop {
        for job in p.jobs_by_share() {
            let choice = p
                .unplaced_of(job)
                .find_map(|t| (0..p.free.len()).find(|&o| p.fits(t, o)).map(|o| (t, o)));
            if let Some((t, o)) = choice {
                p.place(t, o);
                continue 'round;
            }
        }
        return p.assignments;
    }
}

/// DRF-ordered best fit, task by task.
pub(crate) fn best_fit(input: &PlacementInput<'_>) -> Vec<Assignment> {
    let mut p = Naive::new(input);
    'round: loop {
        for job in p.jobs_by_share() {
            let choice = p.unplaced_of(job).find_map(|t| {
                (0..p.free.len())
                    .filter(|&o| p.fits(t, o))
                    .map(|o| (leftover(&p.free[o], &p.demand[t], &p.total[o]), o))
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

/// Tetris, every (task, offer) pair of every candidate job scored each round.
pub(crate) fn tetris(fairness: f64, input: &PlacementInput<'_>) -> Vec<Assignment> {
    let mut p = Naive::new(input);
    loop {
        let jobs = p.jobs_by_share();
        let k = ((1.0 - fairness) * jobs.len() as f64).ceil().max(1.0) as usize;
        let candidates: Vec<JobId> = jobs
            .into_iter()
            .filter(|&j| p.job_can_place(j))
            .take(k)
            .collect();
        if candidates.is_empty() {
            return p.assignments;
        }
        let mut sum_a: i128 = 0;
        let mut sum_p = 0.0;
        // Per candidate job: its best pair (task, offer, alignment) and its remaining-work score.
        let mut best_of: Vec<((usize, usize, f64), f64)> = Vec::new();
        for &job in &candidates {
            let pending: Vec<usize> = p.unplaced_of(job).collect();
            let w = pending.iter().fold(0i128, |acc, &t| {
                acc.wrapping_add(work(p.duration[t], &p.demand[t], &p.cluster))
            });
            let score_p = remaining_score(w);
            let mut pairs = 0u64;
            let mut best: Option<(usize, usize, f64)> = None;
            for &t in &pending {
                for o in 0..p.free.len() {
                    if p.fits(t, o) {
                        let a = align(&p.demand[t], &p.free[o], &p.total[o]);
                        sum_a = sum_a.wrapping_add(quantize_align(a));
                        pairs += 1;
                        if best.is_none_or(|b| a > b.2) {
                            best = Some((t, o, a));
                        }
                    }
                }
            }
            sum_p += pairs as f64 * score_p;
            best_of.push((best.unwrap(), score_p));
        }
        let eps = if sum_p > 0.0 {
            (sum_a as f64 / super::problem::ALIGN_SCALE) / sum_p
        } else {
            0.0
        };
        let mut chosen = best_of[0].0;
        let mut best_score = chosen.2 + eps * best_of[0].1;
        for &(pair, score_p) in &best_of[1..] {
            let score = pair.2 + eps * score_p;
            if score > best_score {
                chosen = pair;
                best_score = score;
            }
        }
        p.place(chosen.0, chosen.1);
    }
}
