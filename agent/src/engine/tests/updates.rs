//! Sending the unacknowledged updates: batches, refusals, backoff, 404s.

use super::*;

#[test]
fn updates_go_in_order_in_batches_one_request_at_a_time() {
    let mut rig = Rig::sim();
    rig.register();
    let fx = rig.launch(1, &["a", "b", "c"]);
    let (a1, b2, c3) = (
        rig.status("a", TaskState::Starting, 1),
        rig.status("b", TaskState::Starting, 2),
        rig.status("c", TaskState::Starting, 3),
    );
    assert_eq!(
        fx,
        [
            Command::Spawn(key("a")),
            Command::Spawn(key("b")),
            Command::Spawn(key("c")),
            rig.send(vec![a1, b2]),
        ]
    );
    // While a request is in flight nothing more is sent.
    let fx = rig.at(2, |c, now, out| c.started(&key("a"), None, now, out));
    assert_eq!(fx, []);
    let fx = rig.at(3, reply(Ok(())));
    let a4 = rig.status("a", TaskState::Running, 4);
    assert_eq!(fx, [rig.send(vec![c3, a4])]);
    let fx = rig.at(4, reply(Ok(())));
    assert_eq!(fx, []);
    assert_eq!(rig.core.unacknowledged(), 0);

    // A simulated task's end is acknowledged: the task is forgotten.
    let fx = rig.at(5, |c, now, out| {
        c.exited(&key("a"), Exit::Elapsed, now, out)
    });
    let mut a5 = rig.status("a", TaskState::Finished, 5);
    a5.message = Some("finished after duration_s".into());
    a5.exit_code = Some(0);
    assert_eq!(fx, [rig.send(vec![a5])]);
    assert!(rig.core.has_task(&key("a")));
    rig.at(6, reply(Ok(())));
    assert!(!rig.core.has_task(&key("a")));
}

#[test]
fn a_refused_batch_is_sent_one_at_a_time_and_the_refused_update_dropped() {
    let mut rig = Rig::sim();
    rig.register();
    rig.launch(1, &["bad", "ok"]);
    let refused = Err(Failure::Status {
        code: 409,
        body: "no".into(),
    });
    let fx = rig.at(2, reply(refused.clone()));
    let (bad1, ok2) = (
        rig.status("bad", TaskState::Starting, 1),
        rig.status("ok", TaskState::Starting, 2),
    );
    assert_eq!(fx, [rig.send(vec![bad1])]);
    let fx = rig.at(3, reply(refused));
    assert_eq!(fx, [rig.send(vec![ok2.clone()])]);
    let fx = rig.at(4, reply(Ok(())));
    assert_eq!(fx, []);
    assert_eq!(rig.core.unacknowledged(), 0);
    // Batching resumes.
    rig.at(5, |c, now, out| c.started(&key("ok"), None, now, out));
    let fx = rig.at(6, reply(Ok(())));
    assert_eq!(fx, []);
    let fx = rig.launch(7, &["x", "y", "z"]);
    assert!(matches!(
        fx.last(),
        Some(Command::Send(Request::Statuses { statuses, .. })) if statuses.len() == 2
    ));
}

#[test]
fn a_failed_send_backs_off_and_three_404s_to_one_update_drop_it() {
    let mut rig = Rig::sim();
    rig.register();
    rig.launch(1, &["a"]);
    let fx = rig.at(2, reply(Err(Failure::Unreachable("down".into()))));
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(12).at,
            timer: Timer::RetryStatuses
        }]
    );
    // A new update during the backoff waits for it.
    let fx = rig.at(5, |c, now, out| c.started(&key("a"), None, now, out));
    assert_eq!(fx, []);
    let fx = rig.at(12, |c, now, out| c.timer(Timer::RetryStatuses, now, out));
    let (a1, a2) = (
        rig.status("a", TaskState::Starting, 1),
        rig.status("a", TaskState::Running, 2),
    );
    assert_eq!(fx, [rig.send(vec![a1.clone(), a2.clone()])]);

    // 404 to the same oldest update, registering again in between: the third time it is
    // refused (a batch is split first, then the single update dropped at the next 404).
    for round in 0..2 {
        let fx = rig.at(20, reply(Err(Failure::NotFound("?".into()))));
        assert_eq!(
            fx,
            [Command::SetTimer {
                at: rig.now(20).at,
                timer: Timer::Register
            }],
            "round {round}"
        );
        rig.at(20, |c, now, out| c.timer(Timer::Register, now, out));
        let registered = rig.registered();
        let fx = rig.at(20, |c, now, out| c.reply(registered, now, out));
        assert_eq!(fx.last(), Some(&rig.send(vec![a1.clone(), a2.clone()])));
    }
    let fx = rig.at(30, reply(Err(Failure::NotFound("?".into()))));
    assert_eq!(fx, [rig.send(vec![a1])]);
    let fx = rig.at(31, reply(Err(Failure::NotFound("?".into()))));
    assert_eq!(fx, [rig.send(vec![a2])]);
}

#[test]
fn an_update_that_finds_the_sender_idle_lingers_for_company_and_a_full_batch_does_not() {
    let mut c = config(Journaling::Off, Retention::ForgetWhenAcked);
    c.timing.status_linger = Duration::from_millis(5);
    c.max_batch = 3;
    let mut rig = Rig::new(c);
    rig.register();
    // The first update waits 5 ms (one timer), the second joins it, both go together.
    let fx = rig.launch(1, &["a"]);
    assert_eq!(
        fx,
        [
            Command::Spawn(key("a")),
            Command::SetTimer {
                at: rig.now(6).at,
                timer: Timer::StatusLinger
            },
        ]
    );
    assert_eq!(rig.launch(3, &["b"]), [Command::Spawn(key("b"))]);
    let (a1, b2) = (
        rig.status("a", TaskState::Starting, 1),
        rig.status("b", TaskState::Starting, 2),
    );
    let fx = rig.at(6, |c, now, out| c.timer(Timer::StatusLinger, now, out));
    assert_eq!(fx, [rig.send(vec![a1, b2])]);
    assert_eq!(rig.at(7, reply(Ok(()))), []);

    // A full batch does not wait.
    let fx = rig.launch(10, &["c", "d", "e"]);
    let (c3, d4, e5) = (
        rig.status("c", TaskState::Starting, 3),
        rig.status("d", TaskState::Starting, 4),
        rig.status("e", TaskState::Starting, 5),
    );
    assert_eq!(
        fx,
        [
            Command::Spawn(key("c")),
            Command::Spawn(key("d")),
            Command::Spawn(key("e")),
            rig.send(vec![c3, d4, e5]),
        ]
    );
    // An update queued behind a request in flight goes as soon as it is answered.
    assert_eq!(
        rig.at(11, |c, now, out| c.started(&key("c"), None, now, out)),
        []
    );
    let c6 = rig.status("c", TaskState::Running, 6);
    assert_eq!(rig.at(12, reply(Ok(()))), [rig.send(vec![c6])]);
    // A linger timer that fires after its batch went changes nothing.
    assert_eq!(
        rig.at(13, |c, now, out| c.timer(Timer::StatusLinger, now, out)),
        []
    );
}
