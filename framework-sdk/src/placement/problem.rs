//! The working state all policies share: dense resource vectors, what is left of each offer,
//! what each job holds, and which tasks are placed.

use std::collections::BTreeMap;

use protocol::ResourceName;

use super::{agents_total, Assignment, JobId, PlacementInput};

/// A placement problem in dense form: resource `k` of every vector is `names[k]`.
pub(crate) struct Problem {
    /// Free room left in each offer, in thousandths.
    pub(crate) free: Vec<Vec<u64>>,
    /// Each offer's agent total, in thousandths.
    pub(crate) total: Vec<Vec<u64>>,
    /// Each task's demand, in thousandths.
    pub(crate) demand: Vec<Vec<u64>>,
    pub(crate) job: Vec<JobId>,
    pub(crate) duration: Vec<f64>,
    /// The capacity shares are measured against.
    pub(crate) cluster: Vec<u64>,
    /// What each job holds, including what was placed so far.
    pub(crate) usage: BTreeMap<JobId, Vec<u64>>,
    pub(crate) placed: Vec<bool>,
    pub(crate) assignments: Vec<Assignment>,
}

impl Problem {
    pub(crate) fn new(input: &PlacementInput<'_>) -> Self {
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

    pub(crate) fn fits(&self, task: usize, offer: usize) -> bool {
        self.demand[task]
            .iter()
            .zip(&self.free[offer])
            .all(|(d, f)| d <= f)
    }

    /// Places a task that fits; the caller checked [`Problem::fits`].
    pub(crate) fn place(&mut self, task: usize, offer: usize) {
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

    /// A job's dominant share of the cluster (resources the cluster lacks are ignored).
    pub(crate) fn share(&self, job: JobId) -> f64 {
        self.usage.get(&job).map_or(0.0, |held| {
            held.iter()
                .zip(&self.cluster)
                .filter(|(_, c)| **c > 0)
                .map(|(u, c)| *u as f64 / *c as f64)
                .fold(0.0, f64::max)
        })
    }

    /// The unplaced tasks of `job`, in input order.
    pub(crate) fn unplaced_of(&self, job: JobId) -> impl Iterator<Item = usize> + '_ {
        (0..self.job.len()).filter(move |&t| !self.placed[t] && self.job[t] == job)
    }

    /// The jobs with unplaced tasks, furthest below their fair share first (lowest dominant
    /// share; ties by job id, so results are reproducible).
    pub(crate) fn jobs_by_share(&self) -> Vec<JobId> {
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

    /// True when some unplaced task of `job` fits some offer.
    pub(crate) fn job_can_place(&self, job: JobId) -> bool {
        self.unplaced_of(job)
            .any(|t| (0..self.free.len()).any(|o| self.fits(t, o)))
    }
}
