//! Unit tests of offers sized to demand (`sated.rs`): a framework that says how many tasks it
//! wants is offered agents until its outstanding offers hold that many, within one allocation
//! run too; answering them, wanting more or lifting the bound lets it be offered again, and the
//! agents it is not offered go to the others.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use protocol::{Offer, OfferId};

use super::tests::{at, books, check, new_books, registration, reregister, task};
use super::*;

/// Four agents of `cpus=4,mem=100`; frameworks `a` (hint `cpus=2,mem=10`) and `b` (no hint),
/// both subscribed, in one role.
fn cluster() -> (State, FrameworkId, FrameworkId, Vec<AgentId>) {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let mut fw = |s: &mut State, name: &str| {
        let (id, _) = s
            .register_framework(registration(name, "eng", None, None), &at(0), &mut fx)
            .unwrap();
        s.subscribe(id, &at(0), &mut fx).unwrap();
        id
    };
    let a = fw(&mut s, "a");
    let b = fw(&mut s, "b");
    s.revive(a, Some("cpus=2,mem=10".parse().unwrap()), &at(0), &mut fx)
        .unwrap();
    // Four agents, each registered as a fresh coordinator adopts one (same shape, new ids).
    let agents = (0..4)
        .map(|_| {
            let total = "cpus=4,mem=100";
            s.register_agent(reregister(AgentId::new(), total, vec![]), &at(0), &mut fx)
                .unwrap()
                .0
        })
        .collect();
    (s, a, b, agents)
}

fn offers_of(s: &State, fw: FrameworkId) -> Vec<Offer> {
    s.offers(Some(fw), None)
}

fn pending_of(s: &State, fw: FrameworkId) -> Option<u32> {
    let info = s.frameworks().into_iter().find(|f| f.framework_id == fw);
    info.unwrap().pending_tasks
}

fn sated(s: &State, fw: FrameworkId) -> bool {
    s.explain(fw, &at(0)).unwrap().sated
}

#[test]
fn a_framework_is_offered_what_holds_the_tasks_it_wants_and_no_more() {
    let (mut s, a, b, _) = cluster();
    check(&mut s, |s, fx| s.want_tasks(a, Some(2), fx), vec![]).unwrap();
    assert_eq!(pending_of(&s, a), Some(2));

    // One run: `a` is first in tie order and its first offer (room for two tasks of its hint)
    // holds what it wants, so the other three agents go to `b` in the same run.
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(1), &mut fx), 4);
    assert_eq!(offers_of(&s, a).len(), 1);
    assert_eq!(offers_of(&s, b).len(), 3);
    assert!(sated(&s, a));
    let why = s.explain(a, &at(1)).unwrap().summary;
    assert!(
        why.starts_with("sated: it said it wants 2 more task(s)"),
        "{why}"
    );
    assert_eq!(
        why,
        "sated: it said it wants 2 more task(s) and its 1 outstanding offer(s) hold them; it is \
         offered more once it answers them or says it wants more (pending_tasks on an accept, a \
         decline or a revive)"
    );
    assert!(!sated(&s, b), "no bound, never held back");

    // It launches one task and says it wants one more: its offer is gone, so it may be
    // offered again (an allocation is asked for), and the rest of that agent holds it.
    let offer = offers_of(&s, a).remove(0);
    let accept = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("t1", offer.agent_id, "cpus=2,mem=10")],
        refuse: Some(Duration::ZERO),
    };
    let mut fx = Vec::new();
    s.accept(a, accept, &at(2), &mut fx).unwrap();
    assert!(!sated(&s, a), "its only offer was answered");
    check(&mut s, |s, fx| s.want_tasks(a, Some(1), fx), vec![]).unwrap();
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(3), &mut fx), 1);
    let again = offers_of(&s, a);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].agent_id, offer.agent_id);
    assert!(sated(&s, a));
    books(&s);
}

#[test]
fn saying_it_wants_more_or_lifting_the_bound_lets_it_be_offered_again() {
    let (mut s, a, b, agents) = cluster();
    s.want_tasks(a, Some(0), &mut Vec::new()).unwrap();
    assert!(
        sated(&s, a),
        "wanting nothing holds it back with no offer at all"
    );
    let mut fx = Vec::new();
    s.allocate(&at(1), &mut fx);
    assert!(offers_of(&s, a).is_empty());

    // `b` answers: the agents come free again.
    let b_offers: Vec<OfferId> = offers_of(&s, b).iter().map(|o| o.offer_id).collect();
    assert_eq!(b_offers.len(), agents.len());
    let decline = Decline {
        offer_ids: b_offers,
        refuse: Some(Duration::from_secs(60)),
    };
    s.decline(b, decline, &at(2), &mut fx).unwrap();

    // Wanting more asks for a run; the bound holds: three tasks are two offers.
    check(
        &mut s,
        |s, fx| s.want_tasks(a, Some(3), fx),
        vec![Effect::Allocate],
    )
    .unwrap();
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(3), &mut fx), 2);
    assert_eq!(offers_of(&s, a).len(), 2);
    // Lifting the bound: every agent.
    check(
        &mut s,
        |s, fx| s.want_tasks(a, None, fx),
        vec![Effect::Allocate],
    )
    .unwrap();
    assert!(!sated(&s, a));
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(4), &mut fx), 2);
    assert_eq!(offers_of(&s, a).len(), agents.len());
    assert_eq!(pending_of(&s, a), None);
    books(&s);
}

#[test]
fn an_offer_that_ends_otherwise_also_lets_it_go_and_a_new_session_drops_the_bound() {
    let (mut s, a, _, _) = cluster();
    s.want_tasks(a, Some(1), &mut Vec::new()).unwrap();
    let mut fx = Vec::new();
    s.allocate(&at(1), &mut fx);
    let offer = offers_of(&s, a).remove(0);
    assert!(sated(&s, a));
    // The agent is lost: the offer is rescinded, and `a` may be offered the others again.
    let mut fx = Vec::new();
    s.lose_agent(offer.agent_id, &at(2), &mut fx);
    assert!(!sated(&s, a));
    assert!(fx.contains(&Effect::Allocate), "{fx:?}");

    // A framework that registers again states its wants anew.
    s.want_tasks(a, Some(0), &mut Vec::new()).unwrap();
    assert!(sated(&s, a));
    let mut fx = Vec::new();
    s.register_framework(registration("a", "eng", None, Some(a)), &at(3), &mut fx)
        .unwrap();
    assert!(!sated(&s, a));
    assert_eq!(pending_of(&s, a), None);
    books(&s);
}

#[test]
fn an_unknown_framework_is_refused_and_nothing_changes() {
    let (mut s, a, _, _) = cluster();
    let stranger = FrameworkId::new();
    let before = s.frameworks();
    check(&mut s, |s, fx| s.want_tasks(stranger, Some(3), fx), vec![]).unwrap_err();
    assert_eq!(s.frameworks(), before);
    assert!(!sated(&s, a));
}
