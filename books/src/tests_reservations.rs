//! Unit tests of reservations in the books (`reservations.rs`, the pools in `offers.rs`):
//! effects asserted directly, no network, no clock.

#![allow(clippy::unwrap_used)]

use protocol::reservation::{Reservation, ReservationKind, ReserveRequest};
use protocol::{CommandSpec, TaskSpec, TaskState};

use super::tests::{check, new_books};
use super::*;

fn at(ms: u64) -> Now {
    let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Now {
        ms,
        wall: start + chrono::Duration::milliseconds(i64::try_from(ms).unwrap()),
    }
}

fn res(s: &str) -> Resources {
    s.parse().unwrap()
}

fn registration(reservations: Vec<Reservation>) -> AgentRegistration {
    AgentRegistration {
        hostname: "h".into(),
        endpoint: "http://127.0.0.1:1".into(),
        resources: res("cpus=4,mem=100"),
        attributes: Default::default(),
        agent_id: None,
        tasks: vec![],
        api_token: None,
        gpu_devices: Vec::new(),
        reservations,
    }
}

fn framework(s: &mut State, role: &str) -> FrameworkId {
    let mut fx = Vec::new();
    let reg = FrameworkRegistration {
        name: role.into(),
        role: role.parse().unwrap(),
        failover_timeout_s: None,
        framework_id: None,
        demand: None,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    };
    let (fw, _) = s.register_framework(reg, &at(0), &mut fx).unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    fw
}

fn task(id: &str, agent: AgentId, r: &str) -> TaskSpec {
    TaskSpec {
        task_id: id.parse().unwrap(),
        name: id.into(),
        agent_id: agent,
        resources: res(r),
        command: CommandSpec::Shell("sleep 100".into()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: None,
    }
}

fn reserve_a(r: &str) -> Vec<Reservation> {
    vec![Reservation {
        role: "a".parse().unwrap(),
        resources: res(r),
    }]
}

#[test]
fn a_static_reservation_for_an_unknown_role_registers_nothing() {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let err = s
        .register_agent(registration(reserve_a("cpus=2")), &at(0), &mut fx)
        .unwrap_err();
    assert!(
        matches!(&err, StateError::InvalidReservation { field, .. } if field == "reservations[0].role"),
        "{err}"
    );
    assert!(s.agents().is_empty());
    assert!(fx.is_empty());
}

#[test]
fn pools_are_offered_apart_and_tasks_go_back_to_their_pool() {
    let mut s = new_books(&Settings::default());
    let a = framework(&mut s, "a/x");
    let b = framework(&mut s, "b");
    let mut fx = Vec::new();
    let (ag, _) = s
        .register_agent(registration(reserve_a("cpus=2")), &at(0), &mut fx)
        .unwrap();
    let info = s.agents().remove(0);
    assert_eq!(info.reservations[0].kind, ReservationKind::Static);
    assert_eq!(s.allocate(&at(1), &mut fx), 2);
    let offers = s.offers(None, None);
    let reserved = offers.iter().find(|o| o.reservation.is_some()).unwrap();
    let plain = offers.iter().find(|o| o.reservation.is_none()).unwrap();
    assert_eq!(reserved.framework_id, a);
    assert_eq!(reserved.resources, res("cpus=2"));
    // `a/x` has the lower share after its reserved offer: `b` gets the unreserved rest.
    assert_eq!(plain.framework_id, b);
    assert_eq!(plain.resources, res("cpus=2,mem=100"));
    // A task that fits in no single pool is refused; nothing changes.
    let (rid, pid) = (reserved.offer_id, plain.offer_id);
    s.decline(
        b,
        Decline {
            offer_ids: vec![pid],
            refuse: Some(std::time::Duration::from_secs(60)),
        },
        &at(2),
        &mut fx,
    )
    .unwrap();
    assert_eq!(s.allocate(&at(3), &mut fx), 1);
    let plain = s
        .offers(None, None)
        .into_iter()
        .find(|o| o.reservation.is_none())
        .unwrap();
    assert_eq!(plain.framework_id, a);
    let both = vec![rid, plain.offer_id];
    let err = s
        .accept(
            a,
            Accept {
                offer_ids: both.clone(),
                tasks: vec![task("big", ag, "cpus=3")],
                refuse: None,
            },
            &at(4),
            &mut fx,
        )
        .unwrap_err();
    assert!(matches!(err, StateError::TaskSpansPools(_)), "{err}");
    assert_eq!(s.offers(None, None).len(), 2);
    // Two tasks: the first fits the reserved pool, the second the unreserved one.
    s.accept(
        a,
        Accept {
            offer_ids: both,
            tasks: vec![task("r", ag, "cpus=2"), task("u", ag, "cpus=1,mem=10")],
            refuse: Some(std::time::Duration::ZERO),
        },
        &at(5),
        &mut fx,
    )
    .unwrap();
    let alloc = s.ledger.allocator();
    assert_eq!(alloc.reservations(ag)[0].free, Resources::new());
    assert_eq!(alloc.unreserved_free(ag), Some(res("cpus=1,mem=90")));
    assert_eq!(
        s.tasks.get(&(a, "r".parse().unwrap())).unwrap().pool,
        Some("a".parse().unwrap())
    );
    assert_eq!(s.tasks.get(&(a, "u".parse().unwrap())).unwrap().pool, None);
    // Ending the reserved task returns its cpus to the reserved pool.
    let status = s.coordinator_status(a, &"r".parse().unwrap(), TaskState::Failed, "x", &at(6));
    s.record_status(status.unwrap(), &at(6), &mut fx);
    let alloc = s.ledger.allocator();
    assert_eq!(alloc.reservations(ag)[0].free, res("cpus=2"));
    assert_eq!(alloc.unreserved_free(ag), Some(res("cpus=1,mem=90")));
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn reserve_and_unreserve_consume_the_offer_and_persist() {
    let mut s = new_books(&Settings::default());
    let a = framework(&mut s, "a");
    let mut fx = Vec::new();
    let (ag, _) = s
        .register_agent(registration(Vec::new()), &at(0), &mut fx)
        .unwrap();
    s.allocate(&at(1), &mut fx);
    let offer = s.offers(None, None).remove(0);
    // Too much: refused, nothing changed.
    let mut fx = Vec::new();
    let err = s
        .reserve(
            a,
            ReserveRequest {
                offer_id: offer.offer_id,
                resources: res("cpus=5"),
            },
            &at(2),
            &mut fx,
        )
        .unwrap_err();
    assert!(
        matches!(&err, StateError::InvalidReservation { field, .. } if field == "resources.cpus")
    );
    assert!(fx.is_empty());
    assert_eq!(s.offers(None, None).len(), 1);
    let out = s
        .reserve(
            a,
            ReserveRequest {
                offer_id: offer.offer_id,
                resources: res("cpus=2"),
            },
            &at(2),
            &mut fx,
        )
        .unwrap();
    assert_eq!(out.reserved, res("cpus=2"));
    assert!(s.offers(None, None).is_empty(), "the offer is consumed");
    assert_eq!(
        fx,
        vec![
            Effect::Persist(crate::records::Change::SetReservation(
                ag,
                "a".parse().unwrap(),
                res("cpus=2")
            )),
            Effect::Offer(OfferEvent::OfferAccepted(super::tests::outcome(
                &offer,
                &[],
                Some("consumed by a reserve or unreserve operation")
            ))),
            Effect::Allocate,
        ]
    );
    assert_eq!(s.allocate(&at(3), &mut fx), 2);
    let reserved = s
        .offers(None, None)
        .into_iter()
        .find(|o| o.reservation.is_some())
        .unwrap();
    // Unreserving more than was reserved dynamically is refused.
    let err = s
        .unreserve(
            a,
            ReserveRequest {
                offer_id: reserved.offer_id,
                resources: res("cpus=3"),
            },
            &at(4),
            &mut fx,
        )
        .unwrap_err();
    assert!(matches!(err, StateError::InvalidReservation { .. }));
    let out = s
        .unreserve(
            a,
            ReserveRequest {
                offer_id: reserved.offer_id,
                resources: res("cpus=2"),
            },
            &at(4),
            &mut fx,
        )
        .unwrap();
    assert!(out.reserved.is_empty());
    assert!(s.ledger.allocator().reservations(ag).is_empty());
    assert!(s.agents()[0].reservations.is_empty());
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn a_restored_dynamic_reservation_is_applied_when_its_agent_registers() {
    let mut s = new_books(&Settings::default());
    let ag = AgentId::new();
    let snapshot = crate::records::Snapshot {
        reservations: vec![(ag, "a".parse().unwrap(), res("cpus=1"))],
        weights: vec![("a".parse().unwrap(), protocol::Weight::new(1.0).unwrap())],
        ..Default::default()
    };
    s.restore(snapshot, &at(0));
    let mut fx = Vec::new();
    let mut reg = registration(Vec::new());
    reg.agent_id = Some(ag);
    s.register_agent(reg, &at(1), &mut fx).unwrap();
    let r = s.ledger.allocator().reservations(ag);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].total, res("cpus=1"));
    assert_eq!(s.agents()[0].reservations[0].kind, ReservationKind::Dynamic);
}

#[test]
fn a_forgotten_agent_takes_its_dynamic_reservations_with_it() {
    use crate::records::{Change, Snapshot, StoredAgent};
    let config = Settings::default();
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap();
    let limit = ms(config.agent_heartbeat_interval) * u64::from(config.max_missed_heartbeats);
    let retention = ms(config.lost_agent_retention);
    let gone = AgentId::new();
    let mut s = new_books(&config);
    s.restore(
        Snapshot {
            agents: vec![StoredAgent {
                id: gone,
                hostname: "h".into(),
                endpoint: "http://127.0.0.1:1".into(),
                last_seen: at(0).wall,
                drain_deadline: None,
            }],
            reservations: vec![(gone, "a".parse().unwrap(), res("cpus=1"))],
            ..Snapshot::default()
        },
        &at(1_000),
    );
    let mut fx = Vec::new();
    s.check_agents(&at(1_001 + limit), &mut fx);
    let mut fx = Vec::new();
    s.check_agents(&at(2_002 + limit + retention), &mut fx);
    assert_eq!(
        fx,
        vec![
            Effect::Persist(Change::RemoveAgent(gone)),
            Effect::Persist(Change::SetReservation(
                gone,
                "a".parse().unwrap(),
                Resources::new()
            )),
        ]
    );
    assert!(s.agents.no_dynamic_reservations());
}

#[test]
fn a_reservation_whose_offer_ended_between_its_write_and_its_apply_puts_the_registry_back() {
    let mut s = new_books(&Settings::default());
    let a = framework(&mut s, "a");
    let mut fx = Vec::new();
    let (ag, _) = s
        .register_agent(registration(Vec::new()), &at(0), &mut fx)
        .unwrap();
    s.allocate(&at(1), &mut fx);
    let offer = s.offers(None, None).remove(0);
    let req = ReserveRequest {
        offer_id: offer.offer_id,
        resources: res("cpus=2"),
    };
    // The plan changes nothing and says what to write.
    let plan = s
        .plan_reservation(a, &req, super::ReservationOp::Reserve)
        .unwrap();
    assert_eq!(
        plan.change(),
        crate::records::Change::SetReservation(ag, "a".parse().unwrap(), res("cpus=2"))
    );
    assert_eq!(s.offers(None, None).len(), 1);
    // Meanwhile the offer is declined: applying answers as the books now do, and queues the
    // registry's correction (no dynamic reservation).
    s.decline(
        a,
        Decline {
            offer_ids: vec![offer.offer_id],
            refuse: Some(std::time::Duration::ZERO),
        },
        &at(2),
        &mut fx,
    )
    .unwrap();
    let mut fx = Vec::new();
    let err = s.commit_reservation(plan, &at(3), &mut fx).unwrap_err();
    assert!(matches!(err, StateError::OfferGone { .. }), "{err:?}");
    assert_eq!(
        fx,
        vec![Effect::Persist(crate::records::Change::SetReservation(
            ag,
            "a".parse().unwrap(),
            Resources::default()
        ))]
    );
    assert!(s.ledger.allocator().reservations(ag).is_empty());

    // A plan applied while its offer still stands reserves, and queues no second write.
    s.allocate(&at(4), &mut fx);
    let offer = s.offers(None, None).remove(0);
    let req = ReserveRequest {
        offer_id: offer.offer_id,
        resources: res("cpus=2"),
    };
    let plan = s
        .plan_reservation(a, &req, super::ReservationOp::Reserve)
        .unwrap();
    // No `Persist`: the plan's write was made before.
    let out = check(
        &mut s,
        |s, fx| s.commit_reservation(plan, &at(5), fx).unwrap(),
        vec![
            Effect::Offer(OfferEvent::OfferAccepted(super::tests::outcome(
                &offer,
                &[],
                Some("consumed by a reserve or unreserve operation"),
            ))),
            Effect::Allocate,
        ],
    );
    assert_eq!(out.reserved, res("cpus=2"));
    assert_eq!(s.ledger_mismatches(), 0);
}
