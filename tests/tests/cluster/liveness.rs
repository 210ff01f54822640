//! A framework with work to do and a cluster with room is never left waiting: one big
//! framework (`hello`, 20,000 tasks on 1,000 simulated agents) runs every task with no request
//! refused for its size, and under random faults injected into the driver's calls (refusals,
//! `413`, `429`, `503`, delays, answers lost after the call was carried out) every task of a
//! framework still runs exactly once, and offers never stop coming while it has tasks pending.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use framework_sdk::faults::{Call, Fault, FaultInjector};
use framework_sdk::prelude::*;
use proptest::prelude::*;
use tests::{fast_coordinator_config, Cluster};

/// The sum of every series of `name` on a `/metrics` page (0 when there is none).
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Heartbeats every 500 ms with a wide margin, so a debug build on a loaded machine loses no
/// simulated agent.
fn fleet_config() -> coordinator::Config {
    coordinator::Config {
        agent_heartbeat_interval: Duration::from_millis(500),
        max_missed_heartbeats: 20,
        ..fast_coordinator_config()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_framework_with_twenty_thousand_tasks_on_a_thousand_agents_runs_them_all() {
    const TASKS: u32 = 20_000;
    let cluster = Cluster::builder()
        .config(fleet_config())
        .simulated_agents(1000, "cpus=24,mem=65536")
        .start()
        .await
        .unwrap();
    let mut common =
        examples::common::CommonArgs::new(cluster.url.clone(), "batch".parse().unwrap());
    common.failover_timeout_s = 60.0;
    let args = examples::hello::Args {
        common,
        tasks: TASKS,
        command: "simulated".into(),
        resources: "cpus=0.1,mem=32".parse().unwrap(),
        duration_s: Some(1.0),
    };
    let started = Instant::now();
    let run = examples::hello::run(args, std::future::pending());
    let outcome = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .expect("hello finished within 10 minutes")
        .unwrap();
    let took = started.elapsed();
    assert_eq!(outcome.states.len(), TASKS as usize);
    assert!(outcome.all_finished(), "every task finished");
    let metrics = cluster.metrics_text().await.unwrap();
    assert_eq!(
        metric_sum(&metrics, "parley_http_requests_too_large_total"),
        0.0,
        "no request was over the coordinator's body limit"
    );
    assert_eq!(
        tests::metric_in(&metrics, "parley_tasks_terminal_total{state=\"finished\"}"),
        Some(f64::from(TASKS)),
        "each task ran once"
    );
    eprintln!("{TASKS} tasks on 1,000 simulated agents in {took:.1?}");
    cluster.shutdown().await.unwrap();
}

/// Faults drawn from a seeded generator: each call to a framework action gets one with
/// probability `per_mille / 1000`. The event stream and registration are left alone (their
/// failures are the reconnection tests' subject). The first accept call always fails without
/// reaching the coordinator: by then every task was placed and the declines said none is
/// wanted, so only the driver telling the true count again keeps the framework from waiting
/// forever.
#[derive(Debug)]
struct RandomFaults {
    state: Mutex<u64>,
    per_mille: u64,
    first_accept_failed: std::sync::atomic::AtomicBool,
    injected: Mutex<BTreeMap<String, usize>>,
}

impl RandomFaults {
    fn next(&self) -> u64 {
        // splitmix64: small, seedable, and good enough to spread faults.
        let mut s = self.state.lock().unwrap();
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl FaultInjector for RandomFaults {
    fn fault(&self, call: &Call<'_>) -> Option<Fault> {
        let action = call.action();
        if !matches!(
            action,
            "accept"
                | "accepts"
                | "decline"
                | "revive"
                | "suppress"
                | "acknowledgements"
                | "reconcile"
        ) {
            return None;
        }
        let answer = |status, code: &str| Fault::Answer {
            status,
            code: code.into(),
        };
        let first_accept = action == "accepts"
            && !self
                .first_accept_failed
                .swap(true, std::sync::atomic::Ordering::SeqCst);
        if !first_accept && self.next() % 1000 >= self.per_mille {
            return None;
        }
        let kind = match first_accept {
            // One of the faults that change nothing: 429, 503, refused.
            true => 1 + self.next() % 3,
            false => self.next() % 6,
        };
        let fault = match kind {
            0 => answer(413, "body_too_large"),
            1 => answer(429, "rate_limited"),
            2 => answer(503, "unavailable"),
            3 => Fault::Refuse,
            4 => Fault::LoseAnswer,
            _ => Fault::Delay(Duration::from_millis(self.next() % 300)),
        };
        *self
            .injected
            .lock()
            .unwrap()
            .entry(format!("{action} {fault:?}"))
            .or_default() += 1;
        Some(fault)
    }
}

/// What the counting scheduler saw.
#[derive(Debug, Default)]
struct Seen {
    /// Each task's last state.
    states: HashMap<TaskId, TaskState>,
    /// The longest time it had tasks pending and no offer came, since its first offer.
    longest_wait: Duration,
    /// Its queue's length after its last callback.
    queued: usize,
}

/// Launches its queue on offers (several per offer), records every state, and stops when
/// every task has finished.
struct Counting {
    task: Task,
    queue: Vec<TaskId>,
    total: usize,
    seen: Arc<Mutex<Seen>>,
    /// Since when tasks are pending with no offer (none while it holds no pending task).
    waiting_since: Option<Instant>,
}

impl Counting {
    fn note_wait(&mut self) {
        if let Some(since) = self.waiting_since {
            let mut seen = self.seen.lock().unwrap();
            seen.longest_wait = seen.longest_wait.max(since.elapsed());
        }
        self.waiting_since = (!self.queue.is_empty()).then(Instant::now);
    }
}

#[async_trait]
impl Scheduler for Counting {
    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        self.note_wait();
        let decisions = Decisions::pack(&offers, &self.task, || self.queue.pop());
        self.waiting_since = (!self.queue.is_empty()).then(Instant::now);
        self.seen.lock().unwrap().queued = self.queue.len();
        decisions
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        let mut seen = self.seen.lock().unwrap();
        seen.states.insert(status.task_id.clone(), status.state);
        let finished = seen
            .states
            .values()
            .filter(|s| **s == TaskState::Finished)
            .count();
        if finished == self.total {
            ctx.stop();
        }
    }

    fn requeue(&mut self, task: TaskSpec) {
        if self.queue.is_empty() && self.waiting_since.is_none() {
            self.waiting_since = Some(Instant::now());
        }
        self.queue.push(task.task_id);
        self.seen.lock().unwrap().queued = self.queue.len();
    }

    fn pending_tasks(&self) -> usize {
        self.queue.len()
    }
}

/// The bound on a wait for offers while tasks are pending: the offer timeout (offers whose
/// decline was lost stay outstanding that long), the revive backoff, and a margin for a slow
/// debug build.
const LONGEST_WAIT: Duration = Duration::from_secs(25);

async fn run_with_faults(seed: u64, per_mille: u64) {
    const TASKS: usize = 300;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let cluster = Cluster::builder()
        .config(fleet_config())
        .simulated_agents(20, "cpus=4,mem=4096")
        .start()
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let scheduler = Counting {
        task: Task::shell("simulated")
            .resources("cpus=0.25,mem=64")
            .duration_s(Some(0.2))
            .build()
            .unwrap(),
        queue: (0..TASKS)
            .map(|i| TaskId::new(format!("t-{i}")).unwrap())
            .collect(),
        total: TASKS,
        seen: seen.clone(),
        waiting_since: Some(Instant::now()),
    };
    let faults = Arc::new(RandomFaults {
        state: Mutex::new(seed),
        per_mille,
        first_accept_failed: Default::default(),
        injected: Mutex::default(),
    });
    let mut config = DriverConfig::new(cluster.url.clone(), "faulty", "batch".parse().unwrap());
    config.request_timeout = Duration::from_secs(5);
    config.revive_interval = Duration::from_millis(200);
    config.offer_wait_warning = Duration::from_secs(5);
    config.failover_timeout = Duration::from_secs(60);
    let driver = Driver::new(config, scheduler)
        .unwrap()
        .with_faults(faults.clone());
    let outcome = tokio::time::timeout(Duration::from_secs(90), driver.run()).await;
    let injected = faults.injected.lock().unwrap().clone();
    let (finished, queued, heard_of, longest_wait) = {
        let seen = seen.lock().unwrap();
        let finished = seen
            .states
            .values()
            .filter(|s| **s == TaskState::Finished)
            .count();
        (finished, seen.queued, seen.states.len(), seen.longest_wait)
    };
    assert!(
        matches!(outcome, Ok(Ok(_))),
        "seed {seed}, {per_mille}/1000: the driver did not finish ({finished} of {TASKS} \
         finished, {queued} queued, {heard_of} heard of; faults {injected:?})",
    );
    assert_eq!(finished, TASKS, "seed {seed}: every task finished");
    assert!(
        longest_wait <= LONGEST_WAIT,
        "seed {seed}: tasks waited {longest_wait:?} for an offer (faults {injected:?})",
    );
    let metrics = cluster.metrics_text().await.unwrap();
    assert_eq!(
        tests::metric_in(&metrics, "parley_tasks_terminal_total{state=\"finished\"}"),
        Some(TASKS as f64),
        "seed {seed}: each task ran exactly once (faults {injected:?})"
    );
    cluster.shutdown().await.unwrap();
}

proptest! {
    // Each case is a whole cluster and a framework run to the end: a few cases, each with
    // many faults. PROPTEST_CASES raises the count for a longer search.
    // A failing case is not shrunk: each try is a whole run, and its seed is in the message.
    #![proptest_config(ProptestConfig {
        cases: 3,
        max_shrink_iters: 0,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    #[test]
    fn under_random_faults_every_task_runs_once_and_offers_keep_coming(
        seed in any::<u64>(),
        per_mille in 50u64..300,
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run_with_faults(seed, per_mille));
    }
}

/// A case the search found: a `413` on a call of one accept, whose tasks the driver then
/// dropped instead of splitting them (16 of 300 never ran). Kept as a fixed case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_accept_refused_as_too_large_loses_no_task() {
    run_with_faults(1_928_069_976_570_635_956, 109).await;
}
