//! The agent API: registration and re-registration, heartbeats, status posts and their
//! errors in process (`Router::oneshot`); agent loss, and adoption of agents and tasks unknown
//! after a coordinator restart, through real HTTP.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::{fast_config, keep_alive, Api, FakeAgent, Rest, TestCoordinator};
use protocol::{AgentId, FrameworkEvent, FrameworkId, TaskState, TaskStatus};
use serde_json::json;

/// The endpoint of agents registered in process: never called, as no task is launched.
const NOWHERE: &str = "http://127.0.0.1:9";

#[tokio::test]
async fn register_heartbeat_and_reregister() {
    let api = Api::new(fast_config());
    let id = api.register_agent_at(NOWHERE, json!({"cpus": 2})).await;
    let (status, _) = api
        .post(&format!("/api/v1/agents/{id}/heartbeat"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, body) = api
        .post(
            &format!("/api/v1/agents/{}/heartbeat", AgentId::new()),
            json!({}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "agent_not_found");

    // Re-registration with the known id and new resources: 200, same id, new capacity.
    let (status, body) = api
        .post(
            "/api/v1/agents",
            json!({"hostname": "fake", "endpoint": NOWHERE, "resources": {"cpus": 3},
                   "agent_id": id, "tasks": []}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["agent_id"], json!(id));
    let agents = api.agents().await;
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].resources, "cpus=3".parse().unwrap());
}

#[tokio::test]
async fn a_silent_agent_is_lost_with_its_offers_and_tasks() {
    let config = coordinator::Config {
        agent_heartbeat_interval: Duration::from_millis(50),
        max_missed_heartbeats: 3,
        ..fast_config()
    };
    let c = TestCoordinator::start(config).await;
    let (fw, mut events) = c.framework("f", "f").await;
    let alive = FakeAgent::start().await;
    let alive_id = c.register_agent(&alive, json!({"cpus": 1})).await;
    let _beat = keep_alive(&c, alive_id);
    let silent = FakeAgent::start().await;
    let silent_id = c.register_agent(&silent, json!({"cpus": 2})).await;

    // A task on the silent agent, and an outstanding offer there too.
    let mut offers = Vec::new();
    while !offers
        .iter()
        .any(|o: &protocol::Offer| o.agent_id == silent_id)
    {
        offers.extend(events.offers().await);
    }
    let on_silent = offers
        .iter()
        .find(|o| o.agent_id == silent_id)
        .unwrap()
        .clone();
    assert_eq!(
        c.accept_one(fw, &on_silent, "t1", json!({"cpus": 1}))
            .await
            .0,
        200
    );
    let rest = loop {
        let o = events.offers().await;
        if let Some(o) = o.into_iter().find(|o| o.agent_id == silent_id) {
            break o;
        }
    };

    // Offers are rescinded, then tasks reported lost.
    let (mut rescinded, mut lost) = (false, None);
    while !rescinded || lost.is_none() {
        match events.next().await.unwrap() {
            FrameworkEvent::Rescind { offer_id } if offer_id == rest.offer_id => rescinded = true,
            FrameworkEvent::Update { status } if status.state == TaskState::Lost => {
                lost = Some(status)
            }
            _ => {}
        }
    }
    assert_eq!(lost.unwrap().agent_id, silent_id);
    let agents = c.agents().await;
    let silent_info = agents.iter().find(|a| a.agent_id == silent_id).unwrap();
    assert_eq!(silent_info.state, "lost");
    assert!(c.offers().await.iter().all(|o| o.agent_id != silent_id));
    assert_eq!(
        agents
            .iter()
            .find(|a| a.agent_id == alive_id)
            .unwrap()
            .state,
        "active"
    );
    let (status, _) = c
        .post(&format!("/api/v1/agents/{silent_id}/heartbeat"), json!({}))
        .await;
    assert_eq!(status, 404, "a lost agent is told to register again");

    // It comes back with the task still running: its framework was told `lost` (and may have
    // launched it again), so the coordinator fences it instead of taking it back.
    let (status, body) = c
        .post(
            "/api/v1/agents",
            json!({"hostname": "fake", "endpoint": silent.endpoint, "resources": {"cpus": 2},
                   "agent_id": silent_id, "tasks": [status_json(silent_id, fw, "t1", "running")]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let _beat2 = keep_alive(&c, silent_id);
    crate::support::wait_for("the fence", || {
        std::future::ready(silent.fences() == ["t1"])
    })
    .await;
    c.wait_for_task_state("t1", TaskState::Lost).await;
    let info = c
        .agents()
        .await
        .into_iter()
        .find(|a| a.agent_id == silent_id)
        .unwrap();
    assert!(info.used.is_empty(), "a fenced task holds nothing");
    let (_, metrics) = c.get_text("/metrics").await;
    assert!(metrics.contains("parley_tasks_fenced_total 1"), "{metrics}");

    // The agent reports the fenced end: it is the framework's last word on the task.
    let mut killed = status_json(silent_id, fw, "t1", "killed");
    killed["reason"] = json!("agent_partitioned");
    let (status, body) = c
        .post(
            &format!("/api/v1/agents/{silent_id}/statuses"),
            json!({ "statuses": [killed] }),
        )
        .await;
    assert!(status < 300, "{status} {body}");
    let end = events.update("t1", TaskState::Killed).await;
    assert_eq!(end.reason.as_deref(), Some("agent_partitioned"));
    c.assert_books_consistent().await;
}

pub(crate) fn status_json(
    agent: AgentId,
    fw: FrameworkId,
    task: &str,
    state: &str,
) -> serde_json::Value {
    json!({"task_id": task, "framework_id": fw, "agent_id": agent, "state": state,
           "update_id": protocol::UpdateId::new(), "timestamp": protocol::now()})
}

#[tokio::test]
async fn unknown_agent_and_framework_ids_are_adopted_after_a_restart() {
    let c = TestCoordinator::start(fast_config()).await;
    let agent = FakeAgent::start().await;
    let (agent_id, fw) = (AgentId::new(), FrameworkId::new());
    let (status, body) = c
        .post(
            "/api/v1/agents",
            json!({"hostname": "fake", "endpoint": agent.endpoint, "resources": {"cpus": 2},
                   "agent_id": agent_id, "tasks": [status_json(agent_id, fw, "t1", "running")]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["agent_id"], json!(agent_id));
    assert_eq!(c.task("t1").await.unwrap().framework_id, fw);

    // The framework comes back with its id: adopted, its task re-attached and reported.
    let (status, body) = c
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "eng", "framework_id": fw}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut events = c.subscribe(fw).await;
    let update = events.update("t1", TaskState::Running).await;
    assert_eq!(update.agent_id, agent_id);
    let fws = c.frameworks().await;
    assert_eq!(fws[0].role.as_str(), "eng");
    assert_eq!(fws[0].active_tasks, 1);
}

#[tokio::test]
async fn bad_agent_requests_are_refused_without_changing_state() {
    let api = Api::new(fast_config());
    let id = api.register_agent_at(NOWHERE, json!({"cpus": 1})).await;
    let before = api.agents().await;
    let cases = [
        (
            json!({"hostname": "h", "endpoint": "not a url", "resources": {"cpus": 1}}),
            400,
            "invalid_field",
        ),
        (
            json!({"hostname": "h", "endpoint": "ftp://x", "resources": {"cpus": 1}}),
            400,
            "invalid_field",
        ),
        (
            json!({"hostname": "", "endpoint": NOWHERE, "resources": {"cpus": 1}}),
            400,
            "invalid_field",
        ),
        (
            json!({"hostname": "h", "endpoint": NOWHERE, "resources": {}}),
            400,
            "invalid_field",
        ),
        (
            json!({"hostname": "h", "endpoint": NOWHERE, "resources": {"cpus": -1}}),
            400,
            "invalid_body",
        ),
        (
            json!({"hostname": "h", "endpoint": NOWHERE, "resources": {"cpus": 1}, "extra": 1}),
            400,
            "invalid_body",
        ),
        (
            json!({"hostname": "h", "endpoint": NOWHERE, "resources": {"cpus": 1},
                "tasks": [status_json(id, FrameworkId::new(), "t", "running")]}),
            400,
            "invalid_field",
        ),
    ];
    for (body, status, code) in cases {
        let (got, answer) = api.post("/api/v1/agents", body.clone()).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str().unwrap()),
            (status, code),
            "{body}"
        );
    }
    // A status naming another agent, and one for an unknown agent.
    let other = status_json(AgentId::new(), FrameworkId::new(), "t", "running");
    let (got, _) = api
        .post(&format!("/api/v1/agents/{id}/status"), other.clone())
        .await;
    assert_eq!(got, 422);
    let (got, _) = api
        .post(&format!("/api/v1/agents/{}/status", AgentId::new()), other)
        .await;
    assert_eq!(got, 404);
    let (got, _) = api
        .post(
            &format!("/api/v1/agents/{id}/status"),
            json!({"task_id": "t"}),
        )
        .await;
    assert_eq!(got, 400);
    let (got, _) = api
        .post("/api/v1/agents/not-a-uuid/heartbeat", json!({}))
        .await;
    assert_eq!(got, 400);
    assert_eq!(api.agents().await, before);
    assert!(api.tasks().await.is_empty());
    let _ = TaskStatus::clone;
}

#[tokio::test]
async fn a_measured_end_is_relayed_with_its_reason_and_usage_and_counted_once() {
    let c = TestCoordinator::start(fast_config()).await;
    let agent = FakeAgent::start().await;
    let (agent_id, fw) = (AgentId::new(), FrameworkId::new());
    let (status, body) = c
        .post(
            "/api/v1/agents",
            json!({"hostname": "fake", "endpoint": agent.endpoint, "resources": {"cpus": 2},
                   "agent_id": agent_id, "tasks": [status_json(agent_id, fw, "hog", "running")]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = c
        .post(
            "/api/v1/frameworks",
            json!({"name": "f", "role": "eng", "framework_id": fw}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut events = c.subscribe(fw).await;
    events.update("hog", TaskState::Running).await;

    let mut end = status_json(agent_id, fw, "hog", "failed");
    end["message"] = json!("memory_limit: the task reached its memory limit of 64 MiB");
    end["reason"] = json!("memory_limit");
    end["usage"] = json!({"peak_memory_bytes": 67108864, "cpu_seconds": 1.5,
                          "throttled_seconds": 0.25});
    // Sent twice (an agent resends until acknowledged): relayed, counted once.
    for _ in 0..2 {
        let (status, body) = c
            .post(&format!("/api/v1/agents/{agent_id}/status"), end.clone())
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let update = events.update("hog", TaskState::Failed).await;
    assert_eq!(update.reason.as_deref(), Some("memory_limit"));
    let usage = update.usage.unwrap();
    assert_eq!(usage.peak_memory_bytes, Some(64 << 20));
    assert_eq!(usage.cpu_seconds, Some(1.5));

    let (status, text) = c.get_text("/metrics").await;
    assert_eq!(status, 200);
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{name} missing from /metrics"))
            .to_string()
    };
    assert_eq!(value("parley_tasks_memory_limit_total"), "1");
    assert_eq!(value("parley_tasks_measured_total"), "1");
    assert_eq!(value("parley_task_peak_memory_bytes_total"), "67108864");
    assert_eq!(value("parley_task_cpu_seconds_total"), "1.5");
    assert_eq!(value("parley_task_throttled_seconds_total"), "0.25");
}

#[tokio::test]
async fn requests_are_counted_by_route_on_metrics() {
    let c = TestCoordinator::start(fast_config()).await;
    let (status, body) = c
        .post(
            "/api/v1/agents",
            json!({"hostname": "h", "endpoint": NOWHERE, "resources": {"cpus": 2}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["agent_id"].as_str().unwrap().to_owned();
    for _ in 0..2 {
        let (status, body) = c
            .post(&format!("/api/v1/agents/{id}/heartbeat"), json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, _) = c.get_text("/api/v1/no-such-route").await;
    assert_eq!(status, 404);

    let (_, text) = c.get_text("/metrics").await;
    let series = |family: &str, route: &str| {
        let prefix = format!("{family}{{route=\"{route}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|v| v.parse::<f64>().unwrap())
            .unwrap_or_else(|| panic!("{prefix} missing from /metrics:\n{text}"))
    };
    assert_eq!(
        series("parley_http_requests_total", "POST /api/v1/agents"),
        1.0
    );
    let beats = "POST /api/v1/agents/{id}/heartbeat";
    assert_eq!(series("parley_http_requests_total", beats), 2.0);
    assert_eq!(series("parley_http_requests_total", "other"), 1.0);
    assert!(series("parley_http_request_seconds_total", beats) > 0.0);
    // Routes that answered nothing have no series.
    assert!(
        !text.contains("route=\"DELETE /api/v1/frameworks/{id}\""),
        "{text}"
    );
}
