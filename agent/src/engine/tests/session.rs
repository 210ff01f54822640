//! Registration, heartbeats, re-registration.

use super::*;

#[test]
fn registers_heartbeats_and_registers_again_after_a_404() {
    let mut rig = Rig::sim();
    let fx = rig.at(0, |c, now, out| c.start(now, out));
    assert_eq!(
        fx,
        [Command::Send(Request::Register {
            agent_id: None,
            tasks: vec![]
        })]
    );
    // A failed registration is retried after the backoff (10 ms without jitter, then 20 ms).
    let fx = rig.at(0, |c, now, out| {
        c.reply(
            Reply::Registered(Err(Failure::Unreachable("down".into()))),
            now,
            out,
        )
    });
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(10).at,
            timer: Timer::Register
        }]
    );
    rig.at(10, |c, now, out| c.timer(Timer::Register, now, out));
    let fx = rig.at(12, |c, now, out| {
        c.reply(
            Reply::Registered(Err(Failure::Unreachable("down".into()))),
            now,
            out,
        )
    });
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(32).at,
            timer: Timer::Register
        }]
    );
    rig.at(32, |c, now, out| c.timer(Timer::Register, now, out));
    let registered = rig.registered();
    let fx = rig.at(40, |c, now, out| c.reply(registered, now, out));
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(540).at,
            timer: Timer::Heartbeat(1)
        }]
    );
    assert_eq!(rig.core.agent_id(), Some(rig.agent));

    let agent_id = rig.agent;
    let fx = rig.at(540, |c, now, out| c.timer(Timer::Heartbeat(1), now, out));
    assert_eq!(
        fx,
        [Command::Send(Request::Heartbeat { agent_id, epoch: 1 })]
    );
    // A failed heartbeat keeps the beat.
    let fx = rig.at(550, |c, now, out| {
        let result = Err(Failure::Unreachable("x".into()));
        c.reply(Reply::Heartbeat { epoch: 1, result }, now, out)
    });
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(1050).at,
            timer: Timer::Heartbeat(1)
        }]
    );
    // 404: the coordinator forgot the agent; it registers again with its id and tasks.
    rig.launch(600, &["a"]);
    let fx = rig.at(1100, |c, now, out| {
        let result = Err(Failure::NotFound("unknown agent".into()));
        c.reply(Reply::Heartbeat { epoch: 1, result }, now, out)
    });
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(1100).at,
            timer: Timer::Register
        }]
    );
    let fx = rig.at(1100, |c, now, out| c.timer(Timer::Register, now, out));
    let mut a = rig.status("a", TaskState::Starting, 1);
    a.agent_id = rig.agent;
    assert_eq!(
        fx,
        [Command::Send(Request::Register {
            agent_id: Some(agent_id),
            tasks: vec![a]
        })]
    );
    // A heartbeat of the old registration is dropped.
    let fx = rig.at(1200, |c, now, out| c.timer(Timer::Heartbeat(1), now, out));
    assert_eq!(fx, []);
}

#[test]
fn a_new_leader_gets_a_registration_with_the_running_tasks() {
    let mut rig = Rig::sim();
    rig.at(0, |c, now, out| c.start(now, out));
    let registered = rig.registered();
    rig.at(1, |c, now, out| c.reply(registered, now, out));
    rig.launch(2, &["a"]);
    let agent_id = rig.agent;
    // Another coordinator answered: register again at once, with the running task.
    let fx = rig.at(10, |c, now, out| c.coordinator_changed(now, out));
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(10).at,
            timer: Timer::Register
        }]
    );
    let fx = rig.at(10, |c, now, out| c.timer(Timer::Register, now, out));
    let mut a = rig.status("a", TaskState::Starting, 1);
    a.agent_id = agent_id;
    assert_eq!(
        fx,
        [Command::Send(Request::Register {
            agent_id: Some(agent_id),
            tasks: vec![a]
        })]
    );
    // Told again while the registration is in flight: nothing more is sent.
    let fx = rig.at(11, |c, now, out| c.coordinator_changed(now, out));
    assert_eq!(fx, []);
}

#[test]
fn a_call_back_heartbeats_now_in_a_new_beat_at_most_once_a_second() {
    let mut rig = Rig::sim();
    // Before registering: a registration in flight is left alone.
    rig.at(0, |c, now, out| c.start(now, out));
    let fx = rig.at(1, |c, now, out| {
        assert!(!c.call_back(now, out));
    });
    assert_eq!(fx, []);
    // Waiting on a backoff: register now.
    rig.at(2, |c, now, out| {
        c.reply(
            Reply::Registered(Err(Failure::Unreachable("down".into()))),
            now,
            out,
        )
    });
    let fx = rig.at(3, |c, now, out| assert!(c.call_back(now, out)));
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(3).at,
            timer: Timer::Register
        }]
    );
    rig.at(3, |c, now, out| c.timer(Timer::Register, now, out));
    let registered = rig.registered();
    rig.at(4, |c, now, out| c.reply(registered, now, out));
    let agent_id = rig.agent;

    // Registered (beat 1), called back 1 s after the last call-back: a heartbeat now, in beat 2.
    let fx = rig.at(1003, |c, now, out| assert!(c.call_back(now, out)));
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(1003).at,
            timer: Timer::Heartbeat(2)
        }]
    );
    let fx = rig.at(1003, |c, now, out| c.timer(Timer::Heartbeat(2), now, out));
    assert_eq!(
        fx,
        [Command::Send(Request::Heartbeat { agent_id, epoch: 2 })]
    );
    // Beat 1's timer and a late answer of beat 1 are dropped: one heartbeat keeps going.
    assert_eq!(
        rig.at(1100, |c, now, out| c.timer(Timer::Heartbeat(1), now, out)),
        []
    );
    let late = rig.at(1100, |c, now, out| {
        c.reply(
            Reply::Heartbeat {
                epoch: 1,
                result: Ok(()),
            },
            now,
            out,
        )
    });
    assert_eq!(late, []);
    // Another call-back within the second is not acted on; after it, it is.
    let fx = rig.at(1500, |c, now, out| assert!(!c.call_back(now, out)));
    assert_eq!(fx, []);
    let fx = rig.at(2003, |c, now, out| assert!(c.call_back(now, out)));
    assert_eq!(
        fx,
        [Command::SetTimer {
            at: rig.now(2003).at,
            timer: Timer::Heartbeat(3)
        }]
    );
}
