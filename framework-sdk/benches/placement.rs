//! How long one `place` call takes: 20 offers and 500 pending tasks in 25 jobs, per policy.
//!
//! Run with: `cargo bench -p framework-sdk --bench placement`
#![allow(clippy::unwrap_used)]
// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::collections::BTreeMap;

use criterion::{criterion_group, criterion_main, Criterion};
use framework_sdk::placement::{
    BestFit, FirstFit, OfferSlot, PendingTask, Placement, PlacementInput, Tetris,
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

fn bench(c: &mut Criterion) {
    let (offers, tasks) = workload(20, 500, 25);
    let usage = BTreeMap::new();
    let cluster = Resources::new();
    let input = PlacementInput {
        offers: &offers,
        tasks: &tasks,
        job_usage: &usage,
        cluster_total: &cluster,
    };
    let policies: Vec<Box<dyn Placement>> = vec![
        Box::new(FirstFit),
        Box::new(BestFit),
        Box::new(Tetris::default()),
    ];
    let mut group = c.benchmark_group("place_20_offers_500_tasks");
    for policy in &policies {
        group.bench_function(policy.name(), |b| b.iter(|| policy.place(&input)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
