//! The agent core: one synchronous state machine shared by the real agent and the simulated
//! one. It does no I/O and reads no clock: inputs (a launch, a kill, a process that started or
//! ended, a timer, the coordinator's reply) come in as method calls with the time passed in
//! ([`Now`]), and what must happen comes out as [`Command`]s appended to a buffer, which a shell
//! runs (the real agent: processes, journal, HTTP; the simulated one: fake tasks, HTTP).
//!
//! The core owns:
//! - the session with the coordinator ([`session`]): registration, re-registration after a
//!   `404`, heartbeats, backoff;
//! - the task table and each task's state machine ([`tasks`]): `starting` → `running` → a
//!   terminal state, kills (SIGTERM, then SIGKILL after the grace period);
//! - the queue of unacknowledged updates ([`updates`]): batching, retries, refusals.
//!
//! Every state change is recorded by one function, which journals it (when journaling is on)
//! before queueing it, so the journal order is the send order.
//!
//! Updates are only sent by [`Core::flush`] (and by [`Core::timer`] and [`Core::reply`], which
//! flush themselves): a shell feeds an event (a launch and the starts it causes) and then
//! flushes once, so updates that happen together go in one request.

pub mod command;
pub mod session;
pub mod tasks;
pub mod updates;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use protocol::messages::AgentRegistered;
use protocol::{
    AgentId, FrameworkId, TaskId, TaskSpec, TaskState, TaskStatus, Timestamp, UpdateId,
};

pub use command::{Command, Durability, Exit, Failure, Process, Reply, Request, Signal, Timer};
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
    /// Reads both clocks (shells only; the core never calls it).
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

/// How a core behaves.
#[derive(Debug, Clone)]
pub struct CoreConfig {
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
}

impl CoreConfig {
    /// A real agent's core: journaled, keeps [`MAX_TERMINAL_TASKS`] terminal tasks.
    pub fn real(timing: Timing) -> Self {
        Self {
            timing,
            journaling: Journaling::On,
            retention: Retention::KeepTerminal(MAX_TERMINAL_TASKS),
            max_batch: MAX_STATUS_BATCH,
            jitter: Jitter::Random(rand::random()),
            update_ids: UpdateIds::Random,
        }
    }

    /// A simulated agent's core: in memory, forgets tasks once their end is acknowledged.
    pub fn simulated(timing: Timing, seed: u64) -> Self {
        Self {
            timing,
            journaling: Journaling::Off,
            retention: Retention::ForgetWhenAcked,
            max_batch: MAX_STATUS_BATCH,
            jitter: Jitter::Random(seed),
            update_ids: UpdateIds::Random,
        }
    }
}

/// A launch the core refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A task id the agent already knows, or given twice.
    #[error("task {0} already exists on this agent")]
    Duplicate(TaskId),
    /// The agent is shutting down.
    #[error("the agent is shutting down; launch elsewhere")]
    ShuttingDown,
}

/// A task the agent does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no task {0} on this agent")]
pub struct UnknownTask(pub TaskId);

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
pub struct Core {
    config: CoreConfig,
    session: Session,
    tasks: Table,
    updates: Updates,
    accepting: Accepting,
    /// Lines in the journal (to decide when to compact it).
    journal_lines: usize,
}

impl Core {
    /// A fresh core, not registered yet (`agent_id`: the id from an earlier run, if any).
    pub fn new(config: CoreConfig, agent_id: Option<AgentId>) -> Self {
        Self {
            config,
            session: Session::new(agent_id),
            tasks: Table::default(),
            updates: Updates::default(),
            accepting: Accepting::Yes,
            journal_lines: 0,
        }
    }

    /// A core rebuilt from a replayed journal. Each task not yet
    /// terminal is looked at with `probe` (the shell's view of its process): a live process is
    /// re-adopted ([`Command::Watch`]); one that ended is reported from its exit code (or `lost`
    /// without one) after its group is killed; a task that never started is `failed`.
    pub fn restore(
        config: CoreConfig,
        restored: Restored,
        mut probe: impl FnMut(Process, Option<&Path>) -> Probe,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Self {
        let Restored {
            agent_id,
            replay,
            journal_lines,
        } = restored;
        let mut core = Self::new(config, agent_id);
        core.journal_lines = journal_lines;
        let nil = core.session.stamp();
        for t in replay.tasks {
            let latest = t.latest.unwrap_or_else(|| TaskStatus {
                task_id: t.spec.task_id.clone(),
                framework_id: t.framework_id,
                agent_id: nil,
                state: TaskState::Starting,
                message: None,
                exit_code: None,
                update_id: core.config.update_ids.next(),
                timestamp: now.wall,
                resources: Some(t.spec.resources.clone()),
            });
            let stage = match t.process {
                Some((pid, start_time)) => Stage::Started(Some(Process { pid, start_time })),
                None => Stage::Accepted,
            };
            core.tasks.insert(t.spec, Some(t.sandbox), stage, latest);
        }
        core.updates.queue = replay.unacked;

        let open: Vec<(TaskId, Option<Process>, Option<PathBuf>)> = core
            .tasks
            .in_order()
            .filter(|t| !t.latest.state.is_terminal())
            .map(|t| (t.spec.task_id.clone(), t.process(), t.sandbox.clone()))
            .collect();
        for (id, process, sandbox) in open {
            let Some(process) = process else {
                let message = "the agent restarted before the task's process started";
                core.record(
                    &id,
                    (TaskState::Failed, Some(message.into()), None),
                    now,
                    out,
                );
                continue;
            };
            match probe(process, sandbox.as_deref()) {
                Probe::Alive => out.push(Command::Watch(id, process)),
                Probe::Ended(code) => {
                    out.push(Command::Signal {
                        task_id: id.clone(),
                        process: Some(process),
                        signal: Signal::Kill,
                    });
                    let end = match code {
                        Some(code) => code_outcome(code),
                        None => (
                            TaskState::Lost,
                            Some("the process ended while the agent was down; its exit status is unknown".into()),
                            None,
                        ),
                    };
                    core.record(&id, end, now, out);
                }
            }
        }
        core
    }

    // ---- queries ---------------------------------------------------------------------------

    /// The agent id, once registered (or from an earlier run).
    pub fn agent_id(&self) -> Option<AgentId> {
        self.session.agent_id
    }

    /// True when the agent knows the task.
    pub fn has_task(&self, task_id: &TaskId) -> bool {
        self.tasks.contains(task_id)
    }

    /// The task's sandbox.
    pub fn sandbox(&self, task_id: &TaskId) -> Option<&Path> {
        self.tasks.get(task_id)?.sandbox.as_deref()
    }

    /// The sandboxes of tasks that have not ended.
    pub fn live_sandboxes(&self) -> HashSet<PathBuf> {
        self.tasks
            .in_order()
            .filter(|t| !t.latest.state.is_terminal())
            .filter_map(|t| t.sandbox.clone())
            .collect()
    }

    /// True while the task has not ended.
    pub fn is_live(&self, task_id: &TaskId) -> bool {
        self.tasks
            .get(task_id)
            .is_some_and(|t| !t.latest.state.is_terminal())
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

    /// Updates not yet acknowledged.
    pub fn unacknowledged(&self) -> usize {
        self.updates.queue.len()
    }

    // ---- inputs: tasks ---------------------------------------------------------------------

    /// Refuses new launches from now on (shutdown).
    pub fn stop_accepting(&mut self) {
        self.accepting = Accepting::No;
    }

    /// Checks a launch without changing anything: shutting down, or a duplicate task id.
    pub fn check_launch<'a>(
        &self,
        specs: impl IntoIterator<Item = &'a TaskSpec>,
    ) -> Result<(), LaunchError> {
        if self.accepting == Accepting::No {
            return Err(LaunchError::ShuttingDown);
        }
        let mut seen = HashSet::new();
        for s in specs {
            if self.tasks.contains(&s.task_id) || !seen.insert(&s.task_id) {
                return Err(LaunchError::Duplicate(s.task_id.clone()));
            }
        }
        Ok(())
    }

    /// Accepts tasks (all or none): each is `starting`, journaled, queued, and to be spawned.
    pub fn launch(
        &mut self,
        framework_id: FrameworkId,
        launches: Vec<Launch>,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Result<(), LaunchError> {
        self.check_launch(launches.iter().map(|l| &l.spec))?;
        let agent_id = self.session.stamp();
        let mut records = Vec::new();
        let mut accepted = Vec::with_capacity(launches.len());
        for Launch { spec, sandbox } in launches {
            let status = TaskStatus {
                task_id: spec.task_id.clone(),
                framework_id,
                agent_id,
                state: TaskState::Starting,
                message: None,
                exit_code: None,
                update_id: self.config.update_ids.next(),
                timestamp: now.wall,
                resources: Some(spec.resources.clone()),
            };
            if self.config.journaling == Journaling::On {
                if let Some(sandbox) = &sandbox {
                    records.push(Record::Launch {
                        framework_id,
                        spec: spec.clone(),
                        sandbox: sandbox.clone(),
                    });
                }
                records.push(Record::Status {
                    status: status.clone(),
                });
            }
            accepted.push((spec, sandbox, status));
        }
        self.journal(records, Durability::Synced, out);
        for (spec, sandbox, status) in accepted {
            let id = spec.task_id.clone();
            self.updates.queue.push_back(status.clone());
            self.tasks.insert(spec, sandbox, Stage::Accepted, status);
            out.push(Command::Spawn(id));
        }
        self.prune();
        Ok(())
    }

    /// Undoes an accepted launch whose journal write failed: forgets the tasks and their
    /// updates, as if the launch had been refused.
    pub fn forget_launch(&mut self, task_ids: &[TaskId]) {
        for id in task_ids {
            self.tasks.remove(id);
        }
        let ids: HashSet<&TaskId> = task_ids.iter().collect();
        self.updates.queue.retain(|s| !ids.contains(&s.task_id));
    }

    /// The shell is about to start the task: what to run and where. `None` when there is
    /// nothing to start: unknown, ended, or killed before it started (then recorded `killed`).
    pub fn take_launch(
        &mut self,
        task_id: &TaskId,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Option<(TaskSpec, Option<PathBuf>)> {
        let t = self.tasks.get(task_id)?;
        if t.latest.state.is_terminal() || t.stage != Stage::Accepted {
            return None;
        }
        if t.kill_requested {
            let end = (
                TaskState::Killed,
                Some("killed before it started".into()),
                None,
            );
            self.record(task_id, end, now, out);
            return None;
        }
        Some((t.spec.clone(), t.sandbox.clone()))
    }

    /// The task started (`running`), with its OS process when it has one. A kill that arrived
    /// while it was starting is carried out now.
    pub fn started(
        &mut self,
        task_id: &TaskId,
        process: Option<Process>,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        let Some(t) = self.tasks.get_mut(task_id) else {
            return;
        };
        t.stage = Stage::Started(process);
        let kill = t.kill_requested;
        if let (Journaling::On, Some(p)) = (self.config.journaling, process) {
            let record = Record::Started {
                task_id: task_id.clone(),
                pid: p.pid,
                start_time: p.start_time,
            };
            self.journal(vec![record], Durability::Buffered, out);
        }
        self.record(task_id, (TaskState::Running, None, None), now, out);
        if kill {
            self.signal_kill(task_id, process, now, out);
        }
    }

    /// The task's process ended (or could not run).
    pub fn exited(&mut self, task_id: &TaskId, exit: Exit, now: Now, out: &mut Vec<Command>) {
        let Some(t) = self.tasks.get(task_id) else {
            return;
        };
        let end = outcome(exit, t.kill_requested);
        self.record(task_id, end, now, out);
    }

    /// A kill request: SIGTERM now and SIGKILL after the grace period for a running task; a
    /// task not started yet is killed before it starts; an ended one is left alone.
    pub fn kill(
        &mut self,
        task_id: &TaskId,
        now: Now,
        out: &mut Vec<Command>,
    ) -> Result<(), UnknownTask> {
        let t = self
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| UnknownTask(task_id.clone()))?;
        if t.latest.state.is_terminal() {
            return Ok(());
        }
        t.kill_requested = true;
        if let Stage::Started(process) = t.stage {
            self.signal_kill(task_id, process, now, out);
        }
        Ok(())
    }

    fn signal_kill(
        &mut self,
        task_id: &TaskId,
        process: Option<Process>,
        now: Now,
        out: &mut Vec<Command>,
    ) {
        out.push(Command::Signal {
            task_id: task_id.clone(),
            process,
            signal: Signal::Terminate,
        });
        if process.is_some() {
            out.push(Command::SetTimer {
                at: now.at + self.config.timing.kill_grace,
                timer: Timer::KillGrace(task_id.clone()),
            });
        }
    }

    // ---- inputs: the coordinator -------------------------------------------------------------

    /// Starts the session: registers now.
    pub fn start(&mut self, now: Now, out: &mut Vec<Command>) {
        self.timer(Timer::Register, now, out);
    }

    /// A timer the core set fired.
    pub fn timer(&mut self, timer: Timer, now: Now, out: &mut Vec<Command>) {
        match timer {
            Timer::Register => {
                if self.session.phase == Phase::Waiting {
                    self.session.phase = Phase::Registering;
                    out.push(Command::Send(Request::Register {
                        agent_id: self.session.agent_id,
                        tasks: self.statuses(),
                    }));
                }
            }
            Timer::Heartbeat(epoch) => {
                if let (Phase::Registered, Some(agent_id)) =
                    (self.session.phase, self.session.agent_id)
                {
                    if epoch == self.session.epoch {
                        out.push(Command::Send(Request::Heartbeat { agent_id, epoch }));
                    }
                }
            }
            Timer::RetryStatuses => self.updates.retry_at = None,
            Timer::KillGrace(task_id) => {
                if let Some(t) = self.tasks.get(&task_id) {
                    if !t.latest.state.is_terminal() && t.process().is_some() {
                        tracing::info!(%task_id, "grace period over; sending SIGKILL");
                        out.push(Command::Signal {
                            task_id: task_id.clone(),
                            process: t.process(),
                            signal: Signal::Kill,
                        });
                    }
                }
            }
        }
        self.flush(now, out);
    }

    /// The coordinator answered a request.
    pub fn reply(&mut self, reply: Reply, now: Now, out: &mut Vec<Command>) {
        match reply {
            Reply::Registered(Ok(registered)) => self.registered(registered, now, out),
            Reply::Registered(Err(_)) => {
                let t = &self.config.timing;
                let delay =
                    self.config
                        .jitter
                        .backoff(self.session.attempts, t.backoff_min, t.backoff_max);
                self.session.attempts = self.session.attempts.saturating_add(1);
                self.session.phase = Phase::Waiting;
                out.push(Command::SetTimer {
                    at: now.at + delay,
                    timer: Timer::Register,
                });
            }
            Reply::Heartbeat { epoch, result } => {
                if epoch != self.session.epoch || self.session.phase != Phase::Registered {
                    return;
                }
                match result {
                    Err(Failure::NotFound(_)) => self.reregister(now, out),
                    // Keep the beat: when the coordinator is back it either knows the agent
                    // (200) or says 404 and the agent registers again.
                    _ => out.push(Command::SetTimer {
                        at: now.at + self.session.interval,
                        timer: Timer::Heartbeat(epoch),
                    }),
                }
            }
            Reply::Statuses(result) => self.statuses_answered(result, now, out),
        }
        self.flush(now, out);
    }

    fn registered(&mut self, registered: AgentRegistered, now: Now, out: &mut Vec<Command>) {
        let id = registered.agent_id;
        if self.session.agent_id != Some(id) && self.config.journaling == Journaling::On {
            out.push(Command::PersistAgentId(id));
        }
        let s = &mut self.session;
        s.agent_id = Some(id);
        s.phase = Phase::Registered;
        s.epoch = s.epoch.wrapping_add(1);
        s.attempts = 0;
        s.interval = heartbeat_interval(
            registered.heartbeat_interval_s,
            self.config.timing.min_heartbeat,
        );
        out.push(Command::SetTimer {
            at: now.at + s.interval,
            timer: Timer::Heartbeat(s.epoch),
        });
    }

    fn statuses_answered(&mut self, result: Result<(), Failure>, now: Now, out: &mut Vec<Command>) {
        match result {
            Ok(()) => {
                self.updates.attempts = 0;
                self.updates.not_found = None;
                let acked = self.updates.finish();
                self.acknowledged(acked, out);
            }
            Err(Failure::NotFound(body)) => {
                if self.updates.count_not_found() {
                    // The same update keeps getting 404 right after registering again: the
                    // coordinator rejects the update itself.
                    self.refused(404, &body, out);
                } else {
                    self.updates.in_flight = 0;
                    self.reregister(now, out);
                }
            }
            Err(Failure::Status { code, body }) if (400..500).contains(&code) => {
                self.refused(code, &body, out);
            }
            Err(_) => {
                let t = &self.config.timing;
                let u = &mut self.updates;
                let delay = self
                    .config
                    .jitter
                    .backoff(u.attempts, t.backoff_min, t.backoff_max);
                u.attempts = u.attempts.saturating_add(1);
                u.in_flight = 0;
                u.retry_at = Some(now.at + delay);
                out.push(Command::SetTimer {
                    at: now.at + delay,
                    timer: Timer::RetryStatuses,
                });
            }
        }
    }

    /// The coordinator refused the request in flight: a batch is split to find the refused
    /// update; a single update is dropped, since it would block every later one.
    fn refused(&mut self, code: u16, body: &str, out: &mut Vec<Command>) {
        let n = self.updates.in_flight;
        if n > 1 {
            self.updates.one_at_a_time = n;
            self.updates.in_flight = 0;
            return;
        }
        self.updates.not_found = None;
        let dropped = self.updates.finish();
        for s in &dropped {
            tracing::warn!(task_id = %s.task_id, code, "coordinator refused an update; dropping it: {body}");
        }
        self.acknowledged(dropped, out);
    }

    /// The coordinator forgot the agent: register again now (once, however many answers said so).
    fn reregister(&mut self, now: Now, out: &mut Vec<Command>) {
        if self.session.phase == Phase::Registered {
            tracing::info!("coordinator does not know this agent; registering again");
            self.session.phase = Phase::Waiting;
            out.push(Command::SetTimer {
                at: now.at,
                timer: Timer::Register,
            });
        }
    }

    /// Sends the oldest unacknowledged updates, unless a request is in flight, a backoff runs,
    /// or the agent is not registered.
    pub fn flush(&mut self, now: Now, out: &mut Vec<Command>) {
        let (Phase::Registered, Some(agent_id)) = (self.session.phase, self.session.agent_id)
        else {
            return;
        };
        let Some(n) = self
            .updates
            .next_batch(now.at, self.config.max_batch.max(1))
        else {
            return;
        };
        let statuses = self
            .updates
            .queue
            .iter()
            .take(n)
            .map(|s| {
                let mut s = s.clone();
                s.agent_id = agent_id;
                s
            })
            .collect();
        self.updates.start(n);
        out.push(Command::Send(Request::Statuses { agent_id, statuses }));
    }

    // ---- the books ---------------------------------------------------------------------------

    /// Records a state change of a task that has not ended: journal, then queue. A task that
    /// ended does not change again.
    fn record(
        &mut self,
        task_id: &TaskId,
        (state, message, exit_code): (TaskState, Option<String>, Option<i32>),
        now: Now,
        out: &mut Vec<Command>,
    ) {
        let agent_id = self.session.stamp();
        let Some(t) = self.tasks.get(task_id) else {
            return;
        };
        if t.latest.state.is_terminal() {
            return;
        }
        let status = TaskStatus {
            task_id: task_id.clone(),
            framework_id: t.latest.framework_id,
            agent_id,
            state,
            message,
            exit_code,
            update_id: self.config.update_ids.next(),
            timestamp: now.wall,
            resources: Some(t.spec.resources.clone()),
        };
        if self.config.journaling == Journaling::On {
            let record = Record::Status {
                status: status.clone(),
            };
            self.journal(vec![record], Durability::Synced, out);
            tracing::info!(%task_id, state = %state, "task state changed");
        }
        self.updates.queue.push_back(status.clone());
        self.tasks.set_latest(task_id, status);
        self.prune();
    }

    fn journal(&mut self, records: Vec<Record>, durability: Durability, out: &mut Vec<Command>) {
        if self.config.journaling == Journaling::Off || records.is_empty() {
            return;
        }
        self.journal_lines += records.len();
        out.push(Command::Journal {
            records,
            durability,
        });
    }

    /// The coordinator recorded (or refused for good) these updates: journal the acks, forget
    /// tasks that are done with, compact the journal when it has grown well past what it holds.
    fn acknowledged(&mut self, acked: Vec<TaskStatus>, out: &mut Vec<Command>) {
        if self.config.retention == Retention::ForgetWhenAcked {
            for s in &acked {
                if s.state.is_terminal() && !self.updates.has_task(&s.task_id) {
                    self.tasks.remove(&s.task_id);
                }
            }
        }
        if self.config.journaling == Journaling::Off {
            return;
        }
        let records = acked
            .iter()
            .map(|s| Record::Acked {
                update_id: s.update_id,
            })
            .collect();
        self.journal(records, Durability::Buffered, out);
        self.prune();
        let live = self.tasks.len() * 3 + self.updates.queue.len();
        if self.journal_lines > 256 + 4 * live {
            let records = self.compacted();
            self.journal_lines = records.len();
            out.push(Command::RewriteJournal { records });
        }
    }

    /// Forgets the oldest terminal, fully acknowledged tasks beyond the retention.
    fn prune(&mut self) {
        let Retention::KeepTerminal(keep) = self.config.retention else {
            return;
        };
        let mut excess = self.tasks.terminal().saturating_sub(keep);
        if excess == 0 {
            return;
        }
        let unacked: HashSet<&TaskId> = self.updates.queue.iter().map(|s| &s.task_id).collect();
        let mut forget = Vec::new();
        for t in self.tasks.in_order() {
            if excess == 0 {
                break;
            }
            if t.latest.state.is_terminal() && !unacked.contains(&t.spec.task_id) {
                forget.push(t.spec.task_id.clone());
                excess -= 1;
            }
        }
        for id in &forget {
            self.tasks.remove(id);
        }
    }

    /// What the journal must still hold: tasks not yet terminal or with updates not yet
    /// acknowledged (their launch, process and updates), and every unacknowledged update.
    fn compacted(&self) -> Vec<Record> {
        let mut records = Vec::new();
        for t in self.tasks.in_order() {
            let id = &t.spec.task_id;
            let pending: Vec<&TaskStatus> = self
                .updates
                .queue
                .iter()
                .filter(|s| &s.task_id == id)
                .collect();
            if t.latest.state.is_terminal() && pending.is_empty() {
                continue;
            }
            let Some(sandbox) = &t.sandbox else { continue };
            records.push(Record::Launch {
                framework_id: t.latest.framework_id,
                spec: t.spec.clone(),
                sandbox: sandbox.clone(),
            });
            if let Some(p) = t.process() {
                records.push(Record::Started {
                    task_id: id.clone(),
                    pid: p.pid,
                    start_time: p.start_time,
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
        records
    }

    /// A status carrying the agent's current id.
    fn stamped(&self, status: &TaskStatus) -> TaskStatus {
        let mut s = status.clone();
        if let Some(id) = self.session.agent_id {
            s.agent_id = id;
        }
        s
    }
}
