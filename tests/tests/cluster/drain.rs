//! End to end, through real HTTP on loopback with real agents: draining an agent
//! (no offers from it afterwards, the framework told before any kill, its tasks killed with
//! reason `agent_drained` by the deadline, `draining` → `drained`, reactivate brings offers
//! back), placement constraints from the SDK (`zone == b`, spread over `rack`), and bad input
//! (unknown agent, bad deadlines) answered 4xx changing nothing.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use framework_sdk::constraints::{self, Constraint, TaskPlaces};
use framework_sdk::placement::{FirstFit, JobId, PendingTask};
use framework_sdk::prelude::*;
use protocol::maintenance::AgentMaintenance;
use protocol::messages::AgentInfo;
use protocol::{AgentId, FrameworkEvent, OfferEvent, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{deadline_in, Cluster, SseReader, WITHIN};

async fn post(c: &Cluster, path: &str, body: &str) -> (u16, serde_json::Value) {
    c.send_json(reqwest::Method::POST, path, body)
        .await
        .unwrap()
}

async fn agent_state(c: &Cluster, id: AgentId) -> Option<AgentInfo> {
    c.agents()
        .await
        .ok()?
        .agents
        .into_iter()
        .find(|a| a.agent_id == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_agent_stops_offering_its_tasks_die_at_the_deadline_and_reactivate_brings_it_back(
) {
    let cluster = Cluster::builder()
        .agent("cpus=2,mem=1024")
        .agent("cpus=2,mem=1024")
        .start()
        .await
        .unwrap();
    let target = cluster.agent_info(0).await.unwrap().agent_id;
    let mut offers_stream = SseReader::open(
        &cluster.http,
        &format!("{}/api/v1/offers/events", cluster.url),
    )
    .await
    .unwrap();
    let mut fw = TestFramework::register(&cluster.url, "drained", "eng")
        .await
        .unwrap();
    let task = shell_task("t-drain", AgentId::default(), "cpus=1,mem=64", "sleep 60");
    fw.launch_where(WITHIN, task, |o| o.agent_id == target)
        .await
        .unwrap();
    fw.wait_state(WITHIN, "t-drain", TaskState::Running)
        .await
        .unwrap();

    let deadline_s = 1.5;
    let drained_at = Instant::now();
    let (status, body) = post(
        &cluster,
        &format!("/api/v1/agents/{target}/drain"),
        &format!(r#"{{"deadline_s": {deadline_s}}}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer: AgentMaintenance = serde_json::from_value(body).unwrap();
    assert_eq!(answer.state, "draining");
    assert!(answer.deadline.is_some());
    assert_eq!(
        agent_state(&cluster, target).await.unwrap().state,
        "draining"
    );

    // The offer stream carries the drain for the framework, with its task.
    let seen: OfferEvent = offers_stream
        .next_matching(deadline_in(WITHIN), |e| {
            matches!(e, OfferEvent::AgentDraining(_))
        })
        .await
        .unwrap();
    let OfferEvent::AgentDraining(d) = seen else {
        unreachable!()
    };
    assert_eq!((d.agent_id, d.framework_id), (target, fw.id));
    assert_eq!(d.task_ids, vec!["t-drain".parse().unwrap()]);

    let killed = fw
        .wait_state(WITHIN, "t-drain", TaskState::Killed)
        .await
        .unwrap();
    let took = drained_at.elapsed();
    assert_eq!(
        killed.reason.as_deref(),
        Some(protocol::task::REASON_AGENT_DRAINED)
    );
    assert!(
        took >= Duration::from_secs_f64(deadline_s - 0.1),
        "killed before the deadline: {took:?}"
    );
    assert!(took < Duration::from_secs_f64(deadline_s + 5.0), "{took:?}");

    // The framework heard of the drain before the kill, and no offer of the agent after it.
    let events = fw.events();
    let told = events
        .iter()
        .position(|e| matches!(e, FrameworkEvent::AgentDraining(d) if d.agent_id == target))
        .expect("agent_draining on the framework's stream");
    let kill = events
        .iter()
        .position(
            |e| matches!(e, FrameworkEvent::Update { status } if status.state == TaskState::Killed),
        )
        .unwrap();
    assert!(told < kill, "the event comes before the kill");
    let FrameworkEvent::AgentDraining(d) = &events[told] else {
        unreachable!()
    };
    assert_eq!(d.task_ids, vec!["t-drain".parse().unwrap()]);
    let offered_after = events[told..].iter().any(|e| {
        matches!(e, FrameworkEvent::Offers { offers } if offers.iter().any(|o| o.agent_id == target))
    });
    assert!(!offered_after, "offers of a draining agent");

    cluster
        .wait_for("the agent to be drained", |c| async move {
            let a = agent_state(c, target).await?;
            (a.state == "drained" && a.used.is_empty() && a.offered.is_empty()).then_some(())
        })
        .await
        .unwrap();
    let metrics = cluster.metrics_text().await.unwrap();
    assert!(metrics.contains("parley_drain_kills_total 1"), "{metrics}");
    assert!(
        metrics.contains(r#"parley_agents{state="drained"} 1"#),
        "{metrics}"
    );
    // Offers keep coming from the other agent only.
    let other = fw.next_offers(WITHIN).await.unwrap();
    assert!(other.iter().all(|o| o.agent_id != target), "{other:?}");
    let ids: Vec<_> = other.iter().map(|o| o.offer_id).collect();
    fw.decline(&ids, Some(0.0)).await.unwrap();

    let (status, body) = post(
        &cluster,
        &format!("/api/v1/agents/{target}/reactivate"),
        "{}",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "active");
    let deadline = Instant::now() + WITHIN;
    loop {
        let offers = fw
            .next_offers(deadline.saturating_duration_since(Instant::now()))
            .await
            .unwrap();
        if offers.iter().any(|o| o.agent_id == target) {
            break;
        }
        let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
        fw.decline(&ids, Some(0.0)).await.unwrap();
    }
    assert_eq!(agent_state(&cluster, target).await.unwrap().state, "active");
    // Reactivating an active agent is idempotent.
    let (status, body) = post(
        &cluster,
        &format!("/api/v1/agents/{target}/reactivate"),
        "{}",
    )
    .await;
    assert_eq!(
        (status, &body["state"]),
        (200, &serde_json::json!("active"))
    );
    fw.remove().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// A drain is kept in the durable registry: after a coordinator restart the agent comes back
/// `draining` with the same deadline and makes no offers until it is reactivated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_survives_a_coordinator_restart() {
    let mut cluster = Cluster::builder()
        .agent("cpus=2,mem=256")
        .durable_registry()
        .start()
        .await
        .unwrap();
    let agent = cluster
        .wait_for("the agent", |c| async move {
            c.agents().await.ok()?.agents.first().map(|a| a.agent_id)
        })
        .await
        .unwrap();
    let (status, body) = post(
        &cluster,
        &format!("/api/v1/agents/{agent}/drain"),
        r#"{"deadline_s": 3600}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let deadline = agent_state(&cluster, agent).await.unwrap().drain_deadline;
    assert!(deadline.is_some());

    cluster.stop_coordinator().await.unwrap();
    cluster.start_coordinator().await.unwrap();
    let back = cluster
        .wait_for("the agent back, draining", |c| async move {
            agent_state(c, agent)
                .await
                .filter(|a| a.state != "lost" && a.drain_deadline.is_some())
        })
        .await
        .unwrap();
    assert_eq!(back.state, "drained", "no task ran there");
    assert_eq!(back.drain_deadline, deadline, "the same deadline");

    // A framework that would take anything gets no offer from it; reactivated, it does.
    let mut fw = TestFramework::register(&cluster.url, "after-restart", "eng")
        .await
        .unwrap();
    let quiet = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < quiet {
        let offers = cluster.offers().await.unwrap();
        assert!(
            offers.offers.is_empty(),
            "a drained agent offered: {offers:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = post(
        &cluster,
        &format!("/api/v1/agents/{agent}/reactivate"),
        "{}",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let offers = fw.next_offers(WITHIN).await.unwrap();
    assert!(offers.iter().any(|o| o.agent_id == agent));
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_drains_are_refused_with_a_clear_4xx_and_change_nothing() {
    let cluster = Cluster::builder()
        .agent("cpus=1,mem=256")
        .start()
        .await
        .unwrap();
    let id = cluster.agent_info(0).await.unwrap().agent_id;
    // The books as a refusal must leave them: everything the coordinator lists of its agents
    // but the time of the last heartbeat, which the agent's beats move on their own.
    let books = || async {
        let mut list = cluster.agents().await.unwrap();
        for a in &mut list.agents {
            a.last_heartbeat_at = a.registered_at;
        }
        list
    };
    let before = books().await;
    let unknown = AgentId::new();
    let cases = [
        (
            format!("/api/v1/agents/{unknown}/drain"),
            r#"{"deadline_s": 5}"#,
            404,
            "agent_not_found",
            "",
        ),
        (
            format!("/api/v1/agents/{unknown}/reactivate"),
            "{}",
            404,
            "agent_not_found",
            "",
        ),
        (
            format!("/api/v1/agents/{id}/drain"),
            r#"{"deadline_s": -1}"#,
            400,
            "invalid_field",
            "deadline_s",
        ),
        (
            format!("/api/v1/agents/{id}/drain"),
            r#"{"deadline_s": 1e12}"#,
            400,
            "invalid_field",
            "deadline_s",
        ),
        (
            format!("/api/v1/agents/{id}/drain"),
            r#"{"deadline_s": "soon"}"#,
            400,
            "invalid_field",
            "deadline_s",
        ),
        (
            format!("/api/v1/agents/{id}/drain"),
            r#"{}"#,
            400,
            "invalid_field",
            "deadline_s",
        ),
        (
            format!("/api/v1/agents/{id}/drain"),
            r#"{"deadline_s": 5, "x": 1}"#,
            400,
            "invalid_body",
            "\"x\"",
        ),
        (
            "/api/v1/agents/not-a-uuid/drain".to_owned(),
            r#"{"deadline_s": 5}"#,
            400,
            "",
            "agent id",
        ),
    ];
    for (path, body, want, code, mentions) in cases {
        let (status, answer) = post(&cluster, &path, body).await;
        assert_eq!(status, want, "{path} {body}: {answer}");
        if !code.is_empty() {
            assert_eq!(answer["error"]["code"], code, "{path} {body}: {answer}");
        }
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(mentions), "{path} {body}: {message}");
        assert_eq!(books().await, before, "{path} {body} changed the books");
    }
    cluster.shutdown().await.unwrap();
}

/// An SDK framework with two jobs: job 0's tasks need `zone == b`, job 1's spread one per
/// `rack`; placed by first fit through the SDK's constraint stage.
struct Constrained {
    pending: Vec<(TaskId, PendingTask)>,
    constraints: BTreeMap<JobId, Vec<Constraint>>,
    places: TaskPlaces,
    /// Where each launched task went.
    launched: HashMap<TaskId, AgentId>,
    running: usize,
    want: usize,
}

#[async_trait]
impl Scheduler for Constrained {
    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let tasks: Vec<PendingTask> = self.pending.iter().map(|(_, t)| t.clone()).collect();
        let got = constraints::place(
            &FirstFit,
            &offers,
            &tasks,
            &BTreeMap::new(),
            &Resources::new(),
            &self.constraints,
            &self.places,
        );
        let task = Task::shell("sleep 60")
            .resources("cpus=0.5,mem=32")
            .build()
            .unwrap();
        let mut placed = Vec::new();
        let decisions = Decisions::from_assignments(&offers, &got, |t, offer| {
            let (id, p) = &self.pending[t];
            self.places.launched(id.clone(), p.job, offer);
            self.launched.insert(id.clone(), offer.agent_id);
            placed.push(t);
            Some(task.on(offer, id.clone()))
        });
        placed.sort_unstable();
        for t in placed.into_iter().rev() {
            self.pending.remove(t);
        }
        decisions
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        self.places.status(status);
        if status.state == TaskState::Running {
            self.running += 1;
            if self.running == self.want {
                ctx.stop();
            }
        }
    }

    fn requeue(&mut self, task: TaskSpec) {
        panic!("launch of {} refused", task.task_id);
    }

    fn pending_tasks(&self) -> usize {
        self.pending.len()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_tasks_land_only_in_zone_b_and_spread_one_per_rack() {
    let cluster = Cluster::builder()
        .agent_with_attributes("cpus=4,mem=1024", &[("zone", "a"), ("rack", "r1")])
        .agent_with_attributes("cpus=4,mem=1024", &[("zone", "b"), ("rack", "r1")])
        .agent_with_attributes("cpus=4,mem=1024", &[("zone", "b"), ("rack", "r2")])
        .agent_with_attributes("cpus=4,mem=1024", &[("zone", "a"), ("rack", "r3")])
        .reap_orphans(false)
        .start()
        .await
        .unwrap();
    let mut attrs: HashMap<AgentId, BTreeMap<String, String>> = HashMap::new();
    for a in cluster.agents().await.unwrap().agents {
        attrs.insert(a.agent_id, a.attributes);
    }
    let demand: Resources = "cpus=0.5,mem=32".parse().unwrap();
    let pending: Vec<(TaskId, PendingTask)> = (0..4)
        .map(|i| (0, format!("zone-b-{i}")))
        .chain((0..3).map(|i| (1, format!("spread-{i}"))))
        .map(|(job, id)| {
            let task = PendingTask {
                job,
                demand: demand.clone(),
                duration_s: 60.0,
            };
            (id.parse().unwrap(), task)
        })
        .collect();
    let scheduler = Constrained {
        want: pending.len(),
        pending,
        constraints: BTreeMap::from([
            (0, vec![Constraint::equals("zone", "b")]),
            (1, vec![Constraint::spread("rack")]),
        ]),
        places: TaskPlaces::new(),
        launched: HashMap::new(),
        running: 0,
    };
    let config = DriverConfig::new(cluster.url.clone(), "constrained", "eng".parse().unwrap());
    let done = tokio::time::timeout(WITHIN, Driver::new(config, scheduler).unwrap().run())
        .await
        .expect("all seven tasks running in time")
        .unwrap();
    assert_eq!(done.launched.len(), 7);
    let mut racks = BTreeSet::new();
    for (task, agent) in &done.launched {
        let a = &attrs[agent];
        if task.as_str().starts_with("zone-b") {
            assert_eq!(a["zone"], "b", "{task} on {a:?}");
        } else {
            assert!(
                racks.insert(a["rack"].clone()),
                "{task}: a second task on {a:?}"
            );
        }
    }
    assert_eq!(racks.len(), 3, "one per rack: {racks:?}");
    cluster.shutdown().await.unwrap();
}
