//! GPUs end to end, no GPU needed: simulated agents with `gpus=2`, and real
//! agents with injected fake devices (`agent::gpu::fake::FakeGpus`) whose tasks print their
//! environment. One device, one task; each status names its devices; a restarted agent keeps
//! its tasks' devices and gives only the free one to a new task.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent::gpu::fake::FakeGpus;
use agent::gpu::{GpuChoice, GpuUsage};
use protocol::{AgentId, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Kills the tasks of the agents run with its killer when dropped (the test ends, or fails):
/// a stopped agent leaves its tasks running.
struct KillTasksOnDrop(agent::TaskKiller);

impl Drop for KillTasksOnDrop {
    fn drop(&mut self) {
        self.0.kill_all();
    }
}

/// A real agent with `fake` GPUs, in `work_dir`, until the token is cancelled; `killer` ends
/// its tasks.
async fn start_gpu_agent(
    url: &str,
    work_dir: &Path,
    fake: Arc<FakeGpus>,
    killer: &KillTasksOnDrop,
) -> (CancellationToken, JoinHandle<Result<(), agent::AgentError>>) {
    let mut config = agent::AgentConfig::new(url, work_dir);
    config.resources = Some("cpus=4,mem=1024".parse().unwrap());
    config.hostname = Some("gpu-agent".into());
    config.timing = agent::Timing::fast();
    config.reap_orphans = false;
    config.gpus = GpuChoice::Auto;
    config.gpu_discovery = Some(fake);
    config.gpu_sample = Duration::from_millis(20);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let token = CancellationToken::new();
    let stopped = token.clone().cancelled_owned();
    let join = tokio::spawn(agent::run_with(config, listener, stopped, killer.0.clone()));
    (token, join)
}

/// The coordinator's view of the one agent, once it is active with `gpus` GPUs.
async fn gpu_agent_id(cluster: &Cluster, gpus: f64) -> AgentId {
    cluster
        .wait_for("the GPU agent active", |c| async move {
            let list = c.agents().await.ok()?;
            list.agents
                .into_iter()
                .find(|a| a.state == "active" && a.resources.units("gpus") == gpus)
                .map(|a| a.agent_id)
        })
        .await
        .unwrap()
}

async fn task_devices(cluster: &Cluster, task: &str, state: TaskState) -> Vec<String> {
    let info = cluster.wait_for_task_state(task, state).await.unwrap();
    info.gpu_devices
        .unwrap_or_else(|| panic!("task {task} shows no gpu_devices"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_gpus_one_device_per_task_and_the_third_waits() {
    let cluster = Cluster::builder()
        .simulated_agents(1, "cpus=8,mem=4096,gpus=2")
        .start()
        .await
        .unwrap();
    let agent = &cluster.agents().await.unwrap().agents[0];
    assert_eq!(agent.resources.units("gpus"), 2.0);
    let uuids: Vec<&str> = agent.gpu_devices.iter().map(|d| d.uuid.as_str()).collect();
    assert_eq!(uuids, ["GPU-sim-0-0", "GPU-sim-0-1"]);
    assert_eq!(agent.gpu_devices[1].index, 1);
    assert_eq!(agent.gpu_devices[0].model, "Simulated GPU");

    let mut fw = TestFramework::register_gpu(&cluster.url, "gpu-batch", "gpu")
        .await
        .unwrap();
    let task = |id: &str| {
        let mut t = shell_task(id, AgentId::new(), "cpus=1,mem=64,gpus=1", "true");
        t.duration_s = Some(600.0);
        t
    };
    fw.launch(WITHIN, task("g1")).await.unwrap();
    fw.launch(WITHIN, task("g2")).await.unwrap();
    let d1 = task_devices(&cluster, "g1", TaskState::Running).await;
    let d2 = task_devices(&cluster, "g2", TaskState::Running).await;
    assert_eq!(d1.len(), 1);
    assert_eq!(d2.len(), 1);
    assert_ne!(d1, d2, "two tasks, two devices");

    // The third cannot be placed while both devices are held: no offer holds a GPU.
    let fw_id = fw.id;
    let waiting = tokio::spawn(async move {
        fw.launch(WITHIN, task("g3")).await.unwrap();
        fw
    });
    let offers = cluster.offers().await.unwrap();
    assert!(
        offers
            .offers
            .iter()
            .all(|o| o.resources.units("gpus") == 0.0),
        "{offers:?}"
    );
    assert!(!waiting.is_finished());

    // g1 ends: its device goes to g3.
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/frameworks/{fw_id}/kill", cluster.url))
        .json(&serde_json::json!({"task_id": "g1"}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let fw = tokio::time::timeout(WITHIN * 2, waiting)
        .await
        .unwrap()
        .unwrap();
    let d3 = task_devices(&cluster, "g3", TaskState::Running).await;
    assert_eq!(d3, d1, "the third task gets the device the first gave back");
    let killed = task_devices(&cluster, "g1", TaskState::Killed).await;
    assert_eq!(
        killed, d1,
        "an ended task's status still names what it held"
    );
    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// The value of `name` in `env` output.
fn var<'a>(env: &'a str, name: &str) -> Option<&'a str> {
    env.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

async fn stdout_of(work_dir: &Path, fw: protocol::FrameworkId, task: &str) -> String {
    let path = work_dir
        .join("sandboxes")
        .join(fw.to_string())
        .join(task)
        .join("stdout");
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_agents_tasks_see_exactly_their_devices_and_report_usage() {
    let cluster = Cluster::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let killer = KillTasksOnDrop(agent::TaskKiller::new());
    let fake = Arc::new(FakeGpus::new(2));
    fake.set_usage(
        "GPU-fake-0",
        GpuUsage {
            memory_used_bytes: 3 << 30,
            utilization_percent: 70.0,
        },
    );
    let (token, join) = start_gpu_agent(&cluster.url, dir.path(), fake, &killer).await;
    let agent_id = gpu_agent_id(&cluster, 2.0).await;
    let info = cluster.agents().await.unwrap().agents;
    assert_eq!(info[0].gpu_devices.len(), 2);
    assert_eq!(info[0].gpu_devices[0].memory_mib, 16384);

    let mut fw = TestFramework::register_gpu(&cluster.url, "env", "gpu")
        .await
        .unwrap();
    // Waits until a sample was taken, then prints its environment.
    let gpu = shell_task("gpu", agent_id, "cpus=1,mem=64,gpus=1", "env; sleep 1");
    fw.launch(WITHIN, gpu).await.unwrap();
    let end = fw
        .wait_state(WITHIN, "gpu", TaskState::Finished)
        .await
        .unwrap();
    assert_eq!(
        end.gpu_devices.as_deref(),
        Some(&["GPU-fake-0".to_string()][..])
    );
    let usage = end.usage.expect("a GPU task's end carries its GPU usage");
    assert_eq!(usage.gpu_memory_bytes, Some(3 << 30));
    assert_eq!(usage.gpu_utilization_percent, Some(70.0));
    let plain = shell_task("plain", agent_id, "cpus=1,mem=64", "env");
    fw.launch(WITHIN, plain).await.unwrap();
    let end = fw
        .wait_state(WITHIN, "plain", TaskState::Finished)
        .await
        .unwrap();
    assert_eq!(end.gpu_devices, None);

    let env = stdout_of(dir.path(), fw.id, "gpu").await;
    assert_eq!(
        var(&env, "CUDA_VISIBLE_DEVICES"),
        Some("GPU-fake-0"),
        "{env}"
    );
    assert_eq!(
        var(&env, "NVIDIA_VISIBLE_DEVICES"),
        Some("GPU-fake-0"),
        "{env}"
    );
    assert_eq!(var(&env, "PARLEY_GPUS"), Some("1"), "{env}");
    let env = stdout_of(dir.path(), fw.id, "plain").await;
    assert_eq!(var(&env, "CUDA_VISIBLE_DEVICES"), Some(""), "{env}");
    assert_eq!(var(&env, "NVIDIA_VISIBLE_DEVICES"), Some("void"), "{env}");

    // The coordinator counted the GPU usage.
    let metrics = cluster.metrics_text().await.unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == format!("parley_task_gpu_memory_bytes_total {}", 3u64 << 30)),
        "{metrics}"
    );
    fw.remove().await.unwrap();
    token.cancel();
    join.await.unwrap().unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_keeps_both_assignments_and_gives_only_the_free_device() {
    let cluster = Cluster::builder().start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let killer = KillTasksOnDrop(agent::TaskKiller::new());
    let fake = Arc::new(FakeGpus::new(3));
    let (token, join) = start_gpu_agent(&cluster.url, dir.path(), fake.clone(), &killer).await;
    let agent_id = gpu_agent_id(&cluster, 3.0).await;
    let mut fw = TestFramework::register_gpu(&cluster.url, "long", "gpu")
        .await
        .unwrap();
    for id in ["a", "b"] {
        let t = shell_task(id, agent_id, "cpus=1,mem=64,gpus=1", "sleep 600");
        fw.launch(WITHIN, t).await.unwrap();
        fw.wait_state(WITHIN, id, TaskState::Running).await.unwrap();
    }
    let held: HashSet<String> = [
        task_devices(&cluster, "a", TaskState::Running).await,
        task_devices(&cluster, "b", TaskState::Running).await,
    ]
    .concat()
    .into_iter()
    .collect();
    assert_eq!(held.len(), 2);

    // Restart: the tasks keep running; the journal gives their devices back to them.
    token.cancel();
    join.await.unwrap().unwrap();
    let (token, join) = start_gpu_agent(&cluster.url, dir.path(), fake, &killer).await;
    let agent_tasks = format!(
        "{}/api/v1/tasks",
        cluster.agents().await.unwrap().agents[0].endpoint
    );
    // The agent's own view (a fresh listener: the coordinator learns the new endpoint).
    let agent_tasks = cluster
        .wait_for("the restarted agent registered", |c| {
            let old = agent_tasks.clone();
            async move {
                let a = c.agents().await.ok()?.agents.into_iter().next()?;
                let url = format!("{}/api/v1/tasks", a.endpoint);
                (a.state == "active" && url != old).then_some(url)
            }
        })
        .await
        .unwrap();
    let list: serde_json::Value = reqwest::get(&agent_tasks)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut listed = HashSet::new();
    for t in list["tasks"].as_array().unwrap() {
        assert_eq!(t["state"], "running", "{t}");
        for d in t["gpu_devices"].as_array().unwrap() {
            listed.insert(d.as_str().unwrap().to_string());
        }
    }
    assert_eq!(listed, held, "the restarted agent shows the same devices");

    let c = shell_task("c", agent_id, "cpus=1,mem=64,gpus=1", "sleep 600");
    fw.launch(WITHIN, c).await.unwrap();
    let free = task_devices(&cluster, "c", TaskState::Running).await;
    assert_eq!(free.len(), 1);
    assert!(!held.contains(&free[0]), "{free:?} was busy: {held:?}");
    let all: HashSet<&str> = ["GPU-fake-0", "GPU-fake-1", "GPU-fake-2"].into();
    assert!(all.contains(free[0].as_str()));

    for id in ["a", "b", "c"] {
        fw.kill(id).await.unwrap();
    }
    for id in ["a", "b", "c"] {
        fw.wait_state(WITHIN, id, TaskState::Killed).await.unwrap();
    }
    fw.remove().await.unwrap();
    token.cancel();
    join.await.unwrap().unwrap();
    cluster.shutdown().await.unwrap();
}
