//! [`failover`]: the leader's SIGKILL under load, against an [`HaCluster`].
//!
//! SDK frameworks (given every coordinator's URL) launch long-running tasks until every one
//! runs; `probes` more frameworks then register that keep asking for offers and decline them,
//! so an offer is due the moment a leader offers. The leader is SIGKILLed, and from the kill
//! the run measures: when a coordinator says it leads, when the first offer made after the
//! kill reaches a framework, when the new leader counts every agent active and every
//! framework connected. Then nothing may be lost or launched twice: the new leader's books list
//! every task running, the simulated agents hold each task id exactly once, the frameworks saw
//! no task end and no launch refused (a refused launch is sent again, possibly elsewhere).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use protocol::messages::{AgentList, TaskList, TaskStatusList};
use protocol::{Resources, TaskState};
use serde::Serialize;

use crate::framework::{Progress, Workload};
use crate::ha::HaCluster;
use crate::report::Mismatches;
use crate::run::{split, start_frameworks_with, Drivers};

/// What to run.
#[derive(Debug, Clone)]
pub struct FailoverConfig {
    /// Frameworks that launch the tasks.
    pub frameworks: usize,
    /// Long-running tasks, shared evenly between them.
    pub tasks: usize,
    /// What each task needs.
    pub task_resources: Resources,
    /// Frameworks that only ask for offers (at least 1).
    pub probes: usize,
    /// The leader lease in force, for the targets.
    pub lease_s: u64,
    /// The launch fails when no task starts running for this long.
    pub stall_timeout: Duration,
    /// How long after the kill the cluster may take to recover before the run gives up.
    pub recovery_timeout: Duration,
    /// Seconds between progress lines on stderr.
    pub progress_every: Duration,
}

/// What the run measured; times in seconds from the kill.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FailoverReport {
    /// Simulated agents.
    pub agents: usize,
    /// Frameworks with tasks (probes not counted).
    pub frameworks: usize,
    /// Tasks running at the kill.
    pub tasks: usize,
    /// `--leader-lease-s`.
    pub lease_s: u64,
    /// Seconds from the frameworks' start until every task ran.
    pub launch_s: f64,
    /// The killed leader's URL and the new one's.
    pub old_leader: String,
    /// See `old_leader`.
    pub new_leader: String,
    /// A coordinator said it leads.
    pub elected_s: Option<f64>,
    /// The first offer made after the kill reached a framework.
    pub first_offer_s: Option<f64>,
    /// The new leader counted every agent active.
    pub agents_back_s: Option<f64>,
    /// The new leader counted every framework (probes included) connected.
    pub frameworks_back_s: Option<f64>,
    /// Tasks the new leader lists as running.
    pub tasks_running_on_new_leader: usize,
    /// Tasks the new leader lists in any other state.
    pub tasks_not_running_on_new_leader: usize,
    /// Task entries on the simulated agents (all agents' lists together).
    pub tasks_on_agents: usize,
    /// Task ids found on more than one agent, or twice on one.
    pub task_ids_on_agents_twice: usize,
    /// Task entries on the agents not running.
    pub tasks_on_agents_not_running: usize,
    /// Tasks the frameworks saw end.
    pub tasks_ended: u64,
    /// Launches the coordinator refused (each task is then sent again).
    pub refused_launches: u64,
    /// Framework streams lost (the kill breaks every stream of the leader once).
    pub streams_lost: usize,
}

/// The printed targets for `lease_s`: (first offer, everyone back), in seconds.
pub fn targets(lease_s: u64) -> Option<(f64, f64)> {
    match lease_s {
        1 => Some((2.0, 2.0)),
        3 => Some((6.0, 10.0)),
        _ => None,
    }
}

impl FailoverReport {
    /// What was lost or launched twice, if anything.
    pub fn check(&self) -> Result<(), Mismatches> {
        let mut wrong = Vec::new();
        if self.tasks_running_on_new_leader != self.tasks
            || self.tasks_not_running_on_new_leader > 0
        {
            wrong.push(format!(
                "the new leader lists {} of {} tasks running and {} not running",
                self.tasks_running_on_new_leader, self.tasks, self.tasks_not_running_on_new_leader
            ));
        }
        if self.tasks_on_agents != self.tasks
            || self.task_ids_on_agents_twice > 0
            || self.tasks_on_agents_not_running > 0
        {
            wrong.push(format!(
                "the agents hold {} task entries for {} tasks ({} ids twice, {} not running)",
                self.tasks_on_agents,
                self.tasks,
                self.task_ids_on_agents_twice,
                self.tasks_on_agents_not_running
            ));
        }
        if self.tasks_ended > 0 || self.refused_launches > 0 {
            wrong.push(format!(
                "the frameworks saw {} tasks end and {} launches refused",
                self.tasks_ended, self.refused_launches
            ));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(Mismatches(wrong))
        }
    }

    /// The report as a markdown table.
    pub fn markdown(&self) -> String {
        let s =
            |v: Option<f64>| v.map_or_else(|| "not reached".to_owned(), |v| format!("{v:.2} s"));
        let (offer_t, back_t) = match targets(self.lease_s) {
            Some((o, b)) => (format!("≤ {o} s"), format!("≤ {b} s")),
            None => (
                "none for this lease".to_owned(),
                "none for this lease".to_owned(),
            ),
        };
        let meets = |v: Option<f64>, t: Option<f64>| match (v, t) {
            (Some(v), Some(t)) if v <= t => "met",
            (_, Some(_)) => "missed",
            _ => "",
        };
        let t = targets(self.lease_s);
        let back = [self.agents_back_s, self.frameworks_back_s]
            .into_iter()
            .try_fold(0.0f64, |m, v| v.map(|v| m.max(v)));
        let mut out = format!(
            "## parley-bench failover: {} agents, {} frameworks, {} tasks, lease {} s\n\n\
             | from the leader's SIGKILL | time | target | |\n|---|---|---|---|\n",
            self.agents, self.frameworks, self.tasks, self.lease_s
        );
        let rows = [
            ("a coordinator leads", self.elected_s, String::new(), ""),
            (
                "first offer from the new leader at a framework",
                self.first_offer_s,
                offer_t,
                meets(self.first_offer_s, t.map(|t| t.0)),
            ),
            (
                "every agent active on the new leader",
                self.agents_back_s,
                back_t.clone(),
                meets(self.agents_back_s, t.map(|t| t.1)),
            ),
            (
                "every framework connected to the new leader",
                self.frameworks_back_s,
                back_t,
                meets(self.frameworks_back_s, t.map(|t| t.1)),
            ),
            (
                "everyone back (the later of the two)",
                back,
                String::new(),
                "",
            ),
        ];
        for (what, v, target, verdict) in rows {
            out.push_str(&format!("| {what} | {} | {target} | {verdict} |\n", s(v)));
        }
        out.push_str(&format!(
            "\nLaunch before the kill: {:.1} s. Old leader {}, new leader {}.\n\
             Nothing lost or twice: new leader {} running / {} other; agents {} entries, {} ids \
             twice, {} not running; frameworks saw {} ends, {} refused launches; {} streams lost \
             (one per framework of the old leader is expected). {}\n",
            self.launch_s,
            self.old_leader,
            self.new_leader,
            self.tasks_running_on_new_leader,
            self.tasks_not_running_on_new_leader,
            self.tasks_on_agents,
            self.task_ids_on_agents_twice,
            self.tasks_on_agents_not_running,
            self.tasks_ended,
            self.refused_launches,
            self.streams_lost,
            match self.check() {
                Ok(()) => "Check: passed.".to_owned(),
                Err(e) => format!("Check: FAILED: {e}."),
            }
        ));
        out
    }
}

/// Launches the tasks, kills the leader, measures the recovery and checks the books.
pub async fn failover(
    config: &FailoverConfig,
    cluster: &mut HaCluster,
    agents: usize,
) -> anyhow::Result<FailoverReport> {
    if config.frameworks == 0 || config.tasks < config.frameworks {
        bail!("need at least one framework and one task per framework");
    }
    let mut report = FailoverReport {
        agents,
        frameworks: config.frameworks,
        tasks: config.tasks,
        lease_s: config.lease_s,
        ..FailoverReport::default()
    };
    let urls = cluster.joined_urls();
    let progress = Arc::new(Progress::default());
    let workloads = split(config.tasks, config.frameworks, |tasks| Workload {
        tasks,
        id_prefix: String::new(),
        resources: config.task_resources.clone(),
        duration_s: None,
        stop_when_done: false,
        max_in_flight: None,
        hold_demand: false,
        duration_spread: 0.0,
        command: None,
    });
    // Declined offers come back after a minute, not the SDK's 30 s: the probes need only the
    // new leader's first offers, which no filter of the old one holds back.
    let tweak = |c: &mut framework_sdk::DriverConfig| {
        c.unregister_on_stop = false;
        c.decline_refuse = Duration::from_secs(60);
    };
    let started = Instant::now();
    let (mut drivers, mut stops) =
        start_frameworks_with(&urls, "fo", workloads, &progress, false, tweak)?;
    wait_running(cluster, &mut drivers, &progress, config).await?;
    report.launch_s = started.elapsed().as_secs_f64();
    let probes = (0..config.probes.max(1))
        .map(|_| Workload {
            tasks: 0,
            id_prefix: String::new(),
            resources: config.task_resources.clone(),
            duration_s: None,
            stop_when_done: false,
            max_in_flight: None,
            hold_demand: true,
            duration_spread: 0.0,
            command: None,
        })
        .collect();
    let (mut probe_drivers, probe_stops) =
        start_frameworks_with(&urls, "probe", probes, &progress, false, tweak)?;
    stops.extend(probe_stops);
    let all_frameworks = config.frameworks + config.probes.max(1);
    let old = cluster
        .wait_leader(Instant::now() + config.recovery_timeout)
        .await?;
    let shared: &HaCluster = cluster;
    poll_until(
        config.recovery_timeout,
        "every framework connected before the kill",
        || async move { Ok(shared.counts(old).await?.1 >= all_frameworks) },
    )
    .await?;

    report.old_leader = cluster.urls[old].clone();
    eprintln!(
        "[parley-bench] {} tasks running; SIGKILL of the leader {} (pid {:?})",
        config.tasks,
        report.old_leader,
        cluster.pid(old)
    );
    progress.mark_offers_after(protocol::now());
    let killed = Instant::now();
    cluster.kill(old).await?;
    recover(
        cluster,
        &progress,
        config,
        killed,
        all_frameworks,
        &mut report,
    )
    .await?;
    check_books(cluster, &progress, &mut report).await?;
    report.streams_lost = progress.disconnects().len();

    for stop in &stops {
        stop.cancel();
    }
    for set in [&mut drivers, &mut probe_drivers] {
        while let Some(joined) = set.join_next().await {
            let (i, result) = joined.context("a framework task panicked")?;
            result.with_context(|| format!("framework {i} failed to stop"))?;
        }
    }
    Ok(report)
}

/// Waits until every task runs; fails when a framework stops, a process dies or nothing
/// starts running for the stall timeout.
async fn wait_running(
    cluster: &mut HaCluster,
    drivers: &mut Drivers,
    progress: &Progress,
    config: &FailoverConfig,
) -> anyhow::Result<()> {
    let (mut last, mut last_change, mut last_line) = (0, Instant::now(), Instant::now());
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    while progress.running() < config.tasks as u64 {
        tokio::select! {
            joined = drivers.join_next() => {
                let Some(joined) = joined else { bail!("every framework stopped") };
                let (i, result) = joined.context("a framework task panicked")?;
                result.with_context(|| format!("framework {i} failed"))?;
                bail!("framework {i} stopped before its tasks were running");
            }
            _ = tick.tick() => {
                cluster.check_alive()?;
                let running = progress.running();
                if running != last {
                    (last, last_change) = (running, Instant::now());
                }
                if last_change.elapsed() >= config.stall_timeout {
                    bail!("launch stalled: {running} of {} tasks running", config.tasks);
                }
                if last_line.elapsed() >= config.progress_every {
                    last_line = Instant::now();
                    eprintln!("[parley-bench] launch: {running}/{} running", config.tasks);
                }
            }
        }
    }
    Ok(())
}

/// Polls `done` every 100 ms until it holds; fails after `within`, naming `what`.
async fn poll_until<F, Fut>(within: Duration, what: &str, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + within;
    loop {
        if done().await.unwrap_or(false) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("not reached within {within:?}: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls from the kill until a new leader has every agent and framework back and an offer
/// arrived, recording each moment.
async fn recover(
    cluster: &mut HaCluster,
    progress: &Progress,
    config: &FailoverConfig,
    killed: Instant,
    all_frameworks: usize,
    report: &mut FailoverReport,
) -> anyhow::Result<()> {
    let deadline = killed + config.recovery_timeout;
    let since = |at: Instant| Some(at.duration_since(killed).as_secs_f64());
    let mut leader = None;
    let mut last_line = Instant::now();
    loop {
        cluster.check_alive()?;
        if leader.is_none() {
            leader = cluster.leader().await;
            if let Some(k) = leader {
                report.elected_s = since(Instant::now());
                report.new_leader = cluster.urls[k].clone();
            }
        }
        if let Some(k) = leader {
            let (agents, frameworks) = cluster.counts(k).await.unwrap_or((0, 0));
            if report.agents_back_s.is_none() && agents >= report.agents {
                report.agents_back_s = since(Instant::now());
            }
            if report.frameworks_back_s.is_none() && frameworks >= all_frameworks {
                report.frameworks_back_s = since(Instant::now());
            }
        }
        if report.first_offer_s.is_none() {
            report.first_offer_s = progress.first_offer_after_mark().and_then(since);
        }
        if report.agents_back_s.is_some()
            && report.frameworks_back_s.is_some()
            && report.first_offer_s.is_some()
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            eprintln!(
                "[parley-bench] recovery incomplete after {:?}; reporting what was reached",
                config.recovery_timeout
            );
            return Ok(());
        }
        if last_line.elapsed() >= config.progress_every {
            last_line = Instant::now();
            eprintln!(
                "[parley-bench] {:.1} s after the kill: leader {:?}",
                killed.elapsed().as_secs_f64(),
                leader.map(|k| &cluster.urls[k])
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Counts the tasks on the new leader's books and on every simulated agent.
async fn check_books(
    cluster: &HaCluster,
    progress: &Progress,
    report: &mut FailoverReport,
) -> anyhow::Result<()> {
    let k = cluster
        .urls
        .iter()
        .position(|u| *u == report.new_leader)
        .context("no new leader to check the books of")?;
    let tasks: TaskList = cluster.get(k, "/api/v1/tasks").await?;
    for t in &tasks.tasks {
        if t.state == TaskState::Running {
            report.tasks_running_on_new_leader += 1;
        } else {
            report.tasks_not_running_on_new_leader += 1;
        }
    }
    let agents: AgentList = cluster.get(k, "/api/v1/agents").await?;
    let endpoints: Arc<Vec<String>> =
        Arc::new(agents.agents.into_iter().map(|a| a.endpoint).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (endpoints, next, http) = (endpoints.clone(), next.clone(), cluster.http().clone());
        workers.spawn(async move {
            let mut seen: Vec<(String, TaskState)> = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(endpoint) = endpoints.get(i) else {
                    return Ok::<_, anyhow::Error>(seen);
                };
                let url = format!("{endpoint}/api/v1/tasks");
                let list: TaskStatusList = http
                    .get(&url)
                    .send()
                    .await
                    .and_then(reqwest::Response::error_for_status)
                    .with_context(|| format!("GET {url}"))?
                    .json()
                    .await
                    .with_context(|| format!("GET {url}: decoding"))?;
                seen.extend(
                    list.tasks
                        .into_iter()
                        .map(|s| (s.task_id.to_string(), s.state)),
                );
            }
        });
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    while let Some(joined) = workers.join_next().await {
        for (id, state) in joined.context("an agent reader panicked")?? {
            report.tasks_on_agents += 1;
            report.tasks_on_agents_not_running += usize::from(state != TaskState::Running);
            *count.entry(id).or_default() += 1;
        }
    }
    report.task_ids_on_agents_twice = count.values().filter(|n| **n > 1).count();
    report.tasks_ended = progress.ended();
    report.refused_launches = progress.failed_launches();
    Ok(())
}
