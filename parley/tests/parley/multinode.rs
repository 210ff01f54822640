//! A whole cluster on a real network of namespaces (see `crate::support::netns`), with TLS and
//! credentials on: 3 etcd members, 3 coordinators (HA on etcd, each configured by a TOML file),
//! 4 agents, the jobs service (`parley-jobs`), each a process in a namespace of its own with its
//! own address, and a framework driven by the SDK in this process (reaching the others through
//! the test's own link). Faults, in order:
//!
//! 1. agent `node0` is cut off for less than the agent timeout: its tasks run on, nothing is
//!    reported but their running;
//! 2. agent `node1` is cut off until its tasks are `lost`: its own timer fences them (`killed`,
//!    reason `agent_partitioned`) and the framework runs them again elsewhere, never two at once;
//! 3. the leading coordinator is cut off from every etcd member: it steps down (exit code 3),
//!    another leads, and the agents, the framework and the jobs service follow it; restarted, the
//!    old one comes back as a follower.
//!
//! Meanwhile the jobs service runs a batch array whose tasks each append their index to one
//! shared file (kept off `node1` by a constraint: a task that finishes unseen during a long
//! partition is reported `lost` and may rightly run again). At the end: every index ran exactly
//! once, the framework's tasks each run once (no attempt failed on another's lock, only
//! `node1`'s were lost), and the books balance (each agent's `used` is its tasks' resources, and
//! each agent runs exactly what the leader thinks it runs).
//!
//! The binaries are the cargo-built ones, or those in `PARLEY_BIN_DIR` (`support::binary`).
//! Needs root, iproute2 and etcd; without them it prints why it skips, unless `PARLEY_CI=1`.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::netns::{can_make_namespaces, Net};
use crate::support::*;
use framework_sdk::prelude::*;
use framework_sdk::{BearerToken, Driver};
use parley_tls::testing::TestPki;
use serde_json::Value;

/// The net number (distinct from the partition tests').
const NET: u8 = 7;
/// Agents, `node0` to `node3`, each `cpus=4,mem=4096`.
const AGENTS: usize = 4;
/// The framework's long-running tasks: index `i` starts on `node{i % 4}`.
const TASKS: usize = 8;
/// The jobs service's batch array.
const JOB_TASKS: usize = 60;
/// Agent heartbeats every second; 8 missed and it is lost (it fences its tasks a second
/// before). Well above a failover (a 2 s lease and 1 s of re-registration grace).
const MISSED: u32 = 8;

/// The secrets of the four principals (`coordinator hash-secret` gives their hashes).
const AGENT_SECRET: &str = "multinode-agent-principal-secret-0123456789";
const FRAMEWORK_SECRET: &str = "multinode-framework-principal-secret-012345";
const JOBS_SECRET: &str = "multinode-jobs-principal-secret-0123456789ab";
const OPERATOR_SECRET: &str = "multinode-operator-principal-secret-0123456";
/// What clients of the jobs service's own API present.
const JOBS_API_TOKEN: &str = "multinode-jobs-api-token";

/// The CA and the one server certificate (for every address in `names`) that the coordinators,
/// the agents and the jobs service serve with.
fn make_pki(dir: &Path, names: &[String]) -> TestPki {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    TestPki::generate_for(dir, &names).unwrap()
}

/// `printf %s SECRET | coordinator hash-secret`: the secret's SHA-256, as the file wants it.
fn hash_secret(secret: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(binary("coordinator"))
        .arg("hash-secret")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(secret.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "coordinator hash-secret failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let hash = text.split_whitespace().last().unwrap().to_owned();
    assert_eq!(hash.len(), 64, "hash-secret printed {text:?}");
    hash
}

/// The credentials file: an agent principal, two framework principals (the test's framework
/// and the jobs service) and a read-only operator (the test's own calls).
fn write_credentials(dir: &Path) -> PathBuf {
    let mut text = String::new();
    for (name, kind, secret, extra) in [
        ("agents", "agent", AGENT_SECRET, ""),
        ("fw", "framework", FRAMEWORK_SECRET, "roles = [\"*\"]\n"),
        ("jobs", "framework", JOBS_SECRET, "roles = [\"*\"]\n"),
        ("ops", "operator", OPERATOR_SECRET, "access = \"read\"\n"),
    ] {
        text.push_str(&format!(
            "[[principals]]\nname = \"{name}\"\nkind = \"{kind}\"\nsecret_sha256 = \"{}\"\n{extra}\n",
            hash_secret(secret)
        ));
    }
    let path = dir.join("credentials.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A coordinator's config file, as an installed one would have it.
fn write_config(dir: &Path, host: &str, pki: &TestPki, credentials: &Path) -> PathBuf {
    let text = format!(
        "listen = \"0.0.0.0:5050\"\n\
         agent_heartbeat_interval = 1\n\
         max_missed_heartbeats = {MISSED}\n\
         framework_heartbeat_interval = 1\n\
         tls_cert = \"{}\"\n\
         tls_key = \"{}\"\n\
         agent_ca_file = \"{}\"\n\
         credentials = \"{}\"\n",
        pki.cert_file.display(),
        pki.key_file.display(),
        pki.ca_file.display(),
        credentials.display()
    );
    let path = dir.join(format!("{host}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A client that trusts only the test CA and presents `token` (if any).
fn client(pki: &TestPki, token: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().unwrap();
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    parley_tls::client_builder(Some(&pki.ca_file))
        .unwrap()
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Starts coordinator `k` (host `c{k}`) with its config file and the HA flags.
fn start_coordinator(net: &Net, dir: &Path, k: usize, etcd: &Etcd, pki: &TestPki) -> Coord {
    let host = format!("c{k}");
    let base = format!("https://{}:5050", net.addr(&host));
    let config = dir.join(format!("{host}.toml"));
    let args: Vec<String> = [
        "--config",
        &config.display().to_string(),
        "--data-dir",
        &dir.join(&host).display().to_string(),
        "--etcd",
        &etcd.endpoints(),
        "--etcd-prefix",
        "/multinode",
        "--advertise-url",
        &base,
        "--leader-lease-s",
        "2",
        "--reregister-grace-s",
        "1",
    ]
    .map(str::to_owned)
    .to_vec();
    let ops = client(pki, Some(OPERATOR_SECRET));
    Coord::in_namespace_with(&net.ns(&host), &base, 5050, &args, ops)
}

/// Starts agents `node0` to `node3` (hosts `a0` to `a3`, `cpus=4,mem=4096`), joining with
/// the agent principal's token, serving and trusting TLS; all but `node1` have `jobs=yes`.
fn start_agents(net: &Net, dir: &Path, urls: &str, tls: &[String], pki: &TestPki) -> Vec<Agent> {
    (0..AGENTS)
        .map(|k| {
            let host = format!("a{k}");
            let jobs_here = if k == 1 { "no" } else { "yes" };
            let mut extra = vec![
                "--resources".to_owned(),
                "cpus=4,mem=4096".to_owned(),
                "--attributes".to_owned(),
                format!("jobs={jobs_here}"),
                "--token".to_owned(),
                AGENT_SECRET.to_owned(),
            ];
            extra.extend_from_slice(tls);
            Agent::in_namespace_with(
                &net.ns(&host),
                &format!("node{k}"),
                &net.addr(&host),
                urls,
                &dir.join(&host),
                &extra,
                client(pki, None),
            )
        })
        .collect()
}

/// The batch: [`JOB_TASKS`] tasks, 3 at a time, off `node1`, each appending its index and
/// attempt to `runs` once it is done.
fn batch_spec(runs: &Path) -> String {
    format!(
        "name = \"count\"\n\
         command = \"sleep 1 && echo \\\"$PARLEY_TASK_INDEX $PARLEY_TASK_ATTEMPT\\\" >> {}\"\n\
         count = {JOB_TASKS}\n\
         max_running = 3\n\
         max_retries = 2\n\
         [resources]\ncpus = 0.5\nmem = 32\n\
         [[constraints]]\nattribute = \"jobs\"\nequals = \"yes\"\n",
        runs.display()
    )
}

/// Every index of the batch ran exactly once to success: one line each in `runs`, and the job's
/// only failures are attempts lost before they started (they wrote no line).
fn assert_batch_ran_once(runs: &Path, job: &Value) {
    assert_eq!(job["tasks"]["succeeded"], JOB_TASKS, "{job}");
    let failures = job["failures"].as_array().cloned().unwrap_or_default();
    let failed: Vec<&Value> = failures.iter().filter(|f| f["state"] != "lost").collect();
    assert!(failed.is_empty(), "batch tasks failed: {failed:?}");
    let text = std::fs::read_to_string(runs).unwrap();
    let mut ran: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for line in text.lines() {
        let (index, attempt) = line.split_once(' ').unwrap();
        ran.entry(index.parse().unwrap()).or_default().push(attempt);
    }
    let twice: Vec<_> = ran.iter().filter(|(_, a)| a.len() != 1).collect();
    assert!(twice.is_empty(), "indexes not run exactly once: {twice:?}");
    assert_eq!(ran.len(), JOB_TASKS, "indexes run: {ran:?}");
}

/// Whether every task has one attempt running (and none is queued).
fn all_running(seen: &Seen) -> bool {
    let mut running = [0; TASKS];
    for (id, s) in &seen.last {
        if s.state == TaskState::Running {
            running[parse_attempt(id).0] += 1;
        }
    }
    running.iter().all(|&n| n == 1)
}

/// The jobs service's API at `base`.
struct Jobs {
    base: String,
    client: reqwest::Client,
}

impl Jobs {
    async fn get(&self, path: &str) -> Option<Value> {
        let r = self.client.get(format!("{}{path}", self.base)).send().await;
        let r = r.ok().filter(|r| r.status().is_success())?;
        r.json().await.ok()
    }
}

/// Waits for `what` (up to `secs`), showing `log` on failure.
async fn wait<F, Fut>(secs: u64, what: &str, log: impl Fn() -> String, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if let Err(e) = testkit::wait_for(Duration::from_secs(secs), what, check).await {
        panic!("{e}\n{}", log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_namespaces_loses_no_task_to_partitions_or_a_leader_cut_off_from_etcd() {
    let test = "multinode";
    if !can_make_namespaces(test) || !have_etcd(test) {
        return;
    }
    let _one = SERIAL.lock().await;
    let started = Instant::now();
    let mut hosts = vec!["e0", "e1", "e2", "c0", "c1", "c2"];
    hosts.extend(["a0", "a1", "a2", "a3", "j"]);
    let net = Net::create(NET, &hosts).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let locks = dir.join("locks");
    std::fs::create_dir(&locks).unwrap();
    // Kills, even when the test fails, the framework's tasks (which outlive killed agents).
    let leftovers = Leftovers::new(&locks.display().to_string());
    let runs = dir.join("runs");
    std::fs::write(&runs, "").unwrap();

    let names: Vec<String> = hosts.iter().map(|h| net.addr(h)).collect();
    let pki = make_pki(dir, &names);
    let credentials = write_credentials(dir);
    for k in 0..3 {
        write_config(dir, &format!("c{k}"), &pki, &credentials);
    }

    let etcd = Etcd::in_namespaces(&net, &["e0", "e1", "e2"], dir).await;
    let mut coords: Vec<Coord> = (0..3)
        .map(|k| start_coordinator(&net, dir, k, &etcd, &pki))
        .collect();
    let urls: Vec<String> = coords.iter().map(|c| c.base.clone()).collect();
    let urls = urls.join(",");
    let first = leader(&coords).await;

    let tls_flags = [
        "--ca-file".to_owned(),
        pki.ca_file.display().to_string(),
        "--tls-cert".to_owned(),
        pki.cert_file.display().to_string(),
        "--tls-key".to_owned(),
        pki.key_file.display().to_string(),
    ];
    let agents = start_agents(&net, dir, &urls, &tls_flags, &pki);
    wait_agents(first, AGENTS).await;

    // The jobs service, in its own namespace.
    let jobs_addr = net.addr("j");
    let mut cmd = Net::command_in(&net.ns("j"), &binary("parley-jobs"));
    cmd.args(["--coordinator", &urls, "--token", JOBS_SECRET])
        .args(["--api-token", JOBS_API_TOKEN])
        .args(&tls_flags)
        .args(["--listen", &format!("{jobs_addr}:5070"), "--data-dir"])
        .arg(dir.join("jobs"))
        .env("RUST_LOG", "info");
    let jobs_proc = Proc::spawn(cmd);
    let jobs = Jobs {
        base: format!("https://{jobs_addr}:5070"),
        client: client(&pki, Some(JOBS_API_TOKEN)),
    };
    let jobs_log = || jobs_proc.log();
    wait(30, "the jobs service to answer", jobs_log, || async {
        jobs.get("/api/v1/jobs").await.is_some()
    })
    .await;

    // The framework, in this process, through the test's own link.
    // Task `i` runs for good, its first attempt on `node{i % 4}`, later ones anywhere.
    let (retrier, seen) = Retrier::new(&locks, "sleep 3600", TASKS, "cpus=0.25,mem=32");
    let retrier =
        retrier.placed(|offer, i, a| a > 0 || offer.hostname == format!("node{}", i % AGENTS));
    let mut config = driver_config(&urls);
    config.name = "multinode".into();
    config.token = Some(BearerToken::new(FRAMEWORK_SECRET));
    config.ca_file = Some(pki.ca_file.clone());
    // Stopping it at the end tears it down: the coordinator has its tasks killed.
    config.unregister_on_stop = true;
    let driver = Driver::new(config, retrier).unwrap();
    let stop = driver.stop_token();
    let running = tokio::spawn(driver.run());
    let first_log = || first.proc.log();
    wait(60, "every framework task running", first_log, || {
        std::future::ready(all_running(&seen.lock().unwrap()))
    })
    .await;

    // The batch: each task appends its index once it is done.
    let spec = batch_spec(&runs);
    let r = jobs
        .client
        .post(format!("{}/api/v1/jobs", jobs.base))
        .header("content-type", "application/toml")
        .body(spec)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
    wait(30, "the batch to start", jobs_log, || async {
        jobs.get("/api/v1/jobs/count")
            .await
            .is_some_and(|j| j["tasks"]["running"].as_u64() > Some(0))
    })
    .await;
    eprintln!("{test}: cluster up and busy after {:?}", started.elapsed());

    // 1. node0 cut off for less than the agent timeout (a measured partition).
    let (short, long) = (agents[0].tasks().await, agents[1].tasks().await);
    let on = |tasks: &[TaskStatus]| -> Vec<String> {
        let ids = tasks.iter().map(|t| t.task_id.to_string());
        ids.filter(|id| id.starts_with('t')).collect()
    };
    let (short, long) = (on(&short), on(&long));
    assert_eq!((short.len(), long.len()), (2, 2), "{short:?} {long:?}");
    net.cut("a0");
    tokio::time::sleep(Duration::from_secs(3)).await;
    net.heal("a0");
    eprintln!("{test}: node0 back after {:?}", started.elapsed());

    // 2. node1 cut off until the framework is told its tasks are lost.
    net.cut("a1");
    wait(60, "node1's tasks to be lost", first_log, || {
        let seen = seen.lock().unwrap();
        let lost = long.iter().all(|id| seen.last[id].state == TaskState::Lost);
        std::future::ready(lost)
    })
    .await;
    net.heal("a1");
    let fenced = || {
        let seen = seen.lock().unwrap();
        let killed = long
            .iter()
            .all(|id| seen.last[id].state == TaskState::Killed);
        std::future::ready(killed && all_running(&seen))
    };
    wait(
        60,
        "node1's tasks fenced, run again elsewhere",
        first_log,
        fenced,
    )
    .await;
    eprintln!("{test}: node1 back after {:?}", started.elapsed());

    // 3. The leader cut off from every etcd member: it steps down, another leads.
    let old = coords.iter().position(|c| c.base == first.base).unwrap();
    let old_host = format!("c{old}");
    for e in ["e0", "e1", "e2"] {
        net.cut_between(&old_host, e);
    }
    let code = coords[old].proc.exit_code(Duration::from_secs(30)).await;
    assert_eq!(code, Some(3), "the cut-off leader exits as deposed");
    for e in ["e0", "e1", "e2"] {
        net.heal_between(&old_host, e);
    }
    coords.remove(old);
    let new = leader(&coords).await;
    assert_ne!(new.base, urls.split(',').nth(old).unwrap());
    wait_agents(new, AGENTS).await;
    let new_log = || new.proc.log();
    wait(
        30,
        "both frameworks connected to the new leader",
        new_log,
        || async {
            let (s, body) = new.get("/api/v1/frameworks").await;
            let frameworks = body["frameworks"].as_array().cloned().unwrap_or_default();
            let connected = |name: &str| {
                frameworks
                    .iter()
                    .any(|f| f["name"] == name && f["state"] == "connected")
            };
            s == 200 && connected("multinode") && connected("parley-jobs")
        },
    )
    .await;
    eprintln!("{test}: new leader after {:?}", started.elapsed());
    // Under a supervisor the old leader is started again: it follows.
    let again = start_coordinator(&net, dir, old, &etcd, &pki);
    again.wait_role("follower", Duration::from_secs(30)).await;

    // The batch ends, each index run once.
    wait(120, "the batch to succeed", jobs_log, || async {
        jobs.get("/api/v1/jobs/count")
            .await
            .is_some_and(|j| j["state"] == "succeeded")
    })
    .await;
    let job = jobs.get("/api/v1/jobs/count").await.unwrap();
    assert_batch_ran_once(&runs, &job);

    // The framework: each task runs once; only node1's attempts were lost, and fenced.
    {
        let seen = seen.lock().unwrap();
        assert!(all_running(&seen));
        let failed = seen.failed();
        assert!(failed.is_empty(), "attempts ran twice at once: {failed:?}");
        for id in &short {
            assert_eq!(seen.history(id), [TaskState::Running], "{id} on node0");
        }
        for id in &long {
            let fenced = [TaskState::Running, TaskState::Lost, TaskState::Killed];
            assert_eq!(seen.history(id), fenced, "{id} on node1");
            assert_eq!(
                seen.last[id].reason.as_deref(),
                Some(protocol::task::REASON_AGENT_PARTITIONED),
                "{id}"
            );
        }
        let lost: Vec<&str> = seen
            .updates
            .iter()
            .filter(|s| s.state == TaskState::Lost)
            .map(|s| s.task_id.as_str())
            .filter(|id| !long.iter().any(|l| l == id))
            .collect();
        assert!(
            lost.is_empty(),
            "tasks lost that were not on node1: {lost:?}"
        );
        let launched = seen.launched - seen.requeued;
        assert_eq!(launched, TASKS + long.len(), "attempts launched");
    }
    assert_tasks_as_agents_saw_them(&seen, &agents).await;
    assert_books_balance(new, &agents, Duration::from_secs(15)).await;
    eprintln!("{test}: passed in {:?}", started.elapsed());

    // Torn down, the framework's tasks are killed on every agent.
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), running).await;
    wait(30, "every task to end on its agent", new_log, || async {
        let mut ended = true;
        for a in &agents {
            ended &= a.tasks().await.iter().all(|t| t.state.is_terminal());
        }
        ended
    })
    .await;
    drop(jobs_proc);
    drop(agents);
    drop(again);
    drop(coords);
    drop(etcd);
    drop(net);
    let left = leftovers.find();
    assert!(
        left.is_empty(),
        "task processes outlive their tasks: {left:?}"
    );
}
