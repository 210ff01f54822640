//! Unit tests of the allocator's public behaviour: blocking rules (filters, suppress / revive,
//! demand hints, activity), weights, the books (errors change nothing, removals release exactly),
//! explanations and the role-tree view. Every decision is also checked against the reference.

#![allow(clippy::unwrap_used)]

use protocol::{AgentId, FrameworkId, Resources, RolePath, Weight};
use uuid::Uuid;

use super::{Allocator, AllocatorError, BlockReason, FilterMode, Policy, Sweep, DEFAULT_MAX_KINDS};

fn r(s: &str) -> Resources {
    s.parse().unwrap()
}

fn role(s: &str) -> RolePath {
    RolePath::new(s).unwrap()
}

fn fw(i: u128) -> FrameworkId {
    FrameworkId(Uuid::from_u128(i))
}

fn ag(i: u128) -> AgentId {
    AgentId(Uuid::from_u128(1000 + i))
}

/// `pick` (fast) and `pick_reference` agree; returns the answer.
fn pick(a: &mut Allocator, agent: Option<AgentId>, w: &str, now: u64) -> Option<FrameworkId> {
    let fast = a.pick(agent, &r(w), now);
    assert_eq!(
        fast,
        a.pick_reference(agent, &r(w), now),
        "fast != reference for W {w}"
    );
    fast
}

/// Two frameworks `fw(1)` (role a) and `fw(2)` (role b), one agent `ag(1)` of 10 cpus, 10 mem.
fn two() -> Allocator {
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("a")).unwrap();
    a.add_framework(fw(2), &role("b")).unwrap();
    a.add_agent(ag(1), &r("cpus=10,mem=10")).unwrap();
    a
}

#[test]
fn lowest_share_wins_and_ties_go_to_registration_order() {
    let mut a = two();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=1", 0),
        Some(fw(1)),
        "tie: first registered"
    );
    a.allocate(fw(1), ag(1), &r("cpus=1")).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(2)));
    a.allocate(fw(2), ag(1), &r("mem=2")).unwrap();
    // fw(2) holds 20% of mem, fw(1) 10% of cpus: shares over Y = kinds in W.
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1,mem=1", 0), Some(fw(1)));
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=1", 0),
        Some(fw(2)),
        "mem is not in W: ignored"
    );
}

#[test]
fn filters_expire_and_only_cover_what_was_refused() {
    let mut a = two();
    a.add_filter(fw(1), ag(1), &r("cpus=4,mem=4"), 100).unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=4,mem=4", 0),
        Some(fw(2)),
        "filtered"
    );
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=2", 99),
        Some(fw(2)),
        "W inside refused"
    );
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=5", 0),
        Some(fw(1)),
        "more than refused"
    );
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=1,gpus=1", 0),
        Some(fw(1)),
        "a kind never refused"
    );
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=4", 100),
        Some(fw(1)),
        "expired at until"
    );
    assert_eq!(
        pick(&mut a, None, "cpus=4", 0),
        Some(fw(1)),
        "no agent: no filters"
    );
    assert_eq!(
        a.explain(fw(1), ag(1), 0),
        None,
        "free 10 cpus is more than refused"
    );
    a.allocate(fw(2), ag(1), &r("cpus=6,mem=6")).unwrap();
    assert_eq!(
        a.explain(fw(1), ag(1), 50),
        Some(BlockReason::Filtered { until: 100 })
    );
    assert_eq!(a.explain(fw(1), ag(1), 100), None);
    // A cycle after expiry sweeps the filter and offers to fw(1).
    let d = a.cycle(None, 100);
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].framework, d[0].resources.clone()),
        (fw(1), r("cpus=4,mem=4"))
    );
}

#[test]
fn replacing_a_filter_and_filters_on_other_agents() {
    let mut a = two();
    a.add_agent(ag(2), &r("cpus=10,mem=10")).unwrap();
    a.add_filter(fw(1), ag(1), &r("cpus=10,mem=10"), u64::MAX)
        .unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(2)), "cpus=1", 0),
        Some(fw(1)),
        "other agent unaffected"
    );
    a.add_filter(fw(1), ag(1), &r("cpus=1"), u64::MAX).unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=2", 0),
        Some(fw(1)),
        "replaced by a smaller one"
    );
    assert_eq!(
        a.add_filter(fw(9), ag(1), &r("cpus=1"), 5),
        Err(AllocatorError::UnknownFramework(fw(9)))
    );
    assert_eq!(
        a.add_filter(fw(1), ag(9), &r("cpus=1"), 5),
        Err(AllocatorError::UnknownAgent(ag(9)))
    );
}

#[test]
fn a_sated_framework_is_blocked_everywhere_and_keeps_its_filters_and_suppression() {
    let mut a = two();
    a.add_filter(fw(1), ag(1), &r("cpus=10,mem=10"), u64::MAX)
        .unwrap();
    a.set_sated(fw(2), true).unwrap();
    assert_eq!(a.explain(fw(2), ag(1), 0), Some(BlockReason::Sated));
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), None);
    assert!(a.cycle(None, 0).is_empty(), "one filtered, one sated");
    let version = a.eligibility_version;
    a.set_sated(fw(2), true).unwrap();
    assert_eq!(
        a.eligibility_version, version,
        "an unchanged flag keeps the caches"
    );
    a.set_sated(fw(2), false).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(2)));
    assert_eq!(
        a.explain(fw(1), ag(1), 0)
            .map(|b| matches!(b, BlockReason::Filtered { .. })),
        Some(true),
        "the other framework's filter is untouched"
    );
    // Sated does not lift a suppression.
    a.suppress(fw(2)).unwrap();
    a.set_sated(fw(2), false).unwrap();
    assert_eq!(a.explain(fw(2), ag(1), 0), Some(BlockReason::Suppressed));
    assert_eq!(
        a.set_sated(fw(9), true),
        Err(AllocatorError::UnknownFramework(fw(9)))
    );
}

#[test]
fn suppress_blocks_until_revive_which_also_clears_filters() {
    let mut a = two();
    a.suppress(fw(1)).unwrap();
    a.add_filter(fw(2), ag(1), &r("cpus=10,mem=10"), u64::MAX)
        .unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=1", 0),
        None,
        "one suppressed, one filtered"
    );
    assert_eq!(a.explain(fw(1), ag(1), 0), Some(BlockReason::Suppressed));
    assert!(a.cycle(None, 0).is_empty());
    a.revive(fw(2)).unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=1", 0),
        Some(fw(2)),
        "revive cleared the filter"
    );
    a.revive(fw(1)).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(1)));
    let d = a.cycle(None, 0);
    assert_eq!(d.len(), 1);
    assert_eq!(a.allocation(fw(1)), Some(r("cpus=10,mem=10")));
}

#[test]
fn inactive_frameworks_are_blocked() {
    let mut a = two();
    a.set_active(fw(1), false).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(2)));
    assert_eq!(a.explain(fw(1), ag(1), 0), Some(BlockReason::Inactive));
    a.set_active(fw(1), true).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(1)));
}

#[test]
fn demand_hints_block_where_they_do_not_fit() {
    let mut a = two();
    a.set_demand(fw(1), Some(r("cpus=2,mem=4"))).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=2,mem=3", 0), Some(fw(2)));
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=2,mem=4", 0), Some(fw(1)));
    a.allocate(fw(2), ag(1), &r("cpus=1,mem=7")).unwrap();
    assert_eq!(
        a.explain(fw(1), ag(1), 0),
        Some(BlockReason::DemandDoesNotFit)
    );
    a.set_demand(fw(1), None).unwrap();
    assert_eq!(a.explain(fw(1), ag(1), 0), None);
    a.set_demand(fw(1), Some(Resources::new())).unwrap();
    assert_eq!(
        a.explain(fw(1), ag(1), 0),
        None,
        "an empty demand is no hint"
    );
}

#[test]
fn a_rest_no_demand_hint_fits_is_offered_to_no_one_and_one_without_a_hint_takes_it() {
    let mut a = two();
    a.add_framework(fw(3), &role("c/d")).unwrap();
    for f in [fw(1), fw(2), fw(3)] {
        a.set_demand(f, Some(r("cpus=4,mem=1"))).unwrap();
    }
    // Memory alone: every eligible leaf's hint needs CPUs (the shortcut's case).
    assert_eq!(pick(&mut a, Some(ag(1)), "mem=8", 0), None);
    assert_eq!(pick(&mut a, None, "mem=8", 0), None);
    // One hint that fits is found, whichever leaf holds it.
    a.set_demand(fw(3), Some(r("mem=2"))).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "mem=8", 0), Some(fw(3)));
    // A leaf without a hint takes anything, even when the others' hints do not fit.
    a.set_demand(fw(3), Some(r("cpus=4"))).unwrap();
    a.set_demand(fw(2), None).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "mem=8", 0), Some(fw(2)));
    // An inactive leaf without a hint is not eligible: the others' hints decide again.
    a.set_active(fw(2), false).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "mem=8", 0), None);
}

#[test]
fn weights_change_at_run_time() {
    let mut a = two();
    a.allocate(fw(1), ag(1), &r("cpus=2")).unwrap();
    a.allocate(fw(2), ag(1), &r("cpus=3")).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(1)));
    a.set_role_weight(&role("b"), Weight::new(2.0).unwrap());
    assert_eq!(a.role_weight(&role("b")), Some(Weight::new(2.0).unwrap()));
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=1", 0),
        Some(fw(2)),
        "3/2 < 2/1"
    );
    assert_eq!(a.role_weight(&role("zzz")), None);
    a.set_role_weight(&role("x/y"), Weight::new(3.0).unwrap());
    assert_eq!(
        a.role_weight(&role("x")),
        Some(Weight::ONE),
        "ancestors created at weight 1"
    );
}

#[test]
fn failed_allocate_and_release_change_nothing() {
    let mut a = two();
    a.allocate(fw(1), ag(1), &r("cpus=4")).unwrap();
    let before = (
        a.agent_free(ag(1)),
        a.allocation(fw(1)),
        a.allocation(fw(2)),
    );
    let over = a.allocate(fw(2), ag(1), &r("cpus=7"));
    assert!(
        matches!(over, Err(AllocatorError::Overcommit { .. })),
        "{over:?}"
    );
    let gpu = a.allocate(fw(2), ag(1), &r("gpus=1"));
    assert!(
        matches!(gpu, Err(AllocatorError::Overcommit { .. })),
        "{gpu:?}"
    );
    let rel = a.release(fw(1), ag(1), &r("cpus=5"));
    assert!(
        matches!(rel, Err(AllocatorError::ReleaseMoreThanAllocated { .. })),
        "{rel:?}"
    );
    let rel = a.release(fw(2), ag(1), &r("cpus=1"));
    assert!(
        matches!(rel, Err(AllocatorError::ReleaseMoreThanAllocated { .. })),
        "{rel:?}"
    );
    assert_eq!(
        a.allocate(fw(9), ag(1), &r("cpus=1")),
        Err(AllocatorError::UnknownFramework(fw(9)))
    );
    assert_eq!(
        a.release(fw(1), ag(9), &r("cpus=1")),
        Err(AllocatorError::UnknownAgent(ag(9)))
    );
    assert_eq!(
        (
            a.agent_free(ag(1)),
            a.allocation(fw(1)),
            a.allocation(fw(2))
        ),
        before
    );
    assert_eq!(
        a.add_framework(fw(1), &role("c")),
        Err(AllocatorError::DuplicateFramework(fw(1)))
    );
    assert_eq!(
        a.add_agent(ag(1), &r("cpus=1")),
        Err(AllocatorError::DuplicateAgent(ag(1)))
    );
    assert_eq!(a.capacity(), r("cpus=10,mem=10"));
    let err = a
        .allocate(fw(2), ag(1), &r("cpus=7"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("only cpus=6,mem=10 is free"), "{err}");
}

#[test]
fn remove_agent_releases_exactly_what_was_on_it() {
    let mut a = two();
    a.add_agent(ag(2), &r("cpus=4,mem=4")).unwrap();
    a.allocate(fw(1), ag(1), &r("cpus=3")).unwrap();
    a.allocate(fw(1), ag(2), &r("cpus=1,mem=1")).unwrap();
    a.allocate(fw(2), ag(2), &r("mem=2")).unwrap();
    a.add_filter(fw(1), ag(2), &r("cpus=1"), u64::MAX).unwrap();
    let mut lost = a.remove_agent(ag(2)).unwrap();
    lost.sort_by_key(|(f, _)| *f);
    assert_eq!(lost, vec![(fw(1), r("cpus=1,mem=1")), (fw(2), r("mem=2"))]);
    assert_eq!(a.allocation(fw(1)), Some(r("cpus=3")));
    assert_eq!(a.allocation(fw(2)), Some(Resources::new()));
    assert_eq!(a.capacity(), r("cpus=10,mem=10"));
    assert_eq!(a.agent_free(ag(2)), None);
    assert_eq!(
        a.remove_agent(ag(2)),
        Err(AllocatorError::UnknownAgent(ag(2)))
    );
    assert_eq!(a.explain(fw(1), ag(2), 0), Some(BlockReason::UnknownAgent));
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(2)));
}

#[test]
fn remove_framework_releases_everything_and_forgets_it() {
    let mut a = two();
    a.add_agent(ag(2), &r("cpus=4")).unwrap();
    a.allocate(fw(1), ag(1), &r("cpus=3,mem=1")).unwrap();
    a.allocate(fw(1), ag(2), &r("cpus=4")).unwrap();
    a.add_filter(fw(1), ag(1), &r("cpus=7"), u64::MAX).unwrap();
    a.remove_framework(fw(1)).unwrap();
    assert_eq!(a.agent_free(ag(1)), Some(r("cpus=10,mem=10")));
    assert_eq!(a.agent_free(ag(2)), Some(r("cpus=4")));
    assert_eq!(a.allocation(fw(1)), None);
    assert_eq!(
        a.remove_framework(fw(1)),
        Err(AllocatorError::UnknownFramework(fw(1)))
    );
    assert_eq!(
        a.explain(fw(1), ag(1), 0),
        Some(BlockReason::UnknownFramework)
    );
    assert_eq!(
        a.role_tree().allocated,
        Resources::new(),
        "the books return to zero"
    );
    // Re-adding the same id starts fresh (no stale filter).
    a.add_framework(fw(1), &role("a")).unwrap();
    a.allocate(fw(2), ag(1), &r("cpus=1")).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=9,mem=10", 0), Some(fw(1)));
}

#[test]
fn cycle_offers_each_agent_once_in_the_given_order() {
    let mut a = two();
    a.add_agent(ag(2), &r("cpus=2")).unwrap();
    a.add_agent(ag(3), &r("cpus=2")).unwrap();
    let d = a.cycle(Some(&[ag(3), ag(9), ag(1)]), 0);
    let got: Vec<_> = d.iter().map(|d| (d.agent, d.framework)).collect();
    assert_eq!(
        got,
        vec![(ag(3), fw(1)), (ag(1), fw(2))],
        "unknown agents skipped"
    );
    assert_eq!(a.agent_free(ag(1)), Some(Resources::new()));
    assert_eq!(a.explain(fw(1), ag(1), 0), Some(BlockReason::NothingFree));
    let d = a.cycle(None, 0);
    assert_eq!(d.len(), 1, "only ag(2) has anything free");
    assert_eq!(d[0].agent, ag(2));
    assert!(a.cycle(None, 0).is_empty());
}

#[test]
fn cycle_parts_back_to_back_decide_as_one_cycle() {
    // Seven agents of different sizes, three frameworks with weights: parts of every size
    // (1..=8 agents) make exactly the decisions of one whole cycle, in the same order.
    let build = || {
        let mut a = Allocator::new(Policy::Hdrf);
        a.set_role_weight(&role("b"), Weight::new(2.0).unwrap());
        a.add_framework(fw(1), &role("a")).unwrap();
        a.add_framework(fw(2), &role("b")).unwrap();
        a.add_framework(fw(3), &role("b/c")).unwrap();
        for i in 1..=7 {
            a.add_agent(ag(i), &r(&format!("cpus={i},mem={}", 100 * (8 - i))))
                .unwrap();
        }
        a.allocate(fw(1), ag(3), &r("cpus=3")).unwrap();
        a
    };
    let whole = build().cycle(None, 0);
    assert_eq!(whole.len(), 7);
    for sweep in [Sweep::All, Sweep::Changed] {
        for max in 1..=8 {
            let mut a = build();
            let mut run = a.start_run(sweep);
            assert!(
                run.full(),
                "before any run, even a changed run visits every agent"
            );
            let (mut got, mut parts) = (Vec::new(), 0);
            while !run.done() {
                got.extend(a.run_part(&mut run, max, 0));
                parts += 1;
            }
            assert_eq!(got, whole, "{sweep:?} in parts of {max}");
            assert_eq!(parts, 7_usize.div_ceil(max), "parts of {max}");
            assert_eq!(run.visited(), 7);
            assert!(a.run_part(&mut run, max, 0).is_empty(), "the run is over");
            assert!(a.cycle(None, 0).is_empty(), "everything was offered");
        }
    }
    // `max` 0 counts as 1.
    let mut a = build();
    let mut run = a.start_run(Sweep::All);
    assert_eq!(a.run_part(&mut run, 0, 0).len(), 1);
    assert_eq!((run.visited(), run.done()), (1, false));
}

#[test]
fn a_framework_sated_mid_run_is_not_offered_the_rest_of_it() {
    let build = || {
        let mut a = Allocator::new(Policy::Hdrf);
        a.add_framework(fw(1), &role("a")).unwrap();
        a.add_framework(fw(2), &role("b")).unwrap();
        for i in 1..=6 {
            a.add_agent(ag(i), &r("cpus=4,mem=400")).unwrap();
        }
        a
    };
    // Without a hook the two take turns: three agents each.
    let mut a = build();
    let mut run = a.start_run(Sweep::All);
    let plain = a.run_part(&mut run, usize::MAX, 0);
    assert_eq!(plain.iter().filter(|d| d.framework == fw(1)).count(), 3);
    // fw(1) is sated by its first offer: fw(2) gets the other five in the same part.
    let mut a = build();
    let mut run = a.start_run(Sweep::All);
    let mut asked = Vec::new();
    let got = a.run_part_with(&mut run, usize::MAX, 0, |d| {
        asked.push(d.agent);
        d.framework == fw(1)
    });
    assert_eq!(
        asked,
        (1..=6).map(ag).collect::<Vec<_>>(),
        "asked once per decision"
    );
    let to = |f| got.iter().filter(|d| d.framework == f).count();
    assert_eq!((to(fw(1)), to(fw(2))), (1, 5));
    assert_eq!(a.is_sated(fw(1)), Some(true));
    assert_eq!(a.explain(fw(1), ag(1), 0), Some(BlockReason::Sated));
    // The fast path agrees with the reference afterwards, sated or let go again.
    for sated in [true, false] {
        a.set_sated(fw(1), sated).unwrap();
        a.release(fw(2), ag(2), &r("cpus=4,mem=400")).unwrap();
        let w = a.agent_free(ag(2)).unwrap();
        assert_eq!(
            a.pick(Some(ag(2)), &w, 0),
            a.pick_reference(Some(ag(2)), &w, 0)
        );
        a.allocate(fw(2), ag(2), &r("cpus=4,mem=400")).unwrap();
    }
}

#[test]
fn a_framework_let_go_is_offered_the_agents_the_runs_found_all_blocked() {
    for sweep in [Sweep::All, Sweep::Changed] {
        let mut a = Allocator::new(Policy::Hdrf);
        a.add_framework(fw(1), &role("a")).unwrap();
        a.add_agent(ag(1), &r("cpus=4")).unwrap();
        a.add_agent(ag(2), &r("cpus=4")).unwrap();
        a.set_sated(fw(1), true).unwrap();
        let mut run = a.start_run(sweep);
        assert!(a.run_part(&mut run, usize::MAX, 0).is_empty());
        assert!(
            a.cycle(None, 0).is_empty(),
            "both agents remembered as all blocked"
        );
        a.set_sated(fw(1), false).unwrap();
        let mut run = a.start_run(sweep);
        assert_eq!(a.run_part(&mut run, usize::MAX, 0).len(), 2, "{sweep:?}");
    }
}

#[test]
fn a_changed_run_visits_only_agents_whose_resources_or_filters_changed() {
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("a")).unwrap();
    a.add_framework(fw(2), &role("b")).unwrap();
    for i in 1..=5 {
        a.add_agent(ag(i), &r("cpus=4,mem=400")).unwrap();
    }
    assert_eq!(a.changed_len(), 5, "new agents are queued");
    assert_eq!(a.cycle(None, 0).len(), 5);
    assert_eq!(a.changed_len(), 0, "a full run leaves nothing queued");

    // Nothing changed: a changed run visits no agent and decides nothing.
    let mut run = a.start_run(Sweep::Changed);
    assert!(!run.full());
    assert!(a.run_part(&mut run, 100, 0).is_empty());
    assert_eq!((run.visited(), run.done()), (0, true));

    // Resources come back on agents 4 and 2: the run visits those two, in slot order.
    // Who holds a cpu on `agent` (a trial release on a copy).
    let holder = |a: &Allocator, agent| {
        [fw(1), fw(2)]
            .into_iter()
            .find(|&f| a.clone().release(f, agent, &r("cpus=1")).is_ok())
            .unwrap()
    };
    let mut b = a.clone();
    let (h4, h2) = (holder(&a, ag(4)), holder(&a, ag(2)));
    for (f, agent) in [(h4, ag(4)), (h2, ag(2))] {
        a.release(f, agent, &r("cpus=1")).unwrap();
        b.release(f, agent, &r("cpus=1")).unwrap();
    }
    let mut run = a.start_run(Sweep::Changed);
    let got = a.run_part(&mut run, 100, 0);
    assert_eq!((run.visited(), run.full()), (2, false));
    assert_eq!(got, b.cycle(None, 0), "the same decisions as a full run");
    assert_eq!(
        got.iter().map(|d| d.agent).collect::<Vec<_>>(),
        vec![ag(2), ag(4)]
    );

    // A framework filters agent 1's returned cpu; the other one is suppressed: the agent is
    // visited, every framework found blocked, and the next changed run skips it.
    let h1 = holder(&a, ag(1));
    a.release(h1, ag(1), &r("cpus=1")).unwrap();
    let other = if h1 == fw(1) { fw(2) } else { fw(1) };
    a.suppress(other).unwrap();
    a.add_filter(h1, ag(1), &r("cpus=4,mem=400"), 1_000)
        .unwrap();
    let mut run = a.start_run(Sweep::Changed);
    assert!(
        run.full(),
        "a suppression changed who may be blocked anywhere"
    );
    assert!(a.run_part(&mut run, 100, 0).is_empty());
    let mut run = a.start_run(Sweep::Changed);
    assert!(a.run_part(&mut run, 100, 0).is_empty());
    assert_eq!((run.visited(), run.full()), (0, false));

    // The filter expires: only a full run applies that (agent 1 changed nothing else).
    let mut run = a.start_run(Sweep::Changed);
    assert!(a.run_part(&mut run, 100, 2_000).is_empty());
    let d = a.cycle(None, 2_000);
    assert_eq!((d.len(), d[0].agent, d[0].framework), (1, ag(1), h1));
}

#[test]
fn a_change_that_unblocks_frameworks_during_a_run_makes_the_next_changed_run_full() {
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("a")).unwrap();
    for i in 1..=3 {
        a.add_agent(ag(i), &r("cpus=4")).unwrap();
    }
    a.suppress(fw(1)).unwrap();
    assert!(a.cycle(None, 0).is_empty());
    let mut run = a.start_run(Sweep::Changed);
    assert!(!run.full());
    a.revive(fw(1)).unwrap();
    assert!(a.run_part(&mut run, 1, 0).is_empty(), "no agent changed");
    let mut run = a.start_run(Sweep::Changed);
    assert!(run.full(), "the revival came while the last run went on");
    assert_eq!(a.run_part(&mut run, 100, 0).len(), 3);
    // A paused agent's resources come back to a changed run when it resumes.
    a.set_agent_paused(ag(2), true).unwrap();
    a.release(fw(1), ag(2), &r("cpus=4")).unwrap();
    assert!(a.cycle(None, 0).is_empty());
    a.set_agent_paused(ag(2), false).unwrap();
    let mut run = a.start_run(Sweep::Changed);
    let d = a.run_part(&mut run, 100, 0);
    assert_eq!((run.visited(), run.full(), d.len()), (1, false, 1));
}

#[test]
fn role_tree_and_shares() {
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("eng/batch")).unwrap();
    a.add_framework(fw(2), &role("eng")).unwrap();
    a.add_agent(ag(1), &r("cpus=10,mem=20")).unwrap();
    a.allocate(fw(1), ag(1), &r("cpus=2,mem=10")).unwrap();
    a.allocate(fw(2), ag(1), &r("cpus=1")).unwrap();
    let tree = a.role_tree();
    assert_eq!(tree.path, "");
    assert_eq!(tree.allocated, r("cpus=3,mem=10"));
    let eng = &tree.children[0];
    assert_eq!(eng.path, "eng");
    assert_eq!(eng.frameworks, vec![fw(2)]);
    assert_eq!(eng.children[0].path, "eng/batch");
    assert_eq!(eng.children[0].frameworks, vec![fw(1)]);
    assert!((eng.dominant_share - 0.5).abs() < 1e-12);
    assert!((a.dominant_share(fw(1)).unwrap() - 0.5).abs() < 1e-12);
    assert!((a.dominant_share(fw(2)).unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(a.dominant_share(fw(9)), None);
}

#[test]
fn blocked_siblings_do_not_hold_back_the_others() {
    // Test vector 4 (blocked nodes) in miniature: a subtree whose CPU leaf cannot use a GPU offer
    // competes with its GPU leaf's share only.
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("n3")).unwrap();
    a.add_framework(fw(2), &role("n3")).unwrap();
    a.add_framework(fw(3), &role("n4")).unwrap();
    a.add_agent(ag(1), &r("cpus=30,gpus=30")).unwrap();
    a.set_demand(fw(1), Some(r("cpus=1"))).unwrap();
    a.allocate(fw(1), ag(1), &r("cpus=10")).unwrap();
    a.allocate(fw(2), ag(1), &r("gpus=2")).unwrap();
    a.allocate(fw(3), ag(1), &r("gpus=3")).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "gpus=1", 0), Some(fw(2)));
}

#[test]
fn other_policies_run_through_the_reference() {
    let mut a = Allocator::new(Policy::PlainSum);
    assert_eq!(a.policy(), Policy::PlainSum);
    a.add_framework(fw(1), &role("a")).unwrap();
    a.add_framework(fw(2), &role("b/c")).unwrap();
    a.add_agent(ag(1), &r("cpus=10")).unwrap();
    a.allocate(fw(1), ag(1), &r("cpus=1")).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), Some(fw(2)));
    let mut clone = a.clone();
    assert_eq!(clone.pick(Some(ag(1)), &r("cpus=1"), 0), Some(fw(2)));
}

/// The fairness difference between the filter modes (ARCHITECTURE.md, "Allocator notes"): role
/// `a` holds `fw(1)` (nothing held, filtered on the agent) and `fw(2)` (5 of 10 cpus); role `b`
/// holds `fw(3)` (3 of 10 cpus).
#[test]
fn filter_modes_differ_only_in_how_a_filtered_leaf_weighs_in_its_ancestors() {
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("a")).unwrap();
    a.add_framework(fw(2), &role("a")).unwrap();
    a.add_framework(fw(3), &role("b")).unwrap();
    a.add_agent(ag(1), &r("cpus=10")).unwrap();
    a.add_agent(ag(2), &r("cpus=10")).unwrap();
    a.allocate(fw(2), ag(2), &r("cpus=5")).unwrap();
    a.allocate(fw(3), ag(2), &r("cpus=3")).unwrap();
    a.add_filter(fw(1), ag(1), &r("cpus=10"), 100).unwrap();
    assert_eq!(a.filter_mode(), FilterMode::SkipOnly, "the default");
    // Skip-only: role a's value is rescaled to fw(1)'s zero share, so a is picked, and the
    // filtered fw(1) is skipped for its sibling.
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=10", 0), Some(fw(2)));
    // Exact: fw(1) is blocked for this agent, role a is judged by fw(2) alone (0.5 > 0.3).
    a.set_filter_mode(FilterMode::Exact);
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=10", 0), Some(fw(3)));
    // Without the agent (no filters) both modes agree: fw(1) has the lowest share.
    assert_eq!(pick(&mut a, None, "cpus=10", 0), Some(fw(1)));
    a.set_filter_mode(FilterMode::SkipOnly);
    assert_eq!(pick(&mut a, None, "cpus=10", 0), Some(fw(1)));
    // A suppressed framework stays exactly blocked in skip-only mode: a is judged by fw(2).
    a.suppress(fw(1)).unwrap();
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=10", 0), Some(fw(3)));
}

/// The finding: 75k new names in agent totals, a demand or a decline filter made interning a
/// linear scan kept forever. Each is now refused at the cap, at once, and changes nothing.
#[test]
fn a_flood_of_new_resource_names_is_refused_and_changes_nothing() {
    let mut flood = Resources::new();
    for i in 0..75_000 {
        if let Ok(n) = protocol::ResourceName::new(format!("n{i}")) {
            flood.set_millis(n, 1);
        }
    }
    let mut a = Allocator::new(Policy::Hdrf);
    let (fw, agent) = (fw(1), ag(1));
    assert!(a.add_framework(fw, &RolePath::new("eng").unwrap()).is_ok());
    assert!(a
        .add_agent(agent, &"cpus=4,mem=100".parse().unwrap())
        .is_ok());
    let too_many = Err(AllocatorError::TooManyKinds {
        known: 2,
        max: DEFAULT_MAX_KINDS,
    });
    assert_eq!(a.add_agent(ag(2), &flood), too_many);
    assert_eq!(a.set_demand(fw, Some(flood.clone())), too_many);
    assert_eq!(a.add_filter(fw, agent, &flood, 10), too_many);
    assert_eq!(a.kinds_len(), 2);
    assert_eq!(a.capacity().to_string(), "cpus=4,mem=100");
    // Roles: every missing prefix counts.
    assert_eq!(a.roles_len(), 1);
    assert_eq!(a.new_roles(&role("eng")), 0);
    assert_eq!(a.new_roles(&role("eng/batch/x")), 2);
    assert_eq!(a.new_roles(&role("ops")), 1);
    // Up to the cap is fine.
    a.set_max_kinds(3);
    assert!(a.add_agent(ag(2), &"gpus=1".parse().unwrap()).is_ok());
    assert_eq!(
        a.set_demand(fw, Some("disk=1".parse().unwrap())),
        Err(AllocatorError::TooManyKinds { known: 3, max: 3 })
    );
}

#[test]
fn a_paused_agent_is_skipped_by_cycles_until_resumed() {
    let mut a = two();
    a.add_agent(ag(2), &r("cpus=2")).unwrap();
    a.set_agent_paused(ag(1), true).unwrap();
    assert_eq!(a.agent_paused(ag(1)), Some(true));
    let d = a.cycle(None, 0);
    let agents: Vec<_> = d.iter().map(|d| d.agent).collect();
    assert_eq!(agents, vec![ag(2)], "the paused agent offers nothing");
    assert_eq!(
        a.agent_free(ag(1)),
        Some(r("cpus=10,mem=10")),
        "nothing booked"
    );
    assert!(a.cycle(None, 0).is_empty());
    a.set_agent_paused(ag(1), false).unwrap();
    let d = a.cycle(None, 0);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].agent, ag(1));
    assert_eq!(
        a.set_agent_paused(ag(9), true),
        Err(AllocatorError::UnknownAgent(ag(9)))
    );
    assert_eq!(a.agent_paused(ag(9)), None);
}

/// GPU gating: an agent whose total has `gpus` goes only to frameworks that declared the
/// capability while gating is on; plain agents go to everyone; off, gating changes nothing.
#[test]
fn gpu_gating_keeps_gpu_agents_for_capable_frameworks() {
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("a")).unwrap();
    a.add_framework(fw(2), &role("b")).unwrap();
    a.add_agent(ag(1), &r("cpus=8,mem=8,gpus=2")).unwrap();
    a.add_agent(ag(2), &r("cpus=8,mem=8")).unwrap();
    // fw(1) holds less (nothing) and is first in tie order: it would win everywhere.
    a.allocate(fw(2), ag(2), &r("cpus=1")).unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=7,mem=8,gpus=2", 0),
        Some(fw(1))
    );
    a.set_gpu_gating(true);
    assert!(a.gpu_gating());
    // Nobody declared the capability: the GPU agent goes to no one, the plain one as before.
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=8,mem=8,gpus=2", 0), None);
    assert_eq!(a.explain(fw(1), ag(1), 0), Some(BlockReason::GpuGated));
    assert_eq!(
        a.explain_agent(fw(1), ag(1), 0),
        Some(BlockReason::GpuGated)
    );
    assert_eq!(pick(&mut a, Some(ag(2)), "cpus=7,mem=8", 0), Some(fw(1)));
    // A GPU agent whose GPUs are all in use still gates its CPUs (they would strand its GPUs).
    assert_eq!(pick(&mut a, Some(ag(1)), "cpus=1", 0), None);
    // No agent: no gating.
    assert_eq!(pick(&mut a, None, "cpus=1,gpus=1", 0), Some(fw(1)));
    a.set_gpu_capable(fw(2), true).unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=8,mem=8,gpus=2", 0),
        Some(fw(2))
    );
    assert_eq!(a.explain(fw(2), ag(1), 0), None);
    let got = a.cycle(None, 0);
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].agent, got[0].framework), (ag(1), fw(2)));
    assert_eq!((got[1].agent, got[1].framework), (ag(2), fw(1)));
    // Off again: the capability no longer matters.
    a.set_gpu_gating(false);
    a.release(fw(2), ag(1), &r("cpus=8,mem=8,gpus=2")).unwrap();
    a.release(fw(1), ag(2), &r("cpus=7,mem=8")).unwrap();
    a.set_gpu_capable(fw(2), false).unwrap();
    assert_eq!(
        pick(&mut a, Some(ag(1)), "cpus=8,mem=8,gpus=2", 0),
        Some(fw(1))
    );
    assert_eq!(a.explain(fw(1), ag(1), 0), None);
    assert_eq!(
        a.set_gpu_capable(fw(9), true),
        Err(AllocatorError::UnknownFramework(fw(9)))
    );
}

/// The H-DRF slides' running example: `<3 CPUs, 2 GPUs>` tasks against `<2 CPUs, 3 GPUs>` ones
/// on `<100 CPUs, 100 GPUs>`: DRF equalises dominant shares at 60 % each (20 tasks apiece),
/// with `gpus` counted exactly as any other kind.
#[test]
fn slides_cpu_gpu_example_equalises_dominant_shares() {
    let mut a = Allocator::new(Policy::Hdrf);
    a.add_framework(fw(1), &role("user1")).unwrap();
    a.add_framework(fw(2), &role("user2")).unwrap();
    a.add_agent(ag(1), &r("cpus=100,gpus=100")).unwrap();
    let demand = [r("cpus=3,gpus=2"), r("cpus=2,gpus=3")];
    loop {
        let free = a.agent_free(ag(1)).unwrap();
        let Some(f) = pick(&mut a, Some(ag(1)), &free.to_string(), 0) else {
            break;
        };
        let d = &demand[usize::from(f == fw(2))];
        if !d.fits_in(&free) {
            break;
        }
        a.allocate(f, ag(1), d).unwrap();
    }
    assert_eq!(a.allocation(fw(1)).unwrap(), r("cpus=60,gpus=40"));
    assert_eq!(a.allocation(fw(2)).unwrap(), r("cpus=40,gpus=60"));
    for f in [fw(1), fw(2)] {
        let share = a.dominant_share(f).unwrap();
        assert!((share - 0.6).abs() < 1e-9, "{share}");
    }
}
