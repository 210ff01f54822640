//! Constraints: each constraint under each policy, and properties on random input:
//! no placement breaks a constraint, every task left out was left out for a reason, and without
//! constraints `place_constrained` is `place`.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use protocol::{AgentId, OfferId, Resources};

use super::tests_support::{input, slot, task};
use super::*;

type Attrs = BTreeMap<String, String>;

fn attrs(pairs: &[(&str, &str)]) -> Attrs {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
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

struct Case {
    name: &'static str,
    offers: Vec<Attrs>,
    tasks: usize,
    constraints: Vec<Constraint>,
    running: Vec<Attrs>,
    /// How many tasks every policy places.
    placed: usize,
    /// The attributes each placed task's agent must have (checked on top of `violations`).
    want: fn(&Attrs) -> bool,
}

/// Every constraint under every policy: offers of `cpus=4` each, tasks of `cpus=1` of job 1.
#[test]
fn each_constraint_holds_under_each_policy() {
    let cases = [
        Case {
            name: "zone == b",
            offers: vec![
                attrs(&[("zone", "a")]),
                attrs(&[("zone", "b")]),
                attrs(&[]),
                attrs(&[("zone", "b")]),
            ],
            tasks: 10,
            constraints: vec![Constraint::equals("zone", "b")],
            running: vec![],
            placed: 8,
            want: |a| a.get("zone").map(String::as_str) == Some("b"),
        },
        Case {
            name: "zone != a",
            offers: vec![attrs(&[("zone", "a")]), attrs(&[]), attrs(&[("zone", "c")])],
            tasks: 12,
            constraints: vec![Constraint::not_equals("zone", "a")],
            running: vec![],
            placed: 8,
            want: |a| a.get("zone").map(String::as_str) != Some("a"),
        },
        Case {
            name: "spread over rack",
            offers: vec![
                attrs(&[("rack", "r1")]),
                attrs(&[("rack", "r1")]),
                attrs(&[("rack", "r2")]),
                attrs(&[]),
                attrs(&[("rack", "r3")]),
            ],
            tasks: 6,
            constraints: vec![Constraint::spread("rack")],
            running: vec![],
            placed: 3,
            want: |a| a.contains_key("rack"),
        },
        Case {
            name: "at most 2 per rack",
            offers: vec![attrs(&[("rack", "r1")]), attrs(&[("rack", "r2")])],
            tasks: 7,
            constraints: vec![Constraint::max_per_value("rack", 2)],
            running: vec![],
            placed: 4,
            want: |a| a.contains_key("rack"),
        },
        Case {
            name: "spread counts the job's running tasks",
            offers: vec![attrs(&[("rack", "r1")]), attrs(&[("rack", "r2")])],
            tasks: 3,
            constraints: vec![Constraint::spread("rack")],
            running: vec![attrs(&[("rack", "r1")])],
            placed: 1,
            want: |a| a.get("rack").map(String::as_str) == Some("r2"),
        },
        Case {
            name: "zone == b and at most 1 per rack",
            offers: vec![
                attrs(&[("zone", "b"), ("rack", "r1")]),
                attrs(&[("zone", "b"), ("rack", "r1")]),
                attrs(&[("zone", "a"), ("rack", "r2")]),
                attrs(&[("zone", "b"), ("rack", "r3")]),
            ],
            tasks: 5,
            constraints: vec![
                Constraint::equals("zone", "b"),
                Constraint::max_per_value("rack", 1),
            ],
            running: vec![],
            placed: 2,
            want: |a| a.get("zone").map(String::as_str) == Some("b"),
        },
    ];
    for case in &cases {
        let offers: Vec<OfferSlot> = case
            .offers
            .iter()
            .map(|_| slot("cpus=4,mem=4", "cpus=4,mem=4"))
            .collect();
        let tasks: Vec<PendingTask> = (0..case.tasks).map(|_| task(1, "cpus=1")).collect();
        let usage = BTreeMap::new();
        let jobs = BTreeMap::from([(1, case.constraints.clone())]);
        let running = BTreeMap::from([(1, case.running.clone())]);
        let c = ConstraintInput {
            offer_attributes: &case.offers,
            jobs: &jobs,
            running: &running,
        };
        for policy in policies() {
            let got = policy.place_constrained(&input(&offers, &tasks, &usage), &c);
            let what = format!("{} under {}", case.name, policy.name());
            assert_eq!(violations(&tasks, &got, &c), Vec::<String>::new(), "{what}");
            assert_eq!(got.len(), case.placed, "{what}: {got:?}");
            for a in &got {
                assert!((case.want)(&case.offers[a.offer]), "{what}: {a:?}");
            }
        }
    }
}

#[test]
fn an_unconstrained_job_is_not_held_back_by_a_constrained_one() {
    // Whatever job 2 takes, zone b keeps room for job 1's two tasks.
    let offers = [slot("cpus=2", "cpus=2"), slot("cpus=4", "cpus=4")];
    let attributes = [attrs(&[("zone", "a")]), attrs(&[("zone", "b")])];
    let tasks = [
        task(1, "cpus=1"),
        task(1, "cpus=1"),
        task(2, "cpus=1"),
        task(2, "cpus=1"),
    ];
    let jobs = BTreeMap::from([(1, vec![Constraint::equals("zone", "b")])]);
    let running = BTreeMap::new();
    let c = ConstraintInput {
        offer_attributes: &attributes,
        jobs: &jobs,
        running: &running,
    };
    let usage = BTreeMap::new();
    for policy in policies() {
        let got = policy.place_constrained(&input(&offers, &tasks, &usage), &c);
        assert_eq!(got.len(), 4, "{}: {got:?}", policy.name());
        for a in got.iter().filter(|a| a.task < 2) {
            assert_eq!(a.offer, 1, "{}", policy.name());
        }
    }
}

fn arb_attrs() -> impl Strategy<Value = Attrs> {
    (
        prop::option::of(prop::sample::select(vec!["a", "b", "c"])),
        prop::option::of(prop::sample::select(vec!["r1", "r2", "r3", "r4"])),
    )
        .prop_map(|(zone, rack)| {
            let mut m = Attrs::new();
            if let Some(z) = zone {
                m.insert("zone".into(), z.into());
            }
            if let Some(r) = rack {
                m.insert("rack".into(), r.into());
            }
            m
        })
}

fn arb_constraint() -> impl Strategy<Value = Constraint> {
    let attr = prop::sample::select(vec!["zone", "rack"]);
    let value = prop::sample::select(vec!["a", "b", "r1", "r2"]);
    prop_oneof![
        (attr.clone(), value.clone()).prop_map(|(a, v)| Constraint::equals(a, v)),
        (attr.clone(), value).prop_map(|(a, v)| Constraint::not_equals(a, v)),
        attr.clone().prop_map(Constraint::spread),
        (attr, 0u32..4).prop_map(|(a, n)| Constraint::max_per_value(a, n)),
    ]
}

fn arb_resources() -> impl Strategy<Value = Resources> {
    (0u32..6, 0u32..8).prop_map(|(c, m)| {
        Resources::from_units([("cpus", f64::from(c) / 2.0), ("mem", f64::from(m) * 256.0)])
            .unwrap()
    })
}

fn arb_offer() -> impl Strategy<Value = (OfferSlot, Attrs)> {
    (arb_resources(), arb_resources(), arb_attrs()).prop_map(|(a, b, attrs)| {
        (
            OfferSlot {
                offer_id: OfferId::new(),
                agent_id: AgentId::new(),
                total: a.add(&b),
                free: a,
            },
            attrs,
        )
    })
}

fn arb_task() -> impl Strategy<Value = PendingTask> {
    (0u64..4, arb_resources(), 1u32..50).prop_map(|(job, demand, d)| PendingTask {
        job,
        demand,
        duration_s: f64::from(d),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_placement_violates_a_constraint_and_nothing_is_left_out_for_no_reason(
        offers in prop::collection::vec(arb_offer(), 0..7),
        tasks in prop::collection::vec(arb_task(), 0..25),
        jobs in prop::collection::btree_map(0u64..4, prop::collection::vec(arb_constraint(), 0..3), 0..4),
        running in prop::collection::btree_map(0u64..4, prop::collection::vec(arb_attrs(), 0..3), 0..3),
    ) {
        let (slots, attributes): (Vec<OfferSlot>, Vec<Attrs>) = offers.into_iter().unzip();
        let usage = BTreeMap::new();
        let c = ConstraintInput { offer_attributes: &attributes, jobs: &jobs, running: &running };
        for policy in policies() {
            let got = policy.place_constrained(&input(&slots, &tasks, &usage), &c);
            prop_assert_eq!(violations(&tasks, &got, &c), Vec::<String>::new(), "{}", policy.name());
            // No over-commit, each task at most once.
            let mut left: Vec<Resources> = slots.iter().map(|o| o.free.clone()).collect();
            let mut placed = vec![false; tasks.len()];
            for a in &got {
                prop_assert!(!placed[a.task]);
                placed[a.task] = true;
                left[a.offer] = left[a.offer].checked_sub(&tasks[a.task].demand).unwrap();
            }
            // A task left out fits nowhere, or would break a constraint wherever it fits.
            for (t, task) in tasks.iter().enumerate().filter(|(t, _)| !placed[*t]) {
                for (o, l) in left.iter().enumerate() {
                    if task.demand.fits_in(l) {
                        let mut more = got.clone();
                        more.push(Assignment { task: t, offer: o });
                        prop_assert!(!violations(&tasks, &more, &c).is_empty(),
                            "{}: task {t} fits offer {o} and breaks nothing", policy.name());
                    }
                }
            }
        }
    }

    #[test]
    fn without_constraints_place_constrained_is_place(
        offers in prop::collection::vec(arb_offer(), 0..6),
        tasks in prop::collection::vec(arb_task(), 0..20),
    ) {
        let (slots, attributes): (Vec<OfferSlot>, Vec<Attrs>) = offers.into_iter().unzip();
        let usage = BTreeMap::new();
        let (jobs, running) = (BTreeMap::new(), BTreeMap::new());
        let c = ConstraintInput { offer_attributes: &attributes, jobs: &jobs, running: &running };
        for policy in policies() {
            let i = input(&slots, &tasks, &usage);
            prop_assert_eq!(policy.place_constrained(&i, &c), policy.place(&i), "{}", policy.name());
        }
    }
}
