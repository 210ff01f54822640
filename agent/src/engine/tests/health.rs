//! Health changes: a `running` update carrying `healthy`, journaled and sent like
//! every other, only when the health changes; later updates carry the latest health.

use super::*;

#[test]
fn health_changes_are_journaled_sent_once_and_carried_on() {
    let mut rig = Rig::new(config(Journaling::On, Retention::KeepTerminal(10)));
    rig.register();
    let fw = rig.fw;
    let launches = vec![Launch {
        spec: spec("a"),
        sandbox: Some(PathBuf::from("/sb/a")),
    }];
    rig.at(1, |c, now, out| c.launch(fw, launches, now, out).unwrap());
    rig.at(2, reply(Ok(())));
    let fx = rig.at(3, |c, now, out| c.health_changed(&key("a"), true, now, out));
    assert!(fx.is_empty(), "a task that is not running yet: {fx:?}");
    rig.at(4, |c, now, out| c.started(&key("a"), None, now, out));
    rig.at(5, reply(Ok(())));

    let fx = rig.at(6, |c, now, out| c.health_changed(&key("a"), true, now, out));
    let mut healthy = rig.status("a", TaskState::Running, 3);
    healthy.healthy = Some(true);
    assert_eq!(
        fx,
        [
            Command::Journal {
                records: vec![Record::Status {
                    status: healthy.clone()
                }],
                durability: Durability::Synced
            },
            rig.send(vec![healthy]),
        ]
    );
    rig.at(7, reply(Ok(())));
    let fx = rig.at(8, |c, now, out| c.health_changed(&key("a"), true, now, out));
    assert!(fx.is_empty(), "no change, no update: {fx:?}");

    let fx = rig.at(9, |c, now, out| {
        c.health_changed(&key("a"), false, now, out)
    });
    let mut unhealthy = rig.status("a", TaskState::Running, 4);
    unhealthy.healthy = Some(false);
    assert_eq!(fx.last(), Some(&rig.send(vec![unhealthy])));
    rig.at(10, reply(Ok(())));

    let fx = rig.at(11, |c, now, out| {
        c.kill(None, &id("a"), now, out).map(|_| ()).unwrap()
    });
    assert!(!fx.is_empty());
    let fx = rig.at(12, |c, now, out| {
        c.exited(&key("a"), Exit::Signal(15), now, out)
    });
    let Some(Command::Send(Request::Statuses { statuses, .. })) = fx.last() else {
        panic!("the end is sent: {fx:?}");
    };
    assert!(statuses[0].state.is_terminal());
    assert_eq!(
        statuses[0].healthy,
        Some(false),
        "the latest health carries on"
    );
    assert_eq!(rig.core.statuses()[0].healthy, Some(false));
}
