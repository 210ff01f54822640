//! Real processes for the chaos tests: etcd members, `coordinator` and `agent` processes (each
//! in its own process group, killed with the group on drop, so no task outlives a test), an
//! in-process framework driven by the SDK that records every update it receives, the seed,
//! and the checks the chaos tests share (tasks as their agents saw them, books back to zero).

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use framework_sdk::prelude::*;
use serde_json::{json, Value};

/// The token every test agent demands of callers of its API (the test reads `GET /tasks`).
pub const AGENT_TOKEN: &str = "chaos-agent-token";

/// Whether etcd is here; prints why not (and fails under `PARLEY_CI=1`).
pub fn have_etcd(test: &str) -> bool {
    let ok = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("PARLEY_CI").as_deref() != Ok("1"),
            "{test}: etcd is not installed (apt-get install etcd-server), and PARLEY_CI=1"
        );
        eprintln!("{test}: skipped: etcd is not installed (apt-get install etcd-server)");
    }
    ok
}

/// A free loopback port (bound and released at once).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The seed of this run: `PARLEY_CHAOS_SEED` to replay one, else the clock. Printed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("PARLEY_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: seed {seed} (replay with PARLEY_CHAOS_SEED={seed})");
    seed
}

/// How many times to repeat a chaos scenario in one test (`PARLEY_CHAOS_RUNS`, default 1).
pub fn runs() -> usize {
    std::env::var("PARLEY_CHAOS_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
}

/// A process in its own process group; the whole group is SIGKILLed on drop.
pub struct Proc {
    /// The child.
    pub child: Child,
    /// What it printed (stdout and stderr).
    pub log: Arc<Mutex<String>>,
}

impl Proc {
    /// Spawns `cmd` in a new process group, collecting its output.
    pub fn spawn(mut cmd: Command) -> Proc {
        cmd.process_group(0)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        for out in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    let mut l = log.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
            });
        }
        Proc { child, log }
    }

    /// Sends `sig` (`KILL`, `STOP`, `CONT`, `TERM`) to the process itself.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill -{sig} {}", self.child.id());
    }

    /// SIGKILL and reap (the process only; its group is killed on drop).
    pub fn kill9(&mut self) {
        self.signal("KILL");
        let _ = self.child.wait();
    }

    /// Waits for the process to exit by itself; its exit code.
    pub async fn exit_code(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(
                Instant::now() < deadline,
                "process {} did not exit; log:\n{}",
                self.child.id(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Its output so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // The group: the process and whatever it started (an agent's tasks).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// etcd members on loopback, killed on drop.
pub struct Etcd {
    members: Vec<Proc>,
    urls: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts `n` members and waits until each takes writes.
    pub async fn start(n: usize) -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let cluster: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, p))| format!("n{i}=http://127.0.0.1:{p}"))
            .collect();
        let mut members = Vec::new();
        let mut urls = Vec::new();
        for (i, (c, p)) in ports.iter().enumerate() {
            let client = format!("http://127.0.0.1:{c}");
            let peer = format!("http://127.0.0.1:{p}");
            let mut cmd = Command::new("etcd");
            cmd.args(["--name", &format!("n{i}"), "--data-dir"])
                .arg(dir.path().join(format!("n{i}")))
                .args(["--listen-client-urls", &client])
                .args(["--advertise-client-urls", &client])
                .args(["--listen-peer-urls", &peer])
                .args(["--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &cluster.join(",")])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", "parley-test"])
                .args(["--heartbeat-interval=50", "--election-timeout=500"]);
            members.push(Proc::spawn(cmd));
            urls.push(client);
        }
        let etcd = Etcd {
            members,
            urls,
            _dir: dir,
        };
        let http = reqwest::Client::new();
        for url in &etcd.urls {
            testkit::wait_for(Duration::from_secs(30), "etcd writable", || async {
                http.post(format!("{url}/v3/kv/put"))
                    .json(&json!({"key": B64.encode("/probe"), "value": B64.encode("1")}))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            })
            .await
            .unwrap();
        }
        etcd
    }

    /// The client URLs, comma-separated.
    pub fn endpoints(&self) -> String {
        self.urls.join(",")
    }

    /// POSTs `body` to the JSON gateway of the first member; its answer.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        let resp = reqwest::Client::new()
            .post(format!("{}{path}", self.urls[0]))
            .json(&body)
            .send()
            .await
            .unwrap();
        resp.json().await.unwrap()
    }

    /// The keys under `prefix`.
    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        let mut end = prefix.as_bytes().to_vec();
        *end.last_mut().unwrap() += 1;
        let r = self
            .post(
                "/v3/kv/range",
                json!({"key": B64.encode(prefix), "range_end": B64.encode(end)}),
            )
            .await;
        r["kvs"]
            .as_array()
            .map(|kvs| {
                kvs.iter()
                    .map(|kv| {
                        String::from_utf8(B64.decode(kv["key"].as_str().unwrap()).unwrap()).unwrap()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A `coordinator` process on a fixed loopback port (so a restart comes back at the same URL).
pub struct Coord {
    /// The process.
    pub proc: Proc,
    /// Its base URL.
    pub base: String,
    port: u16,
}

/// Timings that make the tests fast: agents and framework streams heartbeat every 0.5 s.
const FAST: [&str; 4] = [
    "--agent-heartbeat-interval",
    "0.5",
    "--framework-heartbeat-interval",
    "0.5",
];

impl Coord {
    /// `coordinator --etcd ...` with a `lease_s` leader lease.
    pub fn etcd(etcd: &Etcd, prefix: &str, lease_s: u64) -> Coord {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_coordinator"));
        cmd.args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--etcd", &etcd.endpoints(), "--etcd-prefix", prefix])
            .args(["--advertise-url", &base])
            .args(["--leader-lease-s", &lease_s.to_string()])
            .args(FAST)
            .args(["--reregister-grace-s", "2"])
            .env("RUST_LOG", "info");
        Coord {
            proc: Proc::spawn(cmd),
            base,
            port,
        }
    }

    /// `coordinator --data-dir DIR` (the embedded redb registry) on `port` (0: a free one).
    pub fn redb(data_dir: &Path, port: u16) -> Coord {
        let port = if port == 0 { free_port() } else { port };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_coordinator"));
        cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .args(FAST)
            .args(["--reregister-grace-s", "1"])
            .env("RUST_LOG", "info");
        Coord {
            proc: Proc::spawn(cmd),
            base: format!("http://127.0.0.1:{port}"),
            port,
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Its `/health`, if it answers.
    pub async fn health(&self) -> Option<Value> {
        let r = http().get(self.url("/health")).send().await.ok()?;
        r.json().await.ok()
    }

    /// Waits until `/health` says `role`.
    pub async fn wait_role(&self, role: &str, timeout: Duration) {
        let what = format!("{} to be {role}", self.base);
        let r = testkit::wait_for(timeout, &what, || async {
            self.health().await.is_some_and(|h| h["role"] == role)
        })
        .await;
        if r.is_err() {
            panic!("{what}: timed out; log:\n{}", self.proc.log());
        }
    }

    /// Waits until it answers `/health` at all.
    pub async fn wait_up(&self, timeout: Duration) {
        let r = testkit::wait_for(timeout, "the coordinator to answer", || async {
            self.health().await.is_some()
        })
        .await;
        if r.is_err() {
            panic!("{} did not come up; log:\n{}", self.base, self.proc.log());
        }
    }

    /// `GET path` as JSON (status, body).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        match http().get(self.url(path)).send().await {
            Ok(r) => {
                let s = r.status().as_u16();
                (s, r.json().await.unwrap_or(Value::Null))
            }
            Err(e) => (0, json!(e.to_string())),
        }
    }
}

/// An HTTP client that does not follow redirects.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// The built `agent` binary (beside the `coordinator` one; `cargo test --workspace` builds it).
pub fn agent_binary() -> PathBuf {
    let coordinator = PathBuf::from(env!("CARGO_BIN_EXE_coordinator"));
    let agent = coordinator.with_file_name("agent");
    assert!(
        agent.exists(),
        "{} is missing: build it first (cargo build -p agent --bin agent)",
        agent.display()
    );
    agent
}

/// A real `agent` process on a fixed port with its own work dir (a restart keeps both).
pub struct Agent {
    /// The process.
    pub proc: Proc,
    /// Its base URL.
    pub base: String,
    /// Its name (hostname).
    pub name: String,
    port: u16,
    work_dir: PathBuf,
    coordinators: String,
}

impl Agent {
    /// Starts `agent` named `name` against `coordinators` (comma-separated), work dir `dir`.
    pub fn start(name: &str, coordinators: &str, dir: &Path) -> Agent {
        Self::launch(name, coordinators, dir, free_port())
    }

    fn launch(name: &str, coordinators: &str, dir: &Path, port: u16) -> Agent {
        let mut cmd = Command::new(agent_binary());
        cmd.args(["--coordinator", coordinators])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--resources", "cpus=2,mem=2048"])
            .args(["--hostname", name])
            .args(["--isolation", "none", "--kill-grace-s", "1"])
            .args(["--api-token", AGENT_TOKEN])
            .arg("--work-dir")
            .arg(dir)
            .env("RUST_LOG", "info");
        if is_root() {
            cmd.arg("--allow-root-tasks");
        }
        Agent {
            proc: Proc::spawn(cmd),
            base: format!("http://127.0.0.1:{port}"),
            name: name.to_owned(),
            port,
            work_dir: dir.to_path_buf(),
            coordinators: coordinators.to_owned(),
        }
    }

    /// SIGKILL this agent (its tasks, in its process group, are orphaned as on a real crash,
    /// then killed with the group) and start it again on the same port and work dir.
    pub fn crash_and_restart(&mut self) {
        self.proc.kill9();
        let again = Self::launch(&self.name, &self.coordinators, &self.work_dir, self.port);
        *self = again;
    }

    /// The tasks as this agent sees them (`GET /api/v1/tasks`).
    pub async fn tasks(&self) -> Vec<TaskStatus> {
        let r = http()
            .get(format!("{}/api/v1/tasks", self.base))
            .bearer_auth(AGENT_TOKEN)
            .send()
            .await
            .unwrap();
        let body: Value = r.json().await.unwrap();
        serde_json::from_value(body["tasks"].clone()).unwrap()
    }
}

/// Whether the test runs as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// What the framework saw, shared with the test.
#[derive(Default)]
pub struct Seen {
    /// The last status of each task.
    pub last: BTreeMap<String, TaskStatus>,
    /// Every update, in order.
    pub updates: Vec<TaskStatus>,
    /// When each batch of offers arrived.
    pub offers_at: Vec<Instant>,
    /// How many tasks were launched (accepts sent), relaunches included.
    pub launched: usize,
    /// How many tasks came back from a failed launch.
    pub requeued: usize,
}

impl Seen {
    /// How many tasks are terminal in the framework's view.
    pub fn terminal(&self) -> usize {
        self.last.values().filter(|s| s.state.is_terminal()).count()
    }

    /// How many tasks ended `lost` in the framework's view.
    pub fn lost(&self) -> usize {
        self.last
            .values()
            .filter(|s| s.state == TaskState::Lost)
            .count()
    }

    /// The first offer at or after `t`.
    pub fn first_offer_after(&self, t: Instant) -> Option<Instant> {
        self.offers_at.iter().copied().find(|at| *at >= t)
    }
}

/// A framework that runs `total` copies of `sleep 0.2`, released one every `every` so that
/// the run spreads over time, relaunching (same id) any task whose launch failed.
pub struct Sleeper {
    task: Task,
    queue: Vec<TaskId>,
    total: usize,
    started: Instant,
    every: Duration,
    released: usize,
    seen: Arc<Mutex<Seen>>,
}

impl Sleeper {
    /// The framework and its shared view.
    pub fn new(total: usize, every: Duration) -> (Sleeper, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let queue = (0..total)
            .rev()
            .map(|i| TaskId::new(format!("t{i:03}")).unwrap())
            .collect();
        let s = Sleeper {
            task: Task::shell("sleep 0.2")
                .resources("cpus=0.1,mem=16")
                .build()
                .unwrap(),
            queue,
            total,
            started: Instant::now(),
            every,
            released: 0,
            seen: Arc::clone(&seen),
        };
        (s, seen)
    }
}

#[async_trait]
impl Scheduler for Sleeper {
    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let mut seen = self.seen.lock().unwrap();
        seen.offers_at.push(Instant::now());
        let due = (self.started.elapsed().as_micros() / self.every.as_micros().max(1)) as usize;
        let due = due.min(self.total);
        let mut budget = due.saturating_sub(self.released);
        let mut launched = 0;
        let queue = &mut self.queue;
        let d = Decisions::pack(&offers, &self.task, || {
            if budget == 0 {
                return None;
            }
            let id = queue.pop()?;
            budget -= 1;
            launched += 1;
            Some(id)
        });
        self.released += launched;
        seen.launched += launched;
        d
    }

    async fn status_update(&mut self, _ctx: &mut Context, status: &TaskStatus) {
        let mut seen = self.seen.lock().unwrap();
        seen.updates.push(status.clone());
        seen.last
            .insert(status.task_id.as_str().to_owned(), status.clone());
    }

    fn requeue(&mut self, task: TaskSpec) {
        self.seen.lock().unwrap().requeued += 1;
        self.released = self.released.saturating_sub(1);
        self.queue.push(task.task_id);
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
    }
}

/// The driver's config for the chaos tests: short filters and quick reconnects.
pub fn driver_config(coordinators: &str) -> DriverConfig {
    let mut c = DriverConfig::new(coordinators, "chaos", "eng".parse().unwrap());
    c.decline_refuse = Duration::from_millis(100);
    c.accept_refuse = Duration::from_millis(100);
    c.revive_interval = Duration::from_millis(200);
    c.offer_hold_timeout = Duration::from_millis(500);
    c.reconnect_backoff_max = Duration::from_millis(500);
    c.missed_heartbeats = 3;
    c.request_timeout = Duration::from_secs(3);
    c.unregister_on_stop = false;
    c
}

/// Waits until the framework has a terminal state for all `total` tasks. On failure it shows
/// the stuck tasks as the agents see them and the coordinators' log lines naming them.
pub async fn wait_all_terminal(
    seen: &Arc<Mutex<Seen>>,
    total: usize,
    timeout: Duration,
    agents: &[Agent],
    coordinators: &[&Proc],
) {
    let r = testkit::wait_for(timeout, "every task terminal in the framework", || {
        std::future::ready(seen.lock().unwrap().terminal() == total)
    })
    .await;
    if r.is_err() {
        let stuck: Vec<(String, Option<String>)> = {
            let seen = seen.lock().unwrap();
            (0..total)
                .map(|i| format!("t{i:03}"))
                .filter(|id| !seen.last.get(id).is_some_and(|s| s.state.is_terminal()))
                .map(|id| {
                    let state = seen.last.get(&id).map(|s| s.state.to_string());
                    (id, state)
                })
                .collect()
        };
        let mut detail = String::new();
        for (id, state) in &stuck {
            detail.push_str(&format!("{id}: framework {state:?}; agents:"));
            for a in agents {
                for t in a.tasks().await {
                    if t.task_id.as_str() == id {
                        detail.push_str(&format!(" {} {}", a.name, t.state));
                    }
                }
            }
            detail.push('\n');
            for (i, c) in coordinators.iter().enumerate() {
                for line in c.log().lines().filter(|l| l.contains(id.as_str())) {
                    detail.push_str(&format!("  coordinator {i}: {line}\n"));
                }
            }
            for a in agents {
                for line in a.proc.log().lines().filter(|l| l.contains(id.as_str())) {
                    detail.push_str(&format!("  {}: {line}\n", a.name));
                }
            }
        }
        let seen = seen.lock().unwrap();
        panic!(
            "{} of {total} tasks not terminal in the framework's view (launched {}, requeued {}):\n{detail}",
            stuck.len(),
            seen.launched,
            seen.requeued
        );
    }
}

/// Every task's terminal state in the framework's view is the one its agent holds.
pub async fn assert_tasks_as_agents_saw_them(seen: &Arc<Mutex<Seen>>, agents: &[Agent]) {
    let mut on_agents: BTreeMap<String, Vec<(String, TaskStatus)>> = BTreeMap::new();
    for a in agents {
        for t in a.tasks().await {
            on_agents
                .entry(t.task_id.as_str().to_owned())
                .or_default()
                .push((a.name.clone(), t));
        }
    }
    let seen = seen.lock().unwrap();
    let mut wrong = Vec::new();
    for (id, status) in &seen.last {
        let agent_view = on_agents.get(id).and_then(|v| {
            v.iter()
                .find(|(_, t)| t.agent_id == status.agent_id)
                .map(|(_, t)| t)
        });
        match agent_view {
            Some(t) if t.state == status.state => {}
            Some(t) => wrong.push(format!(
                "{id}: framework {} / agent {} ({:?})",
                status.state, t.state, t.message
            )),
            // A task no agent ran may only be reported lost (it never ran).
            None if status.state == TaskState::Lost => {}
            None => wrong.push(format!(
                "{id}: framework {} ({:?}), on no agent",
                status.state, status.message
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} tasks differ from their agents' view: {wrong:?}",
        wrong.len()
    );
}

/// Whether a resources value on the wire is zero (no entries, or all zero).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Object(m) => m.values().all(is_zero),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The books return to zero: no agent has used or offered resources, no offer is outstanding.
pub async fn assert_books_zero(leader: &Coord, timeout: Duration) {
    let r = testkit::wait_for(timeout, "the books to return to zero", || async {
        let (s, agents) = leader.get("/api/v1/agents").await;
        let (s2, offers) = leader.get("/api/v1/offers").await;
        s == 200
            && s2 == 200
            && agents["agents"].as_array().is_some_and(|a| {
                a.iter()
                    .all(|x| is_zero(&x["used"]) && is_zero(&x["offered"]))
            })
            && offers["offers"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    if r.is_err() {
        let (_, agents) = leader.get("/api/v1/agents").await;
        let (_, offers) = leader.get("/api/v1/offers").await;
        panic!("books not back to zero: agents {agents}\noffers {offers}");
    }
}

/// p50 and max of `xs` (sorted in place).
pub fn p50_max(xs: &mut [Duration]) -> (Duration, Duration) {
    xs.sort();
    (xs[xs.len() / 2], xs[xs.len() - 1])
}
