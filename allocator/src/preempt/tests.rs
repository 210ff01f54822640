//! Unit tests and properties of `preempt`.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use protocol::{AgentId, FrameworkId, Resources, RolePath, Weight};
use uuid::Uuid;

use super::*;
use crate::{Allocator, Policy};

fn r(s: &str) -> Resources {
    s.parse().unwrap()
}

fn fw(n: u128) -> FrameworkId {
    FrameworkId(Uuid::from_u128(n))
}

fn task(f: u128, id: &str, res: &str, priority: i32) -> TaskInput {
    TaskInput {
        framework: fw(f),
        task_id: id.parse().unwrap(),
        resources: r(res),
        priority,
        launch_order: 0,
        reserved_for: None,
    }
}

fn role(path: &str, weight: f64) -> RoleInput {
    RoleInput {
        path: path.into(),
        weight,
        guarantee: None,
        limit: None,
    }
}

fn framework(n: u128, role: &str, demand: bool, held: &str) -> FrameworkInput {
    FrameworkInput {
        id: fw(n),
        role: role.into(),
        demand,
        held: if held.is_empty() {
            Resources::new()
        } else {
            r(held)
        },
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn the_worked_example_of_the_module_docs() {
    let input = Input {
        capacity: r("cpus=12"),
        roles: vec![role("a", 2.0), role("b", 1.0), role("c", 1.0)],
        frameworks: vec![
            framework(1, "a", true, "cpus=12"),
            framework(2, "b", true, ""),
            framework(3, "c", false, ""),
        ],
    };
    let shares = FairShares::compute(&input);
    let a = shares.role("a").unwrap();
    let b = shares.role("b").unwrap();
    assert!(close(a.fair, 2.0 / 3.0) && close(a.share, 1.0), "{a:?}");
    assert!(close(b.fair, 1.0 / 3.0) && close(b.share, 0.0), "{b:?}");
    assert!(close(shares.role("c").unwrap().fair, 0.0));
    assert_eq!(shares.starved(), vec!["b".to_string()]);
    let tasks: Vec<TaskInput> = (0..12)
        .map(|i| task(1, &format!("t{i:02}"), "cpus=1", 0))
        .collect();
    let plan = plan(&shares, "b", &tasks).unwrap();
    assert_eq!(plan.victims.len(), 4, "{plan:?}");
    assert!(plan.victims.iter().all(|v| v.role == "a"));

    // Without demand, `a` is entitled to what it holds and `b` to the rest.
    let input = Input {
        capacity: r("cpus=12"),
        roles: vec![role("a", 2.0), role("b", 1.0)],
        frameworks: vec![
            framework(1, "a", false, "cpus=3"),
            framework(2, "b", true, ""),
        ],
    };
    let shares = FairShares::compute(&input);
    assert!(close(shares.role("a").unwrap().fair, 0.25));
    assert!(close(shares.role("b").unwrap().fair, 0.75));
}

#[test]
fn lowest_priority_first_then_largest_and_never_below_the_fair_share() {
    // a holds 8 of 8 cpus: 2 x 2-cpu tasks at priority 5, 4 x 1-cpu at priority 0.
    let input = Input {
        capacity: r("cpus=8,mem=8"),
        roles: vec![role("a", 1.0), role("b", 1.0)],
        frameworks: vec![
            framework(1, "a", true, "cpus=8,mem=8"),
            framework(2, "b", true, ""),
        ],
    };
    let mut tasks = vec![
        task(1, "big-1", "cpus=2,mem=2", 5),
        task(1, "big-2", "cpus=2,mem=2", 5),
    ];
    for i in 0..4 {
        tasks.push(task(1, &format!("small-{i}"), "cpus=1,mem=1", 0));
    }
    let shares = FairShares::compute(&input);
    let p = plan(&shares, "b", &tasks).unwrap();
    let ids: Vec<String> = p.victims.iter().map(|v| v.task_id.to_string()).collect();
    assert_eq!(ids, ["small-0", "small-1", "small-2", "small-3"]);

    // All at one priority: the fewest tasks (the two big ones).
    for t in &mut tasks {
        t.priority = 0;
    }
    let p = plan(&shares, "b", &tasks).unwrap();
    let ids: Vec<String> = p.victims.iter().map(|v| v.task_id.to_string()).collect();
    assert_eq!(ids, ["big-1", "big-2"]);

    // Equal tasks: the most recently launched go first, whatever their ids.
    let mut same: Vec<TaskInput> = (0..4)
        .map(|i| task(1, &format!("s-{i}"), "cpus=1,mem=1", 0))
        .collect();
    for (t, order) in same.iter_mut().zip([30, 10, 40, 20]) {
        t.launch_order = order;
    }
    let p = plan(&shares, "b", &same).unwrap();
    let ids: Vec<String> = p.victims.iter().map(|v| v.task_id.to_string()).collect();
    assert_eq!(ids, ["s-2", "s-0", "s-3", "s-1"]);

    // Nothing to take without going below a's fair share: a 5-cpu task.
    let shares = FairShares::compute(&Input {
        frameworks: vec![
            framework(1, "a", true, "cpus=5,mem=5"),
            framework(2, "b", true, "cpus=3,mem=3"),
        ],
        ..input.clone()
    });
    assert!(shares.role("b").unwrap().starved());
    assert_eq!(
        plan(&shares, "b", &[task(1, "five", "cpus=5,mem=5", 0)]),
        None
    );
}

#[test]
fn tasks_in_a_reserved_pool_are_taken_only_for_roles_that_pool_serves() {
    // a holds 8 of 8 cpus; its small tasks run in a pool reserved for a, its big ones not.
    let input = Input {
        capacity: r("cpus=8,mem=8"),
        roles: vec![role("a", 1.0), role("b", 1.0)],
        frameworks: vec![
            framework(1, "a", true, "cpus=8,mem=8"),
            framework(2, "b", true, ""),
        ],
    };
    let mut tasks = vec![
        task(1, "big-1", "cpus=2,mem=2", 5),
        task(1, "big-2", "cpus=2,mem=2", 5),
    ];
    for i in 0..4 {
        let mut t = task(1, &format!("small-{i}"), "cpus=1,mem=1", 0);
        t.reserved_for = Some("a".into());
        tasks.push(t);
    }
    let shares = FairShares::compute(&input);
    // The low-priority tasks would go first, but what they free goes back to a's pool, which
    // b is never offered: the unreserved ones are taken instead.
    let p = plan(&shares, "b", &tasks).unwrap();
    let ids: Vec<String> = p.victims.iter().map(|v| v.task_id.to_string()).collect();
    assert_eq!(ids, ["big-1", "big-2"]);
    // With only reserved tasks there is nothing to take for b.
    assert_eq!(plan(&shares, "b", &tasks[2..]), None);
}

#[test]
fn a_guarantee_is_starvation_and_is_never_taken() {
    let mut input = Input {
        capacity: r("cpus=10"),
        roles: vec![
            RoleInput {
                guarantee: Some(r("cpus=6")),
                ..role("g", 1.0)
            },
            role("a", 1.0),
        ],
        frameworks: vec![
            framework(1, "a", true, "cpus=10"),
            framework(2, "g", true, ""),
        ],
    };
    let tasks: Vec<TaskInput> = (0..10)
        .map(|i| task(1, &format!("t{i}"), "cpus=1", 0))
        .collect();
    let shares = FairShares::compute(&input);
    let g = shares.role("g").unwrap();
    assert!(g.below_guarantee && g.starved());
    // Toward the guarantee (6), but `a` keeps its own fair share (5 of 10): 5 tasks.
    assert_eq!(plan(&shares, "g", &tasks).unwrap().victims.len(), 5);

    // The victim's guarantee is protected too.
    input.roles[1].guarantee = Some(r("cpus=9"));
    let shares = FairShares::compute(&input);
    assert_eq!(plan(&shares, "g", &tasks).unwrap().victims.len(), 1);
}

#[test]
fn a_limit_caps_the_fair_share_so_nothing_is_taken_that_the_role_cannot_use() {
    let input = Input {
        capacity: r("cpus=8,mem=8"),
        roles: vec![
            role("a", 1.0),
            RoleInput {
                limit: Some(r("cpus=2")),
                ..role("b", 1.0)
            },
        ],
        frameworks: vec![
            framework(1, "a", true, "cpus=8,mem=8"),
            framework(2, "b", true, ""),
        ],
    };
    let shares = FairShares::compute(&input);
    assert!(close(shares.role("b").unwrap().fair, 0.25));
    assert!(close(shares.role("a").unwrap().fair, 0.75));
    let tasks: Vec<TaskInput> = (0..8)
        .map(|i| task(1, &format!("t{i}"), "cpus=1,mem=1", 0))
        .collect();
    assert_eq!(plan(&shares, "b", &tasks).unwrap().victims.len(), 2);
    // At its limit, b is not starved.
    let shares = FairShares::compute(&Input {
        frameworks: vec![
            framework(1, "a", true, "cpus=6,mem=6"),
            framework(2, "b", true, "cpus=2,mem=2"),
        ],
        ..input
    });
    assert!(shares.starved().is_empty());
}

#[test]
fn nothing_when_no_one_is_starved_or_the_role_is_unknown() {
    let input = Input {
        capacity: r("cpus=4"),
        roles: vec![role("a", 1.0), role("b", 1.0)],
        frameworks: vec![
            framework(1, "a", true, "cpus=2"),
            framework(2, "b", true, "cpus=2"),
        ],
    };
    let shares = FairShares::compute(&input);
    assert!(shares.starved().is_empty());
    let tasks = [task(1, "x", "cpus=2", 0), task(2, "y", "cpus=2", 0)];
    assert_eq!(plan(&shares, "a", &tasks), None);
    assert_eq!(plan(&shares, "nope", &tasks), None);
    // A suppressed (no demand) role holding nothing is not starved.
    let shares = FairShares::compute(&Input {
        frameworks: vec![
            framework(1, "a", true, "cpus=4"),
            framework(2, "b", false, ""),
        ],
        ..input
    });
    assert!(shares.starved().is_empty());
}

#[test]
fn nested_roles_take_from_the_sibling_branch_only() {
    // eng/x is starved next to eng/y; ops holds its fair half and is not touched.
    let input = Input {
        capacity: r("cpus=8"),
        roles: vec![role("eng/x", 1.0), role("eng/y", 1.0), role("ops", 1.0)],
        frameworks: vec![
            framework(1, "eng/y", true, "cpus=4"),
            framework(2, "eng/x", true, ""),
            framework(3, "ops", true, "cpus=4"),
        ],
    };
    let shares = FairShares::compute(&input);
    assert_eq!(shares.starved(), vec!["eng/x".to_string()]);
    let tasks: Vec<TaskInput> = (0..4)
        .flat_map(|i| {
            [
                task(1, &format!("y{i}"), "cpus=1", 0),
                task(3, &format!("o{i}"), "cpus=1", 0),
            ]
        })
        .collect();
    let p = plan(&shares, "eng/x", &tasks).unwrap();
    let ids: Vec<String> = p.victims.iter().map(|v| v.task_id.to_string()).collect();
    assert_eq!(ids, ["y0", "y1"], "{p:?}");
}

#[test]
fn the_allocator_gives_its_books() {
    let mut a = Allocator::new(Policy::Hdrf);
    let rp = |s: &str| RolePath::new(s).unwrap();
    a.add_agent(AgentId(Uuid::from_u128(9)), &r("cpus=4,mem=4"))
        .unwrap();
    a.set_role_weight(&rp("a"), Weight::new(3.0).unwrap());
    a.add_framework(fw(1), &rp("a")).unwrap();
    a.add_framework(fw(2), &rp("b")).unwrap();
    a.suppress(fw(2)).unwrap();
    a.allocate(fw(1), AgentId(Uuid::from_u128(9)), &r("cpus=4,mem=1"))
        .unwrap();
    a.set_role_quota(&rp("b"), None, Some(&r("cpus=3")))
        .unwrap();
    let input = a.preemption_input();
    assert_eq!(input.capacity, r("cpus=4,mem=4"));
    assert!(input
        .roles
        .iter()
        .any(|x| x.path == "b" && x.limit == Some(r("cpus=3"))));
    assert!(input.roles.iter().any(|x| x.path == "a" && x.weight == 3.0));
    let f1 = input.frameworks.iter().find(|f| f.id == fw(1)).unwrap();
    assert_eq!(
        (f1.held.clone(), f1.demand, f1.role.as_str()),
        (r("cpus=4,mem=1"), true, "a")
    );
    let f2 = input.frameworks.iter().find(|f| f.id == fw(2)).unwrap();
    assert!(!f2.demand);
    a.revive(fw(2)).unwrap();
    let shares = FairShares::compute(&a.preemption_input());
    assert_eq!(shares.starved(), vec!["b".to_string()]);
}

/// A random cluster: roles `r0..r3` (one nested), frameworks with tasks, some with demand.
fn arb_case() -> impl Strategy<Value = (Input, Vec<TaskInput>)> {
    let roles = ["r0", "r1", "r1/x", "r2"];
    (
        prop::collection::vec(1u32..4, 4),
        prop::collection::vec(prop::option::of(0u64..6), 4),
        prop::collection::vec(prop::option::of(1u64..12), 4),
        prop::collection::vec((0usize..4, any::<bool>()), 1..6),
        prop::collection::vec((0usize..6, 1u64..4, 1u64..4, -2i32..3), 0..30),
        prop::collection::vec(0u64..8, 2),
    )
        .prop_map(move |(weights, guarantees, limits, fws, tasks, extra)| {
            let mut frameworks: Vec<FrameworkInput> = fws
                .iter()
                .enumerate()
                .map(|(i, &(ri, demand))| framework(i as u128 + 1, roles[ri], demand, ""))
                .collect();
            let mut list = Vec::new();
            let mut total = Resources::new();
            for (n, &(fi, c, m, p)) in tasks.iter().enumerate() {
                let Some(f) = frameworks.get_mut(fi) else {
                    continue;
                };
                let res = r(&format!("cpus={c},mem={m}"));
                f.held.add_assign(&res);
                total.add_assign(&res);
                list.push(TaskInput {
                    framework: f.id,
                    task_id: format!("t{n}").parse().unwrap(),
                    resources: res,
                    priority: p,
                    // Launched in an order unrelated to the ids.
                    launch_order: (n as u64 * 7) % 11,
                    reserved_for: None,
                });
            }
            let capacity = total.add(&r(&format!("cpus={},mem={}", extra[0] + 1, extra[1] + 1)));
            let roles = roles
                .iter()
                .zip(&weights)
                .zip(&guarantees)
                .zip(&limits)
                .map(|(((p, &w), g), l)| RoleInput {
                    path: (*p).into(),
                    weight: f64::from(w),
                    guarantee: g.map(|g| r(&format!("cpus={g}"))),
                    limit: l.map(|l| r(&format!("cpus={l}"))),
                })
                .collect();
            (
                Input {
                    capacity,
                    roles,
                    frameworks,
                },
                list,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn plans_never_take_a_role_below_its_fair_share_or_guarantee((input, tasks) in arb_case()) {
        let shares = FairShares::compute(&input);
        let starved = shares.starved();
        for role in shares.roles() {
            if !starved.contains(&role.role) {
                prop_assert_eq!(plan(&shares, &role.role, &tasks), None);
            }
        }
        for s in &starved {
            let Some(p) = plan(&shares, s, &tasks) else { continue };
            // Deterministic, whatever the order of the tasks.
            let mut reversed = tasks.clone();
            reversed.reverse();
            let again = plan(&shares, s, &reversed);
            prop_assert_eq!(Some(&p), again.as_ref());
            // Take the victims away: every role outside the starved one's line keeps its fair
            // share (as it was computed) and its guarantee in the kinds taken.
            let mut after = input.clone();
            for v in &p.victims {
                let t = tasks.iter().find(|t| t.task_id == v.task_id).unwrap();
                let f = after.frameworks.iter_mut().find(|f| f.id == v.framework).unwrap();
                f.held = f.held.checked_sub(&t.resources).unwrap();
                prop_assert!(f.role != *s && !f.role.starts_with(&format!("{s}/")), "a victim in the starved role");
            }
            let later = FairShares::compute(&after);
            for before in shares.roles() {
                let is_line = s == &before.role || s.starts_with(&format!("{}/", before.role));
                if is_line {
                    continue;
                }
                let now = later.role(&before.role).unwrap();
                if now.share < before.share {
                    prop_assert!(now.share + 1e-9 >= before.fair,
                        "{} taken to {} below its fair share {}", before.role, now.share, before.fair);
                    let g = input.roles.iter().find(|x| x.path == before.role).and_then(|x| x.guarantee.clone());
                    if let Some(g) = g {
                        let held_before: f64 = held_cpus(&input, &before.role);
                        let held_after: f64 = held_cpus(&after, &before.role);
                        let gc = g.units("cpus");
                        prop_assert!(held_after >= gc || held_after == held_before,
                            "{} taken below its guarantee: {} < {}", before.role, held_after, gc);
                    }
                }
            }
        }
    }
}

/// The cpus a role's subtree holds.
fn held_cpus(input: &Input, role: &str) -> f64 {
    input
        .frameworks
        .iter()
        .filter(|f| f.role == role || f.role.starts_with(&format!("{role}/")))
        .map(|f| f.held.units("cpus"))
        .sum()
}
