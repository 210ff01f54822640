//! GPUs: one device, one task; refusals; the books rebuilt from a replayed journal.

use super::*;

fn gpu_config(n: usize) -> EngineConfig {
    config(Journaling::Off, Retention::ForgetWhenAcked)
        .with_gpus((0..n).map(|i| format!("GPU-{i}")).collect())
}

fn gpu_spec(task: &str, gpus: &str) -> TaskSpec {
    let mut s = spec(task);
    s.resources = format!("cpus=1,gpus={gpus}").parse().unwrap();
    s
}

fn launch(rig: &mut Rig, ms: u64, task: &str, gpus: &str) -> Vec<Command> {
    let fw = rig.fw;
    let launches = vec![Launch {
        spec: gpu_spec(task, gpus),
        sandbox: None,
    }];
    rig.at(ms, |c, now, out| c.launch(fw, launches, now, out).unwrap())
}

fn devices_of(core: &Engine, task: &str) -> Option<Vec<String>> {
    core.statuses()
        .into_iter()
        .find(|s| s.task_id.as_str() == task)
        .and_then(|s| s.gpu_devices)
}

#[test]
fn each_task_gets_its_own_devices_until_it_ends() {
    let mut rig = Rig::new(gpu_config(2));
    rig.register();
    assert!(launch(&mut rig, 1, "a", "1").contains(&Command::Spawn(key("a"))));
    assert!(launch(&mut rig, 2, "b", "1").contains(&Command::Spawn(key("b"))));
    assert_eq!(devices_of(&rig.core, "a").unwrap(), ["GPU-0"]);
    assert_eq!(devices_of(&rig.core, "b").unwrap(), ["GPU-1"]);
    assert_eq!(rig.core.gpu_devices(&key("b")), ["GPU-1"]);

    // No device left: the third fails at once, with a message, and is not started.
    let fx = launch(&mut rig, 3, "c", "1");
    assert!(!fx.contains(&Command::Spawn(key("c"))), "{fx:?}");
    let c = rig
        .core
        .statuses()
        .into_iter()
        .find(|s| s.task_id.as_str() == "c")
        .unwrap();
    assert_eq!(c.state, TaskState::Failed);
    assert_eq!(
        c.message.as_deref(),
        Some("resources.gpus: the task asks for 1 GPU(s); this agent has 0 of 2 free")
    );

    // a ends: its device is free again, and its last status still names it.
    rig.at(4, |c, now, out| c.started(&key("a"), None, now, out));
    rig.at(5, |c, now, out| {
        c.exited(&key("a"), Exit::Code(0), now, out)
    });
    assert_eq!(devices_of(&rig.core, "a").unwrap(), ["GPU-0"]);
    assert!(rig.core.gpu_devices(&key("a")).is_empty());
    launch(&mut rig, 6, "d", "1");
    assert_eq!(devices_of(&rig.core, "d").unwrap(), ["GPU-0"]);
}

#[test]
fn fractional_gpus_are_refused_and_an_agent_without_gpus_leaves_them_alone() {
    let mut rig = Rig::new(gpu_config(2));
    rig.register();
    let fx = launch(&mut rig, 1, "half", "0.5");
    assert!(!fx.contains(&Command::Spawn(key("half"))));
    let s = &rig.core.statuses()[0];
    assert_eq!(s.state, TaskState::Failed);
    assert_eq!(
        s.message.as_deref(),
        Some("resources.gpus must be a whole number of devices, got 0.5")
    );
    assert_eq!(s.gpu_devices, None);
    assert!(rig.core.gpu_devices(&key("half")).is_empty());

    // An agent that manages no GPUs (`--gpus none`): `gpus` is only a counted name, as it
    // was before GPUs were devices; a fraction is still refused.
    let mut plain = Rig::new(config(Journaling::Off, Retention::ForgetWhenAcked));
    plain.register();
    assert!(launch(&mut plain, 1, "x", "1").contains(&Command::Spawn(key("x"))));
    let s = &plain.core.statuses()[0];
    assert_eq!(
        (s.state, s.gpu_devices.clone()),
        (TaskState::Starting, None)
    );
    assert!(!plain.core.has_gpus());
    assert!(!launch(&mut plain, 2, "y", "1.5").contains(&Command::Spawn(key("y"))));
}

#[test]
fn a_restored_core_keeps_running_tasks_devices() {
    let rig = Rig::new(gpu_config(3));
    let fw = rig.fw;
    let task = |name: &str, pid: u32, devices: &[&str]| {
        let mut latest = rig.status(name, TaskState::Running, u128::from(pid));
        latest.gpu_devices = Some(devices.iter().map(|d| d.to_string()).collect());
        ReplayedTask {
            framework_id: fw,
            spec: gpu_spec(name, "1"),
            sandbox: PathBuf::from(format!("/sb/{name}")),
            process: Some(Process {
                pid,
                start_time: Some(5),
                boot_id: None,
            }),
            latest: Some(latest),
            fenced: false,
        }
    };
    let replay = Replay {
        tasks: vec![
            task("a", 10, &["GPU-0"]),
            task("b", 11, &["GPU-2"]),
            task("gone", 12, &["GPU-1"]),
        ],
        unacked: Default::default(),
        partition: Default::default(),
    };
    let mut out = Vec::new();
    let mut core = Engine::restore(
        gpu_config(3),
        Restored {
            agent_id: None,
            replay,
            journal_lines: 0,
        },
        |p, _| match p.pid {
            12 => Probe::Ended(Some(0)),
            _ => Probe::Alive,
        },
        rig.now(0),
        &mut out,
    );
    assert_eq!(core.gpu_devices(&key("a")), ["GPU-0"]);
    assert_eq!(core.gpu_devices(&key("b")), ["GPU-2"]);
    // The task that ended while the agent was down gave its device back.
    assert!(core.gpu_devices(&key("gone")).is_empty());
    let mut out = Vec::new();
    let launches = vec![
        Launch {
            spec: gpu_spec("new", "1"),
            sandbox: None,
        },
        Launch {
            spec: gpu_spec("more", "1"),
            sandbox: None,
        },
    ];
    core.launch(fw, launches, rig.now(1), &mut out).unwrap();
    assert_eq!(core.gpu_devices(&key("new")), ["GPU-1"]);
    assert!(core.gpu_devices(&key("more")).is_empty(), "none left");
}

#[test]
fn gpu_samples_go_into_the_terminal_usage() {
    let mut rig = Rig::new(gpu_config(1));
    rig.register();
    launch(&mut rig, 1, "a", "1");
    rig.at(2, |c, now, out| c.started(&key("a"), None, now, out));
    assert_eq!(
        rig.core.gpu_tasks(),
        [(key("a"), vec!["GPU-0".to_string()])]
    );
    rig.core.gpu_sample(&key("a"), 1 << 30, 40.0);
    rig.core.gpu_sample(&key("a"), 2 << 30, 60.0);
    rig.at(3, |c, now, out| {
        c.exited(&key("a"), Exit::Code(0), now, out)
    });
    let end = &rig.core.statuses()[0];
    let usage = end.usage.clone().unwrap();
    assert_eq!(usage.gpu_memory_bytes, Some(2 << 30));
    assert_eq!(usage.gpu_utilization_percent, Some(50.0));
    assert!(rig.core.gpu_tasks().is_empty());
}
