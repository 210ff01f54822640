//! Property tests of reservations on random trees, reservations and operation
//! sequences: reserved resources never reach a framework outside the reserved role's subtree;
//! the fast path equals the reference for every pool (reserved pools walked from their role's
//! node, the unreserved pool from the root), decision for decision and cycle for cycle; the
//! pools always add up to the agent; and a reservation made and taken back leaves every later
//! decision as if it had never been made. (With no reservation at all, `allocator_props.rs`
//! checks every decision against the reference as before.)

#![allow(clippy::unwrap_used)]

use allocator::{Allocator, FilterMode, Policy};
use proptest::prelude::*;
use protocol::{AgentId, FrameworkId, ResourceName, Resources, RolePath};
use uuid::Uuid;

const KINDS: [&str; 3] = ["cpus", "mem", "gpus"];
const ROLES: [&str; 7] = ["a", "a/x", "a/y", "a/x/p", "b", "b/x", "c"];

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

/// One random operation; indices are taken modulo the number of frameworks / agents / roles.
#[derive(Debug, Clone)]
enum Op {
    /// Reserve (replace) `[cpus, mem, gpus]` on an agent for a role; zero removes it.
    Reserve(usize, usize, [u64; 3]),
    /// Allocate to a framework from the first pool of the agent it may use (or unreserved).
    Allocate(usize, usize, [u64; 3], bool),
    /// Release half of what a framework holds in one pool of an agent.
    Release(usize, usize, usize),
    Filter(usize, usize, u64),
    Active(usize, bool),
    Demand(usize, Option<[u64; 3]>),
    Quota(usize, Option<[u64; 3]>, Option<[u64; 3]>),
    Cycle(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let amount = prop::array::uniform3(0u64..6000);
    prop_oneof![
        3 => (any::<usize>(), any::<usize>(), amount.clone()).prop_map(|(a, r, v)| Op::Reserve(a, r, v)),
        3 => (any::<usize>(), any::<usize>(), prop::array::uniform3(0u64..3000), any::<bool>()).prop_map(|(f, a, v, p)| Op::Allocate(f, a, v, p)),
        2 => (any::<usize>(), any::<usize>(), any::<usize>()).prop_map(|(f, a, p)| Op::Release(f, a, p)),
        2 => (any::<usize>(), any::<usize>(), 0u64..60).prop_map(|(f, a, u)| Op::Filter(f, a, u)),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(f, b)| Op::Active(f, b)),
        1 => (any::<usize>(), prop::option::of(prop::array::uniform3(0u64..3000))).prop_map(|(f, d)| Op::Demand(f, d)),
        1 => (any::<usize>(), prop::option::of(amount.clone()), prop::option::of(prop::array::uniform3(0u64..12000))).prop_map(|(r, g, l)| Op::Quota(r, g, l)),
        4 => (0u64..50).prop_map(Op::Cycle),
    ]
}

#[derive(Debug, Clone)]
struct World {
    fws: Vec<usize>,
    agents: Vec<[u64; 3]>,
    /// Reservations made before any operation: (agent, role, per cent of each kind of the
    /// agent's total).
    reserves: Vec<(usize, usize, [u64; 3])>,
    ops: Vec<Op>,
}

fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec(0..ROLES.len(), 1..9),
        prop::collection::vec(
            (
                1000u64..16000,
                1000u64..16000,
                prop::sample::select(vec![0u64, 2000]),
            )
                .prop_map(|(a, b, c)| [a, b, c]),
            1..5,
        ),
        prop::collection::vec(
            (
                any::<usize>(),
                any::<usize>(),
                prop::array::uniform3(0u64..50),
            ),
            0..6,
        ),
        prop::collection::vec(op(), 1..60),
    )
        .prop_map(|(fws, agents, reserves, ops)| World {
            fws,
            agents,
            reserves,
            ops,
        })
}

fn build(w: &World, mode: FilterMode) -> (Allocator, Vec<FrameworkId>, Vec<AgentId>) {
    let mut a = Allocator::new(Policy::Hdrf);
    a.set_filter_mode(mode);
    let fws: Vec<FrameworkId> = (0..w.fws.len()).map(fw).collect();
    for (i, &r) in w.fws.iter().enumerate() {
        a.add_framework(fws[i], &role(ROLES[r])).unwrap();
    }
    let agents: Vec<AgentId> = (0..w.agents.len()).map(agent).collect();
    for (i, t) in w.agents.iter().enumerate() {
        a.add_agent(agents[i], &millis(*t)).unwrap();
    }
    for (ai, ri, pct) in &w.reserves {
        let t = w.agents[ai % agents.len()];
        let v = [
            t[0] * pct[0] / 100,
            t[1] * pct[1] / 100,
            t[2] * pct[2] / 100,
        ];
        // Two reservations on one agent may not fit together: the second is then refused.
        let _ = a.set_reservation(
            agents[ai % agents.len()],
            &role(ROLES[ri % ROLES.len()]),
            &millis(v),
        );
    }
    (a, fws, agents)
}

fn tick(now: u64, op: &Op) -> u64 {
    match op {
        Op::Cycle(d) => now + d,
        _ => now,
    }
}

/// Applies one operation other than a cycle (errors are fine: they change nothing).
fn apply(a: &mut Allocator, w: &World, fws: &[FrameworkId], agents: &[AgentId], op: &Op, now: u64) {
    let fi = |i: usize| i % fws.len();
    let g = |i: usize| agents[i % agents.len()];
    match op {
        Op::Reserve(ai, ri, v) => {
            let _ = a.set_reservation(g(*ai), &role(ROLES[ri % ROLES.len()]), &millis(*v));
        }
        Op::Allocate(f, ai, v, reserved) => {
            let path = ROLES[w.fws[fi(*f)]];
            let pool = a
                .reservations(g(*ai))
                .into_iter()
                .find(|r| under(path, r.role.as_str()))
                .map(|r| r.role)
                .filter(|_| *reserved);
            let _ = a.allocate_in(fws[fi(*f)], g(*ai), &millis(*v), pool.as_ref());
        }
        Op::Release(f, ai, p) => {
            let pools = a.reservations(g(*ai));
            let pool = (p % (pools.len() + 1) < pools.len())
                .then(|| pools[p % (pools.len() + 1)].role.clone());
            let held = a.allocation(fws[fi(*f)]).unwrap_or_default();
            let mut half = Resources::new();
            for (name, v) in held.iter() {
                half.set_millis(name.clone(), v / 4);
            }
            let _ = a.release_in(fws[fi(*f)], g(*ai), &half, pool.as_ref());
        }
        Op::Filter(f, ai, until) => {
            let refused = a.agent_free(g(*ai)).unwrap_or_default();
            let _ = a.add_filter(fws[fi(*f)], g(*ai), &refused, now + until);
        }
        Op::Active(f, on) => {
            let _ = a.set_active(fws[fi(*f)], *on);
        }
        Op::Demand(f, d) => {
            let _ = a.set_demand(fws[fi(*f)], d.map(millis));
        }
        Op::Quota(ri, gu, l) => {
            let _ = a.set_role_quota(
                &role(ROLES[ri % ROLES.len()]),
                gu.map(millis).as_ref(),
                l.map(millis).as_ref(),
            );
        }
        Op::Cycle(_) => {}
    }
}

/// Every agent's pools add up: unreserved free plus the pools' free parts is its free, and the
/// pools' totals fit in its total.
fn assert_pools_add_up(a: &Allocator, agents: &[AgentId]) -> Result<(), TestCaseError> {
    for &g in agents {
        let free = a.agent_free(g).unwrap();
        let mut sum = a.unreserved_free(g).unwrap();
        let mut reserved = Resources::new();
        for r in a.reservations(g) {
            prop_assert!(r.free.fits_in(&r.total) || r.free.is_empty());
            sum.add_assign(&r.free);
            reserved.add_assign(&r.total);
        }
        prop_assert_eq!(sum, free);
        prop_assert!(reserved.fits_in(&a.agent_total(g).unwrap()) || reserved.is_empty());
    }
    Ok(())
}

/// The fast path and the reference agree on every pool of every agent.
fn assert_agree(a: &mut Allocator, agents: &[AgentId], now: u64) -> Result<(), TestCaseError> {
    for &g in agents {
        for r in a.reservations(g) {
            let fast = a.pick_reserved(g, &r.role, now);
            let slow = a.pick_reserved_reference(g, &r.role, now);
            prop_assert_eq!(fast, slow, "agent {} pool {}", g, r.role);
        }
        let w = a.unreserved_free(g).unwrap();
        prop_assert_eq!(a.pick(Some(g), &w, now), a.pick_reference(Some(g), &w, now));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn reserved_resources_never_leave_their_subtree(w in world()) {
        let (mut a, fws, agents) = build(&w, FilterMode::default());
        let mut now = 0;
        for op in &w.ops {
            now = tick(now, op);
            if let Op::Cycle(_) = op {
                let reserved_before: Vec<_> = agents.iter().map(|&g| a.reservations(g)).collect();
                let unreserved_before: Vec<_> = agents.iter().map(|&g| a.unreserved_free(g).unwrap()).collect();
                let mut given_unreserved = vec![Resources::new(); agents.len()];
                for d in a.cycle(None, now) {
                    let i = agents.iter().position(|&g| g == d.agent).unwrap();
                    let f = fws.iter().position(|&x| x == d.framework).unwrap();
                    match &d.reservation {
                        Some(r) => {
                            prop_assert!(under(ROLES[w.fws[f]], r.as_str()), "{} got {}'s", ROLES[w.fws[f]], r);
                            let pool = reserved_before[i].iter().find(|p| p.role == *r).unwrap();
                            prop_assert!(d.resources.fits_in(&pool.free));
                        }
                        None => given_unreserved[i].add_assign(&d.resources),
                    }
                }
                for (i, given) in given_unreserved.iter().enumerate() {
                    prop_assert!(given.fits_in(&unreserved_before[i]) || given.is_empty());
                }
            } else {
                apply(&mut a, &w, &fws, &agents, op, now);
            }
            assert_pools_add_up(&a, &agents)?;
        }
    }

    #[test]
    fn fast_path_equals_reference_with_reservations(w in world(), skip in any::<bool>()) {
        let mode = if skip { FilterMode::SkipOnly } else { FilterMode::Exact };
        let (mut a, fws, agents) = build(&w, mode);
        let mut now = 0;
        for op in &w.ops {
            now = tick(now, op);
            if let Op::Cycle(_) = op {
                let _ = a.cycle(None, now);
            } else {
                apply(&mut a, &w, &fws, &agents, op, now);
            }
            assert_agree(&mut a, &agents, now)?;
            assert_agree(&mut a, &agents, now + 30)?;
        }
    }

    #[test]
    fn cycles_equal_reference_cycles_with_reservations(w in world(), skip in any::<bool>()) {
        // Each cycle twice: on the allocator, and by hand with the reference picks on a twin:
        // every reserved pool (in reservation order), then the unreserved rest.
        let mode = if skip { FilterMode::SkipOnly } else { FilterMode::Exact };
        let (mut a, fws, agents) = build(&w, mode);
        let (mut b, _, _) = build(&w, mode);
        let mut now = 0;
        for op in &w.ops {
            now = tick(now, op);
            if let Op::Cycle(_) = op {
                let got: Vec<_> = a
                    .cycle(None, now)
                    .into_iter()
                    .map(|d| (d.agent, d.framework, d.resources, d.reservation))
                    .collect();
                let mut want = Vec::new();
                for &g in &agents {
                    let pools: Vec<Option<RolePath>> = b
                        .reservations(g)
                        .into_iter()
                        .map(|r| Some(r.role))
                        .chain([None])
                        .collect();
                    for pool in pools {
                        loop {
                            let (f, free) = match &pool {
                                Some(r) => {
                                    let free = b.reservations(g).into_iter().find(|p| p.role == *r).unwrap().free;
                                    (b.pick_reserved_reference(g, r, now), free)
                                }
                                None => {
                                    let free = b.unreserved_free(g).unwrap();
                                    (b.pick_reference(Some(g), &free, now), free)
                                }
                            };
                            let Some(f) = f else { break };
                            let give = b.limit_offer(f, &free).unwrap();
                            if give.is_empty() {
                                break;
                            }
                            b.allocate_in(f, g, &give, pool.as_ref()).unwrap();
                            want.push((g, f, give.clone(), pool.clone()));
                            if give == free {
                                break;
                            }
                        }
                    }
                }
                prop_assert_eq!(got, want);
            } else {
                apply(&mut a, &w, &fws, &agents, op, now);
                apply(&mut b, &w, &fws, &agents, op, now);
            }
        }
    }

    #[test]
    fn a_reservation_taken_back_changes_no_later_decision(w in world()) {
        // `a` makes (and at once takes back) every reservation; `b` never makes any.
        let w = World { reserves: Vec::new(), ..w };
        let (mut a, fws, agents) = build(&w, FilterMode::default());
        let (mut b, _, _) = build(&w, FilterMode::default());
        let mut now = 0;
        for op in &w.ops {
            now = tick(now, op);
            match op {
                Op::Cycle(_) => {
                    let da = a.cycle(None, now);
                    let db = b.cycle(None, now);
                    prop_assert!(da.iter().all(|d| d.reservation.is_none()));
                    prop_assert_eq!(da, db);
                }
                Op::Reserve(ai, ri, v) => {
                    let (g, r) = (agents[ai % agents.len()], role(ROLES[ri % ROLES.len()]));
                    // The same tree in both: the role exists before the reservation.
                    let one = protocol::Weight::new(1.0).unwrap();
                    a.set_role_weight(&r, one);
                    b.set_role_weight(&r, one);
                    if a.set_reservation(g, &r, &millis(*v)).is_ok() {
                        a.set_reservation(g, &r, &Resources::new()).unwrap();
                    }
                    prop_assert!(a.reservations(g).is_empty());
                }
                _ => {
                    apply(&mut a, &w, &fws, &agents, op, now);
                    apply(&mut b, &w, &fws, &agents, op, now);
                }
            }
        }
    }
}
