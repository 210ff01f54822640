//! Property tests of quota on random trees and operation sequences: a limit is never
//! exceeded counting outstanding offers (what `cycle` books), a role below its guarantee with
//! demand is served before any fair-share decision, and a quota that cannot bind (limits at
//! least the capacity, no guarantee) changes no decision. The fast path is compared with the
//! reference under random quota in `allocator_props.rs` (its `Op::Quota`).

#![allow(clippy::unwrap_used)]

use allocator::{Allocator, Policy};
use proptest::prelude::*;
use protocol::{AgentId, FrameworkId, ResourceName, Resources, RolePath};
use uuid::Uuid;

const KINDS: [&str; 3] = ["cpus", "mem", "gpus"];
const ROLES: [&str; 6] = ["a", "a/x", "a/y", "b", "b/x", "c"];

fn fw(i: usize) -> FrameworkId {
    FrameworkId(Uuid::from_u128(i as u128 + 1))
}

fn agent(i: usize) -> AgentId {
    AgentId(Uuid::from_u128((1 << 64) | i as u128))
}

fn millis(v: [u64; 3]) -> Resources {
    let mut r = Resources::new();
    for (k, x) in KINDS.iter().zip(v) {
        r.set_millis(ResourceName::new(*k).unwrap(), x);
    }
    r
}

fn role(path: &str) -> RolePath {
    RolePath::new(path).unwrap()
}

/// Whether `path` is `top` or below it.
fn under(path: &str, top: &str) -> bool {
    path == top || path.starts_with(&format!("{top}/"))
}

/// A role (index into `ROLES`) with an optional guarantee and limit.
type QuotaSpec = (usize, Option<[u64; 3]>, Option<[u64; 3]>);

/// A cluster: each framework's role (index into `ROLES`), agent totals, quotas per role index,
/// and steps: `Some((agent, release divisor))` releases part of a framework's holding, `None`
/// runs a cycle.
#[derive(Debug, Clone)]
struct World {
    fws: Vec<usize>,
    agents: Vec<[u64; 3]>,
    quotas: Vec<QuotaSpec>,
    steps: Vec<Option<(usize, usize, bool)>>,
}

fn world() -> impl Strategy<Value = World> {
    let amount = prop::array::uniform3(0u64..20_000);
    (
        prop::collection::vec(0..ROLES.len(), 1..8),
        prop::collection::vec(
            (
                1000u64..16000,
                1000u64..16000,
                prop::sample::select(vec![0u64, 2000]),
            ),
            1..6,
        )
        .prop_map(|v| v.into_iter().map(|(a, b, c)| [a, b, c]).collect()),
        prop::collection::vec(
            (
                0..ROLES.len(),
                prop::option::of(amount.clone()),
                prop::option::of(amount),
            ),
            0..4,
        ),
        prop::collection::vec(
            prop::option::of((any::<usize>(), any::<usize>(), any::<bool>())),
            1..30,
        ),
    )
        .prop_map(|(fws, agents, quotas, steps)| World {
            fws,
            agents,
            quotas,
            steps,
        })
}

fn build(w: &World) -> (Allocator, Vec<FrameworkId>, Vec<AgentId>) {
    let mut a = Allocator::new(Policy::Hdrf);
    let fws: Vec<FrameworkId> = (0..w.fws.len()).map(fw).collect();
    for (i, &r) in w.fws.iter().enumerate() {
        a.add_framework(fws[i], &role(ROLES[r])).unwrap();
    }
    let agents: Vec<AgentId> = (0..w.agents.len()).map(agent).collect();
    for (i, t) in w.agents.iter().enumerate() {
        a.add_agent(agents[i], &millis(*t)).unwrap();
    }
    (a, fws, agents)
}

/// A step other than a cycle: releases half of what a framework holds on an agent, or toggles
/// its subscription.
fn step(a: &mut Allocator, fws: &[FrameworkId], agents: &[AgentId], s: (usize, usize, bool)) {
    let (f, g) = (fws[s.0 % fws.len()], agents[s.1 % agents.len()]);
    if s.2 {
        let free = a.agent_free(g).unwrap();
        let used = a.agent_total(g).unwrap().saturating_sub(&free);
        let held = a.allocation(f).unwrap_or_default();
        let mut part = Resources::new();
        for (name, v) in used.iter() {
            part.set_millis(name.clone(), held.millis(name.as_str()).min(v) / 2);
        }
        let _ = a.release(f, g, &part);
    } else {
        let _ = a.set_active(f, !s.0.is_multiple_of(3));
    }
}

/// What the frameworks under `top` hold in all.
fn held_under(a: &Allocator, w: &World, fws: &[FrameworkId], top: &str) -> Resources {
    let mut sum = Resources::new();
    for (i, &r) in w.fws.iter().enumerate() {
        if under(ROLES[r], top) {
            sum.add_assign(&a.allocation(fws[i]).unwrap_or_default());
        }
    }
    sum
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_limit_is_never_exceeded_counting_offers(w in world()) {
        let (mut a, fws, agents) = build(&w);
        for (r, g, l) in &w.quotas {
            let _ = a.set_role_quota(&role(ROLES[*r]), g.map(millis).as_ref(), l.map(millis).as_ref());
        }
        let limits: Vec<(&str, Resources)> = ROLES
            .iter()
            .filter_map(|r| a.role_quota(&role(r)).1.map(|l| (*r, l)))
            .collect();
        for (now, s) in w.steps.iter().enumerate() {
            match s {
                Some(s) => step(&mut a, &fws, &agents, *s),
                None => {
                    let _ = a.cycle(None, now as u64);
                }
            }
            // Everything booked is an offer or an allocation: the holdings count both.
            for (r, limit) in &limits {
                let held = held_under(&a, &w, &fws, r);
                for (name, l) in limit.iter() {
                    prop_assert!(held.millis(name.as_str()) <= l, "role {} holds {} over limit {}", r, held, limit);
                }
            }
        }
    }

    #[test]
    fn guarantees_with_demand_are_met_before_fair_share(w in world()) {
        let (mut a, fws, agents) = build(&w);
        for (r, g, _) in &w.quotas {
            let _ = a.set_role_quota(&role(ROLES[*r]), g.map(millis).as_ref(), None);
        }
        let guarantees: Vec<(&str, Resources)> = ROLES
            .iter()
            .filter_map(|r| a.role_quota(&role(r)).0.map(|g| (*r, g)))
            .collect();
        let mut active = vec![true; fws.len()];
        for (now, s) in w.steps.iter().enumerate() {
            if let Some(s) = s {
                step(&mut a, &fws, &agents, *s);
                if !s.2 {
                    active[s.0 % fws.len()] = !s.0.is_multiple_of(3);
                }
                continue;
            }
            // A cycle by hand: every decision must go to a role below its guarantee when one
            // with demand (an active framework below it) exists for that agent's resources.
            for &ag in &agents {
                let free = a.agent_free(ag).unwrap();
                let Some(p) = a.pick(Some(ag), &free, now as u64) else { continue };
                let unmet: Vec<&str> = guarantees
                    .iter()
                    .filter(|(r, g)| {
                        let held = held_under(&a, &w, &fws, r);
                        let below = g.iter().any(|(n, gv)| {
                            free.millis(n.as_str()) > 0 && held.millis(n.as_str()) < gv
                        });
                        let demand = w.fws.iter().enumerate().any(|(i, &fr)| active[i] && under(ROLES[fr], r));
                        below && demand
                    })
                    .map(|(r, _)| *r)
                    .collect();
                let pi = fws.iter().position(|&f| f == p).unwrap();
                if !unmet.is_empty() {
                    prop_assert!(
                        unmet.iter().any(|r| under(ROLES[w.fws[pi]], r)),
                        "{} (role {}) got {} while {:?} are below their guarantee", p, ROLES[w.fws[pi]], free, unmet
                    );
                }
                a.allocate(p, ag, &free).unwrap();
            }
        }
    }

    #[test]
    fn a_quota_that_cannot_bind_changes_no_decision(w in world()) {
        let (mut a, fws, agents) = build(&w);
        let (mut b, _, _) = build(&w);
        let huge = millis([1 << 40, 1 << 40, 1 << 40]);
        for (r, _, _) in &w.quotas {
            b.set_role_quota(&role(ROLES[*r]), None, Some(&huge)).unwrap();
        }
        for (now, s) in w.steps.iter().enumerate() {
            match s {
                Some(s) => {
                    step(&mut a, &fws, &agents, *s);
                    step(&mut b, &fws, &agents, *s);
                }
                None => prop_assert_eq!(a.cycle(None, now as u64), b.cycle(None, now as u64)),
            }
        }
    }
}
