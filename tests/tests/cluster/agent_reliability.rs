//! End to end: reliability across restarts. An agent restarted while its tasks run re-adopts
//! them and every state still reaches the framework; a coordinator restarted on the same port
//! gets the agents back, with their running tasks, and the framework takes its tasks over.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use protocol::messages::TaskStatusList;
use protocol::{AgentId, TaskState, TaskStatus};
use reqwest::StatusCode;
use tests::framework::{offered_per_agent, shell_task, TestFramework};
use tests::{fast_coordinator_config, wait_until, Cluster, WITHIN};

/// A task that runs until the file `go` appears in its sandbox, then exits 0. It gives up
/// (exit 1) after about a minute, so a failed test leaves no process behind for long.
fn gated_task(task_id: &str) -> protocol::TaskSpec {
    shell_task(
        task_id,
        AgentId::default(),
        "cpus=0.5,mem=64",
        "i=0; while [ ! -e \"$PARLEY_SANDBOX/go\" ]; do \
           i=$((i+1)); [ $i -gt 3000 ] && exit 1; sleep 0.02; \
         done; exit 0",
    )
}

fn open_gate(sandbox: &Path) {
    std::fs::write(sandbox.join("go"), b"").unwrap();
}

/// Waits until the task's wrapper wrote its exit code: its process has ended.
async fn wait_exited(sandbox: PathBuf) -> i32 {
    wait_until(WITHIN, "the task process to exit", || {
        let file = sandbox.join(agent::executor::EXIT_FILE);
        async move { std::fs::read_to_string(file).ok()?.trim().parse().ok() }
    })
    .await
    .unwrap()
}

/// Asserts the framework saw `starting`, `running` and `finished`, first seen in that order,
/// and nothing else.
fn assert_full_history(updates: &[TaskStatus], task: &str) {
    let first = |state| updates.iter().position(|s| s.state == state);
    let (Some(s), Some(r), Some(f)) = (
        first(TaskState::Starting),
        first(TaskState::Running),
        first(TaskState::Finished),
    ) else {
        panic!("{task}: missing states in {updates:#?}");
    };
    assert!(s < r && r < f, "{task}: out of order: {updates:#?}");
    assert!(
        updates.iter().all(|u| matches!(
            u.state,
            TaskState::Starting | TaskState::Running | TaskState::Finished
        )),
        "{task}: unexpected state in {updates:#?}"
    );
    let finished = &updates[f];
    assert_eq!(finished.exit_code, Some(0), "{task}: {finished:?}");
}

async fn agent_tasks(http: &reqwest::Client, endpoint: &str) -> Option<TaskStatusList> {
    http.get(format!("{endpoint}/api/v1/tasks"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restarted_mid_task_loses_no_update() {
    // Heartbeats every 100 ms, but 100 may be missed: the restart must not make the agent lost
    // (then the framework would rightly see `lost` first), even on a slow machine.
    let config = coordinator::Config {
        max_missed_heartbeats: 100,
        ..fast_coordinator_config()
    };
    let mut cluster = Cluster::builder()
        .config(config)
        .agent("cpus=2,mem=1024")
        .start()
        .await
        .unwrap();
    let agent_id = cluster.agent_info(0).await.unwrap().agent_id;
    let mut fw = TestFramework::register(&cluster.url, "restarts", "eng")
        .await
        .unwrap();
    for task in ["t-before", "t-after"] {
        fw.launch(WITHIN, gated_task(task)).await.unwrap();
    }
    for task in ["t-before", "t-after"] {
        fw.wait_state(WITHIN, task, TaskState::Running)
            .await
            .unwrap();
    }

    cluster.stop_agent(0).await.unwrap();
    // `t-before` ends while its agent is down; `t-after` outlives the down time.
    let before = cluster.sandbox(0, fw.id, "t-before").unwrap();
    let after = cluster.sandbox(0, fw.id, "t-after").unwrap();
    open_gate(&before);
    assert_eq!(wait_exited(before).await, 0);
    assert!(!after.join(agent::executor::EXIT_FILE).exists());

    cluster.start_agent(0).await.unwrap();
    fw.wait_state(WITHIN, "t-before", TaskState::Finished)
        .await
        .unwrap();
    // The restarted agent kept its id and re-adopted the running task.
    assert_eq!(cluster.agent_info(0).await.unwrap().agent_id, agent_id);
    let t_after = cluster
        .tasks()
        .await
        .unwrap()
        .tasks
        .into_iter()
        .find(|t| t.task_id.as_str() == "t-after")
        .unwrap();
    assert_eq!(t_after.state, TaskState::Running, "{t_after:?}");
    open_gate(&after);
    fw.wait_state(WITHIN, "t-after", TaskState::Finished)
        .await
        .unwrap();

    for task in ["t-before", "t-after"] {
        assert_full_history(&fw.updates(task), task);
    }
    let tasks = cluster.tasks().await.unwrap().tasks;
    assert_eq!(tasks.len(), 2);
    for t in &tasks {
        assert_eq!(t.state, TaskState::Finished, "{t:?}");
        assert_eq!(t.exit_code, Some(0), "{t:?}");
        assert_eq!(t.agent_id, agent_id);
    }
    cluster
        .wait_for("the agent's resources to be released", |c| async move {
            c.agent_info(0).await.ok()?.used.is_empty().then_some(())
        })
        .await
        .unwrap();
    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_gets_the_agents_back_with_their_tasks() {
    let mut cluster = Cluster::start(&["cpus=2,mem=1024", "cpus=2,mem=1024"])
        .await
        .unwrap();
    let before = cluster.agents().await.unwrap().agents;
    let mut fw = TestFramework::register(&cluster.url, "survivor", "eng")
        .await
        .unwrap();
    let t1 = fw.launch(WITHIN, gated_task("t1")).await.unwrap();
    // On the other agent: its re-registration then reports no running task, only t2's end.
    let t2 = fw
        .launch_where(WITHIN, gated_task("t2"), |o| o.agent_id != t1.agent_id)
        .await
        .unwrap();
    for task in ["t1", "t2"] {
        fw.wait_state(WITHIN, task, TaskState::Running)
            .await
            .unwrap();
    }
    let index_of = |agent: AgentId| {
        let host = &before
            .iter()
            .find(|a| a.agent_id == agent)
            .unwrap()
            .hostname;
        host.strip_prefix("agent-")
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };

    cluster.stop_coordinator().await.unwrap();
    // The framework's stream ends with the coordinator.
    while fw.recv(WITHIN).await.is_ok() {}

    // While it is down, the agents keep their tasks; t2 ends and its agent cannot report it.
    let t2_sandbox = cluster.sandbox(index_of(t2.agent_id), fw.id, "t2").unwrap();
    open_gate(&t2_sandbox);
    assert_eq!(wait_exited(t2_sandbox).await, 0);
    let endpoint = &before
        .iter()
        .find(|a| a.agent_id == t1.agent_id)
        .unwrap()
        .endpoint;
    let on_agent = agent_tasks(&cluster.http, endpoint).await.unwrap();
    let t1_there = on_agent
        .tasks
        .iter()
        .find(|t| t.task_id.as_str() == "t1")
        .unwrap();
    assert_eq!(t1_there.state, TaskState::Running);

    cluster.start_coordinator().await.unwrap();
    // The agents re-register with their ids, and t1 is back in the books, running.
    cluster
        .wait_for("both agents back, active, with the same ids", |c| {
            let before = &before;
            async move {
                let now = c.agents().await.ok()?.agents;
                let back = before.iter().all(|b| {
                    now.iter()
                        .any(|a| a.agent_id == b.agent_id && a.state == "active")
                });
                (now.len() == 2 && back).then_some(())
            }
        })
        .await
        .unwrap();
    let t1_info = cluster
        .wait_for("t1 in the new coordinator's books", |c| async move {
            c.tasks()
                .await
                .ok()?
                .tasks
                .into_iter()
                .find(|t| t.task_id.as_str() == "t1")
        })
        .await
        .unwrap();
    assert_eq!(t1_info.state, TaskState::Running, "{t1_info:?}");
    assert_eq!(t1_info.agent_id, t1.agent_id);
    assert_eq!(t1_info.framework_id, fw.id);
    // The new coordinator accounts t1 with the resources its agent reported (it never saw
    // t1's launch), so t1's agent does not look idle; t2 ended and holds nothing.
    let agents = cluster.agents().await.unwrap().agents;
    let info = |id: AgentId| agents.iter().find(|a| a.agent_id == id).unwrap().clone();
    assert_eq!(info(t1.agent_id).used, t1.resources, "{agents:?}");
    assert!(info(t2.agent_id).used.is_empty(), "{agents:?}");
    let t1_agent_total = info(t1.agent_id).resources;

    // The framework comes back with its id and takes its tasks over: it learns that t2
    // finished while the coordinator was down, and can end t1 through the new coordinator.
    fw.reregister(StatusCode::OK).await.unwrap();
    // Its offers for t1's agent hold only what t1 leaves free: t1's resources are not offered
    // a second time.
    let rest = t1_agent_total.checked_sub(&t1.resources).unwrap();
    let deadline = tokio::time::Instant::now() + WITHIN;
    let offered = loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let offers = fw.next_offers(left).await.unwrap();
        let per_agent = offered_per_agent(&offers);
        if let Some(offered) = per_agent.get(&t1.agent_id) {
            break offered.clone();
        }
    };
    assert_eq!(offered, rest);
    let t1_agent = cluster
        .agents()
        .await
        .unwrap()
        .agents
        .into_iter()
        .find(|a| a.agent_id == t1.agent_id)
        .unwrap();
    assert_eq!(t1_agent.used, t1.resources, "{t1_agent:?}");
    assert_eq!(t1_agent.used.add(&t1_agent.offered), t1_agent_total);
    fw.reconcile_all().await.unwrap();
    fw.wait_state(WITHIN, "t2", TaskState::Finished)
        .await
        .unwrap();
    let frameworks = cluster.frameworks().await.unwrap().frameworks;
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    assert_eq!(frameworks[0].name, "survivor");
    assert_eq!(frameworks[0].role.as_str(), "eng");
    fw.kill("t1").await.unwrap();
    fw.wait_state(WITHIN, "t1", TaskState::Killed)
        .await
        .unwrap();
    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}
