//! The durable registry with the real `coordinator` binary: a coordinator killed with SIGKILL
//! comes back on the same data dir with every framework, removal and weight it had answered for,
//! and a second coordinator on a data dir in use is refused with a one-line error.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A `coordinator` process and its base URL.
struct Process {
    child: Child,
    base: String,
}

impl Process {
    /// Starts `coordinator --data-dir DIR` on a free loopback port; returns once it listens.
    fn start(data_dir: &Path) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_coordinator"))
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Read the log until the listening line; keep draining it afterwards so the process
        // never blocks on a full pipe.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("coordinator listening") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line);
                    }
                }
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the coordinator did not say where it listens");
        let at = line.find("127.0.0.1:").unwrap();
        let port: String = line[at + "127.0.0.1:".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Process {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGKILL: no shutdown path runs.
    fn crash(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_coordinator_comes_back_with_everything_it_answered_for() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let first = Process::start(dir.path());

    let mut ids = Vec::new();
    for i in 0..20 {
        let role = if i % 2 == 0 { "eng/batch" } else { "sci" };
        let (status, body) = send(
            http.post(first.url("/api/v1/frameworks"))
                .json(&json!({"name": format!("fw{i}"), "role": role, "failover_timeout_s": 3600})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        ids.push((body["framework_id"].as_str().unwrap().to_owned(), i, role));
    }
    let (status, _) = send(
        http.put(first.url("/api/v1/roles/eng"))
            .json(&json!({"weight": 4})),
    )
    .await;
    assert_eq!(status, 200);
    let (removed, _, _) = ids.pop().unwrap();
    let (status, _) = send(http.delete(first.url(&format!("/api/v1/frameworks/{removed}")))).await;
    assert_eq!(status, 200);
    first.crash();

    let second = Process::start(dir.path());
    let (status, body) = send(http.get(second.url("/api/v1/frameworks"))).await;
    assert_eq!(status, 200);
    let listed = body["frameworks"].as_array().unwrap();
    assert_eq!(listed.len(), ids.len(), "{body}");
    for (id, i, role) in &ids {
        let fw = listed
            .iter()
            .find(|f| f["framework_id"] == json!(id))
            .unwrap_or_else(|| panic!("framework {id} is missing: {body}"));
        assert_eq!(fw["name"], json!(format!("fw{i}")));
        assert_eq!(fw["role"], json!(role));
        assert_eq!(fw["state"], "disconnected");
        assert_eq!(fw["failover_timeout_s"], json!(3600.0));
    }
    let (_, roles) = send(http.get(second.url("/api/v1/roles"))).await;
    let eng = roles["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "eng")
        .unwrap();
    assert_eq!(eng["weight"], json!(4.0));
    // The removed framework stays removed; a kept one re-registers with its id.
    let (status, body) = send(
        http.post(second.url("/api/v1/frameworks"))
            .json(&json!({"name": "fw19", "role": "sci", "framework_id": removed})),
    )
    .await;
    assert!((400..500).contains(&status), "{status} {body}");
    let (id, i, role) = &ids[0];
    let (status, body) = send(
        http.post(second.url("/api/v1/frameworks"))
            .json(&json!({"name": format!("fw{i}"), "role": role, "framework_id": id})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["framework_id"], json!(id));
}

#[tokio::test]
async fn a_second_coordinator_on_a_data_dir_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Process::start(dir.path());
    let mut second = Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It must exit by itself, at start: poll with a deadline rather than wait forever.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = second.kill();
            panic!("a second coordinator on the same data dir kept running");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("registry.redb is in use by another process"),
        "{stderr}"
    );
}
