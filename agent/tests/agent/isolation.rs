//! Task isolation end to end: a real agent (with the `parley-launch` binary) against the fake
//! coordinator, as root with cgroups (v1 here, v2 where the machine has it). Skipped with a
//! printed reason when not root or without cgroups, unless `PARLEY_CI=1`.
//!
//! Seven probes (a 4 GiB reservation under `mem=256` finishes; touching 512 MiB
//! under `mem=64` fails with `memory_limit`; `cpus=0.5` spinning 3 s uses ≤ 2 s of CPU; ≤ 10
//! pids visible; `/tmp` private; a `setsid()` child gone after the kill; no task cgroup left),
//! and a restart with two isolated tasks running and one that ended meanwhile.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{wait_for, Fake, Server};
use agent::isolation::Cgroups;
use agent::{AgentConfig, Timing};
use protocol::{AgentId, FrameworkId, TaskState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(20);
const TOKEN: &str = "test-agent-token-0123456789";

/// The cgroups this machine offers, or why the tests cannot run here.
fn cgroups_here() -> Result<Cgroups, String> {
    if !agent::task_user::running_as_root() {
        return Err("not root".into());
    }
    Cgroups::v2(Path::new("/sys/fs/cgroup"))
        .or_else(|| Cgroups::v1(Path::new("/sys/fs/cgroup")))
        .ok_or_else(|| "no usable cgroups under /sys/fs/cgroup".into())
}

/// `Some(cgroups)` to run; `None` (after printing why) to skip, except under `PARLEY_CI=1`.
fn require_isolation(test: &str) -> Option<Cgroups> {
    match cgroups_here() {
        Ok(c) => Some(c),
        Err(why) if std::env::var("PARLEY_CI").as_deref() == Ok("1") => {
            panic!("{test}: PARLEY_CI=1 and {why}")
        }
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

struct Agent {
    url: String,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<Result<(), agent::AgentError>>,
}

impl Agent {
    async fn start(coordinator: &str, work_dir: &Path) -> Agent {
        let mut config = AgentConfig::new(coordinator, work_dir);
        config.resources = Some("cpus=2,mem=4096".parse().unwrap());
        config.attributes = agent::config::parse_attributes("rack=r1").unwrap();
        config.timing = Timing {
            kill_grace: Duration::from_millis(300),
            ..Timing::fast()
        };
        config.api_token = Some(TOKEN.into());
        config.launcher = Some(PathBuf::from(env!("CARGO_BIN_EXE_parley-launch")));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        let handle = tokio::spawn(agent::run(config, listener, stop.clone().cancelled_owned()));
        Agent { url, stop, handle }
    }

    async fn shutdown(self) {
        self.stop.cancel();
        self.handle.await.unwrap().unwrap();
    }

    async fn launch(&self, fw: FrameworkId, task_id: &str, shell: &str, resources: &str) {
        let resources: protocol::Resources = resources.parse().unwrap();
        let body = json!({"framework_id": fw, "tasks": [{
            "task_id": task_id, "agent_id": AgentId::new(), "resources": resources,
            "command": {"shell": shell}}]});
        let r = crate::common::client_with_token(TOKEN)
            .post(format!("{}/api/v1/tasks", self.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    async fn kill(&self, task_id: &str) {
        let r = crate::common::client_with_token(TOKEN)
            .post(format!("{}/api/v1/tasks/{task_id}/kill", self.url))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }

    async fn stdout(&self, task_id: &str) -> String {
        crate::common::client_with_token(TOKEN)
            .get(format!("{}/api/v1/tasks/{task_id}/stdout", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// Pids of processes whose command line contains `token`.
fn with_token(token: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(token))
        })
        .collect()
}

/// The directories of `fw`'s task cgroups in every hierarchy (`.../parley/AGENT/FW`).
fn framework_cgroups(cgroups: &Cgroups, fw: FrameworkId) -> Vec<PathBuf> {
    let bases: Vec<PathBuf> = match cgroups {
        Cgroups::V1 { base } => agent::isolation::cgroup::V1_CONTROLLERS
            .iter()
            .map(|c| base.join(c).join("parley"))
            .collect(),
        Cgroups::V2 { root } => vec![root.join("parley")],
    };
    bases
        .iter()
        .filter_map(|b| std::fs::read_dir(b).ok())
        .flat_map(|d| d.filter_map(Result::ok))
        .map(|agent_dir| agent_dir.path().join(fw.to_string()))
        .filter(|p| p.exists())
        .collect()
}

/// The task cgroup's memory limit file (v1 `memory.limit_in_bytes`, v2 `memory.max`).
fn memory_limit_of(cgroups: &Cgroups, fw: FrameworkId, task: &str) -> Option<u64> {
    let (dir, file) = match cgroups {
        Cgroups::V1 { .. } => ("memory", "memory.limit_in_bytes"),
        Cgroups::V2 { .. } => ("", "memory.max"),
    };
    framework_cgroups(cgroups, fw)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&format!("/{dir}/")) || dir.is_empty())
        .find_map(|p| std::fs::read_to_string(p.join(task).join(file)).ok())
        .and_then(|s| s.trim().parse().ok())
}

fn cpu_seconds(message: &str) -> f64 {
    let at = message.find("CPU ").unwrap() + 4;
    message[at..].split(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn the_seven_probes_hold() {
    let Some(cgroups) = require_isolation("the_seven_probes_hold") else {
        return;
    };
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(&server.url(), dir.path()).await;
    fake.wait_registered().await;
    let attrs = fake.books().registrations[0].attributes.clone();
    assert_eq!(attrs["isolation"], cgroups.name());
    let ip = agent::isolation::IP_PATHS
        .iter()
        .find(|p| Path::new(p).is_file())
        .copied();
    match ip {
        Some(_) => assert_eq!(attrs["namespaces"], "pid,mount,ipc,uts,net"),
        None => assert_eq!(attrs["namespaces"], "pid,mount,ipc,uts"),
    }
    assert_eq!(attrs["rack"], "r1", "the operator's attributes stay");

    let fw = FrameworkId::new();
    let token = format!("probe-{}", uuid::Uuid::new_v4().simple());
    let python = Path::new("/usr/bin/python3").exists();
    if python {
        agent
            .launch(
                fw,
                "reserve",
                "/usr/bin/python3 -c 'import mmap; mmap.mmap(-1, 4 << 30)'",
                "mem=256",
            )
            .await;
    } else if std::env::var("PARLEY_CI").as_deref() == Ok("1") {
        panic!("PARLEY_CI=1 and no /usr/bin/python3 for the 4 GiB reservation probe");
    } else {
        eprintln!("no /usr/bin/python3: the 4 GiB reservation probe is skipped");
    }
    agent
        .launch(
            fw,
            "hog",
            "dd if=/dev/zero of=/dev/null bs=512M count=1",
            "mem=64",
        )
        .await;
    agent
        .launch(
            fw,
            "spin",
            "timeout 3 sh -c 'while :; do :; done'; true",
            "cpus=0.5",
        )
        .await;
    agent
        .launch(
            fw,
            "pids",
            "ls /proc | grep -c '^[0-9]'; cat /proc/sys/kernel/hostname; grep CapEff /proc/self/status; ls /sys/fs/cgroup | wc -l",
            "cpus=0.1",
        )
        .await;
    agent
        .launch(
            fw,
            "tmp",
            &format!("echo secret > /tmp/{token} && cat /tmp/{token}"),
            "cpus=0.1",
        )
        .await;
    agent
        .launch(
            fw,
            "escape",
            &format!("setsid sh -c 'sleep 1000; echo {token}' & sleep 1000"),
            "cpus=0.1",
        )
        .await;

    match ip {
        Some(ip) => {
            let shell = format!("grep -c : /proc/net/dev; {ip} -o link show up");
            let body = json!({"framework_id": fw, "tasks": [{
                "task_id": "net", "agent_id": AgentId::new(),
                "resources": {"cpus": 0.1}, "command": {"shell": shell},
                "isolation": {"network": "loopback"}}]});
            let r = crate::common::client_with_token(TOKEN)
                .post(format!("{}/api/v1/tasks", agent.url))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
            fake.wait_state("net", TaskState::Finished).await;
            let out = agent.stdout("net").await;
            let mut lines = out.lines();
            assert_eq!(lines.next(), Some("1"), "only lo: {out}");
            let lo = lines.next().unwrap_or_default();
            assert!(lo.contains("lo:") && lo.contains("UP"), "lo is up: {out}");
        }
        None if std::env::var("PARLEY_CI").as_deref() == Ok("1") => {
            panic!("PARLEY_CI=1 and no ip binary (iproute2) for the loopback network probe")
        }
        None => eprintln!("no ip binary (iproute2): the loopback network probe is skipped"),
    }
    // isolation.user: the task runs as that user, without capabilities.
    let body = json!({"framework_id": fw, "tasks": [{
        "task_id": "user", "agent_id": AgentId::new(), "resources": {"cpus": 0.1},
        "command": {"shell": "id -u; grep CapEff /proc/self/status; echo x > mine"},
        "isolation": {"user": "65534"}}]});
    let r = crate::common::client_with_token(TOKEN)
        .post(format!("{}/api/v1/tasks", agent.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    fake.wait_state("user", TaskState::Finished).await;
    let out = agent.stdout("user").await;
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("65534"), "{out}");
    assert!(lines.next().unwrap().ends_with("0000000000000000"), "{out}");

    if python {
        fake.wait_state("reserve", TaskState::Finished).await;
    }
    fake.wait_state("hog", TaskState::Failed).await;
    let hog = fake.status_of("hog", TaskState::Failed).unwrap();
    assert_eq!(hog.reason.as_deref(), Some("memory_limit"), "{hog:?}");
    let usage = hog
        .usage
        .clone()
        .expect("an isolated task's end carries its usage");
    assert!(
        usage
            .peak_memory_bytes
            .is_some_and(|p| p > 32 << 20 && p <= 64 << 20),
        "{usage:?}"
    );
    assert!(usage.cpu_seconds.is_some(), "{usage:?}");
    let message = hog.message.unwrap();
    assert!(message.starts_with("memory_limit"), "{message}");
    assert!(message.contains("64 MiB"), "{message}");

    // On a loaded machine the spin may get less than half a core anyway: the quota is checked
    // where it is set too, while the task runs.
    fake.wait_state("spin", TaskState::Running).await;
    let (controller, file, expected) = match &cgroups {
        Cgroups::V1 { .. } => ("/cpu/", "cpu.cfs_quota_us", "50000"),
        Cgroups::V2 { .. } => ("", "cpu.max", "50000 100000"),
    };
    let quota = framework_cgroups(&cgroups, fw)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(controller))
        .find_map(|p| std::fs::read_to_string(p.join("spin").join(file)).ok());
    assert_eq!(
        quota.as_deref().map(str::trim),
        Some(expected),
        "the task's CPU quota"
    );
    fake.wait_state("spin", TaskState::Finished).await;
    let spin = fake.status_of("spin", TaskState::Finished).unwrap();
    let cpu = cpu_seconds(spin.message.as_deref().unwrap());
    assert!(cpu <= 2.0 && cpu > 0.2, "cpus=0.5 over 3 s used {cpu} s");

    fake.wait_state("pids", TaskState::Finished).await;
    let out = agent.stdout("pids").await;
    let mut lines = out.lines();
    let visible: u32 = lines.next().unwrap().trim().parse().unwrap();
    assert!(visible <= 10, "{visible} pids visible");
    assert_eq!(lines.next(), Some("pids"), "hostname = task id");
    let caps = lines.next().unwrap();
    assert!(
        caps.ends_with("0000000000000000"),
        "a root task has no capabilities: {caps}"
    );
    assert_eq!(
        lines.next(),
        Some("0"),
        "the cgroup files are hidden from a root task"
    );

    fake.wait_state("tmp", TaskState::Finished).await;
    assert_eq!(agent.stdout("tmp").await.trim(), "secret");
    assert!(!Path::new("/tmp").join(&token).exists(), "/tmp is private");

    fake.wait_state("escape", TaskState::Running).await;
    wait_for("the setsid child to run", T, || {
        !with_token(&token).is_empty()
    })
    .await;
    agent.kill("escape").await;
    fake.wait_state("escape", TaskState::Killed).await;
    wait_for("the setsid child to be gone", T, || {
        with_token(&token).is_empty()
    })
    .await;

    // A cgroup directory always holds its control files: a task's is a sub-directory.
    let no_task_cgroup = || {
        framework_cgroups(&cgroups, fw).iter().all(|p| {
            std::fs::read_dir(p).map_or(true, |d| {
                d.filter_map(Result::ok)
                    .all(|e| !e.file_type().is_ok_and(|t| t.is_dir()))
            })
        })
    };
    wait_for("no task cgroup to remain", T, no_task_cgroup).await;
    agent.shutdown().await;
    assert!(
        framework_cgroups(&cgroups, fw).is_empty(),
        "the agent's empty parents are removed when it stops"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_restarted_agent_keeps_isolated_tasks_and_kills_whole_trees() {
    let Some(cgroups) = require_isolation("a_restarted_agent_keeps_isolated_tasks") else {
        return;
    };
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(&server.url(), dir.path()).await;
    fake.wait_registered().await;
    let fw = FrameworkId::new();
    let token = |t: &str| format!("{t}-{}", fw.to_string().replace('-', ""));
    for t in ["one", "two"] {
        let shell = format!("setsid sh -c 'sleep 1000; echo {}' & sleep 1000", token(t));
        agent.launch(fw, t, &shell, "mem=96,cpus=0.2").await;
        fake.wait_state(t, TaskState::Running).await;
    }
    for t in ["one", "two"] {
        wait_for("the task's tree to run", T, || {
            !with_token(&token(t)).is_empty()
        })
        .await;
    }
    // A third ends while the agent is down: its working directory is its sandbox, and it ends
    // once `go` appears there.
    let shell = "while [ ! -e go ]; do sleep 0.02; done; exit 3";
    agent.launch(fw, "late", shell, "cpus=0.1").await;
    fake.wait_state("late", TaskState::Running).await;
    agent.shutdown().await;
    // No `sh` wrapper: the launcher itself writes the exit file, for the restarted agent.
    let sandbox = dir
        .path()
        .join("sandboxes")
        .join(fw.to_string())
        .join("late");
    std::fs::write(sandbox.join("go"), "").unwrap();
    let exit_file = sandbox.join(agent::executor::EXIT_FILE);
    wait_for("the launcher to write the exit file", T, || {
        std::fs::read_to_string(&exit_file).is_ok_and(|s| s.trim() == "3")
    })
    .await;

    let agent = Agent::start(&server.url(), dir.path()).await;
    fake.wait_state("late", TaskState::Failed).await;
    let late = fake.status_of("late", TaskState::Failed).unwrap();
    let message = late.message.unwrap_or_default();
    assert!(message.contains("exited with code 3"), "{message}");
    // Both others still run, in their cgroups with their limits.
    for t in ["one", "two"] {
        assert!(
            !with_token(&token(t)).is_empty(),
            "{t} survived the restart"
        );
        assert_eq!(memory_limit_of(&cgroups, fw, t), Some(96 << 20), "{t}");
    }
    agent.kill("one").await;
    fake.wait_state("one", TaskState::Killed).await;
    wait_for("task one's whole tree to be gone", T, || {
        with_token(&token("one")).is_empty()
    })
    .await;
    wait_for("task one's cgroup to be gone", T, || {
        memory_limit_of(&cgroups, fw, "one").is_none()
    })
    .await;
    assert!(!with_token(&token("two")).is_empty(), "task two runs on");
    assert_eq!(fake.states_of("two").last(), Some(&TaskState::Running));
    agent.kill("two").await;
    fake.wait_state("two", TaskState::Killed).await;
    wait_for("task two's tree to be gone", T, || {
        with_token(&token("two")).is_empty()
    })
    .await;
    agent.shutdown().await;
    server.stop().await;
}
