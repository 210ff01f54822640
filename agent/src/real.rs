//! The real agent's shell around the [`Engine`]: it feeds the engine (launches and kills from the
//! API, process starts and exits, timers, the coordinator's replies) and runs the commands it
//! emits: journal writes (under the books' lock, so the journal order is the send order), HTTP
//! requests, task processes, signals, timers.
//!
//! The journal's syncs are group commits ([`crate::journal::commit`]): the commands that follow
//! a feed run once every record journaled as synced so far is durable (a launch is answered
//! then too), and the books' lock is not held while waiting, so a sync covers the records of
//! every event that came meanwhile.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::signal::Signal as OsSignal;
use protocol::{AgentId, FrameworkId, Resources, TaskId, TaskSpec, TaskStatus};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::{self, Call, Identity, LogLevel};
use crate::config::AgentConfig;
use crate::engine::{
    self, Command, Durability, Engine, EngineConfig, Exit, Launch, Now, Probe, Process, Restored,
    Signal, TaskKey, UnknownTask,
};
use crate::executor::{self, MemoryLimits, TaskUser};
use crate::gpu::{GpuDiscovery, LocalGpu, TaskGpus};
use crate::health;
use crate::isolation::{self, Isolator};
use crate::journal::{Durable, Journal, JournalError, Mark, Record, Replay};
use crate::metrics::AgentMetrics;

/// The file in the work dir holding the agent id the coordinator gave.
pub const AGENT_ID_FILE: &str = "agent_id";

/// A launch the agent refuses.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchError {
    #[error(transparent)]
    Refused(#[from] engine::LaunchError),
    #[error("cannot create sandbox {path}: {source}")]
    Sandbox {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// The core and the journal, changed together.
struct Books {
    core: Engine,
    journal: Journal,
}

/// What a real agent is made of, besides its journal.
pub(crate) struct Parts {
    pub config: AgentConfig,
    pub resources: Resources,
    pub hostname: String,
    pub endpoint: String,
    pub http: reqwest::Client,
    pub api_token: String,
    /// The coordinators, and which of them leads.
    pub leader: client::Leader,
    /// The GPUs the agent uses.
    pub gpus: Vec<LocalGpu>,
    /// Where their usage is read.
    pub gpu_discovery: Arc<dyn GpuDiscovery>,
}

/// One real agent.
pub(crate) struct RealAgent {
    pub config: AgentConfig,
    identity: Identity,
    /// The token the coordinator presents ([`crate::auth`]).
    pub api_token: String,
    limits: MemoryLimits,
    /// Cgroups and namespaces per task, when this agent can enforce them.
    isolator: Option<Isolator>,
    /// The GPUs the agent uses (their minor numbers name their device nodes).
    gpus: Vec<LocalGpu>,
    /// Where the GPUs' usage is read.
    gpu_discovery: Arc<dyn GpuDiscovery>,
    /// Held briefly, never across an `.await`.
    books: Mutex<Books>,
    /// Waits for the journal's syncs, without the books' lock.
    durable: Durable,
    http: reqwest::Client,
    /// The coordinators, and which of them leads.
    leader: client::Leader,
    /// The [`client::Leader::generation`] of the last registration: another coordinator
    /// answering means registering again.
    registered_at: AtomicU64,
    /// The counters of `/metrics`.
    metrics: AgentMetrics,
    /// Set (under the books' lock) by [`RealAgent::end_tasks`]: a task started after it is
    /// killed as soon as it has a process.
    ended: AtomicBool,
    /// Cancelled on shutdown; every background task watches it.
    pub cancel: CancellationToken,
    /// Requests, timers, process watchers: awaited on shutdown.
    pub tracker: TaskTracker,
}

impl RealAgent {
    /// Builds the agent from its replayed journal and starts what the replay calls for
    /// (re-adopted processes, updates of tasks that ended while the agent was down).
    pub fn restore(parts: Parts, journal: Journal, replay: Replay) -> Arc<RealAgent> {
        let Parts {
            config,
            resources,
            hostname,
            endpoint,
            http,
            api_token,
            leader,
            gpus,
            gpu_discovery,
        } = parts;
        let agent_id = read_agent_id(&config.work_dir);
        let now = now();
        let mut out = Vec::new();
        let restored = Restored {
            agent_id,
            replay,
            journal_lines: journal.lines(),
        };
        let core_config = EngineConfig::real(config.timing.clone())
            .with_gpus(gpus.iter().map(|g| g.device.uuid.clone()).collect());
        let core = Engine::restore(core_config, restored, probe, now, &mut out);
        let mut isolator = isolation::detect(
            config.isolation,
            config.cgroup_root.as_deref(),
            config.launcher.as_deref(),
            config.default_pids,
            &config.work_dir,
        );
        if let Some(iso) = &mut isolator {
            // Checked at start (`run`); an error here leaves the agent without images.
            iso.images = config.image_store().ok().flatten();
        }
        let mut attributes = config.attributes.clone();
        isolation::advertise(isolator.as_ref(), &mut attributes);
        if let Some(iso) = &isolator {
            // Cgroups of tasks that ended while the agent was down.
            iso.sweep(&core.live_sandboxes());
        }
        let agent = Arc::new(RealAgent {
            identity: Identity {
                hostname,
                endpoint,
                resources,
                attributes,
                api_token: Some(api_token.clone()),
                gpu_devices: gpus.iter().map(|g| g.device.clone()).collect(),
                reservations: config.reservations.clone(),
            },
            isolator,
            gpus,
            gpu_discovery,
            api_token,
            limits: MemoryLimits::choose(config.cgroup_root.as_deref()),
            config,
            durable: journal.durable(),
            books: Mutex::new(Books { core, journal }),
            http,
            leader,
            registered_at: AtomicU64::new(0),
            metrics: AgentMetrics::default(),
            ended: AtomicBool::new(false),
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
        });
        let rest = agent.write_journal(&mut agent.lock(), out);
        agent.run_when_durable(rest);
        agent
    }

    /// Locks the books. A poisoned lock (a panic elsewhere) still holds consistent data; keep
    /// going.
    fn lock(&self) -> MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Feeds the engine one event (`f`), flushes updates, and runs what it asks for once what
    /// it journaled is durable.
    pub fn feed<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Engine, Now, &mut Vec<Command>) -> R,
    ) -> R {
        let now = now();
        let mut out = Vec::new();
        let (result, rest) = {
            let mut books = self.lock();
            let result = f(&mut books.core, now, &mut out);
            books.core.flush(now, &mut out);
            (result, self.write_journal(&mut books, out))
        };
        self.run_when_durable(rest);
        result
    }

    /// Accepts tasks for launch (all or none): sandboxes created, journaled as `starting`,
    /// processes started. Returns once the launch is durable in the journal.
    pub async fn launch(
        self: &Arc<Self>,
        framework_id: FrameworkId,
        partition_timeout: Option<std::time::Duration>,
        specs: Vec<TaskSpec>,
    ) -> Result<(), LaunchError> {
        let now = now();
        let mut out = Vec::new();
        let ((rest, mark), ids) = {
            let mut books = self.lock();
            books.core.check_launch(framework_id, &specs)?;
            let mut launches = Vec::with_capacity(specs.len());
            for spec in specs {
                let sandbox = self.fresh_sandbox(&framework_id, &spec.task_id);
                let user = task_user(&self.config, &spec).ok().flatten();
                make_sandbox(&sandbox, user.as_ref()).map_err(|source| LaunchError::Sandbox {
                    path: sandbox.clone(),
                    source,
                })?;
                launches.push(Launch {
                    spec,
                    sandbox: Some(sandbox),
                });
            }
            let ids: Vec<TaskKey> = launches
                .iter()
                .map(|l| (framework_id, l.spec.task_id.clone()))
                .collect();
            books.core.launch_partitioned(
                framework_id,
                launches,
                partition_timeout,
                now,
                &mut out,
            )?;
            // The launch's own journal write comes first; if it fails, the launch is refused.
            if let Some(Command::Journal { records, .. }) = out.first() {
                if let Err(e) = books.journal.append(records, Durability::Synced) {
                    books.core.forget_launch(&ids);
                    return Err(e.into());
                }
                out.remove(0);
            }
            books.core.flush(now, &mut out);
            (self.write_journal(&mut books, out), ids)
        };
        // In a task of its own: the caller (a request handler) may be dropped while it waits,
        // and the accepted tasks must start all the same.
        let agent = Arc::clone(self);
        let settled = self.tracker.spawn(async move {
            let synced = agent.durable.wait(mark).await;
            if let Err(e) = &synced {
                // Refused as if its write had failed: its tasks are forgotten before they
                // start (their spawn finds nothing to start).
                agent.lock().core.forget_launch(&ids);
                tracing::error!("the launch's journal sync failed: {e}");
            } else {
                agent.metrics.count_launched(ids.len());
            }
            agent.run(rest);
            synced
        });
        match settled.await {
            Ok(synced) => synced.map_err(Into::into),
            Err(e) => {
                Err(JournalError::Sync(format!("the launch's journal wait ended: {e}")).into())
            }
        }
    }

    /// Starts killing a task (see [`Engine::find`] for how it is named); a fence also journals
    /// that it must not run again (see [`Engine::fence`]).
    pub(crate) fn kill(
        self: &Arc<Self>,
        order: crate::engine::KillOrder,
        task_id: &TaskId,
    ) -> Result<(), UnknownTask> {
        let framework_id = order.framework_id;
        match order.fence {
            true => self.feed(|core, now, out| core.fence(framework_id, task_id, now, out)),
            false => self.feed(|core, now, out| core.kill(framework_id, task_id, now, out)),
        }
    }

    /// The counters of `/metrics`.
    pub(crate) fn metrics(&self) -> &AgentMetrics {
        &self.metrics
    }

    /// What a scrape reads from the books: whether the agent is registered, and how many tasks
    /// run.
    pub(crate) fn scrape(&self) -> (bool, usize) {
        let books = self.lock();
        (books.core.is_registered(), books.core.running())
    }

    /// The latest status of every task.
    pub fn statuses(&self) -> Vec<TaskStatus> {
        self.lock().core.statuses()
    }

    /// The sandbox of the task a request names (see [`Engine::find`]).
    pub fn sandbox(
        &self,
        framework_id: Option<FrameworkId>,
        task_id: &TaskId,
    ) -> Result<Option<PathBuf>, UnknownTask> {
        let books = self.lock();
        let key = books.core.find(framework_id, task_id)?;
        Ok(books.core.sandbox(&key).map(Path::to_path_buf))
    }

    /// The sandboxes of tasks that have not ended (never garbage-collected).
    pub fn live_sandboxes(&self) -> std::collections::HashSet<PathBuf> {
        self.lock().core.live_sandboxes()
    }

    /// Refuses launches from now on (shutdown).
    pub fn stop_accepting(&self) {
        self.lock().core.stop_accepting();
    }

    /// SIGKILLs the process group and the cgroup of every task that has not ended, and of every
    /// task started from now on; returns how many tasks it found. For an embedding that must
    /// leave no process behind (a test harness): a real agent's shutdown leaves its tasks
    /// running, for its next start to re-adopt.
    pub fn end_tasks(&self) -> usize {
        let live = {
            let books = self.lock();
            // Under the lock: a start recorded after this sees the flag (see `run_task`).
            self.ended.store(true, Ordering::SeqCst);
            books.core.live_tasks()
        };
        for (process, sandbox) in &live {
            self.end_task(process.as_ref(), sandbox.as_deref());
        }
        live.len()
    }

    /// SIGKILLs one task's process group (when provably its own) and its cgroup, if any.
    fn end_task(&self, process: Option<&Process>, sandbox: Option<&Path>) {
        if let Some(process) = process {
            executor::signal_task(process, OsSignal::SIGKILL);
        }
        let cgroup = self
            .isolator
            .as_ref()
            .zip(sandbox)
            .and_then(|(iso, sandbox)| iso.task_cgroup(sandbox))
            .filter(|cg| cg.exists());
        if let Some(cgroup) = cgroup {
            cgroup.kill_all();
        }
    }

    /// Syncs the journal and removes the cgroup parents no task uses (shutdown).
    pub fn flush(&self) -> Result<(), JournalError> {
        if let Some(iso) = &self.isolator {
            iso.remove_empty_parents();
        }
        self.lock().journal.flush()
    }

    /// A sandbox path not used before: `sandboxes/{framework}/{task}`, with a numeric suffix
    /// when a task id is re-used after the old task was forgotten.
    fn fresh_sandbox(&self, framework_id: &FrameworkId, task_id: &TaskId) -> PathBuf {
        let base = self
            .config
            .work_dir
            .join("sandboxes")
            .join(framework_id.to_string());
        let mut path = base.join(task_id.as_str());
        let mut n = 1;
        while path.exists() {
            path = base.join(format!("{task_id}.{n}"));
            n += 1;
        }
        path
    }

    /// Runs the journal commands (with the books locked) and returns the others, with the mark
    /// they must wait for: every synced append so far (an update they send may have been
    /// journaled by an earlier event whose sync is still under way).
    fn write_journal(&self, books: &mut Books, commands: Vec<Command>) -> (Vec<Command>, Mark) {
        let mut rest = Vec::with_capacity(commands.len());
        for c in commands {
            match c {
                Command::Journal {
                    records,
                    durability,
                } => {
                    for r in &records {
                        if let Record::Status { status } = r {
                            self.metrics.count_status(status);
                        }
                    }
                    if let Err(e) = books.journal.append(&records, durability) {
                        // Still report it: a lost journal line only matters if the agent also
                        // restarts.
                        tracing::error!("cannot write the journal: {e}");
                    }
                }
                Command::RewriteJournal { records } => {
                    if let Err(e) = books.journal.rewrite(&records) {
                        tracing::warn!("journal compaction failed: {e}");
                    }
                }
                other => rest.push(other),
            }
        }
        (rest, books.journal.wanted())
    }

    /// Runs `commands` (what [`Self::write_journal`] left): requests to the coordinator (they
    /// may carry updates) and task starts (a restarted agent must know of the task) once their
    /// mark is durable, from a task that waits for the sync, so the caller never waits; the
    /// others now.
    fn run_when_durable(self: &Arc<Self>, (commands, mark): (Vec<Command>, Mark)) {
        if self.durable.is_settled(mark) {
            self.run(commands);
            return;
        }
        let after = |c: &Command| matches!(c, Command::Send(_) | Command::Spawn(_));
        let (commands, now): (Vec<Command>, Vec<Command>) = commands.into_iter().partition(after);
        self.run(now);
        if commands.is_empty() {
            return;
        }
        let agent = Arc::clone(self);
        self.tracker.spawn(async move {
            tokio::select! {
                synced = agent.durable.wait(mark) => {
                    if let Err(e) = synced {
                        // Still report it, as after a failed write: a lost journal line only
                        // matters if the agent also restarts.
                        tracing::error!("cannot sync the journal: {e}");
                    }
                    agent.run(commands);
                }
                () = agent.cancel.cancelled() => {}
            }
        });
    }

    /// Runs the commands that need no lock (and no longer wait for the journal).
    fn run(self: &Arc<Self>, commands: Vec<Command>) {
        for c in commands {
            match c {
                Command::Journal { .. } | Command::RewriteJournal { .. } => {
                    let rest = self.write_journal(&mut self.lock(), vec![c]);
                    debug_assert!(rest.0.is_empty());
                    self.run_when_durable(rest);
                }
                Command::PersistAgentId(id) => {
                    if let Err(e) = write_agent_id(&self.config.work_dir, id) {
                        tracing::error!("cannot persist the agent id: {e}");
                    }
                }
                Command::Send(request) => {
                    let call = Call::new(request, || self.identity.clone());
                    let agent = Arc::clone(self);
                    self.tracker.spawn(async move {
                        let timeout = agent.config.timing.request_timeout;
                        tokio::select! {
                            (mut reply, generation) = call.send(&agent.http, &agent.leader, timeout) => {
                                let mut at = agent.registered_at.load(Ordering::Relaxed);
                                let changed = client::changed_coordinator(&mut reply, generation, &mut at);
                                agent.registered_at.store(at, Ordering::Relaxed);
                                client::log_failure(&reply, LogLevel::Warn);
                                agent.feed(|core, now, out| {
                                    if changed {
                                        core.coordinator_changed(now, out);
                                    }
                                    core.reply(reply, now, out);
                                });
                            }
                            () = agent.cancel.cancelled() => {}
                        }
                    });
                }
                Command::SetTimer { at, timer } => {
                    let agent = Arc::clone(self);
                    self.tracker.spawn(async move {
                        tokio::select! {
                            () = tokio::time::sleep_until(at.into()) => {
                                agent.feed(|core, now, out| core.timer(timer, now, out));
                            }
                            () = agent.cancel.cancelled() => {}
                        }
                    });
                }
                Command::Spawn(task_id) => {
                    self.tracker.spawn(run_task(Arc::clone(self), task_id));
                }
                Command::Watch(task_id, process) => {
                    tracing::info!(task_id = %task_id.1, pid = process.pid, "re-adopting a task that outlived the agent");
                    self.tracker
                        .spawn(watch_adopted(Arc::clone(self), task_id, process));
                }
                Command::Signal {
                    task,
                    process,
                    signal,
                } => {
                    if let Some(p) = process {
                        let os_signal = match signal {
                            Signal::Terminate => OsSignal::SIGTERM,
                            Signal::Kill => OsSignal::SIGKILL,
                        };
                        executor::signal_task(&p, os_signal);
                    }
                    // SIGKILL reaches the whole cgroup: children that left the process group
                    // (setsid) too.
                    if let (Signal::Kill, Some(cgroup)) = (signal, self.task_cgroup(&task)) {
                        // The freezer may take a moment: off the async threads.
                        self.tracker.spawn_blocking(move || cgroup.kill_all());
                    }
                }
            }
        }
    }
}

impl RealAgent {
    /// True when the agent uses GPUs.
    pub fn has_gpus(&self) -> bool {
        !self.gpus.is_empty()
    }

    /// What a task is told of its GPUs, and which device nodes its cgroup may open.
    fn task_gpus(&self, task: &TaskKey) -> TaskGpus {
        let (devices, has) = {
            let books = self.lock();
            (books.core.gpu_devices(task), books.core.has_gpus())
        };
        let minors: Vec<u32> = devices
            .iter()
            .filter_map(|u| self.gpus.iter().find(|g| &g.device.uuid == u))
            .map(|g| g.minor)
            .collect();
        TaskGpus {
            env: crate::gpu::task_env(&devices, has),
            device_rules: match self.isolator {
                Some(_) => crate::gpu::devices::host_rules(&minors),
                None => Vec::new(),
            },
        }
    }

    /// The cgroup of a task of this agent, when it is isolated and the cgroup exists.
    fn task_cgroup(&self, task: &TaskKey) -> Option<isolation::TaskCgroup> {
        let iso = self.isolator.as_ref()?;
        let sandbox = self.lock().core.sandbox(task).map(Path::to_path_buf)?;
        iso.task_cgroup(&sandbox).filter(|cg| cg.exists())
    }
}

/// The user a task runs as: its `isolation.user`, else the agent's `--task-user`, else the
/// agent's own.
fn task_user(config: &AgentConfig, spec: &TaskSpec) -> Result<Option<TaskUser>, String> {
    match spec.isolation.as_ref().and_then(|i| i.user.as_deref()) {
        Some(name) => TaskUser::parse(name)
            .map(Some)
            .map_err(|e| format!("isolation.user: {e}")),
        None => Ok(config.task_user.clone()),
    }
}

/// The time now, from tokio's clock (so tests can pause it).
fn now() -> Now {
    Now::read(tokio::time::Instant::now().into_std())
}

/// Whether a replayed task's process lives on, and if not, how it ended.
fn probe(process: Process, sandbox: Option<&Path>) -> Probe {
    if executor::same_process_alive(&process) {
        Probe::Alive
    } else {
        Probe::Ended(sandbox.and_then(executor::read_exit_file))
    }
}

/// Starts the task's process and watches it until it exits. On agent shutdown the process is
/// left running (re-adopted on the next start).
async fn run_task(agent: Arc<RealAgent>, task_id: TaskKey) {
    let Some((spec, Some(sandbox))) =
        agent.feed(|core, now, out| core.take_launch(&task_id, now, out))
    else {
        return;
    };
    let user = match task_user(&agent.config, &spec) {
        Ok(user) => user,
        Err(e) => {
            agent.feed(|core, now, out| core.exited(&task_id, Exit::Error(e), now, out));
            return;
        }
    };
    let gpus = agent.task_gpus(&task_id);
    let spawned = executor::spawn(
        &spec,
        &sandbox,
        &agent.limits,
        user.as_ref(),
        agent.isolator.as_ref(),
        &gpus,
    );
    let running = match spawned {
        Ok(running) => running,
        Err(e) => {
            let exit = Exit::Error(e.to_string());
            agent.feed(|core, now, out| core.exited(&task_id, exit, now, out));
            return;
        }
    };
    let process = running.process;
    agent.feed(|core, now, out| core.started(&task_id, Some(process), now, out));
    if agent.ended.load(Ordering::SeqCst) {
        // Started after `end_tasks` looked: ended here instead, and watched as any other.
        agent.end_task(Some(&process), Some(&sandbox));
    }
    let checks = health_checks(&agent, &task_id, &spec, &sandbox, user.as_ref());
    tokio::select! {
        exit = running.wait() => {
            agent.feed(|core, now, out| core.exited(&task_id, exit, now, out));
        }
        () = checks => {}
        () = agent.cancel.cancelled() => {}
    }
}

/// Runs the task's health check every interval while it runs (forever; dropped when the task
/// ends), and records each change of its health ([`Engine::health_changed`]). Nothing without a
/// health check.
async fn health_checks(
    agent: &Arc<RealAgent>,
    task_id: &TaskKey,
    spec: &TaskSpec,
    sandbox: &Path,
    user: Option<&TaskUser>,
) {
    let Some(check) = &spec.health_check else {
        return std::future::pending().await;
    };
    let started = tokio::time::Instant::now();
    let interval = std::time::Duration::try_from_secs_f64(check.interval())
        .unwrap_or(std::time::Duration::from_secs(10));
    let ctx = health::probe::CheckContext {
        sandbox,
        user,
        env: &spec.env,
        task_id: spec.task_id.as_str(),
    };
    let mut checker = health::Checker::new(check);
    loop {
        let passed = health::probe::run(check, &ctx).await;
        if let Some(healthy) = checker.observe(passed, started.elapsed()) {
            tracing::info!(task_id = %task_id.1, healthy, "task health changed");
            agent.feed(|core, now, out| core.health_changed(task_id, healthy, now, out));
        }
        tokio::time::sleep(interval).await;
    }
}

/// Samples the GPU usage of running GPU tasks every `AgentConfig::gpu_sample` (NVML off the
/// async threads), until shutdown; each task's terminal status carries its peak memory and mean
/// utilisation.
pub(crate) async fn gpu_sampler(agent: Arc<RealAgent>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(agent.config.gpu_sample) => {}
            () = agent.cancel.cancelled() => return,
        }
        let tasks = agent.lock().core.gpu_tasks();
        if tasks.is_empty() {
            continue;
        }
        let discovery = Arc::clone(&agent.gpu_discovery);
        let read = tokio::task::spawn_blocking(move || {
            tasks
                .into_iter()
                .filter_map(|(task, devices)| {
                    let usage: Vec<_> = devices.iter().filter_map(|d| discovery.usage(d)).collect();
                    if usage.is_empty() {
                        return None;
                    }
                    let memory = usage.iter().map(|u| u.memory_used_bytes).sum::<u64>();
                    let util = usage.iter().map(|u| u.utilization_percent).sum::<f64>()
                        / usage.len() as f64;
                    Some((task, memory, util))
                })
                .collect::<Vec<_>>()
        })
        .await;
        if let Ok(samples) = read {
            let mut books = agent.lock();
            for (task, memory, util) in samples {
                books.core.gpu_sample(&task, memory, util);
            }
        }
    }
}

/// Watches a process that was started before the agent restarted, until it exits, then reports
/// the exit code the wrapper left in the sandbox; runs its health check meanwhile.
async fn watch_adopted(agent: Arc<RealAgent>, task_id: TaskKey, process: Process) {
    let sandbox = agent.lock().core.sandbox(&task_id).map(Path::to_path_buf);
    let Some(sandbox) = sandbox else {
        return;
    };
    // Its health check runs again (a fresh count; grace from the re-adoption) until this
    // watch ends.
    let checks_stop = agent.cancel.child_token();
    let _stop_checks = checks_stop.clone().drop_guard();
    let spec = agent.lock().core.spec(&task_id).cloned();
    if let Some(spec) = spec.filter(|s| s.health_check.is_some()) {
        let (agent, task_id, sandbox) = (Arc::clone(&agent), task_id.clone(), sandbox.clone());
        let user = task_user(&agent.config, &spec).ok().flatten();
        agent.tracker.clone().spawn(async move {
            tokio::select! {
                () = health_checks(&agent, &task_id, &spec, &sandbox, user.as_ref()) => {}
                () = checks_stop.cancelled() => {}
            }
        });
    }
    loop {
        if !executor::same_process_alive(&process) {
            // Its leftovers, if the group is provably the task's (see `executor::may_signal`).
            executor::signal_task(&process, OsSignal::SIGKILL);
            let mut exit = match executor::read_exit_file(&sandbox) {
                Some(code) => Exit::Code(code),
                None => {
                    Exit::Unknown("the process ended without an exit status (killed by a signal?)")
                }
            };
            if let Some(cgroup) = agent.task_cgroup(&task_id) {
                let spec_mem = agent
                    .lock()
                    .core
                    .spec(&task_id)
                    .and_then(|spec| isolation::task::limits_of(spec, 0).memory_bytes);
                if let Ok(usage) =
                    tokio::task::spawn_blocking(move || isolation::task::finish_cgroup(&cgroup))
                        .await
                {
                    exit = isolation::task::measured(exit, &usage, spec_mem);
                }
            }
            agent.feed(|core, now, out| core.exited(&task_id, exit, now, out));
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(agent.config.timing.adopt_poll) => {}
            () = agent.cancel.cancelled() => return,
        }
    }
}

/// Reads the persisted agent id, if any.
pub fn read_agent_id(work_dir: &Path) -> Option<AgentId> {
    std::fs::read_to_string(work_dir.join(AGENT_ID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn write_agent_id(work_dir: &Path, id: AgentId) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = work_dir.join(format!("{AGENT_ID_FILE}.tmp"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(id.to_string().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, work_dir.join(AGENT_ID_FILE))
}

/// Creates a task's sandbox: its parents traversable only (0711), the sandbox itself 0700 and,
/// with a task user, owned by that user (so the task can write its files and exit code there).
fn make_sandbox(sandbox: &Path, user: Option<&executor::TaskUser>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(sandbox)?;
    if let Some(parent) = sandbox.parent() {
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o711))?;
    }
    std::fs::set_permissions(sandbox, std::fs::Permissions::from_mode(0o700))?;
    if let Some(user) = user {
        std::os::unix::fs::chown(sandbox, Some(user.uid), Some(user.gid))?;
    }
    Ok(())
}

impl crate::metrics::Source for RealAgent {
    fn scrape(&self) -> (bool, usize) {
        RealAgent::scrape(self)
    }

    fn metrics(&self) -> &AgentMetrics {
        RealAgent::metrics(self)
    }
}
