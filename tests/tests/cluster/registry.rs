//! End to end: the durable registry across coordinator restarts. A restarted coordinator knows
//! its frameworks (disconnected, in their roles), the role weights set at run time and the
//! frameworks it removed; the agents bring the tasks back, accounted under their framework's
//! real role; a framework that does not come back within its failover timeout is removed and
//! its tasks are killed, exactly as without the restart.
#![allow(clippy::unwrap_used)]

use protocol::messages::{FrameworkInfo, RegisterFramework, RoleNode};
use protocol::{AgentId, RolePath, TaskState};
use reqwest::StatusCode;
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

fn long_task(task_id: &str) -> protocol::TaskSpec {
    shell_task(task_id, AgentId::default(), "cpus=1,mem=128", "sleep 120")
}

fn find_role<'a>(node: &'a RoleNode, path: &str) -> Option<&'a RoleNode> {
    if node.path == path {
        return Some(node);
    }
    node.children.iter().find_map(|c| find_role(c, path))
}

async fn framework_info(c: &Cluster, id: protocol::FrameworkId) -> Option<FrameworkInfo> {
    c.frameworks()
        .await
        .ok()?
        .frameworks
        .into_iter()
        .find(|f| f.framework_id == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_coordinator_remembers_frameworks_weights_and_removals() {
    let mut cluster = Cluster::builder()
        .durable_registry()
        .agent("cpus=2,mem=1024")
        .start()
        .await
        .unwrap();
    let resp = cluster
        .http
        .put(format!("{}/api/v1/roles/eng", cluster.url))
        .json(&serde_json::json!({"weight": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut batch = TestFramework::register(&cluster.url, "batch", "eng/batch")
        .await
        .unwrap();
    let task = batch.launch(WITHIN, long_task("t1")).await.unwrap();
    batch
        .wait_state(WITHIN, "t1", TaskState::Running)
        .await
        .unwrap();
    let gone = TestFramework::register(&cluster.url, "gone", "ops")
        .await
        .unwrap();
    let gone_request = RegisterFramework {
        name: "gone".into(),
        role: RolePath::new("ops").unwrap(),
        failover_timeout_s: None,
        framework_id: Some(gone.id),
        demand: None,
        capabilities: Vec::new(),
        partition_timeout_s: None,
        webui_url: None,
    };
    gone.remove().await.unwrap();

    cluster.stop_coordinator().await.unwrap();
    cluster.start_coordinator().await.unwrap();

    // The stored books are back before any agent re-registers: the framework, disconnected,
    // in its role, and the weight set at run time.
    let info = cluster
        .wait_for("the framework listed again", |c| async move {
            framework_info(c, batch.id).await
        })
        .await
        .unwrap();
    assert_eq!(info.name, "batch");
    assert_eq!(info.role.as_str(), "eng/batch");
    assert_eq!(info.state, "disconnected");
    let roles = cluster.roles().await.unwrap();
    assert_eq!(find_role(&roles, "eng").unwrap().weight, 3.0);

    // The removed framework stays removed.
    let resp = cluster
        .http
        .post(format!("{}/api/v1/frameworks", cluster.url))
        .json(&gone_request)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    assert!(framework_info(&cluster, gone_request.framework_id.unwrap())
        .await
        .is_none());

    // The agent brings t1 back; it is accounted to the framework in its real role.
    let want = &task.resources;
    cluster
        .wait_for("t1 accounted under eng/batch", |c| async move {
            let roles = c.roles().await.ok()?;
            let batch_role = find_role(&roles, "eng/batch")?;
            (batch_role.allocated == *want).then_some(())
        })
        .await
        .unwrap();
    let info = framework_info(&cluster, batch.id).await.unwrap();
    assert_eq!(info.used, task.resources);

    // The framework re-registers with its id, takes t1 over and ends it.
    batch.reregister(StatusCode::OK).await.unwrap();
    assert_eq!(
        framework_info(&cluster, batch.id).await.unwrap().state,
        "connected"
    );
    batch.kill("t1").await.unwrap();
    batch
        .wait_state(WITHIN, "t1", TaskState::Killed)
        .await
        .unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framework_that_does_not_come_back_after_a_restart_is_removed_with_its_tasks() {
    let mut cluster = Cluster::builder()
        .durable_registry()
        .agent("cpus=2,mem=1024")
        .start()
        .await
        .unwrap();
    let request = RegisterFramework {
        name: "brief".into(),
        role: RolePath::new("eng").unwrap(),
        failover_timeout_s: Some(1.0),
        framework_id: None,
        demand: None,
        capabilities: Vec::new(),
        partition_timeout_s: None,
        webui_url: None,
    };
    let mut fw = TestFramework::register_with(&cluster.url, request, true)
        .await
        .unwrap();
    let task = fw.launch(WITHIN, long_task("t1")).await.unwrap();
    fw.wait_state(WITHIN, "t1", TaskState::Running)
        .await
        .unwrap();
    let agent = cluster.agent_info(0).await.unwrap();
    assert_eq!(agent.agent_id, task.agent_id);
    let endpoint = agent.endpoint.clone();

    cluster.stop_coordinator().await.unwrap();
    drop(fw);
    cluster.start_coordinator().await.unwrap();

    // One second after the restart the framework is gone, and the agent killed its task.
    cluster
        .wait_for("the framework removed", |c| async move {
            let list = c.frameworks().await.ok()?;
            list.frameworks.is_empty().then_some(())
        })
        .await
        .unwrap();
    let http = cluster.http.clone();
    cluster
        .wait_for("t1 killed on the agent", |_| {
            let (http, endpoint) = (http.clone(), endpoint.clone());
            async move {
                let list: protocol::messages::TaskStatusList = http
                    .get(format!("{endpoint}/api/v1/tasks"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                let t1 = list.tasks.iter().find(|t| t.task_id.as_str() == "t1")?;
                (t1.state == TaskState::Killed).then_some(())
            }
        })
        .await
        .unwrap();
    let agent = cluster.agent_info(0).await.unwrap();
    assert!(agent.used.is_empty(), "{agent:?}");
    cluster.shutdown().await.unwrap();
}
