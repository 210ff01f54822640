//! `coordinator backup` and `coordinator restore` with the real binary: a redb registry backed
//! up (refused while a coordinator holds the file), restored into a fresh data dir, and a
//! coordinator started on it shows the frameworks (disconnected), the removal and the weight;
//! restore refused while a coordinator runs on the dir, and for a malformed or unknown-version
//! document, naming the field, with nothing changed; on etcd, a backup of a running cluster, a
//! restore refused under a leader (named) and one into a fresh prefix replacing what was there.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{binary, have_etcd, http, Coord, Etcd, SERIAL};

/// Runs `coordinator ARGS` (a subcommand: it serves nothing and exits); code, stdout, stderr.
fn coordinator(args: &[&str]) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(binary("coordinator"))
        .args(args)
        .output()
        .unwrap();
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// `coordinator VERB --etcd ENDPOINTS --etcd-prefix PREFIX` and `rest`.
fn on_etcd(
    verb: &str,
    endpoints: &str,
    prefix: &str,
    rest: &[&str],
) -> (Option<i32>, String, String) {
    let mut args = vec![verb, "--etcd", endpoints, "--etcd-prefix", prefix];
    args.extend_from_slice(rest);
    coordinator(&args)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// What a test registers: a kept framework's id and a removed one's.
struct Registered {
    kept: String,
    removed: String,
}

/// Registers two frameworks, removes one, and sets role `eng`'s weight to 3.
async fn populate(c: &Coord) -> Registered {
    let http = http();
    let mut ids = Vec::new();
    for name in ["keep", "drop"] {
        let (status, body) = send(
            http.post(c.url("/api/v1/frameworks"))
                .json(&json!({"name": name, "role": "eng/batch", "failover_timeout_s": 3600})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        ids.push(body["framework_id"].as_str().unwrap().to_owned());
    }
    let (status, body) = send(http.delete(c.url(&format!("/api/v1/frameworks/{}", ids[1])))).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(
        http.put(c.url("/api/v1/roles/eng"))
            .json(&json!({"weight": 3})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    Registered {
        kept: ids[0].clone(),
        removed: ids[1].clone(),
    }
}

/// A coordinator on the restored registry shows the kept framework, disconnected with its
/// failover timer running, the weight, and refuses the removed framework's id.
async fn assert_restored(c: &Coord, reg: &Registered) {
    let (status, body) = c.get("/api/v1/frameworks").await;
    assert_eq!(status, 200, "{body}");
    let listed = body["frameworks"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{body}");
    assert_eq!(listed[0]["framework_id"], json!(reg.kept));
    assert_eq!(listed[0]["name"], "keep");
    assert_eq!(listed[0]["role"], "eng/batch");
    assert_eq!(listed[0]["state"], "disconnected");
    assert_eq!(listed[0]["failover_timeout_s"], json!(3600.0));
    let (_, roles) = c.get("/api/v1/roles").await;
    let eng = roles["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "eng")
        .unwrap_or_else(|| panic!("no role eng: {roles}"));
    assert_eq!(eng["weight"], json!(3.0));
    let (status, body) = send(
        http()
            .post(c.url("/api/v1/frameworks"))
            .json(&json!({"name": "drop", "role": "eng/batch", "framework_id": reg.removed})),
    )
    .await;
    assert!((400..500).contains(&status), "{status} {body}");
}

/// The backup file at `file`, checked to be 0600.
fn read_backup(file: &Path) -> Value {
    let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", file.display());
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

/// The records of `doc` (each kind in key order, as both backends read them).
fn records(doc: &Value) -> Value {
    doc["records"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redb_registry_is_backed_up_and_restored_into_a_fresh_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let file = dir.path().join("registry.json");
    let running = Coord::redb(&a, 0);
    running.wait_up(Duration::from_secs(20)).await;
    let reg = populate(&running).await;

    // The running coordinator locks its file: refused, saying how to back it up instead.
    let (code, _, stderr) = coordinator(&["backup", "--data-dir", path(&a), "--out", path(&file)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("in use by another process"), "{stderr}");
    assert!(stderr.contains("/api/v1/registry/backup"), "{stderr}");
    assert!(!file.exists());
    // A data dir without a registry is named.
    let empty = dir.path().join("empty");
    let (code, _, stderr) =
        coordinator(&["backup", "--data-dir", path(&empty), "--out", path(&file)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!empty.exists(), "a backup created {}", empty.display());

    let mut running = running;
    running.proc.signal("TERM");
    assert_eq!(
        running.proc.exit_code(Duration::from_secs(20)).await,
        Some(0)
    );
    let (code, stdout, stderr) =
        coordinator(&["backup", "--data-dir", path(&a), "--out", path(&file)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("1 frameworks, 1 removed framework ids, 1 role weights"),
        "{stdout}"
    );
    let doc = read_backup(&file);
    assert_eq!(doc["format"], "parley-registry-backup");
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["source"]["backend"], "redb");
    assert!(doc["written_at"].is_string(), "{doc}");
    assert_eq!(doc["records"]["frameworks"][0]["id"], json!(reg.kept));
    assert_eq!(doc["records"]["removed_frameworks"], json!([reg.removed]));
    assert_eq!(
        doc["records"]["role_weights"],
        json!([{"role": "eng", "weight": 3.0}])
    );

    // Restored into a fresh data dir, then a coordinator started on it.
    let (code, stdout, stderr) =
        coordinator(&["restore", "--data-dir", path(&b), "--from", path(&file)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("restored"), "{stdout}");
    let mut restored = Coord::redb(&b, 0);
    restored.wait_up(Duration::from_secs(20)).await;
    assert_restored(&restored, &reg).await;

    // Refused while that coordinator runs on the dir.
    let other = dir.path().join("other.json");
    let mut emptied = doc.clone();
    emptied["records"]["frameworks"] = json!([]);
    std::fs::write(&other, emptied.to_string()).unwrap();
    let (code, _, stderr) =
        coordinator(&["restore", "--data-dir", path(&b), "--from", path(&other)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("a coordinator is running"), "{stderr}");
    restored.proc.signal("TERM");
    assert_eq!(
        restored.proc.exit_code(Duration::from_secs(20)).await,
        Some(0)
    );

    // Bad documents are refused naming the field, before anything is written.
    let bad = |edit: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        edit(&mut d);
        d.to_string()
    };
    let cases = [
        ("{\"format\":".to_owned(), "not a JSON document"),
        (
            bad(&|d| d["format_version"] = json!(2)),
            "format_version: 2",
        ),
        (
            bad(&|d| d["schema_version"] = json!(7)),
            "schema_version: 7",
        ),
        (
            bad(&|d| d["records"]["frameworks"][0]["role"] = json!("Not A Role")),
            "records.frameworks[0].role",
        ),
        (
            bad(&|d| d["records"]["role_weights"][0]["weight"] = json!("heavy")),
            "records.role_weights[0].weight",
        ),
    ];
    for (text, field) in cases {
        std::fs::write(&other, &text).unwrap();
        let (code, _, stderr) =
            coordinator(&["restore", "--data-dir", path(&b), "--from", path(&other)]);
        assert_eq!(code, Some(2), "{field}: {stderr}");
        assert!(stderr.contains(field), "{field}: {stderr}");
        assert!(stderr.contains("nothing was restored"), "{stderr}");
    }
    // Nothing changed: the registry backs up to the same records.
    let again = dir.path().join("again.json");
    let (code, _, stderr) = coordinator(&["backup", "--data-dir", path(&b), "--out", path(&again)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(records(&read_backup(&again)), records(&doc));
    // The registry flags belong to the subcommand: given before it, they are refused rather
    // than ignored.
    let (code, _, stderr) =
        coordinator(&["--data-dir", path(&b), "restore", "--from", path(&file)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("go after the subcommand"), "{stderr}");
    // A coordinator without a registry has nothing to restore into.
    let (code, _, stderr) = coordinator(&["restore", "--in-memory", "--from", path(&file)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--in-memory"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_registry_is_backed_up_live_and_restore_is_refused_under_a_leader() {
    if !have_etcd("backup_etcd") {
        return;
    }
    let _one = SERIAL.lock().await;
    let etcd = Etcd::start(1).await;
    let endpoints = etcd.endpoints();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("registry.json");
    let leader = Coord::etcd(&etcd, "/b1", 4);
    leader.wait_role("leader", Duration::from_secs(20)).await;
    let reg = populate(&leader).await;

    // etcd is read at one revision beside the running leader.
    let (code, stdout, stderr) = on_etcd("backup", &endpoints, "/b1", &["--out", path(&file)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("1 frameworks"), "{stdout}");
    let doc = read_backup(&file);
    assert_eq!(doc["source"]["backend"], "etcd");
    assert_eq!(doc["source"]["etcd_prefix"], "/b1");
    assert!(
        doc["source"]["etcd_revision"].as_i64().unwrap() > 0,
        "{doc}"
    );
    assert_eq!(doc["records"]["frameworks"][0]["id"], json!(reg.kept));
    assert_eq!(doc["records"]["removed_frameworks"], json!([reg.removed]));

    // Refused while a leader holds the election, naming it; nothing written.
    let before = etcd.keys("/b1/registry/").await;
    let (code, _, stderr) = on_etcd("restore", &endpoints, "/b1", &["--from", path(&file)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&leader.base), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(etcd.keys("/b1/registry/").await, before);
    // --force writes regardless (for a leader known dead whose lease has not expired).
    let (code, _, stderr) = on_etcd(
        "restore",
        &endpoints,
        "/b1",
        &["--from", path(&file), "--force"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(etcd.keys("/b1/registry/").await, before);

    // Into a prefix no coordinator leads, replacing a record that was there.
    let stale = "/b2/registry/frameworks/00000000-0000-4000-8000-000000000000";
    etcd.post(
        "/v3/kv/put",
        json!({"key": base64_of(stale), "value": base64_of("{}")}),
    )
    .await;
    let (code, stdout, stderr) = on_etcd("restore", &endpoints, "/b2", &["--from", path(&file)]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("1 txn)"), "{stdout}");
    let frameworks = etcd.keys("/b2/registry/frameworks/").await;
    assert_eq!(
        frameworks,
        vec![format!("/b2/registry/frameworks/{}", reg.kept)]
    );
    let restored = Coord::etcd(&etcd, "/b2", 4);
    restored.wait_role("leader", Duration::from_secs(20)).await;
    assert_restored(&restored, &reg).await;
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}
