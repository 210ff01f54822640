//! `parleyctl drain AGENT --deadline-s N` and `parleyctl reactivate AGENT` against
//! a real coordinator and agent: the agent's state follows, its task is killed at the deadline
//! with reason `agent_drained`, and bad input is a usage or API error that changes nothing.
#![allow(clippy::unwrap_used)]

use crate::support::{ctl, ok};
use parleyctl::CtlError;
use protocol::TaskState;
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

async fn state_of(cluster: &Cluster) -> String {
    cluster.agent_info(0).await.unwrap().state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_kills_at_the_deadline_and_reactivate_brings_the_agent_back() {
    let cluster = Cluster::start(&["cpus=2,mem=1024"]).await.unwrap();
    let url = cluster.url.clone();
    let agent = cluster.agent_info(0).await.unwrap();
    let mut fw = TestFramework::register(&url, "ctl-drain", "eng")
        .await
        .unwrap();
    let sleeper = shell_task("sleeper", agent.agent_id, "cpus=1,mem=64", "sleep 600");
    fw.launch(WITHIN, sleeper).await.unwrap();
    fw.wait_state(WITHIN, "sleeper", TaskState::Running)
        .await
        .unwrap();

    // By hostname; the answer says what happens.
    let out = ok(&url, &["drain", &agent.hostname, "--deadline-s", "0.5"]).await;
    assert!(
        out.contains(&agent.agent_id.to_string()) && out.contains("draining"),
        "{out}"
    );
    let killed = fw
        .wait_state(WITHIN, "sleeper", TaskState::Killed)
        .await
        .unwrap();
    assert_eq!(
        killed.reason.as_deref(),
        Some(protocol::task::REASON_AGENT_DRAINED)
    );
    cluster
        .wait_for("drained", |c| async move {
            (c.agent_info(0).await.ok()?.state == "drained").then_some(())
        })
        .await
        .unwrap();
    let table = ok(&url, &["agents"]).await;
    assert!(table.contains("drained"), "{table}");
    // The coordinator keeps why the task ended.
    let described = ok(&url, &["describe", "task", "sleeper"]).await;
    assert!(
        described.contains("Reason:           agent_drained"),
        "{described}"
    );

    // By id, as JSON: the API's answer.
    let out = ok(&url, &["--json", "reactivate", &agent.agent_id.to_string()]).await;
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["state"], "active", "{out}");
    assert_eq!(state_of(&cluster).await, "active");
    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_drains_are_usage_or_api_errors_and_change_nothing() {
    let cluster = Cluster::start(&["cpus=1,mem=256"]).await.unwrap();
    let url = cluster.url.clone();
    let id = cluster.agent_info(0).await.unwrap().agent_id.to_string();

    let (result, _) = ctl(&url, &["drain", &id, "--deadline-s", "-3"]).await;
    assert!(
        matches!(&result, Err(CtlError::Usage(m)) if m.contains("--deadline-s")),
        "{result:?}"
    );
    let unknown = protocol::AgentId::new().to_string();
    let (result, _) = ctl(&url, &["drain", &unknown, "--deadline-s", "5"]).await;
    assert!(
        matches!(&result, Err(CtlError::Api { status: 404, code, .. }) if code == "agent_not_found"),
        "{result:?}"
    );
    let (result, _) = ctl(&url, &["reactivate", "no-such-host"]).await;
    assert!(matches!(&result, Err(CtlError::NotFound(_))), "{result:?}");
    assert_eq!(state_of(&cluster).await, "active");
    // Reactivating an active agent is fine and changes nothing.
    let out = ok(&url, &["reactivate", &id]).await;
    assert!(out.contains("active"), "{out}");
    cluster.shutdown().await.unwrap();
}
