//! [`BenchFramework`]: the SDK framework the harness runs many of, kept cheap so the framework
//! side is not the bottleneck, and [`Progress`], what all frameworks of a phase share.
//!
//! Each framework owns a share of the phase's tasks. On every offer it packs as many of its
//! tasks as fit into one accept (the tasks of one offer are batched) and declines offers it has
//! no use for. It timestamps each task when it decides to launch it (the driver sends the accept
//! right after the callback returns) and when the task's `running` update arrives, and tells
//! [`Progress`] about every end (resources freed on that agent) and every offer (resources
//! offered again), from which the offer latency is estimated.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use framework_sdk::{Context, Decisions, Scheduler, SdkError};
use protocol::{
    AgentId, CommandSpec, FrameworkId, Offer, Resources, TaskId, TaskSpec, TaskState, TaskStatus,
};

/// What every framework of one phase shares: counters for progress lines and stall detection,
/// and the offer-latency clock.
#[derive(Debug, Default)]
pub struct Progress {
    running: AtomicU64,
    ended: AtomicU64,
    failed_launches: AtomicU64,
    /// Held briefly, never across an `.await`.
    offers: Mutex<OfferClock>,
    /// The first offer made after a moment (a failover's kill), once armed.
    mark: Mutex<Option<OfferMark>>,
    /// One entry per stream lost (the framework's id, or its index before it registered).
    disconnects: Mutex<Vec<String>>,
    /// Frameworks registered (first registrations only) and when the last of them was.
    registered: Mutex<(u64, Option<Instant>)>,
}

/// See [`Progress::mark_offers_after`].
#[derive(Debug, Clone, Copy)]
struct OfferMark {
    after: protocol::Timestamp,
    first_seen: Option<Instant>,
}

/// Locks `m`, also after a panic elsewhere (the data are counters and timestamps).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Per agent, the first end seen since the agent's last offer.
#[derive(Debug, Default)]
struct OfferClock {
    freed: HashMap<AgentId, Instant>,
    samples: Vec<Duration>,
}

impl Progress {
    /// Frameworks registered so far and when the last one was (re-registrations not
    /// counted).
    pub fn registered(&self) -> (u64, Option<Instant>) {
        *lock(&self.registered)
    }

    /// Tasks that reached `running` so far (each counted once).
    pub fn running(&self) -> u64 {
        self.running.load(Ordering::Relaxed)
    }

    /// Tasks that reached a terminal state so far (each counted once).
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// Tasks the coordinator refused to launch (they were queued again).
    pub fn failed_launches(&self) -> u64 {
        self.failed_launches.load(Ordering::Relaxed)
    }

    fn clock(&self) -> MutexGuard<'_, OfferClock> {
        lock(&self.offers)
    }

    /// A task on `agent` ended at `at`: its resources are free again.
    fn freed(&self, agent: AgentId, at: Instant) {
        self.clock().freed.entry(agent).or_insert(at);
    }

    /// From now on, notes when the first offer the coordinator made after `after` (its
    /// `created_at`, the coordinator's clock on this machine) reaches a framework.
    pub fn mark_offers_after(&self, after: protocol::Timestamp) {
        *lock(&self.mark) = Some(OfferMark {
            after,
            first_seen: None,
        });
    }

    /// When the first offer made after the mark arrived, if one has.
    pub fn first_offer_after_mark(&self) -> Option<Instant> {
        lock(&self.mark).and_then(|m| m.first_seen)
    }

    /// The streams lost so far (SDK `disconnected` calls: the stream broke, or carried nothing
    /// for the driver's `missed_heartbeats` heartbeat intervals), one entry per loss.
    pub fn disconnects(&self) -> Vec<String> {
        lock(&self.disconnects).clone()
    }

    /// Offers arrived at `at`: each closes its agent's open free, if any.
    fn offered(&self, offers: &[Offer], at: Instant) {
        if let Some(mark) = lock(&self.mark).as_mut() {
            if mark.first_seen.is_none() && offers.iter().any(|o| o.created_at > mark.after) {
                mark.first_seen = Some(at);
            }
        }
        let mut clock = self.clock();
        for offer in offers {
            if let Some(freed) = clock.freed.remove(&offer.agent_id) {
                clock.samples.push(at.duration_since(freed));
            }
        }
    }

    /// The offer latencies measured (end seen → next offer of that agent seen), and how many
    /// ends were never followed by an offer of their agent.
    pub fn offer_latencies(&self) -> (Vec<Duration>, usize) {
        let clock = self.clock();
        (clock.samples.clone(), clock.freed.len())
    }
}

/// What one framework runs: its share of a phase's tasks.
#[derive(Debug, Clone)]
pub struct Workload {
    /// How many tasks; their ids are `{id_prefix}-t{0..tasks}` (`t{0..tasks}` without a prefix).
    pub tasks: usize,
    /// Makes task ids unique across frameworks, not only within one (see `run::start_frameworks`).
    pub id_prefix: String,
    /// What each task needs.
    pub resources: Resources,
    /// How long each simulated task runs; `None`: until killed.
    pub duration_s: Option<f64>,
    /// Each task runs `duration_s` times a factor drawn from `1 ± spread` (a fixed function of
    /// its id, so runs repeat): tasks of one length launched together end together, and stay
    /// in step for a long time; a spread starts them out of step, as real tasks are. 0: all
    /// `duration_s`.
    pub duration_spread: f64,
    /// The shell command of each task on a real agent; `None`: a simulated task
    /// (`duration_s` long).
    pub command: Option<String>,
    /// Stop the driver once every task has ended (without unregistering, so the coordinator
    /// keeps the books for the accounting check). When false the framework runs until its
    /// driver's stop token is cancelled.
    pub stop_when_done: bool,
    /// At most this many tasks launched and not ended at once (the soak keeps the cluster busy
    /// at a steady rate this way); ended tasks are then forgotten, so a long run's books stay
    /// small. `None`: launch whatever fits.
    pub max_in_flight: Option<usize>,
    /// Keep asking for offers after every task is launched (declining them), so offers keep
    /// coming: the failover's probes of when the new leader offers.
    pub hold_demand: bool,
}

/// One task as the framework knows it.
#[derive(Debug, Clone, Copy)]
struct TaskBook {
    sent_at: Instant,
    running: bool,
    ended: Option<TaskState>,
}

/// The harness's framework; see the module documentation.
#[derive(Debug)]
pub struct BenchFramework {
    work: Workload,
    progress: Arc<Progress>,
    /// The next task index never launched yet.
    next: usize,
    /// Tasks whose launch failed, to launch again.
    retry: Vec<TaskId>,
    books: HashMap<TaskId, TaskBook>,
    /// The message of each task that ended other than `finished`.
    end_messages: HashMap<TaskId, String>,
    launch_latencies: Vec<Duration>,
    running_at: Vec<Instant>,
    ended: usize,
    /// Tasks launched and not ended (refused launches excluded).
    in_flight: usize,
    framework_id: Option<FrameworkId>,
}

/// What one framework saw, returned when its driver stops.
#[derive(Debug, Clone, Default)]
pub struct FrameworkOutcome {
    /// Its id at the coordinator.
    pub framework_id: Option<FrameworkId>,
    /// Tasks it was to run.
    pub tasks: usize,
    /// Tasks launched (accepted and not refused).
    pub launched: usize,
    /// Tasks that reached `running`.
    pub running: usize,
    /// Tasks that ended `finished`.
    pub finished: usize,
    /// Tasks that ended otherwise: `task: state (message)`.
    pub ended_otherwise: Vec<String>,
    /// Accept decided → `running` received, one per task that ran.
    pub launch_latencies: Vec<Duration>,
    /// When each `running` update arrived.
    pub running_at: Vec<Instant>,
}

impl BenchFramework {
    /// A framework for `work`, reporting to `progress`.
    pub fn new(work: Workload, progress: Arc<Progress>) -> Self {
        Self {
            work,
            progress,
            next: 0,
            retry: Vec::new(),
            books: HashMap::new(),
            end_messages: HashMap::new(),
            launch_latencies: Vec::new(),
            running_at: Vec::new(),
            ended: 0,
            in_flight: 0,
            framework_id: None,
        }
    }

    /// What it saw, for the report.
    pub fn outcome(self) -> FrameworkOutcome {
        let mut out = FrameworkOutcome {
            framework_id: self.framework_id,
            tasks: self.work.tasks,
            launched: self.books.len(),
            launch_latencies: self.launch_latencies,
            running_at: self.running_at,
            ..FrameworkOutcome::default()
        };
        for (id, book) in self.books {
            out.running += usize::from(book.running);
            match book.ended {
                Some(TaskState::Finished) => out.finished += 1,
                Some(other) => {
                    let message = self.end_messages.get(&id).map_or("", String::as_str);
                    out.ended_otherwise
                        .push(format!("{id}: {other} ({message})"));
                }
                None => {}
            }
        }
        out
    }

    fn next_task(&mut self) -> Option<TaskId> {
        if self
            .work
            .max_in_flight
            .is_some_and(|cap| self.in_flight >= cap)
        {
            return None;
        }
        if let Some(id) = self.retry.pop() {
            return Some(id);
        }
        if self.next == self.work.tasks {
            return None;
        }
        let id = if self.work.id_prefix.is_empty() {
            TaskId::new(format!("t{}", self.next))
        } else {
            TaskId::new(format!("{}-t{}", self.work.id_prefix, self.next))
        }
        .ok()?;
        self.next += 1;
        Some(id)
    }

    fn spec(&self, task_id: TaskId, agent_id: AgentId) -> TaskSpec {
        let duration_s = self
            .work
            .duration_s
            .map(|d| d * spread_factor(&task_id, self.work.duration_spread));
        TaskSpec {
            task_id,
            name: "bench".into(),
            agent_id,
            resources: self.work.resources.clone(),
            command: CommandSpec::Shell(
                self.work
                    .command
                    .clone()
                    .unwrap_or_else(|| "simulated".into()),
            ),
            env: Default::default(),
            duration_s,
            isolation: None,
            health_check: None,
            priority: None,
        }
    }
}

/// `1 + spread × u`, with `u` in [-1, 1) a fixed function of the task id (1 for no spread).
fn spread_factor(task_id: &TaskId, spread: f64) -> f64 {
    use std::hash::{Hash, Hasher};
    if spread <= 0.0 {
        return 1.0;
    }
    // `DefaultHasher::new()` has fixed keys: the same id gives the same length in every run.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    task_id.as_str().hash(&mut h);
    let u = (h.finish() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    1.0 + spread * u
}

#[async_trait::async_trait]
impl Scheduler for BenchFramework {
    async fn registered(&mut self, _ctx: &mut Context, id: FrameworkId, reregistered: bool) {
        self.framework_id = Some(id);
        if !reregistered {
            let mut registered = lock(&self.progress.registered);
            registered.0 += 1;
            registered.1 = Some(Instant::now());
        }
    }

    async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
        let now = Instant::now();
        self.progress.offered(&offers, now);
        Decisions::launch_or_decline(&offers, |offer| {
            let mut room = offer.resources.clone();
            let mut tasks = Vec::new();
            while let Some(left) = room.checked_sub(&self.work.resources) {
                let Some(task_id) = self.next_task() else {
                    break;
                };
                room = left;
                self.in_flight += 1;
                self.books.insert(
                    task_id.clone(),
                    TaskBook {
                        sent_at: now,
                        running: false,
                        ended: None,
                    },
                );
                tasks.push(self.spec(task_id, offer.agent_id));
            }
            tasks
        })
    }

    async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
        let now = Instant::now();
        let Some(book) = self.books.get_mut(&status.task_id) else {
            return;
        };
        if book.ended.is_some() {
            return; // A repeated update of a task that has already ended.
        }
        if status.state == TaskState::Running && !book.running {
            book.running = true;
            self.launch_latencies.push(now.duration_since(book.sent_at));
            self.running_at.push(now);
            self.progress.running.fetch_add(1, Ordering::Relaxed);
        }
        if status.state.is_terminal() {
            book.ended = Some(status.state);
            if status.state != TaskState::Finished {
                let message = status.message.clone().unwrap_or_default();
                self.end_messages.insert(status.task_id.clone(), message);
            }
            self.ended += 1;
            self.in_flight = self.in_flight.saturating_sub(1);
            self.progress.ended.fetch_add(1, Ordering::Relaxed);
            self.progress.freed(status.agent_id, now);
            if self.work.max_in_flight.is_some() {
                self.books.remove(&status.task_id);
                self.end_messages.remove(&status.task_id);
            }
            if self.work.stop_when_done && self.ended == self.work.tasks {
                ctx.stop();
            }
        }
    }

    async fn launch_failed(&mut self, _ctx: &mut Context, tasks: Vec<TaskSpec>, reason: &SdkError) {
        // Logged at debug, not the SDK default's warn: under load, refused launches are routine.
        tracing::debug!(error = %reason, count = tasks.len(), "launch failed; queued again");
        for task in tasks {
            self.requeue(task);
        }
    }

    async fn disconnected(&mut self, _ctx: &mut Context) {
        let who = self
            .framework_id
            .map_or_else(|| "(not registered yet)".to_owned(), |id| id.to_string());
        lock(&self.progress.disconnects).push(who);
    }

    fn requeue(&mut self, task: TaskSpec) {
        if self.books.remove(&task.task_id).is_some() {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        self.progress
            .failed_launches
            .fetch_add(1, Ordering::Relaxed);
        self.retry.push(task.task_id);
    }

    fn pending_tasks(&self) -> usize {
        let mut left = self.work.tasks - self.next + self.retry.len();
        if let Some(cap) = self.work.max_in_flight {
            left = left.min(cap.saturating_sub(self.in_flight));
        }
        left.max(usize::from(self.work.hold_demand))
    }

    fn demand_hint(&self) -> Option<Resources> {
        Some(self.work.resources.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use protocol::{OfferId, UpdateId};

    fn offer(agent: AgentId, resources: &str) -> Offer {
        let now = protocol::now();
        Offer {
            offer_id: OfferId::new(),
            framework_id: FrameworkId::new(),
            agent_id: agent,
            hostname: "h".into(),
            resources: resources.parse().unwrap(),
            agent_total: resources.parse().unwrap(),
            attributes: Default::default(),
            created_at: now,
            expires_at: now,
            reservation: None,
        }
    }

    fn status(task: &TaskSpec, state: TaskState) -> TaskStatus {
        TaskStatus {
            task_id: task.task_id.clone(),
            framework_id: FrameworkId::new(),
            agent_id: task.agent_id,
            state,
            message: None,
            update_id: UpdateId::new(),
            timestamp: protocol::now(),
            exit_code: None,
            resources: None,
            reason: None,
            usage: None,
            gpu_devices: None,
            healthy: None,
        }
    }

    fn work(tasks: usize) -> Workload {
        Workload {
            tasks,
            id_prefix: "f0".into(),
            resources: "cpus=1,mem=100".parse().unwrap(),
            duration_s: Some(1.0),
            command: None,
            stop_when_done: true,
            max_in_flight: None,
            hold_demand: false,
            duration_spread: 0.0,
        }
    }

    fn launches(d: &Decisions) -> (Vec<Vec<TaskSpec>>, usize) {
        let mut launched = Vec::new();
        let mut declined = 0;
        for a in d.answers() {
            match a {
                framework_sdk::Answer::Launch { tasks, .. } => launched.push(tasks.clone()),
                framework_sdk::Answer::LaunchGang { parts, .. } => {
                    launched.extend(parts.iter().map(|(_, t)| t.clone()));
                }
                framework_sdk::Answer::Decline { .. } => declined += 1,
                _ => {}
            }
        }
        (launched, declined)
    }

    #[tokio::test]
    async fn packs_each_offer_in_one_accept_and_declines_the_rest() {
        let progress = Arc::new(Progress::default());
        let mut fw = BenchFramework::new(work(5), progress.clone());
        let mut ctx = Context::new(None);
        let (a, b, c) = (AgentId::new(), AgentId::new(), AgentId::new());
        let d = fw
            .offers(
                &mut ctx,
                vec![
                    offer(a, "cpus=3,mem=1000"),
                    offer(b, "cpus=0.5,mem=1000"),
                    offer(c, "cpus=8,mem=1000"),
                ],
            )
            .await;
        let (launched, declined) = launches(&d);
        assert_eq!(launched.len(), 2);
        assert_eq!((launched[0].len(), launched[1].len(), declined), (3, 2, 1));
        assert_eq!(fw.pending_tasks(), 0);
        assert!(launched[1].iter().all(|t| t.agent_id == c));
        let ids: std::collections::HashSet<_> =
            launched.iter().flatten().map(|t| &t.task_id).collect();
        assert_eq!(ids.len(), 5, "every task id is distinct");
    }

    #[test]
    fn task_lengths_spread_within_bounds_the_same_in_every_run() {
        let ids: Vec<TaskId> = (0..1000)
            .map(|i| TaskId::new(format!("t{i}")).unwrap())
            .collect();
        let factors: Vec<f64> = ids.iter().map(|id| spread_factor(id, 0.5)).collect();
        assert!(
            factors.iter().all(|f| (0.5..1.5).contains(f)),
            "{factors:?}"
        );
        let mean = factors.iter().sum::<f64>() / 1000.0;
        assert!((mean - 1.0).abs() < 0.05, "mean {mean}");
        assert!(factors.iter().any(|f| *f < 0.7) && factors.iter().any(|f| *f > 1.3));
        assert_eq!(
            spread_factor(&ids[7], 0.5),
            factors[7],
            "a fixed function of the id"
        );
        assert_eq!(spread_factor(&ids[7], 0.0), 1.0);
    }

    #[tokio::test]
    async fn records_latencies_ends_and_offer_latency_and_stops_when_done() {
        let progress = Arc::new(Progress::default());
        let mut fw = BenchFramework::new(work(2), progress.clone());
        let mut ctx = Context::new(None);
        let agent = AgentId::new();
        let d = fw
            .offers(&mut ctx, vec![offer(agent, "cpus=2,mem=1000")])
            .await;
        let (launched, _) = launches(&d);
        let tasks = &launched[0];
        for t in tasks {
            fw.status_update(&mut ctx, &status(t, TaskState::Running))
                .await;
            // Repeated updates count once.
            fw.status_update(&mut ctx, &status(t, TaskState::Running))
                .await;
        }
        assert_eq!(progress.running(), 2);
        fw.status_update(&mut ctx, &status(&tasks[0], TaskState::Finished))
            .await;
        assert!(!ctx.is_stopping());
        fw.status_update(&mut ctx, &status(&tasks[1], TaskState::Lost))
            .await;
        fw.status_update(&mut ctx, &status(&tasks[1], TaskState::Lost))
            .await;
        assert!(ctx.is_stopping());
        assert_eq!(progress.ended(), 2);
        // One open free on the agent until its next offer.
        assert_eq!(progress.offer_latencies(), (vec![], 1));
        let _ = fw
            .offers(&mut ctx, vec![offer(agent, "cpus=2,mem=1000")])
            .await;
        let (samples, open) = progress.offer_latencies();
        assert_eq!((samples.len(), open), (1, 0));

        let out = fw.outcome();
        assert_eq!((out.launched, out.running, out.finished), (2, 2, 1));
        assert_eq!(
            out.ended_otherwise,
            vec![format!("{}: lost ()", tasks[1].task_id)]
        );
        assert_eq!(out.launch_latencies.len(), 2);
        assert_eq!(out.running_at.len(), 2);
    }

    #[tokio::test]
    async fn a_cap_on_tasks_in_flight_holds_launches_until_tasks_end() {
        let progress = Arc::new(Progress::default());
        let capped = Workload {
            max_in_flight: Some(2),
            ..work(10)
        };
        let mut fw = BenchFramework::new(capped, progress.clone());
        let mut ctx = Context::new(None);
        assert_eq!(fw.pending_tasks(), 2);
        let d = fw
            .offers(&mut ctx, vec![offer(AgentId::new(), "cpus=8,mem=1000")])
            .await;
        let (launched, _) = launches(&d);
        assert_eq!(launched[0].len(), 2, "two in flight at most");
        assert_eq!(fw.pending_tasks(), 0);
        fw.status_update(&mut ctx, &status(&launched[0][0], TaskState::Finished))
            .await;
        assert_eq!(fw.pending_tasks(), 1);
        assert_eq!(fw.books.len(), 1, "an ended task is forgotten under a cap");
        let err = SdkError::Protocol("gone".into());
        fw.launch_failed(&mut ctx, vec![launched[0][1].clone()], &err)
            .await;
        assert_eq!(fw.pending_tasks(), 2, "a refused launch frees its place");
    }

    #[tokio::test]
    async fn held_demand_keeps_asking_and_the_mark_catches_the_first_later_offer() {
        let progress = Arc::new(Progress::default());
        let probe = Workload {
            hold_demand: true,
            duration_spread: 0.0,
            ..work(0)
        };
        let mut fw = BenchFramework::new(probe, progress.clone());
        let mut ctx = Context::new(None);
        assert_eq!(fw.pending_tasks(), 1);
        let old = offer(AgentId::new(), "cpus=8,mem=1000");
        progress.mark_offers_after(protocol::now());
        let d = fw.offers(&mut ctx, vec![old]).await;
        assert_eq!(launches(&d), (vec![], 1), "nothing to launch: declined");
        assert_eq!(
            progress.first_offer_after_mark(),
            None,
            "made before the mark"
        );
        let mut new = offer(AgentId::new(), "cpus=8,mem=1000");
        new.created_at += Duration::from_millis(1);
        let _ = fw.offers(&mut ctx, vec![new]).await;
        assert!(progress.first_offer_after_mark().is_some());
        fw.disconnected(&mut ctx).await;
        assert_eq!(
            progress.disconnects(),
            vec!["(not registered yet)".to_owned()]
        );
    }

    #[tokio::test]
    async fn refused_launches_are_queued_again() {
        let progress = Arc::new(Progress::default());
        let mut fw = BenchFramework::new(work(1), progress.clone());
        let mut ctx = Context::new(None);
        let d = fw
            .offers(&mut ctx, vec![offer(AgentId::new(), "cpus=2,mem=1000")])
            .await;
        let (launched, _) = launches(&d);
        let err = SdkError::Protocol("gone".into());
        fw.launch_failed(&mut ctx, launched[0].clone(), &err).await;
        assert_eq!(fw.pending_tasks(), 1);
        assert_eq!(progress.failed_launches(), 1);
        let d = fw
            .offers(&mut ctx, vec![offer(AgentId::new(), "cpus=2,mem=1000")])
            .await;
        let (again, _) = launches(&d);
        assert_eq!(again[0][0].task_id, launched[0][0].task_id);
        assert_eq!(fw.outcome().launched, 1);
    }
}
