//! The jobs commands (`run`, `jobs`, `job status|stop|delete`) against a jobs service on a
//! real cluster: `run --wait` prints progress and its exit code says whether the job
//! succeeded, `job status` shows failed attempts with their exit codes, `--json` is the API's
//! JSON, and an unreachable service is exit code 3.
#![allow(clippy::unwrap_used)]

use crate::support::{binary, ctl, jobs_service, ok, texts};
use parleyctl::{CtlError, EXIT_API, EXIT_UNREACHABLE};
use tests::Cluster;

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_wait_status_stop_and_delete() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let (jobs, jobs_url, _data) = jobs_service(&cluster).await;
    let url = cluster.url.as_str();
    let with = |args: &[&str]| -> Vec<String> {
        let mut v = vec!["--jobs-url".to_owned(), jobs_url.clone()];
        v.extend(args.iter().map(|a| (*a).to_owned()));
        v
    };

    // The README's example runs to success.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/jobs/array.toml");
    let out = ok(url, &refs(&with(&["run", example, "--wait"]))).await;
    assert!(out.contains("job hello-array submitted"), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .contains("succeeded (20/20 succeeded)"),
        "{out}"
    );

    // A service is waited for until every replica runs.
    let service = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/jobs/service.toml");
    let out = ok(url, &refs(&with(&["run", service, "--wait"]))).await;
    assert!(
        out.lines()
            .last()
            .unwrap()
            .contains("web: active (0/2 succeeded, 2 running)"),
        "{out}"
    );
    ok(url, &refs(&with(&["job", "stop", "web"]))).await;

    // A task's output, through the coordinator.
    let logs = ok(
        url,
        &refs(&with(&["job", "logs", "hello-array", "--index", "7"])),
    )
    .await;
    assert!(logs.starts_with("task 7 of hello-array on "), "{logs}");

    // A job that fails: exit code 1, the reason, and the attempts in `job status`.
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.json");
    std::fs::write(
        &spec,
        r#"{"name": "bad", "command": "exit 9", "count": 2, "resources": {"cpus": 0.1, "mem": 16}}"#,
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let (result, out) = ctl(url, &refs(&with(&["run", spec, "--wait"]))).await;
    let err = result.unwrap_err();
    assert_eq!(err.exit_code(), EXIT_API, "{err}");
    assert!(err.to_string().contains("exit code 9"), "{err}\n{out}");
    let status = ok(url, &refs(&with(&["job", "status", "bad"]))).await;
    assert!(status.starts_with("job bad: failed"), "{status}");
    assert!(status.contains("failed attempts:"), "{status}");
    let rows: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with(char::is_numeric) && l.contains(" 9 "))
        .collect();
    assert_eq!(rows.len(), 2, "{status}");

    // A spec refused by the service names the field.
    let (result, _) = ctl(url, &refs(&with(&["run", spec]))).await;
    assert!(
        matches!(&result, Err(CtlError::Api { status: 409, .. })),
        "{result:?}"
    );

    // The list, as a table and as JSON.
    let list = ok(url, &refs(&with(&["jobs"]))).await;
    assert!(list.starts_with("NAME"), "{list}");
    assert!(
        list.contains("hello-array") && list.contains("20/20"),
        "{list}"
    );
    let raw = ok(url, &refs(&with(&["--json", "jobs"]))).await;
    let value: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        value["jobs"].as_array().unwrap().len(),
        3,
        "hello-array, web and bad"
    );

    // A batch job has no replicas to scale.
    let (result, _) = ctl(url, &refs(&with(&["job", "scale", "bad", "2"]))).await;
    assert!(
        matches!(&result, Err(CtlError::Api { status: 409, code, .. }) if code == "not_a_service"),
        "{result:?}"
    );

    // Stop a long job, then delete it.
    let long = dir.path().join("long.toml");
    std::fs::write(
        &long,
        "name = \"long\"\ncommand = \"sleep 600\"\n[resources]\ncpus = 0.1\nmem = 16\n",
    )
    .unwrap();
    ok(url, &refs(&with(&["run", long.to_str().unwrap()]))).await;
    let stopped = ok(url, &refs(&with(&["job", "stop", "long"]))).await;
    assert_eq!(stopped, "job long stopped\n");
    let deleted = ok(url, &refs(&with(&["job", "delete", "long"]))).await;
    assert_eq!(deleted, "job long deleted\n");
    let (result, _) = ctl(url, &refs(&with(&["job", "status", "long"]))).await;
    assert!(
        matches!(&result, Err(CtlError::Api { status: 404, .. })),
        "{result:?}"
    );

    jobs.stop().await.unwrap();
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_jobs_service_is_exit_code_3() {
    let dead = tests::fake_leader::dead_url().await.unwrap();
    let out = binary(&["--jobs-url", &dead, "jobs"], &[]).await;
    let (_, err) = texts(&out);
    assert_eq!(out.status.code(), Some(EXIT_UNREACHABLE), "{err}");
    assert!(
        err.contains("jobs service") && err.contains("--jobs-url"),
        "{err}"
    );
}
