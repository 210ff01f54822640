//! End to end: the example frameworks against a real coordinator and real agents on loopback,
//! with outcomes checked through the coordinator's REST API.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use framework_sdk::CoordinatorClient;
use protocol::messages::FrameworkList;
use protocol::{FrameworkId, TaskState};
use tests::{wait_for, Cluster, SseReader, WITHIN};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A coordinator with the example frameworks' pace (allocation every 100 ms, heartbeats every
/// 500 ms, defaults otherwise) and `agents` real agents of `resources`. Several agents share
/// this test process, so none reaps orphans: it could take another agent's task's exit.
async fn start_cluster(agents: usize, resources: &str) -> Cluster {
    let config = coordinator::Config {
        allocation_interval: Duration::from_millis(100),
        agent_heartbeat_interval: Duration::from_millis(500),
        framework_heartbeat_interval: Duration::from_secs(1),
        update_resend_interval: Duration::from_millis(500),
        ..coordinator::Config::default()
    };
    Cluster::builder()
        .config(config)
        .agents(agents, resources)
        .reap_orphans(false)
        .start()
        .await
        .unwrap()
}

/// The tasks the coordinator lists for a framework.
async fn tasks_of(cluster: &Cluster, id: FrameworkId) -> Vec<protocol::messages::TaskInfo> {
    cluster.tasks_of(id).await.unwrap()
}

/// The id of the framework named `name`, if registered.
async fn framework_named(cluster: &Cluster, name: &str) -> Option<FrameworkId> {
    cluster.framework_named(name).await.unwrap()
}

fn common(cluster: &Cluster) -> examples::common::CommonArgs {
    let mut c = examples::common::CommonArgs::new(cluster.url.clone(), "test".parse().unwrap());
    c.failover_timeout_s = 60.0;
    // Keep the framework registered after the run, so its tasks stay listed for the checks.
    c.no_unregister = true;
    c
}

fn hello_args(cluster: &Cluster, tasks: u32, command: &str) -> examples::hello::Args {
    examples::hello::Args {
        common: common(cluster),
        tasks,
        command: command.into(),
        resources: "cpus=0.5,mem=64".parse().unwrap(),
        duration_s: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_runs_every_command_to_completion() {
    let cluster = start_cluster(2, "cpus=1,mem=512").await;
    let run = examples::hello::run(hello_args(&cluster, 5, "echo hi"), std::future::pending());
    let outcome = tokio::time::timeout(WITHIN, run).await.unwrap().unwrap();
    assert!(outcome.all_finished(), "{:?}", outcome.states);
    let tasks = tasks_of(&cluster, outcome.framework_id.unwrap()).await;
    assert_eq!(tasks.len(), 5, "the coordinator knows every task");
    assert!(
        tasks.iter().all(|t| t.state == TaskState::Finished),
        "{tasks:?}"
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_reports_failing_commands() {
    let cluster = start_cluster(1, "cpus=2,mem=512").await;
    let run = examples::hello::run(hello_args(&cluster, 2, "exit 3"), std::future::pending());
    let outcome = tokio::time::timeout(WITHIN, run).await.unwrap().unwrap();
    assert!(!outcome.all_finished());
    assert!(
        outcome.states.values().all(|s| *s == TaskState::Failed),
        "{:?}",
        outcome.states
    );
    let tasks = tasks_of(&cluster, outcome.framework_id.unwrap()).await;
    assert!(
        tasks
            .iter()
            .all(|t| t.state == TaskState::Failed && t.exit_code == Some(3)),
        "{tasks:?}"
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tetris_batch_completes_every_job() {
    let cluster = start_cluster(2, "cpus=8,mem=8192").await;
    let args = examples::tetris_batch::Args {
        common: common(&cluster),
        jobs_file: None,
        jobs: 4,
        max_tasks: 4,
        seed: 3,
        time_scale: 0.05,
        policy: examples::tetris_batch::Policy::Tetris,
        fairness: 0.25,
        simulated: false,
        max_retries: 0,
    };
    let expected: usize = examples::tetris_batch::workload::generate(3, 4, 4, 0.05)
        .iter()
        .map(|j| j.tasks.iter().map(|g| g.count).sum::<usize>())
        .sum();
    let outcome = tokio::time::timeout(
        WITHIN,
        examples::tetris_batch::run(args, std::future::pending()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        (outcome.jobs, outcome.jobs_completed, outcome.jobs_failed),
        (4, 4, 0),
        "{outcome}"
    );
    assert_eq!(outcome.tasks_finished, expected);
    assert!(outcome.makespan_s > 0.0 && outcome.avg_job_completion_s <= outcome.makespan_s);
    let id = framework_named(&cluster, "tetris-batch").await.unwrap();
    let tasks = tasks_of(&cluster, id).await;
    assert_eq!(tasks.len(), expected);
    assert!(
        tasks.iter().all(|t| t.state == TaskState::Finished),
        "{tasks:?}"
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tetris_batch_refuses_a_task_larger_than_every_agent() {
    let cluster = start_cluster(1, "cpus=2,mem=1024").await;
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.json");
    std::fs::write(
        &jobs,
        r#"[{"name": "huge", "tasks": [{"resources": {"cpus": 4}, "duration_s": 1}]}]"#,
    )
    .unwrap();
    let args = examples::tetris_batch::Args {
        common: common(&cluster),
        jobs_file: Some(jobs),
        jobs: 1,
        max_tasks: 1,
        seed: 1,
        time_scale: 1.0,
        policy: examples::tetris_batch::Policy::Tetris,
        fairness: 0.25,
        simulated: false,
        max_retries: 0,
    };
    let err = tokio::time::timeout(
        WITHIN,
        examples::tetris_batch::run(args, std::future::pending()),
    )
    .await
    .unwrap()
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("job \"huge\": its tasks need cpus=4") && err.contains("1 active agents"),
        "{err}"
    );
    // It failed before registering: nothing was left behind.
    assert!(framework_named(&cluster, "tetris-batch").await.is_none());
    cluster.shutdown().await.unwrap();
}

/// A service framework running in the background.
struct RunningService {
    id: FrameworkId,
    progress: examples::service::Progress,
    stop: CancellationToken,
    handle: JoinHandle<anyhow::Result<examples::service::Outcome>>,
}

/// Starts the service with `replicas` replicas of `sleep 600` and waits until they all run.
async fn start_service(cluster: &Cluster, replicas: u32) -> RunningService {
    let mut common = common(cluster);
    common.no_unregister = false; // Unregistering on exit kills the replicas.
    let args = examples::service::Args {
        common,
        replicas,
        command: "sleep 600".into(),
        resources: "cpus=0.5,mem=64".parse().unwrap(),
        name: "web".into(),
        partition_timeout_s: 300.0,
        health: Default::default(),
    };
    let progress = examples::service::Progress::default();
    let stop = CancellationToken::new();
    let handle = tokio::spawn(examples::service::run_with_progress(
        args,
        progress.clone(),
        stop.clone().cancelled_owned(),
    ));
    wait_for(WITHIN, "framework registered", || async {
        framework_named(cluster, "service-web").await.is_some()
    })
    .await
    .unwrap();
    let id = framework_named(cluster, "service-web").await.unwrap();
    wait_for(WITHIN, "all replicas running", || async {
        running(cluster, id).await.len() == replicas as usize
    })
    .await
    .unwrap();
    RunningService {
        id,
        progress,
        stop,
        handle,
    }
}

async fn running(cluster: &Cluster, id: FrameworkId) -> Vec<String> {
    let mut ids: Vec<String> = tasks_of(cluster, id)
        .await
        .into_iter()
        .filter(|t| t.state == TaskState::Running)
        .map(|t| t.task_id.to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_replaces_a_killed_replica() {
    let cluster = start_cluster(2, "cpus=2,mem=512").await;
    let RunningService {
        id,
        progress,
        stop,
        handle,
    } = start_service(&cluster, 2).await;
    let before = running(&cluster, id).await;
    let client = CoordinatorClient::new(&cluster.url, Duration::from_secs(5)).unwrap();
    let victim: protocol::TaskId = before[0].parse().unwrap();
    client.kill(id, &victim).await.unwrap();
    wait_for(WITHIN, "a replacement running", || async {
        let now = running(&cluster, id).await;
        now.len() == 2 && !now.contains(&before[0]) && now.contains(&before[1])
    })
    .await
    .unwrap();
    let killed = tasks_of(&cluster, id)
        .await
        .into_iter()
        .find(|t| t.task_id == victim)
        .unwrap();
    assert_eq!(killed.state, TaskState::Killed);
    stop.cancel();
    let outcome = tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.replacements, 1);
    assert_eq!(
        progress
            .replacements
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_keeps_the_tasks_and_the_framework_goes_on() {
    let cluster = start_cluster(2, "cpus=2,mem=512").await;
    let RunningService {
        id, stop, handle, ..
    } = start_service(&cluster, 2).await;
    let before = running(&cluster, id).await;

    // Open a second stream for the framework: the coordinator drops the driver's stream in its
    // favour. The driver reconnects under the same id, which in turn ends this stream.
    let http = reqwest::Client::new();
    let url = format!("{}/api/v1/frameworks/{id}/events", cluster.url);
    let mut stolen = SseReader::open(&http, &url).await.unwrap();
    let ended = stolen.until_end(tests::deadline_in(WITHIN)).await;
    assert!(ended.is_ok(), "the driver never took its stream back");

    // Same framework, same tasks, nothing replaced.
    let frameworks: FrameworkList = cluster.get("/api/v1/frameworks").await.unwrap();
    assert_eq!(frameworks.frameworks.len(), 1);
    assert_eq!(frameworks.frameworks[0].framework_id, id);
    assert_eq!(running(&cluster, id).await, before);

    // And it goes on: a killed replica is still replaced.
    let client = CoordinatorClient::new(&cluster.url, Duration::from_secs(5)).unwrap();
    client.kill(id, &before[1].parse().unwrap()).await.unwrap();
    wait_for(WITHIN, "a replacement after the reconnect", || async {
        let now = running(&cluster, id).await;
        now.len() == 2 && now.contains(&before[0]) && !now.contains(&before[1])
    })
    .await
    .unwrap();
    stop.cancel();
    let outcome = tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.replacements, 1);
    cluster.wait_agents_idle().await.unwrap();
    cluster.shutdown().await.unwrap();
}
