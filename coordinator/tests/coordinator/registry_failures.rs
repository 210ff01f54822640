//! No false acknowledgements: a registration, re-registration, removal or role
//! weight whose registry write fails answers 503 `registry_unavailable` and changes nothing —
//! not the books the API shows, not the registry a restarted coordinator reads; once writes
//! work again the same calls succeed.

#![allow(clippy::unwrap_used)]

use crate::support::{fast_config, Api, Rest};
use axum::http::Method;
use protocol::FrameworkId;
use serde_json::{json, Value};

fn config(registry: &std::path::Path) -> coordinator::Config {
    coordinator::Config {
        registry: Some(registry.to_path_buf()),
        ..fast_config()
    }
}

/// Everything a caller can see of the books.
async fn books(api: &Api) -> (Value, Value, Value) {
    (
        api.get("/api/v1/frameworks").await,
        api.get("/api/v1/roles").await,
        api.get("/api/v1/tasks").await,
    )
}

fn assert_unavailable((status, body): (u16, Value), what: &str) {
    assert_eq!(status, 503, "{what}: {body}");
    assert_eq!(
        body["error"]["code"], "registry_unavailable",
        "{what}: {body}"
    );
}

#[tokio::test]
async fn every_stored_call_whose_write_fails_answers_503_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let api = Api::new(config(&path));
    let fw = api.register_framework("a", "eng").await;
    let (status, body) = api.put("/api/v1/roles/eng", json!({"weight": 2.0})).await;
    assert_eq!(status, 200, "{body}");

    api.coordinator.fail_registry_writes(true);
    let before = books(&api).await;
    let adopted = FrameworkId::new();
    let new = json!({"name": "b", "role": "fresh/role"});
    let adopt = json!({"name": "c", "role": "eng", "framework_id": adopted});
    let reregister = json!({"name": "a2", "role": "ops", "framework_id": fw});
    let removal = format!("/api/v1/frameworks/{fw}");
    assert_unavailable(api.post("/api/v1/frameworks", new.clone()).await, "new");
    assert_unavailable(api.post("/api/v1/frameworks", adopt.clone()).await, "adopt");
    assert_unavailable(
        api.post("/api/v1/frameworks", reregister.clone()).await,
        "re-register",
    );
    assert_unavailable(
        api.put("/api/v1/roles/eng", json!({"weight": 3.0})).await,
        "weight",
    );
    assert_unavailable(
        api.put("/api/v1/roles/other/new", json!({"weight": 3.0}))
            .await,
        "weight of a new role",
    );
    assert_unavailable(api.call(Method::DELETE, &removal, None).await, "removal");
    assert_eq!(
        books(&api).await,
        before,
        "a failed write changed the books"
    );

    // Writes work again: the same calls succeed.
    api.coordinator.fail_registry_writes(false);
    let (status, body) = api.post("/api/v1/frameworks", new).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = api.post("/api/v1/frameworks", adopt).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["framework_id"], json!(adopted));
    let (status, body) = api.post("/api/v1/frameworks", reregister).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.put("/api/v1/roles/eng", json!({"weight": 3.0})).await;
    assert_eq!(status, 200, "{body}");
    let mut frameworks = api.frameworks().await;
    frameworks.sort_by(|x, y| x.name.cmp(&y.name));
    let names: Vec<_> = frameworks
        .iter()
        .map(|f| (f.name.as_str(), f.role.as_str()))
        .collect();
    assert_eq!(names, [("a2", "ops"), ("b", "fresh/role"), ("c", "eng")]);
    let (status, body) = api.call(Method::DELETE, &removal, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(api.frameworks().await.len(), 2);
}

#[tokio::test]
async fn a_framework_registering_again_as_the_registry_knows_it_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let api = Api::new(config(&path));
    let fw = api.register_framework("a", "eng").await;

    // With every write failing, the same registration again (a framework reconnecting after a
    // failover) is still answered: it has nothing to write.
    api.coordinator.fail_registry_writes(true);
    let same = json!({"name": "a", "role": "eng", "framework_id": fw});
    let (status, body) = api.post("/api/v1/frameworks", same.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["framework_id"], json!(fw));
    // Anything that changes its record must be written, and is refused.
    for changed in [
        json!({"name": "a2", "role": "eng", "framework_id": fw}),
        json!({"name": "a", "role": "ops", "framework_id": fw}),
        json!({"name": "a", "role": "eng", "framework_id": fw, "failover_timeout_s": 5}),
        json!({"name": "a", "role": "eng", "framework_id": fw, "capabilities": ["gpu_resources"]}),
    ] {
        assert_unavailable(
            api.post("/api/v1/frameworks", changed.clone()).await,
            &changed.to_string(),
        );
    }
    let listed = api.frameworks().await;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].role.as_str()),
        ("a", "eng")
    );
}

#[tokio::test]
async fn a_failed_write_leaves_the_registry_as_it_was_for_the_next_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.redb");
    let (fw, before) = {
        let api = Api::new(config(&path));
        let fw = api.register_framework("a", "eng").await;
        let before = api.frameworks().await;
        api.coordinator.fail_registry_writes(true);
        let reregister = json!({"name": "a2", "role": "ops", "framework_id": fw});
        assert_unavailable(
            api.post("/api/v1/frameworks", reregister).await,
            "re-register",
        );
        let removal = format!("/api/v1/frameworks/{fw}");
        assert_unavailable(api.call(Method::DELETE, &removal, None).await, "removal");
        assert_unavailable(
            api.post("/api/v1/frameworks", json!({"name": "b", "role": "eng"}))
                .await,
            "new",
        );
        api.coordinator.close_registry();
        (fw, before)
    };
    // A restarted coordinator reads what the first one's books said.
    let api = Api::new(config(&path));
    let after = api.frameworks().await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].framework_id, fw);
    assert_eq!(
        (after[0].name.as_str(), after[0].role.as_str()),
        ("a", "eng")
    );
    assert_eq!(after[0].registered_at, before[0].registered_at);
}
