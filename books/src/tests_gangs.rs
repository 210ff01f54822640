//! Unit tests of gangs launched together (`gangs.rs`): every part is checked before anything
//! changes, so a gang launches whole or not at all; a member that ends badly while others run
//! has the others killed and its framework told once; a member that succeeds ends nothing.

#![allow(clippy::unwrap_used)]

use protocol::events::OfferEvent;
use protocol::gang::GangFailed;
use protocol::messages::LaunchTasks;
use protocol::{FrameworkEvent, Offer, TaskState};

use super::tests::{
    at, books, kill, new_books, outcome, registration, reregister, running, task, update,
};
use super::*;

/// Framework `f` subscribed at 0, two agents of `cpus=4,mem=100` registered at 0, and their
/// offers to `f` made at 1 (the first agent's first).
fn offered() -> (State, FrameworkId, [AgentId; 2], [Offer; 2]) {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", None, None), &at(0), &mut fx)
        .unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let mut agents = Vec::new();
    for _ in 0..2 {
        let (agent, _) = s
            .register_agent(
                reregister(AgentId::new(), "cpus=4,mem=100", vec![]),
                &at(0),
                &mut fx,
            )
            .unwrap();
        agents.push(agent);
    }
    assert_eq!(s.allocate(&at(1), &mut fx), 2);
    let offers = s.offers(Some(fw), None);
    let of = |agent: AgentId| offers.iter().find(|o| o.agent_id == agent).unwrap().clone();
    let agents = [agents[0], agents[1]];
    let offers = [of(agents[0]), of(agents[1])];
    (s, fw, agents, offers)
}

/// The gang's part on `offer`: tasks `names`, of `cpus=1,mem=10` each.
fn part(offer: &Offer, names: &[&str]) -> Accept {
    Accept {
        offer_ids: vec![offer.offer_id],
        tasks: names
            .iter()
            .map(|n| task(n, offer.agent_id, "cpus=1,mem=10"))
            .collect(),
        refuse: None,
    }
}

/// The launch of `names` on `agent`.
fn launch(fw: FrameworkId, agent: AgentId, names: &[&str]) -> Effect {
    Effect::Launch {
        agent_id: agent,
        endpoint: "http://127.0.0.1:1".into(),
        body: LaunchTasks {
            framework_id: fw,
            tasks: names
                .iter()
                .map(|n| task(n, agent, "cpus=1,mem=10"))
                .collect(),
            partition_timeout_s: None,
        },
    }
}

/// [`offered`], with gang `g` launched: `m0`, `m1` on the first agent, `m2`, `m3` on the second.
fn launched() -> (State, FrameworkId, [AgentId; 2]) {
    let (mut s, fw, agents, offers) = offered();
    let parts = vec![
        part(&offers[0], &["m0", "m1"]),
        part(&offers[1], &["m2", "m3"]),
    ];
    s.accept_together(fw, "g".into(), parts, &at(2), &mut Vec::new())
        .unwrap();
    (s, fw, agents)
}

fn ended(id: &str, fw: FrameworkId, agent: AgentId, state: TaskState) -> TaskStatus {
    TaskStatus {
        state,
        ..running(id, fw, agent, None)
    }
}

#[test]
fn a_gang_launches_on_every_agent_at_once() {
    let (mut s, fw, agents, offers) = offered();
    let parts = vec![
        part(&offers[0], &["m0", "m1"]),
        part(&offers[1], &["m2", "m3"]),
    ];
    let mut fx = Vec::new();
    let ids = s
        .accept_together(fw, "g".into(), parts, &at(2), &mut fx)
        .unwrap();
    assert_eq!(ids, ["m0", "m1", "m2", "m3"].map(|t| t.parse().unwrap()));
    assert_eq!(
        fx,
        [
            Effect::Offer(OfferEvent::OfferAccepted(outcome(
                &offers[0],
                &["m0", "m1"],
                None
            ))),
            Effect::Allocate,
            launch(fw, agents[0], &["m0", "m1"]),
            Effect::Offer(OfferEvent::OfferAccepted(outcome(
                &offers[1],
                &["m2", "m3"],
                None
            ))),
            Effect::Allocate,
            launch(fw, agents[1], &["m2", "m3"]),
        ]
    );
    assert_eq!(s.gangs_running(), 1);
    assert_eq!(s.ledger_mismatches(), 0);
    // The id is taken while the gang runs.
    let err = s
        .accept_together(fw, "g".into(), vec![], &at(3), &mut Vec::new())
        .unwrap_err();
    assert_eq!(err, StateError::GangExists("g".into()));
}

#[test]
fn a_gang_with_a_stale_offer_or_a_repeated_part_launches_nothing() {
    let (mut s, fw, _, offers) = offered();
    // The second agent's offer is declined: gone.
    let decline = Decline {
        offer_ids: vec![offers[1].offer_id],
        refuse: None,
    };
    s.decline(fw, decline, &at(2), &mut Vec::new()).unwrap();
    let before = books(&s);
    let try_gang = |s: &mut State, parts: Vec<Accept>| {
        let mut fx = Vec::new();
        let err = s
            .accept_together(fw, "g".into(), parts, &at(3), &mut fx)
            .unwrap_err();
        assert_eq!(fx, [], "nothing is launched");
        err
    };
    let stale = vec![part(&offers[0], &["m0"]), part(&offers[1], &["m1"])];
    assert!(matches!(
        try_gang(&mut s, stale),
        StateError::OfferGone { .. }
    ));
    let twice = vec![part(&offers[0], &["m0"]), part(&offers[0], &["m1"])];
    assert_eq!(
        try_gang(&mut s, twice),
        StateError::DuplicateOffer(offers[0].offer_id)
    );
    let mut same_task = part(&offers[0], &["m0"]);
    same_task.offer_ids.clear();
    let dup = vec![part(&offers[0], &["m0"]), same_task];
    assert_eq!(
        try_gang(&mut s, dup),
        StateError::DuplicateTaskInRequest("m0".parse().unwrap())
    );
    assert_eq!(try_gang(&mut s, vec![]), StateError::NoOffers);
    assert_eq!(books(&s), before, "nothing changed");
    assert_eq!(s.gangs_running(), 0);
}

#[test]
fn a_member_that_fails_ends_its_gang_once() {
    let (mut s, fw, agents) = launched();
    let failed = ended("m1", fw, agents[0], TaskState::Failed);
    let mut fx = Vec::new();
    s.agent_status(agents[0], failed.clone(), &at(10), &mut fx)
        .unwrap();
    let recorded = s.tasks[&(fw, "m1".parse().unwrap())].latest_status();
    assert_eq!(
        fx,
        [
            Effect::Allocate,
            update(fw, recorded),
            kill(agents[0], fw, "m0"),
            kill(agents[1], fw, "m2"),
            kill(agents[1], fw, "m3"),
            Effect::ToFramework(
                fw,
                FrameworkEvent::GangFailed(GangFailed {
                    gang_id: "g".into(),
                    task_id: "m1".parse().unwrap(),
                    agent_id: agents[0],
                    state: TaskState::Failed,
                    message: None,
                    killed: ["m0", "m2", "m3"].map(|t| t.parse().unwrap()).to_vec(),
                }),
            ),
        ]
    );
    // The killed members end: no second event, and the gang is forgotten with the last.
    for (id, agent) in [("m0", agents[0]), ("m2", agents[1]), ("m3", agents[1])] {
        let mut fx = Vec::new();
        s.agent_status(
            agent,
            ended(id, fw, agent, TaskState::Killed),
            &at(11),
            &mut fx,
        )
        .unwrap();
        assert!(
            !fx.iter()
                .any(|e| matches!(e, Effect::ToFramework(_, FrameworkEvent::GangFailed(_)))),
            "{fx:?}"
        );
    }
    assert_eq!(s.gangs_running(), 0);
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn a_member_its_agent_could_not_start_ends_its_gang() {
    let (mut s, fw, agents) = launched();
    let mut fx = Vec::new();
    let refused = ["m2", "m3"].map(|t| t.parse().unwrap());
    s.launch_failed(fw, &refused, TaskState::Error, "refused", &at(3), &mut fx);
    let failed: Vec<&GangFailed> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::ToFramework(_, FrameworkEvent::GangFailed(g)) => Some(g),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "told once: {fx:?}");
    assert_eq!(failed[0].task_id.as_str(), "m2");
    assert_eq!(failed[0].agent_id, agents[1]);
    assert_eq!(failed[0].state, TaskState::Error);
    assert_eq!(failed[0].message.as_deref(), Some("refused"));
    let kills: Vec<&Effect> = fx
        .iter()
        .filter(|e| matches!(e, Effect::Kill { .. }))
        .collect();
    assert_eq!(
        kills,
        [
            &kill(agents[0], fw, "m0"),
            &kill(agents[0], fw, "m1"),
            &kill(agents[1], fw, "m3"),
        ]
    );
}

#[test]
fn a_member_that_succeeds_ends_nothing() {
    let (mut s, fw, agents) = launched();
    let mut fx = Vec::new();
    s.agent_status(
        agents[0],
        ended("m0", fw, agents[0], TaskState::Finished),
        &at(10),
        &mut fx,
    )
    .unwrap();
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Kill { .. })),
        "{fx:?}"
    );
    assert_eq!(s.gangs_running(), 1);
    for (id, agent) in [("m1", agents[0]), ("m2", agents[1]), ("m3", agents[1])] {
        s.agent_status(
            agent,
            ended(id, fw, agent, TaskState::Finished),
            &at(11),
            &mut fx,
        )
        .unwrap();
    }
    assert_eq!(s.gangs_running(), 0, "forgotten once every member ended");
}
