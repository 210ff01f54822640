//! Launches, kills, and the rebuild from a journal.

use super::*;

#[test]
fn a_kill_terminates_then_kills_after_the_grace_period() {
    let mut rig = Rig::sim();
    rig.register();
    rig.launch(1, &["a", "b"]);
    rig.at(2, reply(Ok(())));
    let process = Process {
        pid: 4242,
        start_time: Some(1),
        boot_id: None,
    };
    rig.at(3, |c, now, out| {
        c.started(&key("a"), Some(process), now, out)
    });
    rig.at(4, reply(Ok(())));

    let fx = rig.at(10, |c, now, out| c.kill(None, &id("a"), now, out).unwrap());
    assert_eq!(
        fx,
        [
            Command::Signal {
                task: key("a"),
                process: Some(process),
                signal: Signal::Terminate
            },
            Command::SetTimer {
                at: rig.now(510).at,
                timer: Timer::KillGrace(key("a"))
            },
        ]
    );
    let fx = rig.at(510, |c, now, out| {
        c.timer(Timer::KillGrace(key("a")), now, out)
    });
    assert_eq!(
        fx,
        [Command::Signal {
            task: key("a"),
            process: Some(process),
            signal: Signal::Kill
        }]
    );
    let fx = rig.at(511, |c, now, out| {
        c.exited(&key("a"), Exit::Signal(9), now, out)
    });
    let mut killed = rig.status("a", TaskState::Killed, 4);
    killed.message = Some("killed on request".into());
    assert_eq!(fx, [rig.send(vec![killed])]);
    // Ended: a second kill and a late grace timer do nothing.
    assert_eq!(
        rig.at(512, |c, now, out| c.kill(None, &id("a"), now, out).unwrap()),
        []
    );
    assert_eq!(
        rig.at(513, |c, now, out| c.timer(
            Timer::KillGrace(key("a")),
            now,
            out
        )),
        []
    );
    rig.at(514, reply(Ok(())));

    // Killed before it started: it never starts.
    assert_eq!(
        rig.at(20, |c, now, out| c.kill(None, &id("b"), now, out).unwrap()),
        []
    );
    let mut out = Vec::new();
    assert_eq!(rig.core.take_launch(&key("b"), rig.now(21), &mut out), None);
    let mut killed = rig.status("b", TaskState::Killed, 5);
    killed.message = Some("killed before it started".into());
    rig.core.flush(rig.now(21), &mut out);
    assert_eq!(out, [rig.send(vec![killed])]);

    assert_eq!(
        rig.at(30, |c, now, out| {
            assert_eq!(
                c.kill(None, &id("nope"), now, out),
                Err(UnknownTask::Unknown(id("nope")))
            );
        }),
        []
    );
}

#[test]
fn a_restored_core_readopts_live_processes_and_reports_ended_ones() {
    let fw = FrameworkId(uuid::Uuid::from_u128(7));
    let task = |name: &str, pid: Option<u32>| ReplayedTask {
        framework_id: fw,
        spec: spec(name),
        sandbox: PathBuf::from(format!("/sb/{name}")),
        process: pid.map(|pid| Process {
            pid,
            start_time: Some(5),
            boot_id: None,
        }),
        latest: None,
        fenced: false,
    };
    let replay = Replay {
        tasks: vec![
            task("alive", Some(10)),
            task("ended", Some(11)),
            task("lost", Some(12)),
            task("unstarted", None),
        ],
        unacked: Default::default(),
        partition: Default::default(),
    };
    let rig = Rig::new(config(Journaling::Off, Retention::ForgetWhenAcked));
    let mut out = Vec::new();
    let core = Engine::restore(
        config(Journaling::Off, Retention::ForgetWhenAcked),
        Restored {
            agent_id: None,
            replay,
            journal_lines: 0,
        },
        |p, _| match p.pid {
            10 => Probe::Alive,
            11 => Probe::Ended(Some(3)),
            _ => Probe::Ended(None),
        },
        rig.now(0),
        &mut out,
    );
    let proc_of = |pid| {
        Some(Process {
            pid,
            start_time: Some(5),
            boot_id: None,
        })
    };
    assert_eq!(
        out,
        [
            Command::Watch(key("alive"), proc_of(10).unwrap()),
            Command::Signal {
                task: key("ended"),
                process: proc_of(11),
                signal: Signal::Kill
            },
            Command::Signal {
                task: key("lost"),
                process: proc_of(12),
                signal: Signal::Kill
            },
        ]
    );
    let states: Vec<(String, TaskState, Option<i32>)> = core
        .statuses()
        .into_iter()
        .map(|s| (s.task_id.to_string(), s.state, s.exit_code))
        .collect();
    assert_eq!(
        states,
        [
            ("alive".into(), TaskState::Starting, None),
            ("ended".into(), TaskState::Failed, Some(3)),
            ("lost".into(), TaskState::Lost, None),
            ("unstarted".into(), TaskState::Failed, None),
        ]
    );
    assert_eq!(core.unacknowledged(), 3);
}

#[test]
fn launches_are_all_or_nothing() {
    let mut rig = Rig::sim();
    rig.launch(0, &["a"]);
    let fw = rig.fw;
    let dup = vec![
        Launch {
            spec: spec("b"),
            sandbox: None,
        },
        Launch {
            spec: spec("a"),
            sandbox: None,
        },
    ];
    let mut out = Vec::new();
    let refused = rig.core.launch(fw, dup, rig.now(1), &mut out);
    assert_eq!(refused, Err(LaunchError::Duplicate(id("a"))));
    assert_eq!(out, []);
    assert!(!rig.core.has_task(&key("b")));
    rig.core.stop_accepting();
    assert_eq!(
        rig.core.check_launch(rig.fw, &[spec("c")]),
        Err(LaunchError::ShuttingDown)
    );
}

#[test]
fn two_frameworks_may_run_tasks_of_the_same_id() {
    let mut rig = Rig::sim();
    rig.register();
    let other = FrameworkId(uuid::Uuid::from_u128(8));
    rig.launch(1, &["web"]);
    let fx = rig.at(2, |c, now, out| {
        let launch = Launch {
            spec: spec("web"),
            sandbox: None,
        };
        c.launch(other, vec![launch], now, out).unwrap()
    });
    assert!(fx.contains(&Command::Spawn((other, id("web")))));
    assert!(rig.core.has_task(&key("web")) && rig.core.has_task(&(other, id("web"))));
    assert_eq!(rig.core.statuses().len(), 2);

    // Without a framework the kill cannot tell them apart: refused, nothing signalled.
    let fx = rig.at(3, |c, now, out| {
        assert_eq!(
            c.kill(None, &id("web"), now, out),
            Err(UnknownTask::Ambiguous(id("web")))
        );
    });
    assert!(!fx.iter().any(|c| matches!(c, Command::Signal { .. })));
    assert_eq!(
        rig.core
            .find(Some(FrameworkId(uuid::Uuid::from_u128(9))), &id("web")),
        Err(UnknownTask::Unknown(id("web")))
    );

    // Named, only that framework's task is killed.
    rig.at(4, |c, now, out| {
        c.started(&(other, id("web")), None, now, out)
    });
    let fx = rig.at(5, |c, now, out| {
        c.kill(Some(other), &id("web"), now, out).unwrap()
    });
    let signalled: Vec<&TaskKey> = fx
        .iter()
        .filter_map(|c| match c {
            Command::Signal { task, .. } => Some(task),
            _ => None,
        })
        .collect();
    assert_eq!(signalled, [&(other, id("web"))]);
}
