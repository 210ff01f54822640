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

/// etcd members (on loopback, or each in a network namespace), killed on drop.
pub struct Etcd {
    members: Vec<Proc>,
    urls: Vec<String>,
    _dir: Option<tempfile::TempDir>,
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
            member_args(
                &mut cmd,
                &format!("n{i}"),
                dir.path(),
                &client,
                &peer,
                &cluster,
            );
            members.push(Proc::spawn(cmd));
            urls.push(client);
        }
        let etcd = Etcd {
            members,
            urls,
            _dir: Some(dir),
        };
        etcd.wait_writable().await;
        etcd
    }

    /// Starts one member in the namespace of each of `hosts` of `net` (client port 2379, peer
    /// port 2380 on the host's address; data under `dir`) as one cluster, and waits until each
    /// takes writes.
    pub async fn in_namespaces(net: &super::netns::Net, hosts: &[&str], dir: &Path) -> Etcd {
        let cluster: Vec<String> = hosts
            .iter()
            .map(|h| format!("{h}=http://{}:2380", net.addr(h)))
            .collect();
        let mut members = Vec::new();
        let mut urls = Vec::new();
        for h in hosts {
            let client = format!("http://{}:2379", net.addr(h));
            let peer = format!("http://{}:2380", net.addr(h));
            let mut cmd = super::netns::Net::command_in(&net.ns(h), Path::new("etcd"));
            member_args(&mut cmd, h, dir, &client, &peer, &cluster);
            members.push(Proc::spawn(cmd));
            urls.push(client);
        }
        let etcd = Etcd {
            members,
            urls,
            _dir: None,
        };
        etcd.wait_writable().await;
        etcd
    }

    async fn wait_writable(&self) {
        let http = reqwest::Client::new();
        for (url, member) in self.urls.iter().zip(&self.members) {
            testkit::wait_for(Duration::from_secs(30), "etcd writable", || async {
                http.post(format!("{url}/v3/kv/put"))
                    .json(&json!({"key": B64.encode("/probe"), "value": B64.encode("1")}))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            })
            .await
            .unwrap_or_else(|e| panic!("{e}: {url}; its log:\n{}", member.log()));
        }
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

    /// Waits up to 10 s until a key under `prefix` ends with each of `ids` (with none, until
    /// there is any key under it): the records a coordinator writes after it has answered.
    pub async fn wait_for_keys(&self, prefix: &str, ids: &[&str]) {
        let what = format!("records {ids:?} under {prefix} in etcd");
        testkit::wait_for(std::time::Duration::from_secs(10), &what, || async {
            let keys = self.keys(prefix).await;
            !keys.is_empty() && ids.iter().all(|id| keys.iter().any(|k| k.ends_with(id)))
        })
        .await
        .unwrap();
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

/// The flags of etcd member `name` of `cluster` (`NAME=PEER_URL` each), its data in `dir/name`,
/// with the short heartbeat and election timeout the tests fail over with.
fn member_args(
    cmd: &mut Command,
    name: &str,
    dir: &Path,
    client: &str,
    peer: &str,
    cluster: &[String],
) {
    cmd.args(["--name", name, "--data-dir"])
        .arg(dir.join(name))
        .args(["--listen-client-urls", client])
        .args(["--advertise-client-urls", client])
        .args(["--listen-peer-urls", peer])
        .args(["--initial-advertise-peer-urls", peer])
        .args(["--initial-cluster", &cluster.join(",")])
        .args(["--initial-cluster-state", "new"])
        .args(["--initial-cluster-token", "parley-test"])
        .args(["--heartbeat-interval=50", "--election-timeout=500"]);
}

/// A `coordinator` process on a fixed loopback port (so a restart comes back at the same URL).
pub struct Coord {
    /// The process.
    pub proc: Proc,
    /// Its base URL.
    pub base: String,
    port: u16,
    /// How the test calls it (a CA file and a token, when it serves TLS with credentials).
    client: reqwest::Client,
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
        Self::etcd_with(etcd, prefix, lease_s, &FAST)
    }

    /// As [`Coord::etcd`], with `timings` (heartbeat flags) instead of the fast ones.
    pub fn etcd_with(etcd: &Etcd, prefix: &str, lease_s: u64, timings: &[&str]) -> Coord {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut cmd = Command::new(binary("coordinator"));
        cmd.args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--etcd", &etcd.endpoints(), "--etcd-prefix", prefix])
            .args(["--advertise-url", &base])
            .args(["--leader-lease-s", &lease_s.to_string()])
            .args(timings)
            .args(["--reregister-grace-s", "2"])
            .env("RUST_LOG", "info");
        Coord {
            proc: Proc::spawn(cmd),
            base,
            port,
            client: http(),
        }
    }

    /// `coordinator --data-dir DIR` (the embedded redb registry) on `port` (0: a free one).
    pub fn redb(data_dir: &Path, port: u16) -> Coord {
        Self::redb_with(data_dir, port, &FAST)
    }

    /// As [`Coord::redb`], with `timings` (heartbeat flags) instead of the fast ones.
    pub fn redb_with(data_dir: &Path, port: u16, timings: &[&str]) -> Coord {
        let port = if port == 0 { free_port() } else { port };
        let mut cmd = Command::new(binary("coordinator"));
        cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .args(timings)
            .args(["--reregister-grace-s", "1"])
            .env("RUST_LOG", "info");
        Coord {
            proc: Proc::spawn(cmd),
            base: format!("http://127.0.0.1:{port}"),
            port,
            client: http(),
        }
    }

    /// `coordinator ARGS` in network namespace `ns`, listening on every address of it at
    /// `port`; `base` is how the test reaches it.
    pub fn in_namespace(ns: &str, base: &str, port: u16, args: &[String]) -> Coord {
        let mut all = vec!["--listen".to_owned(), format!("0.0.0.0:{port}")];
        all.extend_from_slice(args);
        Self::in_namespace_with(ns, base, port, &all, http())
    }

    /// `coordinator ARGS` in network namespace `ns` (its listen address in `args` or its
    /// `--config` file), reached by the test at `base` (port `port`) through `client`.
    pub fn in_namespace_with(
        ns: &str,
        base: &str,
        port: u16,
        args: &[String],
        client: reqwest::Client,
    ) -> Coord {
        let mut cmd = super::netns::Net::command_in(ns, &binary("coordinator"));
        cmd.args(args).env("RUST_LOG", "info");
        Coord {
            proc: Proc::spawn(cmd),
            base: base.to_owned(),
            port,
            client,
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
        let r = self.client.get(self.url("/health")).send().await.ok()?;
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
        match self.client.get(self.url(path)).send().await {
            Ok(r) => {
                let s = r.status().as_u16();
                (s, r.json().await.unwrap_or(Value::Null))
            }
            Err(e) => (0, json!(e.to_string())),
        }
    }
}

/// The path of the program `name` (`coordinator`, `agent`, `parley-jobs`): in `PARLEY_BIN_DIR`
/// when it is set (e.g. the binaries of an installed package), else the cargo-built one beside
/// this test's `coordinator` (`cargo test --workspace` builds them all).
pub fn binary(name: &str) -> PathBuf {
    let path = match std::env::var_os("PARLEY_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => PathBuf::from(env!("CARGO_BIN_EXE_coordinator")).with_file_name(name),
    };
    assert!(
        path.exists(),
        "{} is missing: build it first (cargo build --workspace --bins), or set PARLEY_BIN_DIR \
         to the directory that holds it",
        path.display()
    );
    path
}

/// An HTTP client that does not follow redirects.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// The `agent` binary (see [`binary`]).
pub fn agent_binary() -> PathBuf {
    binary("agent")
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
    /// How the test calls it (trusting its CA when it serves TLS).
    client: reqwest::Client,
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
        Self::launch_with(cmd, name, coordinators, dir, addr, 5051, &[], http())
    }

    /// As [`Agent::in_namespace`], with `extra` flags (`--resources` among them replaces the
    /// default; `--tls-cert` makes its URL `https://`), called by the test through `client`.
    pub fn in_namespace_with(
        ns: &str,
        name: &str,
        addr: &str,
        coordinators: &str,
        dir: &Path,
        extra: &[String],
        client: reqwest::Client,
    ) -> Agent {
        let cmd = super::netns::Net::command_in(ns, &agent_binary());
        Self::launch_with(cmd, name, coordinators, dir, addr, 5051, extra, client)
    }

    fn launch(name: &str, coordinators: &str, dir: &Path, port: u16) -> Agent {
        let cmd = Command::new(agent_binary());
        Self::launch_with(cmd, name, coordinators, dir, "127.0.0.1", port, &[], http())
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_with(
        mut cmd: Command,
        name: &str,
        coordinators: &str,
        dir: &Path,
        addr: &str,
        port: u16,
        extra: &[String],
        client: reqwest::Client,
    ) -> Agent {
        cmd.args(["--coordinator", coordinators])
            .args(["--listen", &format!("{addr}:{port}")]);
        if !extra.iter().any(|a| a == "--resources") {
            cmd.args(["--resources", "cpus=2,mem=2048"]);
        }
        let scheme = if extra.iter().any(|a| a == "--tls-cert") {
            "https"
        } else {
            "http"
        };
        cmd.args(extra)
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
            base: format!("{scheme}://{addr}:{port}"),
            name: name.to_owned(),
            port,
            work_dir: dir.to_path_buf(),
            coordinators: coordinators.to_owned(),
            client,
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
        let r = self
            .client
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

/// Task processes that outlive their agent (an agent killed with its group does not take its
/// tasks along: each task has a process group of its own), found by a `marker` in their command
/// lines (e.g. a path under the test's temporary directory) and SIGKILLed, with their groups,
/// on drop: so a failing test leaves none behind.
pub struct Leftovers {
    marker: String,
}

impl Leftovers {
    /// Watches for processes whose command line contains `marker`.
    pub fn new(marker: &str) -> Leftovers {
        Leftovers {
            marker: marker.to_owned(),
        }
    }

    /// The processes whose command line contains the marker, as `(pid, process group)`.
    pub fn find(&self) -> Vec<(u32, u32)> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in dir.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if !String::from_utf8_lossy(&cmdline).contains(&self.marker) {
                continue;
            }
            // `/proc/PID/stat`: "pid (comm) state ppid pgrp ..."; comm may hold spaces.
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            if let Some(pgrp) = after.split_whitespace().nth(2).and_then(|g| g.parse().ok()) {
                found.push((pid, pgrp));
            }
        }
        found
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        // Never the test's own group.
        let ours = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| {
                let rest = s.rsplit_once(')')?.1.to_owned();
                rest.split_whitespace().nth(2)?.parse::<u32>().ok()
            });
        for (pid, pgrp) in self.find() {
            let group = (Some(pgrp) != ours).then(|| format!("-{pgrp}"));
            for target in group.into_iter().chain([pid.to_string()]) {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &target])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}
