//! Real processes: etcd members, `coordinator` and `agent` processes, each in its own
//! process group, killed with the group on drop (no stray task outlives a test).

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use framework_sdk::prelude::*;
use serde_json::{json, Value};

use super::{free_port, AGENT_TOKEN};

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

    /// `coordinator ARGS` in network namespace `ns`, listening on every address of it at
    /// `port`; `base` is how the test reaches it.
    pub fn in_namespace(ns: &str, base: &str, port: u16, args: &[String]) -> Coord {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_coordinator"));
        let mut cmd = super::netns::Net::command_in(ns, &bin);
        cmd.args(["--listen", &format!("0.0.0.0:{port}")])
            .args(args)
            .env("RUST_LOG", "info");
        Coord {
            proc: Proc::spawn(cmd),
            base: base.to_owned(),
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
        "{} is missing: build it first (cargo build -p parley-agent --bin agent)",
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

    /// Starts `agent` named `name` in network namespace `ns`, listening on `addr` (port
    /// 5051), against `coordinators`, work dir `dir`.
    pub fn in_namespace(ns: &str, name: &str, addr: &str, coordinators: &str, dir: &Path) -> Agent {
        let cmd = super::netns::Net::command_in(ns, &agent_binary());
        Self::launch_with(cmd, name, coordinators, dir, addr, 5051)
    }

    fn launch(name: &str, coordinators: &str, dir: &Path, port: u16) -> Agent {
        let cmd = Command::new(agent_binary());
        Self::launch_with(cmd, name, coordinators, dir, "127.0.0.1", port)
    }

    fn launch_with(
        mut cmd: Command,
        name: &str,
        coordinators: &str,
        dir: &Path,
        addr: &str,
        port: u16,
    ) -> Agent {
        cmd.args(["--coordinator", coordinators])
            .args(["--listen", &format!("{addr}:{port}")])
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
            base: format!("http://{addr}:{port}"),
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
