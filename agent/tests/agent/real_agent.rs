//! The real agent against the fake coordinator: registration and heartbeats, real task
//! processes, kill of a whole process group, the HTTP API's errors, agent restarts that lose no
//! update, and a coordinator that goes away and comes back without its books.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{wait_for, wait_for_async, Fake, Server};
use agent::{AgentConfig, Timing};
use protocol::messages::TaskStatusList;
use protocol::{AgentId, FrameworkId, TaskState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(8);

/// The API token the test agents are given; the tests present it as the coordinator would.
const TOKEN: &str = "test-agent-token-0123456789";

/// A client presenting [`TOKEN`].
fn http() -> reqwest::Client {
    crate::common::client_with_token(TOKEN)
}

struct RunningAgent {
    url: String,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<Result<(), agent::AgentError>>,
}

impl RunningAgent {
    async fn start(coordinator: &str, work_dir: &Path) -> RunningAgent {
        Self::start_with(coordinator, work_dir, |_| {}).await
    }

    /// Like `start`, with `tweak` applied to the config last.
    async fn start_with(
        coordinator: &str,
        work_dir: &Path,
        tweak: impl FnOnce(&mut AgentConfig),
    ) -> RunningAgent {
        let mut config = AgentConfig::new(coordinator, work_dir);
        config.resources = Some("cpus=2,mem=1024".parse().unwrap());
        config.attributes = agent::config::parse_attributes("rack=r1").unwrap();
        config.timing = Timing {
            kill_grace: Duration::from_millis(300),
            ..Timing::fast()
        };
        config.api_token = Some(TOKEN.into());
        tweak(&mut config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        let handle = tokio::spawn(agent::run(config, listener, stop.clone().cancelled_owned()));
        RunningAgent { url, stop, handle }
    }

    async fn shutdown(self) {
        self.stop.cancel();
        self.handle.await.unwrap().unwrap();
    }

    async fn launch(
        &self,
        fw: FrameworkId,
        task_id: &str,
        command: serde_json::Value,
        resources: serde_json::Value,
    ) -> reqwest::Response {
        let body = json!({"framework_id": fw, "tasks": [{
            "task_id": task_id, "agent_id": AgentId::new(), "resources": resources,
            "command": command, "env": {"FOO": "bar"}}]});
        http()
            .post(format!("{}/api/v1/tasks", self.url))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn kill(&self, task_id: &str) -> reqwest::StatusCode {
        http()
            .post(format!("{}/api/v1/tasks/{task_id}/kill", self.url))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .status()
    }

    async fn output(&self, task_id: &str, which: &str) -> String {
        http()
            .get(format!("{}/api/v1/tasks/{task_id}/{which}", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn state(&self, task_id: &str) -> Option<TaskState> {
        let list: TaskStatusList = reqwest::get(format!("{}/api/v1/tasks", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        list.tasks
            .iter()
            .find(|s| s.task_id.as_str() == task_id)
            .map(|s| s.state)
    }
}

/// What must stay alive while a test runs: the fake coordinator's server and the work dir.
struct Keep {
    _server: Server,
    dir: tempfile::TempDir,
}

/// A fake coordinator (heartbeats every 50 ms), and a real agent (its config changed by
/// `tweak`) registered with it in a fresh work dir.
async fn rig(tweak: impl FnOnce(&mut AgentConfig)) -> (Fake, RunningAgent, Keep) {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = RunningAgent::start_with(&server.url(), dir.path(), tweak).await;
    fake.wait_registered().await;
    let keep = Keep {
        _server: server,
        dir,
    };
    (fake, agent, keep)
}

fn sandbox(work_dir: &Path, fw: FrameworkId, task_id: &str) -> PathBuf {
    work_dir
        .join("sandboxes")
        .join(fw.to_string())
        .join(task_id)
}

#[tokio::test]
async fn registers_heartbeats_and_serves_health() {
    let fake = Fake::new(0.02);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = RunningAgent::start(&server.url(), dir.path()).await;

    wait_for("two heartbeats", T, || {
        fake.books().heartbeats.values().any(|n| *n >= 2)
    })
    .await;
    let reg = fake.books().registrations[0].clone();
    assert_eq!(reg.resources, "cpus=2,mem=1024".parse().unwrap());
    assert_eq!(reg.attributes["rack"], "r1");
    assert_eq!(reg.endpoint, agent.url);
    assert!(reg.agent_id.is_none() && reg.tasks.is_empty());
    let id = *fake.books().heartbeats.keys().next().unwrap();
    let persisted = std::fs::read_to_string(dir.path().join("agent_id")).unwrap();
    assert_eq!(persisted.trim(), id.to_string());

    let health = reqwest::get(format!("{}/api/v1/health", agent.url))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "{}");
    agent.shutdown().await;
}

#[tokio::test]
async fn failing_task_reports_exit_code_and_output() {
    let (fake, agent, _keep) = rig(|_| {}).await;
    let fw = FrameworkId::new();

    let resp = agent
        .launch(
            fw,
            "t1",
            json!({"shell": "echo hi; echo oops >&2; exit 3"}),
            json!({"cpus": 1}),
        )
        .await;
    assert_eq!(resp.status(), 202);
    fake.wait_state("t1", TaskState::Failed).await;
    assert_eq!(
        fake.states_of("t1"),
        [TaskState::Starting, TaskState::Running, TaskState::Failed]
    );
    let failed = fake.status_of("t1", TaskState::Failed).unwrap();
    assert_eq!(failed.exit_code, Some(3));
    assert_eq!(failed.message.as_deref(), Some("exited with code 3"));
    assert_eq!(failed.framework_id, fw);
    assert_eq!(failed.agent_id, *fake.books().known.keys().next().unwrap());
    assert_eq!(agent.output("t1", "stdout").await, "hi\n");
    assert_eq!(agent.output("t1", "stderr").await, "oops\n");
    assert_eq!(agent.state("t1").await, Some(TaskState::Failed));
    agent.shutdown().await;
}

#[tokio::test]
async fn finished_sandboxes_are_collected_after_the_retention_and_live_ones_kept() {
    let (fake, agent, keep) = rig(|c| c.sandbox_retention = Duration::from_millis(200)).await;
    let fw = FrameworkId::new();
    let cpu = json!({"cpus": 0.5});
    let resp = agent
        .launch(fw, "short", json!({"shell": "echo done"}), cpu.clone())
        .await;
    assert_eq!(resp.status(), 202);
    let resp = agent
        .launch(fw, "long", json!({"shell": "sleep 60"}), cpu)
        .await;
    assert_eq!(resp.status(), 202);
    fake.wait_state("short", TaskState::Finished).await;
    fake.wait_state("long", TaskState::Running).await;
    let (short, long) = (
        sandbox(keep.dir.path(), fw, "short"),
        sandbox(keep.dir.path(), fw, "long"),
    );
    assert!(short.join("stdout").exists());

    // The collector runs every second here; the finished task's sandbox goes, the running
    // task's stays however old it gets.
    wait_for("short's sandbox removed", T, || !short.exists()).await;
    assert!(long.join("stdout").exists());
    assert_eq!(agent.state("long").await, Some(TaskState::Running));
    assert!(agent.kill("long").await.is_success());
    fake.wait_state("long", TaskState::Killed).await;
    agent.shutdown().await;
}

#[tokio::test]
async fn task_gets_env_sandbox_and_memory_limit() {
    let (fake, agent, keep) = rig(|_| {}).await;
    let fw = FrameworkId::new();

    let cmd = json!({"argv": ["sh", "-c", "echo $PARLEY_CPUS $PARLEY_MEM $PARLEY_GPUS $PARLEY_TASK_ID $FOO; ulimit -v; pwd; echo $PARLEY_SANDBOX"]});
    agent
        .launch(fw, "env1", cmd, json!({"cpus": 1.5, "mem": 64, "gpus": 1}))
        .await;
    fake.wait_state("env1", TaskState::Finished).await;
    assert_eq!(
        fake.status_of("env1", TaskState::Finished)
            .unwrap()
            .exit_code,
        Some(0)
    );
    let sb = sandbox(keep.dir.path(), fw, "env1");
    let out = agent.output("env1", "stdout").await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1.5 64 1 env1 bar");
    assert_eq!(
        lines[1],
        (64 * 1024).to_string(),
        "RLIMIT_AS is the task's mem"
    );
    assert_eq!(
        Path::new(lines[2]).canonicalize().unwrap(),
        sb.canonicalize().unwrap()
    );
    assert_eq!(Path::new(lines[3]), sb);

    // A command that does not exist fails with 127 and says why.
    agent
        .launch(
            fw,
            "nope",
            json!({"argv": ["/definitely/not/here"]}),
            json!({"cpus": 1}),
        )
        .await;
    fake.wait_state("nope", TaskState::Failed).await;
    let failed = fake.status_of("nope", TaskState::Failed).unwrap();
    assert_eq!(failed.exit_code, Some(127));
    assert!(failed.message.unwrap().contains("not found"));
    agent.shutdown().await;
}

/// The process group id of the task: the pid its shell printed first, looked up in /proc.
async fn task_pgid(agent: &RunningAgent, task_id: &str) -> nix::unistd::Pid {
    let deadline = tokio::time::Instant::now() + T;
    let pid = loop {
        let out = agent.output(task_id, "stdout").await;
        if let Some(pid) = out
            .lines()
            .next()
            .and_then(|l| l.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the task's pid"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))).unwrap()
}

async fn assert_group_gone(pgid: nix::unistd::Pid) {
    wait_for("the process group to be gone", T, || {
        nix::sys::signal::killpg(pgid, None) == Err(nix::errno::Errno::ESRCH)
    })
    .await;
}

/// Launches `shell` as `task_id`, waits until it runs, kills it, and checks it ends `killed`
/// with no process of its group left.
async fn launch_kill_and_check_group_gone(
    agent: &RunningAgent,
    fake: &Fake,
    fw: FrameworkId,
    task_id: &str,
    shell: &str,
) {
    agent
        .launch(fw, task_id, json!({ "shell": shell }), json!({"cpus": 1}))
        .await;
    let pgid = task_pgid(agent, task_id).await;
    fake.wait_state(task_id, TaskState::Running).await;
    assert_eq!(agent.kill(task_id).await, 202);
    fake.wait_state(task_id, TaskState::Killed).await;
    assert_group_gone(pgid).await;
}

#[tokio::test]
async fn kill_ends_the_whole_process_group() {
    let (fake, agent, _keep) = rig(|_| {}).await;
    let fw = FrameworkId::new();

    // A background child plus a foreground sleep: both must go.
    launch_kill_and_check_group_gone(
        &agent,
        &fake,
        fw,
        "sleepy",
        "sleep 100 & echo $!; sleep 100",
    )
    .await;
    // A task that ignores SIGTERM is killed with SIGKILL after the grace period.
    launch_kill_and_check_group_gone(
        &agent,
        &fake,
        fw,
        "stubborn",
        "trap '' TERM; sleep 100 & echo $!; wait",
    )
    .await;
    assert_eq!(
        fake.status_of("stubborn", TaskState::Killed)
            .unwrap()
            .message
            .as_deref(),
        Some("killed on request")
    );

    // Killing a finished task again is accepted and changes nothing.
    assert_eq!(agent.kill("stubborn").await, 202);
    assert_eq!(fake.states_of("stubborn").last(), Some(&TaskState::Killed));
    agent.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_contract_errors_and_change_nothing() {
    let (fake, agent, _keep) = rig(|_| {}).await;
    let http = http();
    let fw = FrameworkId::new();

    let bad = http
        .post(format!("{}/api/v1/tasks", agent.url))
        .body("{\"tasks\": 3}")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: serde_json::Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid launch body"),
        "{body}"
    );

    let empty = agent
        .launch(fw, "e", json!({"argv": []}), json!({"cpus": 1}))
        .await;
    assert_eq!(empty.status(), 400);
    assert_eq!(
        agent.state("e").await,
        None,
        "a refused launch leaves no task"
    );

    assert_eq!(
        agent
            .launch(fw, "d", json!({"shell": "sleep 100"}), json!({"cpus": 1}))
            .await
            .status(),
        202
    );
    let dup = agent
        .launch(fw, "d", json!({"shell": "true"}), json!({"cpus": 1}))
        .await;
    assert_eq!(dup.status(), 409);
    let body: serde_json::Value = dup.json().await.unwrap();
    assert_eq!(body["error"]["code"], "task_exists");

    assert_eq!(agent.kill("unknown").await, 404);
    assert_eq!(
        http.get(format!("{}/api/v1/tasks/unknown/stdout", agent.url))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(agent.kill("..%2Fetc").await, 400);

    assert_eq!(agent.kill("d").await, 202);
    fake.wait_state("d", TaskState::Killed).await;
    agent.shutdown().await;
}

#[tokio::test]
async fn agent_restart_loses_no_update_and_readopts_running_tasks() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let fw = FrameworkId::new();
    let first = RunningAgent::start(&server.url(), dir.path()).await;
    fake.wait_registered().await;
    let agent_id = *fake.books().known.keys().next().unwrap();

    // Updates fail while the first agent runs, so they exist only in its journal.
    fake.books().fail_statuses = true;
    let wait_go = "while [ ! -f go ]; do sleep 0.02; done";
    first
        .launch(
            fw,
            "long",
            json!({"shell": format!("{wait_go}; echo done")}),
            json!({"cpus": 1}),
        )
        .await;
    first
        .launch(
            fw,
            "dies",
            json!({"shell": format!("{wait_go}; exit 4")}),
            json!({"cpus": 1}),
        )
        .await;
    for t in ["long", "dies"] {
        wait_for_async("running locally", T, || async {
            first.state(t).await == Some(TaskState::Running)
        })
        .await;
    }
    first.shutdown().await;
    assert!(fake.books().statuses.is_empty());

    // While the agent is down, one task ends.
    std::fs::write(sandbox(dir.path(), fw, "dies").join("go"), "").unwrap();
    wait_for("dies to exit", T, || {
        sandbox(dir.path(), fw, "dies")
            .join(agent::executor::EXIT_FILE)
            .exists()
    })
    .await;

    fake.books().fail_statuses = false;
    let second = RunningAgent::start(&server.url(), dir.path()).await;
    fake.wait_state("dies", TaskState::Failed).await;
    assert_eq!(
        fake.status_of("dies", TaskState::Failed).unwrap().exit_code,
        Some(4)
    );
    fake.wait_state("long", TaskState::Running).await;
    let rereg = fake.books().registrations.last().unwrap().clone();
    assert_eq!(
        rereg.agent_id,
        Some(agent_id),
        "the same agent id is reused"
    );
    let long = rereg
        .tasks
        .iter()
        .find(|s| s.task_id.as_str() == "long")
        .unwrap();
    assert_eq!(
        long.resources,
        Some("cpus=1".parse().unwrap()),
        "a re-adopted task reports its resources"
    );

    // The re-adopted task's end is still reported, with its real exit code.
    std::fs::write(sandbox(dir.path(), fw, "long").join("go"), "").unwrap();
    fake.wait_state("long", TaskState::Finished).await;
    for t in ["long", "dies"] {
        let states = fake.states_of(t);
        assert!(
            states.starts_with(&[TaskState::Starting, TaskState::Running]),
            "{t}: {states:?}"
        );
    }
    assert_eq!(
        fake.status_of("long", TaskState::Finished)
            .unwrap()
            .exit_code,
        Some(0)
    );
    assert_eq!(second.output("long", "stdout").await, "done\n");
    second.shutdown().await;
}

#[tokio::test]
async fn coordinator_outage_and_restart_without_books() {
    let fake = Fake::new(0.02);
    let server = Server::start(&fake).await;
    let addr = server.addr;
    let dir = tempfile::tempdir().unwrap();
    let fw = FrameworkId::new();
    let agent = RunningAgent::start(&server.url(), dir.path()).await;
    fake.wait_registered().await;
    let agent_id = *fake.books().known.keys().next().unwrap();
    agent
        .launch(
            fw,
            "keeps",
            json!({"shell": "sleep 100"}),
            json!({"cpus": 1}),
        )
        .await;
    agent
        .launch(
            fw,
            "goes",
            json!({"shell": "sleep 100"}),
            json!({"cpus": 1}),
        )
        .await;
    wait_for("both running", T, || {
        fake.states_of("keeps").contains(&TaskState::Running)
            && fake.states_of("goes").contains(&TaskState::Running)
    })
    .await;

    // The coordinator goes away; a kill happens meanwhile; its update must wait.
    server.stop().await;
    assert_eq!(agent.kill("goes").await, 202);
    wait_for_async("killed locally", T, || async {
        agent.state("goes").await == Some(TaskState::Killed)
    })
    .await;
    assert!(!fake.states_of("goes").contains(&TaskState::Killed));

    // It comes back having lost its books: the agent must register again, with its tasks.
    let registrations_before = fake.books().registrations.len();
    fake.forget_agents();
    let server = Server::start_on(&fake, addr).await;
    wait_for("re-registration", T, || {
        fake.books().registrations.len() > registrations_before
    })
    .await;
    fake.wait_state("goes", TaskState::Killed).await;
    let rereg = fake.books().registrations.last().unwrap().clone();
    assert_eq!(rereg.agent_id, Some(agent_id));
    let keeps = rereg
        .tasks
        .iter()
        .find(|s| s.task_id.as_str() == "keeps")
        .unwrap();
    assert_eq!(keeps.state, TaskState::Running);
    assert_eq!(
        keeps.resources,
        Some("cpus=1".parse().unwrap()),
        "a coordinator without books can account the task"
    );
    wait_for("heartbeats again", T, || {
        fake.books()
            .heartbeats
            .get(&agent_id)
            .is_some_and(|n| *n >= 1)
    })
    .await;

    assert_eq!(agent.kill("keeps").await, 202);
    fake.wait_state("keeps", TaskState::Killed).await;
    agent.shutdown().await;
    server.stop().await;
}

/// The value of series `series` (name and labels exactly as printed) on a `/metrics` page.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_count_a_finished_task_without_a_token() {
    let (fake, agent, _keep) = rig(|_| {}).await;
    let scrape = || async {
        // No token: `/metrics` is open, like `/health`.
        let resp = reqwest::get(format!("{}/metrics", agent.url))
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let kind = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
        resp.text().await.unwrap()
    };
    let before = scrape().await;
    assert_eq!(
        metric(&before, "parley_agent_registered"),
        Some(1.0),
        "{before}"
    );
    assert_eq!(
        metric(&before, "parley_agent_tasks_launched_total"),
        Some(0.0)
    );

    let fw = FrameworkId::new();
    let resp = agent
        .launch(fw, "m1", json!({"shell": "exit 0"}), json!({"cpus": 1}))
        .await;
    assert_eq!(resp.status(), 202);
    fake.wait_state("m1", TaskState::Finished).await;

    let text = scrape().await;
    let finished = "parley_agent_tasks_terminal_total{state=\"finished\"}";
    assert_eq!(metric(&text, finished), Some(1.0), "{text}");
    assert_eq!(
        metric(&text, "parley_agent_tasks_terminal_total{state=\"failed\"}"),
        Some(0.0)
    );
    assert_eq!(
        metric(&text, "parley_agent_tasks_launched_total"),
        Some(1.0)
    );
    assert_eq!(metric(&text, "parley_agent_tasks_running"), Some(0.0));
    assert_eq!(
        metric(&text, "parley_agent_launch_failures_total"),
        Some(0.0)
    );
    assert!(metric(&text, "process_resident_memory_bytes").unwrap() > 0.0);
    assert!(metric(&text, "process_open_fds").unwrap() >= 3.0);
    assert!(metric(&text, "process_start_time_seconds").unwrap() > 1.6e9);
    assert!(
        text.contains("# TYPE process_cpu_seconds_total counter\n"),
        "{text}"
    );
    let version = format!(
        "parley_build_info{{version=\"{}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&version), "{text}");
    // Every documented metric is served, typed as documented.
    for m in agent::metrics::METRICS
        .iter()
        .chain(&observe::process::METRICS)
    {
        if m.name == "process_max_fds" && !text.contains("process_max_fds ") {
            continue; // an unlimited soft limit has no series
        }
        let line = format!("# TYPE {} {}\n", m.name, m.kind.as_str());
        assert!(text.contains(&line), "{line} missing from {text}");
    }
    agent.shutdown().await;
}
