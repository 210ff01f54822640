//! End to end (quota), through real HTTP on loopback with real agents: a role's
//! limit is never exceeded counting outstanding offers, with a framework that accepts every
//! offer; a guaranteed role is served before a role that registered first; bad quotas are
//! answered 4xx naming the field and change nothing; quotas survive a coordinator restart on
//! the same registry.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use protocol::messages::{FrameworkExplanation, RoleNode};
use protocol::{AgentId, FrameworkEvent};
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

async fn put_role(c: &Cluster, path: &str, body: &str) -> (u16, serde_json::Value) {
    c.send_json(reqwest::Method::PUT, &format!("/api/v1/roles/{path}"), body)
        .await
        .unwrap()
}

fn find<'a>(node: &'a RoleNode, path: &str) -> Option<&'a RoleNode> {
    if node.path == path {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, path))
}

/// What role `path` holds (tasks and outstanding offers), in thousandths of a cpu.
async fn role_cpus(c: &Cluster, path: &str) -> u64 {
    let roles = c.roles().await.unwrap();
    find(&roles, path).map_or(0, |n| n.allocated.millis("cpus"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_is_never_exceeded_by_a_framework_that_accepts_everything() {
    let cluster = Cluster::builder()
        .agents(3, "cpus=8,mem=1024")
        .start()
        .await
        .unwrap();
    let (status, body) = put_role(&cluster, "a", r#"{"limit": {"cpus": 10}}"#).await;
    assert_eq!(status, 200, "{body}");
    let mut fw = TestFramework::register(&cluster.url, "greedy", "a")
        .await
        .unwrap();
    // Accept every offer whole with one task, checking the books between offers, until role
    // `a` runs tasks on its whole limit.
    let deadline = Instant::now() + WITHIN;
    let mut n = 0;
    loop {
        assert!(role_cpus(&cluster, "a").await <= 10_000);
        let list = cluster.frameworks().await.unwrap();
        let me = list
            .frameworks
            .iter()
            .find(|f| f.framework_id == fw.id)
            .unwrap();
        let held = me.used.add(&me.offered);
        assert!(held.millis("cpus") <= 10_000, "framework holds {held}");
        if me.used.millis("cpus") == 10_000 {
            break;
        }
        assert!(Instant::now() < deadline, "role a never reached its limit");
        let left = deadline.saturating_duration_since(Instant::now());
        let offers = fw.next_offers(left).await.unwrap();
        for o in offers {
            assert!(
                o.resources.millis("cpus") <= 10_000,
                "offer {}",
                o.resources
            );
            n += 1;
            let task = shell_task(
                &format!("t{n}"),
                o.agent_id,
                &o.resources.to_string(),
                "sleep 60",
            );
            fw.accept(&[o.offer_id], vec![task]).await.unwrap();
        }
    }
    // Settled: no more offers come to it, and explain names the limit.
    let quiet = Instant::now() + Duration::from_millis(800);
    while let Ok(ev) = fw
        .recv(quiet.saturating_duration_since(Instant::now()))
        .await
    {
        assert!(
            !matches!(ev, FrameworkEvent::Offers { .. }),
            "offered past its limit: {ev:?}"
        );
    }
    assert_eq!(role_cpus(&cluster, "a").await, 10_000);
    let why: FrameworkExplanation = cluster
        .get(&format!("/api/v1/frameworks/{}/explain", fw.id))
        .await
        .unwrap();
    assert!(
        why.held_back_by.contains(&"limit of role a".to_owned()),
        "{why:?}"
    );
    assert!(why.agents.limit_reached >= 2, "{why:?}");
    let roles = cluster.roles().await.unwrap();
    let a = find(&roles, "a").unwrap();
    assert_eq!(a.limit.as_ref().map(|l| l.millis("cpus")), Some(10_000));
    for i in 1..=n {
        let _ = fw.kill(&format!("t{i}")).await;
    }
    cluster.wait_agents_idle().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_role_is_served_before_a_role_that_registered_first() {
    let cluster = Cluster::builder()
        .agents(2, "cpus=4,mem=512")
        .start()
        .await
        .unwrap();
    let mut first = TestFramework::register(&cluster.url, "first", "first")
        .await
        .unwrap();
    // Alone, `first` is offered both agents.
    let mut held = first.next_offers(WITHIN).await.unwrap();
    while held.len() < 2 {
        held.extend(first.next_offers(WITHIN).await.unwrap());
    }
    let mut g = TestFramework::register(&cluster.url, "guaranteed", "g")
        .await
        .unwrap();
    let (status, body) = put_role(&cluster, "g", r#"{"guarantee": {"cpus": 8}}"#).await;
    assert_eq!(status, 200, "{body}");
    // `first` gives its offers back; by H-DRF order alone (equal shares, `first` created
    // first) it would win the first agent again. The guarantee gives both to `g`.
    let ids: Vec<_> = held.iter().map(|o| o.offer_id).collect();
    first.decline(&ids, Some(0.0)).await.unwrap();
    let mut got: Vec<AgentId> = Vec::new();
    let mut cpus = 0;
    while got.len() < 2 {
        for o in g.next_offers(WITHIN).await.unwrap() {
            got.push(o.agent_id);
            cpus += o.resources.millis("cpus");
        }
    }
    assert_eq!(cpus, 8_000);
    let list = cluster.frameworks().await.unwrap();
    let f = list
        .frameworks
        .iter()
        .find(|f| f.framework_id == first.id)
        .unwrap();
    assert!(f.offered.is_empty(), "first holds {}", f.offered);
    let roles = cluster.roles().await.unwrap();
    let node = find(&roles, "g").unwrap();
    assert_eq!(
        node.guarantee.as_ref().map(|r| r.millis("cpus")),
        Some(8_000)
    );
    assert!(node.guarantee_unmet.is_none());
    // A guarantee above the cluster is accepted and reported.
    let (status, body) = put_role(&cluster, "big", r#"{"guarantee": {"cpus": 100}}"#).await;
    assert_eq!(status, 200, "{body}");
    let roles = cluster.roles().await.unwrap();
    let unmet = find(&roles, "big").unwrap().guarantee_unmet.clone();
    assert!(unmet.is_some_and(|m| m.contains("cpus")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_quotas_are_refused_naming_the_field_and_change_nothing() {
    let cluster = Cluster::builder()
        .agent("cpus=4,mem=512")
        .start()
        .await
        .unwrap();
    let (status, body) = put_role(
        &cluster,
        "eng",
        r#"{"weight": 2, "guarantee": {"cpus": 2}, "limit": {"cpus": 3}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let before = cluster.roles().await.unwrap();
    let cases: &[(&str, &str)] = &[
        (r#"{"guarantee": {"cpus": -1}}"#, "cpus"),
        (r#"{"limit": {"cpus": 1e12}}"#, "cpus"),
        (r#"{"limit": {"cpus": "NaN"}}"#, "cpus"),
        (r#"{"guarantee": {"bogus": 1}}"#, "guarantee.bogus"),
        (r#"{"limit": {"cpus": 1}}"#, "limit.cpus"),
        (
            r#"{"guarantee": {"cpus": 1}, "limit": {"cpus": 0.5}}"#,
            "limit.cpus",
        ),
        (r#"{"weight": 3, "limit": {"gpu": 1}}"#, "limit.gpu"),
        (r#"{"limit": {"cpus": 2}, "cap": 1}"#, "cap"),
        (r#"{}"#, "weight"),
    ];
    for (body, field) in cases {
        let (status, answer) = put_role(&cluster, "eng", body).await;
        assert!((400..500).contains(&status), "{body}: {status} {answer}");
        assert!(
            answer.to_string().contains(field),
            "{body}: the answer should name {field}: {answer}"
        );
        assert_eq!(
            cluster.roles().await.unwrap(),
            before,
            "{body} changed the roles"
        );
    }
    // `null` clears; an absent field keeps its value.
    let (status, body) = put_role(&cluster, "eng", r#"{"limit": null}"#).await;
    assert_eq!(status, 200, "{body}");
    let roles = cluster.roles().await.unwrap();
    let eng = find(&roles, "eng").unwrap();
    assert_eq!(eng.limit, None);
    assert_eq!(eng.weight, 2.0);
    assert_eq!(
        eng.guarantee.as_ref().map(|g| g.millis("cpus")),
        Some(2_000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_survive_a_coordinator_restart() {
    let mut cluster = Cluster::builder()
        .agent("cpus=4,mem=512")
        .durable_registry()
        .start()
        .await
        .unwrap();
    let (status, body) = put_role(
        &cluster,
        "eng/batch",
        r#"{"guarantee": {"cpus": 1}, "limit": {"cpus": 2, "mem": 256}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = put_role(&cluster, "ops", r#"{"limit": {"cpus": 3}}"#).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = put_role(&cluster, "ops", r#"{"limit": null}"#).await;
    assert_eq!(status, 200, "{body}");
    cluster.stop_coordinator().await.unwrap();
    cluster.start_coordinator().await.unwrap();
    let roles = cluster
        .wait_for(
            "roles after restart",
            |c| async move { c.roles().await.ok() },
        )
        .await
        .unwrap();
    let batch = find(&roles, "eng/batch").unwrap();
    assert_eq!(
        batch.guarantee.as_ref().map(|g| g.millis("cpus")),
        Some(1_000)
    );
    let limit = batch.limit.clone().unwrap();
    assert_eq!(
        (limit.millis("cpus"), limit.millis("mem")),
        (2_000, 256_000)
    );
    assert!(find(&roles, "ops").is_none_or(|o| o.limit.is_none()));
    // The restored limit is enforced: a framework there is offered at most 2 cpus.
    let mut fw = TestFramework::register(&cluster.url, "batch", "eng/batch")
        .await
        .unwrap();
    let offers = fw.next_offers(WITHIN).await.unwrap();
    let cpus: u64 = offers.iter().map(|o| o.resources.millis("cpus")).sum();
    assert!(cpus <= 2_000 && cpus > 0, "offered {cpus} millicpus");
}
