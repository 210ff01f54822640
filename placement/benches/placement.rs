//! How long one `place` call takes, per policy:
//!
//! - `place_20_offers_500_tasks`: 20 offers and 500 pending tasks in 25 jobs.
//! - `place_1000_offers_5000_tasks`: the large queue: 100 jobs of 50 tasks (each job two
//!   groups of 25 equal tasks, demands up to 4 cpus / 4 GiB) onto 1,000 partially free offers of
//!   agents with cpus=24, mem=65536.
//! - `place_1000_offers_5000_tasks_constrained`: the same with constraints: the
//!   offers' agents in 3 zones and 50 racks; of the 100 jobs, a quarter need `zone != a`, a
//!   quarter at most 5 tasks per rack, a quarter `zone == b` and spread over racks, a quarter
//!   none; 20 tasks of each constrained job already run.
//!
//! Run with: `cargo bench -p parley-placement --bench placement` (add a filter such as
//! `place_1000` to run one group).
#![allow(clippy::unwrap_used)]
// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use placement::{
    BestFit, Constraint, ConstraintInput, FirstFit, OfferSlot, PendingTask, Placement,
    PlacementInput, Tetris,
};
use protocol::{AgentId, OfferId, Resources};
use rand::{Rng, SeedableRng};

fn workload(offers: usize, tasks: usize, jobs: u64) -> (Vec<OfferSlot>, Vec<PendingTask>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let total: Resources = "cpus=16,mem=32768".parse().unwrap();
    let slots = (0..offers)
        .map(|_| {
            let free = Resources::from_units([
                ("cpus", rng.gen_range(2..=16) as f64),
                ("mem", rng.gen_range(4..=32) as f64 * 1024.0),
            ])
            .unwrap();
            OfferSlot {
                offer_id: OfferId::new(),
                agent_id: AgentId::new(),
                free,
                total: total.clone(),
            }
        })
        .collect();
    let pending = (0..tasks)
        .map(|i| PendingTask {
            job: i as u64 % jobs,
            demand: Resources::from_units([
                ("cpus", rng.gen_range(1..=8) as f64 * 0.5),
                ("mem", rng.gen_range(1..=16) as f64 * 512.0),
            ])
            .unwrap(),
            duration_s: rng.gen_range(1..=60) as f64,
        })
        .collect();
    (slots, pending)
}

/// The benchmark's queue: `jobs` jobs of `per_job` tasks in two groups of equal tasks, on `offers`
/// offers of agents cpus=24, mem=65536 with 1 to 24 cpus and 1 to 64 GiB free.
fn big_workload(
    offers: usize,
    jobs: u64,
    per_job: usize,
) -> (Vec<OfferSlot>, Vec<PendingTask>, Resources) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(8);
    let total: Resources = "cpus=24,mem=65536".parse().unwrap();
    let slots: Vec<OfferSlot> = (0..offers)
        .map(|_| OfferSlot {
            offer_id: OfferId::new(),
            agent_id: AgentId::new(),
            free: Resources::from_units([
                ("cpus", rng.gen_range(1..=24) as f64),
                ("mem", rng.gen_range(1..=64) as f64 * 1024.0),
            ])
            .unwrap(),
            total: total.clone(),
        })
        .collect();
    let mut pending = Vec::new();
    for job in 0..jobs {
        for _ in 0..2 {
            let demand = Resources::from_units([
                ("cpus", rng.gen_range(1..=8) as f64 * 0.5),
                ("mem", rng.gen_range(1..=16) as f64 * 256.0),
            ])
            .unwrap();
            let duration_s = rng.gen_range(1..=10) as f64;
            for _ in 0..per_job / 2 {
                pending.push(PendingTask {
                    job,
                    demand: demand.clone(),
                    duration_s,
                });
            }
        }
    }
    // The cluster is bigger than what is offered: 1,000 agents in all.
    let mut cluster = Resources::new();
    for _ in 0..offers.max(1000) {
        cluster.add_assign(&total);
    }
    (slots, pending, cluster)
}

fn policies() -> Vec<Box<dyn Placement>> {
    vec![
        Box::new(FirstFit),
        Box::new(BestFit),
        Box::new(Tetris::default()),
    ]
}

fn small(c: &mut Criterion) {
    let (offers, tasks) = workload(20, 500, 25);
    let usage = BTreeMap::new();
    let cluster = Resources::new();
    let input = PlacementInput {
        offers: &offers,
        tasks: &tasks,
        job_usage: &usage,
        cluster_total: &cluster,
    };
    let mut group = c.benchmark_group("place_20_offers_500_tasks");
    for policy in &policies() {
        group.bench_function(policy.name(), |b| b.iter(|| policy.place(&input)));
    }
    group.finish();
}

fn big(c: &mut Criterion) {
    let (offers, tasks, cluster) = big_workload(1000, 100, 50);
    // Some jobs already run tasks, so DRF order is not just job ids.
    let mut usage = BTreeMap::new();
    for job in (0..100u64).step_by(7) {
        usage.insert(
            job,
            Resources::from_units([("cpus", job as f64), ("mem", 1024.0 * job as f64)]).unwrap(),
        );
    }
    let input = PlacementInput {
        offers: &offers,
        tasks: &tasks,
        job_usage: &usage,
        cluster_total: &cluster,
    };
    let mut group = c.benchmark_group("place_1000_offers_5000_tasks");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    for policy in &policies() {
        group.bench_function(policy.name(), |b| b.iter(|| policy.place(&input)));
    }
    group.finish();
}

fn big_constrained(c: &mut Criterion) {
    let (offers, tasks, cluster) = big_workload(1000, 100, 50);
    let usage = BTreeMap::new();
    let attributes: Vec<BTreeMap<String, String>> = (0..offers.len())
        .map(|o| {
            BTreeMap::from([
                ("zone".to_owned(), ["a", "b", "c"][o % 3].to_owned()),
                ("rack".to_owned(), format!("r{}", o % 50)),
            ])
        })
        .collect();
    let mut jobs = BTreeMap::new();
    let mut running = BTreeMap::new();
    for job in 0..100u64 {
        let constraints = match job % 4 {
            0 => vec![Constraint::not_equals("zone", "a")],
            1 => vec![Constraint::max_per_value("rack", 5)],
            2 => vec![Constraint::equals("zone", "b"), Constraint::spread("rack")],
            _ => continue,
        };
        jobs.insert(job, constraints);
        running.insert(job, attributes[..20].to_vec());
    }
    let input = PlacementInput {
        offers: &offers,
        tasks: &tasks,
        job_usage: &usage,
        cluster_total: &cluster,
    };
    let constraints = ConstraintInput {
        offer_attributes: &attributes,
        jobs: &jobs,
        running: &running,
    };
    let mut group = c.benchmark_group("place_1000_offers_5000_tasks_constrained");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    for policy in &policies() {
        group.bench_function(policy.name(), |b| {
            b.iter(|| policy.place_constrained(&input, &constraints))
        });
    }
    group.finish();
}

criterion_group!(benches, small, big, big_constrained);
criterion_main!(benches);
