//! `coordinator tls init`: the files it writes load with the loaders the coordinator uses, are
//! never replaced without `--force`, and make a working secured cluster: a coordinator serving
//! the generated certificate and credentials over HTTPS, an agent joining with the agent token
//! and `ca.pem` (and serving its own generated certificate), a framework registering with its
//! token through the SDK and running tasks.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use framework_sdk::prelude::*;
use framework_sdk::BearerToken;

use crate::support::{agent_binary, free_port, is_root, Proc, Seen, Sleeper, AGENT_TOKEN};

/// Runs `coordinator tls init ARGS`; (success, stdout, stderr).
pub fn init(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_coordinator"))
        .args(["tls", "init"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

pub fn token(dir: &Path, principal: &str) -> String {
    std::fs::read_to_string(dir.join("tokens").join(principal))
        .unwrap()
        .trim()
        .to_owned()
}

/// `tls init` into `dir` for one coordinator and one agent, both on loopback.
pub fn init_loopback(dir: &Path) {
    let (ok, stdout, stderr) = init(&[
        "--out",
        dir.to_str().unwrap(),
        "--coordinator",
        "coord1=localhost,127.0.0.1",
        "--agent",
        "node1=127.0.0.1",
        "--framework",
        "batch",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("ca.key  (secret, 0600)"), "{stdout}");
}

#[test]
fn the_files_load_are_private_and_are_not_replaced_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    init_loopback(&dir);

    for secret in [
        "ca.key",
        "coord1.key",
        "node1.key",
        "tokens/admin",
        "tokens/batch",
    ] {
        assert_eq!(mode(&dir.join(secret)), 0o600, "{secret}");
    }
    assert_eq!(mode(&dir.join("tokens")), 0o700);
    for host in ["coord1", "node1"] {
        parley_tls::ServerTls::from_pem_files(
            &dir.join(format!("{host}.crt")),
            &dir.join(format!("{host}.key")),
        )
        .unwrap();
    }
    parley_tls::ca_certificates(&dir.join("ca.pem")).unwrap();
    let credentials = coordinator::auth::Credentials::load(&dir.join("credentials.toml")).unwrap();
    let text = std::fs::read_to_string(dir.join("credentials.toml")).unwrap();
    type Check = fn(&coordinator::auth::Principal) -> bool;
    let checks: [(&str, Check); 4] = [
        ("admin", |p| p.is_admin()),
        ("reader", |p| p.is_operator() && !p.is_admin()),
        ("agents", |p| p.is_agent()),
        ("batch", |p| p.may_use_role(&"any/role".parse().unwrap())),
    ];
    for (principal, check) in checks {
        let t = token(&dir, principal);
        assert_eq!(t.len(), 64);
        assert!(!text.contains(&t), "the credentials file holds only hashes");
        let p = credentials.authenticate(&t).unwrap();
        assert_eq!(&*p.name, principal);
        assert!(check(p), "{principal}");
    }

    // A second init refuses, naming the file, and changes nothing.
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    let (ok, _, stderr) = init(&[
        "--out",
        dir.to_str().unwrap(),
        "--coordinator",
        "coord1=localhost",
    ]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!("{} already exists", dir.join("ca.pem").display())),
        "{stderr}"
    );
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), ca);
    let (ok, _, stderr) = init(&[
        "--out",
        dir.to_str().unwrap(),
        "--coordinator",
        "coord1=localhost",
        "--force",
    ]);
    assert!(ok, "{stderr}");
    assert_ne!(std::fs::read(dir.join("ca.pem")).unwrap(), ca);

    // Bad flags name what is wrong and write nothing.
    let fresh = tmp.path().join("fresh");
    let (ok, _, stderr) = init(&[
        "--out",
        fresh.to_str().unwrap(),
        "--coordinator",
        "c1=not a name",
    ]);
    assert!(!ok);
    assert!(stderr.contains("\"not a name\""), "{stderr}");
    assert!(!fresh.exists());
}

/// A coordinator serving `dir`'s coord1 certificate and credentials on a free port, up; its
/// process, base URL and a client trusting `ca.pem`.
pub async fn start_coordinator(dir: &Path, data_dir: &Path) -> (Proc, String, reqwest::Client) {
    let file = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let port = free_port();
    let base = format!("https://localhost:{port}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_coordinator"));
    cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--in-memory"])
        .args([
            "--tls-cert",
            &file("coord1.crt"),
            "--tls-key",
            &file("coord1.key"),
        ])
        .args(["--credentials", &file("credentials.toml")])
        .args(["--agent-ca-file", &file("ca.pem")])
        .args(["--agent-heartbeat-interval", "0.5"])
        .args(["--framework-heartbeat-interval", "0.5"])
        .args(["--data-dir", data_dir.to_str().unwrap()])
        .env("RUST_LOG", "info");
    let coord = Proc::spawn(cmd);
    let client = parley_tls::client_builder(Some(&dir.join("ca.pem")))
        .unwrap()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let up = testkit::wait_for(Duration::from_secs(30), "the coordinator", || async {
        client
            .get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    assert!(up.is_ok(), "{}", coord.log());
    (coord, base, client)
}

/// An agent serving `dir`'s node1 certificate over HTTPS on a free loopback port, joining the
/// coordinator at `base` with the agent token, its work dir `work_dir`; its process and its
/// base URL.
pub fn start_agent(dir: &Path, base: &str, work_dir: &Path) -> (Proc, String) {
    let file = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let agent_port = free_port();
    let mut cmd = Command::new(agent_binary());
    cmd.args(["--coordinator", base])
        .args(["--listen", &format!("127.0.0.1:{agent_port}")])
        .args([
            "--tls-cert",
            &file("node1.crt"),
            "--tls-key",
            &file("node1.key"),
        ])
        .args(["--ca-file", &file("ca.pem")])
        .args(["--resources", "cpus=2,mem=2048", "--hostname", "node1"])
        .args(["--isolation", "none", "--kill-grace-s", "1"])
        .args(["--api-token", AGENT_TOKEN])
        .arg("--work-dir")
        .arg(work_dir)
        .env("PARLEY_TOKEN", token(dir, "agents"))
        .env("RUST_LOG", "info");
    if is_root() {
        cmd.arg("--allow-root-tasks");
    }
    (Proc::spawn(cmd), format!("https://127.0.0.1:{agent_port}"))
}

#[tokio::test]
async fn a_generated_cluster_runs_tasks_over_https_with_its_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    init_loopback(&dir);
    let (coord, base, client) = start_coordinator(&dir, tmp.path()).await;
    let state = |t: Option<String>| {
        let mut r = client.get(format!("{base}/api/v1/state"));
        if let Some(t) = t {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    assert_eq!(state(None).await.unwrap().status(), 401);

    let (agent, _) = start_agent(&dir, &base, &tmp.path().join("agent"));
    let admin = token(&dir, "admin");
    let joined = testkit::wait_for(Duration::from_secs(30), "the agent to join", || async {
        match state(Some(admin.clone())).await {
            Ok(r) if r.status() == 200 => {
                let body: serde_json::Value = r.json().await.unwrap_or_default();
                body["agents"].as_array().is_some_and(|a| a.len() == 1)
            }
            _ => false,
        }
    })
    .await;
    assert!(
        joined.is_ok(),
        "coordinator:\n{}\nagent:\n{}",
        coord.log(),
        agent.log()
    );

    let (sleeper, seen): (Sleeper, Arc<Mutex<Seen>>) = Sleeper::new(2, Duration::ZERO);
    let mut config = DriverConfig::new(&base, "batch", "eng".parse().unwrap());
    config.ca_file = Some(dir.join("ca.pem"));
    config.token = Some(BearerToken::new(token(&dir, "batch")));
    let driver = Driver::new(config, sleeper).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(driver.run_until(stop.clone().cancelled_owned()));
    let done = testkit::wait_for(Duration::from_secs(60), "both tasks to finish", || async {
        let seen = seen.lock().unwrap();
        seen.terminal() == 2 && seen.last.values().all(|s| s.state == TaskState::Finished)
    })
    .await;
    assert!(
        done.is_ok(),
        "coordinator:\n{}\nagent:\n{}",
        coord.log(),
        agent.log()
    );
    stop.cancel();
    let _ = run.await;
}
