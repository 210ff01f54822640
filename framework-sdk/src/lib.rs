//! The Parley framework SDK: write a scheduler, and the [`Driver`] runs it against a coordinator.
//!
//! A framework implements [`Scheduler`]: it answers offers with tasks to launch or declines,
//! and hears about task states. The driver does the rest, including what Mesos users had to
//! learn the hard way: it acknowledges updates after the scheduler has seen them, declines
//! offers the scheduler sits on, suppresses offers while the scheduler has nothing to launch and
//! revives (rate-limited) when work appears, reconnects with backoff under the same framework id
//! so running tasks survive, puts the tasks of a failed launch back in the scheduler's queue,
//! and uses a failover timeout of an hour unless told otherwise. [`placement`] holds reusable
//! policies, among them [`placement::Tetris`]; [`Decisions::from_assignments`] turns their
//! choices into answers.
//!
//! Everything a framework needs is exported here (the `protocol` types it handles included), so
//! `use framework_sdk::prelude::*;` is its only import.
//!
//! # Layout
//!
//! - [`scheduler`]: the [`Scheduler`] trait.
//! - [`context`]: [`Context`], what a scheduler may do besides answering offers (kill,
//!   reconcile, stop, answer held offers).
//! - [`decisions`]: [`Decisions`] (answers to offers) and the ways the SDK fills them:
//!   [`Decisions::pack`], [`Decisions::from_assignments`], [`Decisions::launch_or_decline`].
//! - [`task`]: [`Task`], a checked task template (`Task::shell("echo hi").resources(..)`)
//!   placed on offers with [`Task::on`].
//! - [`driver`]: [`Driver`] and [`DriverConfig`]: registration, the event loop, reconnection,
//!   suppress/revive, offer hold timeout, [`Driver::run_until`] a shutdown future.
//! - [`client`]: [`CoordinatorClient`], the framework HTTP API as typed calls, following the
//!   leader when given several coordinators (`307` re-sent, round-robin on `503 no_leader`).
//! - [`sse`]: the Server-Sent Events parser (the `protocol` crate's, which every client shares).
//! - [`constraints`]: placement constraints over agent attributes (`==`, `!=`, spread, at most
//!   N per value), [`constraints::TaskPlaces`] (where the framework's tasks run, for the
//!   counts) and [`constraints::place`] (a policy run with both). Drained agents reach the
//!   scheduler as [`Scheduler::agent_draining`], tasks taken back by preemption as
//!   [`Scheduler::preempted`].
//! - [`placement`]: the `placement` crate (pure, no async runtime or HTTP), re-exported:
//!   [`placement::Placement`] and the policies `FirstFit`, `BestFit`, `Tetris`.
//! - [`error`]: the error type, [`SdkError`].
//! - [`faults`]: a seam for tests, [`faults::FaultInjector`]: calls answered with an error,
//!   delayed, refused or with their answer lost, by rule.
//! - [`prelude`]: the imports a framework needs.
//!
//! # Partitions
//!
//! When the coordinator loses contact with an agent, a framework's tasks there are `lost`
//! (terminal): the agent has killed them by then, so launching a lost task again never runs it
//! twice. A framework that sets [`DriverConfig::partition_aware`] is told `unreachable` instead
//! (not terminal: the task may still run), then the task's state again when its agent returns,
//! or `gone` (terminal, killed) after its partition timeout.
//!
//! # Example
//!
//! A framework that runs `echo hi` three times, packing the copies on its offers, and stops
//! once all three have ended.
//!
//! ```no_run
//! use framework_sdk::prelude::*;
//!
//! struct Echo { task: Task, queue: Vec<TaskId>, ended: usize }
//!
//! #[async_trait]
//! impl Scheduler for Echo {
//!     async fn offers(&mut self, _ctx: &mut Context, offers: Vec<Offer>) -> Decisions {
//!         Decisions::pack(&offers, &self.task, || self.queue.pop())
//!     }
//!
//!     async fn status_update(&mut self, ctx: &mut Context, status: &TaskStatus) {
//!         println!("{} is {}", status.task_id, status.state);
//!         if status.state.is_terminal() {
//!             self.ended += 1;
//!             if self.ended == 3 {
//!                 ctx.stop();
//!             }
//!         }
//!     }
//!
//!     fn requeue(&mut self, task: TaskSpec) {
//!         self.queue.push(task.task_id);
//!     }
//!
//!     fn pending_tasks(&self) -> usize {
//!         self.queue.len()
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let echo = Echo {
//!     task: Task::shell("echo hi").resources("cpus=0.1,mem=32").build()?,
//!     queue: vec![TaskId::new("echo-1")?, TaskId::new("echo-2")?, TaskId::new("echo-3")?],
//!     ended: 0,
//! };
//! let config = DriverConfig::new("http://127.0.0.1:5050", "echo", "eng/batch".parse()?);
//! let done = Driver::new(config, echo)?.run_until(tokio::signal::ctrl_c()).await?;
//! assert_eq!(done.ended, 3);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod client;
pub mod constraints;
pub mod context;
pub mod decisions;
pub mod driver;
pub mod error;
pub mod faults;
pub mod scheduler;
pub use protocol::sse;
pub mod task;
pub mod token;

/// Pure placement policies (the `placement` crate, which needs no async runtime or HTTP
/// client): [`placement::Placement`], [`placement::FirstFit`], [`placement::BestFit`],
/// [`placement::Tetris`].
pub use placement;
/// The wire types, for what the SDK does not re-export by name.
pub use protocol;

pub use async_trait::async_trait;
pub use client::{Connection, CoordinatorClient};
pub use context::Context;
pub use decisions::{Answer, Decisions};
pub use driver::{
    Driver, DriverConfig, DriverConfigError, DEFAULT_FAILOVER_TIMEOUT, MAX_ACKS_PER_REQUEST,
};
pub use error::SdkError;
pub use protocol::{
    AgentId, CommandSpec, FrameworkId, HealthCheck, Offer, OfferId, Resources, RolePath, TaskId,
    TaskSpec, TaskState, TaskStatus,
};
pub use scheduler::Scheduler;
pub use task::{IntoResources, Task, TaskBuilder, TaskError};
pub use token::BearerToken;

/// What a framework imports: `use framework_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::{
        async_trait, AgentId, Answer, CommandSpec, Context, Decisions, Driver, DriverConfig,
        FrameworkId, HealthCheck, Offer, OfferId, Resources, RolePath, Scheduler, SdkError, Task,
        TaskId, TaskSpec, TaskState, TaskStatus,
    };
}
