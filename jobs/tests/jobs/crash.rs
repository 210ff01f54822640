//! The `parley-jobs` binary killed with SIGKILL in the middle of an array and started again
//! on the same data directory: it takes its framework over, and every index succeeds exactly
//! once, none launched twice.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tests::{wait_until, Cluster};
use tokio::process::{Child, Command};

const WITHIN: Duration = Duration::from_secs(60);

/// Starts the binary; its API's base URL once it answers.
async fn spawn(coordinator: &str, data: &Path, port: u16) -> (Child, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_parley-jobs"))
        .args(["--coordinator", coordinator, "--failover-timeout-s", "120"])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}/api/v1/jobs");
    let http = reqwest::Client::new();
    wait_until(WITHIN, "the jobs API", || async {
        let r = http.get(&base).send().await.ok()?;
        r.status().is_success().then_some(())
    })
    .await
    .unwrap();
    (child, base)
}

async fn view(http: &reqwest::Client, url: &str) -> Option<Value> {
    http.get(url).send().await.ok()?.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_killed_mid_array_finishes_it_after_a_restart() {
    let cluster = Cluster::start(&["cpus=4,mem=2048", "cpus=4,mem=2048"])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let port = testkit::free_port();
    let (mut child, base) = spawn(&cluster.url, data.path(), port).await;
    let http = reqwest::Client::new();
    let spec = crate::support::logging_array("crashy", 16, 5, out.path());
    let r = http
        .post(&base)
        .header("content-type", "application/toml")
        .body(spec)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let job = format!("{base}/crashy");
    wait_until(WITHIN, "some tasks done and some running", || async {
        let v = view(&http, &job).await?;
        let t = &v["tasks"];
        (t["succeeded"].as_u64()? >= 3 && t["running"].as_u64()? >= 1).then_some(())
    })
    .await
    .unwrap();
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let framework = cluster
        .framework_named("parley-jobs")
        .await
        .unwrap()
        .unwrap();

    let (mut child, _) = spawn(&cluster.url, data.path(), port).await;
    let done = wait_until(WITHIN, "job crashy done", || async {
        let v = view(&http, &job).await?;
        (v["state"] != "active").then_some(v)
    })
    .await
    .unwrap();
    assert_eq!(done["state"], "succeeded", "{done:#}");
    assert_eq!(done["succeeded"], serde_json::json!([[0, 16]]));
    crate::support::assert_each_ran_once(out.path(), 16);
    crate::support::assert_one_framework(&cluster, framework).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}
