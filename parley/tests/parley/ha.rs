//! High availability with real processes: real etcd members (Debian's `etcd`, started by the
//! test on free loopback ports with temp data dirs) and the built `coordinator` binary.
//!
//! - two coordinators on one etcd: one leads, the other says follower and answers `307` to the
//!   leader, and their `/metrics` say `parley_leader 1` and `0`; a graceful stop of the leader
//!   (SIGTERM: resign, revoke) hands over at once;
//! - a SIGKILLed leader on a 3-member etcd: the follower leads within about the lease, with the
//!   framework registered earlier (same id); an agent that re-registers keeps its task, and the
//!   first offer follows. `PARLEY_HA_RUNS=N` repeats it and prints the failover times;
//! - a SIGKILLed leader with a long lease: the follower, which saw the leader's address accept
//!   connections, sees it refuse them, revokes the lease and leads well before it would expire;
//! - fencing: a leader whose lease is revoked behind its back fails its next write (503,
//!   nothing written) and exits with code 3; a leader paused past its lease (SIGSTOP) wakes up
//!   after another took over and exits without writing.
//!
//! Without `etcd` on the PATH each test prints why it skips, unless `PARLEY_CI=1`.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{free_port, have_etcd, Etcd, SERIAL};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};

/// A `coordinator --etcd ...` process.
struct Coord {
    child: Child,
    base: String,
    log: Arc<Mutex<String>>,
}

impl Coord {
    fn start(etcd: &Etcd, prefix: &str, lease_s: u64) -> Coord {
        Self::start_with(etcd, prefix, lease_s, &[])
    }

    /// As [`Coord::start`], with `extra` flags.
    fn start_with(etcd: &Etcd, prefix: &str, lease_s: u64, extra: &[&str]) -> Coord {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--etcd", &etcd.endpoints(), "--etcd-prefix", prefix])
            .args(["--advertise-url", &base])
            .args(["--leader-lease-s", &lease_s.to_string()])
            .args(["--reregister-grace-s", "2"])
            .args(extra)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
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
        Coord { child, base, log }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    async fn health(&self) -> Option<Value> {
        let r = reqwest::get(self.url("/health")).await.ok()?;
        r.json().await.ok()
    }

    /// Waits until the process has logged `needle`.
    async fn wait_log(&self, needle: &str, timeout: Duration) {
        let what = format!("{} to log {needle:?}", self.base);
        let r = testkit::wait_for(timeout, &what, || async {
            self.log.lock().unwrap().contains(needle)
        })
        .await;
        if r.is_err() {
            panic!("{what}: timed out; log:\n{}", self.log.lock().unwrap());
        }
    }

    async fn wait_role(&self, role: &str, timeout: Duration) {
        let what = format!("{} to be {role}", self.base);
        let r = testkit::wait_for(timeout, &what, || async {
            self.health().await.is_some_and(|h| h["role"] == role)
        })
        .await;
        if r.is_err() {
            panic!("{what}: timed out; log:\n{}", self.log.lock().unwrap());
        }
    }

    /// Waits for the process to exit by itself; its exit code.
    async fn exit_code(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit; log:\n{}",
                self.base,
                self.log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Coord {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value, reqwest::header::HeaderMap) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, resp.json().await.unwrap_or(Value::Null), headers)
}

async fn register_framework(http: &reqwest::Client, c: &Coord) -> String {
    let (status, body, _) = send(
        http.post(c.url("/api/v1/frameworks"))
            .json(&json!({"name": "ha", "role": "eng", "failover_timeout_s": 600})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["framework_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_the_follower_redirects_and_a_graceful_stop_hands_over_at_once() {
    if !have_etcd("ha_redirect") {
        return;
    }
    let _one = SERIAL.lock().await;
    let etcd = Etcd::start(1).await;
    let http = client();
    // Agents are lost after 1 s without heartbeats (or, after a take-over, re-registration).
    let fast = [
        "--agent-heartbeat-interval",
        "0.5",
        "--max-missed-heartbeats",
        "2",
    ];
    let a = Coord::start_with(&etcd, "/t1", 6, &fast);
    a.wait_role("leader", Duration::from_secs(20)).await;
    let b = Coord::start_with(&etcd, "/t1", 6, &fast);
    b.wait_role("follower", Duration::from_secs(20)).await;
    // A follower learns who leads from etcd within a poll or two.
    testkit::wait_for(
        Duration::from_secs(5),
        "the follower to know the leader",
        || async {
            b.health()
                .await
                .is_some_and(|h| h["leader"] == json!(a.base))
        },
    )
    .await
    .unwrap();
    assert_eq!(a.health().await.unwrap()["leader"], json!(a.base));

    // Every API call to the follower is redirected, path and query kept.
    let (status, body, headers) = send(http.get(b.url("/api/v1/tasks?framework_id=x&y=1"))).await;
    assert_eq!(status, 307, "{body}");
    assert_eq!(
        headers["location"],
        format!("{}/api/v1/tasks?framework_id=x&y=1", a.base).as_str()
    );
    assert_eq!(body, json!({"code": "not_leader", "leader": a.base}));
    let (status, _, headers) = send(
        http.post(b.url("/api/v1/frameworks"))
            .json(&json!({"name": "x", "role": "eng"})),
    )
    .await;
    assert_eq!(status, 307);
    assert_eq!(
        headers["location"],
        format!("{}/api/v1/frameworks", a.base).as_str()
    );
    // /metrics is each coordinator's own: the follower says it does not lead, the leader
    // that it does (what an alert on "no leader" or "two leaders" sums).
    let metrics = |c: &Coord| {
        let get = http.get(c.url("/metrics"));
        async move {
            let resp = get.send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            resp.text().await.unwrap()
        }
    };
    let text = metrics(&b).await;
    assert!(text.lines().any(|l| l == "parley_leader 0"), "{text}");
    let text = metrics(&a).await;
    assert!(text.lines().any(|l| l == "parley_leader 1"), "{text}");
    // The leader serves; the redirect followed by a client lands there.
    let id = register_framework(&http, &a).await;
    // An agent the registry keeps, which will not come back after the hand-over.
    let (status, body, _) = send(http.post(a.url("/api/v1/agents")).json(&json!({
        "hostname": "gone", "endpoint": "http://127.0.0.1:9", "resources": {"cpus": 1}
    })))
    .await;
    assert_eq!(status, 201, "{body}");
    let agent = body["agent_id"].as_str().unwrap().to_owned();
    etcd.wait_for_keys("/t1/registry/agents/", &[&agent]).await;

    // SIGTERM: the leader resigns and revokes its lease, so the follower leads well before
    // the 6 s lease would have expired.
    let stopped = Instant::now();
    a.signal("TERM");
    b.wait_role("leader", Duration::from_secs(4)).await;
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(3), "hand-over took {took:?}");
    eprintln!("graceful hand-over: {took:?}");
    let (status, body, _) = send(http.get(b.url("/api/v1/frameworks"))).await;
    assert_eq!(status, 200);
    assert_eq!(body["frameworks"][0]["framework_id"], json!(id), "{body}");
    // The agent that never re-registers is reported lost by the new leader, not forgotten.
    testkit::wait_for(
        Duration::from_secs(10),
        "the stored agent reported lost",
        || async {
            let (_, body, _) = send(http.get(b.url("/api/v1/agents"))).await;
            body["agents"].as_array().is_some_and(|agents| {
                agents.iter().any(|x| {
                    x["agent_id"] == json!(agent)
                        && x["state"] == "lost"
                        && x["endpoint"] == "http://127.0.0.1:9"
                })
            })
        },
    )
    .await
    .unwrap();
}

/// One failover: returns (kill → new leader's /health, kill → first offer).
async fn failover_once(etcd: &Etcd, prefix: &str) -> (Duration, Duration) {
    let http = client();
    let a = Coord::start(etcd, prefix, 3);
    a.wait_role("leader", Duration::from_secs(20)).await;
    let b = Coord::start(etcd, prefix, 3);
    b.wait_role("follower", Duration::from_secs(20)).await;

    let fw = register_framework(&http, &a).await;
    let (status, body, _) = send(http.post(a.url("/api/v1/agents")).json(&json!({
        "hostname": "node1", "endpoint": "http://127.0.0.1:9", "resources": {"cpus": 4, "mem": 1024}
    })))
    .await;
    assert_eq!(status, 201, "{body}");
    let agent = body["agent_id"].as_str().unwrap().to_owned();
    etcd.wait_for_keys(&format!("{prefix}/registry/"), &[&agent, &fw])
        .await;

    let mut a = a;
    let killed = Instant::now();
    a.signal("KILL");
    let _ = a.exit_code(Duration::from_secs(5)).await;
    b.wait_role("leader", Duration::from_secs(15)).await;
    let to_leader = killed.elapsed();

    // The framework is back with its id; the agent re-registers with its running task.
    let (status, body, _) = send(http.get(b.url("/api/v1/frameworks"))).await;
    assert_eq!(status, 200);
    assert_eq!(body["frameworks"][0]["framework_id"], json!(fw), "{body}");
    let (status, body, _) = send(http.post(b.url("/api/v1/frameworks")).json(
        &json!({"name": "ha", "role": "eng", "framework_id": fw, "failover_timeout_s": 600}),
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    let mut events =
        testkit::SseReader::open(&http, &b.url(&format!("/api/v1/frameworks/{fw}/events")))
            .await
            .unwrap();
    let task = json!({
        "task_id": "t1", "framework_id": fw, "agent_id": agent, "state": "running",
        "update_id": "7d1a2b7c-6c1e-4c53-9a53-0a5e1b6f1d11", "timestamp": "2026-11-23T00:00:00Z",
        "resources": {"cpus": 1, "mem": 128}
    });
    let (status, body, _) = send(http.post(b.url("/api/v1/agents")).json(&json!({
        "hostname": "node1", "endpoint": "http://127.0.0.1:9", "resources": {"cpus": 4, "mem": 1024},
        "agent_id": agent, "tasks": [task]
    })))
    .await;
    assert!(status == 200 || status == 201, "{status} {body}");
    let deadline = testkit::deadline_in(Duration::from_secs(15));
    loop {
        let frame = events.next_frame(deadline).await.unwrap();
        if frame.event == "offers" {
            let offers: Value = serde_json::from_str(&frame.data).unwrap();
            // What the task holds is not offered again.
            let cpus = &offers["offers"][0]["resources"]["cpus"];
            assert_eq!(cpus, &json!(3), "{offers}");
            break;
        }
    }
    let to_offer = killed.elapsed();
    let (_, tasks, _) = send(http.get(b.url(&format!("/api/v1/tasks?framework_id={fw}")))).await;
    assert_eq!(tasks["tasks"][0]["state"], "running", "{tasks}");
    (to_leader, to_offer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_fails_over_with_its_frameworks_and_agents() {
    if !have_etcd("ha_failover") {
        return;
    }
    let _one = SERIAL.lock().await;
    let etcd = Etcd::start(3).await;
    let runs: usize = std::env::var("PARLEY_HA_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let mut leader = Vec::new();
    let mut offer = Vec::new();
    for run in 0..runs {
        let (l, o) = failover_once(&etcd, &format!("/f{run}")).await;
        eprintln!("run {run}: kill -> leader {l:?}, kill -> first offer {o:?}");
        leader.push(l);
        offer.push(o);
        // Lease 3 s: the new leader within the lease plus the campaign's wake-up.
        assert!(l < Duration::from_secs(6), "failover took {l:?}");
    }
    leader.sort();
    offer.sort();
    eprintln!(
        "failover over {runs} runs (lease 3 s): to leader p50 {:?} max {:?}; to first offer p50 {:?} max {:?}",
        leader[runs / 2],
        leader[runs - 1],
        offer[runs / 2],
        offer[runs - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_long_before_its_lease_runs_out() {
    if !have_etcd("ha_probe") {
        return;
    }
    let _one = SERIAL.lock().await;
    let etcd = Etcd::start(1).await;
    // A 60 s lease: without the probe, the follower would wait a minute.
    let mut a = Coord::start(&etcd, "/probe", 60);
    a.wait_role("leader", Duration::from_secs(20)).await;
    let b = Coord::start(&etcd, "/probe", 60);
    b.wait_role("follower", Duration::from_secs(20)).await;
    b.wait_log("probing it", Duration::from_secs(20)).await;
    let id = register_framework(&client(), &a).await;

    a.signal("KILL");
    let _ = a.exit_code(Duration::from_secs(5)).await;
    b.wait_role("leader", Duration::from_secs(30)).await;
    b.wait_log("revoked the leader's lease", Duration::from_secs(5))
        .await;
    let log = b.log.lock().unwrap().clone();
    assert!(log.contains("refused 3 connections in a row"), "{log}");
    // The new leader has the old one's books.
    let (status, body, _) = send(client().get(b.url("/api/v1/frameworks"))).await;
    assert_eq!(status, 200);
    assert_eq!(body["frameworks"][0]["framework_id"], json!(id), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leader_cannot_write_and_steps_down() {
    if !have_etcd("ha_fencing") {
        return;
    }
    let _one = SERIAL.lock().await;
    let etcd = Etcd::start(1).await;
    let http = client();

    // 1. The lease revoked behind the leader's back (it renews only every 10 s): its next write
    //    fails the fencing compare, is answered 503, writes nothing, and the process exits 3.
    //    (A 30 s lease: its keep-alive, every 10 s, does not notice first.)
    let mut a = Coord::start(&etcd, "/fence", 30);
    a.wait_role("leader", Duration::from_secs(20)).await;
    let leader = etcd
        .post(
            "/v3/election/leader",
            json!({"name": B64.encode("/fence/leader")}),
        )
        .await;
    let lease = leader["kv"]["lease"].as_str().unwrap().to_owned();
    etcd.post("/v3/lease/revoke", json!({"ID": lease})).await;
    let (status, body, _) = send(
        http.post(a.url("/api/v1/frameworks"))
            .json(&json!({"name": "late", "role": "eng"})),
    )
    .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(a.exit_code(Duration::from_secs(10)).await, Some(3));
    let log = a.log.lock().unwrap().clone();
    assert!(log.contains("fencing compare"), "{log}");
    assert!(log.contains("lost the leadership"), "{log}");
    assert_eq!(etcd.keys("/fence/registry/").await, Vec::<String>::new());

    // 2. A leader paused past its lease (SIGSTOP) while another takes over wakes up
    //    (SIGCONT), writes nothing and exits; the new leader's books are intact.
    let b = Coord::start(&etcd, "/fence", 2);
    b.wait_role("leader", Duration::from_secs(20)).await;
    let c = Coord::start(&etcd, "/fence", 2);
    c.wait_role("follower", Duration::from_secs(20)).await;
    b.signal("STOP");
    c.wait_role("leader", Duration::from_secs(15)).await;
    let id = register_framework(&http, &c).await;
    b.signal("CONT");
    let mut b = b;
    assert_eq!(b.exit_code(Duration::from_secs(10)).await, Some(3));
    let keys = etcd.keys("/fence/registry/").await;
    assert_eq!(keys, vec![format!("/fence/registry/frameworks/{id}")]);
    assert_eq!(c.health().await.unwrap()["role"], "leader");
}

#[test]
fn bad_ha_flags_are_one_line_errors_naming_the_flag() {
    for (args, flag) in [
        (vec!["--etcd", "http://127.0.0.1:1"], "--advertise-url"),
        (
            vec!["--advertise-url", "http://127.0.0.1:5050"],
            "--advertise-url",
        ),
        (
            vec!["--etcd", "127.0.0.1:2379", "--advertise-url", "http://a:1"],
            "--etcd",
        ),
        (
            vec![
                "--etcd",
                "http://e:1",
                "--advertise-url",
                "http://a:1",
                "--leader-lease-s",
                "0",
            ],
            "--leader-lease-s",
        ),
        (
            vec![
                "--etcd",
                "http://e:1",
                "--advertise-url",
                "http://a:1",
                "--etcd-prefix",
                "x",
            ],
            "--etcd-prefix",
        ),
        (
            vec![
                "--etcd",
                "http://e:1",
                "--advertise-url",
                "http://a:1",
                "--leader-lease-s",
                "3",
                "--leader-renew-deadline-ms",
                "3000",
            ],
            "--leader-renew-deadline-ms",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["--listen", "127.0.0.1:0", "--in-memory"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} should name {flag}: {stderr}"
        );
    }
}
