//! The coordinator and a real agent together under the agent's hardening:
//! every launch and kill the coordinator sends carries the agent's token and the task's
//! framework, so two frameworks can run a task of the same id on one agent and each kill ends
//! only its own.

#![allow(clippy::unwrap_used)]

use protocol::{AgentId, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_frameworks_run_and_kill_tasks_of_the_same_id_on_one_agent() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let mut a = TestFramework::register(&cluster.url, "a", "eng/a")
        .await
        .unwrap();
    let mut b = TestFramework::register(&cluster.url, "b", "eng/b")
        .await
        .unwrap();
    let web = || shell_task("web", AgentId::default(), "cpus=1,mem=128", "sleep 60");
    let on_a = a.launch(WITHIN, web()).await.unwrap();
    let on_b = b.launch(WITHIN, web()).await.unwrap();
    assert_eq!(on_a.agent_id, on_b.agent_id, "one agent runs both");
    a.wait_state(WITHIN, "web", TaskState::Running)
        .await
        .unwrap();
    b.wait_state(WITHIN, "web", TaskState::Running)
        .await
        .unwrap();

    // b's kill ends b's task only.
    b.kill("web").await.unwrap();
    b.wait_state(WITHIN, "web", TaskState::Killed)
        .await
        .unwrap();
    let a_states: Vec<TaskState> = a.updates("web").iter().map(|s| s.state).collect();
    assert!(!a_states.contains(&TaskState::Killed), "{a_states:?}");
    let tasks = cluster.tasks().await.unwrap().tasks;
    let a_task = tasks
        .iter()
        .find(|t| t.framework_id == a.id && t.task_id.as_str() == "web")
        .unwrap();
    assert_eq!(a_task.state, TaskState::Running);

    a.kill("web").await.unwrap();
    a.wait_state(WITHIN, "web", TaskState::Killed)
        .await
        .unwrap();
}
