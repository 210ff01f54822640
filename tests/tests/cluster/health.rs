//! End to end: task health checks through real HTTP and a real agent.
//! A task whose check starts failing is reported unhealthy (once, on the framework's stream, in
//! `/api/v1/tasks` and `/metrics`); the `service` example kills and replaces such a task and
//! the replacement runs healthy; a bad `health_check` is refused at accept and launches nothing;
//! simulated tasks with a check are healthy; a restarted agent checks the tasks it re-adopts.
#![allow(clippy::unwrap_used)]

use protocol::health::HealthCheck;
use protocol::{CommandSpec, FrameworkId, TaskState};
use reqwest::StatusCode;
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};
use tokio_util::sync::CancellationToken;

/// Creates `healthy` in its sandbox, removes it after `after_s`, then sleeps.
fn flaky(after_s: u32) -> String {
    format!("touch healthy; sleep {after_s}; rm -f healthy; sleep 600")
}

/// `test -f healthy` every 0.2 s; two failures in a row make the task unhealthy.
fn file_check() -> HealthCheck {
    let mut check = HealthCheck::command(CommandSpec::Shell("test -f healthy".into()));
    check.interval_s = Some(0.2);
    check.timeout_s = Some(5.0);
    check.grace_period_s = Some(1.0);
    check.consecutive_failures = Some(2);
    check
}

/// One value of the coordinator's `/metrics`.
/// The coordinator's record of a framework's task.
async fn task_named(
    c: &Cluster,
    id: FrameworkId,
    name: &str,
) -> Option<protocol::messages::TaskInfo> {
    c.tasks_of(id)
        .await
        .ok()?
        .into_iter()
        .find(|t| t.task_id.as_str() == name)
}

async fn one_agent() -> Cluster {
    Cluster::builder()
        .config(tests::fast_coordinator_config())
        .agent("cpus=2,mem=512")
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_is_reported_unhealthy_once_and_counted() {
    let c = one_agent().await;
    let mut fw = TestFramework::register(&c.url, "health", "eng")
        .await
        .unwrap();
    let mut task = shell_task(
        "web",
        protocol::AgentId::new(),
        "cpus=0.5,mem=32",
        &flaky(3),
    );
    task.health_check = Some(file_check());
    fw.launch(WITHIN, task).await.unwrap();
    let healthy = fw
        .wait_update(WITHIN, "web healthy", |s| s.healthy == Some(true))
        .await
        .unwrap();
    assert_eq!(healthy.state, TaskState::Running);
    let unhealthy = fw
        .wait_update(WITHIN, "web unhealthy", |s| s.healthy == Some(false))
        .await
        .unwrap();
    assert_eq!(unhealthy.state, TaskState::Running, "still running");
    let listed = c.tasks_of(fw.id).await.unwrap();
    assert_eq!(listed[0].healthy, Some(false), "{listed:?}");
    assert_eq!(c.metric("parley_tasks_unhealthy").await, Some(1.0));
    // Changes only: one update each way, not one per check.
    let with_health: Vec<_> = fw
        .updates("web")
        .into_iter()
        .filter_map(|s| s.healthy)
        .collect();
    assert_eq!(with_health, [true, false], "{:?}", fw.updates("web"));

    fw.kill("web").await.unwrap();
    let killed = fw
        .wait_state(WITHIN, "web", TaskState::Killed)
        .await
        .unwrap();
    assert_eq!(killed.healthy, Some(false), "the latest health carries on");
    assert_eq!(c.metric("parley_tasks_unhealthy").await, Some(0.0));
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_example_replaces_an_unhealthy_replica() {
    let c = one_agent().await;
    let mut common = examples::common::CommonArgs::new(c.url.clone(), "test".parse().unwrap());
    common.failover_timeout_s = 60.0;
    // Replica 0's first task (`web-0-0`) removes its file after 2 s; later generations keep it.
    let command = format!(
        "case \"$PARLEY_TASK_ID\" in *-0-0) {} ;; *) touch healthy; sleep 600 ;; esac",
        flaky(3)
    );
    let args = examples::service::Args {
        common,
        replicas: 1,
        command,
        resources: "cpus=0.5,mem=32".parse().unwrap(),
        name: "web".into(),
        partition_timeout_s: 300.0,
        health: examples::service::HealthArgs {
            health_check: Some("test -f healthy".into()),
            health_interval_s: Some(0.2),
            health_failures: Some(2),
            health_grace_s: Some(1.0),
        },
    };
    let progress = examples::service::Progress::default();
    let stop = CancellationToken::new();
    let handle = tokio::spawn(examples::service::run_with_progress(
        args,
        progress.clone(),
        stop.clone().cancelled_owned(),
    ));
    let id: FrameworkId = c
        .wait_for("service registered", |c| async move {
            c.framework_named("service-web").await.ok().flatten()
        })
        .await
        .unwrap();
    let first = c
        .wait_for("web-0-0 killed as unhealthy", |c| async move {
            task_named(c, id, "web-0-0")
                .await
                .filter(|t| t.state == TaskState::Killed)
        })
        .await
        .unwrap();
    assert_eq!(first.healthy, Some(false), "{first:?}");
    let second = c
        .wait_for("web-0-1 running and healthy", |c| async move {
            task_named(c, id, "web-0-1")
                .await
                .filter(|t| t.state == TaskState::Running && t.healthy == Some(true))
        })
        .await
        .unwrap();
    assert_eq!(second.healthy, Some(true));
    let running = c
        .tasks_of(id)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| !t.state.is_terminal())
        .count();
    assert_eq!(running, 1, "the replica count is kept");
    use std::sync::atomic::Ordering::Relaxed;
    // The coordinator's books lead the framework's callbacks: wait for the example to hear it.
    let heard = progress.clone();
    tests::wait_for(WITHIN, "the example heard web-0-1 is healthy", move || {
        let heard = heard.clone();
        async move { heard.healthy.load(Relaxed) == 1 }
    })
    .await
    .unwrap();
    assert_eq!(progress.unhealthy_replaced.load(Relaxed), 1);
    stop.cancel();
    let outcome = tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.replacements, 1);
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_health_check_is_refused_and_nothing_is_launched() {
    let c = one_agent().await;
    let mut fw = TestFramework::register(&c.url, "bad", "eng").await.unwrap();
    let offer = fw.next_offers(WITHIN).await.unwrap()[0].clone();
    let accept = |check: serde_json::Value, isolation: Option<serde_json::Value>| {
        let mut task =
            serde_json::to_value(shell_task("t1", offer.agent_id, "cpus=1", "sleep 60")).unwrap();
        task["health_check"] = check;
        if let Some(iso) = isolation {
            task["isolation"] = iso;
        }
        serde_json::json!({"offer_ids": [offer.offer_id], "tasks": [task]})
    };
    let cases = [
        (
            serde_json::json!({"command": {"shell": "true"}, "interval_s": -1}),
            None,
            "health_check.interval_s",
        ),
        (
            serde_json::json!({"command": {"shell": "true"}, "consecutive_failures": 0}),
            None,
            "health_check.consecutive_failures",
        ),
        (
            serde_json::json!({"http": {"port": 70000}}),
            None,
            "health_check.http.port",
        ),
        (
            serde_json::json!({"http": {"port": 80, "path": "no-slash"}}),
            None,
            "health_check.http.path",
        ),
        (
            serde_json::json!({"command": {"shell": "true"}, "http": {"port": 80}}),
            None,
            "exactly one of command and http",
        ),
        (
            serde_json::json!({"http": {"port": 8080}}),
            Some(serde_json::json!({"network": "loopback"})),
            "health_check.http",
        ),
        (
            serde_json::json!({"command": {"shell": "true"}, "every_s": 1}),
            None,
            "every_s",
        ),
    ];
    for (check, isolation, field) in cases {
        let (status, body) = fw.post("accept", &accept(check, isolation)).await.unwrap();
        let expected = match field {
            "every_s" => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        assert_eq!(status, expected, "{field}: {body}");
        assert!(body.to_string().contains(field), "{field}: {body}");
    }
    assert!(
        c.tasks().await.unwrap().tasks.is_empty(),
        "nothing launched"
    );
    let outstanding = c.offers().await.unwrap().offers;
    assert!(outstanding.iter().any(|o| o.offer_id == offer.offer_id));
    // A good one is accepted.
    let (status, body) = fw
        .post(
            "accept",
            &accept(
                serde_json::json!({"http": {"port": 8080, "path": "/healthz"}}),
                None,
            ),
        )
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_task_with_a_check_is_reported_healthy() {
    let c = Cluster::builder()
        .config(tests::fast_coordinator_config())
        .simulated_agents(1, "cpus=2,mem=512")
        .start()
        .await
        .unwrap();
    let mut fw = TestFramework::register(&c.url, "sim", "eng").await.unwrap();
    let mut task = shell_task(
        "s1",
        protocol::AgentId::new(),
        "cpus=0.5,mem=32",
        "sleep 60",
    );
    task.health_check = Some(file_check());
    fw.launch(WITHIN, task).await.unwrap();
    let status = fw
        .wait_update(WITHIN, "s1 healthy", |s| s.healthy == Some(true))
        .await
        .unwrap();
    assert_eq!(status.state, TaskState::Running);
    let plain = shell_task(
        "s2",
        protocol::AgentId::new(),
        "cpus=0.5,mem=32",
        "sleep 60",
    );
    fw.launch(WITHIN, plain).await.unwrap();
    let running = fw
        .wait_state(WITHIN, "s2", TaskState::Running)
        .await
        .unwrap();
    assert_eq!(running.healthy, None, "no check, no health");
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_checks_the_tasks_it_re_adopts() {
    // As in `agent_reliability`: the restart must not make the agent lost on a slow machine.
    let config = coordinator::Config {
        max_missed_heartbeats: 100,
        ..tests::fast_coordinator_config()
    };
    let mut c = Cluster::builder()
        .config(config)
        .agent("cpus=2,mem=512")
        .reap_orphans(false)
        .start()
        .await
        .unwrap();
    let mut fw = TestFramework::register(&c.url, "adopt", "eng")
        .await
        .unwrap();
    let mut task = shell_task(
        "web",
        protocol::AgentId::new(),
        "cpus=0.5,mem=32",
        "touch healthy; sleep 600",
    );
    task.health_check = Some(file_check());
    fw.launch(WITHIN, task).await.unwrap();
    fw.wait_update(WITHIN, "web healthy", |s| s.healthy == Some(true))
        .await
        .unwrap();
    c.stop_agent(0).await.unwrap();
    // The file goes while the agent is down; the task runs on.
    std::fs::remove_file(c.sandbox(0, fw.id, "web").unwrap().join("healthy")).unwrap();
    c.start_agent(0).await.unwrap();
    let unhealthy = fw
        .wait_update(WITHIN, "web unhealthy", |s| s.healthy == Some(false))
        .await
        .unwrap();
    assert_eq!(
        unhealthy.state,
        TaskState::Running,
        "re-adopted, still running"
    );
    fw.kill("web").await.unwrap();
    fw.wait_state(WITHIN, "web", TaskState::Killed)
        .await
        .unwrap();
    c.shutdown().await.unwrap();
}
