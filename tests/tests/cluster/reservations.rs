//! End to end (reservations), through real HTTP on loopback with real agents: an
//! agent's `--reserve a:cpus=2` is offered only to frameworks under role `a`, a framework of
//! role `b` never sees it and `explain` names the reservation; a dynamic reserve on an offer
//! comes back as reserved offers to the role only, survives a coordinator restart on the same
//! registry, and unreserve gives it back; bad reservations (static and dynamic) are answered
//! 4xx naming the field and change nothing.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use protocol::messages::{AgentInfo, FrameworkExplanation, RoleNode};
use protocol::reservation::ReservationKind;
use protocol::{AgentId, Offer};
use tests::framework::{shell_task, TestFramework};
use tests::{Cluster, WITHIN};

async fn put_role(c: &Cluster, path: &str) {
    let (status, body) = c
        .send_json(
            reqwest::Method::PUT,
            &format!("/api/v1/roles/{path}"),
            r#"{"weight": 1}"#,
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
}

fn find<'a>(node: &'a RoleNode, path: &str) -> Option<&'a RoleNode> {
    if node.path == path {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, path))
}

/// The agent (by id) once it is active.
async fn active_agent(c: &Cluster, id: Option<AgentId>) -> AgentInfo {
    c.wait_for("the agent to be active", |c| async move {
        let list = c.agents().await.ok()?;
        list.agents
            .into_iter()
            .find(|a| a.state == "active" && id.is_none_or(|id| a.agent_id == id))
    })
    .await
    .unwrap()
}

fn reserved_role(o: &Offer) -> Option<&str> {
    o.reservation.as_ref().map(|r| r.role.as_str())
}

/// Offers to `fw` over `window` (declined at once with no filter, so they come back): none may
/// be reserved; returns how many came.
async fn never_reserved(fw: &mut TestFramework, window: Duration) -> usize {
    let end = Instant::now() + window;
    let mut n = 0;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Ok(offers) = fw.next_offers(left).await else {
            break;
        };
        for o in &offers {
            assert_eq!(
                reserved_role(o),
                None,
                "{} got a reserved offer: {o:?}",
                fw.id
            );
        }
        n += offers.len();
        let ids: Vec<_> = offers.iter().map(|o| o.offer_id).collect();
        fw.decline(&ids, Some(0.0)).await.unwrap();
    }
    n
}

/// The next offer to `fw` drawn from `role`'s reserved pool (others are declined with no
/// filter).
async fn next_reserved(fw: &mut TestFramework, role: &str) -> Offer {
    let end = Instant::now() + WITHIN;
    loop {
        let left = end.checked_duration_since(Instant::now()).unwrap();
        let offers = fw.next_offers(left).await.unwrap();
        let mut found = None;
        let mut rest = Vec::new();
        for o in offers {
            if found.is_none() && reserved_role(&o) == Some(role) {
                found = Some(o);
            } else {
                rest.push(o.offer_id);
            }
        }
        if !rest.is_empty() {
            fw.decline(&rest, Some(0.0)).await.unwrap();
        }
        if let Some(o) = found {
            return o;
        }
    }
}

/// The next unreserved offer to `fw` (reserved ones are declined with no filter).
async fn next_unreserved(fw: &mut TestFramework) -> Offer {
    let end = Instant::now() + WITHIN;
    loop {
        let left = end.checked_duration_since(Instant::now()).unwrap();
        let offers = fw.next_offers(left).await.unwrap();
        let mut found = None;
        let mut rest = Vec::new();
        for o in offers {
            if found.is_none() && o.reservation.is_none() {
                found = Some(o);
            } else {
                rest.push(o.offer_id);
            }
        }
        if !rest.is_empty() {
            fw.decline(&rest, Some(0.0)).await.unwrap();
        }
        if let Some(o) = found {
            return o;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_reservation_is_offered_only_to_its_roles_subtree() {
    let mut cluster = Cluster::builder().start().await.unwrap();
    put_role(&cluster, "a").await;
    put_role(&cluster, "b").await;
    // Half of agent 0's cpus for `a`; all of agent 1 for `a`.
    cluster
        .add_agent_reserving("cpus=4,mem=512", &["a:cpus=2"])
        .await
        .unwrap();
    let first = active_agent(&cluster, None).await.agent_id;
    cluster
        .add_agent_reserving("cpus=1,mem=128", &["a:cpus=1,mem=128"])
        .await
        .unwrap();
    let whole = cluster
        .wait_for("the second agent", |c| async move {
            let list = c.agents().await.ok()?;
            list.agents
                .into_iter()
                .find(|a| a.agent_id != first && a.state == "active")
        })
        .await
        .unwrap();
    // `/api/v1/agents` lists each static reservation; `/api/v1/roles` sums them per role.
    let info = active_agent(&cluster, Some(first)).await;
    assert_eq!(info.reservations.len(), 1, "{info:?}");
    assert_eq!(info.reservations[0].role.as_str(), "a");
    assert_eq!(info.reservations[0].kind, ReservationKind::Static);
    assert_eq!(info.reservations[0].resources.millis("cpus"), 2_000);
    let roles = cluster.roles().await.unwrap();
    let a = find(&roles, "a").unwrap();
    assert_eq!(a.reserved.millis("cpus"), 3_000);
    assert_eq!(a.reserved.millis("mem"), 128_000);
    assert!(find(&roles, "b").unwrap().reserved.is_empty());

    // Role `b` alone: offered only agent 0's unreserved half, never a reserved offer.
    let mut b = TestFramework::register(&cluster.url, "b", "b")
        .await
        .unwrap();
    let offer = next_unreserved(&mut b).await;
    assert_eq!(offer.agent_id, first);
    assert_eq!(offer.resources.millis("cpus"), 2_000, "{offer:?}");
    // Explain names the reservation that holds agent 1 back.
    let why: FrameworkExplanation = cluster
        .get(&format!("/api/v1/frameworks/{}/explain", b.id))
        .await
        .unwrap();
    assert_eq!(why.agents.reserved_for_others, 1, "{why:?}");
    assert!(
        why.held_back_by.contains(&"reserved for role a".to_owned()),
        "{why:?}"
    );
    b.decline(&[offer.offer_id], Some(0.0)).await.unwrap();
    assert!(never_reserved(&mut b, Duration::from_millis(800)).await > 0);

    // A framework under `a/x` gets both reserved pools, marked.
    let mut ax = TestFramework::register(&cluster.url, "ax", "a/x")
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        let o = next_reserved(&mut ax, "a").await;
        got.push(o);
    }
    let on_first = got.iter().find(|o| o.agent_id == first).unwrap();
    assert_eq!(on_first.resources.to_string(), "cpus=2");
    let on_whole = got.iter().find(|o| o.agent_id == whole.agent_id).unwrap();
    assert_eq!(on_whole.resources.millis("cpus"), 1_000);
    // While `ax` holds them, no offer to `b` is reserved (checked on the offer list too).
    assert!(never_reserved(&mut b, Duration::from_millis(500)).await > 0);
    for o in cluster.offers().await.unwrap().offers {
        if o.framework_id == b.id {
            assert!(o.reservation.is_none(), "{o:?}");
        }
    }
    // A task launched from the reserved offer runs there; what it leaves comes back reserved.
    let task = shell_task("r1", first, "cpus=1", "sleep 30");
    ax.accept(&[on_first.offer_id], vec![task]).await.unwrap();
    let again = next_reserved(&mut ax, "a").await;
    assert_eq!(again.agent_id, first);
    assert_eq!(again.resources.to_string(), "cpus=1");
    ax.kill("r1").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_reservation_goes_to_its_role_survives_a_restart_and_is_given_back() {
    let mut cluster = Cluster::builder()
        .agent("cpus=4,mem=512")
        .durable_registry()
        .start()
        .await
        .unwrap();
    let agent = active_agent(&cluster, None).await.agent_id;
    let mut a = TestFramework::register(&cluster.url, "a", "a")
        .await
        .unwrap();
    let offer = next_unreserved(&mut a).await;
    let (status, body) = a
        .post(
            "reserve",
            &serde_json::json!({"offer_id": offer.offer_id, "resources": {"cpus": 2}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "a");
    assert_eq!(body["reserved"]["cpus"], 2.0);
    // The offer was consumed; the reserved part comes back marked.
    let (status, _) = a
        .post(
            "decline",
            &serde_json::json!({"offer_ids": [offer.offer_id]}),
        )
        .await
        .unwrap();
    assert_eq!(status, 409);
    let reserved = next_reserved(&mut a, "a").await;
    assert_eq!(reserved.agent_id, agent);
    assert_eq!(reserved.resources.to_string(), "cpus=2");
    // A framework of another role never gets it, while `a` holds it or not.
    let mut b = TestFramework::register(&cluster.url, "b", "b")
        .await
        .unwrap();
    // `a` stops taking offers and gives back what it holds: the unreserved part goes to `b`,
    // the reserved part to no one.
    a.suppress().await.unwrap();
    let held: Vec<_> = cluster
        .offers()
        .await
        .unwrap()
        .offers
        .into_iter()
        .filter(|o| o.framework_id == a.id)
        .map(|o| o.offer_id)
        .collect();
    assert!(held.contains(&reserved.offer_id));
    a.decline(&held, Some(0.0)).await.unwrap();
    assert!(never_reserved(&mut b, Duration::from_millis(800)).await > 0);
    let info = active_agent(&cluster, Some(agent)).await;
    assert_eq!(info.reservations.len(), 1);
    assert_eq!(info.reservations[0].kind, ReservationKind::Dynamic);

    // A restart on the same registry keeps it.
    cluster.stop_coordinator().await.unwrap();
    cluster.start_coordinator().await.unwrap();
    let info = cluster
        .wait_for("the agent back with its reservation", |c| async move {
            let list = c.agents().await.ok()?;
            list.agents
                .into_iter()
                .find(|x| x.agent_id == agent && x.state == "active" && !x.reservations.is_empty())
        })
        .await
        .unwrap();
    assert_eq!(info.reservations[0].role.as_str(), "a");
    assert_eq!(info.reservations[0].resources.to_string(), "cpus=2");
    let roles = cluster.roles().await.unwrap();
    assert_eq!(find(&roles, "a").unwrap().reserved.to_string(), "cpus=2");

    // A new framework of role `a` gets the pool, and unreserves it.
    let mut a2 = TestFramework::register(&cluster.url, "a2", "a")
        .await
        .unwrap();
    let reserved = next_reserved(&mut a2, "a").await;
    let (status, body) = a2
        .post(
            "unreserve",
            &serde_json::json!({"offer_id": reserved.offer_id, "resources": {"cpus": 2}}),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reserved"], serde_json::json!({}));
    let info = active_agent(&cluster, Some(agent)).await;
    assert!(info.reservations.is_empty(), "{info:?}");
    let roles = cluster.roles().await.unwrap();
    assert!(find(&roles, "a").unwrap().reserved.is_empty());
    // Given back: the agent's cpus are all offered to `a2` unreserved again (in one offer, or
    // in the one it held before and the one given back).
    let id = a2.id;
    cluster
        .wait_for("the agent's cpus offered unreserved", |c| async move {
            let offers = c.offers().await.ok()?.offers;
            let mine: Vec<_> = offers.iter().filter(|o| o.framework_id == id).collect();
            let cpus: u64 = mine.iter().map(|o| o.resources.millis("cpus")).sum();
            (cpus == 4_000 && mine.iter().all(|o| o.reservation.is_none())).then_some(())
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reservations_are_refused_naming_the_field_and_change_nothing() {
    let cluster = Cluster::builder()
        .agent("cpus=4,mem=512")
        .start()
        .await
        .unwrap();
    put_role(&cluster, "a").await;
    let agent = active_agent(&cluster, None).await.agent_id;
    let snapshot = || async {
        let agents = cluster.agents().await.unwrap();
        let mut agents: Vec<_> = agents
            .agents
            .into_iter()
            .map(|x| (x.agent_id, x.resources, x.reservations))
            .collect();
        agents.sort_by_key(|x| x.0);
        (agents, cluster.roles().await.unwrap())
    };

    // Static: a registration refused names the field and registers nothing.
    let before = snapshot().await;
    let static_cases: &[(&str, &str)] = &[
        (
            r#"[{"role": "nope", "resources": {"cpus": 1}}]"#,
            "reservations[0].role",
        ),
        (
            r#"[{"role": "a", "resources": {"cpus": 9}}]"#,
            "reservations",
        ),
        (
            r#"[{"role": "a", "resources": {}}]"#,
            "reservations[0].resources",
        ),
        (
            r#"[{"role": "a", "resources": {"cpus": 1}}, {"role": "a", "resources": {"mem": 1}}]"#,
            "reservations[1].role",
        ),
        (r#"[{"role": "a", "resources": {"cpus": -1}}]"#, "cpus"),
        (r#"[{"role": "a", "resources": {"cpus": 1}, "x": 1}]"#, "x"),
    ];
    for (list, field) in static_cases {
        let body = format!(
            r#"{{"hostname": "h", "endpoint": "http://127.0.0.1:9", "resources": {{"cpus": 4, "mem": 512}}, "reservations": {list}}}"#
        );
        let (status, answer) = cluster
            .send_json(reqwest::Method::POST, "/api/v1/agents", &body)
            .await
            .unwrap();
        assert!((400..500).contains(&status), "{list}: {status} {answer}");
        assert!(
            answer.to_string().contains(field),
            "{list}: the answer should name {field}: {answer}"
        );
        assert_eq!(snapshot().await, before, "{list} changed the books");
    }

    // Dynamic: each refusal names the field and changes nothing (the offer stays usable).
    let mut a = TestFramework::register(&cluster.url, "a", "a")
        .await
        .unwrap();
    let other = TestFramework::register(&cluster.url, "o", "o")
        .await
        .unwrap();
    let offer = next_unreserved(&mut a).await;
    assert_eq!(offer.agent_id, agent);
    let before = snapshot().await;
    let id = offer.offer_id;
    let dynamic_cases: Vec<(&TestFramework, &str, serde_json::Value, u16, &str)> = vec![
        (
            &a,
            "reserve",
            serde_json::json!({"offer_id": protocol::OfferId::new(), "resources": {"cpus": 1}}),
            404,
            "offer",
        ),
        (
            &other,
            "reserve",
            serde_json::json!({"offer_id": id, "resources": {"cpus": 1}}),
            403,
            "offer",
        ),
        (
            &a,
            "reserve",
            serde_json::json!({"offer_id": id, "resources": {"cpus": 5}}),
            400,
            "resources.cpus",
        ),
        (
            &a,
            "reserve",
            serde_json::json!({"offer_id": id, "resources": {"bogus": 1}}),
            400,
            "resources.bogus",
        ),
        (
            &a,
            "reserve",
            serde_json::json!({"offer_id": id, "resources": {"cpus": -1}}),
            400,
            "cpus",
        ),
        (
            &a,
            "reserve",
            serde_json::json!({"offer_id": id, "resources": {}}),
            400,
            "resources",
        ),
        (
            &a,
            "reserve",
            serde_json::json!({"offer_id": id}),
            400,
            "resources",
        ),
        (
            &a,
            "unreserve",
            serde_json::json!({"offer_id": id, "resources": {"cpus": 1}}),
            400,
            "offer_id",
        ),
    ];
    for (fw, action, body, want, field) in &dynamic_cases {
        let (status, answer) = fw.post(action, body).await.unwrap();
        assert_eq!(status.as_u16(), *want, "{action} {body}: {answer}");
        assert!(
            answer.to_string().contains(field),
            "{action} {body}: the answer should name {field}: {answer}"
        );
        assert_eq!(
            snapshot().await,
            before,
            "{action} {body} changed the books"
        );
    }
    // The offer is still outstanding: declining it works.
    a.decline(&[id], Some(0.0)).await.unwrap();
    drop(other);
}
