//! The core, input by input, asserting the exact commands it emits: one file per concern, and
//! the rig they share.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use protocol::messages::AgentRegistered;
use protocol::{
    AgentId, CommandSpec, FrameworkId, Resources, TaskId, TaskSpec, TaskState, TaskStatus,
    Timestamp, UpdateId,
};

use super::*;
use crate::journal::{Record, Replay, ReplayedTask};

/// A core with a fixed clock origin, sequential update ids and no jitter.
pub(super) struct Rig {
    core: Engine,
    t0: Instant,
    wall: Timestamp,
    fw: FrameworkId,
    agent: AgentId,
}

pub(super) fn config(journaling: Journaling, retention: Retention) -> EngineConfig {
    EngineConfig {
        timing: Timing::fast(),
        journaling,
        retention,
        max_batch: 2,
        jitter: Jitter::Off,
        update_ids: UpdateIds::Sequential(0),
        gpus: Vec::new(),
    }
}

pub(super) fn uid(n: u128) -> UpdateId {
    UpdateId(uuid::Uuid::from_u128(n))
}

pub(super) fn id(task: &str) -> TaskId {
    TaskId::new(task).unwrap()
}

/// The key of the rig framework's task `task`.
pub(super) fn key(task: &str) -> TaskKey {
    (FrameworkId(uuid::Uuid::from_u128(7)), id(task))
}

pub(super) fn spec(task: &str) -> TaskSpec {
    TaskSpec {
        task_id: id(task),
        name: String::new(),
        agent_id: AgentId(uuid::Uuid::nil()),
        resources: "cpus=1".parse::<Resources>().unwrap(),
        command: CommandSpec::Shell("true".into()),
        env: Default::default(),
        duration_s: None,
        isolation: None,
        health_check: None,
        priority: None,
    }
}

impl Rig {
    pub(super) fn new(config: EngineConfig) -> Self {
        Self {
            core: Engine::new(config, None),
            t0: Instant::now(),
            wall: protocol::now(),
            fw: FrameworkId(uuid::Uuid::from_u128(7)),
            agent: AgentId(uuid::Uuid::from_u128(9)),
        }
    }

    pub(super) fn sim() -> Self {
        Self::new(config(Journaling::Off, Retention::ForgetWhenAcked))
    }

    pub(super) fn now(&self, ms: u64) -> Now {
        Now {
            at: self.t0 + Duration::from_millis(ms),
            wall: self.wall,
        }
    }

    /// Runs one input at `ms` and returns its commands (with updates flushed, as shells do).
    pub(super) fn at(
        &mut self,
        ms: u64,
        f: impl FnOnce(&mut Engine, Now, &mut Vec<Command>),
    ) -> Vec<Command> {
        let now = self.now(ms);
        let mut out = Vec::new();
        f(&mut self.core, now, &mut out);
        self.core.flush(now, &mut out);
        out
    }

    pub(super) fn registered(&self) -> Reply {
        Reply::Registered(Ok(AgentRegistered {
            agent_id: self.agent,
            heartbeat_interval_s: 0.5,
            agent_timeout_s: None,
        }))
    }

    /// Registers at time 0 (the heartbeat timer is set for 500 ms).
    pub(super) fn register(&mut self) {
        self.at(0, |c, now, out| c.start(now, out));
        let reply = self.registered();
        self.at(0, |c, now, out| c.reply(reply, now, out));
    }

    pub(super) fn status(&self, task: &str, state: TaskState, n: u128) -> TaskStatus {
        TaskStatus {
            task_id: id(task),
            framework_id: self.fw,
            agent_id: self.agent,
            state,
            message: None,
            exit_code: None,
            update_id: uid(n),
            timestamp: self.wall,
            resources: Some(spec(task).resources),
            reason: None,
            usage: None,
            gpu_devices: None,
            healthy: None,
        }
    }

    pub(super) fn launch(&mut self, ms: u64, tasks: &[&str]) -> Vec<Command> {
        let fw = self.fw;
        let launches = tasks
            .iter()
            .map(|t| Launch {
                spec: spec(t),
                sandbox: None,
            })
            .collect();
        self.at(ms, |c, now, out| c.launch(fw, launches, now, out).unwrap())
    }

    pub(super) fn send(&self, statuses: Vec<TaskStatus>) -> Command {
        Command::Send(Request::Statuses {
            agent_id: self.agent,
            statuses,
        })
    }
}

pub(super) fn reply(
    result: Result<(), Failure>,
) -> impl FnOnce(&mut Engine, Now, &mut Vec<Command>) {
    move |c, now, out| c.reply(Reply::Statuses(result), now, out)
}

mod books;
mod fence;
mod gpus;
mod health;
mod session;
mod task_events;
mod updates;
