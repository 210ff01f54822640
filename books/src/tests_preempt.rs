//! Unit tests of preemption toward fair share (`preempt.rs`): effects asserted directly, no
//! network, no clock.

#![allow(clippy::unwrap_used)]

use protocol::preempt::{Preemption, Priority};
use protocol::{CommandSpec, FrameworkEvent, TaskSpec, TaskState, UpdateId};

use super::tests::{check, kill, new_books, update};
use super::*;

fn at(ms: u64) -> Now {
    let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Now {
        ms,
        wall: start + chrono::Duration::milliseconds(i64::try_from(ms).unwrap()),
    }
}

fn framework(s: &mut State, role: &str, fx: &mut Effects) -> FrameworkId {
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
    let (fw, _) = s.register_framework(reg, &at(0), fx).unwrap();
    s.subscribe(fw, &at(0), fx).unwrap();
    fw
}

fn task(id: &str, ag: AgentId, priority: i64) -> TaskSpec {
    TaskSpec {
        task_id: id.parse().unwrap(),
        name: id.into(),
        agent_id: ag,
        resources: "cpus=1,mem=25".parse().unwrap(),
        command: CommandSpec::Shell("sleep 100".into()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: Some(Priority::new(priority).unwrap()),
    }
}

/// Registers the one agent, `cpus=4,mem=100`.
fn agent(s: &mut State, fx: &mut Effects) -> AgentId {
    let (ag, _) = s
        .register_agent(
            AgentRegistration {
                hostname: "h".into(),
                endpoint: "http://127.0.0.1:1".into(),
                resources: "cpus=4,mem=100".parse().unwrap(),
                attributes: Default::default(),
                agent_id: None,
                tasks: vec![],
                api_token: None,
                gpu_devices: Vec::new(),
                reservations: Vec::new(),
            },
            &at(0),
            fx,
        )
        .unwrap();
    ag
}

/// Role `a` runs 4 tasks filling the one agent (`hi-0`, `hi-1` at priority 5, `lo-0`, `lo-1`
/// at 0), then a framework of role `b` subscribes with nothing.
fn full_cluster(grace: Option<std::time::Duration>) -> (State, FrameworkId, FrameworkId, AgentId) {
    let config = Settings {
        preemption_grace: grace,
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let fa = framework(&mut s, "a", &mut fx);
    let ag = agent(&mut s, &mut fx);
    assert_eq!(s.allocate(&at(1), &mut fx), 1);
    let offer = s.offers(None, None).remove(0);
    let accept = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![
            task("hi-0", ag, 5),
            task("hi-1", ag, 5),
            task("lo-0", ag, 0),
            task("lo-1", ag, 0),
        ],
        refuse: Some(std::time::Duration::ZERO),
    };
    s.accept(fa, accept, &at(2), &mut fx).unwrap();
    let fb = framework(&mut s, "b", &mut fx);
    (s, fa, fb, ag)
}

fn killed_status(fw: FrameworkId, ag: AgentId, task: &str) -> TaskStatus {
    TaskStatus {
        task_id: task.parse().unwrap(),
        framework_id: fw,
        agent_id: ag,
        state: TaskState::Killed,
        message: None,
        exit_code: None,
        update_id: UpdateId(uuid::Uuid::from_u128(0xe_0000)),
        timestamp: at(0).wall,
        resources: Some("cpus=1,mem=25".parse().unwrap()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}

/// The preemption of `a`'s tasks `lo-1` then `lo-0` for role `b`, due at 2.1 s: the event to
/// the framework and the same on the offer stream.
fn told(fa: FrameworkId, task_ids: [&str; 2]) -> Effects {
    let event = Preemption {
        framework_id: fa,
        task_ids: task_ids.iter().map(|t| t.parse().unwrap()).collect(),
        deadline: at(2100).wall,
        for_role: "b".into(),
    };
    vec![
        Effect::ToFramework(fa, FrameworkEvent::Preemption(event.clone())),
        Effect::Offer(OfferEvent::Preemption(event)),
    ]
}

#[test]
fn a_starved_role_gets_the_lowest_priority_tasks_after_the_grace_told_before_killed() {
    let (mut s, fa, fb, ag) = full_cluster(Some(std::time::Duration::from_secs(1)));
    let mut fx = Vec::new();
    s.check_preemption(&at(10), &mut fx);
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(s.starved_roles(), 1);
    let why = s.explain(fb, &at(10)).unwrap().preemption;
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(
        why[0].contains("role b is below its fair share (share 0.0 %, fair share 50.0 %)"),
        "{why:?}"
    );
    assert!(why[0].contains("preemption at"), "{why:?}");
    s.check_preemption(&at(800), &mut fx);
    assert!(fx.is_empty(), "nothing before the grace: {fx:?}");
    // The check runs every quarter of the grace (250 ms): the next is due at 1050.

    s.check_preemption(&at(1100), &mut fx);
    assert_eq!(fx, told(fa, ["lo-1", "lo-0"]));
    assert_eq!(s.preemptions(), 1);
    let marked = s.explain(fa, &at(1100)).unwrap().preemption;
    assert!(
        marked
            .iter()
            .any(|m| m.contains("2 task(s) marked for preemption for role b")
                && m.contains("lo-0, lo-1")),
        "{marked:?}"
    );

    // No second plan while this one is in flight, and no kill before the deadline.
    let mut fx = Vec::new();
    s.check_preemption(&at(1500), &mut fx);
    s.check_preemption(&at(2099), &mut fx);
    assert!(fx.is_empty(), "{fx:?}");
    s.check_preemption(&at(2100), &mut fx);
    assert_eq!(fx, vec![kill(ag, fa, "lo-1"), kill(ag, fa, "lo-0")]);
    assert_eq!(s.tasks_preempted(), 2);

    let mut fx = Vec::new();
    for t in ["lo-0", "lo-1"] {
        s.agent_status(ag, killed_status(fa, ag, t), &at(2200), &mut fx)
            .unwrap();
    }
    // Each end frees resources and is relayed with the reason `preempted`.
    let preempted = |t| TaskStatus {
        reason: Some(protocol::task::REASON_PREEMPTED.into()),
        ..killed_status(fa, ag, t)
    };
    assert_eq!(
        fx,
        vec![
            Effect::Allocate,
            update(fa, preempted("lo-0")),
            Effect::Allocate,
            update(fa, preempted("lo-1")),
        ]
    );
    // The plan ends; the freed half goes to b, the lower share.
    let mut fx = Vec::new();
    s.check_preemption(&at(2300), &mut fx);
    assert!(s.preempt.plans.is_empty() && s.preempt.marked.is_empty());
    assert_eq!(s.allocate(&at(2400), &mut fx), 1);
    let offer = s.offers(None, None).remove(0);
    assert_eq!(offer.framework_id, fb);
    assert_eq!(offer.resources, "cpus=2,mem=50".parse().unwrap());
    // a keeps its fair half: nothing more is planned, ever.
    let accept = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("b-0", ag, 0), task("b-1", ag, 0)],
        refuse: None,
    };
    s.accept(fb, accept, &at(2500), &mut fx).unwrap();
    let mut fx = Vec::new();
    for ms in [3000, 5000, 9000] {
        s.check_preemption(&at(ms), &mut fx);
    }
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(s.starved_roles(), 0);
    assert_eq!(s.gauges().tasks_preempted, 2);
}

#[test]
fn a_role_that_does_not_take_what_was_freed_gets_no_second_preemption() {
    let (mut s, fa, fb, ag) = full_cluster(Some(std::time::Duration::from_secs(1)));
    let mut fx = Vec::new();
    s.check_preemption(&at(10), &mut fx);
    s.check_preemption(&at(1100), &mut fx);
    s.check_preemption(&at(2100), &mut fx);
    let mut expected = told(fa, ["lo-1", "lo-0"]);
    expected.extend([kill(ag, fa, "lo-1"), kill(ag, fa, "lo-0")]);
    assert_eq!(fx, expected);
    for t in ["lo-0", "lo-1"] {
        s.agent_status(ag, killed_status(fa, ag, t), &at(2200), &mut fx)
            .unwrap();
    }
    // b declines what it is offered (for long); a takes it back.
    let mut fx = Vec::new();
    s.allocate(&at(2250), &mut fx);
    let offer = s.offers(None, None).remove(0);
    assert_eq!(offer.framework_id, fb);
    let decline = Decline {
        offer_ids: vec![offer.offer_id],
        refuse: Some(std::time::Duration::from_secs(3600)),
    };
    s.decline(fb, decline, &at(2260), &mut fx).unwrap();
    s.allocate(&at(2270), &mut fx);
    let offer = s.offers(None, None).remove(0);
    assert_eq!(offer.framework_id, fa);
    let accept = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("again-0", ag, 0), task("again-1", ag, 0)],
        refuse: None,
    };
    s.accept(fa, accept, &at(2280), &mut fx).unwrap();
    let mut fx = Vec::new();
    for ms in (2300..20_000).step_by(250) {
        s.check_preemption(&at(ms), &mut fx);
    }
    assert!(fx.is_empty(), "preempted again: {fx:?}");
    assert_eq!((s.preemptions(), s.starved_roles()), (1, 1));
    let why = s.explain(fb, &at(20_000)).unwrap().preemption;
    assert!(
        why[0].contains("did not take what the last one freed"),
        "{why:?}"
    );
}

#[test]
fn nothing_happens_with_preemption_off() {
    let (mut s, _, fb, _) = full_cluster(None);
    let mut fx = Vec::new();
    for ms in [10, 1000, 5000, 60_000] {
        s.check_preemption(&at(ms), &mut fx);
    }
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!((s.preemptions(), s.starved_roles()), (0, 0));
    assert!(s.explain(fb, &at(1)).unwrap().preemption.is_empty());
}

#[test]
fn tasks_on_a_draining_agent_are_not_taken() {
    let (mut s, _, _, ag) = full_cluster(Some(std::time::Duration::from_secs(1)));
    let mut fx = Vec::new();
    s.drain_agent(ag, 3600.0, &at(5), &mut fx).unwrap();
    // What killing them would free goes to no one (the agent makes no offers): nothing is
    // planned, told or killed.
    for ms in [10, 1100, 2200, 5000] {
        check(&mut s, |s, fx| s.check_preemption(&at(ms), fx), vec![]);
    }
    assert_eq!(s.preemptions(), 0);
}

#[test]
fn of_equal_tasks_the_most_recently_launched_are_taken_first() {
    let config = Settings {
        preemption_grace: Some(std::time::Duration::from_secs(1)),
        ..Settings::default()
    };
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let fa = framework(&mut s, "a", &mut fx);
    let ag = agent(&mut s, &mut fx);
    // Launched in two accepts, the later one first in id order: `a-0` and `a-1` last.
    for (k, batch) in [["z-0", "z-1"], ["a-0", "a-1"]].iter().enumerate() {
        let ms = 1 + 2 * k as u64;
        assert_eq!(s.allocate(&at(ms), &mut fx), 1);
        let offer = s.offers(None, None).remove(0);
        let accept = Accept {
            offer_ids: vec![offer.offer_id],
            tasks: batch.iter().map(|t| task(t, ag, 0)).collect(),
            refuse: Some(std::time::Duration::ZERO),
        };
        s.accept(fa, accept, &at(ms + 1), &mut fx).unwrap();
    }
    framework(&mut s, "b", &mut fx);
    let mut fx = Vec::new();
    s.check_preemption(&at(10), &mut fx);
    s.check_preemption(&at(1100), &mut fx);
    assert_eq!(fx, told(fa, ["a-1", "a-0"]));
}
