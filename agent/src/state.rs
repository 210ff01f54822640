//! The agent's books: its tasks, the journal, and the queue of updates the coordinator has not
//! acknowledged yet. Every state change goes through [`Agent::record`], which journals it
//! (fsync'd) before queueing it for the sender in `client`.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::signal::Signal;
use protocol::{
    AgentId, FrameworkId, Resources, TaskId, TaskSpec, TaskState, TaskStatus, UpdateId,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::AgentConfig;
use crate::executor::{self, MemoryLimits};
use crate::journal::{Journal, JournalError, Record, Replay};

/// Terminal tasks kept in memory (for `GET /tasks` and duplicate detection) beyond this many
/// are forgotten, oldest first.
const MAX_TERMINAL_TASKS: usize = 1000;

/// The file in the work dir holding the agent id the coordinator gave.
pub const AGENT_ID_FILE: &str = "agent_id";

/// A task whose process outlived an agent restart: its id, pid and start time.
pub(crate) type Adoptable = (TaskId, u32, Option<u64>);

/// One task the agent knows.
#[derive(Debug)]
pub(crate) struct TaskEntry {
    pub framework_id: FrameworkId,
    pub spec: TaskSpec,
    pub sandbox: PathBuf,
    pub process: Option<(u32, Option<u64>)>,
    pub latest: TaskStatus,
    pub kill_requested: bool,
}

/// What the mutex protects.
#[derive(Debug)]
pub(crate) struct Inner {
    pub journal: Journal,
    pub tasks: HashMap<TaskId, TaskEntry>,
    /// Task ids in launch order, to forget the oldest terminal tasks first.
    pub order: VecDeque<TaskId>,
    /// Updates not yet acknowledged by the coordinator, oldest first.
    pub unacked: VecDeque<TaskStatus>,
    pub agent_id: Option<AgentId>,
}

/// A launch the agent refuses.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaunchError {
    #[error("task {0} already exists on this agent")]
    Duplicate(TaskId),
    #[error("the agent is shutting down; launch elsewhere")]
    ShuttingDown,
    #[error("cannot create sandbox {path}: {source}")]
    Sandbox {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// One real agent: configuration, books, and the handles its background work hangs on.
pub(crate) struct Agent {
    pub config: AgentConfig,
    pub resources: Resources,
    pub hostname: String,
    pub endpoint: String,
    pub limits: MemoryLimits,
    /// Held briefly, never across an `.await`: the journal, the tasks and the update queue must
    /// change together so the journal order is the send order.
    inner: Mutex<Inner>,
    /// Woken when an update is queued.
    pub wake: Notify,
    pub http: reqwest::Client,
    /// Cancelled on shutdown; every background loop watches it.
    pub cancel: CancellationToken,
    /// Process watchers and kill timers, awaited on shutdown.
    pub tracker: TaskTracker,
    accepting: AtomicBool,
}

impl Agent {
    /// Builds the agent from its replayed journal. Tasks whose processes are gone are reported
    /// (`failed` with the exit code the wrapper left, or `lost`); live ones are returned for the
    /// caller to re-adopt.
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        config: AgentConfig,
        resources: Resources,
        hostname: String,
        endpoint: String,
        journal: Journal,
        replay: Replay,
        agent_id: Option<AgentId>,
        http: reqwest::Client,
    ) -> (Arc<Agent>, Vec<Adoptable>) {
        let limits = MemoryLimits::choose(config.cgroup_root.as_deref());
        let nil = agent_id.unwrap_or(AgentId(uuid::Uuid::nil()));
        let mut tasks = HashMap::new();
        let mut order = VecDeque::new();
        for t in replay.tasks {
            let latest = t.latest.unwrap_or_else(|| TaskStatus {
                task_id: t.spec.task_id.clone(),
                framework_id: t.framework_id,
                agent_id: nil,
                state: TaskState::Starting,
                message: None,
                exit_code: None,
                update_id: UpdateId::new(),
                timestamp: protocol::now(),
                resources: Some(t.spec.resources.clone()),
            });
            order.push_back(t.spec.task_id.clone());
            tasks.insert(
                t.spec.task_id.clone(),
                TaskEntry {
                    framework_id: t.framework_id,
                    spec: t.spec,
                    sandbox: t.sandbox,
                    process: t.process,
                    latest,
                    kill_requested: false,
                },
            );
        }
        let agent = Arc::new(Agent {
            config,
            resources,
            hostname,
            endpoint,
            limits,
            inner: Mutex::new(Inner {
                journal,
                tasks,
                order,
                unacked: replay.unacked,
                agent_id,
            }),
            wake: Notify::new(),
            http,
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            accepting: AtomicBool::new(true),
        });

        // Decide, for every task not yet terminal, whether its process lives on.
        let mut adopt = Vec::new();
        let mut ended = Vec::new();
        {
            let inner = agent.lock();
            for (id, t) in &inner.tasks {
                if t.latest.state.is_terminal() {
                    continue;
                }
                match t.process {
                    Some((pid, start)) if executor::same_process_alive(pid, start) => {
                        adopt.push((id.clone(), pid, start));
                    }
                    Some((pid, _)) => {
                        let outcome = match executor::read_exit_file(&t.sandbox) {
                            Some(code) => executor::code_outcome(code),
                            None => (
                                TaskState::Lost,
                                Some("the process ended while the agent was down; its exit status is unknown".into()),
                                None,
                            ),
                        };
                        ended.push((id.clone(), Some(pid), outcome));
                    }
                    None => ended.push((
                        id.clone(),
                        None,
                        (
                            TaskState::Failed,
                            Some("the agent restarted before the task's process started".into()),
                            None,
                        ),
                    )),
                }
            }
        }
        for (id, pid, (state, message, code)) in ended {
            if let Some(pid) = pid {
                executor::signal_group(pid, Signal::SIGKILL);
            }
            agent.record(&id, state, message, code);
        }
        (agent, adopt)
    }

    /// Locks the books. A poisoned lock (a panic elsewhere) still holds consistent data, since
    /// every change is a single insert or push; keep going.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops accepting launches (shutdown).
    pub fn stop_accepting(&self) {
        self.accepting.store(false, Ordering::SeqCst);
    }

    /// The agent id, once registered.
    pub fn agent_id(&self) -> Option<AgentId> {
        self.lock().agent_id
    }

    /// Accepts tasks for launch: journals them as `starting` and returns their ids, or refuses
    /// all of them (a duplicate id, shutdown, no sandbox). The caller starts the processes.
    pub fn accept_launch(
        &self,
        framework_id: FrameworkId,
        specs: Vec<TaskSpec>,
    ) -> Result<Vec<TaskId>, LaunchError> {
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(LaunchError::ShuttingDown);
        }
        let mut inner = self.lock();
        let mut seen = std::collections::HashSet::new();
        for s in &specs {
            if inner.tasks.contains_key(&s.task_id) || !seen.insert(s.task_id.clone()) {
                return Err(LaunchError::Duplicate(s.task_id.clone()));
            }
        }
        let agent_id = inner.agent_id.unwrap_or(AgentId(uuid::Uuid::nil()));
        let mut records = Vec::new();
        let mut entries = Vec::new();
        for spec in specs {
            let sandbox = self.fresh_sandbox(&framework_id, &spec.task_id);
            std::fs::create_dir_all(&sandbox).map_err(|source| LaunchError::Sandbox {
                path: sandbox.clone(),
                source,
            })?;
            let status = new_status(
                &spec.task_id,
                framework_id,
                agent_id,
                &spec.resources,
                TaskState::Starting,
                None,
                None,
            );
            records.push(Record::Launch {
                framework_id,
                spec: spec.clone(),
                sandbox: sandbox.clone(),
            });
            records.push(Record::Status {
                status: status.clone(),
            });
            entries.push(TaskEntry {
                framework_id,
                spec,
                sandbox,
                process: None,
                latest: status,
                kill_requested: false,
            });
        }
        inner.journal.append(&records, true)?;
        let mut ids = Vec::new();
        for e in entries {
            let id = e.spec.task_id.clone();
            inner.unacked.push_back(e.latest.clone());
            inner.order.push_back(id.clone());
            inner.tasks.insert(id.clone(), e);
            ids.push(id);
        }
        prune_terminal(&mut inner);
        drop(inner);
        self.wake.notify_one();
        Ok(ids)
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

    /// The task's spec and sandbox.
    pub fn launch_info(&self, task_id: &TaskId) -> Option<(TaskSpec, PathBuf)> {
        self.lock()
            .tasks
            .get(task_id)
            .map(|t| (t.spec.clone(), t.sandbox.clone()))
    }

    /// The sandboxes of tasks that have not ended (never garbage-collected).
    pub fn live_sandboxes(&self) -> std::collections::HashSet<PathBuf> {
        self.lock()
            .tasks
            .values()
            .filter(|t| !t.latest.state.is_terminal())
            .map(|t| t.sandbox.clone())
            .collect()
    }

    /// The task's sandbox.
    pub fn sandbox(&self, task_id: &TaskId) -> Option<PathBuf> {
        self.lock().tasks.get(task_id).map(|t| t.sandbox.clone())
    }

    /// True once a kill was asked for.
    pub fn kill_requested(&self, task_id: &TaskId) -> bool {
        self.lock()
            .tasks
            .get(task_id)
            .is_some_and(|t| t.kill_requested)
    }

    /// Records the task's process (journaled for re-adoption) and the `running` state. Returns
    /// true when a kill arrived while it was starting, so the caller kills it now.
    pub fn started(&self, task_id: &TaskId, pid: u32, start_time: Option<u64>) -> bool {
        let kill = {
            let mut inner = self.lock();
            let Some(t) = inner.tasks.get_mut(task_id) else {
                return false;
            };
            t.process = Some((pid, start_time));
            let kill = t.kill_requested;
            let record = Record::Started {
                task_id: task_id.clone(),
                pid,
                start_time,
            };
            if let Err(e) = inner.journal.append(&[record], false) {
                tracing::error!(%task_id, "cannot journal the task's process: {e}");
            }
            kill
        };
        self.record(task_id, TaskState::Running, None, None);
        kill
    }

    /// Records a state change: journal (fsync'd), then queue for the coordinator. A task that is
    /// already terminal does not change again.
    pub fn record(
        &self,
        task_id: &TaskId,
        state: TaskState,
        message: Option<String>,
        exit_code: Option<i32>,
    ) {
        {
            let mut inner = self.lock();
            let agent_id = inner.agent_id.unwrap_or(AgentId(uuid::Uuid::nil()));
            let Some(t) = inner.tasks.get(task_id) else {
                return;
            };
            if t.latest.state.is_terminal() {
                return;
            }
            let status = new_status(
                task_id,
                t.framework_id,
                agent_id,
                &t.spec.resources,
                state,
                message,
                exit_code,
            );
            if let Err(e) = inner.journal.append(
                &[Record::Status {
                    status: status.clone(),
                }],
                true,
            ) {
                // Still report it: a lost journal line only matters if the agent also restarts.
                tracing::error!(%task_id, "cannot journal a status update: {e}");
            }
            if let Some(t) = inner.tasks.get_mut(task_id) {
                t.latest = status.clone();
            }
            inner.unacked.push_back(status);
            prune_terminal(&mut inner);
        }
        tracing::info!(%task_id, state = %state, "task state changed");
        self.wake.notify_one();
    }

    /// Starts killing a task: SIGTERM to its process group now, SIGKILL after the grace period.
    /// Returns false when the task is unknown. Killing a terminal task does nothing.
    pub fn kill_task(self: &Arc<Self>, task_id: &TaskId) -> bool {
        let pid = {
            let mut inner = self.lock();
            let Some(t) = inner.tasks.get_mut(task_id) else {
                return false;
            };
            if t.latest.state.is_terminal() {
                return true;
            }
            t.kill_requested = true;
            t.process.map(|(pid, _)| pid)
        };
        // No process yet: `run_task` sees the flag before or right after spawning.
        let Some(pid) = pid else { return true };
        executor::signal_group(pid, Signal::SIGTERM);
        let agent = Arc::clone(self);
        let task_id = task_id.clone();
        let grace = self.config.timing.kill_grace;
        self.tracker.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(grace) => {
                    let still_running = agent
                        .lock()
                        .tasks
                        .get(&task_id)
                        .is_some_and(|t| !t.latest.state.is_terminal());
                    if still_running {
                        tracing::info!(%task_id, "grace period over; sending SIGKILL");
                        executor::signal_group(pid, Signal::SIGKILL);
                    }
                }
                () = agent.cancel.cancelled() => {}
            }
        });
        true
    }

    /// The latest status of every task the agent knows, with the task's resources (a status
    /// journaled by an older agent may lack them) so a coordinator that lost its books can
    /// account the task when the agent re-registers.
    pub fn statuses(&self) -> Vec<TaskStatus> {
        let inner = self.lock();
        let agent_id = inner.agent_id;
        inner
            .order
            .iter()
            .filter_map(|id| inner.tasks.get(id))
            .map(|t| {
                let mut s = t.latest.clone();
                if let Some(id) = agent_id {
                    s.agent_id = id;
                }
                s.resources = Some(t.spec.resources.clone());
                s
            })
            .collect()
    }

    /// The oldest unacknowledged update, stamped with the current agent id.
    pub fn next_unacked(&self) -> Option<TaskStatus> {
        let inner = self.lock();
        let mut s = inner.unacked.front()?.clone();
        if let Some(id) = inner.agent_id {
            s.agent_id = id;
        }
        Some(s)
    }

    /// The coordinator recorded `update_id`: journal the ack, drop it from the queue, and
    /// compact the journal when it has grown well past what it must hold.
    pub fn ack(&self, update_id: UpdateId) {
        let mut inner = self.lock();
        if inner
            .unacked
            .front()
            .is_some_and(|s| s.update_id == update_id)
        {
            inner.unacked.pop_front();
        } else {
            inner.unacked.retain(|s| s.update_id != update_id);
        }
        // An ack lost in a crash only causes a resend, so it need not be synced.
        if let Err(e) = inner.journal.append(&[Record::Acked { update_id }], false) {
            tracing::warn!("cannot journal an acknowledgement: {e}");
        }
        let live = inner.tasks.len() * 3 + inner.unacked.len();
        if inner.journal.lines() > 256 + 4 * live {
            if let Err(e) = compact(&mut inner) {
                tracing::warn!("journal compaction failed: {e}");
            }
        }
    }

    /// Sets the agent id after a registration, persisting it when it changed.
    pub fn set_agent_id(&self, id: AgentId) {
        let changed = {
            let mut inner = self.lock();
            let changed = inner.agent_id != Some(id);
            inner.agent_id = Some(id);
            changed
        };
        if changed {
            if let Err(e) = write_agent_id(&self.config.work_dir, id) {
                tracing::error!("cannot persist the agent id: {e}");
            }
        }
    }

    /// Syncs the journal (shutdown).
    pub fn flush(&self) -> Result<(), JournalError> {
        self.lock().journal.flush()
    }
}

/// A fresh status of a task, carrying the resources its spec asked for.
fn new_status(
    task_id: &TaskId,
    framework_id: FrameworkId,
    agent_id: AgentId,
    resources: &Resources,
    state: TaskState,
    message: Option<String>,
    exit_code: Option<i32>,
) -> TaskStatus {
    TaskStatus {
        task_id: task_id.clone(),
        framework_id,
        agent_id,
        state,
        message,
        exit_code,
        update_id: UpdateId::new(),
        timestamp: protocol::now(),
        resources: Some(resources.clone()),
    }
}

/// Forgets the oldest terminal, fully acknowledged tasks beyond [`MAX_TERMINAL_TASKS`].
fn prune_terminal(inner: &mut Inner) {
    let terminal = inner
        .tasks
        .values()
        .filter(|t| t.latest.state.is_terminal())
        .count();
    let mut excess = terminal.saturating_sub(MAX_TERMINAL_TASKS);
    if excess == 0 {
        return;
    }
    let unacked: std::collections::HashSet<&TaskId> =
        inner.unacked.iter().map(|s| &s.task_id).collect();
    let mut forget = Vec::new();
    for id in &inner.order {
        if excess == 0 {
            break;
        }
        if inner
            .tasks
            .get(id)
            .is_some_and(|t| t.latest.state.is_terminal())
            && !unacked.contains(id)
        {
            forget.push(id.clone());
            excess -= 1;
        }
    }
    for id in &forget {
        inner.tasks.remove(id);
    }
    inner.order.retain(|id| inner.tasks.contains_key(id));
}

/// Rewrites the journal with what it must still hold: tasks not yet terminal or with updates
/// not yet acknowledged (their launch, process and updates), and every unacknowledged update.
fn compact(inner: &mut Inner) -> Result<(), JournalError> {
    let mut records = Vec::new();
    for id in &inner.order {
        let Some(t) = inner.tasks.get(id) else {
            continue;
        };
        let pending: Vec<&TaskStatus> = inner.unacked.iter().filter(|s| &s.task_id == id).collect();
        if t.latest.state.is_terminal() && pending.is_empty() {
            continue;
        }
        records.push(Record::Launch {
            framework_id: t.framework_id,
            spec: t.spec.clone(),
            sandbox: t.sandbox.clone(),
        });
        if let Some((pid, start_time)) = t.process {
            records.push(Record::Started {
                task_id: id.clone(),
                pid,
                start_time,
            });
        }
        if pending.is_empty() {
            records.push(Record::Status {
                status: t.latest.clone(),
            });
            records.push(Record::Acked {
                update_id: t.latest.update_id,
            });
        }
        for s in pending {
            records.push(Record::Status { status: s.clone() });
        }
    }
    inner.journal.rewrite(&records)
}

/// Reads the persisted agent id, if any.
pub fn read_agent_id(work_dir: &std::path::Path) -> Option<AgentId> {
    std::fs::read_to_string(work_dir.join(AGENT_ID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn write_agent_id(work_dir: &std::path::Path, id: AgentId) -> std::io::Result<()> {
    let tmp = work_dir.join(format!("{AGENT_ID_FILE}.tmp"));
    std::fs::write(&tmp, id.to_string())?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, work_dir.join(AGENT_ID_FILE))
}
