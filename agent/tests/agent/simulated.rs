//! Simulated agents against the fake coordinator: a thousand register and heartbeat from one
//! process, and simulated tasks report their states.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::common::{wait_for, wait_for_async, Fake, Server};
use agent::{SimConfig, Timing};
use protocol::{AgentId, FrameworkId, TaskState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn start(
    coordinator: &str,
    count: usize,
) -> (
    String,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), agent::AgentError>>,
) {
    let mut config = SimConfig::new(coordinator, count, "cpus=24,mem=4096".parse().unwrap());
    config.stagger = Duration::from_millis(200);
    config.timing = Timing::fast();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let handle = tokio::spawn(agent::run_simulated(
        config,
        listener,
        stop.clone().cancelled_owned(),
    ));
    (url, stop, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_agents_register_and_heartbeat() {
    let fake = Fake::new(0.25);
    let server = Server::start(&fake).await;
    let (url, stop, handle) = start(&server.url(), 1000).await;

    wait_for(
        "1000 agents heartbeating twice",
        Duration::from_secs(9),
        || {
            let books = fake.books();
            books.known.len() == 1000
                && books.heartbeats.len() == 1000
                && books.heartbeats.values().all(|n| *n >= 2)
        },
    )
    .await;
    {
        let books = fake.books();
        assert_eq!(books.registrations.len(), 1000, "each registered once");
        let mut endpoints: Vec<&str> = books
            .registrations
            .iter()
            .map(|r| r.endpoint.as_str())
            .collect();
        endpoints.sort_unstable();
        endpoints.dedup();
        assert_eq!(endpoints.len(), 1000);
        assert!(books
            .registrations
            .iter()
            .all(|r| r.endpoint.starts_with(&format!("{url}/sim/"))));
    }
    stop.cancel();
    handle.await.unwrap().unwrap();
}

#[tokio::test]
async fn simulated_tasks_finish_after_their_duration_or_when_killed() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let (url, stop, handle) = start(&server.url(), 3).await;
    wait_for("registration", Duration::from_secs(5), || {
        fake.books().known.len() == 3
    })
    .await;
    let http = fake.agent_client();
    let fw = FrameworkId::new();
    let task = |id: &str, duration: Option<f64>| {
        json!({"task_id": id, "agent_id": AgentId::new(), "resources": {"cpus": 1},
               "command": {"shell": "ignored"}, "duration_s": duration})
    };
    let body =
        json!({"framework_id": fw, "tasks": [task("quick", Some(0.05)), task("forever", None)]});
    let resp = http
        .post(format!("{url}/sim/2/api/v1/tasks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let dup = http
        .post(format!("{url}/sim/2/api/v1/tasks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 409);

    fake.wait_state("quick", TaskState::Finished).await;
    assert_eq!(
        fake.states_of("quick"),
        [TaskState::Starting, TaskState::Running, TaskState::Finished]
    );
    let finished = fake.status_of("quick", TaskState::Finished).unwrap();
    let sim2 = fake.books().ids_by_endpoint[&format!("{url}/sim/2")];
    assert_eq!(
        finished.agent_id, sim2,
        "the update carries the id the coordinator gave agent 2"
    );
    assert_eq!(finished.framework_id, fw);

    let listed: serde_json::Value = http
        .get(format!("{url}/sim/2/api/v1/tasks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_id"] == "forever" && t["state"] == "running"),
        "{listed}"
    );

    let kill = http
        .post(format!("{url}/sim/2/api/v1/tasks/forever/kill"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(kill.status(), 202);
    fake.wait_state("forever", TaskState::Killed).await;

    assert_eq!(
        http.get(format!("{url}/sim/3/api/v1/health"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        http.get(format!("{url}/sim/x/api/v1/health"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        http.get(format!("{url}/sim/0/api/v1/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let bad = http
        .post(format!("{url}/sim/0/api/v1/tasks"))
        .body("{}")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    stop.cancel();
    handle.await.unwrap().unwrap();
}

#[tokio::test]
async fn updates_go_in_batches_and_a_refused_one_is_dropped_alone() {
    let fake = Fake::new(0.05);
    let server = Server::start(&fake).await;
    let (url, stop, handle) = start(&server.url(), 1).await;
    wait_for("registration", Duration::from_secs(5), || {
        fake.books().known.len() == 1
    })
    .await;
    let http = fake.agent_client();
    let launch = |ids: &[&str], duration: Option<f64>| {
        let tasks: Vec<_> = ids
            .iter()
            .map(|id| {
                json!({"task_id": id, "agent_id": AgentId::new(), "resources": {"cpus": 1},
                       "command": {"shell": "ignored"}, "duration_s": duration})
            })
            .collect();
        http.post(format!("{url}/sim/0/api/v1/tasks"))
            .json(&json!({"framework_id": FrameworkId::new(), "tasks": tasks}))
            .send()
    };

    // While the coordinator fails updates they queue up; the first request that gets through
    // carries all of them.
    fake.books().fail_statuses = true;
    assert_eq!(launch(&["a", "b", "c"], None).await.unwrap().status(), 202);
    wait_for_async(
        "three tasks running on the agent",
        Duration::from_secs(5),
        || async {
            let listed: serde_json::Value = http
                .get(format!("{url}/sim/0/api/v1/tasks"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            listed["tasks"]
                .as_array()
                .is_some_and(|t| t.iter().filter(|t| t["state"] == "running").count() == 3)
        },
    )
    .await;
    fake.books().fail_statuses = false;
    for id in ["a", "b", "c"] {
        fake.wait_state(id, TaskState::Running).await;
    }
    let sizes = fake.books().batch_sizes.clone();
    assert_eq!(sizes.iter().sum::<usize>(), 6, "{sizes:?}");
    assert!(
        sizes.iter().any(|n| *n > 1),
        "updates were batched: {sizes:?}"
    );

    // A batch the coordinator refuses is sent again one update at a time: the refused task's
    // updates are dropped, the others get through.
    fake.books().refuse_task = Some("bad".into());
    assert_eq!(
        launch(&["bad", "d"], Some(0.05)).await.unwrap().status(),
        202
    );
    fake.wait_state("d", TaskState::Finished).await;
    assert_eq!(
        fake.states_of("d"),
        [TaskState::Starting, TaskState::Running, TaskState::Finished]
    );
    assert!(fake.states_of("bad").is_empty());
    stop.cancel();
    handle.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_called_back_agent_heartbeats_at_once() {
    // Heartbeats every 120 s: the first one after registering comes 12–120 s later.
    let fake = Fake::new(120.0);
    let server = Server::start(&fake).await;
    let (url, stop, handle) = start(&server.url(), 2).await;
    wait_for("both agents registered", Duration::from_secs(9), || {
        fake.books().ids_by_endpoint.len() == 2
    })
    .await;
    let called = fake.books().ids_by_endpoint[&format!("{url}/sim/0")];
    let other = fake.books().ids_by_endpoint[&format!("{url}/sim/1")];

    let http = reqwest::Client::new();
    let post = |path: &str, body: &'static str| {
        http.post(format!("{url}{path}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // Bad calls change nothing and say why.
    let bad = post("/sim/0/api/v1/reconnect", "[1]").await.unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("reconnect body"));
    assert_eq!(
        post("/sim/2/api/v1/reconnect", "").await.unwrap().status(),
        404
    );
    // Called back (no token needed): agent 0 heartbeats now; agent 1 was not called.
    let ok = post("/sim/0/api/v1/reconnect", "{\"leader\": \"ignored\"}")
        .await
        .unwrap();
    assert_eq!(ok.status(), 202);
    wait_for(
        "the called agent to heartbeat",
        Duration::from_secs(5),
        || fake.books().heartbeats.get(&called).copied().unwrap_or(0) >= 1,
    )
    .await;
    assert_eq!(fake.books().heartbeats.get(&other), None);
    stop.cancel();
    handle.await.unwrap().unwrap();
}
