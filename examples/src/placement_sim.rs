//! An offline, discrete-event simulation of one batch framework on a cluster, to compare
//! placement policies on makespan and job completion time without a coordinator.
//!
//! The model: every job arrives at time 0; whenever tasks end (and at the start), every agent
//! with free room is offered to the framework, which places its queued tasks with the policy;
//! a placed task holds its demand for its duration. Time is simulated, so results are exact and
//! reproducible.

use std::collections::BTreeMap;

use framework_sdk::placement::{JobId, OfferSlot, PendingTask, Placement, PlacementInput};
use framework_sdk::{AgentId, OfferId, Resources};

use crate::tetris_batch::JobSpec;

/// What one simulated run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    /// The policy's name.
    pub policy: String,
    /// When the last task ended, in simulated seconds.
    pub makespan_s: f64,
    /// Mean over jobs of the time their last task ended.
    pub avg_job_completion_s: f64,
    /// Tasks that could never be placed (bigger than any agent).
    pub unplaceable: usize,
}

struct Running {
    ends_at: f64,
    agent: usize,
    job: JobId,
    demand: Resources,
}

/// Simulates `jobs` on `agents` identical agents of `agent_total` with `policy`.
pub fn simulate(
    jobs: &[JobSpec],
    agents: usize,
    agent_total: &Resources,
    policy: &dyn Placement,
) -> SimResult {
    let mut queue: Vec<PendingTask> = Vec::new();
    let mut left: Vec<usize> = Vec::new();
    for (j, job) in jobs.iter().enumerate() {
        let mut count = 0;
        for g in &job.tasks {
            for _ in 0..g.count {
                queue.push(PendingTask {
                    job: j as JobId,
                    demand: g.resources.clone(),
                    duration_s: g.duration_s,
                });
                count += 1;
            }
        }
        left.push(count);
    }
    let unplaceable = queue
        .iter()
        .filter(|t| !t.demand.fits_in(agent_total))
        .count();
    queue.retain(|t| t.demand.fits_in(agent_total));
    let ids: Vec<AgentId> = (0..agents).map(|_| AgentId::new()).collect();
    let mut free: Vec<Resources> = vec![agent_total.clone(); agents];
    let mut cluster = Resources::new();
    for _ in 0..agents {
        cluster.add_assign(agent_total);
    }
    let mut usage: BTreeMap<JobId, Resources> = BTreeMap::new();
    let mut running: Vec<Running> = Vec::new();
    let mut job_end = vec![0.0f64; jobs.len()];
    let mut now = 0.0;
    loop {
        // Offer every agent with room.
        let offered: Vec<usize> = (0..agents).filter(|&a| !free[a].is_empty()).collect();
        let slots: Vec<OfferSlot> = offered
            .iter()
            .map(|&a| OfferSlot {
                offer_id: OfferId::new(),
                agent_id: ids[a],
                free: free[a].clone(),
                total: agent_total.clone(),
            })
            .collect();
        let input = PlacementInput {
            offers: &slots,
            tasks: &queue,
            job_usage: &usage,
            cluster_total: &cluster,
        };
        let mut placed: Vec<usize> = Vec::new();
        for a in policy.place(&input) {
            let agent = offered[a.offer];
            let task = &queue[a.task];
            // Policies never over-commit; a failure here would be a bug worth stopping on.
            let Some(rest) = free[agent].checked_sub(&task.demand) else {
                break;
            };
            free[agent] = rest;
            usage.entry(task.job).or_default().add_assign(&task.demand);
            running.push(Running {
                ends_at: now + task.duration_s,
                agent,
                job: task.job,
                demand: task.demand.clone(),
            });
            placed.push(a.task);
        }
        placed.sort_unstable();
        for t in placed.into_iter().rev() {
            queue.swap_remove(t);
        }
        // Advance to the next task end and release everything ending then.
        let Some(next) = running.iter().map(|r| r.ends_at).min_by(f64::total_cmp) else {
            break;
        };
        now = next;
        let (done, still): (Vec<Running>, Vec<Running>) =
            running.into_iter().partition(|r| r.ends_at <= now);
        running = still;
        for r in done {
            free[r.agent].add_assign(&r.demand);
            if let Some(held) = usage.get_mut(&r.job) {
                *held = held.saturating_sub(&r.demand);
            }
            let j = r.job as usize;
            left[j] -= 1;
            if left[j] == 0 {
                job_end[j] = now;
            }
        }
    }
    let makespan_s = job_end.iter().copied().fold(0.0, f64::max);
    let avg_job_completion_s = if job_end.is_empty() {
        0.0
    } else {
        job_end.iter().sum::<f64>() / job_end.len() as f64
    };
    SimResult {
        policy: policy.name().to_owned(),
        makespan_s,
        avg_job_completion_s,
        unplaceable,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use framework_sdk::placement::{FirstFit, Tetris};

    use super::*;
    use crate::tetris_batch::TaskGroup;

    fn job(name: &str, demand: &str, duration_s: f64, count: usize) -> JobSpec {
        JobSpec {
            name: name.into(),
            tasks: vec![TaskGroup {
                resources: demand.parse().unwrap(),
                duration_s,
                count,
            }],
        }
    }

    #[test]
    fn hand_computed_schedule() {
        // One agent <4, 4>. Job a: two <2, 2> tasks of 1 s; job b: one <4, 4> task of 1 s.
        // First fit in DRF order: a's two tasks together (0-1 s), then b (1-2 s).
        let jobs = [
            job("a", "cpus=2,mem=2", 1.0, 2),
            job("b", "cpus=4,mem=4", 1.0, 1),
        ];
        let total: Resources = "cpus=4,mem=4".parse().unwrap();
        let r = simulate(&jobs, 1, &total, &FirstFit);
        assert_eq!(
            (r.makespan_s, r.avg_job_completion_s, r.unplaceable),
            (2.0, 1.5, 0)
        );
    }

    #[test]
    fn complementary_demands_are_packed_together() {
        // Agent <4, 4>. CPU-heavy tasks <3, 1> and memory-heavy tasks <1, 3>, 1 s each.
        let jobs = [
            job("cpu", "cpus=3,mem=1", 1.0, 2),
            job("mem", "cpus=1,mem=3", 1.0, 2),
        ];
        let total: Resources = "cpus=4,mem=4".parse().unwrap();
        let r = simulate(&jobs, 1, &total, &Tetris::new(0.0).unwrap());
        assert_eq!(r.makespan_s, 2.0, "one of each per second");
        let big = [job("huge", "cpus=9", 1.0, 1)];
        assert_eq!(simulate(&big, 1, &total, &FirstFit).unplaceable, 1);
    }
}
