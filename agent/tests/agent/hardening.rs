//! The agent's defences, each finding of the review reproduced against a real
//! agent and the fake coordinator: only the coordinator's token drives the agent, a stale
//! journal pid is never signalled, output reads of a replaced `stdout` do not hang, tasks see
//! none of the agent's environment, and two frameworks may use the same task id.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{client_with_token, wait_for, Fake, Server};
use agent::journal::{Durability, Journal, Record};
use agent::{AgentConfig, Timing};
use protocol::{AgentId, CommandSpec, FrameworkId, TaskId, TaskSpec, TaskState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const T: Duration = Duration::from_secs(8);

struct Agent {
    url: String,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<Result<(), agent::AgentError>>,
}

impl Agent {
    async fn start(coordinator: &str, work_dir: &Path, token: Option<&str>) -> Agent {
        Self::start_with(coordinator, work_dir, token, |_| {}).await
    }

    async fn start_with(
        coordinator: &str,
        work_dir: &Path,
        token: Option<&str>,
        tweak: impl FnOnce(&mut AgentConfig),
    ) -> Agent {
        let mut config = AgentConfig::new(coordinator, work_dir);
        config.resources = Some("cpus=4,mem=1024".parse().unwrap());
        config.timing = Timing {
            kill_grace: Duration::from_millis(300),
            ..Timing::fast()
        };
        config.api_token = token.map(str::to_string);
        tweak(&mut config);
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
}

fn launch_body(fw: FrameworkId, task_id: &str, shell: &str) -> serde_json::Value {
    json!({"framework_id": fw, "tasks": [{
        "task_id": task_id, "agent_id": AgentId::new(), "resources": {"cpus": 1},
        "command": {"shell": shell}}]})
}

fn sandbox(work_dir: &Path, fw: FrameworkId, task_id: &str) -> PathBuf {
    work_dir
        .join("sandboxes")
        .join(fw.to_string())
        .join(task_id)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Finding: "POST /api/v1/tasks launches any command from anyone".
#[tokio::test]
async fn only_the_coordinators_token_launches_kills_and_reads_output() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    // No token given: one is generated, kept private, and sent in the registration.
    let agent = Agent::start(&server.url(), dir.path(), None).await;
    fake.wait_registered().await;
    let token = std::fs::read_to_string(dir.path().join(agent::auth::API_TOKEN_FILE)).unwrap();
    assert_eq!(
        fake.books().registrations[0].api_token.as_deref(),
        Some(token.trim())
    );
    assert_eq!(mode(&dir.path().join(agent::auth::API_TOKEN_FILE)), 0o600);
    assert_eq!(mode(&dir.path().join("journal.jsonl")), 0o600);
    assert_eq!(mode(dir.path()), 0o711);

    let fw = FrameworkId::new();
    let marker = dir.path().join("pwned");
    let evil = launch_body(fw, "evil", &format!("touch {}", marker.display()));
    let anonymous = reqwest::Client::new();
    let wrong = client_with_token("not-the-agent-token-at-all");
    for client in [&anonymous, &wrong] {
        let resp = client
            .post(format!("{}/api/v1/tasks", agent.url))
            .json(&evil)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401);
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized");
        for path in ["evil/kill", "evil/stdout", "evil/stderr"] {
            let url = format!("{}/api/v1/tasks/{path}", agent.url);
            let resp = match path.ends_with("kill") {
                true => client.post(url).json(&json!({})).send().await,
                false => client.get(url).send().await,
            };
            assert_eq!(resp.unwrap().status(), 401, "{path}");
        }
    }
    // Nothing ran, nothing was recorded; health and the status list stay open.
    assert!(!marker.exists());
    assert!(fake.states_of("evil").is_empty());
    let open = anonymous.get(format!("{}/api/v1/tasks", agent.url));
    assert_eq!(open.send().await.unwrap().status(), 200);
    let health = anonymous.get(format!("{}/api/v1/health", agent.url));
    assert_eq!(health.send().await.unwrap().status(), 200);

    // The coordinator's token works.
    let coordinator = client_with_token(token.trim());
    let ok = launch_body(fw, "ok", "echo hello");
    let resp = coordinator
        .post(format!("{}/api/v1/tasks", agent.url))
        .json(&ok)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    fake.wait_state("ok", TaskState::Finished).await;
    let out = coordinator
        .get(format!("{}/api/v1/tasks/ok/stdout", agent.url))
        .send()
        .await
        .unwrap();
    assert_eq!(out.text().await.unwrap(), "hello\n");
    agent.shutdown().await;

    // Restarted, it keeps its token.
    let agent = Agent::start(&server.url(), dir.path(), None).await;
    wait_for("re-registration", T, || {
        fake.books().registrations.len() >= 2
    })
    .await;
    let last = fake.books().registrations.last().unwrap().api_token.clone();
    assert_eq!(last.as_deref(), Some(token.trim()));
    agent.shutdown().await;
    server.stop().await;
}

/// A process that is not a task: its own process group, like a task's, but unrelated.
fn bystander() -> std::process::Child {
    use std::os::unix::process::CommandExt;
    std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap()
}

fn start_time(pid: u32) -> u64 {
    agent::executor::proc_stat(pid).unwrap().1
}

/// Finding: "on restart it SIGKILLs process group `pid` of journaled tasks whose start time
/// does not match, which after a reboot can be an unrelated process group".
#[tokio::test]
async fn a_stale_journal_pid_of_an_unrelated_process_is_not_signalled() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let fw = FrameworkId::new();
    let mut reboot = bystander();
    let mut reused = bystander();
    let this_boot = agent::executor::boot_id();
    // A journal as an agent left it: two started tasks whose pids now belong to other
    // processes. One was recorded in an earlier boot (same pid and even the same start time),
    // the other in this boot with another start time (the pid was re-used).
    let (mut journal, _) = Journal::open(dir.path()).unwrap();
    let mut records = Vec::new();
    for (name, child, start, boot) in [
        (
            "from-before-reboot",
            &reboot,
            start_time(reboot.id()),
            Some(uuid::Uuid::from_u128(42)),
        ),
        (
            "pid-reused",
            &reused,
            start_time(reused.id()) + 1,
            this_boot,
        ),
    ] {
        let spec = TaskSpec {
            task_id: TaskId::new(name).unwrap(),
            name: String::new(),
            agent_id: AgentId::new(),
            resources: "cpus=1".parse().unwrap(),
            command: CommandSpec::Shell("sleep 30".into()),
            env: Default::default(),
            duration_s: None,
            isolation: None,
            health_check: None,
            priority: None,
        };
        let sb = sandbox(dir.path(), fw, name);
        std::fs::create_dir_all(&sb).unwrap();
        records.push(Record::Launch {
            framework_id: fw,
            spec,
            sandbox: sb,
        });
        records.push(Record::Started {
            framework_id: Some(fw),
            task_id: TaskId::new(name).unwrap(),
            pid: child.id(),
            start_time: Some(start),
            boot_id: boot,
        });
    }
    journal.append(&records, Durability::Synced).unwrap();
    drop(journal);

    let agent = Agent::start(&server.url(), dir.path(), None).await;
    fake.wait_state("from-before-reboot", TaskState::Lost).await;
    fake.wait_state("pid-reused", TaskState::Lost).await;
    // Both bystanders live on: neither group was signalled.
    assert!(
        reboot.try_wait().unwrap().is_none(),
        "signalled after a reboot"
    );
    assert!(
        reused.try_wait().unwrap().is_none(),
        "signalled a re-used pid"
    );
    agent.shutdown().await;
    server.stop().await;
    for mut child in [reboot, reused] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// Finding: "a task that symlinks its `stdout` to `/dev/zero` makes one GET read forever".
#[tokio::test]
async fn a_replaced_stdout_does_not_hang_a_read() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let token = "output-test-token-0123456789";
    let agent = Agent::start(&server.url(), dir.path(), Some(token)).await;
    fake.wait_registered().await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .default_headers(
            [(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {token}").parse().unwrap(),
            )]
            .into_iter()
            .collect(),
        )
        .build()
        .unwrap();
    let fw = FrameworkId::new();
    let shell = "rm stdout stderr && ln -s /dev/zero stdout && mkfifo stderr && touch ready \
                 && sleep 30";
    let resp = http
        .post(format!("{}/api/v1/tasks", agent.url))
        .json(&launch_body(fw, "sly", shell))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let ready = sandbox(dir.path(), fw, "sly").join("ready");
    wait_for("the task replaced its output files", T, || ready.exists()).await;
    for which in ["stdout", "stderr"] {
        let resp = http
            .get(format!("{}/api/v1/tasks/sly/{which}", agent.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 409, "{which}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "output_unavailable");
    }
    let kill = http
        .post(format!("{}/api/v1/tasks/sly/kill", agent.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(kill.status(), 202);
    fake.wait_state("sly", TaskState::Killed).await;
    agent.shutdown().await;
    server.stop().await;
}

/// Finding: "tasks inherit the agent's whole environment".
#[tokio::test]
async fn a_task_sees_none_of_the_agents_environment() {
    // Cargo sets this for the test process, so the agent (in process) has it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let token = "env-test-token-0123456789";
    let agent = Agent::start(&server.url(), dir.path(), Some(token)).await;
    fake.wait_registered().await;
    let http = client_with_token(token);
    let fw = FrameworkId::new();
    let mut body = launch_body(fw, "env", "env");
    body["tasks"][0]["env"] = json!({"ASKED": "yes"});
    let resp = http
        .post(format!("{}/api/v1/tasks", agent.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    fake.wait_state("env", TaskState::Finished).await;
    let out = http
        .get(format!("{}/api/v1/tasks/env/stdout", agent.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let names: Vec<&str> = out.lines().filter_map(|l| l.split('=').next()).collect();
    assert!(!out.contains("CARGO_"), "the agent's env leaked: {out}");
    let sb = sandbox(dir.path(), fw, "env");
    assert!(out.contains(&format!("HOME={}\n", sb.display())), "{out}");
    assert!(out.contains(&format!("PATH={}\n", agent::executor::BASE_PATH)));
    assert!(out.contains("ASKED=yes\n"));
    assert!(out.contains("PARLEY_TASK_ID=env\n"));
    for name in names {
        let known = ["HOME", "PATH", "ASKED", "PWD", "SHLVL", "_", "OLDPWD"];
        assert!(
            known.contains(&name) || name.starts_with("PARLEY_"),
            "unexpected variable {name} in {out}"
        );
    }
    assert_eq!(mode(&sb), 0o700);
    agent.shutdown().await;
    server.stop().await;
}

/// Finding: "task ids are unique only per framework but the agent keys by task id alone".
#[tokio::test]
async fn two_frameworks_run_tasks_of_the_same_id() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let token = "same-id-test-token-0123456789";
    let agent = Agent::start(&server.url(), dir.path(), Some(token)).await;
    fake.wait_registered().await;
    let http = client_with_token(token);
    let (a, b) = (FrameworkId::new(), FrameworkId::new());
    for fw in [a, b] {
        let resp = http
            .post(format!("{}/api/v1/tasks", agent.url))
            .json(&launch_body(fw, "web", &format!("echo {fw}; sleep 30")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202, "{fw}");
    }
    let running = |fw: FrameworkId| {
        fake.books()
            .statuses
            .iter()
            .any(|s| s.framework_id == fw && s.state == TaskState::Running)
    };
    wait_for("both running", T, || running(a) && running(b)).await;

    // Each framework's output is its own.
    let stdout = |fw: FrameworkId| {
        http.get(format!(
            "{}/api/v1/tasks/web/stdout?framework_id={fw}",
            agent.url
        ))
        .send()
    };
    wait_for("b printed", T, || {
        sandbox(dir.path(), b, "web")
            .join("stdout")
            .metadata()
            .is_ok_and(|m| m.len() > 0)
    })
    .await;
    assert_eq!(
        stdout(b).await.unwrap().text().await.unwrap(),
        format!("{b}\n")
    );

    // A kill that names no framework cannot tell them apart.
    let kill = |body: serde_json::Value| {
        http.post(format!("{}/api/v1/tasks/web/kill", agent.url))
            .json(&body)
            .send()
    };
    let ambiguous = kill(json!({})).await.unwrap();
    assert_eq!(ambiguous.status(), 409);
    // Naming one kills that one only.
    assert_eq!(
        kill(json!({"framework_id": b})).await.unwrap().status(),
        202
    );
    let killed = |fw: FrameworkId| {
        fake.books()
            .statuses
            .iter()
            .any(|s| s.framework_id == fw && s.state == TaskState::Killed)
    };
    wait_for("b's task killed", T, || killed(b)).await;
    assert!(!killed(a), "a's task of the same id runs on");
    assert_eq!(
        kill(json!({"framework_id": a})).await.unwrap().status(),
        202
    );
    wait_for("a's task killed", T, || killed(a)).await;
    agent.shutdown().await;
    server.stop().await;
}

/// Findings: "tasks inherit the agent's uid and can rewrite its journal". Run as root only
/// (the agent can switch users only then).
#[tokio::test]
async fn tasks_run_as_the_task_user_and_cannot_touch_the_agents_files() {
    if !agent::task_user::running_as_root() {
        return;
    }
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let token = "task-user-test-token-0123456789";
    let nobody = agent::task_user::TaskUser::parse("65534:65534").unwrap();
    let agent = Agent::start_with(&server.url(), dir.path(), Some(token), |c| {
        c.task_user = Some(nobody);
        c.allow_root_tasks = false;
    })
    .await;
    fake.wait_registered().await;
    let http = client_with_token(token);
    let fw = FrameworkId::new();
    let shell = "id -u; id -g; echo mine > own-file && echo wrote; \
                 cat ../../../journal.jsonl ../../../api_token >/dev/null 2>&1 || echo denied; \
                 echo x >> ../../../journal.jsonl 2>/dev/null || echo denied";
    let resp = http
        .post(format!("{}/api/v1/tasks", agent.url))
        .json(&launch_body(fw, "who", shell))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    fake.wait_state("who", TaskState::Finished).await;
    let out = http
        .get(format!("{}/api/v1/tasks/who/stdout", agent.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(out, "65534\n65534\nwrote\ndenied\ndenied\n");
    agent.shutdown().await;
    server.stop().await;
}
