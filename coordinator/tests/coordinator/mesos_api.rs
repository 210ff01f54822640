//! The Mesos v1 scheduler API through real HTTP, with hand-written JSON calls: SUBSCRIBE and
//! its RecordIO stream, offers, ACCEPT with LAUNCH, UPDATE and ACKNOWLEDGE, DECLINE with a
//! filter, KILL, RECONCILE (explicit and implicit), TEARDOWN, failover, and the refusals
//! (stream id missing or wrong, not subscribed, protobuf, malformed calls).

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::pin::Pin;

use crate::support::{fast_config, wait_for, FakeAgent, Rest, TestCoordinator, DEADLINE};
use coordinator::mesos::recordio::Decoder;
use futures::{Stream, StreamExt};
use protocol::{CommandSpec, TaskState};
use serde_json::{json, Value};

type Chunks = Pin<Box<dyn Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>;

/// A Mesos event stream, decoded record by record.
struct MesosStream {
    stream_id: String,
    framework_id: String,
    chunks: Chunks,
    decoder: Decoder,
    queue: VecDeque<Value>,
}

impl MesosStream {
    /// The next event; `None` when the stream ended. Panics after [`DEADLINE`].
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(v) = self.queue.pop_front() {
                return Some(v);
            }
            match tokio::time::timeout(DEADLINE, self.chunks.next()).await {
                Err(_) => panic!("no Mesos event within {DEADLINE:?}"),
                Ok(None) | Ok(Some(Err(_))) => return None,
                Ok(Some(Ok(chunk))) => {
                    for record in self.decoder.feed(&chunk).unwrap() {
                        self.queue
                            .push_back(serde_json::from_slice(&record).unwrap());
                    }
                }
            }
        }
    }

    async fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self
                .next()
                .await
                .unwrap_or_else(|| panic!("the stream ended while waiting for {what}"));
            if pred(&v) {
                return v;
            }
        }
    }

    async fn offers(&mut self) -> Vec<Value> {
        let v = self.wait_for("OFFERS", |v| v["type"] == "OFFERS").await;
        v["offers"]["offers"].as_array().unwrap().clone()
    }

    async fn update(&mut self, task: &str, state: &str) -> Value {
        let v = self
            .wait_for(&format!("UPDATE {task} {state}"), |v| {
                v["type"] == "UPDATE"
                    && v["update"]["status"]["task_id"]["value"] == task
                    && v["update"]["status"]["state"] == state
            })
            .await;
        v["update"]["status"].clone()
    }

    /// Sends a call as this framework, with its stream id; returns the status.
    async fn call(&self, c: &TestCoordinator, mut body: Value) -> u16 {
        body["framework_id"] = json!({ "value": self.framework_id });
        call(c, Some(&self.stream_id), body).await.0
    }
}

async fn call(c: &TestCoordinator, stream_id: Option<&str>, body: Value) -> (u16, String) {
    let mut req = c
        .client
        .post(format!("{}/api/v1/scheduler", c.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(id) = stream_id {
        req = req.header("Mesos-Stream-Id", id);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// SUBSCRIBEs with `framework_info` (and `framework_id`, to fail over); checks the answer is
/// a chunked JSON stream with a stream id whose first events are SUBSCRIBED and HEARTBEAT.
async fn subscribe(c: &TestCoordinator, info: Value, id: Option<&str>) -> MesosStream {
    let mut body = json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": info}});
    if let Some(id) = id {
        body["framework_id"] = json!({ "value": id });
    }
    let resp = c
        .client
        .post(format!("{}/api/v1/scheduler", c.base))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let h = resp.headers();
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(
        h["transfer-encoding"], "chunked",
        "pymesos needs a chunked stream"
    );
    let stream_id = h["mesos-stream-id"].to_str().unwrap().to_owned();
    let mut s = MesosStream {
        stream_id,
        framework_id: String::new(),
        chunks: Box::pin(resp.bytes_stream()),
        decoder: Decoder::new(),
        queue: VecDeque::new(),
    };
    let first = s.next().await.unwrap();
    assert_eq!(first["type"], "SUBSCRIBED", "{first}");
    assert_eq!(first["subscribed"]["heartbeat_interval_seconds"], 0.1);
    s.framework_id = first["subscribed"]["framework_id"]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(s.next().await.unwrap()["type"], "HEARTBEAT");
    s
}

fn info(name: &str) -> Value {
    json!({"user": "root", "name": name, "hostname": "h", "failover_timeout": 30,
           "capabilities": [{"type": "GPU_RESOURCES"}]})
}

fn launch(offer: &Value, task_id: &str, command: Value) -> Value {
    json!({"type": "ACCEPT", "accept": {
        "offer_ids": [offer["id"]],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": [{
            "task_id": {"value": task_id}, "agent_id": offer["agent_id"], "name": task_id,
            "command": command,
            "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}},
                          {"name": "mem", "type": "SCALAR", "scalar": {"value": 128}}]}]}}],
        "filters": {"refuse_seconds": 0}}})
}

/// A coordinator, a fake agent of 4 cpus and 1 GiB, and a subscribed Mesos framework.
async fn setup(name: &str) -> (TestCoordinator, FakeAgent, protocol::AgentId, MesosStream) {
    let c = TestCoordinator::start(fast_config()).await;
    let s = subscribe(&c, info(name), None).await;
    let agent = FakeAgent::start().await;
    let agent_id = c
        .register_agent(&agent, json!({"cpus": 4, "mem": 1024}))
        .await;
    (c, agent, agent_id, s)
}

#[tokio::test]
async fn offers_arrive_and_accept_launches_updates_carry_uuids_and_are_acknowledged() {
    let (c, agent, agent_id, mut s) = setup("mesos").await;
    let offers = s.offers().await;
    assert_eq!(offers.len(), 1);
    let offer = &offers[0];
    assert_eq!(offer["agent_id"]["value"], agent_id.to_string());
    assert_eq!(offer["framework_id"]["value"], s.framework_id);
    let resources = offer["resources"].as_array().unwrap();
    assert!(resources.contains(
        &json!({"name": "cpus", "type": "SCALAR", "scalar": {"value": 4.0}, "role": "*"})
    ));

    // A task id Parley cannot take: 400, nothing launched.
    assert_eq!(
        s.call(&c, launch(offer, "../x", json!({"value": "true"})))
            .await,
        400
    );
    assert!(agent.launched_task_ids().is_empty());

    let cmd = json!({"value": "echo $A", "shell": true,
                     "environment": {"variables": [{"name": "A", "value": "b"}]}});
    assert_eq!(s.call(&c, launch(offer, "t1", cmd)).await, 202);
    wait_for("the launch", || async {
        agent.launched_task_ids() == ["t1"]
    })
    .await;
    let spec = agent.received.lock().unwrap().launches[0].tasks[0].clone();
    assert_eq!(spec.command, CommandSpec::Shell("echo $A".into()));
    assert_eq!(spec.env["A"], "b");
    assert_eq!(spec.resources, "cpus=1,mem=128".parse().unwrap());
    // Parley's own views list it, of this framework.
    assert_eq!(
        c.task("t1").await.unwrap().framework_id.to_string(),
        s.framework_id
    );

    let fw = s.framework_id.parse().unwrap();
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    let status = s.update("t1", "TASK_RUNNING").await;
    assert_eq!(status["agent_id"]["value"], agent_id.to_string());
    let uuid = status["uuid"].as_str().unwrap().to_owned();
    assert_eq!(uuid.len(), 24);

    let ack = |uuid: &str| {
        json!({"type": "ACKNOWLEDGE", "acknowledge": {
            "agent_id": {"value": agent_id.to_string()}, "task_id": {"value": "t1"}, "uuid": uuid}})
    };
    assert_eq!(s.call(&c, ack("not base64!")).await, 400);
    assert_eq!(s.call(&c, ack(&uuid)).await, 202);
    // Acknowledged: not sent again, though unacknowledged updates are re-sent every 100 ms
    // (three heartbeats are 300 ms).
    let mut heartbeats = 0;
    while heartbeats < 3 {
        let v = s.next().await.unwrap();
        assert_ne!(
            v["type"], "UPDATE",
            "an acknowledged update came again: {v}"
        );
        heartbeats += usize::from(v["type"] == "HEARTBEAT");
    }
    c.post_status(agent_id, fw, "t1", TaskState::Finished).await;
    let finished = s.update("t1", "TASK_FINISHED").await;
    assert_ne!(finished["uuid"], uuid.as_str());
}

#[tokio::test]
async fn an_argv_command_runs_value_with_the_arguments_after_argv0() {
    let (c, agent, _, mut s) = setup("argv").await;
    let offer = s.offers().await.remove(0);
    let cmd = json!({"value": "/bin/echo", "shell": false, "arguments": ["echo", "a"]});
    assert_eq!(s.call(&c, launch(&offer, "t1", cmd)).await, 202);
    wait_for("the launch", || async {
        agent.launched_task_ids() == ["t1"]
    })
    .await;
    let spec = agent.received.lock().unwrap().launches[0].tasks[0].clone();
    assert_eq!(
        spec.command,
        CommandSpec::Argv(vec!["/bin/echo".into(), "a".into()])
    );
}

#[tokio::test]
async fn an_accept_of_a_used_offer_reports_its_tasks_dropped() {
    let (c, agent, _, mut s) = setup("dropped").await;
    let offer = s.offers().await.remove(0);
    assert_eq!(
        s.call(&c, launch(&offer, "t1", json!({"value": "true"})))
            .await,
        202
    );
    assert_eq!(
        s.call(&c, launch(&offer, "t2", json!({"value": "true"})))
            .await,
        202
    );
    let status = s.update("t2", "TASK_DROPPED").await;
    assert_eq!(status["reason"], "REASON_INVALID_OFFERS");
    assert!(status.get("uuid").is_none());
    assert_eq!(agent.launched_task_ids(), ["t1"]);
}

#[tokio::test]
async fn a_decline_filters_the_agent_until_revive() {
    let (c, _agent, _, mut s) = setup("decliner").await;
    let offer = s.offers().await.remove(0);
    let decline = json!({"type": "DECLINE", "decline": {
        "offer_ids": [offer["id"], {"value": uuid::Uuid::new_v4().to_string()}],
        "filters": {"refuse_seconds": 600.0}}});
    assert_eq!(
        s.call(&c, decline).await,
        202,
        "unknown offers are ignored, as Mesos does"
    );
    let fw = s.framework_id.clone();
    wait_for("explain: the agent filtered", || async {
        let e = c.get(&format!("/api/v1/frameworks/{fw}/explain")).await;
        e["agents"]["filtered"] == 1 && e["outstanding_offers"] == 0
    })
    .await;
    assert_eq!(s.call(&c, json!({"type": "REVIVE"})).await, 202);
    assert_eq!(s.offers().await.len(), 1);
    assert_eq!(s.call(&c, json!({"type": "SUPPRESS"})).await, 202);
    let e = c.get(&format!("/api/v1/frameworks/{fw}/explain")).await;
    assert_eq!(e["suppressed"], true);
}

#[tokio::test]
async fn kill_and_reconcile_known_and_unknown_tasks() {
    let (c, agent, agent_id, mut s) = setup("killer").await;
    let offer = s.offers().await.remove(0);
    assert_eq!(
        s.call(&c, launch(&offer, "t1", json!({"value": "sleep 100"})))
            .await,
        202
    );
    let fw = s.framework_id.parse().unwrap();
    c.post_status(agent_id, fw, "t1", TaskState::Running).await;
    s.update("t1", "TASK_RUNNING").await;

    let kill = |t: &str| json!({"type": "KILL", "kill": {"task_id": {"value": t}}});
    assert_eq!(s.call(&c, kill("t1")).await, 202);
    wait_for("the kill", || async { agent.kills() == ["t1"] }).await;
    assert_eq!(s.call(&c, kill("ghost")).await, 202);
    let lost = s.update("ghost", "TASK_LOST").await;
    assert!(lost.get("uuid").is_none());

    let reconcile = json!({"type": "RECONCILE", "reconcile": {"tasks": [
        {"task_id": {"value": "t1"}}, {"task_id": {"value": "nope"}}]}});
    assert_eq!(s.call(&c, reconcile).await, 202);
    let known = s.update("t1", "TASK_RUNNING").await;
    assert_eq!(known["reason"], "REASON_RECONCILIATION");
    assert!(
        known.get("uuid").is_none(),
        "reconciliation answers are not acknowledged"
    );
    s.update("nope", "TASK_LOST").await;
    assert_eq!(
        s.call(&c, json!({"type": "RECONCILE", "reconcile": {"tasks": []}}))
            .await,
        202
    );
    let implicit = s.update("t1", "TASK_RUNNING").await;
    assert_eq!(implicit["reason"], "REASON_RECONCILIATION");
}

#[tokio::test]
async fn stream_ids_are_checked_and_unknown_calls_accepted() {
    let (c, _agent, _, s) = setup("checked").await;
    let revive = json!({"type": "REVIVE", "framework_id": {"value": s.framework_id}});
    assert_eq!(call(&c, None, revive.clone()).await.0, 400);
    let (code, body) = call(&c, Some("wrong"), revive.clone()).await;
    assert_eq!(code, 400);
    assert!(body.contains("Mesos-Stream-Id"), "{body}");
    let stranger =
        json!({"type": "REVIVE", "framework_id": {"value": uuid::Uuid::new_v4().to_string()}});
    assert_eq!(call(&c, Some(&s.stream_id), stranger).await.0, 403);
    for kind in [
        "MESSAGE",
        "REQUEST",
        "ACCEPT_INVERSE_OFFERS",
        "SOMETHING_NEW",
    ] {
        assert_eq!(s.call(&c, json!({"type": kind})).await, 202, "{kind}");
    }
    assert_eq!(
        s.call(&c, json!({"type": "ACCEPT"})).await,
        400,
        "ACCEPT needs accept"
    );
    let protobuf = c
        .client
        .post(format!("{}/api/v1/scheduler", c.base))
        .header("content-type", "application/x-protobuf")
        .body(vec![8u8, 1])
        .send()
        .await
        .unwrap();
    assert_eq!(protobuf.status().as_u16(), 415);
    let version = c.get("/version").await;
    assert_eq!(version["version"], "1.11.0");
}

#[tokio::test]
async fn failover_keeps_the_tasks_and_teardown_removes_the_framework() {
    let (c, agent, _, mut s) = setup("failover").await;
    let offer = s.offers().await.remove(0);
    assert_eq!(
        s.call(&c, launch(&offer, "t1", json!({"value": "sleep 100"})))
            .await,
        202
    );
    let old_id = s.stream_id.clone();
    let fw = s.framework_id.clone();
    let mut again = subscribe(&c, info("failover"), Some(&fw)).await;
    assert_eq!(again.framework_id, fw, "the same framework");
    assert_ne!(again.stream_id, old_id);
    // The older stream ends (after what it was sent before the new subscription, if anything;
    // `next` fails the test if it does not end within its deadline).
    while s.next().await.is_some() {}
    let revive = json!({"type": "REVIVE", "framework_id": {"value": fw}});
    assert_eq!(call(&c, Some(&old_id), revive).await.0, 400);
    assert!(c.task("t1").await.is_some(), "its task is kept");

    assert_eq!(again.call(&c, json!({"type": "TEARDOWN"})).await, 202);
    while again.next().await.is_some() {}
    assert!(c
        .frameworks()
        .await
        .iter()
        .all(|f| f.framework_id.to_string() != fw));
    wait_for("the task killed", || async { agent.kills() == ["t1"] }).await;
}

#[tokio::test]
async fn with_credentials_the_principal_token_works_as_bearer_or_as_pymesos_basic_secret() {
    use base64::Engine as _;
    let h = |t: &str| coordinator::auth::SecretHash::of(t).to_hex();
    let credentials = coordinator::auth::Credentials::from_toml(&format!(
        "[[principals]]\nname = \"team-a\"\nkind = \"framework\"\nsecret_sha256 = \"{}\"\nroles = [\"eng/*\"]\n\n\
         [[principals]]\nname = \"bob\"\nkind = \"operator\"\naccess = \"read\"\nsecret_sha256 = \"{}\"\n",
        h("token-a"),
        h("token-bob")
    ))
    .unwrap();
    let c = TestCoordinator::start(coordinator::Config {
        credentials: Some(std::sync::Arc::new(credentials)),
        ..fast_config()
    })
    .await;
    let basic = |user: &str, secret: &str| {
        let pair = format!("{user}:{secret}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    };
    let subscribe = json!({"type": "SUBSCRIBE", "subscribe": {"framework_info":
        {"user": "root", "name": "secure", "role": "eng/mesos"}}});
    let send = |auth: Option<String>, body: Value, stream: Option<String>| {
        let mut req = c
            .client
            .post(format!("{}/api/v1/scheduler", c.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        if let Some(s) = stream {
            req = req.header("mesos-stream-id", s);
        }
        req.send()
    };
    assert_eq!(
        send(None, subscribe.clone(), None)
            .await
            .unwrap()
            .status()
            .as_u16(),
        401
    );
    for wrong in [
        basic("team-a", "nope"),
        basic("bob", "token-a"),
        "Basic !!".into(),
    ] {
        let status = send(Some(wrong.clone()), subscribe.clone(), None)
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 401, "{wrong}");
    }
    let operator = send(Some("Bearer token-bob".into()), subscribe.clone(), None)
        .await
        .unwrap();
    assert_eq!(
        operator.status().as_u16(),
        403,
        "operators may not act as frameworks"
    );
    let star = json!({"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "x"}}});
    let outside = send(Some("Bearer token-a".into()), star, None)
        .await
        .unwrap();
    assert_eq!(
        outside.status().as_u16(),
        403,
        "\"*\" is the default role, not in eng/*"
    );

    let stream = send(Some(basic("team-a", "token-a")), subscribe.clone(), None)
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let stream_id = stream.headers()["mesos-stream-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut chunks = Box::pin(stream.bytes_stream());
    let mut decoder = Decoder::new();
    let first = decoder
        .feed(&chunks.next().await.unwrap().unwrap())
        .unwrap()
        .remove(0);
    let first: Value = serde_json::from_slice(&first).unwrap();
    let fw = first["subscribed"]["framework_id"]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    let revive = json!({"type": "REVIVE", "framework_id": {"value": fw}});
    for auth in [basic("team-a", "token-a"), "Bearer token-a".into()] {
        let r = send(Some(auth), revive.clone(), Some(stream_id.clone()))
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 202);
    }
    let version = c
        .client
        .get(format!("{}/version", c.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        version.status().as_u16(),
        200,
        "pymesos asks for /version without credentials"
    );
}
