//! Unit tests of stalls (`stall.rs`): a framework that wants tasks, holds no offer and has had
//! none for `stall_after` while an agent has room is reported stalled, once, with its most
//! likely reason, and the stall ends when it is sent an offer; a framework that is suppressed,
//! holds an offer, wants no task, or finds every agent full is not stalled.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::tests::{at, new_books, registration, reregister, task};
use super::*;

/// Framework `f` (role `eng`, subscribed at 0), one agent of `cpus=4,mem=100` registered at
/// 0, and the agent's whole offer to `f`, made at 1 (default settings: `stall_after` 30 s).
fn offered() -> (State, FrameworkId, AgentId, protocol::Offer) {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", None, None), &at(0), &mut fx)
        .unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let (agent, _) = s
        .register_agent(
            reregister(AgentId::new(), "cpus=4,mem=100", vec![]),
            &at(0),
            &mut fx,
        )
        .unwrap();
    assert_eq!(s.allocate(&at(1), &mut fx), 1);
    let offer = s.offers(Some(fw), None).remove(0);
    (s, fw, agent, offer)
}

/// [`offered`], with the offer declined at 2 and filtered for `refuse`.
fn declined(refuse: Duration) -> (State, FrameworkId, AgentId) {
    let (mut s, fw, agent, offer) = offered();
    let mut fx = Vec::new();
    let decline = Decline {
        offer_ids: vec![offer.offer_id],
        refuse: Some(refuse),
    };
    s.decline(fw, decline, &at(2), &mut fx).unwrap();
    (s, fw, agent)
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn a_framework_filtered_by_its_declines_past_stall_after_is_stalled_once() {
    let (mut s, fw, _) = declined(HOUR);
    // Its last offer was at 1: 29 s later it is not stalled yet.
    assert_eq!(s.check_stalls(&at(30_000)), vec![]);
    assert_eq!(s.explain(fw, &at(30_000)).unwrap().stalled_for_s, None);
    let reason = "1 agent(s) are filtered by its declines (the soonest filter ends in 3569 s); \
                  revive to clear the filters";
    assert_eq!(
        s.check_stalls(&at(31_001)),
        vec![StallChange::Began {
            framework_id: fw,
            name: "f".into(),
            stalled_for_s: 31.0,
            agents_with_room: 1,
            reason: reason.into(),
        }]
    );
    assert_eq!(s.frameworks_stalled(), 1);
    assert_eq!(s.gauges().frameworks_stalled, 1);
    let e = s.explain(fw, &at(31_001)).unwrap();
    assert_eq!(e.stalled_for_s, Some(31.0));
    assert_eq!(
        e.summary,
        format!("stalled: no offer for 31 s while 1 agent(s) have room; {reason}")
    );
    // Reported once, not on every check.
    assert_eq!(s.check_stalls(&at(32_000)), vec![]);
    assert_eq!(s.frameworks_stalled(), 1);
}

#[test]
fn a_stall_ends_when_the_framework_is_sent_an_offer() {
    // Filtered for 40 s: stalled at 31 s, offered again once the filter ends at 40.002 s.
    let (mut s, fw, _) = declined(Duration::from_secs(40));
    let began = s.check_stalls(&at(31_001));
    assert!(
        matches!(&began[..], [StallChange::Began { reason, .. }]
            if reason.contains("the soonest filter ends in 9 s")),
        "{began:?}"
    );
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(40_002), &mut fx), 1);
    assert_eq!(
        s.check_stalls(&at(40_003)),
        vec![StallChange::Ended {
            framework_id: fw,
            name: "f".into(),
            stalled_for_s: 40.002,
        }]
    );
    assert_eq!(s.frameworks_stalled(), 0);
    assert_eq!(s.gauges().frameworks_stalled, 0);
    assert_eq!(s.explain(fw, &at(40_003)).unwrap().stalled_for_s, None);
}

#[test]
fn a_revive_starts_the_wait_again() {
    let (mut s, fw, _) = declined(HOUR);
    assert_eq!(s.check_stalls(&at(31_001)).len(), 1);
    let mut fx = Vec::new();
    s.revive(fw, None, &at(35_000), &mut fx).unwrap();
    assert!(
        matches!(&s.check_stalls(&at(35_001))[..], [StallChange::Ended { framework_id, .. }] if *framework_id == fw)
    );
    // Its filters are gone, and no allocation ran: nothing on the books' side holds it back.
    assert_eq!(s.check_stalls(&at(64_999)), vec![]);
    let began = s.check_stalls(&at(65_000));
    assert!(
        matches!(&began[..], [StallChange::Began { reason, .. }]
            if reason.starts_with("the coordinator sees no reason on its side (1 agent(s) could be offered to it)")
                && reason.ends_with("revive with its true pending_tasks")),
        "{began:?}"
    );
}

#[test]
fn a_suppressed_framework_is_not_stalled() {
    let (mut s, fw, _) = declined(HOUR);
    s.suppress(fw).unwrap();
    assert_eq!(s.check_stalls(&at(100_000)), vec![]);
    let e = s.explain(fw, &at(100_000)).unwrap();
    assert_eq!(e.stalled_for_s, None);
    assert!(e.summary.starts_with("suppressed"), "{}", e.summary);
}

#[test]
fn a_framework_holding_an_offer_is_not_stalled() {
    let (mut s, fw, _, _) = offered();
    // The offer is outstanding until 60 s (`offer_timeout`).
    assert_eq!(s.check_stalls(&at(50_000)), vec![]);
    assert_eq!(s.explain(fw, &at(50_000)).unwrap().stalled_for_s, None);
}

#[test]
fn a_framework_that_held_an_offer_long_waits_from_when_it_gave_it_back() {
    let (mut s, fw, _, offer) = offered();
    assert_eq!(s.check_stalls(&at(50_000)), vec![]);
    let mut fx = Vec::new();
    let decline = Decline {
        offer_ids: vec![offer.offer_id],
        refuse: Some(HOUR),
    };
    s.decline(fw, decline, &at(50_001), &mut fx).unwrap();
    // Its offer was sent 50 s ago, but it held it until now: no stall yet.
    assert_eq!(s.check_stalls(&at(51_000)), vec![]);
    assert_eq!(s.explain(fw, &at(51_000)).unwrap().stalled_for_s, None);
    // The wait started at the last check that found it holding the offer (50 s).
    let began = s.check_stalls(&at(80_001));
    assert!(
        matches!(&began[..], [StallChange::Began { stalled_for_s, .. }] if *stalled_for_s == 30.001),
        "{began:?}"
    );
}

#[test]
fn a_framework_that_wants_no_task_is_not_stalled() {
    let (mut s, fw, _) = declined(HOUR);
    let mut fx = Vec::new();
    s.want_tasks(fw, Some(0), &mut fx).unwrap();
    assert_eq!(s.check_stalls(&at(100_000)), vec![]);
    assert_eq!(s.explain(fw, &at(100_000)).unwrap().stalled_for_s, None);
    // Wanting tasks again makes it stalled at the next check (its wait counts from its
    // last offer).
    s.want_tasks(fw, Some(3), &mut fx).unwrap();
    assert_eq!(s.check_stalls(&at(100_001)).len(), 1);
}

#[test]
fn a_framework_finding_every_agent_full_is_not_stalled() {
    let (mut s, fw, agent, offer) = offered();
    let mut fx = Vec::new();
    let accept = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("all", agent, "cpus=4,mem=100")],
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, accept, &at(2), &mut fx).unwrap();
    assert_eq!(s.check_stalls(&at(100_000)), vec![]);
    let e = s.explain(fw, &at(100_000)).unwrap();
    assert_eq!(e.stalled_for_s, None);
    assert_eq!(e.agents.nothing_free, 1, "{e:?}");
}

#[test]
fn a_removed_stalled_framework_ends_its_stall() {
    let (mut s, fw, _) = declined(HOUR);
    assert_eq!(s.check_stalls(&at(31_001)).len(), 1);
    let mut fx = Vec::new();
    s.remove_framework(fw, "test", &mut fx).unwrap();
    assert_eq!(
        s.check_stalls(&at(31_002)),
        vec![StallChange::Ended {
            framework_id: fw,
            name: "f".into(),
            stalled_for_s: 31.001,
        }]
    );
}

#[test]
fn stall_after_is_a_setting() {
    let settings = Settings {
        stall_after: Duration::from_secs(5),
        ..Settings::default()
    };
    let mut s = new_books(&settings);
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", None, None), &at(0), &mut fx)
        .unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    s.register_agent(
        reregister(AgentId::new(), "cpus=1", vec![]),
        &at(0),
        &mut fx,
    )
    .unwrap();
    assert_eq!(s.check_stalls(&at(4_999)), vec![]);
    assert_eq!(s.check_stalls(&at(5_000)).len(), 1);
}
