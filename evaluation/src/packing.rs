//! Part 2, packing: an event-driven simulation of one batch framework placing a [`Job`] workload
//! on identical agents with a [`Placement`] policy, with the Tetris paper's contention model.
//!
//! Contention model: a task holds its CPU, memory, disk and network demand on its agent while it
//! runs. Memory is a hard limit (every policy sees it). CPU, disk and network are rates: when the
//! running tasks' demands of one exceed the agent's capacity, every task using it progresses at
//! `capacity / demanded` of full speed; a task's speed is the lowest over the rate kinds it uses.
//! A policy that is *blind* sees only CPU and memory (as the paper's slot-based baselines do),
//! so it over-subscribes disk and network and its tasks slow down; an *aware* policy sees all
//! four kinds and never over-subscribes.
//!
//! Whenever tasks end or jobs arrive, every agent with room is offered and the policy places
//! queued tasks of the arrived jobs.

use std::collections::BTreeMap;

use placement::{JobId, OfferSlot, PendingTask, Placement, PlacementInput};
use protocol::{AgentId, OfferId, Resources};
use uuid::Uuid;

use crate::workload::{Job, WorkloadSpec, KINDS, RATE_KINDS};

/// Which resources the policy sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// All four kinds.
    Aware,
    /// CPU and memory only.
    Blind,
}

/// One utilisation sample: time and per-kind demanded / capacity over the cluster (above 1 means
/// over-subscribed).
pub type Sample = (f64, [f64; 4]);

/// What one run measured.
#[derive(Debug, Clone)]
pub struct PackingRun {
    /// When the last task ended, seconds.
    pub makespan_s: f64,
    /// Mean over jobs of completion minus arrival, seconds.
    pub avg_jct_s: f64,
    /// Time-averaged useful utilisation per kind (demand capped at capacity) until the makespan.
    pub utilisation: [f64; 4],
    /// Time-averaged normalised deviation of waiting jobs' dominant shares from their equal
    /// (DRF) share: 0 is perfectly fair.
    pub unfairness: f64,
    /// Mean slowdown of tasks (actual / nominal run time).
    pub slowdown: f64,
    /// Utilisation over time (at most about 400 samples).
    pub samples: Vec<Sample>,
    /// Tasks too big for any agent (dropped).
    pub unplaceable: usize,
}

struct Task {
    job: usize,
    agent: usize,
    started: f64,
    nominal: f64,
    left: f64,
}

fn resources(v: &[f64; 4], view: View) -> Resources {
    let n = if view == View::Aware { 4 } else { 2 };
    let pairs = KINDS.iter().zip(v.iter()).take(n).map(|(k, x)| (*k, *x));
    Resources::from_units(pairs).unwrap_or_default()
}

/// Simulates `jobs` on the agents of `spec` with `policy` seeing `view`.
pub fn simulate(
    jobs: &[Job],
    spec: &WorkloadSpec,
    policy: &dyn Placement,
    view: View,
) -> PackingRun {
    let cap = spec.agent;
    let n_agents = spec.agents;
    let ids: Vec<AgentId> = (0..n_agents)
        .map(|a| AgentId(Uuid::from_u128(a as u128 + 1)))
        .collect();
    let agent_view = resources(&cap, view);
    let mut cluster_view = Resources::new();
    for _ in 0..n_agents {
        cluster_view.add_assign(&agent_view);
    }
    let fits = |d: &[f64; 4]| d.iter().zip(cap.iter()).all(|(x, c)| x <= c);
    let unplaceable = jobs
        .iter()
        .filter(|j| !fits(&j.demand))
        .map(|j| j.durations.len())
        .sum();
    let views: Vec<Resources> = jobs.iter().map(|j| resources(&j.demand, view)).collect();
    let mut left: Vec<usize> = jobs
        .iter()
        .map(|j| {
            if fits(&j.demand) {
                j.durations.len()
            } else {
                0
            }
        })
        .collect();
    let mut done_at: Vec<Option<f64>> = vec![None; jobs.len()];
    let mut queue: Vec<(usize, f64)> = Vec::new();
    let mut seen_free: Vec<Resources> = vec![agent_view.clone(); n_agents];
    let mut used = vec![[0.0f64; 4]; n_agents];
    let mut job_usage: BTreeMap<JobId, Resources> = BTreeMap::new();
    let mut job_true = vec![[0.0f64; 4]; jobs.len()];
    let mut running: Vec<Task> = Vec::new();
    let mut next_job = 0;
    let mut now = 0.0f64;
    let mut util_area = [0.0f64; 4];
    let mut unfair_area = 0.0;
    let mut unfair_time = 0.0;
    let mut slowdowns = (0.0, 0usize);
    let mut raw_samples: Vec<Sample> = Vec::new();
    let total_cap: Vec<f64> = cap.iter().map(|c| c * n_agents as f64).collect();
    loop {
        while next_job < jobs.len() && jobs[next_job].arrival_s <= now + 1e-9 {
            if fits(&jobs[next_job].demand) {
                queue.extend(jobs[next_job].durations.iter().map(|&d| (next_job, d)));
            } else {
                done_at[next_job] = Some(jobs[next_job].arrival_s);
            }
            next_job += 1;
        }
        if !queue.is_empty() {
            place(
                policy,
                &ids,
                &agent_view,
                &cluster_view,
                &views,
                jobs,
                now,
                &mut queue,
                &mut seen_free,
                &mut used,
                &mut job_usage,
                &mut job_true,
                &mut running,
            );
        }
        // Speeds under contention.
        let factor: Vec<[f64; 4]> = used
            .iter()
            .map(|u| {
                let mut f = [1.0; 4];
                for k in 0..4 {
                    if RATE_KINDS[k] && u[k] > cap[k] {
                        f[k] = cap[k] / u[k];
                    }
                }
                f
            })
            .collect();
        let speed = |t: &Task| {
            let d = &jobs[t.job].demand;
            (0..4)
                .filter(|&k| d[k] > 0.0)
                .map(|k| factor[t.agent][k])
                .fold(1.0, f64::min)
        };
        let next_end = running
            .iter()
            .map(|t| now + t.left / speed(t))
            .fold(f64::INFINITY, f64::min);
        let next_arrival = jobs.get(next_job).map_or(f64::INFINITY, |j| j.arrival_s);
        let next = next_end.min(next_arrival);
        if !next.is_finite() {
            break;
        }
        let dt = next - now;
        // Utilisation and fairness over [now, next).
        let mut demanded = [0.0f64; 4];
        for u in &used {
            for k in 0..4 {
                demanded[k] += u[k];
            }
        }
        for k in 0..4 {
            util_area[k] += demanded[k].min(total_cap[k]) * dt / total_cap[k];
        }
        raw_samples.push((now, std::array::from_fn(|k| demanded[k] / total_cap[k])));
        if let Some(dev) = deviation(&queue, &job_true, &total_cap) {
            unfair_area += dev * dt;
            unfair_time += dt;
        }
        let speeds: Vec<f64> = running.iter().map(speed).collect();
        now = next;
        let mut k = 0;
        running.retain_mut(|t| {
            t.left -= speeds[k] * dt;
            k += 1;
            if t.left > 1e-6 * t.nominal.max(1.0) {
                return true;
            }
            let d = jobs[t.job].demand;
            for r in 0..4 {
                used[t.agent][r] -= d[r];
            }
            for r in 0..4 {
                job_true[t.job][r] -= d[r];
            }
            seen_free[t.agent].add_assign(&views[t.job]);
            if let Some(u) = job_usage.get_mut(&(t.job as JobId)) {
                *u = u.saturating_sub(&views[t.job]);
            }
            slowdowns.0 += (now - t.started) / t.nominal.max(1e-9);
            slowdowns.1 += 1;
            left[t.job] -= 1;
            if left[t.job] == 0 {
                done_at[t.job] = Some(now);
            }
            false
        });
    }
    let makespan_s = done_at.iter().flatten().copied().fold(0.0, f64::max);
    let jcts: Vec<f64> = jobs
        .iter()
        .zip(&done_at)
        .filter_map(|(j, d)| d.map(|d| d - j.arrival_s))
        .collect();
    PackingRun {
        makespan_s,
        avg_jct_s: jcts.iter().sum::<f64>() / jcts.len().max(1) as f64,
        utilisation: util_area.map(|a| a / makespan_s.max(1e-9)),
        unfairness: unfair_area / unfair_time.max(1e-9),
        slowdown: slowdowns.0 / slowdowns.1.max(1) as f64,
        samples: thin(raw_samples, 400),
        unplaceable,
    }
}

/// Offers every agent with room and starts what the policy places.
#[allow(clippy::too_many_arguments)]
fn place(
    policy: &dyn Placement,
    ids: &[AgentId],
    agent_view: &Resources,
    cluster_view: &Resources,
    views: &[Resources],
    jobs: &[Job],
    now: f64,
    queue: &mut Vec<(usize, f64)>,
    seen_free: &mut [Resources],
    used: &mut [[f64; 4]],
    job_usage: &mut BTreeMap<JobId, Resources>,
    job_true: &mut [[f64; 4]],
    running: &mut Vec<Task>,
) {
    let offered: Vec<usize> = (0..ids.len())
        .filter(|&a| queue.iter().any(|(j, _)| views[*j].fits_in(&seen_free[a])))
        .collect();
    if offered.is_empty() {
        return;
    }
    let slots: Vec<OfferSlot> = offered
        .iter()
        .map(|&a| OfferSlot {
            offer_id: OfferId(Uuid::from_u128(a as u128 + 1)),
            agent_id: ids[a],
            free: seen_free[a].clone(),
            total: agent_view.clone(),
        })
        .collect();
    let tasks: Vec<PendingTask> = queue
        .iter()
        .map(|&(j, d)| PendingTask {
            job: j as JobId,
            demand: views[j].clone(),
            duration_s: d,
        })
        .collect();
    let input = PlacementInput {
        offers: &slots,
        tasks: &tasks,
        job_usage,
        cluster_total: cluster_view,
    };
    let mut placed = Vec::new();
    for a in policy.place(&input) {
        let agent = offered[a.offer];
        let (j, d) = queue[a.task];
        let Some(rest) = seen_free[agent].checked_sub(&views[j]) else {
            continue;
        };
        seen_free[agent] = rest;
        for r in 0..4 {
            used[agent][r] += jobs[j].demand[r];
            job_true[j][r] += jobs[j].demand[r];
        }
        placed.push((a.task, j, agent, d));
    }
    for &(_, j, agent, d) in &placed {
        job_usage
            .entry(j as JobId)
            .or_default()
            .add_assign(&views[j]);
        running.push(Task {
            job: j,
            agent,
            started: now,
            nominal: d,
            left: d,
        });
    }
    let mut gone: Vec<usize> = placed.iter().map(|p| p.0).collect();
    gone.sort_unstable();
    for t in gone.into_iter().rev() {
        queue.swap_remove(t);
    }
}

/// Normalised mean absolute deviation of the dominant shares of jobs with queued tasks from
/// their mean (the share DRF would equalise them to); `None` when fewer than two jobs wait.
fn deviation(queue: &[(usize, f64)], job_true: &[[f64; 4]], total: &[f64]) -> Option<f64> {
    let mut waiting: Vec<usize> = queue.iter().map(|q| q.0).collect();
    waiting.sort_unstable();
    waiting.dedup();
    if waiting.len() < 2 {
        return None;
    }
    let shares: Vec<f64> = waiting
        .iter()
        .map(|&j| {
            (0..4)
                .map(|k| job_true[j][k] / total[k])
                .fold(0.0, f64::max)
        })
        .collect();
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    if mean <= 0.0 {
        return None;
    }
    Some(shares.iter().map(|s| (s - mean).abs()).sum::<f64>() / (shares.len() as f64 * mean))
}

fn thin(samples: Vec<Sample>, most: usize) -> Vec<Sample> {
    let step = samples.len().div_ceil(most.max(1)).max(1);
    samples.into_iter().step_by(step).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use placement::{FirstFit, Tetris};

    use super::*;

    fn spec() -> WorkloadSpec {
        WorkloadSpec {
            agents: 1,
            agent: [4.0, 4.0, 2.0, 2.0],
            ..WorkloadSpec::tiny(1)
        }
    }

    fn job(demand: [f64; 4], n: usize) -> Job {
        Job {
            arrival_s: 0.0,
            demand,
            durations: vec![10.0; n],
        }
    }

    #[test]
    fn blind_placement_contends_and_slows_down() {
        // Two tasks each needing the agent's whole disk: seen together by a blind policy they
        // share the disk at half speed (20 s); an aware one runs them one after the other.
        let jobs = [job([1.0, 1.0, 2.0, 0.1], 2)];
        let blind = simulate(&jobs, &spec(), &FirstFit, View::Blind);
        assert!(
            (blind.makespan_s - 20.0).abs() < 1e-6,
            "{}",
            blind.makespan_s
        );
        assert!((blind.slowdown - 2.0).abs() < 1e-6);
        let aware = simulate(&jobs, &spec(), &FirstFit, View::Aware);
        assert!((aware.makespan_s - 20.0).abs() < 1e-6);
        assert!((aware.avg_jct_s - 20.0).abs() < 1e-6);
        assert!((aware.slowdown - 1.0).abs() < 1e-6);
        assert!(
            blind.samples.iter().any(|s| s.1[2] > 1.5),
            "disk over-subscribed"
        );
    }

    #[test]
    fn complementary_tasks_pack_and_everything_finishes() {
        let jobs = [job([3.0, 1.0, 0.1, 0.1], 2), job([1.0, 3.0, 0.1, 0.1], 2)];
        let r = simulate(&jobs, &spec(), &Tetris::new(0.0).unwrap(), View::Aware);
        assert!((r.makespan_s - 20.0).abs() < 1e-6, "{}", r.makespan_s);
        assert!(r.utilisation[0] > 0.99);
        let big = [job([9.0, 1.0, 0.1, 0.1], 1)];
        assert_eq!(
            simulate(&big, &spec(), &FirstFit, View::Aware).unplaceable,
            1
        );
    }
}
