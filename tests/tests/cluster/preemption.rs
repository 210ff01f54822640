//! End to end, through real HTTP on loopback with real agents and processes:
//! preemption toward fair share. A service in role `a` fills the cluster (always accepts,
//! relaunches what ends); then a framework in role `b` arrives with demand. With
//! `--preemption-grace-s` on, `b` holds its fair half within grace + a few seconds, `a`'s
//! framework got `preemption` (and the offer stream carried it) before any kill, exactly the
//! two lowest-priority tasks were killed (reason `preempted`), and the metrics count them.
//! With it off nothing is killed over the same time. A bad `priority` at accept is a 400 naming
//! the field, and nothing is launched.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use protocol::preempt::Priority;
use protocol::{FrameworkEvent, Offer, OfferEvent, TaskState};
use tests::framework::{shell_task, TestFramework};
use tests::{deadline_in, fast_coordinator_config, Cluster, SseReader, WITHIN};

const TASK: &str = "cpus=1,mem=256";
const GRACE: Duration = Duration::from_millis(1500);

/// A service: launches as many `TASK`s as each offer holds, named `{prefix}-{n}`; the first
/// `important` tasks get priority 10, the others 0.
struct Service {
    fw: TestFramework,
    prefix: &'static str,
    launched: usize,
    important: usize,
}

impl Service {
    async fn new(c: &Cluster, prefix: &'static str, important: usize) -> Self {
        Self {
            fw: TestFramework::register(&c.url, prefix, prefix)
                .await
                .unwrap(),
            prefix,
            launched: 0,
            important,
        }
    }

    /// Handles the events that arrive within `wait`: every offer is filled with tasks.
    async fn step(&mut self, wait: Duration) {
        let until = Instant::now() + wait;
        while let Ok(event) = self
            .fw
            .recv(until.saturating_duration_since(Instant::now()))
            .await
        {
            if let FrameworkEvent::Offers { offers } = event {
                for offer in offers {
                    self.fill(&offer).await;
                }
            }
        }
    }

    async fn fill(&mut self, offer: &Offer) {
        let fits = (offer.resources.millis("cpus") / 1000)
            .min(offer.resources.millis("mem") / 256_000) as usize;
        if fits == 0 {
            self.fw.decline(&[offer.offer_id], Some(0.0)).await.unwrap();
            return;
        }
        let tasks = (0..fits)
            .map(|_| {
                let n = self.launched;
                self.launched += 1;
                let mut t = shell_task(
                    &format!("{}-{n}", self.prefix),
                    offer.agent_id,
                    TASK,
                    "sleep 600",
                );
                let p = if n < self.important { 10 } else { 0 };
                t.priority = Some(Priority::new(p).unwrap());
                t
            })
            .collect();
        // A 409 (the offer went away meanwhile) is fine: the next offer is filled instead.
        let _ = self.fw.accept(&[offer.offer_id], tasks).await;
    }
}

async fn running(c: &Cluster, fw: &TestFramework) -> BTreeSet<String> {
    c.tasks_of(fw.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.state == TaskState::Running)
        .map(|t| t.task_id.to_string())
        .collect()
}

fn killed(fw: &TestFramework) -> BTreeSet<String> {
    fw.events()
        .into_iter()
        .filter_map(|e| match e {
            FrameworkEvent::Update { status } if status.state == TaskState::Killed => {
                Some(status.task_id.to_string())
            }
            _ => None,
        })
        .collect()
}

/// Two agents of two task slots each, filled by the service `a` (`a-0`, `a-1` at priority 10,
/// `a-2`, `a-3` at 0).
async fn metric(c: &Cluster, name: &str) -> f64 {
    c.metric(name)
        .await
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
}

async fn filled(preemption: Option<Duration>) -> (Cluster, Service) {
    let config = coordinator::Config {
        preemption_grace: preemption,
        ..fast_coordinator_config()
    };
    let cluster = Cluster::builder()
        .config(config)
        .agent("cpus=2,mem=512")
        .agent("cpus=2,mem=512")
        .start()
        .await
        .unwrap();
    let mut a = Service::new(&cluster, "a", 2).await;
    let until = Instant::now() + WITHIN;
    while running(&cluster, &a.fw).await.len() < 4 {
        assert!(
            Instant::now() < until,
            "the service did not fill the cluster"
        );
        a.step(Duration::from_millis(100)).await;
    }
    (cluster, a)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starved_role_gets_its_fair_share_back_lowest_priority_first_after_an_event() {
    let (cluster, mut a) = filled(Some(GRACE)).await;
    let mut offer_stream = SseReader::open(
        &cluster.http,
        &format!("{}/api/v1/offers/events", cluster.url),
    )
    .await
    .unwrap();
    let arrived = Instant::now();
    let mut b = Service::new(&cluster, "b", 0).await;
    // Within grace + a few seconds, b holds its fair half: two of the four slots.
    let budget = GRACE + Duration::from_secs(8);
    while running(&cluster, &b.fw).await.len() < 2 {
        assert!(
            arrived.elapsed() < budget,
            "b did not get its fair share within {budget:?}"
        );
        a.step(Duration::from_millis(50)).await;
        b.step(Duration::from_millis(50)).await;
    }
    let took = arrived.elapsed();
    assert!(took >= GRACE, "preempted before the grace: {took:?}");

    // a heard `preemption` naming its two lowest-priority tasks before any of them was killed.
    let events = a.fw.events();
    let told = events
        .iter()
        .position(|e| matches!(e, FrameworkEvent::Preemption(_)))
        .expect("a preemption event on a's stream");
    let first_kill = events
        .iter()
        .position(
            |e| matches!(e, FrameworkEvent::Update { status } if status.state == TaskState::Killed),
        )
        .expect("a kill");
    assert!(told < first_kill, "the event comes before the kills");
    let FrameworkEvent::Preemption(p) = &events[told] else {
        unreachable!()
    };
    assert_eq!((p.framework_id, p.for_role.as_str()), (a.fw.id, "b"));
    let named: BTreeSet<String> = p.task_ids.iter().map(ToString::to_string).collect();
    assert_eq!(named, BTreeSet::from(["a-2".into(), "a-3".into()]));
    for t in ["a-2", "a-3"] {
        let kill =
            a.fw.updates(t)
                .into_iter()
                .find(|s| s.state == TaskState::Killed)
                .unwrap();
        assert_eq!(
            kill.reason.as_deref(),
            Some(protocol::task::REASON_PREEMPTED)
        );
        assert!(
            (p.deadline - kill.timestamp).num_milliseconds() <= 100,
            "killed at {} before the deadline {}",
            kill.timestamp,
            p.deadline
        );
    }
    let seen = offer_stream
        .next_matching(deadline_in(WITHIN), |e| {
            matches!(e, OfferEvent::Preemption(_))
        })
        .await
        .unwrap();
    assert_eq!(seen, OfferEvent::Preemption(p.clone()));

    // Nothing of a's fair half is taken, however long b keeps asking.
    let calm = Instant::now() + GRACE * 2;
    while Instant::now() < calm {
        a.step(Duration::from_millis(50)).await;
        b.step(Duration::from_millis(50)).await;
    }
    assert_eq!(killed(&a.fw), BTreeSet::from(["a-2".into(), "a-3".into()]));
    assert_eq!(
        running(&cluster, &a.fw).await,
        BTreeSet::from(["a-0".into(), "a-1".into()])
    );
    assert_eq!(running(&cluster, &b.fw).await.len(), 2);
    assert_eq!(metric(&cluster, "parley_preemptions_total").await, 1.0);
    assert_eq!(metric(&cluster, "parley_tasks_preempted_total").await, 2.0);
    assert_eq!(metric(&cluster, "parley_starved_roles").await, 0.0);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_preemption_off_nothing_is_killed() {
    let (cluster, mut a) = filled(None).await;
    let mut b = Service::new(&cluster, "b", 0).await;
    let over = Instant::now() + GRACE + Duration::from_secs(3);
    while Instant::now() < over {
        a.step(Duration::from_millis(50)).await;
        b.step(Duration::from_millis(50)).await;
    }
    assert!(killed(&a.fw).is_empty(), "{:?}", killed(&a.fw));
    assert_eq!(running(&cluster, &a.fw).await.len(), 4);
    assert!(running(&cluster, &b.fw).await.is_empty());
    assert!(!a
        .fw
        .events()
        .iter()
        .any(|e| matches!(e, FrameworkEvent::Preemption(_))));
    let explained: protocol::messages::FrameworkExplanation = cluster
        .get(&format!("/api/v1/frameworks/{}/explain", b.fw.id))
        .await
        .unwrap();
    assert!(explained.preemption.is_empty(), "{explained:?}");
    assert_eq!(metric(&cluster, "parley_tasks_preempted_total").await, 0.0);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_priority_is_refused_naming_the_field_and_launches_nothing() {
    let cluster = Cluster::builder()
        .agent("cpus=2,mem=512")
        .start()
        .await
        .unwrap();
    let mut fw = TestFramework::register(&cluster.url, "bad", "a")
        .await
        .unwrap();
    let offer = fw.next_offers(WITHIN).await.unwrap().remove(0);
    let task = serde_json::to_value(shell_task("t", offer.agent_id, TASK, "sleep 1")).unwrap();
    for bad in [
        serde_json::json!("high"),
        serde_json::json!(1.5),
        serde_json::json!(5000),
        serde_json::json!(-1001),
    ] {
        let mut t = task.clone();
        t["priority"] = bad.clone();
        let body = serde_json::json!({"offer_ids": [offer.offer_id], "tasks": [t]});
        let (status, answer) = fw.post("accept", &body).await.unwrap();
        assert_eq!(status.as_u16(), 400, "{bad}: {answer}");
        assert!(answer.to_string().contains("priority"), "{bad}: {answer}");
    }
    assert!(cluster.tasks_of(fw.id).await.unwrap().is_empty());
    // The offer is still there: a good priority launches.
    let mut t = task.clone();
    t["priority"] = serde_json::json!(-7);
    let body = serde_json::json!({"offer_ids": [offer.offer_id], "tasks": [t]});
    let (status, answer) = fw.post("accept", &body).await.unwrap();
    assert_eq!(status.as_u16(), 200, "{answer}");
    assert_eq!(cluster.tasks_of(fw.id).await.unwrap().len(), 1);
    cluster.shutdown().await.unwrap();
}
