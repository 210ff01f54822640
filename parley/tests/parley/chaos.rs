//! Chaos with real processes: a real 3-member etcd on loopback, the built `coordinator` and
//! `agent` binaries, and a framework driven by the SDK in this process, running 200 short
//! shell tasks (`sleep 0.2`) released over a few seconds so the chaos lands mid-run.
//!
//! - the leader coordinator SIGKILLed mid-run;
//! - the leader SIGSTOPped mid-run (a partition), SIGCONTed once another leads: it exits 3
//!   without writing;
//! - the single-node registry (redb): the coordinator and then an agent SIGKILLed at random
//!   moments and restarted on the same data / work dir;
//! - the registry on a full disk (a small tmpfs, as root): durable requests answer 503
//!   `registry_unavailable`, and everything acknowledged before is there after a restart.
//!
//! After each run: every task is terminal in the framework's view, exactly as the agent that
//! ran it says (`GET /api/v1/tasks` on each agent), and the books are back to zero (nothing
//! used or offered on any agent, no outstanding offer). Failover times (kill → the new
//! leader's `/health`; kill → the first offer after it) are printed.
//!
//! `PARLEY_CHAOS_SEED` replays a run's random moments; `PARLEY_CHAOS_RUNS=N` repeats each
//! scenario N times and prints p50 / max. Without `etcd` (or, for the full disk, without root
//! and tmpfs) a test prints why it skips, unless `PARLEY_CI=1`.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use framework_sdk::Driver;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// Tasks per run.
const TASKS: usize = 200;
/// One task released every this often: 200 tasks over about 4 s.
const EVERY: Duration = Duration::from_millis(20);

/// How the leader is taken down.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL.
    Kill,
    /// SIGSTOP, then SIGCONT once another leads.
    Stop,
}

/// Waits until at least `n` tasks are terminal in the framework's view.
async fn wait_terminal_at_least(seen: &Arc<Mutex<crate::support::Seen>>, n: usize) {
    testkit::wait_for(Duration::from_secs(30), "tasks to end", || {
        std::future::ready(seen.lock().unwrap().terminal() >= n)
    })
    .await
    .unwrap();
}

/// One HA run: returns (kill → new leader, kill → first offer from it).
async fn ha_run(etcd: &Etcd, prefix: &str, fault: Fault, rng: &mut StdRng) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Coord::etcd(etcd, prefix, 2);
    a.wait_role("leader", Duration::from_secs(20)).await;
    let b = Coord::etcd(etcd, prefix, 2);
    b.wait_role("follower", Duration::from_secs(20)).await;
    let urls = format!("{},{}", a.base, b.base);
    let agents: Vec<Agent> = (0..3)
        .map(|i| {
            Agent::start(
                &format!("node{i}"),
                &urls,
                &dir.path().join(format!("a{i}")),
            )
        })
        .collect();
    wait_agents(&a, 3).await;

    let (sleeper, seen) = Sleeper::new(TASKS, EVERY);
    let driver = Driver::new(driver_config(&urls), sleeper).unwrap();
    let stop = driver.stop_token();
    let run = tokio::spawn(driver.run());

    let kill_at = rng.gen_range(20..100);
    wait_terminal_at_least(&seen, kill_at).await;
    let killed = Instant::now();
    match fault {
        Fault::Kill => a.proc.kill9(),
        Fault::Stop => a.proc.signal("STOP"),
    }
    b.wait_role("leader", Duration::from_secs(15)).await;
    let to_leader = killed.elapsed();
    let led = Instant::now();
    let first_offer = testkit::wait_until(
        Duration::from_secs(20),
        "an offer from the new leader",
        || std::future::ready(seen.lock().unwrap().first_offer_after(led)),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; new leader's log:\n{}", b.proc.log()));
    let to_offer = first_offer - killed;
    if let Fault::Stop = fault {
        // The old leader wakes up after another took over: its next fenced write fails and
        // it exits 3, having sent nothing.
        a.proc.signal("CONT");
        assert_eq!(a.proc.exit_code(Duration::from_secs(15)).await, Some(3));
        assert_eq!(b.health().await.unwrap()["role"], "leader");
    }

    wait_all_terminal(
        &seen,
        TASKS,
        Duration::from_secs(40),
        &agents,
        &[&a.proc, &b.proc],
    )
    .await;
    assert_tasks_as_agents_saw_them(&seen, &agents).await;
    assert_books_zero(&b, Duration::from_secs(15)).await;
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    {
        let seen = seen.lock().unwrap();
        eprintln!(
            "{prefix} {fault:?} after {kill_at} tasks: kill -> leader {to_leader:?}, -> first offer {to_offer:?}; {} updates, {} launches, {} requeued, {} lost",
            seen.updates.len(),
            seen.launched,
            seen.requeued,
            seen.lost()
        );
    }
    (to_leader, to_offer)
}

async fn ha_chaos(test: &str, fault: Fault) {
    let _one = SERIAL.lock().await;
    if !have_etcd(test) {
        return;
    }
    let mut rng = StdRng::seed_from_u64(seed(test));
    let etcd = Etcd::start(3).await;
    let n = runs();
    let (mut leader, mut offer) = (Vec::new(), Vec::new());
    for run in 0..n {
        let (l, o) = ha_run(&etcd, &format!("/{test}{run}"), fault, &mut rng).await;
        leader.push(l);
        offer.push(o);
    }
    let (lp, lm) = p50_max(&mut leader);
    let (op, om) = p50_max(&mut offer);
    eprintln!(
        "{test}: {n} runs passed (lease 2 s): kill -> leader p50 {lp:?} max {lm:?}; kill -> first offer p50 {op:?} max {om:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_leader_mid_run_loses_no_task_and_no_update() {
    ha_chaos("chaos_kill", Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigstopped_leader_mid_run_is_replaced_and_cannot_write_when_it_wakes() {
    ha_chaos("chaos_stop", Fault::Stop).await;
}

/// One single-node run: the coordinator, then an agent, SIGKILLed at random moments.
async fn single_node_run(rng: &mut StdRng) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut coord = Coord::redb(&data, 0);
    coord.wait_up(Duration::from_secs(20)).await;
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| {
            Agent::start(
                &format!("node{i}"),
                &coord.base,
                &dir.path().join(format!("a{i}")),
            )
        })
        .collect();
    wait_agents(&coord, 3).await;

    let (sleeper, seen) = Sleeper::new(TASKS, EVERY);
    let driver = Driver::new(driver_config(&coord.base), sleeper).unwrap();
    let stop = driver.stop_token();
    let run = tokio::spawn(driver.run());

    let coord_at = rng.gen_range(10..70);
    wait_terminal_at_least(&seen, coord_at).await;
    coord.proc.kill9();
    let port = coord.port();
    drop(coord);
    let coord = Coord::redb(&data, port);
    coord.wait_up(Duration::from_secs(20)).await;

    let agent_at = rng.gen_range(coord_at + 20..coord_at + 80);
    let victim = rng.gen_range(0..agents.len());
    wait_terminal_at_least(&seen, agent_at).await;
    agents[victim].crash_and_restart();

    wait_all_terminal(
        &seen,
        TASKS,
        Duration::from_secs(40),
        &agents,
        &[&coord.proc],
    )
    .await;
    assert_tasks_as_agents_saw_them(&seen, &agents).await;
    assert_books_zero(&coord, Duration::from_secs(15)).await;
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), run).await;
    let seen = seen.lock().unwrap();
    eprintln!(
        "single node: coordinator killed after {coord_at} tasks, node{victim} after {agent_at}: {} updates, {} launches, {} requeued, {} lost",
        seen.updates.len(),
        seen.launched,
        seen.requeued,
        seen.lost()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_single_node_registry_survives_killed_coordinators_and_agents() {
    let _one = SERIAL.lock().await;
    let mut rng = StdRng::seed_from_u64(seed("chaos_single"));
    let n = runs();
    for _ in 0..n {
        single_node_run(&mut rng).await;
    }
    eprintln!("chaos_single: {n} runs passed");
}

/// A tmpfs mounted on a temp dir, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a `size` tmpfs, or says why not.
    fn mount(size: &str) -> Result<Tmpfs, String> {
        if !is_root() {
            return Err("not root (mounting a tmpfs needs root)".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the file system of `path` with a ballast file until it is full.
fn fill(path: &std::path::Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    loop {
        if f.write_all(&chunk).is_err() {
            break;
        }
    }
    // Smaller pieces into whatever is left.
    loop {
        if f.write_all(&chunk[..512]).is_err() {
            break;
        }
    }
    let _ = f.sync_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_on_a_full_disk_answers_503_and_loses_nothing_acknowledged() {
    let _one = SERIAL.lock().await;
    let fs = match Tmpfs::mount("8m") {
        Ok(fs) => fs,
        Err(why) => {
            assert!(
                std::env::var("PARLEY_CI").as_deref() != Ok("1"),
                "chaos_full_disk: {why}, and PARLEY_CI=1"
            );
            eprintln!("chaos_full_disk: skipped: {why}");
            return;
        }
    };
    let data = fs.dir.path().join("data");
    let http = http();
    let mut coord = Coord::redb(&data, 0);
    coord.wait_up(Duration::from_secs(20)).await;
    let register = |name: String| {
        let http = http.clone();
        let url = coord.url("/api/v1/frameworks");
        async move {
            let r = http
                .post(url)
                .json(&json!({"name": name, "role": "eng", "failover_timeout_s": 3600}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let mut acked = Vec::new();
    for i in 0..10 {
        let (s, body) = register(format!("before{i}")).await;
        assert_eq!(s, 201, "{body}");
        acked.push(body["framework_id"].as_str().unwrap().to_owned());
    }

    let ballast = fs.dir.path().join("ballast");
    fill(&ballast);
    let mut refused = Vec::new();
    for i in 0..200 {
        let name = format!("full{i}");
        let (s, body) = register(name.clone()).await;
        match s {
            201 => acked.push(body["framework_id"].as_str().unwrap().to_owned()),
            503 => {
                assert_eq!(body["error"]["code"], "registry_unavailable", "{body}");
                refused.push(name);
                if refused.len() >= 3 {
                    break;
                }
            }
            _ => panic!("{s} {body}; log:\n{}", coord.proc.log()),
        }
    }
    assert!(
        !refused.is_empty(),
        "no write was refused on a full disk; log:\n{}",
        coord.proc.log()
    );

    coord.proc.kill9();
    drop(coord);
    std::fs::remove_file(&ballast).unwrap();
    let coord = Coord::redb(&data, 0);
    coord.wait_up(Duration::from_secs(20)).await;
    let (s, body) = coord.get("/api/v1/frameworks").await;
    assert_eq!(s, 200, "{body}");
    let listed = body["frameworks"].as_array().unwrap();
    for id in &acked {
        assert!(
            listed.iter().any(|f| f["framework_id"] == json!(id)),
            "acknowledged framework {id} lost: {body}"
        );
    }
    for name in &refused {
        assert!(
            !listed.iter().any(|f| f["name"] == json!(name)),
            "refused framework {name} was kept: {body}"
        );
    }
    eprintln!(
        "chaos_full_disk: {} acknowledged kept, {} refused with 503",
        acked.len(),
        refused.len()
    );
}
