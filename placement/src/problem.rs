//! The working state all policies share, built once per `place` call: dense resource vectors
//! (resource `k` of every vector is the same name), what is left of each offer, the pending tasks
//! grouped into classes of equal demand within a job, what each job holds, and the jobs in DRF
//! order.
//!
//! Grouping is what makes placement fast on big queues: tasks of one job with the same demand fit
//! the same offers and score the same there, so a policy looks at a class once, not at each of
//! its tasks, and always places the class's earliest unplaced task (the one a task-by-task scan
//! in input order would find first).

use std::collections::{BTreeSet, HashMap};

use protocol::{ResourceName, Resources};

use super::constraints::{ConstraintInput, Stage};
use super::{agents_total, Assignment, JobId, PlacementInput};

/// Alignment scores are summed exactly, as integers in units of `1 / ALIGN_SCALE`, so a sum kept
/// up to date as offers change equals the sum recomputed from scratch, in any order.
pub(crate) const ALIGN_SCALE: f64 = 4_503_599_627_370_496.0; // 2^52

/// Remaining work (duration times normalised size) is summed exactly in units of
/// `1 / WORK_SCALE`, for the same reason.
pub(crate) const WORK_SCALE: f64 = 18_446_744_073_709_551_616.0; // 2^64

/// True when `demand` fits in `free`, resource by resource.
pub(crate) fn fits(demand: &[u64], free: &[u64]) -> bool {
    demand.iter().zip(free).all(|(d, f)| d <= f)
}

/// Tetris' alignment `sum_j (d_j / T_j) * (W_j / T_j)` on dense vectors in thousandths.
#[cfg(test)]
pub(crate) fn align(demand: &[u64], free: &[u64], total: &[u64]) -> f64 {
    demand
        .iter()
        .zip(free)
        .zip(total)
        .filter(|(_, t)| **t > 0)
        .map(|((d, w), t)| {
            let t = *t as f64;
            (*d as f64 / t) * (*w as f64 / t)
        })
        .sum()
}

/// An alignment as an exact summand. Alignments are at most the number of resources when free
/// room and demand are within the agent's total; absurd inputs saturate (at 2^11), and sums wrap,
/// so they stay exact and order-independent even then. (Through `i64`: a hardware conversion.)
pub(crate) fn quantize_align(a: f64) -> i128 {
    i128::from((a * ALIGN_SCALE) as i64)
}

/// One task's remaining work, `duration * sum_j d_j / R_j`, as an exact summand.
pub(crate) fn work(duration: f64, demand: &[u64], cluster: &[u64]) -> i128 {
    let size: f64 = demand
        .iter()
        .zip(cluster)
        .filter(|(_, r)| **r > 0)
        .map(|(d, r)| *d as f64 / *r as f64)
        .sum();
    (duration * size * WORK_SCALE) as i128
}

/// Tetris' remaining-work score `1 / work` of a job whose pending tasks' work sums to `work`;
/// zero when there is no measurable work.
pub(crate) fn remaining_score(work: i128) -> f64 {
    if work > 0 {
        let w = work as f64 / WORK_SCALE;
        if w > 0.0 && w.is_finite() {
            return 1.0 / w;
        }
    }
    0.0
}

/// The room an offer keeps after taking `demand`, each resource as a fraction of the agent,
/// summed (best fit's measure).
pub(crate) fn leftover(free: &[u64], demand: &[u64], total: &[u64]) -> f64 {
    free.iter()
        .zip(demand)
        .zip(total)
        .filter(|(_, t)| **t > 0)
        .map(|((f, d), t)| f.saturating_sub(*d) as f64 / *t as f64)
        .sum()
}

/// A dominant share as an ordered key (shares are never NaN; `total_cmp` orders them anyway).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Share(pub(crate) f64);

impl PartialEq for Share {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Share {}
impl PartialOrd for Share {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Share {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Pending tasks of one job with one demand.
pub(crate) struct Class {
    /// Index into [`Problem::jobs`].
    pub(crate) job: usize,
    pub(crate) demand: Vec<u64>,
    /// The class's tasks (indices into the input's tasks), in input order.
    pub(crate) tasks: Vec<usize>,
    /// How many of `tasks` are placed (always a prefix).
    pub(crate) placed: usize,
}

impl Class {
    /// The earliest unplaced task.
    pub(crate) fn head(&self) -> Option<usize> {
        self.tasks.get(self.placed).copied()
    }

    /// How many tasks are unplaced.
    pub(crate) fn left(&self) -> usize {
        self.tasks.len() - self.placed
    }
}

/// One job with pending tasks.
pub(crate) struct Job {
    pub(crate) id: JobId,
    /// What it holds, including what was placed so far.
    pub(crate) usage: Vec<u64>,
    pub(crate) share: f64,
    /// `(head task, class)` of its classes that have unplaced tasks and may still fit an offer,
    /// in the order of their earliest unplaced task.
    pub(crate) live: BTreeSet<(usize, usize)>,
    pub(crate) unplaced: usize,
}

/// A placement problem in dense form.
pub(crate) struct Problem {
    /// Resources per vector.
    pub(crate) r: usize,
    /// Number of offers.
    pub(crate) offers: usize,
    /// Free room left in each offer, `r` values per offer, in thousandths.
    pub(crate) free: Vec<u64>,
    /// Each offer's agent total, `r` values per offer, in thousandths.
    pub(crate) total: Vec<u64>,
    /// Each task's duration in seconds (0 when unknown or invalid).
    pub(crate) duration: Vec<f64>,
    /// The capacity shares are measured against.
    pub(crate) cluster: Vec<u64>,
    pub(crate) classes: Vec<Class>,
    pub(crate) jobs: Vec<Job>,
    /// Jobs with unplaced tasks, lowest dominant share first (ties by job id), less those
    /// retired because nothing of theirs fits any more.
    pub(crate) order: BTreeSet<(Share, JobId, usize)>,
    /// Jobs with unplaced tasks, retired or not.
    pub(crate) with_unplaced: usize,
    pub(crate) assignments: Vec<Assignment>,
    /// The constraint filter stage (`constraints.rs`); `None` when the call has none.
    stage: Option<Stage>,
    /// Set by [`Problem::place`]: the last placement brought one of its job's counts to its
    /// limit, so offers the job's classes could use before may be closed to them now.
    pub(crate) tightened: bool,
}

impl Problem {
    pub(crate) fn new(input: &PlacementInput<'_>) -> Self {
        let mut names: Vec<ResourceName> = Vec::new();
        let mut note = |r: &Resources| {
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
        let r = names.len();
        let dense_into = |res: &Resources, out: &mut Vec<u64>| {
            out.extend(names.iter().map(|n| res.millis(n.as_str())));
        };
        let dense = |res: &Resources| {
            let mut v = Vec::with_capacity(r);
            dense_into(res, &mut v);
            v
        };
        let cluster = if input.cluster_total.is_empty() {
            dense(&agents_total(input.offers))
        } else {
            dense(input.cluster_total)
        };
        let mut free = Vec::with_capacity(input.offers.len() * r);
        let mut total = Vec::with_capacity(input.offers.len() * r);
        for o in input.offers {
            dense_into(&o.free, &mut free);
            dense_into(&o.total, &mut total);
        }

        let mut job_index: HashMap<JobId, usize> = HashMap::new();
        let mut class_index: HashMap<(usize, Vec<u64>), usize> = HashMap::new();
        let mut jobs: Vec<Job> = Vec::new();
        let mut classes: Vec<Class> = Vec::new();
        let mut duration = Vec::with_capacity(input.tasks.len());
        for (i, t) in input.tasks.iter().enumerate() {
            duration.push(if t.duration_s.is_finite() && t.duration_s > 0.0 {
                t.duration_s
            } else {
                0.0
            });
            let j = *job_index.entry(t.job).or_insert_with(|| {
                jobs.push(Job {
                    id: t.job,
                    usage: input
                        .job_usage
                        .get(&t.job)
                        .map_or_else(|| vec![0; r], &dense),
                    share: 0.0,
                    live: BTreeSet::new(),
                    unplaced: 0,
                });
                jobs.len() - 1
            });
            jobs[j].unplaced += 1;
            let c = *class_index
                .entry((j, dense(&t.demand)))
                .or_insert_with_key(|key| {
                    classes.push(Class {
                        job: j,
                        demand: key.1.clone(),
                        tasks: Vec::new(),
                        placed: 0,
                    });
                    jobs[j].live.insert((i, classes.len() - 1));
                    classes.len() - 1
                });
            classes[c].tasks.push(i);
        }
        let mut p = Self {
            r,
            offers: input.offers.len(),
            free,
            total,
            duration,
            cluster,
            classes,
            with_unplaced: jobs.len(),
            jobs,
            order: BTreeSet::new(),
            assignments: Vec::new(),
            stage: None,
            tightened: false,
        };
        for j in 0..p.jobs.len() {
            let share = p.share_of(&p.jobs[j].usage);
            p.jobs[j].share = share;
            p.order.insert((Share(share), p.jobs[j].id, j));
        }
        p
    }

    /// The problem with the constraint stage of `constraints` prepared (once, for this call).
    pub(crate) fn constrained(
        input: &PlacementInput<'_>,
        constraints: &ConstraintInput<'_>,
    ) -> Self {
        let mut p = Self::new(input);
        if !constraints.jobs.is_empty() {
            let ids: Vec<JobId> = p.jobs.iter().map(|j| j.id).collect();
            p.stage = Some(Stage::new(&ids, p.offers, constraints));
        }
        p
    }

    /// Whether the constraints let a task of dense job `j` go on offer `o` now.
    #[inline]
    pub(crate) fn allows(&self, j: usize, o: usize) -> bool {
        self.stage.as_ref().is_none_or(|s| s.allows(j, o))
    }

    /// A dominant share of the cluster (resources the cluster lacks are ignored).
    fn share_of(&self, held: &[u64]) -> f64 {
        held.iter()
            .zip(&self.cluster)
            .filter(|(_, c)| **c > 0)
            .map(|(u, c)| *u as f64 / *c as f64)
            .fold(0.0, f64::max)
    }

    /// Offer `o`'s free room.
    pub(crate) fn free_of(&self, o: usize) -> &[u64] {
        &self.free[o * self.r..(o + 1) * self.r]
    }

    /// Offer `o`'s agent total.
    pub(crate) fn total_of(&self, o: usize) -> &[u64] {
        &self.total[o * self.r..(o + 1) * self.r]
    }

    /// True when class `c`'s demand fits offer `o` and the constraints allow it there: the
    /// one filter every policy asks.
    pub(crate) fn fits(&self, c: usize, o: usize) -> bool {
        let class = &self.classes[c];
        fits(&class.demand, self.free_of(o)) && self.allows(class.job, o)
    }

    /// The job furthest below its fair share that is not retired.
    pub(crate) fn first_job(&self) -> Option<usize> {
        self.order.first().map(|k| k.2)
    }

    /// Takes a job out of the DRF order for good: none of its tasks fits any offer (offers only
    /// shrink, so none ever will in this call).
    pub(crate) fn retire(&mut self, j: usize) {
        let job = &self.jobs[j];
        self.order.remove(&(Share(job.share), job.id, j));
    }

    /// Takes class `c` out of its job's live classes for good (it fits no offer any more).
    pub(crate) fn kill_class(&mut self, c: usize) {
        let class = &self.classes[c];
        if let Some(head) = class.head() {
            self.jobs[class.job].live.remove(&(head, c));
        }
    }

    /// Places class `c`'s earliest unplaced task on offer `o`, which it fits, and returns the
    /// task. Keeps the job's usage, share and place in the DRF order up to date.
    pub(crate) fn place(&mut self, c: usize, o: usize) -> usize {
        let r = self.r;
        let class = &mut self.classes[c];
        let Some(task) = class.head() else {
            return usize::MAX;
        };
        class.placed += 1;
        let next = class.head();
        let j = class.job;
        for (f, d) in self.free[o * r..(o + 1) * r].iter_mut().zip(&class.demand) {
            *f = f.saturating_sub(*d);
        }
        let job = &mut self.jobs[j];
        for (u, d) in job.usage.iter_mut().zip(&class.demand) {
            *u = u.saturating_add(*d);
        }
        job.live.remove(&(task, c));
        if let Some(next) = next {
            job.live.insert((next, c));
        }
        job.unplaced -= 1;
        let old_key = (Share(job.share), job.id, j);
        let done = job.unplaced == 0;
        let share = self.share_of(&self.jobs[j].usage);
        let job = &mut self.jobs[j];
        job.share = share;
        self.order.remove(&old_key);
        if done {
            self.with_unplaced -= 1;
        } else {
            self.order.insert((Share(share), job.id, j));
        }
        self.tightened = self.stage.as_mut().is_some_and(|s| s.record(j, o));
        self.assignments.push(Assignment { task, offer: o });
        task
    }
}
