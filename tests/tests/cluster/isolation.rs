//! End to end: isolation requests at accept time. The cluster's in-process agents run without
//! a launcher, so they advertise `isolation=none` and no namespaces (said by the agent, not
//! guessed by the coordinator); a task asking for what they cannot give, an unknown isolation
//! option or a negative `pids` is refused with a 4xx naming the field, and nothing is launched:
//! the same offer then launches a plain task. (Isolated tasks on a real launcher:
//! `agent/tests/agent/isolation.rs`.)
#![allow(clippy::unwrap_used)]

use protocol::TaskState;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_the_agent_cannot_give_or_bad_options_are_refused_at_accept() {
    let cluster = Cluster::builder()
        .agent("cpus=2,mem=1024")
        .start()
        .await
        .unwrap();
    let info = cluster.agent_info(0).await.unwrap();
    assert_eq!(info.attributes["isolation"], "none");
    assert_eq!(info.attributes["namespaces"], "");

    let mut fw = TestFramework::register(&cluster.url, "iso", "eng")
        .await
        .unwrap();
    let offers = fw.next_offers(WITHIN).await.unwrap();
    let offer = &offers[0];
    let task = |isolation: Value| {
        let mut t = serde_json::to_value(shell_task("t1", offer.agent_id, "cpus=1,mem=64", "true"))
            .unwrap();
        t["isolation"] = isolation;
        t
    };
    let cases = [
        (json!({"cpuset": 1}), "cpuset"),
        (json!({"pids": -1}), "isolation.pids"),
        (json!({"pids": 8}), "isolation.pids"),
        (json!({"network": "loopback"}), "isolation.network"),
        (json!({"image": "debian.tar"}), "isolation.image"),
    ];
    for (isolation, field) in cases {
        let body = json!({"offer_ids": [offer.offer_id], "tasks": [task(isolation.clone())]});
        let (status, answer) = fw.post("accept", &body).await.unwrap();
        assert!(status.is_client_error(), "{isolation}: {status} {answer}");
        assert!(answer.to_string().contains(field), "{isolation}: {answer}");
        if isolation != json!({"cpuset": 1}) && isolation != json!({"pids": -1}) {
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
            assert_eq!(answer["error"]["code"], "isolation_unavailable", "{answer}");
        }
        assert!(
            cluster.tasks_of(fw.id).await.unwrap().is_empty(),
            "nothing launched"
        );
    }
    // The offer is intact: a plain task launches from it.
    let plain = shell_task("t1", offer.agent_id, "cpus=1,mem=64", "true");
    let launched = fw.accept(&[offer.offer_id], vec![plain]).await.unwrap();
    assert_eq!(launched.len(), 1);
    fw.wait_state(WITHIN, "t1", TaskState::Finished)
        .await
        .unwrap();
    cluster.shutdown().await.unwrap();
}
