//! What goes into the engine and what comes out: the [`Command`]s a shell runs, the [`Request`]s it
//! sends and the [`Reply`]s it feeds back, the [`Timer`]s it sets; how a task's process
//! ended ([`Exit`]) is `crate::process`'s, re-exported.

use std::time::Instant;

use protocol::messages::AgentRegistered;
use protocol::{AgentId, TaskStatus};

use super::TaskKey;

pub use crate::journal::Durability;
use crate::journal::Record;
pub use crate::process::{Exit, Process};

/// Something the shell must do. The core emits them in the order they must happen: a journal
/// write comes before the request that sends what it recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Append these records to the journal.
    Journal {
        /// The records, in order.
        records: Vec<Record>,
        /// Whether the write must be on disk before the shell goes on.
        durability: Durability,
    },
    /// Replace the journal's contents with these records (compaction).
    RewriteJournal {
        /// Everything the journal must still hold.
        records: Vec<Record>,
    },
    /// Keep the agent id the coordinator gave, for the next start.
    PersistAgentId(AgentId),
    /// Send a request to the coordinator and feed its answer back with [`Engine::reply`].
    ///
    /// [`Engine::reply`]: super::Engine::reply
    Send(Request),
    /// Start the task (it was just accepted); [`Engine::take_launch`] says what to run.
    ///
    /// [`Engine::take_launch`]: super::Engine::take_launch
    Spawn(TaskKey),
    /// Watch a process that outlived an agent restart until it ends.
    Watch(TaskKey, Process),
    /// Signal a task's process (group).
    Signal {
        /// The task.
        task: TaskKey,
        /// Its process, when it has a real one.
        process: Option<Process>,
        /// Which signal.
        signal: Signal,
    },
    /// Call [`Engine::timer`] with `timer` at `at` (or as soon as possible after).
    ///
    /// [`Engine::timer`]: super::Engine::timer
    SetTimer {
        /// When.
        at: Instant,
        /// What fires.
        timer: Timer,
    },
}

/// A request to the coordinator.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `POST /api/v1/agents`: register (again). The shell adds the agent's identity (hostname,
    /// endpoint, resources, attributes).
    Register {
        /// The id the agent had, if any.
        agent_id: Option<AgentId>,
        /// The latest status of every task the agent knows.
        tasks: Vec<TaskStatus>,
    },
    /// `POST /api/v1/agents/{id}/heartbeat`.
    Heartbeat {
        /// The agent.
        agent_id: AgentId,
        /// The registration it belongs to; echoed in the reply.
        epoch: u32,
    },
    /// `POST /api/v1/agents/{id}/statuses`: the oldest unacknowledged updates, in order.
    Statuses {
        /// The agent.
        agent_id: AgentId,
        /// The updates, stamped with `agent_id`.
        statuses: Vec<TaskStatus>,
    },
}

/// The coordinator's answer to a [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// To [`Request::Register`].
    Registered(Result<AgentRegistered, Failure>),
    /// To [`Request::Heartbeat`] of registration `epoch`.
    Heartbeat {
        /// The epoch the request carried.
        epoch: u32,
        /// The outcome.
        result: Result<(), Failure>,
    },
    /// To [`Request::Statuses`].
    Statuses(Result<(), Failure>),
}

/// Why a request did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// `404`: the coordinator does not know the agent (or, repeatedly, the update).
    NotFound(String),
    /// Any other non-2xx status.
    Status {
        /// The HTTP status.
        code: u16,
        /// The body.
        body: String,
    },
    /// No answer (connection refused, timeout, ...).
    Unreachable(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotFound(body) => write!(f, "coordinator answered 404: {body}"),
            Failure::Status { code, body } => write!(f, "coordinator answered {code}: {body}"),
            Failure::Unreachable(e) => write!(f, "coordinator unreachable: {e}"),
        }
    }
}

/// Something the engine asked to be woken for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// Register (first time, after a failure, or after the coordinator forgot the agent).
    Register,
    /// Heartbeat for registration `epoch` (dropped when the agent registered again since).
    Heartbeat(u32),
    /// Send updates again after a failed attempt.
    RetryStatuses,
    /// The linger of the first queued update is over: send what is queued.
    StatusLinger,
    /// The kill grace period of a task is over: SIGKILL if it still runs.
    KillGrace(TaskKey),
    /// A task may have to be fenced: the coordinator has not answered for long (see
    /// [`fence`](super::fence)).
    Fence,
}

/// A signal the engine asks for (the shell maps it to the OS's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask the task to stop (SIGTERM).
    Terminate,
    /// Stop it now (SIGKILL).
    Kill,
}

/// What a kill body asks: which framework's task, and whether it is a fence (reason
/// `agent_partitioned`: the framework was told the task is not running).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillOrder {
    /// The task's framework, when the body names it.
    pub framework_id: Option<protocol::FrameworkId>,
    /// A fence: the framework was told the task is not running.
    pub fence: bool,
}
