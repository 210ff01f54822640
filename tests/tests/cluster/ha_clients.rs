//! The clients follow the leader among several coordinators, without etcd: a fake
//! follower answering `307` to the real coordinator, one answering `503 no_leader`, and a dead
//! URL are listed first; the SDK driver and a real agent find the real coordinator and work as
//! usual. Then a switch: coordinator X stops and a new one, Y, starts on another port (listed
//! second) on the same registry file; the framework keeps its id and gets the updates of its
//! tasks that were running (one ended while no coordinator was up), and the agent keeps the
//! task still running.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use framework_sdk::prelude::*;
use framework_sdk::CoordinatorClient;
use tests::fake_leader::{dead_url, free_addr, FakeFollower};
use tests::{wait_until, Cluster, WITHIN};
use tokio::task::JoinHandle;

/// What the framework saw.
#[derive(Debug, Default)]
struct Seen {
    /// `(framework id, re-registered)` per registration.
    registrations: Vec<(FrameworkId, bool)>,
    updates: Vec<TaskStatus>,
}

impl Seen {
    fn state_of(&self, task: &str) -> Option<TaskState> {
        self.updates
            .iter()
            .rev()
            .find(|s| s.task_id.as_str() == task)
            .map(|s| s.state)
    }
}

/// Launches copies of one task under the ids in its queue; records what it sees.
struct Recorder {
    task: Task,
    queue: Vec<TaskId>,
    seen: Arc<Mutex<Seen>>,
}

#[async_trait]
impl Scheduler for Recorder {
    async fn registered(&mut self, _ctx: &mut Context, id: FrameworkId, reregistered: bool) {
        self.seen
            .lock()
            .unwrap()
            .registrations
            .push((id, reregistered));
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        Decisions::pack(&offers, &self.task, || self.queue.pop())
    }

    async fn status_update(&mut self, _ctx: &mut Context, status: &TaskStatus) {
        self.seen.lock().unwrap().updates.push(status.clone());
    }

    fn requeue(&mut self, task: TaskSpec) {
        self.queue.push(task.task_id);
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
    }
}

type Running = (
    Arc<Mutex<Seen>>,
    tokio_util::sync::CancellationToken,
    JoinHandle<Result<Recorder, SdkError>>,
);

/// Starts a driver for `coordinators` that runs `shell` under the ids `tasks`.
fn start_framework(coordinators: &[&str], shell: &str, tasks: &[&str]) -> Running {
    let mut config =
        DriverConfig::with_coordinators(coordinators, "ha-fw", "eng/batch".parse().unwrap());
    config.request_timeout = Duration::from_secs(2);
    config.reconnect_backoff_min = Duration::from_millis(20);
    config.reconnect_backoff_max = Duration::from_millis(200);
    config.offer_hold_timeout = Duration::from_millis(500);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorder = Recorder {
        task: Task::shell(shell)
            .resources("cpus=0.1,mem=16")
            .build()
            .unwrap(),
        queue: tasks.iter().map(|t| TaskId::new(*t).unwrap()).collect(),
        seen: seen.clone(),
    };
    let driver = Driver::new(config, recorder).unwrap();
    let stop = driver.stop_token();
    (seen, stop, tokio::spawn(driver.run()))
}

async fn wait_state(seen: &Arc<Mutex<Seen>>, task: &str, state: TaskState) {
    wait_until(WITHIN, &format!("{task} {state} at the framework"), || {
        let seen = seen.clone();
        async move { (seen.lock().unwrap().state_of(task) == Some(state)).then_some(()) }
    })
    .await
    .unwrap();
}

async fn stop_framework((_, stop, join): Running) {
    stop.cancel();
    tokio::time::timeout(WITHIN, join)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_and_an_agent_follow_a_followers_redirect_to_the_leader() {
    let mut cluster = Cluster::builder().start().await.unwrap();
    let follower = FakeFollower::redirecting_to(&cluster.url).await.unwrap();
    cluster.set_agent_coordinators(format!("{},{}", follower.url, cluster.url));
    cluster.add_agent("cpus=2,mem=1024").await.unwrap();
    cluster
        .wait_for("the agent active", |c| async move {
            let a = c.agent_info(0).await.ok()?;
            (a.state == "active").then_some(())
        })
        .await
        .unwrap();
    let agent_hits = follower.hits();
    assert!(agent_hits > 0, "the agent never asked the follower");

    let running = start_framework(&[&follower.url, &cluster.url], "echo hi", &["a", "b"]);
    let seen = running.0.clone();
    wait_state(&seen, "a", TaskState::Finished).await;
    wait_state(&seen, "b", TaskState::Finished).await;
    assert!(
        follower.hits() > agent_hits,
        "the driver never asked the follower"
    );
    let id = seen.lock().unwrap().registrations[0].0;
    assert_eq!(cluster.framework_named("ha-fw").await.unwrap(), Some(id));
    // The tasks ran on the agent, whose updates reached the leader.
    let tasks = cluster.tasks_of(id).await.unwrap();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert!(tasks.iter().all(|t| t.state == TaskState::Finished));
    stop_framework(running).await;

    // The client re-sends a registration's body, then the event stream's GET, to the leader.
    let client = CoordinatorClient::new(&follower.url, Duration::from_secs(2)).unwrap();
    let hits = follower.hits();
    let request = protocol::messages::RegisterFramework {
        name: "probe".into(),
        role: "eng".parse().unwrap(),
        failover_timeout_s: None,
        framework_id: None,
        demand: None,
        capabilities: Vec::new(),
        partition_timeout_s: None,
        webui_url: None,
    };
    let probe = client
        .register(&request)
        .await
        .unwrap()
        .registered
        .framework_id;
    assert_eq!(client.current_url(), cluster.url);
    let fresh = CoordinatorClient::new(&follower.url, Duration::from_secs(2)).unwrap();
    let mut stream = fresh.events(probe).await.unwrap();
    let first = tokio::time::timeout(WITHIN, stream.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("subscribed"),
        "{first:?}"
    );
    assert_eq!(follower.hits(), hits + 2);
    drop(stream);
    fresh.unregister(probe).await.unwrap();
    assert_eq!(cluster.framework_named("probe").await.unwrap(), None);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_wait_out_no_leader_and_skip_dead_urls() {
    let mut cluster = Cluster::builder().start().await.unwrap();
    let leaderless = FakeFollower::without_leader().await.unwrap();
    let dead = dead_url().await.unwrap();
    cluster.set_agent_coordinators(format!("{dead},{},{}", leaderless.url, cluster.url));
    cluster.add_agent("cpus=2,mem=1024").await.unwrap();
    cluster
        .wait_for("the agent active", |c| async move {
            let a = c.agent_info(0).await.ok()?;
            (a.state == "active").then_some(())
        })
        .await
        .unwrap();
    assert!(leaderless.hits() > 0);

    let running = start_framework(&[&leaderless.url, &dead, &cluster.url], "echo hi", &["a"]);
    let seen = running.0.clone();
    wait_state(&seen, "a", TaskState::Finished).await;
    let registrations = seen.lock().unwrap().registrations.clone();
    assert_eq!(registrations.len(), 1, "{registrations:?}");
    stop_framework(running).await;
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_on_the_same_registry_gets_the_framework_and_the_agent_back() {
    let mut cluster = Cluster::builder().durable_registry().start().await.unwrap();
    let x = cluster.url.clone();
    let y_addr = free_addr().await.unwrap();
    let y = format!("http://{y_addr}");
    cluster.set_agent_coordinators(format!("{x},{y}"));
    cluster.add_agent("cpus=2,mem=1024").await.unwrap();
    cluster
        .wait_for("the agent active", |c| async move {
            let a = c.agent_info(0).await.ok()?;
            (a.state == "active").then_some(())
        })
        .await
        .unwrap();
    let agent = cluster.agent_info(0).await.unwrap();
    let agent_id = agent.agent_id;

    // Tasks that run until the test creates a file named after them (the sandbox, their
    // working directory, is named after the task).
    let dir = tempfile::tempdir().unwrap();
    let flags = dir.path().to_owned();
    let shell = format!(
        "while [ ! -e {}/$(basename $PWD) ]; do sleep 0.05; done",
        flags.display()
    );
    let running = start_framework(&[&x, &y], &shell, &["long", "early"]);
    let seen = running.0.clone();
    wait_state(&seen, "long", TaskState::Running).await;
    wait_state(&seen, "early", TaskState::Running).await;
    let id = seen.lock().unwrap().registrations[0].0;

    // X goes away; Y, on the same registry, is listed second.
    cluster.stop_coordinator().await.unwrap();
    // While no coordinator is up, "early" ends: its update waits in the agent's queue.
    std::fs::write(flags.join("early"), b"").unwrap();
    let agent_tasks = format!("{}/api/v1/tasks", agent.endpoint);
    wait_until(WITHIN, "early finished on the agent", || {
        let (http, url) = (cluster.http.clone(), agent_tasks.clone());
        async move {
            let list: protocol::messages::TaskStatusList =
                http.get(url).send().await.ok()?.json().await.ok()?;
            let early = list.tasks.iter().find(|t| t.task_id.as_str() == "early")?;
            (early.state == TaskState::Finished).then_some(())
        }
    })
    .await
    .unwrap();
    cluster.start_coordinator_at(y_addr).await.unwrap();
    let y_started = std::time::Instant::now();
    assert_eq!(cluster.url, y);

    // The framework registers again with Y under its id.
    wait_until(WITHIN, "the framework re-registered with Y", || {
        let seen = seen.clone();
        async move {
            let s = seen.lock().unwrap();
            (s.registrations.len() >= 2).then(|| s.registrations.clone())
        }
    })
    .await
    .unwrap();
    let framework_back = y_started.elapsed();
    let registrations = seen.lock().unwrap().registrations.clone();
    assert!(
        registrations.iter().all(|(fid, _)| *fid == id),
        "{registrations:?}"
    );
    assert!(registrations[1..].iter().all(|(_, again)| *again));
    // The agent registers again with Y with its running task: same agent, same task.
    let task = cluster
        .wait_for_task_state("long", TaskState::Running)
        .await
        .unwrap();
    assert_eq!((task.framework_id, task.agent_id), (id, agent_id));
    eprintln!(
        "switch: framework re-registered {} ms, agent's task back {} ms after Y started",
        framework_back.as_millis(),
        y_started.elapsed().as_millis()
    );
    assert_eq!(cluster.agent_info(0).await.unwrap().agent_id, agent_id);
    // The update sent while there was no coordinator reaches the framework through Y.
    wait_state(&seen, "early", TaskState::Finished).await;

    // "long" ends now; its update reaches the framework through Y.
    std::fs::write(flags.join("long"), b"").unwrap();
    wait_state(&seen, "long", TaskState::Finished).await;
    cluster
        .wait_for_task_state("long", TaskState::Finished)
        .await
        .unwrap();
    stop_framework(running).await;
    cluster.shutdown().await.unwrap();
}
