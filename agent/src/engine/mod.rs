//! The agent engine: one synchronous state machine shared by the real agent and the simulated
//! one. It does no I/O and reads no clock: inputs (a launch, a kill, a process that started or
//! ended, a timer, the coordinator's reply) come in as method calls with the time passed in
//! ([`Now`]), and what must happen comes out as [`Command`]s appended to a buffer, which a shell
//! runs (the real agent: processes, journal, HTTP; the simulated one: fake tasks, HTTP).
//!
//! Its inputs are split by concern: `task_events.rs` (launch, start, exit, kill, restore),
//! `coordinator.rs` (timers, replies, sending updates), `books.rs` (recording a change,
//! acknowledgements, retention, compaction). The core owns:
//! - the session with the coordinator ([`session`]): registration, re-registration after a
//!   `404`, heartbeats, backoff;
//! - the task table and each task's state machine ([`tasks`]): `starting` → `running` → a
//!   terminal state, kills (SIGTERM, then SIGKILL after the grace period);
//! - the queue of unacknowledged updates ([`updates`]): batching, retries, refusals;
//! - the GPU books ([`gpus`]): which task holds which device, rebuilt from the journal;
//! - fencing ([`fence`]): killing on its own the tasks the coordinator will have declared
//!   lost while it could not be reached.
//!
//! Every state change is recorded by one function, which journals it (when journaling is on)
//! before queueing it, so the journal order is the send order.
//!
//! Updates are only sent by [`Engine::flush`] (and by [`Engine::timer`] and [`Engine::reply`], which
//! flush themselves): a shell feeds an event (a launch and the starts it causes) and then
//! flushes once, so updates that happen together go in one request.

pub mod command;
pub mod fence;
pub mod gpus;
pub mod key;
pub mod session;
pub mod tasks;
pub mod updates;

mod books;
mod coordinator;
mod task_events;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use protocol::messages::AgentRegistered;
use protocol::{
    AgentId, FrameworkId, TaskId, TaskSpec, TaskState, TaskStatus, Timestamp, UpdateId,
};

pub use command::{
    Command, Durability, Exit, Failure, KillOrder, Process, Reply, Request, Signal, Timer,
};
pub use key::TaskKey;
pub use session::Jitter;
pub use tasks::{code_outcome, LIMIT_FAILED};

use crate::config::Timing;
use crate::journal::{Record, Replay};
use session::{heartbeat_interval, Phase, Session};
use tasks::{outcome, Stage, Table};
use updates::Updates;

/// The most updates one request carries (`POST /api/v1/agents/{id}/statuses`).
pub const MAX_STATUS_BATCH: usize = 256;

/// Terminal tasks a real agent keeps (for `GET /tasks` and duplicate detection) beyond this many
/// are forgotten, oldest first.
pub const MAX_TERMINAL_TASKS: usize = 1000;

/// The time, passed in: the monotonic instant (for timers) and the wall clock (for statuses).
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// Monotonic time.
    pub at: Instant,
    /// Wall-clock time, stamped on statuses.
    pub wall: Timestamp,
}

impl Now {
    /// Reads both clocks (shells only; the engine never calls it).
    pub fn read(at: Instant) -> Self {
        Self {
            at,
            wall: protocol::now(),
        }
    }
}

/// Whether state changes are journaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Journaling {
    /// Journal every change, acknowledgement and process start; persist the agent id.
    On,
    /// Keep everything in memory only (simulated agents).
    Off,
}

/// When a terminal task is forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Keep this many terminal tasks (oldest forgotten first, once acknowledged).
    KeepTerminal(usize),
    /// Forget a task as soon as its terminal update is acknowledged.
    ForgetWhenAcked,
}

/// Where update ids come from.
#[derive(Debug, Clone)]
pub enum UpdateIds {
    /// Random UUIDs.
    Random,
    /// 1, 2, 3, ... after this value (tests assert exact updates).
    Sequential(u128),
}

impl UpdateIds {
    fn next(&mut self) -> UpdateId {
        match self {
            UpdateIds::Random => UpdateId::new(),
            UpdateIds::Sequential(n) => {
                *n += 1;
                UpdateId(uuid::Uuid::from_u128(*n))
            }
        }
    }
}

/// How an engine behaves.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Intervals and limits.
    pub timing: Timing,
    /// Journal or not.
    pub journaling: Journaling,
    /// When terminal tasks are forgotten.
    pub retention: Retention,
    /// The most updates per request (at least 1).
    pub max_batch: usize,
    /// Jitter of retry delays.
    pub jitter: Jitter,
    /// Source of update ids.
    pub update_ids: UpdateIds,
    /// The agent's GPUs (UUIDs, in index order); empty without GPUs.
    pub gpus: Vec<String>,
}

impl EngineConfig {
    /// A real agent's core: journaled, keeps [`MAX_TERMINAL_TASKS`] terminal tasks.
    pub fn real(timing: Timing) -> Self {
        Self {
            timing,
            journaling: Journaling::On,
            retention: Retention::KeepTerminal(MAX_TERMINAL_TASKS),
            max_batch: MAX_STATUS_BATCH,
            jitter: Jitter::seeded(rand::random()),
            update_ids: UpdateIds::Random,
            gpus: Vec::new(),
        }
    }

    /// The same configuration with these GPUs (UUIDs in index order).
    pub fn with_gpus(mut self, gpus: Vec<String>) -> Self {
        self.gpus = gpus;
        self
    }

    /// A simulated agent's core: in memory, forgets tasks once their end is acknowledged.
    pub fn simulated(timing: Timing, seed: u64) -> Self {
        Self {
            timing,
            journaling: Journaling::Off,
            retention: Retention::ForgetWhenAcked,
            max_batch: MAX_STATUS_BATCH,
            jitter: Jitter::seeded(seed),
            update_ids: UpdateIds::Random,
            gpus: Vec::new(),
        }
    }
}

/// A launch the engine refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A task id the agent already knows in the framework, or given twice.
    #[error("task {0} of this framework already exists on this agent")]
    Duplicate(TaskId),
    /// The agent is shutting down.
    #[error("the agent is shutting down; launch elsewhere")]
    ShuttingDown,
}

/// A task a request names that the agent cannot single out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownTask {
    /// No task of that id (in the framework, when one is named).
    #[error("no task {0} on this agent")]
    Unknown(TaskId),
    /// No framework named, and several frameworks have a task of that id here.
    #[error("several frameworks have a task {0} on this agent; name its framework_id")]
    Ambiguous(TaskId),
}

/// A task to launch: what to run and, for a real agent, its sandbox.
#[derive(Debug, Clone)]
pub struct Launch {
    /// What to run.
    pub spec: TaskSpec,
    /// Its sandbox directory (a real agent's tasks have one).
    pub sandbox: Option<PathBuf>,
}

/// What the journal of an earlier run left.
#[derive(Debug)]
pub struct Restored {
    /// The id the coordinator gave, if any.
    pub agent_id: Option<AgentId>,
    /// The tasks and unacknowledged updates.
    pub replay: Replay,
    /// Lines in the journal (to decide when to compact it).
    pub journal_lines: usize,
}

/// What a replayed task's process turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Still running: re-adopt it.
    Alive,
    /// Ended while the agent was down, with the exit code the wrapper left, if any.
    Ended(Option<i32>),
}

/// Whether launches are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accepting {
    Yes,
    No,
}

/// One agent's state machine. See the module docs.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    session: Session,
    tasks: Table,
    updates: Updates,
    gpus: gpus::GpuBooks,
    accepting: Accepting,
    /// Lines in the journal (to decide when to compact it).
    journal_lines: usize,
    /// Contact with the coordinator, for fencing (`fence.rs`).
    contact: fence::Contact,
}

impl Engine {
    /// A fresh core, not registered yet (`agent_id`: the id from an earlier run, if any).
    pub fn new(config: EngineConfig, agent_id: Option<AgentId>) -> Self {
        Self {
            gpus: gpus::GpuBooks::new(config.gpus.clone()),
            config,
            session: Session::new(agent_id),
            tasks: Table::default(),
            updates: Updates::default(),
            accepting: Accepting::Yes,
            journal_lines: 0,
            contact: Default::default(),
        }
    }

    /// The agent id, once registered (or from an earlier run).
    pub fn agent_id(&self) -> Option<AgentId> {
        self.session.agent_id
    }

    /// True when the agent knows the task.
    pub fn has_task(&self, task: &TaskKey) -> bool {
        self.tasks.contains(task)
    }

    /// The task a request names: by framework and id, or, without a framework, by id when only
    /// one framework has a task of that id here.
    pub fn find(
        &self,
        framework_id: Option<FrameworkId>,
        task_id: &TaskId,
    ) -> Result<TaskKey, UnknownTask> {
        if let Some(fw) = framework_id {
            let key = (fw, task_id.clone());
            return match self.tasks.contains(&key) {
                true => Ok(key),
                false => Err(UnknownTask::Unknown(task_id.clone())),
            };
        }
        let mut keys = self.tasks.keys_of(task_id);
        match (keys.next(), keys.next()) {
            (Some(key), None) => Ok(key.clone()),
            (Some(_), Some(_)) => Err(UnknownTask::Ambiguous(task_id.clone())),
            (None, _) => Err(UnknownTask::Unknown(task_id.clone())),
        }
    }

    /// The task's sandbox.
    pub fn sandbox(&self, task: &TaskKey) -> Option<&Path> {
        self.tasks.get(task)?.sandbox.as_deref()
    }

    /// The spec of a task the agent knows.
    pub fn spec(&self, task: &TaskKey) -> Option<&TaskSpec> {
        Some(&self.tasks.get(task)?.spec)
    }

    /// The sandboxes of tasks that have not ended.
    pub fn live_sandboxes(&self) -> HashSet<PathBuf> {
        self.tasks
            .in_order()
            .filter(|t| !t.latest.state.is_terminal())
            .filter_map(|t| t.sandbox.clone())
            .collect()
    }

    /// The tasks that have not ended: each one's OS process (once started) and sandbox.
    pub fn live_tasks(&self) -> Vec<(Option<Process>, Option<PathBuf>)> {
        self.tasks
            .in_order()
            .filter(|t| !t.latest.state.is_terminal())
            .map(|t| (t.process(), t.sandbox.clone()))
            .collect()
    }

    /// Whether the agent is registered with a coordinator (heartbeating).
    pub fn is_registered(&self) -> bool {
        self.session.phase == Phase::Registered
    }

    /// How many tasks' latest state is `running`.
    pub fn running(&self) -> usize {
        self.tasks
            .in_order()
            .filter(|t| t.latest.state == protocol::TaskState::Running)
            .count()
    }

    /// The latest status of every task, in launch order, stamped with the agent id and carrying
    /// the task's resources (a status journaled by an older agent may lack them), so that a
    /// coordinator that lost its books can account the task when the agent registers again.
    pub fn statuses(&self) -> Vec<TaskStatus> {
        self.tasks
            .in_order()
            .map(|t| {
                let mut s = self.stamped(&t.latest);
                s.resources = Some(t.spec.resources.clone());
                s
            })
            .collect()
    }

    /// True when the agent has GPUs (its tasks' environments then name theirs, or none).
    pub fn has_gpus(&self) -> bool {
        self.gpus.has_devices()
    }

    /// The GPUs (UUIDs) a task holds.
    pub fn gpu_devices(&self, task: &TaskKey) -> Vec<String> {
        self.gpus.held_by(task)
    }

    /// The tasks that hold GPUs and run, with their devices (what a sampler reads).
    pub fn gpu_tasks(&self) -> Vec<(TaskKey, Vec<String>)> {
        self.tasks
            .in_order()
            .filter(|t| t.latest.state == TaskState::Running)
            .map(|t| (t.key(), self.gpus.held_by(&t.key())))
            .filter(|(_, d)| !d.is_empty())
            .collect()
    }

    /// One GPU sample of a running task: memory used on its devices together (bytes) and their
    /// mean utilisation (percent); its terminal status carries the peak and the mean.
    pub fn gpu_sample(&mut self, task: &TaskKey, memory_bytes: u64, utilization_percent: f64) {
        if let Some(t) = self.tasks.get_mut(task) {
            if !t.latest.state.is_terminal() {
                t.gpu_samples.add(memory_bytes, utilization_percent);
            }
        }
    }

    /// Updates not yet acknowledged.
    pub fn unacknowledged(&self) -> usize {
        self.updates.queue.len()
    }
}
