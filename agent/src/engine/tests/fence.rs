//! Fencing: tasks killed by the agent itself before the coordinator declares them lost, and
//! on the coordinator's order; the fence journaled and carried out again after a restart.

use super::*;

const PROCESS: Process = Process {
    pid: 4242,
    start_time: Some(1),
    boot_id: None,
};

/// Registered at 0 with a coordinator that waits 3 s for heartbeats (every 0.5 s): a task of
/// a framework that is not partition-aware is fenced 2.5 s after the last answered beat.
fn registered_with_timeout(rig: &mut Rig) {
    rig.at(0, |c, now, out| c.start(now, out));
    let reply = Reply::Registered(Ok(AgentRegistered {
        agent_id: rig.agent,
        heartbeat_interval_s: 0.5,
        agent_timeout_s: Some(3.0),
    }));
    rig.at(0, |c, now, out| c.reply(reply, now, out));
}

fn fence_timer(rig: &Rig, ms: u64) -> Command {
    Command::SetTimer {
        at: rig.now(ms).at,
        timer: Timer::Fence,
    }
}

fn terminate(task: &str) -> Command {
    Command::Signal {
        task: key(task),
        process: Some(PROCESS),
        signal: Signal::Terminate,
    }
}

#[test]
fn a_task_is_fenced_a_heartbeat_before_the_agent_timeout_without_an_answer() {
    let mut rig = Rig::sim();
    registered_with_timeout(&mut rig);
    let fx = rig.launch(1, &["a"]);
    assert!(fx.contains(&fence_timer(&rig, 2_500)), "{fx:?}");
    rig.at(2, reply(Ok(())));
    rig.at(3, |c, now, out| {
        c.started(&key("a"), Some(PROCESS), now, out)
    });
    rig.at(4, reply(Ok(())));

    // The beat sent at 500 is answered: the fence moves to 3 s.
    let epoch = 1;
    let fx = rig.at(500, |c, now, out| {
        c.timer(Timer::Heartbeat(epoch), now, out)
    });
    assert_eq!(
        fx,
        [Command::Send(Request::Heartbeat {
            agent_id: rig.agent,
            epoch
        })]
    );
    rig.at(520, |c, now, out| {
        c.reply(
            Reply::Heartbeat {
                epoch,
                result: Ok(()),
            },
            now,
            out,
        )
    });
    let fx = rig.at(2_500, |c, now, out| c.timer(Timer::Fence, now, out));
    assert_eq!(fx, [fence_timer(&rig, 3_000)], "nothing due yet");

    // No answer since: at 3 s the task is killed, SIGKILL within half a heartbeat.
    let fx = rig.at(3_000, |c, now, out| c.timer(Timer::Fence, now, out));
    assert_eq!(
        fx,
        [
            terminate("a"),
            Command::SetTimer {
                at: rig.now(3_250).at,
                timer: Timer::KillGrace(key("a"))
            },
        ]
    );
    let fx = rig.at(3_100, |c, now, out| {
        c.exited(&key("a"), Exit::Signal(15), now, out)
    });
    let mut killed = rig.status("a", TaskState::Killed, 3);
    killed.message = Some("killed on request".into());
    killed.reason = Some(protocol::task::REASON_AGENT_PARTITIONED.into());
    assert_eq!(fx, [rig.send(vec![killed])]);
    // Nothing left to fence.
    assert_eq!(
        rig.at(3_500, |c, now, out| c.timer(Timer::Fence, now, out)),
        []
    );
}

#[test]
fn a_partition_aware_frameworks_task_runs_its_partition_timeout_longer_and_none_is_fenced_without_a_timeout(
) {
    let mut rig = Rig::sim();
    registered_with_timeout(&mut rig);
    let fw = rig.fw;
    let launch = vec![Launch {
        spec: spec("a"),
        sandbox: None,
    }];
    let fx = rig.at(1, |c, now, out| {
        c.launch_partitioned(fw, launch, Some(Duration::from_secs(10)), now, out)
            .unwrap()
    });
    // 3 s + 10 s, less the margin of one heartbeat.
    assert!(fx.contains(&fence_timer(&rig, 12_500)), "{fx:?}");
    rig.at(3, |c, now, out| {
        c.started(&key("a"), Some(PROCESS), now, out)
    });
    // An early wake-up changes nothing: the timer for 12.5 s stays armed.
    assert_eq!(
        rig.at(12_499, |c, now, out| c.timer(Timer::Fence, now, out)),
        []
    );
    let fx = rig.at(12_500, |c, now, out| c.timer(Timer::Fence, now, out));
    assert_eq!(fx[0], terminate("a"));

    // A coordinator that does not say its timeout: nothing is ever fenced.
    let mut rig = Rig::sim();
    rig.register();
    let fx = rig.launch(1, &["a"]);
    assert!(
        !fx.iter().any(|c| matches!(
            c,
            Command::SetTimer {
                timer: Timer::Fence,
                ..
            }
        )),
        "{fx:?}"
    );
}

#[test]
fn a_fence_the_coordinator_orders_is_journaled_and_carried_out_again_after_a_restart() {
    let mut rig = Rig::new(config(Journaling::On, Retention::KeepTerminal(10)));
    rig.register();
    rig.launch(1, &["a"]);
    rig.at(3, |c, now, out| {
        c.started(&key("a"), Some(PROCESS), now, out)
    });
    let fw = rig.fw;
    let fx = rig.at(10, |c, now, out| {
        c.fence(Some(fw), &id("a"), now, out).unwrap()
    });
    assert_eq!(
        fx,
        [
            Command::Journal {
                records: vec![Record::Fenced {
                    framework_id: fw,
                    task_id: id("a"),
                }],
                durability: Durability::Synced,
            },
            terminate("a"),
            Command::SetTimer {
                at: rig.now(510).at,
                timer: Timer::KillGrace(key("a"))
            },
        ]
    );

    // The agent restarts before the task dies: the journal says it was fenced.
    let mut latest = rig.status("a", TaskState::Running, 2);
    latest.agent_id = AgentId(uuid::Uuid::nil());
    let replay = Replay {
        tasks: vec![ReplayedTask {
            framework_id: fw,
            spec: spec("a"),
            sandbox: PathBuf::from("/sb/a"),
            process: Some(PROCESS),
            latest: Some(latest),
            fenced: true,
        }],
        unacked: Default::default(),
        partition: Default::default(),
    };
    let mut out = Vec::new();
    Engine::restore(
        config(Journaling::On, Retention::KeepTerminal(10)),
        Restored {
            agent_id: Some(rig.agent),
            replay,
            journal_lines: 3,
        },
        |_, _| Probe::Alive,
        rig.now(20),
        &mut out,
    );
    assert_eq!(
        out,
        [
            Command::Watch(key("a"), PROCESS),
            terminate("a"),
            Command::SetTimer {
                at: rig.now(520).at,
                timer: Timer::KillGrace(key("a"))
            },
        ]
    );
}
