//! End to end: the example frameworks against a real coordinator and real agents on loopback,
//! with outcomes checked through the coordinator's REST API.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::{Duration, Instant};

use framework_sdk::CoordinatorClient;
use futures::StreamExt;
use protocol::messages::{AgentList, FrameworkList, TaskInfo, TaskList, TaskStatusList};
use protocol::{FrameworkId, TaskState};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const WITHIN: Duration = Duration::from_secs(20);

/// A coordinator and real agents, each on its own loopback port, stopped on drop.
struct Cluster {
    url: String,
    http: reqwest::Client,
    stop: CancellationToken,
    handles: Vec<JoinHandle<anyhow::Result<()>>>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    async fn start(agents: usize, resources: &str) -> Cluster {
        let stop = CancellationToken::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let config = coordinator::Config {
            allocation_interval: Duration::from_millis(100),
            agent_heartbeat_interval: Duration::from_millis(500),
            framework_heartbeat_interval: Duration::from_secs(1),
            update_resend_interval: Duration::from_millis(500),
            ..coordinator::Config::default()
        };
        let serve = coordinator::serve(config, listener, stop.clone().cancelled_owned());
        let mut handles = vec![tokio::spawn(async move { Ok(serve.await?) })];
        let mut dirs = Vec::new();
        for i in 0..agents {
            let dir = tempfile::tempdir().unwrap();
            let mut config = agent::AgentConfig::new(url.clone(), dir.path());
            config.resources = Some(resources.parse().unwrap());
            config.hostname = Some(format!("agent{i}"));
            config.timing = agent::Timing::fast();
            // Several agents share this test process; none may reap the others' children.
            config.reap_orphans = false;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            handles.push(tokio::spawn(agent::run(
                config,
                listener,
                stop.clone().cancelled_owned(),
            )));
            dirs.push(dir);
        }
        let cluster = Cluster {
            url,
            http: reqwest::Client::new(),
            stop,
            handles,
            _dirs: dirs,
        };
        wait_for(WITHIN, "agents registered", || async {
            cluster
                .get::<AgentList>("/api/v1/agents")
                .await
                .is_some_and(|l| l.agents.len() == agents)
        })
        .await;
        cluster
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Option<T> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .ok()?;
        response.error_for_status().ok()?.json().await.ok()
    }

    async fn tasks_of(&self, framework_id: FrameworkId) -> Vec<TaskInfo> {
        let list: TaskList = self.get("/api/v1/tasks").await.unwrap();
        list.tasks
            .into_iter()
            .filter(|t| t.framework_id == framework_id)
            .collect()
    }

    async fn framework_named(&self, name: &str) -> Option<FrameworkId> {
        let list: FrameworkList = self.get("/api/v1/frameworks").await?;
        list.frameworks
            .into_iter()
            .find(|f| f.name == name)
            .map(|f| f.framework_id)
    }

    /// Waits until no agent runs a task any more, so no process outlives the test.
    async fn wait_agents_idle(&self) {
        let agents: AgentList = self.get("/api/v1/agents").await.unwrap();
        for a in agents.agents {
            wait_for(WITHIN, "agent idle", || async {
                let url = format!("{}/api/v1/tasks", a.endpoint);
                let Ok(response) = self.http.get(url).send().await else {
                    return false;
                };
                let Ok(list) = response.json::<TaskStatusList>().await else {
                    return false;
                };
                list.tasks.iter().all(|t| t.state.is_terminal())
            })
            .await;
        }
    }

    async fn shutdown(mut self) {
        self.stop.cancel();
        for handle in self.handles.drain(..) {
            handle.await.unwrap().unwrap();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn wait_for<F: Future<Output = bool>>(
    within: Duration,
    what: &str,
    mut cond: impl FnMut() -> F,
) {
    let deadline = Instant::now() + within;
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let cluster = Cluster::start(2, "cpus=1,mem=512").await;
    let run = examples::hello::run(hello_args(&cluster, 5, "echo hi"), std::future::pending());
    let outcome = tokio::time::timeout(WITHIN, run).await.unwrap().unwrap();
    assert!(outcome.all_finished(), "{:?}", outcome.states);
    let tasks = cluster.tasks_of(outcome.framework_id.unwrap()).await;
    assert_eq!(tasks.len(), 5, "the coordinator knows every task");
    assert!(
        tasks.iter().all(|t| t.state == TaskState::Finished),
        "{tasks:?}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_reports_failing_commands() {
    let cluster = Cluster::start(1, "cpus=2,mem=512").await;
    let run = examples::hello::run(hello_args(&cluster, 2, "exit 3"), std::future::pending());
    let outcome = tokio::time::timeout(WITHIN, run).await.unwrap().unwrap();
    assert!(!outcome.all_finished());
    assert!(
        outcome.states.values().all(|s| *s == TaskState::Failed),
        "{:?}",
        outcome.states
    );
    let tasks = cluster.tasks_of(outcome.framework_id.unwrap()).await;
    assert!(
        tasks
            .iter()
            .all(|t| t.state == TaskState::Failed && t.exit_code == Some(3)),
        "{tasks:?}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tetris_batch_completes_every_job() {
    let cluster = Cluster::start(2, "cpus=8,mem=8192").await;
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
    let id = cluster.framework_named("tetris-batch").await.unwrap();
    let tasks = cluster.tasks_of(id).await;
    assert_eq!(tasks.len(), expected);
    assert!(
        tasks.iter().all(|t| t.state == TaskState::Finished),
        "{tasks:?}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tetris_batch_refuses_a_task_larger_than_every_agent() {
    let cluster = Cluster::start(1, "cpus=2,mem=1024").await;
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
    assert!(cluster.framework_named("tetris-batch").await.is_none());
    cluster.shutdown().await;
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
    };
    let progress = examples::service::Progress::default();
    let stop = CancellationToken::new();
    let handle = tokio::spawn(examples::service::run_with_progress(
        args,
        progress.clone(),
        stop.clone().cancelled_owned(),
    ));
    wait_for(WITHIN, "framework registered", || async {
        cluster.framework_named("service-web").await.is_some()
    })
    .await;
    let id = cluster.framework_named("service-web").await.unwrap();
    wait_for(WITHIN, "all replicas running", || async {
        running(cluster, id).await.len() == replicas as usize
    })
    .await;
    RunningService {
        id,
        progress,
        stop,
        handle,
    }
}

async fn running(cluster: &Cluster, id: FrameworkId) -> Vec<String> {
    let mut ids: Vec<String> = cluster
        .tasks_of(id)
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
    let cluster = Cluster::start(2, "cpus=2,mem=512").await;
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
    .await;
    let killed = cluster
        .tasks_of(id)
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
    cluster.wait_agents_idle().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_keeps_the_tasks_and_the_framework_goes_on() {
    let cluster = Cluster::start(2, "cpus=2,mem=512").await;
    let RunningService {
        id, stop, handle, ..
    } = start_service(&cluster, 2).await;
    let before = running(&cluster, id).await;

    // Open a second stream for the framework: the coordinator drops the driver's stream in its
    // favour. The driver reconnects under the same id, which in turn ends this stream.
    let http = reqwest::Client::new();
    let stolen = http
        .get(format!("{}/api/v1/frameworks/{id}/events", cluster.url))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    let mut bytes = stolen.bytes_stream();
    let ended = tokio::time::timeout(WITHIN, async {
        while let Some(chunk) = bytes.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
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
    .await;
    stop.cancel();
    let outcome = tokio::time::timeout(WITHIN, handle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.replacements, 1);
    cluster.wait_agents_idle().await;
    cluster.shutdown().await;
}
