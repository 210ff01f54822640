//! Unit tests of the registry's rules, without a network or a clock: effects are asserted
//! directly.

#![allow(clippy::unwrap_used)]

use protocol::events::OfferOutcome;
use protocol::messages::LaunchTasks;
use protocol::{
    CommandSpec, FrameworkEvent, Offer, OfferId, Resources, TaskSpec, TaskState, UpdateId,
};
use std::time::Duration;

use super::*;

/// A fixed wall clock, `ms` after an arbitrary start, so effects can be compared exactly.
pub(super) fn at(ms: u64) -> Now {
    let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    Now {
        ms,
        wall: start + chrono::Duration::milliseconds(i64::try_from(ms).unwrap()),
    }
}

/// Empty books whose new ids are sequential ([`IdSource::sequential`]), so every id, and so
/// every effect, a test sees is known in advance.
pub(super) fn new_books(settings: &Settings) -> State {
    State::with_ids(settings, IdSource::sequential())
}

/// Runs `call` on the books and asserts that it pushed exactly `expected`, in order: an extra
/// effect (one more offer, a kill) or a missing one (a registry write) fails. Returns what the
/// call returned.
pub(super) fn check<T>(
    s: &mut State,
    call: impl FnOnce(&mut State, &mut Effects) -> T,
    expected: Vec<Effect>,
) -> T {
    let mut fx = Vec::new();
    let out = call(s, &mut fx);
    assert_eq!(fx, expected, "the effects of the call");
    out
}

/// The event that relays `status` to framework `fw`.
pub(super) fn update(fw: FrameworkId, status: TaskStatus) -> Effect {
    Effect::ToFramework(fw, FrameworkEvent::Update { status })
}

/// The kill of task `task` of `fw` on `agent` (every test agent listens at
/// `http://127.0.0.1:1`).
pub(super) fn kill(agent: AgentId, fw: FrameworkId, task: &str) -> Effect {
    Effect::Kill {
        agent_id: agent,
        framework_id: fw,
        endpoint: "http://127.0.0.1:1".into(),
        task_id: task.parse().unwrap(),
    }
}

/// Framework `fw`'s `subscribed` event, at the default heartbeat interval.
pub(super) fn subscribed(fw: FrameworkId) -> Effect {
    Effect::ToFramework(
        fw,
        FrameworkEvent::Subscribed(protocol::messages::FrameworkRegistered {
            framework_id: fw,
            heartbeat_interval_s: Settings::default()
                .framework_heartbeat_interval
                .as_secs_f64(),
            limits: None,
        }),
    )
}

/// The whole registry record of framework `id`, registered at `at` with `name`, `role` and
/// `failover_timeout_s` (no owner, no capabilities; a test sets what else it needs).
pub(super) fn stored_framework(
    id: FrameworkId,
    name: &str,
    role: &str,
    failover_timeout_s: f64,
    at: &Now,
) -> crate::records::StoredFramework {
    crate::records::StoredFramework {
        id,
        name: name.into(),
        role: role.parse().unwrap(),
        failover_timeout_s,
        registered_at: at.wall,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    }
}

/// The registry write of a framework's record.
pub(super) fn put_framework(record: crate::records::StoredFramework) -> Effect {
    Effect::Persist(crate::records::Change::PutFramework(record))
}

/// The registry write of test agent `id` (host `h`, `http://127.0.0.1:1`) last seen at
/// `last_seen`, draining until `drain_deadline` if any.
pub(super) fn put_agent(
    id: AgentId,
    last_seen: protocol::Timestamp,
    drain_deadline: Option<protocol::Timestamp>,
) -> Effect {
    Effect::Persist(crate::records::Change::PutAgent(
        crate::records::StoredAgent {
            id,
            hostname: "h".into(),
            endpoint: "http://127.0.0.1:1".into(),
            last_seen,
            drain_deadline,
        },
    ))
}

pub(super) fn registration(
    name: &str,
    role: &str,
    failover_timeout_s: Option<f64>,
    framework_id: Option<FrameworkId>,
) -> FrameworkRegistration {
    FrameworkRegistration {
        name: name.into(),
        role: role.parse().unwrap(),
        failover_timeout_s,
        framework_id,
        demand: None,
        owner: None,
        gpu_resources: false,
        partition_timeout_s: None,
    }
}

fn setup() -> (State, FrameworkId, AgentId, Offer) {
    setup_with(&Settings::default())
}

fn setup_with(config: &Settings) -> (State, FrameworkId, AgentId, Offer) {
    let mut s = new_books(config);
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", None, None), &at(0), &mut fx)
        .unwrap();
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let (agent, created) = s
        .register_agent(
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
            &mut fx,
        )
        .unwrap();
    assert!(created);
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(1), &mut fx), 1);
    let offer = s.offers(None, None).remove(0);
    assert_eq!(
        fx,
        vec![
            Effect::Offer(OfferEvent::OfferCreated(offer.clone())),
            Effect::ToFramework(
                fw,
                FrameworkEvent::Offers {
                    offers: vec![offer.clone()]
                }
            ),
        ]
    );
    (s, fw, agent, offer)
}

pub(super) fn task(id: &str, agent: AgentId, res: &str) -> TaskSpec {
    TaskSpec {
        task_id: id.parse().unwrap(),
        name: id.into(),
        agent_id: agent,
        resources: res.parse().unwrap(),
        command: CommandSpec::Shell("true".into()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: None,
    }
}

pub(super) fn books(s: &State) -> (Vec<Offer>, usize, Vec<protocol::messages::AgentInfo>) {
    assert_eq!(s.ledger_mismatches(), 0, "the books disagree");
    (s.offers(None, None), s.tasks.len(), s.agents())
}

#[test]
fn a_refused_accept_changes_nothing_and_emits_nothing() {
    let (mut s, fw, agent, offer) = setup();
    let before = books(&s);
    let mut fx = Vec::new();
    let too_big = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=3"), task("b", agent, "cpus=2")],
        refuse: None,
    };
    let err = s.accept(fw, too_big, &at(2), &mut fx).unwrap_err();
    assert!(
        matches!(err, StateError::InsufficientResources { .. }),
        "{err}"
    );
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(books(&s), before);
}

#[test]
fn isolation_the_agent_cannot_give_is_refused_and_changes_nothing() {
    let (mut s, fw, agent, offer) = setup();
    let before = books(&s);
    let mut fx = Vec::new();
    let mut t = task("a", agent, "cpus=1");
    t.isolation = Some(protocol::Isolation {
        pids: Some(16),
        ..Default::default()
    });
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![t],
        refuse: None,
    };
    let err = s.accept(fw, req, &at(2), &mut fx).unwrap_err();
    assert!(
        matches!(&err, StateError::IsolationUnavailable { reason, .. } if reason.contains("isolation.pids")),
        "{err}"
    );
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(books(&s), before);
}

#[test]
fn accept_moves_resources_from_offered_to_used_and_returns_the_rest() {
    let (mut s, fw, agent, offer) = setup();
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=1,mem=10")],
        refuse: Some(Duration::ZERO),
    };
    let launched = check(
        &mut s,
        |s, fx| s.accept(fw, req, &at(2), fx).unwrap(),
        vec![
            Effect::Offer(OfferEvent::OfferAccepted(outcome(&offer, &["a"], None))),
            Effect::Allocate,
            Effect::Launch {
                agent_id: agent,
                endpoint: "http://127.0.0.1:1".into(),
                body: LaunchTasks {
                    framework_id: fw,
                    tasks: vec![task("a", agent, "cpus=1,mem=10")],
                    partition_timeout_s: None,
                },
            },
        ],
    );
    assert_eq!(launched.len(), 1);
    let a = &s.agents()[0];
    assert_eq!(a.used, "cpus=1,mem=10".parse().unwrap());
    assert!(a.offered.is_empty());
    assert_eq!(
        s.ledger.allocator().agent_free(agent),
        Some("cpus=3,mem=90".parse().unwrap())
    );
    // The rest is offered at the next run.
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(3), &mut fx), 1);
    assert_eq!(
        s.offers(None, None)[0].resources,
        "cpus=3,mem=90".parse().unwrap()
    );
}

#[test]
fn a_lost_agent_rescinds_offers_and_loses_tasks() {
    let (mut s, fw, agent, offer) = setup();
    let mut fx = Vec::new();
    launch_each(&mut s, fw, agent, &offer, &["a"]);
    s.allocate(&at(3), &mut fx);
    let rest = s.offers(None, None).remove(0);
    let mut fx = Vec::new();
    // Not yet: 5 missed heartbeats of 15 s.
    s.check_agents(&at(75_000), &mut fx);
    assert!(fx.is_empty());
    s.check_agents(&at(75_001), &mut fx);
    let lost = TaskStatus {
        task_id: "a".parse().unwrap(),
        framework_id: fw,
        agent_id: agent,
        state: TaskState::Lost,
        message: Some("agent lost: it missed its heartbeats".into()),
        exit_code: None,
        update_id: update_id(2),
        timestamp: at(75_001).wall,
        resources: Some("cpus=1".parse().unwrap()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    };
    assert_eq!(rest.offer_id, offer_id(2));
    assert_eq!(
        fx,
        [
            Effect::ToFramework(
                fw,
                FrameworkEvent::Rescind {
                    offer_id: rest.offer_id
                }
            ),
            Effect::Offer(OfferEvent::OfferRescinded(outcome(
                &rest,
                &[],
                Some("agent lost")
            ))),
            Effect::ToFramework(fw, FrameworkEvent::Update { status: lost }),
            Effect::Allocate,
        ]
    );
    assert!(
        s.ledger.allocator().capacity().is_empty(),
        "a lost agent leaves the capacity"
    );
    assert!(s.offers(None, None).is_empty());
    assert_eq!(s.frameworks()[0].active_tasks, 0);
    assert!(s.frameworks()[0].used.is_empty());
}

#[test]
fn failover_removes_a_disconnected_framework_after_its_timeout() {
    let (mut s, fw, _, offer) = setup();
    let generation = s.frameworks[&fw].generation;
    let mut fx = Vec::new();
    s.stream_closed(fw, generation, &at(10), &mut fx);
    assert!(s.offers(None, None).is_empty(), "its offers are rescinded");
    assert_eq!(
        fx,
        [
            Effect::ToFramework(
                fw,
                FrameworkEvent::Rescind {
                    offer_id: offer.offer_id
                }
            ),
            Effect::Offer(OfferEvent::OfferRescinded(outcome(
                &offer,
                &[],
                Some("framework disconnected")
            ))),
            Effect::Allocate,
        ]
    );
    let mut fx = Vec::new();
    s.check_failover(&at(10 + 59_999), &mut fx);
    assert!(s.frameworks.contains(fw));
    assert_eq!(fx, []);
    s.check_failover(&at(10 + 60_000), &mut fx);
    assert!(!s.frameworks.contains(fw));
    assert_eq!(
        fx,
        [
            Effect::Persist(crate::records::Change::RemoveFramework(fw)),
            Effect::ToFramework(
                fw,
                FrameworkEvent::Error {
                    message: "framework removed: failover timeout passed".into()
                }
            ),
            Effect::CloseStream(fw),
            Effect::Allocate,
        ]
    );
    // An older stream closing later changes nothing.
    let mut fx = Vec::new();
    s.stream_closed(fw, generation, &at(70_000), &mut fx);
    assert!(fx.is_empty());
}

#[test]
fn a_task_that_ended_during_a_coordinator_restart_is_kept_for_its_framework() {
    // A fresh coordinator: an agent re-registers reporting a task of an unknown framework
    // that ended while no coordinator ran. The update must be kept (not dropped after the
    // agent was told it is recorded) until the framework comes back and acknowledges it.
    let mut s = new_books(&Settings::default());
    let (agent, fw) = (AgentId::new(), FrameworkId::new());
    let status = TaskStatus {
        task_id: "t2".parse().unwrap(),
        framework_id: fw,
        agent_id: agent,
        state: TaskState::Finished,
        message: None,
        exit_code: Some(0),
        update_id: UpdateId::new(),
        timestamp: protocol::now(),
        resources: None,
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    };
    let mut fx = Vec::new();
    s.register_agent(
        AgentRegistration {
            hostname: "h".into(),
            endpoint: "http://127.0.0.1:1".into(),
            resources: "cpus=4".parse().unwrap(),
            attributes: Default::default(),
            agent_id: Some(agent),
            tasks: vec![status.clone()],
            api_token: None,
            reservations: Vec::new(),
            gpu_devices: Vec::new(),
        },
        &at(0),
        &mut fx,
    )
    .unwrap();
    let listed = s.tasks(Some(fw));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, TaskState::Finished);
    assert_eq!(
        s.frameworks()[0].active_tasks,
        0,
        "an ended task is not active"
    );
    assert!(s.agents()[0].used.is_empty());

    // The framework re-registers with its id: the update is delivered on its new stream,
    // reconciliation reports the task, and the acknowledgement is accepted.
    let mut fx = Vec::new();
    let (id, created) = s
        .register_framework(registration("f", "eng", None, Some(fw)), &at(1), &mut fx)
        .unwrap();
    assert_eq!((id, created), (fw, false));
    s.subscribe(fw, &at(1), &mut fx).unwrap();
    let update = update(fw, status.clone());
    let default_failover_s = Settings::default().default_failover_timeout.as_secs_f64();
    assert_eq!(
        fx,
        vec![
            // The agent's report made a placeholder at 0, which the registration fills in.
            Effect::Allocate,
            put_framework(stored_framework(fw, "f", "eng", default_failover_s, &at(0))),
            subscribed(fw),
            update.clone(),
            Effect::Allocate,
        ]
    );
    let mut fx = Vec::new();
    s.reconcile(fw, vec![], &mut fx).unwrap();
    assert_eq!(fx, vec![update]);
    s.acknowledge(fw, status.task_id.clone(), status.update_id)
        .unwrap();
    assert!(s.frameworks[&fw].pending.is_empty());
}

/// A `running` status of task `id` of `fw` on `agent`, reporting `res` (if any).
pub(super) fn running(id: &str, fw: FrameworkId, agent: AgentId, res: Option<&str>) -> TaskStatus {
    TaskStatus {
        task_id: id.parse().unwrap(),
        framework_id: fw,
        agent_id: agent,
        state: TaskState::Running,
        message: None,
        exit_code: None,
        update_id: UpdateId::new(),
        timestamp: protocol::now(),
        resources: res.map(|r| r.parse().unwrap()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    }
}

/// A fresh coordinator's view of an agent coming back with `tasks`.
pub(super) fn reregister(agent: AgentId, total: &str, tasks: Vec<TaskStatus>) -> AgentRegistration {
    AgentRegistration {
        hostname: "h".into(),
        endpoint: "http://127.0.0.1:1".into(),
        resources: total.parse().unwrap(),
        attributes: Default::default(),
        agent_id: Some(agent),
        tasks,
        api_token: None,
        reservations: Vec::new(),
        gpu_devices: Vec::new(),
    }
}

fn framework(s: &mut State, id: Option<FrameworkId>, now: u64) -> FrameworkId {
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", None, id), &at(now), &mut fx)
        .unwrap();
    s.subscribe(fw, &at(now), &mut fx).unwrap();
    fw
}

#[test]
fn an_adopted_running_task_holds_the_resources_it_reports() {
    // A fresh coordinator (restarted): the agent comes back with a task of a framework that
    // has not re-registered yet.
    let mut s = new_books(&Settings::default());
    let (agent, orphan_fw) = (AgentId::new(), FrameworkId::new());
    let status = running("t1", orphan_fw, agent, Some("cpus=1,mem=10"));
    let mut fx = Vec::new();
    let (id, created) = s
        .register_agent(
            reregister(agent, "cpus=4,mem=100", vec![status]),
            &at(0),
            &mut fx,
        )
        .unwrap();
    assert_eq!((id, created), (agent, true));
    let t1: Resources = "cpus=1,mem=10".parse().unwrap();
    assert_eq!(s.agents()[0].used, t1);
    assert!(s.agents()[0].offered.is_empty());
    assert_eq!(
        s.ledger.allocator().agent_free(agent),
        Some("cpus=3,mem=90".parse().unwrap())
    );
    assert_eq!(s.ledger.framework(orphan_fw).used, t1);
    assert_eq!(s.frameworks[&orphan_fw].active_tasks, 1);

    // Another framework is offered only the rest.
    let other = framework(&mut s, None, 1);
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(2), &mut fx), 1);
    let offer = s.offers(None, None).remove(0);
    assert_eq!(
        (offer.framework_id, offer.agent_id),
        (other, agent),
        "{offer:?}"
    );
    assert_eq!(offer.resources, "cpus=3,mem=90".parse().unwrap());
    let a = &s.agents()[0];
    assert_eq!(a.used.add(&a.offered), "cpus=4,mem=100".parse().unwrap());

    // The task's framework comes back: it takes the task over with its resources, and the
    // task's end frees them.
    framework(&mut s, Some(orphan_fw), 3);
    assert_eq!(s.ledger.framework(orphan_fw).used, t1);
    let mut fx = Vec::new();
    let mut done = running("t1", orphan_fw, agent, Some("cpus=1,mem=10"));
    done.state = TaskState::Finished;
    s.agent_status(agent, done, &at(4), &mut fx).unwrap();
    assert!(s.agents()[0].used.is_empty());
    assert!(s.ledger.framework(orphan_fw).used.is_empty());
    // Free again, beside the other framework's outstanding offer.
    assert_eq!(s.ledger.allocator().agent_free(agent), Some(t1));
}

#[test]
fn an_adopted_task_rescinds_the_offers_holding_its_resources() {
    // The whole agent is offered when the agent reports a task the books do not know.
    let (mut s, fw, agent, offer) = setup();
    let status = running("t9", fw, agent, Some("cpus=1"));
    check(
        &mut s,
        |s, fx| s.agent_status(agent, status.clone(), &at(2), fx).unwrap(),
        vec![
            Effect::ToFramework(
                fw,
                FrameworkEvent::Rescind {
                    offer_id: offer.offer_id,
                },
            ),
            Effect::Offer(OfferEvent::OfferRescinded(outcome(
                &offer,
                &[],
                Some("resources in use by an adopted task"),
            ))),
            Effect::Allocate,
            Effect::ToFramework(
                fw,
                FrameworkEvent::Update {
                    status: status.clone(),
                },
            ),
        ],
    );
    assert!(s.offers(None, None).is_empty());
    let a = &s.agents()[0];
    assert_eq!(a.used, "cpus=1".parse().unwrap());
    assert!(a.offered.is_empty());
    assert_eq!(s.ledger.framework(fw).used, "cpus=1".parse().unwrap());
    // The next offer has the rest.
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(3), &mut fx), 1);
    assert_eq!(
        s.offers(None, None)[0].resources,
        "cpus=3,mem=100".parse().unwrap()
    );
}

#[test]
fn an_offer_that_does_not_conflict_with_an_adopted_task_survives() {
    let (mut s, fw, agent, offer) = setup();
    // Accept part of the offer; the rest (cpus=3,mem=90) is offered again.
    let mut fx = Vec::new();
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=1,mem=10")],
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, req, &at(2), &mut fx).unwrap();
    s.allocate(&at(3), &mut fx);
    let rest = s.offers(None, None).remove(0);
    // Free is now empty: an adopted task that reports nothing it could take leaves the offer
    // alone (a resource the agent lacks is not accounted).
    let mut fx = Vec::new();
    s.agent_status(
        agent,
        running("t9", fw, agent, Some("gpus=1")),
        &at(4),
        &mut fx,
    )
    .unwrap();
    assert_eq!(s.offers(None, None), vec![rest]);
    assert_eq!(s.agents()[0].used, "cpus=1,mem=10".parse().unwrap());
}

#[test]
fn adopted_tasks_reporting_more_than_the_agent_has_hold_only_what_fits() {
    let mut s = new_books(&Settings::default());
    let (agent, fw) = (AgentId::new(), FrameworkId::new());
    let tasks = vec![
        running("t1", fw, agent, Some("cpus=3")),
        running("t2", fw, agent, Some("cpus=3,gpus=1,mem=10")),
        running("t3", fw, agent, None),
    ];
    let mut fx = Vec::new();
    s.register_agent(reregister(agent, "cpus=4,mem=100", tasks), &at(0), &mut fx)
        .unwrap();
    let a = &s.agents()[0];
    assert_eq!(a.used, "cpus=4,mem=10".parse().unwrap());
    assert_eq!(
        s.ledger.allocator().agent_free(agent),
        Some("mem=90".parse().unwrap())
    );
    assert_eq!(s.frameworks[&fw].active_tasks, 3);
    let held = |t: &str| s.tasks[&(fw, t.parse().unwrap())].resources.clone();
    assert_eq!(held("t1"), "cpus=3".parse().unwrap());
    assert_eq!(held("t2"), "cpus=1,mem=10".parse().unwrap());
    assert!(held("t3").is_empty(), "no resources reported: none held");
    // Ending the clipped task releases exactly what it holds.
    let mut done = running("t2", fw, agent, Some("cpus=3,gpus=1,mem=10"));
    done.state = TaskState::Failed;
    s.agent_status(agent, done, &at(1), &mut fx).unwrap();
    assert_eq!(s.agents()[0].used, "cpus=3".parse().unwrap());
    assert_eq!(
        s.ledger.allocator().agent_free(agent),
        Some("cpus=1,mem=100".parse().unwrap())
    );
}

/// Runs task `id` to `finished` on `agent`: a `running` update (acknowledged), then a
/// `finished` one, acknowledged only if `ack`. Returns the `finished` status.
fn finish(s: &mut State, fw: FrameworkId, agent: AgentId, id: &str, ack: bool) -> TaskStatus {
    let mut fx = Vec::new();
    let run = running(id, fw, agent, None);
    s.agent_status(agent, run.clone(), &at(10), &mut fx)
        .unwrap();
    s.acknowledge(fw, run.task_id, run.update_id).unwrap();
    let mut done = running(id, fw, agent, None);
    done.state = TaskState::Finished;
    s.agent_status(agent, done.clone(), &at(11), &mut fx)
        .unwrap();
    if ack {
        s.acknowledge(fw, done.task_id.clone(), done.update_id)
            .unwrap();
    }
    done
}

/// Launches one `cpus=1` task per name on `offer` at time 2.
fn launch_each(s: &mut State, fw: FrameworkId, agent: AgentId, offer: &Offer, names: &[&str]) {
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: names.iter().map(|n| task(n, agent, "cpus=1")).collect(),
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, req, &at(2), &mut Vec::new()).unwrap();
}

#[test]
fn each_task_that_ends_is_counted_once_by_its_terminal_state() {
    let (mut s, fw, agent, offer) = setup();
    let mut fx = Vec::new();
    launch_each(&mut s, fw, agent, &offer, &["a", "b"]);
    let done = finish(&mut s, fw, agent, "a", false);
    // Sent again by the agent (it was not acknowledged): counted once.
    s.agent_status(agent, done, &at(12), &mut fx).unwrap();
    // The agent is lost with task b.
    s.check_agents(&at(1_000_000), &mut fx);
    let expected: Vec<(&str, u64)> = vec![
        ("finished", 1),
        ("failed", 0),
        ("killed", 0),
        ("lost", 1),
        ("error", 0),
        ("gone", 0),
    ];
    assert_eq!(s.gauges().tasks_terminal, expected);
}

#[test]
fn the_launch_window_counts_tasks_launching_and_outstanding_offers() {
    let (mut s, fw, agent, offer) = setup();
    let mut fx = Vec::new();
    assert_eq!(s.admissible_agents(0, &at(1)), usize::MAX, "0: no bound");
    // One offer out (made at 1), counted as one task until accepts say otherwise.
    assert_eq!(s.admissible_agents(4, &at(1)), 3);
    assert_eq!(s.admissible_agents(1, &at(1)), 0, "full");
    // Held for two seconds, it no longer counts: a framework sitting on its offers does not
    // hold the window.
    assert_eq!(s.admissible_agents(1, &at(2_001)), 1);
    launch_each(&mut s, fw, agent, &offer, &["a", "b"]);
    assert_eq!(s.launching(), 2);
    // The offer is gone; two tasks launching, an offer now counts as 1.05 tasks: 8 / 1.05.
    assert_eq!(s.admissible_agents(10, &at(2)), 7);
    assert_eq!(s.admissible_agents(2, &at(2)), 0);
    // Reported running, then finished: no longer launching.
    finish(&mut s, fw, agent, "a", true);
    assert_eq!(s.launching(), 1);
    // Lost with its agent: no longer launching either.
    s.check_agents(&at(1_000_000), &mut fx);
    assert_eq!(s.launching(), 0);
}

fn listed(s: &State, fw: FrameworkId) -> Vec<String> {
    s.tasks(Some(fw))
        .into_iter()
        .map(|t| t.task_id.to_string())
        .collect()
}

fn bounded(n: usize) -> Settings {
    Settings {
        max_completed_tasks_per_framework: n,
        ..Settings::default()
    }
}

#[test]
fn past_the_bound_the_oldest_acknowledged_completed_task_is_forgotten() {
    let (mut s, fw, agent, offer) = setup_with(&bounded(2));
    launch_each(&mut s, fw, agent, &offer, &["a", "b", "c"]);
    finish(&mut s, fw, agent, "a", true);
    let b = finish(&mut s, fw, agent, "b", true);
    // Two completed and one still staging: nothing past the bound yet.
    assert_eq!(listed(&s, fw), ["a", "b", "c"]);
    finish(&mut s, fw, agent, "c", true);
    assert_eq!(listed(&s, fw), ["b", "c"]);

    // The forgotten task answers as an unknown one; the kept ones still reconcile.
    let mut fx = Vec::new();
    let err = s
        .reconcile(fw, vec!["a".parse().unwrap()], &mut fx)
        .unwrap_err();
    assert!(matches!(err, StateError::UnknownTask(ref t) if t.to_string() == "a"));
    assert!(fx.is_empty());
    s.reconcile(fw, vec!["b".parse().unwrap()], &mut fx)
        .unwrap();
    assert_eq!(fx, vec![update(fw, b)], "b's latest status, once");

    // No accounting moved: everything is free again and the framework holds nothing.
    assert!(s.agents()[0].used.is_empty());
    assert!(s.ledger.framework(fw).used.is_empty());
    assert_eq!(s.frameworks[&fw].active_tasks, 0);
    assert_eq!(
        s.ledger.allocator().agent_free(agent),
        Some("cpus=4,mem=100".parse().unwrap())
    );

    // A forgotten id may be launched again; an id still in the books may not.
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(20), &mut fx), 1);
    let offer = s.offers(None, None).remove(0);
    let dup = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("b", agent, "cpus=1")],
        refuse: Some(Duration::ZERO),
    };
    assert!(s.accept(fw, dup, &at(21), &mut fx).is_err());
    let reuse = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=1")],
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, reuse, &at(21), &mut fx).unwrap();
    assert_eq!(listed(&s, fw), ["a", "b", "c"]);
}

#[test]
fn a_finished_task_whose_update_is_unacknowledged_is_never_forgotten() {
    let (mut s, fw, agent, offer) = setup_with(&bounded(2));
    launch_each(&mut s, fw, agent, &offer, &["a", "b", "c", "d"]);
    let a_done = finish(&mut s, fw, agent, "a", false);
    finish(&mut s, fw, agent, "b", true);
    finish(&mut s, fw, agent, "c", true);
    finish(&mut s, fw, agent, "d", true);
    // Three tasks past the bound of two acknowledged ones: `a` is kept, its update still
    // re-sent; of the acknowledged ones only the two newest remain.
    assert_eq!(listed(&s, fw), ["a", "c", "d"]);
    let mut fx = Vec::new();
    s.resend_updates(&at(1_000_000), &mut fx);
    assert_eq!(
        fx,
        vec![Effect::ToFramework(
            fw,
            FrameworkEvent::Update {
                status: a_done.clone()
            }
        )]
    );

    // Acknowledged at last, `a` is completed, and the oldest completed task (`c`) goes.
    s.acknowledge(fw, a_done.task_id.clone(), a_done.update_id)
        .unwrap();
    assert_eq!(listed(&s, fw), ["a", "d"]);
    // A late duplicate acknowledgement of `a` is accepted and completes nothing twice.
    s.acknowledge(fw, a_done.task_id, a_done.update_id).unwrap();
    assert_eq!(listed(&s, fw), ["a", "d"]);
    assert_eq!(s.frameworks[&fw].completed.len(), 2);
}

fn persisted(fx: &Effects) -> Vec<crate::records::Change> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Persist(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// Plays the changes into a snapshot the way the store does (later changes win).
fn snapshot_of(changes: &[crate::records::Change]) -> crate::records::Snapshot {
    use crate::records::Change;
    let mut snap = crate::records::Snapshot::default();
    for c in changes {
        match c {
            Change::PutFramework(f) => {
                snap.frameworks.retain(|g| g.id != f.id);
                snap.frameworks.push(f.clone());
            }
            Change::RemoveFramework(id) => {
                snap.frameworks.retain(|g| g.id != *id);
                snap.removed_frameworks.push(*id);
            }
            Change::SetWeight(r, w) => {
                snap.weights.retain(|(q, _)| q != r);
                snap.weights.push((r.clone(), *w));
            }
            Change::SetQuota(r, q) => {
                snap.quotas.retain(|(p, _)| p != r);
                if !q.is_empty() {
                    snap.quotas.push((r.clone(), q.clone()));
                }
            }
            Change::ForgetFramework(id) => snap.frameworks.retain(|g| g.id != *id),
            Change::PutAgent(a) => {
                snap.agents.retain(|b| b.id != a.id);
                snap.agents.push(a.clone());
            }
            Change::RemoveAgent(id) => snap.agents.retain(|b| b.id != *id),
            Change::SetReservation(a, r, res) => {
                snap.reservations.retain(|(b, q, _)| !(b == a && q == r));
                if !res.is_empty() {
                    snap.reservations.push((*a, r.clone(), res.clone()));
                }
            }
        }
    }
    snap
}

#[test]
fn registrations_removals_and_weights_are_persisted_and_restored() {
    use crate::records::Change;
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let register =
        |name: &str, role: &str, id: Option<FrameworkId>| registration(name, role, Some(30.0), id);
    let (keep, _) = s
        .register_framework(register("keep", "eng/batch", None), &at(0), &mut fx)
        .unwrap();
    let (gone, _) = s
        .register_framework(register("gone", "ops", None), &at(0), &mut fx)
        .unwrap();
    // Re-registering under a new name and role is persisted too.
    s.register_framework(register("kept", "eng/web", Some(keep)), &at(1), &mut fx)
        .unwrap();
    s.remove_framework(gone, "test", &mut fx).unwrap();
    let weight = protocol::Weight::new(3.0).unwrap();
    s.set_role_weight(&"eng".parse().unwrap(), weight, &mut fx)
        .unwrap();
    // A refused call persists nothing.
    let mut refused = Vec::new();
    assert!(s
        .register_framework(register("again", "ops", Some(gone)), &at(2), &mut refused)
        .is_err());
    assert!(persisted(&refused).is_empty());

    let record = |id, name, role| stored_framework(id, name, role, 30.0, &at(0));
    assert_eq!(
        fx,
        vec![
            put_framework(record(keep, "keep", "eng/batch")),
            put_framework(record(gone, "gone", "ops")),
            Effect::Allocate,
            // Re-registered: the same record, renamed, in its new role, registered at 0 still.
            put_framework(record(keep, "kept", "eng/web")),
            Effect::Persist(Change::RemoveFramework(gone)),
            Effect::ToFramework(
                gone,
                FrameworkEvent::Error {
                    message: "framework removed: test".into()
                }
            ),
            Effect::CloseStream(gone),
            Effect::Allocate,
            Effect::Allocate,
            Effect::Persist(Change::SetWeight("eng".parse().unwrap(), weight)),
        ]
    );
    let changes = persisted(&fx);

    // A new coordinator restores them: the framework is back, disconnected, in its last role.
    let mut t = new_books(&Settings::default());
    t.restore(snapshot_of(&changes), &at(1_000));
    let fws = t.frameworks();
    assert_eq!(fws.len(), 1);
    assert_eq!(fws[0].framework_id, keep);
    assert_eq!(fws[0].name, "kept");
    assert_eq!(fws[0].role.as_str(), "eng/web");
    assert_eq!(fws[0].state, "disconnected");
    assert_eq!(fws[0].failover_timeout_s, 30.0);
    let eng = t
        .roles()
        .children
        .into_iter()
        .find(|r| r.path == "eng")
        .unwrap();
    assert_eq!(eng.weight, 3.0);
    // The removed framework stays refused; the restored one re-registers and subscribes.
    let mut fx = Vec::new();
    assert!(matches!(
        t.register_framework(register("gone", "ops", Some(gone)), &at(1_001), &mut fx),
        Err(StateError::FrameworkRemoved(_))
    ));
    let (id, new) = t
        .register_framework(register("kept", "eng/web", Some(keep)), &at(1_001), &mut fx)
        .unwrap();
    assert_eq!((id, new), (keep, false));
    t.subscribe(keep, &at(1_001), &mut fx).unwrap();
    assert_eq!(t.frameworks()[0].state, "connected");
}

#[test]
fn a_restored_framework_that_does_not_come_back_is_removed_after_its_failover_timeout() {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", Some(10.0), None), &at(0), &mut fx)
        .unwrap();
    let mut t = new_books(&Settings::default());
    t.restore(snapshot_of(&persisted(&fx)), &at(0));
    // Its agent comes back with a running task: accounted under the real framework and role.
    let agent = AgentId::new();
    let mut fx = Vec::new();
    t.register_agent(
        reregister(
            agent,
            "cpus=4",
            vec![running("t", fw, agent, Some("cpus=1"))],
        ),
        &at(100),
        &mut fx,
    )
    .unwrap();
    let info = &t.frameworks()[0];
    assert_eq!((info.name.as_str(), info.role.as_str()), ("f", "eng"));
    assert_eq!(info.used, "cpus=1".parse().unwrap());

    check(&mut t, |t, fx| t.check_failover(&at(9_999), fx), vec![]);
    assert_eq!(t.frameworks().len(), 1, "not before its timeout");
    check(
        &mut t,
        |t, fx| t.check_failover(&at(10_000), fx),
        vec![
            Effect::Kill {
                agent_id: agent,
                framework_id: fw,
                endpoint: "http://127.0.0.1:1".into(),
                task_id: "t".parse().unwrap(),
            },
            Effect::Persist(crate::records::Change::RemoveFramework(fw)),
            Effect::ToFramework(
                fw,
                FrameworkEvent::Error {
                    message: "framework removed: failover timeout passed".into(),
                },
            ),
            Effect::CloseStream(fw),
            Effect::Allocate,
        ],
    );
    assert!(t.frameworks().is_empty());
    assert!(t.agents()[0].used.is_empty());
}

#[test]
fn a_task_of_a_removed_framework_reported_by_an_agent_is_killed() {
    let mut s = new_books(&Settings::default());
    let fw = framework(&mut s, None, 0);
    let mut fx = Vec::new();
    s.remove_framework(fw, "test", &mut fx).unwrap();
    // Its agent was away when it was removed, and comes back with the task still running.
    let agent = AgentId::new();
    let mut fx = Vec::new();
    s.register_agent(
        reregister(
            agent,
            "cpus=4",
            vec![
                running("t", fw, agent, Some("cpus=1")),
                TaskStatus {
                    state: TaskState::Finished,
                    ..running("done", fw, agent, None)
                },
            ],
        ),
        &at(10),
        &mut fx,
    )
    .unwrap();
    assert_eq!(
        fx,
        vec![kill(agent, fw, "t"), Effect::Allocate],
        "only the running task is killed"
    );
    assert!(
        s.tasks.is_empty(),
        "nothing is adopted for a removed framework"
    );
    assert!(s.agents()[0].used.is_empty());
}

#[test]
fn explain_counts_each_agent_under_its_reason() {
    let (mut s, fw, _, _) = setup();
    let e = s.explain(fw, &at(2)).unwrap();
    assert_eq!((e.agents.active, e.agents.offered_to_it), (1, 1));
    assert_eq!(e.stalled_for_s, None, "it holds an offer");
    // A second framework whose demand hint fits on no agent, and a second agent.
    let mut fx = Vec::new();
    let (big, _) = s
        .register_framework(
            FrameworkRegistration {
                demand: Some("cpus=8".parse().unwrap()),
                ..registration("big", "ops", None, None)
            },
            &at(2),
            &mut fx,
        )
        .unwrap();
    s.subscribe(big, &at(2), &mut fx).unwrap();
    s.register_agent(
        reregister(AgentId::new(), "cpus=2", vec![]),
        &at(2),
        &mut fx,
    )
    .unwrap();
    let e = s.explain(big, &at(3)).unwrap();
    // The first agent's resources are all in `fw`'s offer; the second is too small.
    assert_eq!(e.agents.active, 2);
    assert_eq!(e.agents.nothing_free, 1, "{e:?}");
    assert_eq!(e.agents.demand_does_not_fit, 1, "{e:?}");
    assert!(
        e.summary.contains("too little free for its demand hint"),
        "{}",
        e.summary
    );
    // `fw` can use the new agent, not yet offered.
    let e = s.explain(fw, &at(3)).unwrap();
    assert_eq!((e.agents.offered_to_it, e.agents.eligible), (1, 1), "{e:?}");
    // Unknown ids are refused.
    assert!(matches!(
        s.explain(FrameworkId::new(), &at(3)),
        Err(StateError::UnknownFramework(_))
    ));
}

#[test]
fn a_status_batch_is_applied_in_order_and_refused_whole() {
    let (mut s, fw, agent, offer) = setup();
    launch_each(&mut s, fw, agent, &offer, &["a", "b"]);

    // One bad status (another agent's id) refuses the whole batch: nothing recorded or sent.
    let run_a = running("a", fw, agent, Some("cpus=1"));
    let mut bad = running("b", fw, agent, Some("cpus=1"));
    bad.agent_id = AgentId::new();
    let mut fx = Vec::new();
    let err = s
        .agent_statuses(agent, vec![run_a.clone(), bad], &at(3), &mut fx)
        .unwrap_err();
    assert!(matches!(err, StateError::AgentMismatch { .. }), "{err}");
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(
        s.tasks[&(fw, "a".parse().unwrap())].state(),
        TaskState::Staging
    );

    // A good batch: every update recorded and relayed in order; the terminal one frees its task.
    let mut done_a = running("a", fw, agent, Some("cpus=1"));
    done_a.state = TaskState::Finished;
    let run_b = running("b", fw, agent, Some("cpus=1"));
    let batch = vec![run_a.clone(), run_b.clone(), done_a.clone()];
    let relay = |status: &TaskStatus| {
        Effect::ToFramework(
            fw,
            FrameworkEvent::Update {
                status: status.clone(),
            },
        )
    };
    check(
        &mut s,
        |s, fx| s.agent_statuses(agent, batch, &at(4), fx).unwrap(),
        vec![
            relay(&run_a),
            relay(&run_b),
            Effect::Allocate,
            relay(&done_a),
        ],
    );
    assert_eq!(s.agents()[0].used, "cpus=1".parse().unwrap());
    // a's `finished` superseded its `running`: one pending update per task.
    assert_eq!(s.frameworks[&fw].pending.len(), 2);
}

#[test]
fn batched_acknowledgements_clear_pending_updates_and_report_unknown_ones() {
    let (mut s, fw, agent, _) = setup();
    let first = finish(&mut s, fw, agent, "t1", false);
    let second = running("t2", fw, agent, None);
    let mut fx = Vec::new();
    s.agent_status(agent, second.clone(), &at(12), &mut fx)
        .unwrap();
    assert_eq!(s.frameworks[&fw].pending.len(), 2);
    let stranger: TaskId = "nobody".parse().unwrap();
    let unknown = s
        .acknowledge_many(
            fw,
            vec![
                (first.task_id.clone(), first.update_id),
                (stranger.clone(), UpdateId::new()),
                (second.task_id.clone(), second.update_id),
            ],
        )
        .unwrap();
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].0, stranger);
    assert!(s.frameworks[&fw].pending.is_empty());
    // The finished task, its last update acknowledged, is now completed.
    assert!(s.tasks[&(fw, first.task_id)].completed);
    // A framework the books do not know is refused.
    assert!(matches!(
        s.acknowledge_many(FrameworkId::new(), vec![]),
        Err(StateError::UnknownFramework(_))
    ));
}

#[test]
fn cached_task_json_matches_the_views_and_follows_changes() {
    let (mut s, fw, agent, offer) = setup();
    let mut fx = Vec::new();
    launch_each(&mut s, fw, agent, &offer, &["a", "b"]);
    let parsed = |s: &State| -> Vec<protocol::messages::TaskInfo> {
        s.tasks_json(None)
            .iter()
            .map(|j| serde_json::from_str(j).unwrap())
            .collect()
    };
    assert_eq!(parsed(&s), s.tasks(None));
    // A status change is seen by the next read, not the cached one.
    let mut done = running("a", fw, agent, Some("cpus=1"));
    done.state = TaskState::Failed;
    done.message = Some("boom".into());
    s.agent_status(agent, done, &at(3), &mut fx).unwrap();
    let after = parsed(&s);
    assert_eq!(after, s.tasks(None));
    assert_eq!(after[0].state, TaskState::Failed);
    assert_eq!(after[0].message.as_deref(), Some("boom"));
    let list: protocol::messages::TaskList =
        serde_json::from_slice(&task_list_json(&s.tasks_json(Some(fw)))).unwrap();
    assert_eq!(list.tasks, s.tasks(Some(fw)));
    // The whole snapshot is the same document as the plain view.
    let json = s.cluster_snapshot().to_json().unwrap();
    let state: protocol::messages::ClusterState = serde_json::from_slice(&json).unwrap();
    assert_eq!(state, s.cluster_state());
}

#[test]
fn offer_waits_count_freed_resources_offered_by_the_next_run() {
    let (mut s, fw, agent, offer) = setup();
    // The first offer was of a new agent's resources: not a freeing, not counted.
    assert!(s.take_offer_waits().is_empty());
    // Declined at 10 ms without a filter, offered again by the run at 25 ms: waited 15 ms.
    let mut fx = Vec::new();
    let decline = Decline {
        offer_ids: vec![offer.offer_id],
        refuse: Some(Duration::ZERO),
    };
    s.decline(fw, decline, &at(10), &mut fx).unwrap();
    assert_eq!(s.allocate(&at(25), &mut fx), 1);
    assert_eq!(s.take_offer_waits(), vec![15]);
    assert!(s.take_offer_waits().is_empty(), "taken once");
    // Declined with a filter: the next run offers nothing, and the wait is dropped.
    let offer = s.offers(None, None).remove(0);
    let decline = Decline {
        offer_ids: vec![offer.offer_id],
        refuse: Some(Duration::from_secs(60)),
    };
    s.decline(fw, decline, &at(30), &mut fx).unwrap();
    assert_eq!(s.allocate(&at(40), &mut fx), 0);
    assert!(s.take_offer_waits().is_empty());
    assert!(s.freed_at.is_empty());
    let _ = agent;
}

#[test]
fn a_run_in_parts_offers_each_agent_once_and_keeps_what_was_freed_behind_it() {
    let (mut s, fw, first, offer) = setup();
    let mut fx = Vec::new();
    let (second, _) = s
        .register_agent(
            AgentRegistration {
                hostname: "h2".into(),
                endpoint: "http://127.0.0.1:2".into(),
                resources: "cpus=2,mem=50".parse().unwrap(),
                attributes: Default::default(),
                agent_id: None,
                tasks: vec![],
                api_token: None,
                reservations: Vec::new(),
                gpu_devices: Vec::new(),
            },
            &at(2),
            &mut fx,
        )
        .unwrap();
    let no_filter = |offer: &Offer| Decline {
        offer_ids: vec![offer.offer_id],
        refuse: Some(Duration::ZERO),
    };
    s.decline(fw, no_filter(&offer), &at(3), &mut fx).unwrap();
    let offer_on = |s: &State, agent: AgentId| {
        let mut on: Vec<Offer> = s
            .offers(None, None)
            .into_iter()
            .filter(|o| o.agent_id == agent)
            .collect();
        assert_eq!(on.len(), 1, "one offer on {agent}");
        on.remove(0)
    };
    let offered = |o: &Offer| {
        vec![
            Effect::Offer(OfferEvent::OfferCreated(o.clone())),
            Effect::ToFramework(
                fw,
                FrameworkEvent::Offers {
                    offers: vec![o.clone()],
                },
            ),
        ]
    };

    // A run from 5 ms in parts of one agent: the first part offers only the first agent.
    let mut fx = Vec::new();
    let mut run = s.start_run(Sweep::All, &at(5));
    assert_eq!(s.allocate_part(&mut run, 1, &at(5), &mut fx), 1);
    assert!(!run.done());
    let again = offer_on(&s, first);
    assert_eq!(fx, offered(&again));
    assert_eq!(s.take_offer_waits(), vec![2], "freed at 3, offered at 5");
    // Declined behind the run's back, before its last part.
    s.decline(fw, no_filter(&again), &at(6), &mut fx).unwrap();
    let mut fx = Vec::new();
    assert_eq!(s.allocate_part(&mut run, 1, &at(7), &mut fx), 1);
    assert!(run.done());
    assert_eq!(fx, offered(&offer_on(&s, second)));
    assert!(s.take_offer_waits().is_empty(), "a new agent was not freed");
    // Freed after the run started: kept for the next run, which counts its wait.
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(10), &mut fx), 1);
    assert_eq!(fx, offered(&offer_on(&s, first)));
    assert_eq!(s.take_offer_waits(), vec![4], "freed at 6, offered at 10");
    assert!(s.freed_at.is_empty());
}

// Exact effects: with sequential ids and a fixed wall clock every effect is known in advance.

fn offer_id(n: u128) -> OfferId {
    OfferId(IdSource::nth(n))
}

pub(super) fn update_id(n: u128) -> UpdateId {
    UpdateId(IdSource::nth(n))
}

/// Accepts the setup's offer for task `a` (`cpus=1,mem=10`), not filtering the rest.
fn launch_a(s: &mut State, fw: FrameworkId, agent: AgentId, offer: &Offer) -> Effects {
    let mut fx = Vec::new();
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=1,mem=10")],
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, req, &at(2), &mut fx).unwrap();
    fx
}

pub(super) fn outcome(offer: &Offer, tasks: &[&str], reason: Option<&str>) -> OfferOutcome {
    OfferOutcome {
        offer_id: offer.offer_id,
        framework_id: offer.framework_id,
        agent_id: offer.agent_id,
        tasks: tasks.iter().map(|t| t.parse().unwrap()).collect(),
        reason: reason.map(str::to_owned),
    }
}

#[test]
fn an_allocation_run_makes_exactly_one_offer_event_and_one_offers_event() {
    let config = Settings::default();
    let mut s = new_books(&config);
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(registration("f", "eng", None, None), &at(0), &mut fx)
        .unwrap();
    assert_eq!(fw, FrameworkId(IdSource::nth(1)));
    s.subscribe(fw, &at(0), &mut fx).unwrap();
    let (agent, _) = s
        .register_agent(
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
            &mut fx,
        )
        .unwrap();
    assert_eq!(agent, AgentId(IdSource::nth(1)));
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(1), &mut fx), 1);
    let offer = Offer {
        offer_id: offer_id(1),
        framework_id: fw,
        agent_id: agent,
        hostname: "h".into(),
        resources: "cpus=4,mem=100".parse().unwrap(),
        agent_total: "cpus=4,mem=100".parse().unwrap(),
        attributes: Default::default(),
        created_at: at(1).wall,
        expires_at: at(1).wall + chrono::Duration::from_std(config.offer_timeout).unwrap(),
        reservation: None,
    };
    assert_eq!(
        fx,
        [
            Effect::Offer(OfferEvent::OfferCreated(offer.clone())),
            Effect::ToFramework(
                fw,
                FrameworkEvent::Offers {
                    offers: vec![offer]
                }
            ),
        ]
    );
}

#[test]
fn an_accept_ends_the_offer_returns_the_rest_and_launches_exactly_the_tasks() {
    let (mut s, fw, agent, offer) = setup();
    let fx = launch_a(&mut s, fw, agent, &offer);
    assert_eq!(
        fx,
        [
            Effect::Offer(OfferEvent::OfferAccepted(outcome(&offer, &["a"], None))),
            Effect::Allocate,
            Effect::Launch {
                agent_id: agent,
                endpoint: "http://127.0.0.1:1".into(),
                body: LaunchTasks {
                    framework_id: fw,
                    tasks: vec![task("a", agent, "cpus=1,mem=10")],
                    partition_timeout_s: None,
                },
            },
        ]
    );
    // The staging status the coordinator made has the first update id.
    let a = &s.tasks[&(fw, "a".parse().unwrap())];
    assert_eq!(a.latest().update_id, update_id(1));
    assert_eq!(a.latest().state, TaskState::Staging);
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn a_status_is_relayed_once_and_stays_pending_until_acknowledged() {
    let (mut s, fw, agent, offer) = setup();
    launch_a(&mut s, fw, agent, &offer);
    let running = TaskStatus {
        state: TaskState::Running,
        update_id: update_id(100),
        ..s.tasks[&(fw, "a".parse().unwrap())].latest_status()
    };
    let mut fx = Vec::new();
    s.agent_status(agent, running.clone(), &at(3), &mut fx)
        .unwrap();
    assert_eq!(
        fx,
        [Effect::ToFramework(
            fw,
            FrameworkEvent::Update {
                status: running.clone()
            }
        )]
    );
    assert!(s.frameworks[&fw].pending.contains(&update_id(100)));
    // The same update again (an agent retrying) is a duplicate: nothing happens.
    let mut fx = Vec::new();
    s.agent_status(agent, running, &at(4), &mut fx).unwrap();
    assert_eq!(fx, []);
    s.acknowledge(fw, "a".parse().unwrap(), update_id(100))
        .unwrap();
    assert!(!s.frameworks[&fw].pending.contains(&update_id(100)));
    // A terminal status frees the resources: an allocation run is asked for first.
    let finished = TaskStatus {
        state: TaskState::Finished,
        update_id: update_id(101),
        ..s.tasks[&(fw, "a".parse().unwrap())].latest_status()
    };
    let mut fx = Vec::new();
    s.agent_status(agent, finished.clone(), &at(5), &mut fx)
        .unwrap();
    assert_eq!(
        fx,
        [
            Effect::Allocate,
            Effect::ToFramework(fw, FrameworkEvent::Update { status: finished }),
        ]
    );
    assert!(s.agents()[0].used.is_empty());
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn a_decline_filters_the_agent_for_refuse_seconds() {
    let (mut s, fw, _, offer) = setup();
    let mut fx = Vec::new();
    let req = Decline {
        offer_ids: vec![offer.offer_id],
        refuse: Some(Duration::from_secs(10)),
    };
    s.decline(fw, req, &at(2), &mut fx).unwrap();
    assert_eq!(
        fx,
        [
            Effect::Offer(OfferEvent::OfferDeclined(outcome(&offer, &[], None))),
            Effect::Allocate,
        ]
    );
    let mut fx = Vec::new();
    assert_eq!(s.allocate(&at(3), &mut fx), 0);
    assert_eq!(fx, []);
    assert_eq!(s.allocate(&at(2 + 10_000), &mut fx), 1);
    assert_eq!(s.offers(None, None)[0].offer_id, offer_id(2));
}

#[test]
fn removing_a_framework_kills_its_tasks_and_ends_its_stream() {
    let (mut s, fw, agent, offer) = setup();
    launch_a(&mut s, fw, agent, &offer);
    let mut fx = Vec::new();
    s.remove_framework(fw, "bye", &mut fx).unwrap();
    assert_eq!(
        fx,
        [
            Effect::Kill {
                agent_id: agent,
                framework_id: fw,
                endpoint: "http://127.0.0.1:1".into(),
                task_id: "a".parse().unwrap(),
            },
            Effect::Persist(crate::records::Change::RemoveFramework(fw)),
            Effect::ToFramework(
                fw,
                FrameworkEvent::Error {
                    message: "framework removed: bye".into()
                }
            ),
            Effect::CloseStream(fw),
            Effect::Allocate,
        ]
    );
    assert!(s.agents()[0].used.is_empty());
    assert_eq!(
        s.ledger.allocator().agent_free(agent),
        Some("cpus=4,mem=100".parse().unwrap())
    );
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn an_operator_kill_sends_the_kill_and_refuses_unknown_and_ended_tasks() {
    let (mut s, fw, agent, offer) = setup();
    launch_a(&mut s, fw, agent, &offer);
    // Unknown task, unknown framework: refused, nothing sent.
    let nope: TaskId = "nope".parse().unwrap();
    let err = check(
        &mut s,
        |s, fx| s.operator_kill(fw, nope.clone(), fx),
        vec![],
    );
    assert_eq!(err, Err(StateError::UnknownTask(nope)));
    let stranger = FrameworkId::new();
    let err = check(
        &mut s,
        |s, fx| s.operator_kill(stranger, "a".parse().unwrap(), fx),
        vec![],
    );
    assert_eq!(err, Err(StateError::UnknownFramework(stranger)));
    // A live task: the kill goes to its agent, and the answer is the task as it is now.
    let info = check(
        &mut s,
        |s, fx| s.operator_kill(fw, "a".parse().unwrap(), fx),
        vec![kill(agent, fw, "a")],
    )
    .unwrap();
    assert_eq!(
        (info.framework_id, info.agent_id, info.state),
        (fw, agent, TaskState::Staging)
    );
    // Once it ended, there is nothing to kill: 409, nothing sent, its status not sent again.
    let mut done = running("a", fw, agent, Some("cpus=1,mem=10"));
    done.state = TaskState::Killed;
    s.agent_status(agent, done, &at(3), &mut Vec::new())
        .unwrap();
    let err = check(
        &mut s,
        |s, fx| s.operator_kill(fw, "a".parse().unwrap(), fx),
        vec![],
    );
    assert_eq!(
        err,
        Err(StateError::TaskTerminal {
            task: "a".parse().unwrap(),
            state: TaskState::Killed
        })
    );
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn a_lost_agent_loses_its_tasks_with_a_status_made_by_the_coordinator() {
    let (mut s, fw, agent, offer) = setup();
    launch_a(&mut s, fw, agent, &offer);
    let mut fx = Vec::new();
    s.lose_agent(agent, &at(3), &mut fx);
    let lost = TaskStatus {
        task_id: "a".parse().unwrap(),
        framework_id: fw,
        agent_id: agent,
        state: TaskState::Lost,
        message: Some("agent lost: it missed its heartbeats".into()),
        exit_code: None,
        update_id: update_id(2),
        timestamp: at(3).wall,
        resources: Some("cpus=1,mem=10".parse().unwrap()),
        reason: None,
        usage: None,
        gpu_devices: None,
        healthy: None,
    };
    assert_eq!(
        fx,
        [
            Effect::ToFramework(fw, FrameworkEvent::Update { status: lost }),
            Effect::Allocate,
        ]
    );
    assert!(s.ledger.framework(fw).used.is_empty());
    assert_eq!(s.ledger_mismatches(), 0);
}

#[test]
fn books_that_drift_are_reported_not_floored_silently() {
    let (mut s, fw, agent, offer) = setup();
    launch_a(&mut s, fw, agent, &offer);
    // A bug elsewhere releases the task's resources behind the task's back...
    s.ledger
        .release(fw, agent, &"cpus=1,mem=10".parse().unwrap(), None);
    assert_eq!(s.ledger_mismatches(), 0);
    // ...so when the task ends, releasing them again does not match the books.
    let finished = TaskStatus {
        state: TaskState::Finished,
        update_id: update_id(100),
        ..s.tasks[&(fw, "a".parse().unwrap())].latest_status()
    };
    s.agent_status(agent, finished, &at(3), &mut Vec::new())
        .unwrap();
    assert!(s.ledger_mismatches() > 0);
    let err = s.ledger.last_mismatch().unwrap().to_string();
    assert!(err.contains("release"), "{err}");
    // Nothing went below zero.
    assert!(s.agents()[0].used.is_empty());
    assert!(s.frameworks()[0].used.is_empty());
}

#[test]
fn a_framework_keeps_its_owner_through_a_restart_and_re_registration() {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let (fw, _) = s
        .register_framework(
            FrameworkRegistration {
                owner: Some("team-a".into()),
                ..registration("f", "eng", None, None)
            },
            &at(0),
            &mut fx,
        )
        .unwrap();
    assert_eq!(s.framework_owner(fw), Some(Some("team-a")));
    assert_eq!(s.frameworks_owned_by("team-a"), 1);
    let mut t = new_books(&Settings::default());
    t.restore(snapshot_of(&persisted(&fx)), &at(0));
    assert_eq!(t.framework_owner(fw), Some(Some("team-a")));
    // Re-registering without an owner (authentication off) keeps it.
    let mut fx = Vec::new();
    t.register_framework(registration("f", "eng", None, Some(fw)), &at(1), &mut fx)
        .unwrap();
    assert_eq!(t.framework_owner(fw), Some(Some("team-a")));
    assert_eq!(t.framework_owner(FrameworkId::new()), None);
}

#[test]
fn a_history_sample_counts_tasks_resources_offers_and_shares() {
    let (mut s, fw, agent, offer) = setup();
    let before = s.history_sample();
    assert_eq!(before.outstanding_offers, 1);
    assert_eq!(before.agents.get("active"), Some(&1));
    let cpus = before.resources["cpus"];
    assert_eq!((cpus.total, cpus.used, cpus.offered), (4.0, 0.0, 4.0));
    let mut fx = Vec::new();
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=1,mem=10")],
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, req, &at(2), &mut fx).unwrap();
    let after = s.history_sample();
    assert_eq!(after.outstanding_offers, 0);
    assert_eq!(after.tasks.get("staging"), Some(&1));
    let cpus = after.resources["cpus"];
    assert_eq!((cpus.total, cpus.used, cpus.offered), (4.0, 1.0, 0.0));
    assert_eq!(after.frameworks.get(&fw.to_string()), Some(&0.25));
    assert_eq!(after.roles.get("eng"), Some(&0.25));
    // The same books in `/metrics`.
    assert_eq!(s.gauges().resources, after.resources);
}

#[test]
fn a_sample_keeps_only_the_largest_shares() {
    let (mut s, _, _, _) = setup();
    let mut fx = Vec::new();
    for i in 0..(SAMPLE_MAX_SHARES + 8) {
        s.register_framework(
            registration(&format!("f{i}"), &format!("r{i}"), None, None),
            &at(0),
            &mut fx,
        )
        .unwrap();
    }
    let sample = s.history_sample();
    assert_eq!(sample.frameworks.len(), SAMPLE_MAX_SHARES);
    assert_eq!(sample.roles.len(), SAMPLE_MAX_SHARES);
}

#[test]
fn agent_pages_and_an_agents_tasks() {
    let (mut s, fw, agent, offer) = setup();
    let mut fx = Vec::new();
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![
            task("a", agent, "cpus=1,mem=10"),
            task("b", agent, "cpus=1,mem=10"),
        ],
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, req, &at(2), &mut fx).unwrap();
    let (page, total) = s.agent_page(0, 10);
    assert_eq!((page.len(), total), (1, 1));
    assert_eq!(page[0].agent_id, agent);
    assert_eq!(s.agent_page(1, 10), (vec![], 1));
    let (tasks, count) = s.agent_tasks(agent, 1);
    assert_eq!((tasks.len(), count), (1, 2));
    assert!(tasks[0].contains("\"task_id\":\"a\""), "{}", tasks[0]);
    assert_eq!(s.agent_tasks(AgentId::new(), 10), (vec![], 0));
    assert_eq!(
        s.agent(agent).map(|a| a.used),
        Some("cpus=2,mem=20".parse().unwrap())
    );
    assert!(s.agent(AgentId::new()).is_none());
}

/// The registry's record of agent `id` as [`reregister`] registers it, last seen at 0.
fn stored(id: AgentId) -> crate::records::StoredAgent {
    crate::records::StoredAgent {
        id,
        hostname: "h".into(),
        endpoint: "http://127.0.0.1:1".into(),
        last_seen: at(0).wall,
        drain_deadline: None,
    }
}

#[test]
fn an_agent_is_written_to_the_registry_only_when_what_is_kept_of_it_changes() {
    use crate::records::{Change, Snapshot};
    let register = |s: &mut State, reg: AgentRegistration, now: u64| {
        let kept = reg.agent_id.and_then(|id| s.kept_agent(id));
        let (id, _) = s.register_agent(reg, &at(now), &mut Vec::new()).unwrap();
        s.stored_agent(id, kept.as_ref(), &at(now))
    };
    let mut s = new_books(&Settings::default());
    let agent = AgentId::new();
    // New: written, with when it registered.
    let first = register(&mut s, reregister(agent, "cpus=4", vec![]), 1_000);
    assert!(
        matches!(&first, Some(Change::PutAgent(a)) if a.id == agent && a.last_seen == at(1_000).wall)
    );
    // Again with the same hostname and endpoint (other resources): nothing to write.
    assert_eq!(
        register(&mut s, reregister(agent, "cpus=8", vec![]), 2_000),
        None
    );
    // Another endpoint: written.
    let mut moved = reregister(agent, "cpus=8", vec![]);
    moved.endpoint = "http://127.0.0.1:2".into();
    assert!(
        matches!(register(&mut s, moved, 3_000), Some(Change::PutAgent(a)) if a.endpoint == "http://127.0.0.1:2")
    );

    // After a restart: the record loaded is what is kept; an agent back unchanged writes
    // nothing, one back with another hostname is written.
    let (same, renamed) = (AgentId::new(), AgentId::new());
    let mut s = new_books(&Settings::default());
    s.restore(
        Snapshot {
            agents: vec![stored(same), stored(renamed)],
            ..Snapshot::default()
        },
        &at(1_000),
    );
    assert_eq!(s.kept_agent(same), Some(stored(same)));
    assert_eq!(
        register(&mut s, reregister(same, "cpus=4", vec![]), 1_500),
        None
    );
    let mut other = reregister(renamed, "cpus=4", vec![]);
    other.hostname = "h2".into();
    assert!(register(&mut s, other, 1_500).is_some());
    assert_eq!(s.awaited_agents(), 0);
}

#[test]
fn a_stored_agent_that_does_not_come_back_is_lost_then_forgotten_and_one_that_does_is_not() {
    use crate::records::{Change, Snapshot};
    let config = Settings::default();
    let limit = ms(config.agent_heartbeat_interval) * u64::from(config.max_missed_heartbeats);
    let retention = ms(config.lost_agent_retention);
    let (gone, back) = (AgentId::new(), AgentId::new());
    let mut s = new_books(&config);
    s.restore(
        Snapshot {
            agents: vec![stored(gone), stored(back)],
            ..Snapshot::default()
        },
        &at(1_000),
    );
    assert_eq!(s.awaited_agents(), 2);
    let mut both = vec![gone, back];
    both.sort();
    let endpoints: Vec<AgentId> = s
        .awaited_endpoints()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(endpoints, both, "the awaited agents, in id order");
    let mut fx = Vec::new();
    s.register_agent(
        reregister(back, "cpus=4,mem=100", vec![]),
        &at(1_500),
        &mut fx,
    )
    .unwrap();
    assert_eq!(s.awaited_agents(), 1);
    assert!(s.is_awaited(gone) && !s.is_awaited(back));
    assert_eq!(s.awaited_endpoints().len(), 1);
    // Within the agent timeout nothing happens; past it the other is listed lost.
    s.check_agents(&at(1_000 + limit), &mut fx);
    assert_eq!(s.awaited_agents(), 1);
    s.agent_heartbeat(back, &at(1_000 + limit)).unwrap();
    s.check_agents(&at(1_001 + limit), &mut fx);
    assert_eq!(s.awaited_agents(), 0);
    let states: Vec<_> = s
        .agents()
        .into_iter()
        .map(|a| (a.agent_id, a.state))
        .collect();
    assert!(states.contains(&(gone, "lost".to_string())), "{states:?}");
    assert!(states.contains(&(back, "active".to_string())), "{states:?}");
    // After the retention it is forgotten, in the books and the registry.
    let mut fx = Vec::new();
    s.agent_heartbeat(back, &at(2_002 + limit + retention))
        .unwrap();
    s.check_agents(&at(2_002 + limit + retention), &mut fx);
    assert_eq!(fx, vec![Effect::Persist(Change::RemoveAgent(gone))]);
    assert!(s.agents().iter().all(|a| a.agent_id != gone));
}

/// The `gpu_resources` capability is kept in the registry: a restored framework is still offered
/// GPU agents under gating, and one without it is still held back from them.
#[test]
fn the_gpu_capability_survives_a_restore() {
    let mut s = new_books(&Settings::default());
    let mut fx = Vec::new();
    let mut req = registration("gpu", "eng", Some(10.0), None);
    req.gpu_resources = true;
    let (gpu, _) = s.register_framework(req, &at(0), &mut fx).unwrap();
    let (plain, _) = s
        .register_framework(
            registration("plain", "eng", Some(10.0), None),
            &at(0),
            &mut fx,
        )
        .unwrap();
    let mut t = new_books(&Settings::default());
    t.restore(snapshot_of(&persisted(&fx)), &at(0));
    let caps = |st: &State, id| {
        st.frameworks()
            .into_iter()
            .find(|f| f.framework_id == id)
            .unwrap()
            .capabilities
    };
    assert_eq!(caps(&t, gpu), vec!["gpu_resources".to_string()]);
    assert!(caps(&t, plain).is_empty());
    let agent = AgentId::new();
    let mut fx = Vec::new();
    t.register_agent(reregister(agent, "cpus=4,gpus=1", vec![]), &at(1), &mut fx)
        .unwrap();
    assert_eq!(t.explain(gpu, &at(2)).unwrap().agents.gpu_gated, 0);
    assert_eq!(t.explain(plain, &at(2)).unwrap().agents.gpu_gated, 1);
}

#[test]
fn a_role_update_is_checked_in_full_persisted_and_restored() {
    use protocol::messages::SetWeight;
    let (mut s, _fw, _agent, _offer) = setup();
    let eng: RolePath = "eng".parse().unwrap();
    let req = |body: &str| serde_json::from_str::<SetWeight>(body).unwrap();
    let refused = |s: &State, body: &str, field: &str| match s.plan_role_update(&eng, &req(body)) {
        Err(StateError::InvalidQuota { field: f, .. }) => assert_eq!(f, field, "{body}"),
        other => panic!("{body}: {other:?}"),
    };
    refused(
        &s,
        r#"{"guarantee": {"cpus": 2}, "limit": {"cpus": 1}}"#,
        "limit.cpus",
    );
    refused(&s, r#"{"weight": 2, "limit": {"fpga": 1}}"#, "limit.fpga");
    refused(&s, r#"{}"#, "body");
    assert_eq!(s.role_quota(&eng), crate::records::StoredQuota::default());

    let body = req(r#"{"weight": 2, "guarantee": {"cpus": 1}, "limit": {"cpus": 2}}"#);
    let changes = s.plan_role_update(&eng, &body).unwrap();
    assert_eq!(changes.len(), 2, "{changes:?}");
    let mut fx = Vec::new();
    s.apply_role_update(&eng, &body, &mut fx);
    assert_eq!(fx, vec![Effect::Allocate]);
    let want = crate::records::StoredQuota {
        guarantee: Some("cpus=1".parse().unwrap()),
        limit: Some("cpus=2".parse().unwrap()),
    };
    assert_eq!(s.role_quota(&eng), want);
    // The limit merged with the stored guarantee: a limit below it is refused.
    refused(&s, r#"{"limit": {"cpus": 0.5}}"#, "limit.cpus");

    let mut restored = new_books(&Settings::default());
    restored.restore(snapshot_of(&changes), &at(0));
    assert_eq!(restored.role_quota(&eng), want);
    let node = restored.roles();
    let eng_node = node.children.iter().find(|c| c.path == "eng").unwrap();
    assert_eq!(eng_node.weight, 2.0);
    assert_eq!(eng_node.limit, want.limit);
}

#[test]
fn standard_and_declared_resources_take_quotas_before_any_agent_joins() {
    use protocol::messages::SetWeight;
    let eng: RolePath = "eng".parse().unwrap();
    let req = |body: &str| serde_json::from_str::<SetWeight>(body).unwrap();
    let empty = new_books(&Settings::default());
    for name in crate::STANDARD_RESOURCES {
        let body = format!(r#"{{"guarantee": {{"{name}": 1}}}}"#);
        assert!(empty.plan_role_update(&eng, &req(&body)).is_ok(), "{name}");
    }
    match empty.plan_role_update(&eng, &req(r#"{"limit": {"fpga": 1}}"#)) {
        Err(StateError::InvalidQuota { field, reason }) => {
            assert_eq!(field, "limit.fpga");
            assert!(reason.contains("known_resources"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let declared = new_books(&Settings {
        known_resources: vec![protocol::ResourceName::new("fpga").unwrap()],
        ..Settings::default()
    });
    assert!(declared
        .plan_role_update(&eng, &req(r#"{"limit": {"fpga": 1}}"#))
        .is_ok());
}

#[test]
fn a_task_lost_to_an_unreachable_launch_takes_the_terminal_state_its_agent_reports() {
    let (mut s, fw, agent, offer) = setup();
    let mut fx = Vec::new();
    let req = Accept {
        offer_ids: vec![offer.offer_id],
        tasks: vec![task("a", agent, "cpus=1,mem=10")],
        refuse: Some(Duration::ZERO),
    };
    s.accept(fw, req, &at(2), &mut fx).unwrap();
    let id: TaskId = "a".parse().unwrap();
    // The launch could not reach the agent (it died while being called): lost, a guess.
    s.launch_failed(
        fw,
        std::slice::from_ref(&id),
        TaskState::Lost,
        "agent unreachable",
        &at(3),
        &mut fx,
    );
    assert_eq!(
        s.tasks.get(&(fw, id.clone())).unwrap().state(),
        TaskState::Lost
    );
    // The agent had journaled the launch; restarted, it reports the task failed.
    let mut failed = running("a", fw, agent, Some("cpus=1,mem=10"));
    failed.state = TaskState::Failed;
    failed.message = Some("the agent restarted before the task's process started".into());
    check(
        &mut s,
        |s, fx| {
            s.register_agent(
                reregister(agent, "cpus=4,mem=100", vec![failed.clone()]),
                &at(4),
                fx,
            )
            .unwrap()
        },
        vec![
            Effect::ToFramework(
                fw,
                FrameworkEvent::Update {
                    status: failed.clone(),
                },
            ),
            Effect::Allocate,
        ],
    );
    assert_eq!(
        s.tasks.get(&(fw, id.clone())).unwrap().state(),
        TaskState::Failed
    );
    // It holds nothing, and a second report changes nothing more.
    assert!(s.agents()[0].used.is_empty());
    check(
        &mut s,
        |s, fx| s.apply_reported_status(agent, failed, &at(5), fx),
        vec![],
    );
}

#[test]
fn unacknowledged_names_only_updates_still_pending_in_the_order_asked() {
    let (mut s, fw, agent, offer) = setup();
    let mut fx = Vec::new();
    launch_each(&mut s, fw, agent, &offer, &["a", "b", "c"]);
    let a = finish(&mut s, fw, agent, "a", false);
    let b = finish(&mut s, fw, agent, "b", true);
    let c_running = running("c", fw, agent, None);
    s.agent_status(agent, c_running.clone(), &at(12), &mut fx)
        .unwrap();
    let mut c_done = running("c", fw, agent, None);
    c_done.state = TaskState::Finished;
    s.agent_status(agent, c_done.clone(), &at(13), &mut fx)
        .unwrap();
    let got = s.unacknowledged(
        fw,
        &[
            c_done.update_id,
            b.update_id,
            c_running.update_id,
            UpdateId::new(),
            a.update_id,
        ],
    );
    // b was acknowledged, c's `running` was superseded by its `finished`, one id is unknown.
    assert_eq!(got, vec![c_done, a]);
    assert!(s
        .unacknowledged(FrameworkId::new(), &[b.update_id])
        .is_empty());
}
