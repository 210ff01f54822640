//! The core, input by input, asserting the exact commands it emits.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use protocol::messages::AgentRegistered;
use protocol::{
    AgentId, CommandSpec, FrameworkId, Resources, TaskId, TaskSpec, TaskState, TaskStatus,
    Timestamp, UpdateId,
};

use super::*;
use crate::journal::{Record, Replay, ReplayedTask};

/// A core with a fixed clock origin, sequential update ids and no jitter.
struct Rig {
    core: Core,
    t0: Instant,
    wall: Timestamp,
    fw: FrameworkId,
    agent: AgentId,
}

fn config(journaling: Journaling, retention: Retention) -> CoreConfig {
    CoreConfig {
        timing: Timing::fast(),
        journaling,
        retention,
        max_batch: 2,
        jitter: Jitter::Off,
        update_ids: UpdateIds::Sequential(0),
    }
}

fn uid(n: u128) -> UpdateId {
    UpdateId(uuid::Uuid::from_u128(n))
}

fn id(task: &str) -> TaskId {
    TaskId::new(task).unwrap()
}

fn spec(task: &str) -> TaskSpec {
    TaskSpec {
        task_id: id(task),
        name: String::new(),
        agent_id: AgentId(uuid::Uuid::nil()),
        resources: "cpus=1".parse::<Resources>().unwrap(),
        command: CommandSpec::Shell("true".into()),
        env: Default::default(),
        duration_s: None,
    }
}

impl Rig {
    fn new(config: CoreConfig) -> Self {
        Self {
            core: Core::new(config, None),
            t0: Instant::now(),
            wall: protocol::now(),
            fw: FrameworkId(uuid::Uuid::from_u128(7)),
            agent: AgentId(uuid::Uuid::from_u128(9)),
        }
    }

    fn sim() -> Self {
        Self::new(config(Journaling::Off, Retention::ForgetWhenAcked))
    }

    fn now(&self, ms: u64) -> Now {
        Now {
            at: self.t0 + Duration::from_millis(ms),
            wall: self.wall,
        }
    }

    /// Runs one input at `ms` and returns its commands (with updates flushed, as shells do).
    fn at(&mut self, ms: u64, f: impl FnOnce(&mut Core, Now, &mut Vec<Command>)) -> Vec<Command> {
        let now = self.now(ms);
        let mut out = Vec::new();
        f(&mut self.core, now, &mut out);
        self.core.flush(now, &mut out);
        out
    }

    fn registered(&self) -> Reply {
        Reply::Registered(Ok(AgentRegistered {
            agent_id: self.agent,
            heartbeat_interval_s: 0.5,
        }))
    }

    /// Registers at time 0 (the heartbeat timer is set for 500 ms).
    fn register(&mut self) {
        self.at(0, |c, now, out| c.start(now, out));
        let reply = self.registered();
        self.at(0, |c, now, out| c.reply(reply, now, out));
    }

    fn status(&self, task: &str, state: TaskState, n: u128) -> TaskStatus {
        TaskStatus {
            task_id: id(task),
            framework_id: self.fw,
            agent_id: self.agent,
            state,
            message: None,
            exit_code: None,
            update_id: uid(n),
            timestamp: self.wall,
            resources: Some(spec(task).resources),
        }
    }

    fn launch(&mut self, ms: u64, tasks: &[&str]) -> Vec<Command> {
        let fw = self.fw;
        let launches = tasks
            .iter()
            .map(|t| Launch {
                spec: spec(t),
                sandbox: None,
            })
            .collect();
        self.at(ms, |c, now, out| c.launch(fw, launches, now, out).unwrap())
    }

    fn send(&self, statuses: Vec<TaskStatus>) -> Command {
        Command::Send(Request::Statuses {
            agent_id: self.agent,
            statuses,
        })
    }
}

fn reply(result: Result<(), Failure>) -> impl FnOnce(&mut Core, Now, &mut Vec<Command>) {
    move |c, now, out| c.reply(Reply::Statuses(result), now, out)
}

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
            Command::Spawn(id("a")),
            Command::Spawn(id("b")),
            Command::Spawn(id("c")),
            rig.send(vec![a1, b2]),
        ]
    );
    // While a request is in flight nothing more is sent.
    let fx = rig.at(2, |c, now, out| c.started(&id("a"), None, now, out));
    assert_eq!(fx, []);
    let fx = rig.at(3, reply(Ok(())));
    let a4 = rig.status("a", TaskState::Running, 4);
    assert_eq!(fx, [rig.send(vec![c3, a4])]);
    let fx = rig.at(4, reply(Ok(())));
    assert_eq!(fx, []);
    assert_eq!(rig.core.unacknowledged(), 0);

    // A simulated task's end is acknowledged: the task is forgotten.
    let fx = rig.at(5, |c, now, out| c.exited(&id("a"), Exit::Elapsed, now, out));
    let mut a5 = rig.status("a", TaskState::Finished, 5);
    a5.message = Some("finished after duration_s".into());
    a5.exit_code = Some(0);
    assert_eq!(fx, [rig.send(vec![a5])]);
    assert!(rig.core.has_task(&id("a")));
    rig.at(6, reply(Ok(())));
    assert!(!rig.core.has_task(&id("a")));
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
    rig.at(5, |c, now, out| c.started(&id("ok"), None, now, out));
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
    let fx = rig.at(5, |c, now, out| c.started(&id("a"), None, now, out));
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
fn a_kill_terminates_then_kills_after_the_grace_period() {
    let mut rig = Rig::sim();
    rig.register();
    rig.launch(1, &["a", "b"]);
    rig.at(2, reply(Ok(())));
    let process = Process {
        pid: 4242,
        start_time: Some(1),
    };
    rig.at(3, |c, now, out| {
        c.started(&id("a"), Some(process), now, out)
    });
    rig.at(4, reply(Ok(())));

    let fx = rig.at(10, |c, now, out| c.kill(&id("a"), now, out).unwrap());
    assert_eq!(
        fx,
        [
            Command::Signal {
                task_id: id("a"),
                process: Some(process),
                signal: Signal::Terminate
            },
            Command::SetTimer {
                at: rig.now(510).at,
                timer: Timer::KillGrace(id("a"))
            },
        ]
    );
    let fx = rig.at(510, |c, now, out| {
        c.timer(Timer::KillGrace(id("a")), now, out)
    });
    assert_eq!(
        fx,
        [Command::Signal {
            task_id: id("a"),
            process: Some(process),
            signal: Signal::Kill
        }]
    );
    let fx = rig.at(511, |c, now, out| {
        c.exited(&id("a"), Exit::Signal(9), now, out)
    });
    let mut killed = rig.status("a", TaskState::Killed, 4);
    killed.message = Some("killed on request".into());
    assert_eq!(fx, [rig.send(vec![killed])]);
    // Ended: a second kill and a late grace timer do nothing.
    assert_eq!(
        rig.at(512, |c, now, out| c.kill(&id("a"), now, out).unwrap()),
        []
    );
    assert_eq!(
        rig.at(513, |c, now, out| c.timer(
            Timer::KillGrace(id("a")),
            now,
            out
        )),
        []
    );
    rig.at(514, reply(Ok(())));

    // Killed before it started: it never starts.
    assert_eq!(
        rig.at(20, |c, now, out| c.kill(&id("b"), now, out).unwrap()),
        []
    );
    let mut out = Vec::new();
    assert_eq!(rig.core.take_launch(&id("b"), rig.now(21), &mut out), None);
    let mut killed = rig.status("b", TaskState::Killed, 5);
    killed.message = Some("killed before it started".into());
    rig.core.flush(rig.now(21), &mut out);
    assert_eq!(out, [rig.send(vec![killed])]);

    assert_eq!(
        rig.at(30, |c, now, out| {
            assert_eq!(c.kill(&id("nope"), now, out), Err(UnknownTask(id("nope"))));
        }),
        []
    );
}

#[test]
fn a_real_core_journals_before_it_sends_and_forgets_old_terminal_tasks() {
    let mut rig = Rig::new(config(Journaling::On, Retention::KeepTerminal(1)));
    let fx = rig.at(0, |c, now, out| c.start(now, out));
    assert_eq!(fx.len(), 1);
    let registered = rig.registered();
    let fx = rig.at(0, |c, now, out| c.reply(registered, now, out));
    assert_eq!(fx[0], Command::PersistAgentId(rig.agent));

    let fw = rig.fw;
    let sandbox = PathBuf::from("/sb/a");
    let launches = vec![Launch {
        spec: spec("a"),
        sandbox: Some(sandbox.clone()),
    }];
    let fx = rig.at(1, |c, now, out| c.launch(fw, launches, now, out).unwrap());
    let a1 = rig.status("a", TaskState::Starting, 1);
    assert_eq!(
        fx,
        [
            Command::Journal {
                records: vec![
                    Record::Launch {
                        framework_id: fw,
                        spec: spec("a"),
                        sandbox
                    },
                    Record::Status { status: a1.clone() }
                ],
                durability: Durability::Synced
            },
            Command::Spawn(id("a")),
            rig.send(vec![a1.clone()]),
        ]
    );
    let fx = rig.at(2, reply(Ok(())));
    assert_eq!(
        fx,
        [Command::Journal {
            records: vec![Record::Acked { update_id: uid(1) }],
            durability: Durability::Buffered
        }]
    );
    let process = Process {
        pid: 77,
        start_time: None,
    };
    let fx = rig.at(3, |c, now, out| {
        c.started(&id("a"), Some(process), now, out)
    });
    let a2 = rig.status("a", TaskState::Running, 2);
    assert_eq!(
        fx,
        [
            Command::Journal {
                records: vec![Record::Started {
                    task_id: id("a"),
                    pid: 77,
                    start_time: None
                }],
                durability: Durability::Buffered
            },
            Command::Journal {
                records: vec![Record::Status { status: a2.clone() }],
                durability: Durability::Synced
            },
            rig.send(vec![a2]),
        ]
    );

    // Keep one terminal task: the older one is forgotten once the newer one has ended too.
    rig.at(4, reply(Ok(())));
    rig.at(5, |c, now, out| c.exited(&id("a"), Exit::Code(0), now, out));
    rig.at(6, reply(Ok(())));
    rig.launch(7, &["b"]);
    rig.at(8, reply(Ok(())));
    assert!(rig.core.has_task(&id("a")));
    rig.at(9, |c, now, out| c.exited(&id("b"), Exit::Code(1), now, out));
    assert!(!rig.core.has_task(&id("a")));
    let listed: Vec<TaskState> = rig.core.statuses().iter().map(|s| s.state).collect();
    assert_eq!(listed, [TaskState::Failed]);
}

#[test]
fn a_restored_core_readopts_live_processes_and_reports_ended_ones() {
    let fw = FrameworkId(uuid::Uuid::from_u128(7));
    let task = |name: &str, pid: Option<u32>| ReplayedTask {
        framework_id: fw,
        spec: spec(name),
        sandbox: PathBuf::from(format!("/sb/{name}")),
        process: pid.map(|pid| (pid, Some(5))),
        latest: None,
    };
    let replay = Replay {
        tasks: vec![
            task("alive", Some(10)),
            task("ended", Some(11)),
            task("lost", Some(12)),
            task("unstarted", None),
        ],
        unacked: Default::default(),
    };
    let rig = Rig::new(config(Journaling::Off, Retention::ForgetWhenAcked));
    let mut out = Vec::new();
    let core = Core::restore(
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
        })
    };
    assert_eq!(
        out,
        [
            Command::Watch(id("alive"), proc_of(10).unwrap()),
            Command::Signal {
                task_id: id("ended"),
                process: proc_of(11),
                signal: Signal::Kill
            },
            Command::Signal {
                task_id: id("lost"),
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
    assert!(!rig.core.has_task(&id("b")));
    rig.core.stop_accepting();
    assert_eq!(
        rig.core.check_launch(&[spec("c")]),
        Err(LaunchError::ShuttingDown)
    );
}
