//! Unit tests of draining (`drain.rs`): effects asserted directly, no network, no clock.

#![allow(clippy::unwrap_used)]

use protocol::events::OfferOutcome;
use protocol::maintenance::AgentDraining;
use protocol::{CommandSpec, FrameworkEvent, OfferId, TaskSpec, TaskState, UpdateId};

use super::tests::{
    check, new_books, put_agent, put_framework, stored_framework, subscribed, update,
};
use super::*;

fn at(ms: u64) -> Now {
    let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Now {
        ms,
        wall: start + chrono::Duration::milliseconds(i64::try_from(ms).unwrap()),
    }
}

fn agent(s: &mut State, fx: &mut Effects) -> AgentId {
    s.register_agent(
        AgentRegistration {
            hostname: "h".into(),
            endpoint: "http://127.0.0.1:1".into(),
            resources: "cpus=4,mem=100".parse().unwrap(),
            attributes: Default::default(),
            agent_id: None,
            tasks: vec![],
            api_token: None,
            reservations: Vec::new(),
            gpu_devices: Vec::new(),
        },
        &at(0),
        fx,
    )
    .unwrap()
    .0
}

/// One subscribed framework with task `a` (cpus=1) on one agent, and an outstanding offer of
/// the rest of that agent.
fn running_task() -> (State, FrameworkId, AgentId) {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let reg = FrameworkRegistration {
        name: "f".into(),
        role: "eng".parse().unwrap(),
        failover_timeout_s: None,
        framework_id: None,
        demand: None,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    };
    let (fw, _) = s.register_framework(reg, &at(0), &mut fx).unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let ag = agent(&mut s, &mut fx);
    assert_eq!(s.allocate(&at(1), &mut fx), 1);
    let offer = s.offers(None, None).remove(0);
    let spec = TaskSpec {
        task_id: "a".parse().unwrap(),
        name: "a".into(),
        agent_id: ag,
        resources: "cpus=1".parse().unwrap(),
        command: CommandSpec::Shell("sleep 100".into()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: None,
    };
    let accept = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![spec],
        refuse: Some(std::time::Duration::ZERO),
    };
    s.accept(fw, accept, &at(2), &mut fx).unwrap();
    assert_eq!(s.allocate(&at(3), &mut fx), 1, "the rest is offered again");
    (s, fw, ag)
}

fn status(fw: FrameworkId, ag: AgentId, state: TaskState, n: u128, ms: u64) -> TaskStatus {
    TaskStatus {
        task_id: "a".parse().unwrap(),
        framework_id: fw,
        agent_id: ag,
        state,
        message: None,
        exit_code: None,
        update_id: UpdateId(uuid::Uuid::from_u128(0xd_0000 + n)),
        timestamp: at(ms).wall,
        resources: Some("cpus=1".parse().unwrap()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}

/// What draining `running_task`'s agent does, with `deadline`: rescinds the rest of the agent,
/// offered again (offer 2), before the framework is told; tells the framework and the offer
/// stream which of its tasks must end; and writes the drain to the registry.
fn drain_effects(fw: FrameworkId, ag: AgentId, deadline: protocol::Timestamp) -> Effects {
    let event = AgentDraining {
        agent_id: ag,
        framework_id: fw,
        deadline,
        task_ids: vec!["a".parse().unwrap()],
    };
    let rescinded = OfferId(IdSource::nth(2));
    vec![
        Effect::ToFramework(
            fw,
            FrameworkEvent::Rescind {
                offer_id: rescinded,
            },
        ),
        Effect::Offer(OfferEvent::OfferRescinded(OfferOutcome {
            offer_id: rescinded,
            framework_id: fw,
            agent_id: ag,
            tasks: vec![],
            reason: Some("agent draining".into()),
        })),
        Effect::ToFramework(fw, FrameworkEvent::AgentDraining(event.clone())),
        Effect::Offer(OfferEvent::AgentDraining(event)),
        put_agent(ag, at(0).wall, Some(deadline)),
    ]
}

fn state_of(s: &State, ag: AgentId) -> String {
    s.agents()
        .into_iter()
        .find(|a| a.agent_id == ag)
        .unwrap()
        .state
}

#[test]
fn a_drain_rescinds_tells_then_kills_at_the_deadline_and_reactivate_offers_again() {
    let (mut s, fw, ag) = running_task();
    let mut fx = Vec::new();
    s.agent_status(
        ag,
        status(fw, ag, TaskState::Running, 1, 4),
        &at(4),
        &mut fx,
    )
    .unwrap();
    let mut fx = Vec::new();
    let answer = s.drain_agent(ag, 10.0, &at(100), &mut fx).unwrap();
    assert_eq!(answer.state, "draining");
    assert_eq!(answer.rescinded_offers, 1);
    assert_eq!(answer.deadline, Some(at(10_100).wall));
    assert!(s.offers(None, None).is_empty(), "its offer is rescinded");
    // The rest of the agent was offered again (offer 2): rescinded before the framework is
    // told, and no kill before the deadline.
    assert_eq!(fx, drain_effects(fw, ag, at(10_100).wall));

    let mut fx = Vec::new();
    assert_eq!(
        s.allocate(&at(200), &mut fx),
        0,
        "a draining agent makes no offers"
    );
    s.check_drains(&at(10_099), &mut fx);
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(state_of(&s, ag), "draining");

    s.check_drains(&at(10_100), &mut fx);
    assert_eq!(
        fx,
        vec![Effect::Kill {
            agent_id: ag,
            framework_id: fw,
            endpoint: "http://127.0.0.1:1".into(),
            task_id: "a".parse().unwrap(),
        }]
    );
    assert_eq!(s.drain_kills(), 1);
    let mut fx = Vec::new();
    s.check_drains(&at(10_200), &mut fx);
    assert!(
        fx.is_empty(),
        "kills are not sent again before the re-send interval"
    );

    s.agent_status(
        ag,
        status(fw, ag, TaskState::Killed, 2, 10_300),
        &at(10_300),
        &mut fx,
    )
    .unwrap();
    // Relayed with the reason the drain gives it, after the freed resources ask for a run.
    let mut relayed = status(fw, ag, TaskState::Killed, 2, 10_300);
    relayed.reason = Some(protocol::task::REASON_AGENT_DRAINED.into());
    assert_eq!(fx, vec![Effect::Allocate, update(fw, relayed)]);
    assert_eq!(state_of(&s, ag), "draining", "drained on the next tick");
    let mut fx = Vec::new();
    s.check_drains(&at(10_400), &mut fx);
    assert!(fx.is_empty());
    assert_eq!(state_of(&s, ag), "drained");
    assert_eq!(
        s.allocate(&at(10_500), &mut fx),
        0,
        "drained: still no offers"
    );
    assert_eq!(s.gauges().agents_by_state.get("drained"), Some(&1));

    let mut fx = Vec::new();
    let answer = s.reactivate_agent(ag, &mut fx).unwrap();
    assert_eq!(answer.state, "active");
    assert_eq!(
        fx,
        vec![Effect::Allocate, put_agent(ag, at(0).wall, None)],
        "offers again, and the registry forgets the drain"
    );
    assert_eq!(s.allocate(&at(10_600), &mut fx), 1, "offered again");
    assert_eq!(state_of(&s, ag), "active");
    assert_eq!(s.ledger_mismatches(), 0);

    let mut fx = Vec::new();
    let again = s.reactivate_agent(ag, &mut fx).unwrap();
    assert_eq!(again.state, "active");
    assert!(
        fx.is_empty(),
        "reactivating an active agent changes nothing"
    );
}

#[test]
fn draining_an_idle_agent_drains_it_at_once_and_unknown_agents_change_nothing() {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let ag = agent(&mut s, &mut fx);
    let before = s.agents();
    let unknown = AgentId(uuid::Uuid::from_u128(99));
    let mut fx = Vec::new();
    assert_eq!(
        s.drain_agent(unknown, 1.0, &at(1), &mut fx),
        Err(StateError::UnknownAgent(unknown))
    );
    assert_eq!(
        s.reactivate_agent(unknown, &mut fx),
        Err(StateError::UnknownAgent(unknown))
    );
    assert!(fx.is_empty());
    assert_eq!(s.agents(), before);

    let answer = s.drain_agent(ag, 0.0, &at(1), &mut fx).unwrap();
    assert_eq!(answer.state, "drained");
    assert_eq!(answer.rescinded_offers, 0);
    assert_eq!(
        fx,
        vec![put_agent(ag, at(0).wall, Some(at(1).wall))],
        "no offers, no tasks: nothing to tell, only the registry to write"
    );
}

#[test]
fn a_drain_outlives_the_agents_re_registration() {
    let (mut s, fw, ag) = running_task();
    let mut fx = Vec::new();
    s.drain_agent(ag, 60.0, &at(10), &mut fx).unwrap();
    let reg = AgentRegistration {
        hostname: "h".into(),
        endpoint: "http://127.0.0.1:1".into(),
        resources: "cpus=4,mem=100".parse().unwrap(),
        attributes: Default::default(),
        agent_id: Some(ag),
        tasks: vec![status(fw, ag, TaskState::Running, 3, 20)],
        api_token: None,
        reservations: Vec::new(),
        gpu_devices: Vec::new(),
    };
    s.register_agent(reg, &at(20), &mut fx).unwrap();
    let mut fx = Vec::new();
    assert_eq!(
        s.allocate(&at(30), &mut fx),
        0,
        "still draining after re-registering"
    );
    assert_eq!(state_of(&s, ag), "draining");
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn explain_counts_draining_agents_and_names_them_when_they_are_the_reason() {
    let (mut s, fw, ag) = running_task();
    let mut fx = Vec::new();
    s.drain_agent(ag, 60.0, &at(10), &mut fx).unwrap();
    let e = s.explain(fw, &at(20)).unwrap();
    assert_eq!((e.agents.active, e.agents.draining), (0, 1));
    assert!(e.summary.contains("draining"), "{}", e.summary);
    s.reactivate_agent(ag, &mut fx).unwrap();
    let e = s.explain(fw, &at(30)).unwrap();
    assert_eq!((e.agents.active, e.agents.draining), (1, 0));
}

/// The registry changes among the effects.
fn persisted(fx: &Effects) -> Vec<crate::records::StoredAgent> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Persist(crate::records::Change::PutAgent(a)) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_drain_is_kept_in_the_registry_and_put_back_when_the_agent_re_registers() {
    let (mut s, fw, ag) = running_task();
    let mut fx = Vec::new();
    s.drain_agent(ag, 60.0, &at(10), &mut fx).unwrap();
    let deadline = at(10).wall + chrono::Duration::seconds(60);
    assert_eq!(fx, drain_effects(fw, ag, deadline));
    let written = persisted(&fx);

    // A new coordinator on the same registry, 20 s later: the agent is awaited, then comes
    // back (its task has ended meanwhile) and is draining again, with the same deadline.
    let mut t = new_books(&Settings::default());
    t.restore(
        crate::records::Snapshot {
            agents: written,
            ..Default::default()
        },
        &at(20_000),
    );
    let mut fx = Vec::new();
    let reg = FrameworkRegistration {
        name: "other".into(),
        role: "ops".parse().unwrap(),
        failover_timeout_s: None,
        framework_id: None,
        demand: None,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    };
    let (other, _) = t.register_framework(reg, &at(20_000), &mut fx).unwrap();
    t.subscribe(other, &at(20_000), &mut fx).unwrap();
    t.register_agent(
        AgentRegistration {
            hostname: "h".into(),
            endpoint: "http://127.0.0.1:1".into(),
            resources: "cpus=4,mem=100".parse().unwrap(),
            attributes: Default::default(),
            agent_id: Some(ag),
            tasks: vec![],
            api_token: None,
            gpu_devices: Vec::new(),
            reservations: Vec::new(),
        },
        &at(20_001),
        &mut fx,
    )
    .unwrap();
    let view = t.agent(ag).unwrap();
    assert_eq!(view.drain_deadline, Some(deadline));
    assert!(
        matches!(view.state.as_str(), "draining" | "drained"),
        "{}",
        view.state
    );
    assert_eq!(
        t.allocate(&at(20_002), &mut fx),
        0,
        "a drained agent offers nothing"
    );
    // Its registration record, written again, still carries the drain.
    let default_failover_s = Settings::default().default_failover_timeout.as_secs_f64();
    assert_eq!(
        fx,
        vec![
            put_framework(stored_framework(
                other,
                "other",
                "ops",
                default_failover_s,
                &at(20_000)
            )),
            subscribed(other),
            Effect::Allocate,
            put_agent(ag, at(20_001).wall, Some(deadline)),
            Effect::Allocate,
        ]
    );

    // Reactivating writes the record without the drain, and the agent is offered again.
    let mut fx = Vec::new();
    t.reactivate_agent(ag, &mut fx).unwrap();
    assert_eq!(
        fx,
        vec![Effect::Allocate, put_agent(ag, at(20_001).wall, None)]
    );
    assert_eq!(t.allocate(&at(20_003), &mut fx), 1);
}

#[test]
fn a_stored_drain_whose_deadline_passed_kills_at_once_after_the_restart() {
    let (mut s, fw, ag) = running_task();
    let mut fx = Vec::new();
    s.drain_agent(ag, 5.0, &at(10), &mut fx).unwrap();
    assert_eq!(fx, drain_effects(fw, ag, at(5_010).wall));
    let written = persisted(&fx);
    // Restored 10 s later with the framework: the deadline passed while no coordinator ran.
    let mut t = new_books(&Settings::default());
    let framework = crate::records::StoredFramework {
        id: fw,
        name: "f".into(),
        role: "eng".parse().unwrap(),
        failover_timeout_s: 3600.0,
        registered_at: at(0).wall,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    };
    t.restore(
        crate::records::Snapshot {
            agents: written,
            frameworks: vec![framework],
            ..Default::default()
        },
        &at(10_000),
    );
    let mut fx = Vec::new();
    t.register_agent(
        AgentRegistration {
            hostname: "h".into(),
            endpoint: "http://127.0.0.1:1".into(),
            resources: "cpus=4,mem=100".parse().unwrap(),
            attributes: Default::default(),
            agent_id: Some(ag),
            tasks: vec![status(fw, ag, TaskState::Running, 7, 10_000)],
            api_token: None,
            gpu_devices: Vec::new(),
            reservations: Vec::new(),
        },
        &at(10_001),
        &mut fx,
    )
    .unwrap();
    assert_eq!(t.agent(ag).unwrap().state, "draining");
    // The task is killed at once.
    check(
        &mut t,
        |t, fx| t.check_drains(&at(10_002), fx),
        vec![Effect::Kill {
            agent_id: ag,
            framework_id: fw,
            endpoint: "http://127.0.0.1:1".into(),
            task_id: "a".parse().unwrap(),
        }],
    );
}
