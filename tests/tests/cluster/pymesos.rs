//! Mesos API acceptance: the unmodified `pymesos` 0.3.15 (from PyPI, in a virtualenv made by
//! `tests/pymesos/setup-venv.sh`, named by `PARLEY_PYMESOS_PYTHON`) runs the scheduler
//! `tests/pymesos/scheduler.py` against a real coordinator and a real agent: shell tasks that
//! finish (one reading an environment variable), one that fails, an argv task, a sleeper it
//! kills, declines with a filter, explicit and implicit reconciliation, and a teardown. The
//! test checks the script's own report and Parley's REST views (tasks, frameworks, roles,
//! `explain`). Without `PARLEY_PYMESOS_PYTHON` it says why and skips, unless `PARLEY_CI=1`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use protocol::messages::FrameworkExplanation;
use protocol::{FrameworkId, TaskState};
use serde_json::Value;
use tests::{wait_until, Cluster, WITHIN};

/// How long the script may take to do everything (a debug build on a loaded machine).
const SCRIPT_WITHIN: Duration = Duration::from_secs(90);

/// The venv's python, or `None` (skip) when not set up outside CI.
fn pymesos_python() -> Option<String> {
    match std::env::var("PARLEY_PYMESOS_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ if tests::in_ci() => {
            panic!("PARLEY_CI=1 but PARLEY_PYMESOS_PYTHON is not set: .ci/run installs pymesos")
        }
        _ => {
            eprintln!(
                "skipping: PARLEY_PYMESOS_PYTHON is not set; run tests/pymesos/setup-venv.sh and \
                 export PARLEY_PYMESOS_PYTHON=<the python it prints>"
            );
            None
        }
    }
}

fn stderr_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("scheduler.log")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmodified_pymesos_launches_kills_declines_reconciles_and_tears_down() {
    let Some(python) = pymesos_python() else {
        return;
    };
    let cluster = Cluster::builder()
        .agent("cpus=2,mem=1024")
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("report.json");
    let go = dir.path().join("go");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/pymesos/scheduler.py");
    let master = cluster.url.trim_start_matches("http://").to_owned();
    let log = std::fs::File::create(dir.path().join("scheduler.log")).unwrap();
    let mut child = tokio::process::Command::new(&python)
        .arg(script)
        .arg(&master)
        .arg(&report_path)
        .arg(&go)
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    // The script writes its report once it has seen every outcome (or given up).
    let written = wait_until(SCRIPT_WITHIN, "the scheduler's report", || {
        let path = report_path.clone();
        async move { path.exists().then_some(()) }
    })
    .await;
    assert!(
        written.is_ok(),
        "no report from the scheduler; its log:\n{}",
        stderr_of(dir.path())
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let log = stderr_of(dir.path());
    assert_eq!(report["ok"], true, "report {report}\nlog:\n{log}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    assert_eq!(report["version"], "1.11.0");
    let last = |task: &str| {
        report["states"][task]
            .as_array()
            .and_then(|s| s.last())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    for (task, state) in [
        ("hello-0", "TASK_FINISHED"),
        ("hello-1", "TASK_FINISHED"),
        ("argv-0", "TASK_FINISHED"),
        ("fails-0", "TASK_FAILED"),
        ("sleeper", "TASK_KILLED"),
    ] {
        assert_eq!(last(task), state, "{task}: {report}");
    }
    assert_eq!(report["reconciled"]["hello-0"][0], "TASK_FINISHED");
    assert_eq!(report["reconciled"]["no-such-task"][0], "TASK_LOST");
    assert!(report["declined"].as_u64().unwrap() >= 1, "{report}");

    // Parley's own views hold the same outcomes.
    let id: FrameworkId = report["framework_id"].as_str().unwrap().parse().unwrap();
    let tasks = cluster.tasks_of(id).await.unwrap();
    let state_of = |task: &str| {
        tasks
            .iter()
            .find(|t| t.task_id.as_str() == task)
            .map(|t| t.state)
    };
    assert_eq!(state_of("hello-0"), Some(TaskState::Finished));
    assert_eq!(state_of("hello-1"), Some(TaskState::Finished));
    assert_eq!(state_of("argv-0"), Some(TaskState::Finished));
    assert_eq!(state_of("fails-0"), Some(TaskState::Failed));
    assert_eq!(state_of("sleeper"), Some(TaskState::Killed));
    let frameworks = cluster.frameworks().await.unwrap().frameworks;
    let fw = frameworks.iter().find(|f| f.framework_id == id).unwrap();
    assert_eq!(fw.name, "pymesos-acceptance");
    assert_eq!(
        fw.role.as_str(),
        "default",
        "Mesos' \"*\" is the default role"
    );
    // It declines every offer it has no use for with a 600 s filter: explain says so.
    wait_until(
        WITHIN,
        "explain: the agent filtered by the framework's decline",
        || {
            let cluster = &cluster;
            async move {
                let e: FrameworkExplanation = cluster
                    .get(&format!("/api/v1/frameworks/{id}/explain"))
                    .await
                    .ok()?;
                (e.agents.filtered == 1).then_some(())
            }
        },
    )
    .await
    .unwrap();

    // Draining the agent of its "stayer" task reaches it as a Mesos inverse offer for that
    // agent whose unavailability starts at the drain's deadline; it accepts it (202).
    let stayer_agent = wait_until(WITHIN, "the stayer task", || {
        let cluster = &cluster;
        async move {
            let tasks = cluster.tasks_of(id).await.ok()?;
            tasks
                .iter()
                .find(|t| t.task_id.as_str() == "stayer" && !t.state.is_terminal())
                .map(|t| t.agent_id)
        }
    })
    .await
    .unwrap();
    let (status, drained) = cluster
        .send_json(
            reqwest::Method::POST,
            &format!("/api/v1/agents/{stayer_agent}/drain"),
            r#"{"deadline_s": 3600}"#,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{drained}");
    let drained: protocol::maintenance::AgentMaintenance = serde_json::from_value(drained).unwrap();
    let inverse_path = dir.path().join("report.json.inverse");
    let inverse = wait_until(SCRIPT_WITHIN, "the inverse offer", || {
        let path = inverse_path.clone();
        async move {
            let text = std::fs::read_to_string(&path).ok()?;
            serde_json::from_str::<Vec<Value>>(&text).ok()
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", stderr_of(dir.path())));
    let offer = &inverse[0];
    assert_eq!(
        offer["agent_id"]["value"],
        stayer_agent.to_string(),
        "{offer}"
    );
    assert_eq!(
        offer["unavailability"]["start"]["nanoseconds"].as_i64(),
        drained.deadline.and_then(|d| d.timestamp_nanos_opt()),
        "{offer}"
    );

    // Let it stop: driver.stop() sends TEARDOWN, which removes the framework.
    std::fs::write(&go, b"").unwrap();
    let status = tokio::time::timeout(SCRIPT_WITHIN, child.wait())
        .await
        .expect("the scheduler did not exit after its teardown")
        .unwrap();
    assert!(
        status.success(),
        "{status}; log:\n{}",
        stderr_of(dir.path())
    );
    wait_until(WITHIN, "the framework torn down", || {
        let cluster = &cluster;
        async move {
            let list = cluster.frameworks().await.ok()?;
            (!list.frameworks.iter().any(|f| f.framework_id == id)).then_some(())
        }
    })
    .await
    .unwrap();
    cluster.shutdown().await.unwrap();
}
