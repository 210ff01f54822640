//! Properties every policy keeps, on random offers and tasks.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use protocol::{AgentId, OfferId, Resources};

use super::*;

fn resources() -> impl Strategy<Value = Resources> {
    (0u32..8, 0u32..32, prop::option::of(0u32..2)).prop_map(|(c, m, g)| {
        let mut pairs = vec![("cpus", f64::from(c) / 2.0), ("mem", f64::from(m) * 256.0)];
        if let Some(g) = g {
            pairs.push(("gpus", f64::from(g)));
        }
        Resources::from_units(pairs).unwrap()
    })
}

fn offer() -> impl Strategy<Value = OfferSlot> {
    (resources(), resources()).prop_map(|(a, b)| {
        // The free room is at most the total: total = a + b, free = a.
        OfferSlot {
            offer_id: OfferId::new(),
            agent_id: AgentId::new(),
            total: a.add(&b),
            free: a,
        }
    })
}

fn pending() -> impl Strategy<Value = PendingTask> {
    (0u64..5, resources(), 1u32..100).prop_map(|(job, demand, d)| PendingTask {
        job,
        demand,
        duration_s: f64::from(d),
    })
}

fn usage() -> impl Strategy<Value = BTreeMap<JobId, Resources>> {
    prop::collection::btree_map(0u64..5, resources(), 0..5)
}

fn policies() -> Vec<Box<dyn Placement>> {
    vec![
        Box::new(FirstFit),
        Box::new(BestFit),
        Box::new(Tetris::new(0.0).unwrap()),
        Box::new(Tetris::default()),
        Box::new(Tetris::new(0.999).unwrap()),
    ]
}

/// What is left of each offer after the assignments, checking none goes below zero.
fn apply(offers: &[OfferSlot], tasks: &[PendingTask], got: &[Assignment]) -> Vec<Resources> {
    let mut left: Vec<Resources> = offers.iter().map(|o| o.free.clone()).collect();
    let mut seen = vec![false; tasks.len()];
    for a in got {
        assert!(
            a.task < tasks.len() && a.offer < offers.len(),
            "index out of range: {a:?}"
        );
        assert!(!seen[a.task], "task {} placed twice", a.task);
        seen[a.task] = true;
        left[a.offer] = left[a.offer]
            .checked_sub(&tasks[a.task].demand)
            .unwrap_or_else(|| panic!("offer {} over-committed by task {}", a.offer, a.task));
    }
    left
}

proptest! {
    #[test]
    fn never_over_commits_and_places_until_nothing_fits(
        offers in prop::collection::vec(offer(), 0..5),
        tasks in prop::collection::vec(pending(), 0..25),
        usage in usage(),
    ) {
        let cluster = Resources::new();
        let input = PlacementInput { offers: &offers, tasks: &tasks, job_usage: &usage, cluster_total: &cluster };
        for policy in policies() {
            let got = policy.place(&input);
            let left = apply(&offers, &tasks, &got);
            let placed: Vec<usize> = got.iter().map(|a| a.task).collect();
            for (t, task) in tasks.iter().enumerate().filter(|(t, _)| !placed.contains(t)) {
                for l in &left {
                    prop_assert!(!task.demand.fits_in(l),
                        "{}: task {t} still fits an offer", policy.name());
                }
            }
        }
    }

    #[test]
    fn fairness_near_one_always_serves_the_job_furthest_below_its_share(
        offers in prop::collection::vec(offer(), 1..4),
        tasks in prop::collection::vec(pending(), 1..20),
        usage in usage(),
    ) {
        let cluster = agents_total(&offers);
        let input = PlacementInput { offers: &offers, tasks: &tasks, job_usage: &usage, cluster_total: &cluster };
        let got = Tetris::new(0.999).unwrap().place(&input);
        // Replay the assignments with our own bookkeeping.
        let mut left: Vec<Resources> = offers.iter().map(|o| o.free.clone()).collect();
        let mut held = usage.clone();
        let mut placed = vec![false; tasks.len()];
        for a in &got {
            let share = |job: JobId| held.get(&job).map_or(0.0, |r| r.dominant_share(&cluster));
            let can_place = |job: JobId| tasks.iter().enumerate().any(|(t, task)| {
                !placed[t] && task.job == job && left.iter().any(|l| task.demand.fits_in(l))
            });
            let eligible: Vec<JobId> = {
                let mut jobs: Vec<JobId> = tasks.iter().map(|t| t.job).filter(|j| can_place(*j)).collect();
                jobs.sort_unstable();
                jobs.dedup();
                jobs
            };
            let lowest = eligible.iter().map(|j| share(*j)).fold(f64::INFINITY, f64::min);
            let chosen = tasks[a.task].job;
            prop_assert!(share(chosen) <= lowest + 1e-12,
                "job {chosen} at share {} chosen while another job is at {lowest}", share(chosen));
            left[a.offer] = left[a.offer].checked_sub(&tasks[a.task].demand).unwrap();
            held.entry(chosen).or_default().add_assign(&tasks[a.task].demand);
            placed[a.task] = true;
        }
    }
}

/// Offers on a few shared agents, so the cluster total and ties between offers are exercised.
fn offers_on_agents() -> impl Strategy<Value = Vec<OfferSlot>> {
    prop::collection::vec((offer(), 0usize..3), 0..8).prop_map(|list| {
        let agents = [AgentId::new(), AgentId::new(), AgentId::new()];
        list.into_iter()
            .map(|(mut o, a)| {
                o.agent_id = agents[a];
                o
            })
            .collect()
    })
}

/// Tasks drawn from a few shapes, so jobs have several tasks of equal demand (the classes the
/// fast policies group by), in random order.
fn grouped_tasks() -> impl Strategy<Value = Vec<PendingTask>> {
    (
        prop::collection::vec(resources(), 1..4),
        prop::collection::vec((0u64..4, 0usize..3, 1u32..20), 0..30),
    )
        .prop_map(|(shapes, picks)| {
            picks
                .into_iter()
                .map(|(job, s, d)| PendingTask {
                    job,
                    demand: shapes[s % shapes.len()].clone(),
                    duration_s: f64::from(d),
                })
                .collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fast_policies_choose_exactly_as_the_straightforward_ones(
        offers in offers_on_agents(),
        tasks in prop_oneof![grouped_tasks(), prop::collection::vec(pending(), 0..25)],
        usage in usage(),
        fairness in prop_oneof![Just(0.0), Just(0.25), Just(0.5), Just(0.999)],
        given_cluster in any::<bool>(),
    ) {
        let cluster = if given_cluster {
            agents_total(&offers).add(&"cpus=8,mem=8192".parse().unwrap())
        } else {
            Resources::new()
        };
        let input = PlacementInput { offers: &offers, tasks: &tasks, job_usage: &usage, cluster_total: &cluster };
        prop_assert_eq!(FirstFit.place(&input), reference::first_fit(&input));
        prop_assert_eq!(BestFit.place(&input), reference::best_fit(&input));
        prop_assert_eq!(
            Tetris::new(fairness).unwrap().place(&input),
            reference::tetris(fairness, &input)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn fast_policies_choose_exactly_as_the_straightforward_ones_on_bigger_inputs(
        offers in prop::collection::vec(offer(), 20..60),
        shapes in prop::collection::vec(resources(), 1..6),
        picks in prop::collection::vec((0u64..12, 0usize..6, 1u32..20), 50..200),
        fairness in prop_oneof![Just(0.0), Just(0.25), Just(0.9)],
    ) {
        let tasks: Vec<PendingTask> = picks
            .into_iter()
            .map(|(job, s, d)| PendingTask {
                job,
                demand: shapes[s % shapes.len()].clone(),
                duration_s: f64::from(d),
            })
            .collect();
        let usage = BTreeMap::new();
        let cluster = Resources::new();
        let input = PlacementInput { offers: &offers, tasks: &tasks, job_usage: &usage, cluster_total: &cluster };
        prop_assert_eq!(FirstFit.place(&input), reference::first_fit(&input));
        prop_assert_eq!(BestFit.place(&input), reference::best_fit(&input));
        prop_assert_eq!(
            Tetris::new(fairness).unwrap().place(&input),
            reference::tetris(fairness, &input)
        );
    }
}
