//! Registrations are written first and pipelined: many are checked and written together,
//! then applied in the order written, each checked again at apply. Against a coordinator with
//! an on-disk registry: registrations sent at once all land, in the books and in the registry a
//! restarted coordinator reads; two principals racing for one framework id leave one owner,
//! the same in both; a principal's `max_frameworks` holds however many register at once; an
//! exclusive call (a role weight) sent among them sees them all applied.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::{fast_config, Api, Rest};
use axum::body::Body;
use axum::http::{header, Method, Request};
use coordinator::auth::{Credentials, SecretHash};
use futures::future::join_all;
use protocol::FrameworkId;
use serde_json::{json, Value};

const A: &str = "token-of-team-a";
const B: &str = "token-of-team-b";
const CAPPED: &str = "token-of-capped";
const READER: &str = "token-of-reader";
/// `max_frameworks` of the `capped` principal.
const CAP: usize = 4;

fn credentials() -> Credentials {
    let h = |t: &str| SecretHash::of(t).to_hex();
    Credentials::from_toml(&format!(
        r#"
[[principals]]
name = "team-a"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*"]

[[principals]]
name = "team-b"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*"]

[[principals]]
name = "capped"
kind = "framework"
secret_sha256 = "{}"
roles = ["eng/*"]
max_frameworks = {CAP}

[[principals]]
name = "reader"
kind = "operator"
access = "read"
secret_sha256 = "{}"
"#,
        h(A),
        h(B),
        h(CAPPED),
        h(READER),
    ))
    .unwrap()
}

fn open(registry: &std::path::Path) -> Api {
    Api::new(coordinator::Config {
        registry: Some(registry.to_path_buf()),
        ..fast_config()
    })
}

fn secured(registry: &std::path::Path) -> Api {
    Api::new(coordinator::Config {
        registry: Some(registry.to_path_buf()),
        credentials: Some(Arc::new(credentials())),
        ..fast_config()
    })
}

/// Registers as `token`; returns the status and the answer.
async fn register(api: &Api, token: &str, body: Value) -> (u16, Value) {
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/frameworks")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, bytes) = api.request(request).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// How many frameworks the books of a secured API hold.
async fn count_secured(api: &Api) -> usize {
    let request = Request::builder()
        .uri("/api/v1/frameworks")
        .header(header::AUTHORIZATION, format!("Bearer {READER}"))
        .body(Body::empty())
        .unwrap();
    let (status, _, bytes) = api.request(request).await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_slice(&bytes).unwrap();
    list["frameworks"].as_array().unwrap().len()
}

/// The frameworks in the books of an open API, as `id → name`.
async fn names(api: &Api) -> BTreeMap<FrameworkId, String> {
    api.frameworks()
        .await
        .into_iter()
        .map(|f| (f.framework_id, f.name))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_sent_at_once_all_land_in_the_books_and_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let before = {
        let api = open(&path);
        let calls = (0..200).map(|i| {
            let api = &api;
            async move {
                if i % 50 == 25 {
                    // An exclusive call among them: it waits for those before it to apply.
                    let (status, body) = api
                        .put("/api/v1/roles/eng", json!({"weight": 1.0 + f64::from(i)}))
                        .await;
                    assert_eq!(status, 200, "weight: {body}");
                    return None;
                }
                let name = format!("fw-{i}");
                let (status, body) = api
                    .post("/api/v1/frameworks", json!({"name": name, "role": "eng"}))
                    .await;
                assert_eq!(status, 201, "{name}: {body}");
                let id: FrameworkId = serde_json::from_value(body["framework_id"].clone()).unwrap();
                Some((id, name))
            }
        });
        let answered: BTreeMap<_, _> = join_all(calls).await.into_iter().flatten().collect();
        assert_eq!(answered.len(), 196, "every registration got its own id");
        let books = names(&api).await;
        assert_eq!(books, answered, "the books hold what was answered");
        api.coordinator.close_registry();
        books
    };
    let api = open(&path);
    assert_eq!(
        names(&api).await,
        before,
        "a restarted coordinator remembers every registration"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_principals_racing_for_one_framework_id_leave_one_owner_in_books_and_registry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let mut winners = BTreeMap::new();
    let api = secured(&path);
    for i in 0..30 {
        let id = FrameworkId::new();
        let body = |team: &str| json!({"name": format!("{team}-{i}"), "role": "eng/x", "framework_id": id});
        let (a, b) = tokio::join!(register(&api, A, body("a")), register(&api, B, body("b")));
        let (winner, loser) = match (a.0, b.0) {
            (201, 403) => (A, B),
            (403, 201) => (B, A),
            _ => panic!("round {i}: exactly one registers, the other is refused: {a:?} {b:?}"),
        };
        winners.insert(id, (winner, loser));
    }
    // The loser may not act as the framework.
    for (id, (_, loser)) in &winners {
        let again = json!({"name": "again", "role": "eng/x", "framework_id": id});
        assert_eq!(register(&api, loser, again.clone()).await.0, 403, "{id}");
    }
    api.coordinator.close_registry();
    drop(api);
    // The registry says the same: after a restart the loser is still refused, the winner
    // re-registers.
    let api = secured(&path);
    for (id, (winner, loser)) in &winners {
        let again = json!({"name": "again", "role": "eng/x", "framework_id": id});
        let (status, body) = register(&api, loser, again.clone()).await;
        assert_eq!(status, 403, "{id} after a restart: {body}");
        let (status, body) = register(&api, winner, again).await;
        assert_eq!(status, 200, "{id} after a restart: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_frameworks_holds_however_many_register_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let api = secured(&path);
    let calls = (0..20).map(|i| {
        let api = &api;
        async move {
            register(
                api,
                CAPPED,
                json!({"name": format!("c-{i}"), "role": "eng"}),
            )
            .await
        }
    });
    let answers = join_all(calls).await;
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    let refused = answers.iter().filter(|(s, _)| *s == 403).count();
    assert_eq!((created, refused), (CAP, 20 - CAP), "{answers:?}");
    assert_eq!(count_secured(&api).await, CAP);
    api.coordinator.close_registry();
    drop(api);
    // The refused ones left nothing in the registry: the cap still has no room after a
    // restart, and each of the registered ones re-registers.
    let api = secured(&path);
    assert_eq!(count_secured(&api).await, CAP);
    let (status, body) = register(&api, CAPPED, json!({"name": "one-more", "role": "eng"})).await;
    assert_eq!(status, 403, "{body}");
    for (status, body) in answers.iter().filter(|(s, _)| *s == 201) {
        let again = json!({"name": "again", "role": "eng", "framework_id": body["framework_id"]});
        let (s, b) = register(&api, CAPPED, again).await;
        assert_eq!((*status, s), (201, 200), "{b}");
    }
}
