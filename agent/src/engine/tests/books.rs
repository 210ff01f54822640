//! Journaling, acknowledgements, retention.

use super::*;

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
            Command::Spawn(key("a")),
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
        boot_id: None,
    };
    let fx = rig.at(3, |c, now, out| {
        c.started(&key("a"), Some(process), now, out)
    });
    let a2 = rig.status("a", TaskState::Running, 2);
    assert_eq!(
        fx,
        [
            Command::Journal {
                records: vec![Record::Started {
                    framework_id: Some(rig.fw),
                    task_id: id("a"),
                    pid: 77,
                    start_time: None,
                    boot_id: None
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
    rig.at(5, |c, now, out| {
        c.exited(&key("a"), Exit::Code(0), now, out)
    });
    rig.at(6, reply(Ok(())));
    rig.launch(7, &["b"]);
    rig.at(8, reply(Ok(())));
    assert!(rig.core.has_task(&key("a")));
    rig.at(9, |c, now, out| {
        c.exited(&key("b"), Exit::Code(1), now, out)
    });
    assert!(!rig.core.has_task(&key("a")));
    let listed: Vec<TaskState> = rig.core.statuses().iter().map(|s| s.state).collect();
    assert_eq!(listed, [TaskState::Failed]);
}
