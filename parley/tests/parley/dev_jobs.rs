//! `coordinator --dev` starts the jobs service too: on `--dev-jobs-port`, a submitted array
//! runs on the dev cluster's local agents to success, and SIGTERM stops everything.

#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use testkit::wait_until;

const WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_the_jobs_service() {
    let dir = tempfile::tempdir().unwrap();
    let port = testkit::free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .args(["--dev", "--in-memory", "--listen", "127.0.0.1:0"])
        .args(["--dev-jobs-port", &port.to_string(), "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let jobs = format!("http://127.0.0.1:{port}/api/v1/jobs");
    let http = reqwest::Client::new();
    wait_until(WITHIN, "the jobs API", || async {
        let r = http.get(&jobs).send().await.ok()?;
        r.status().is_success().then_some(())
    })
    .await
    .unwrap();
    let spec = "name = \"dev\"\ncount = 3\ncommand = \"test -n \\\"$PARLEY_TASK_INDEX\\\"\"\n\
                [resources]\ncpus = 0.01\nmem = 8\n";
    let r = http
        .post(&jobs)
        .header("content-type", "application/toml")
        .body(spec)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    let view: serde_json::Value = wait_until(WITHIN, "job dev done", || async {
        let v: serde_json::Value = http
            .get(format!("{jobs}/dev"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (v["state"] != "active" && v["state"] != "waiting").then_some(v)
    })
    .await
    .unwrap();
    assert_eq!(view["state"], "succeeded", "{view:#}");
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(WITHIN, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}
