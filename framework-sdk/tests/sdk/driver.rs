//! The driver against a fake coordinator over real HTTP on loopback: registration, offers,
//! accept/decline, hold timeout, acknowledgements, suppress/revive, reconnection, typed errors.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::fake::probe::{status, Mode, Probe};
use crate::fake::{offer, wait_for, Fake};
use framework_sdk::{Driver, DriverConfig, DriverConfigError, SdkError};
use protocol::{FrameworkEvent, FrameworkId, TaskState};
use tokio::task::JoinHandle;

pub(crate) const WITHIN: Duration = Duration::from_secs(5);

pub(crate) fn config(fake: &Fake) -> DriverConfig {
    let mut c = DriverConfig::new(fake.url.clone(), "probe", "eng/batch".parse().unwrap());
    c.offer_hold_timeout = Duration::from_millis(200);
    c.revive_interval = Duration::from_millis(50);
    c.reconnect_backoff_min = Duration::from_millis(10);
    c.reconnect_backoff_max = Duration::from_millis(50);
    c.request_timeout = Duration::from_secs(2);
    c
}

/// Starts a driver and waits until its stream is open; returns the framework id.
pub(crate) async fn start(
    fake: &Fake,
    probe: Probe,
) -> (FrameworkId, JoinHandle<Result<Probe, SdkError>>) {
    start_with(fake, probe, config(fake)).await
}

pub(crate) async fn start_with(
    fake: &Fake,
    probe: Probe,
    config: DriverConfig,
) -> (FrameworkId, JoinHandle<Result<Probe, SdkError>>) {
    let driver = Driver::new(config, probe).unwrap();
    let handle = tokio::spawn(driver.run());
    wait_for(WITHIN, "stream open", || {
        fake.recorded(|r| r.streams_opened == 1)
    })
    .await;
    wait_for(WITHIN, "registered callback", || has(fake, "registered")).await;
    (fake.id(), handle)
}

pub(crate) fn has(fake: &Fake, prefix: &str) -> bool {
    fake.log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.starts_with(prefix))
}

pub(crate) fn count(fake: &Fake, line: &str) -> usize {
    fake.log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| *l == line)
        .count()
}

fn position(fake: &Fake, line: &str) -> Option<usize> {
    fake.log.lock().unwrap().iter().position(|l| l == line)
}

pub(crate) async fn stop(
    fake: &Fake,
    id: FrameworkId,
    handle: JoinHandle<Result<Probe, SdkError>>,
) -> Probe {
    assert!(fake.push(FrameworkEvent::Update {
        status: status(id, "stop", TaskState::Finished)
    }));
    tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn registers_and_answers_offers_with_accepts_and_declines() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 1)).await;
    let registration = fake.recorded(|r| r.registrations[0].clone());
    assert_eq!(registration.name, "probe");
    assert_eq!(registration.role.as_str(), "eng/batch");
    assert_eq!(
        registration.failover_timeout_s,
        Some(3600.0),
        "the documented default"
    );
    assert_eq!(registration.framework_id, None);

    let (a, b) = (
        offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"),
        offer(id, "cpus=1,mem=1", "cpus=8,mem=2048"),
    );
    let (a_id, b_id) = (a.offer_id, b.offer_id);
    assert!(fake.push(FrameworkEvent::Offers { offers: vec![a, b] }));
    wait_for(WITHIN, "accept and decline", || {
        fake.recorded(|r| r.accepts.len() == 1 && r.declines.len() == 1)
    })
    .await;
    let (accept, decline) = fake.recorded(|r| (r.accepts[0].clone(), r.declines[0].clone()));
    assert_eq!(accept.offer_ids, vec![a_id]);
    assert_eq!(accept.tasks.len(), 1);
    assert_eq!(accept.tasks[0].task_id.as_str(), "t1");
    assert_eq!(accept.refuse_seconds, Some(5.0));
    assert_eq!(decline.offer_ids, vec![b_id]);
    assert_eq!(
        decline.refuse_seconds,
        Some(30.0),
        "the SDK's longer filter"
    );

    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.launched, 1);
    assert_eq!(
        fake.recorded(|r| r.unregisters),
        1,
        "stop unregisters by default"
    );
}

#[tokio::test]
async fn unanswered_offers_are_declined_after_the_hold_timeout() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Hold, 1)).await;
    let held = offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048");
    let held_id = held.offer_id;
    let pushed_at = std::time::Instant::now();
    assert!(fake.push(FrameworkEvent::Offers { offers: vec![held] }));
    wait_for(WITHIN, "offer seen", || has(&fake, "offers 1")).await;
    wait_for(WITHIN, "hold-timeout decline", || {
        fake.recorded(|r| r.declines.len() == 1)
    })
    .await;
    assert!(
        pushed_at.elapsed() >= Duration::from_millis(200),
        "not before the timeout"
    );
    assert_eq!(
        fake.recorded(|r| r.declines[0].offer_ids.clone()),
        vec![held_id]
    );

    // A rescinded offer is forgotten: no decline for it later.
    let gone = offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048");
    let gone_id = gone.offer_id;
    assert!(fake.push(FrameworkEvent::Offers { offers: vec![gone] }));
    assert!(fake.push(FrameworkEvent::Rescind { offer_id: gone_id }));
    wait_for(WITHIN, "rescind seen", || {
        has(&fake, &format!("rescinded {gone_id}"))
    })
    .await;
    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.launched, 0);
    assert_eq!(fake.recorded(|r| r.declines.len()), 1);
}

#[tokio::test]
async fn updates_are_acknowledged_after_the_scheduler_saw_them() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 0)).await;
    let update = status(id, "t7", TaskState::Running);
    let update_id = update.update_id;
    assert!(fake.push(FrameworkEvent::Update { status: update }));
    wait_for(WITHIN, "ack", || fake.recorded(|r| !r.acks.is_empty())).await;
    let ack = fake.recorded(|r| r.acks[0].clone());
    assert_eq!((ack.task_id.as_str(), ack.update_id), ("t7", update_id));
    let seen = position(&fake, "status t7 running").unwrap();
    let acked = position(&fake, "ack t7").unwrap();
    assert!(seen < acked, "acknowledged before the scheduler saw it");
    stop(&fake, id, handle).await;
}

/// Pushes `n` updates one at a time, each after the scheduler saw the one before (so each
/// arrives in its own chunk of the stream), and waits until all are acknowledged.
async fn push_updates_one_by_one(fake: &Fake, id: FrameworkId, n: usize) {
    for i in 0..n {
        let task = format!("u{i}");
        assert!(fake.push(FrameworkEvent::Update {
            status: status(id, &task, TaskState::Running)
        }));
        wait_for(WITHIN, "update seen", || {
            has(fake, &format!("status {task} running"))
        })
        .await;
    }
    wait_for(WITHIN, "all acknowledged", || {
        fake.recorded(|r| r.acks.len() == n)
    })
    .await;
}

#[tokio::test]
async fn acknowledgements_of_separate_chunks_go_together_within_the_ack_delay() {
    let fake = Fake::start().await;
    let mut c = config(&fake);
    c.ack_delay = Duration::from_millis(500);
    let (id, handle) = start_with(&fake, Probe::new(&fake, Mode::Launch, 0), c).await;
    let started = std::time::Instant::now();
    push_updates_one_by_one(&fake, id, 4).await;
    assert_eq!(
        fake.recorded(|r| r.ack_requests),
        1,
        "one request for all four"
    );
    // Sent once the delay after the first had passed, not before.
    assert!(started.elapsed() >= Duration::from_millis(500));
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_zero_ack_delay_acknowledges_after_every_chunk() {
    let fake = Fake::start().await;
    let mut c = config(&fake);
    c.ack_delay = Duration::ZERO;
    let (id, handle) = start_with(&fake, Probe::new(&fake, Mode::Launch, 0), c).await;
    push_updates_one_by_one(&fake, id, 3).await;
    assert_eq!(fake.recorded(|r| r.ack_requests), 3);
    stop(&fake, id, handle).await;
}

#[test]
fn an_ack_delay_past_one_second_is_refused_by_name() {
    let mut c = DriverConfig::new("http://127.0.0.1:1", "f", "a".parse().unwrap());
    c.ack_delay = Duration::from_secs(2);
    let e = c.validate().unwrap_err();
    assert!(matches!(e, DriverConfigError::AckDelay(_)), "{e}");
    assert!(e.to_string().starts_with("ack_delay"), "{e}");
}

#[tokio::test]
async fn a_preemption_reaches_the_scheduler_before_the_kill_update() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 0)).await;
    assert!(
        fake.push(FrameworkEvent::Preemption(protocol::preempt::Preemption {
            framework_id: id,
            task_ids: vec!["t1".parse().unwrap(), "t2".parse().unwrap()],
            deadline: protocol::now(),
            for_role: "b".into(),
        }))
    );
    let mut killed = status(id, "t1", TaskState::Killed);
    killed.reason = Some(protocol::task::REASON_PREEMPTED.into());
    assert!(fake.push(FrameworkEvent::Update { status: killed }));
    wait_for(WITHIN, "kill seen", || has(&fake, "status t1 killed")).await;
    let told = position(&fake, "preempted t1,t2 for b").unwrap();
    let kill = position(&fake, "status t1 killed").unwrap();
    assert!(told < kill);
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn suppresses_when_idle_and_revives_when_work_arrives() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 1)).await;
    assert_eq!(fake.recorded(|r| r.suppresses), 0, "work is pending");
    assert!(fake.push(FrameworkEvent::Offers {
        offers: vec![offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048")]
    }));
    wait_for(WITHIN, "suppress once idle", || {
        fake.recorded(|r| r.suppresses == 1)
    })
    .await;
    assert_eq!(fake.recorded(|r| r.revives.len()), 0);
    // The task fails: the probe wants to launch again, so the driver revives.
    assert!(fake.push(FrameworkEvent::Update {
        status: status(id, "t1", TaskState::Failed)
    }));
    wait_for(WITHIN, "revive on new work", || {
        fake.recorded(|r| r.revives.len() == 1)
    })
    .await;
    // Heartbeats and repeated updates of the same state do not cause more revives.
    assert!(fake.push(FrameworkEvent::Heartbeat {}));
    assert!(fake.push(FrameworkEvent::Update {
        status: status(id, "t1", TaskState::Running)
    }));
    wait_for(WITHIN, "second update seen", || {
        has(&fake, "status t1 running")
    })
    .await;
    stop(&fake, id, handle).await;
    assert_eq!(fake.recorded(|r| (r.suppresses, r.revives.len())), (1, 1));
}

#[tokio::test]
async fn answers_and_revives_say_how_many_tasks_are_still_wanted() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 3)).await;
    let two = || {
        vec![
            offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"),
            offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"),
        ]
    };
    // One task on each offer: one still wanted.
    assert!(fake.push(FrameworkEvent::Offers { offers: two() }));
    wait_for(WITHIN, "two launches", || {
        fake.recorded(|r| r.accepts.len() == 2)
    })
    .await;
    assert_eq!(fake.recorded(|r| r.accept_batch_pending.clone()), [Some(1)]);
    // One launched and one declined: none wanted, as both calls say.
    assert!(fake.push(FrameworkEvent::Offers { offers: two() }));
    wait_for(WITHIN, "the third launch and a decline", || {
        fake.recorded(|r| r.accepts.len() == 3 && r.declines.len() == 1)
    })
    .await;
    assert_eq!(
        fake.recorded(|r| r.accept_batch_pending.clone()),
        [Some(1), Some(0)]
    );
    assert_eq!(fake.recorded(|r| r.declines[0].pending_tasks), Some(0));
    // A task fails: the revive says the one task wanted again.
    assert!(fake.push(FrameworkEvent::Update {
        status: status(id, "t1", TaskState::Failed)
    }));
    wait_for(WITHIN, "revive on new work", || {
        fake.recorded(|r| r.revives.len() == 1)
    })
    .await;
    assert_eq!(fake.recorded(|r| r.revives[0].pending_tasks), Some(1));
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn with_offers_not_sized_to_demand_nothing_is_said() {
    let fake = Fake::start().await;
    let mut c = config(&fake);
    c.size_offers_to_demand = false;
    let (id, handle) = start_with(&fake, Probe::new(&fake, Mode::Launch, 1), c).await;
    assert!(fake.push(FrameworkEvent::Offers {
        offers: vec![
            offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"),
            offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"),
        ]
    }));
    wait_for(WITHIN, "a launch and a decline", || {
        fake.recorded(|r| r.accepts.len() == 1 && r.declines.len() == 1)
    })
    .await;
    assert!(fake.recorded(|r| r.accept_batch_pending.iter().all(Option::is_none)));
    assert_eq!(fake.recorded(|r| r.declines[0].pending_tasks), None);
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_coordinator_that_does_not_know_pending_tasks_is_answered_without_it() {
    let fake = Fake::start().await;
    fake.without_pending_tasks();
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 1)).await;
    let two = || FrameworkEvent::Offers {
        offers: vec![
            offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"),
            offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"),
        ],
    };
    assert!(fake.push(two()));
    wait_for(WITHIN, "the launch and a decline", || {
        fake.recorded(|r| r.accepts.len() == 1 && r.declines.len() == 1)
    })
    .await;
    // The first answer's calls (the accept and the decline, sent together) are refused and
    // sent again without it; later calls never carry it.
    let refused = fake.recorded(|r| r.pending_refused);
    assert!((1..=2).contains(&refused), "{refused}");
    assert!(fake.push(two()));
    wait_for(WITHIN, "the second round's declines", || {
        fake.recorded(|r| r.declines.len() == 2)
    })
    .await;
    assert_eq!(fake.recorded(|r| r.pending_refused), refused);
    assert!(fake.recorded(|r| r.declines.iter().all(|d| d.pending_tasks.is_none())));
    assert!(!has(&fake, "launch_failed"));
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn reconnects_with_the_same_framework_id_after_the_stream_drops() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 1)).await;
    fake.drop_stream();
    wait_for(WITHIN, "second stream", || {
        fake.recorded(|r| r.streams_opened == 2)
    })
    .await;
    wait_for(WITHIN, "reregistered callback", || {
        has(&fake, "registered reregistered=true")
    })
    .await;
    let second = fake.recorded(|r| r.registrations[1].clone());
    assert_eq!(second.framework_id, Some(id));
    assert!(has(&fake, "disconnected"));
    assert!(position(&fake, "disconnected") < position(&fake, "registered reregistered=true"));
    wait_for(WITHIN, "reconcile after failover", || {
        fake.recorded(|r| r.reconciles.len() == 1)
    })
    .await;
    assert!(
        fake.recorded(|r| r.reconciles[0].task_ids.is_empty()),
        "reconciles all tasks"
    );
    // The new stream works.
    assert!(fake.push(FrameworkEvent::Offers {
        offers: vec![offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048")]
    }));
    wait_for(WITHIN, "accept on the new stream", || {
        fake.recorded(|r| r.accepts.len() == 1)
    })
    .await;
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_launch_not_yet_known_after_a_failover_is_asked_about_again_not_reported_lost() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 1)).await;
    assert!(fake.push(FrameworkEvent::Offers {
        offers: vec![offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048")]
    }));
    wait_for(WITHIN, "t1 launched", || {
        fake.recorded(|r| r.accepts.len() == 1)
    })
    .await;
    // After the failover the coordinator first still awaits agents, then knows no such task:
    // the batch is refused 409, then 404, and t1 alone 404.
    fake.answer_reconcile(409, "task_not_yet_known", "agents still awaited");
    fake.answer_reconcile(404, "task_not_found", "no such task");
    fake.answer_reconcile(404, "task_not_found", "no such task");
    fake.drop_stream();
    wait_for(
        WITHIN,
        "the new stream and the reconcile of all tasks",
        || fake.recorded(|r| r.streams_opened == 2 && r.reconciles.len() == 1),
    )
    .await;
    let named = |fake: &Fake| fake.recorded(|r| r.reconciles.len()) - 1;
    let more_offers = |fake: &Fake| {
        fake.push(FrameworkEvent::Offers {
            offers: vec![offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048")],
        })
    };
    // The first offers: t1 is asked about, and not yet known.
    assert!(more_offers(&fake));
    wait_for(WITHIN, "the check at the first offers", || {
        named(&fake) == 1
    })
    .await;
    let asked = fake.recorded(|r| r.reconciles[1].task_ids.clone());
    assert_eq!(asked.iter().map(|t| t.as_str()).collect::<Vec<_>>(), ["t1"]);
    // More offers at once: not asked again before the interval, and not reported lost.
    assert!(more_offers(&fake));
    wait_for(WITHIN, "the second offers", || {
        count(&fake, "offers 1") >= 3
    })
    .await;
    assert_eq!(named(&fake), 1, "asked again too soon");
    assert!(
        !has(&fake, "status t1 lost"),
        "reported lost while not yet known"
    );
    // Offers keep coming: after the interval it is asked again, now unknown, and lost.
    wait_for(
        Duration::from_secs(10),
        "t1 asked again and reported lost",
        || {
            let _ = more_offers(&fake);
            has(&fake, "status t1 lost")
        },
    )
    .await;
    assert_eq!(named(&fake), 3, "the batch, then t1 alone");
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_silent_stream_is_treated_as_lost() {
    // No keep-alives: after `missed_heartbeats` intervals of silence the driver reconnects even
    // though the connection itself stays open.
    let fake = Fake::start_silent().await;
    let mut c = config(&fake);
    c.missed_heartbeats = 2;
    let (id, handle) = start_with(&fake, Probe::new(&fake, Mode::Launch, 0), c).await;
    wait_for(WITHIN, "reconnect after silence", || {
        fake.recorded(|r| r.streams_opened == 2)
    })
    .await;
    assert_eq!(fake.recorded(|r| r.registrations[1].framework_id), Some(id));
    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_rejected_registration_surfaces_as_a_typed_error() {
    let fake = Fake::start().await;
    fake.reject_register(
        422,
        "unknown_role",
        "role eng/batch has no weight; create it first",
    );
    let driver = Driver::new(config(&fake), Probe::new(&fake, Mode::Launch, 1)).unwrap();
    let err = tokio::time::timeout(WITHIN, driver.run())
        .await
        .unwrap()
        .err()
        .unwrap();
    match &err {
        SdkError::Rejected {
            status,
            code,
            message,
        } => {
            assert_eq!(*status, 422);
            assert_eq!(code, "unknown_role");
            assert!(message.contains("create it first"));
        }
        other => panic!("wrong error {other:?}"),
    }
    assert!(
        has(&fake, "error unknown_role"),
        "the scheduler heard about it"
    );
    assert_eq!(
        fake.recorded(|r| r.registrations.len()),
        1,
        "a 4xx is not retried"
    );
}

#[tokio::test]
async fn a_rejected_accept_hands_the_tasks_back_with_the_code() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 1)).await;
    fake.reject_accept(409, "offer_gone", "offer was rescinded");
    assert!(fake.push(FrameworkEvent::Offers {
        offers: vec![offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048")]
    }));
    wait_for(WITHIN, "launch_failed", || {
        has(&fake, "launch_failed 1 offer_gone")
    })
    .await;
    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.pending, 1, "the task went back to the queue");
}

#[tokio::test]
async fn the_stop_token_and_the_error_event_end_the_driver() {
    let fake = Fake::start().await;
    let driver = Driver::new(config(&fake), Probe::new(&fake, Mode::Hold, 1)).unwrap();
    let token = driver.stop_token();
    let handle = tokio::spawn(driver.run());
    wait_for(WITHIN, "stream open", || {
        fake.recorded(|r| r.streams_opened == 1)
    })
    .await;
    let id = fake.id();
    assert!(fake.push(FrameworkEvent::Offers {
        offers: vec![offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048")]
    }));
    wait_for(WITHIN, "offer seen", || has(&fake, "offers 1")).await;
    token.cancel();
    tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        fake.recorded(|r| r.declines.len()),
        1,
        "held offers are given back on stop"
    );
    assert_eq!(fake.recorded(|r| r.unregisters), 1);

    let fake = Fake::start().await;
    let driver = Driver::new(config(&fake), Probe::new(&fake, Mode::Hold, 1)).unwrap();
    let handle = tokio::spawn(driver.run());
    wait_for(WITHIN, "stream open", || {
        fake.recorded(|r| r.streams_opened == 1)
    })
    .await;
    assert!(fake.push(FrameworkEvent::Error {
        message: "removed by operator".into()
    }));
    let err = tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .err()
        .unwrap();
    assert!(
        matches!(err, SdkError::FrameworkRemoved(ref m) if m == "removed by operator"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_configuration_is_refused_up_front() {
    let mut c = DriverConfig::new("ftp://x", "p", "a".parse().unwrap());
    let probe = Probe {
        log: Arc::default(),
        mode: Mode::Hold,
        pending: 0,
        launched: 0,
    };
    assert!(matches!(
        Driver::new(c.clone(), probe).err(),
        Some(SdkError::InvalidConfig(_))
    ));
    c.coordinator = "http://127.0.0.1:1".into();
    c.missed_heartbeats = 0;
    let probe = Probe {
        log: Arc::default(),
        mode: Mode::Hold,
        pending: 0,
        launched: 0,
    };
    let err = Driver::new(c.clone(), probe).err().unwrap();
    assert!(err.to_string().contains("missed_heartbeats"), "{err}");
    c.missed_heartbeats = 5;
    c.offer_wait_warning = std::time::Duration::ZERO;
    let probe = Probe {
        log: Arc::default(),
        mode: Mode::Hold,
        pending: 0,
        launched: 0,
    };
    let err = Driver::new(c, probe).err().unwrap();
    assert!(err.to_string().contains("offer_wait_warning"), "{err}");
}

#[tokio::test]
async fn a_framework_forgotten_while_away_ends_the_driver() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 1)).await;
    // The coordinator tears the framework down (as after the failover timeout) and the stream
    // ends; re-registration with the old id is refused with 404.
    let client = framework_sdk::CoordinatorClient::new(&fake.url, Duration::from_secs(2)).unwrap();
    client.unregister(id).await.unwrap();
    let err = tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .err()
        .unwrap();
    assert!(matches!(err, SdkError::FrameworkRemoved(_)), "{err}");
    assert!(has(&fake, "disconnected"));
}

#[tokio::test]
async fn many_offers_are_answered_together_declines_in_one_call() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 10)).await;
    let offers: Vec<_> = (0..50)
        .map(|_| offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"))
        .collect();
    let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
    assert!(fake.push(FrameworkEvent::Offers { offers }));
    wait_for(WITHIN, "accepts and the decline", || {
        fake.recorded(|r| r.accepts.len() == 10 && !r.declines.is_empty())
    })
    .await;
    let (accepted, declines) = fake.recorded(|r| {
        let mut accepted: Vec<_> = r.accepts.iter().flat_map(|a| a.offer_ids.clone()).collect();
        accepted.sort();
        (accepted, r.declines.clone())
    });
    assert_eq!(declines.len(), 1, "one decline call for all unused offers");
    assert_eq!(declines[0].offer_ids, ids[10..].to_vec());
    let mut expected = ids[..10].to_vec();
    expected.sort();
    assert_eq!(accepted, expected, "one accept per used offer");
    assert_eq!(fake.recorded(|r| r.accept_calls), 1, "the ten in one call");
    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.launched, 10);
}

#[tokio::test]
async fn accepts_refused_in_a_batch_hand_their_tasks_back_one_by_one() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 3)).await;
    fake.reject_accept(409, "offer_not_outstanding", "offer was rescinded");
    let offers = (0..3)
        .map(|_| offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"))
        .collect();
    assert!(fake.push(FrameworkEvent::Offers { offers }));
    wait_for(WITHIN, "three launch_failed", || {
        count(&fake, "launch_failed 1 offer_not_outstanding") == 3
    })
    .await;
    assert_eq!(fake.recorded(|r| r.accept_calls), 1);
    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.pending, 3, "each task went back to the queue");
}

#[tokio::test]
async fn a_coordinator_without_batches_gets_the_accepts_one_by_one() {
    let fake = Fake::start().await;
    fake.without_accept_batches();
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Launch, 3)).await;
    let offers = (0..3)
        .map(|_| offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"))
        .collect();
    assert!(fake.push(FrameworkEvent::Offers { offers }));
    wait_for(WITHIN, "three accepts", || {
        fake.recorded(|r| r.accepts.len() == 3)
    })
    .await;
    assert_eq!(
        fake.recorded(|r| r.accept_calls),
        4,
        "the refused batch, then each alone"
    );
    let probe = stop(&fake, id, handle).await;
    assert_eq!((probe.launched, probe.pending), (3, 0));
    assert!(!has(&fake, "launch_failed"));
}

#[tokio::test]
async fn offers_held_too_long_are_declined_in_one_call() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Hold, 1)).await;
    let offers: Vec<_> = (0..5)
        .map(|_| offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"))
        .collect();
    let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
    assert!(fake.push(FrameworkEvent::Offers { offers }));
    wait_for(WITHIN, "hold-timeout decline", || {
        fake.recorded(|r| !r.declines.is_empty())
    })
    .await;
    assert_eq!(fake.recorded(|r| r.declines[0].offer_ids.clone()), ids);
    stop(&fake, id, handle).await;
    assert_eq!(fake.recorded(|r| r.declines.len()), 1);
}

#[tokio::test]
async fn run_until_stops_on_the_shutdown_future_like_stop() {
    let fake = Fake::start().await;
    let driver = Driver::new(config(&fake), Probe::new(&fake, Mode::Hold, 1)).unwrap();
    let (shutdown, signal) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(driver.run_until(signal));
    wait_for(WITHIN, "stream open", || {
        fake.recorded(|r| r.streams_opened == 1)
    })
    .await;
    let held = offer(fake.id(), "cpus=4,mem=1024", "cpus=8,mem=2048");
    let held_id = held.offer_id;
    assert!(fake.push(FrameworkEvent::Offers { offers: vec![held] }));
    wait_for(WITHIN, "offer seen", || has(&fake, "offers 1")).await;
    shutdown.send(()).unwrap();
    let probe = tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(probe.pending, 1, "the scheduler comes back");
    assert_eq!(
        fake.recorded(|r| r
            .declines
            .iter()
            .map(|d| d.offer_ids.clone())
            .collect::<Vec<_>>()),
        vec![vec![held_id]],
        "held offers are given back on shutdown"
    );
    assert_eq!(fake.recorded(|r| r.unregisters), 1);
}

#[tokio::test]
async fn declines_with_a_duration_go_out_in_one_call_with_that_filter() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::DeclineForAMinute, 1)).await;
    let offers: Vec<_> = (0..3)
        .map(|_| offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"))
        .collect();
    let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
    assert!(fake.push(FrameworkEvent::Offers { offers }));
    wait_for(WITHIN, "the decline", || {
        fake.recorded(|r| !r.declines.is_empty())
    })
    .await;
    stop(&fake, id, handle).await;
    let declines = fake.recorded(|r| r.declines.clone());
    assert_eq!(declines.len(), 1, "one call for the three offers");
    assert_eq!(declines[0].offer_ids, ids);
    assert_eq!(declines[0].refuse_seconds, Some(60.0));
}

#[tokio::test]
async fn a_gang_goes_in_one_call_across_agents() {
    let fake = Fake::start().await;
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Gang, 3)).await;
    let offers: Vec<_> = (0..4)
        .map(|_| offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"))
        .collect();
    let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
    assert!(fake.push(FrameworkEvent::Offers { offers }));
    wait_for(WITHIN, "the gang's call and the decline", || {
        fake.recorded(|r| r.gang_accepts.len() == 1 && !r.declines.is_empty())
    })
    .await;
    let gang = fake.recorded(|r| r.gang_accepts[0].clone());
    assert_eq!(gang.gang_id, "g");
    let parts: Vec<_> = gang
        .accepts
        .iter()
        .map(|a| (a.offer_ids.clone(), a.tasks.len()))
        .collect();
    assert_eq!(
        parts,
        [(vec![ids[0]], 1), (vec![ids[1]], 1), (vec![ids[2]], 1)],
        "one part per offer, each with its member"
    );
    assert_eq!(fake.recorded(|r| r.declines[0].offer_ids.clone()), [ids[3]]);
    assert_eq!(
        fake.recorded(|r| r.accept_calls),
        0,
        "no accept outside the gang"
    );
    assert!(!has(&fake, "launch_failed"));

    stop(&fake, id, handle).await;
}

#[tokio::test]
async fn a_gang_the_coordinator_refuses_comes_back_whole() {
    let fake = Fake::start().await;
    fake.reject_accept(409, "gang_exists", "gang g is already running");
    let (id, handle) = start(&fake, Probe::new(&fake, Mode::Gang, 2)).await;
    let offers = (0..2)
        .map(|_| offer(id, "cpus=4,mem=1024", "cpus=8,mem=2048"))
        .collect();
    assert!(fake.push(FrameworkEvent::Offers { offers }));
    wait_for(WITHIN, "the whole gang handed back", || {
        count(&fake, "launch_failed 2 gang_exists") == 1
    })
    .await;
    let probe = stop(&fake, id, handle).await;
    assert_eq!(probe.pending, 2, "both members back in the queue");
}
