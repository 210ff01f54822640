//! Wire types shared by every Parley component: the HTTP contract (`docs/src/reference/api.md`) as
//! Rust types.
//!
//! # Layout
//!
//! - [`ids`]: identifier newtypes (`FrameworkId`, `AgentId`, `OfferId`, `UpdateId` over UUID;
//!   `TaskId`, chosen by frameworks and validated).
//! - [`resources`]: [`Resources`], a fixed-point (thousandths) resource vector with checked
//!   arithmetic, parsing that names the bad field, and dominant-share helpers.
//! - [`role`]: [`RolePath`] (`eng/batch`) and [`Weight`], validated on parse.
//! - [`task`]: [`TaskSpec`], [`TaskState`], [`TaskStatus`].
//! - [`command`]: [`CommandSpec`], how a task or a command health check runs.
//! - [`offer`]: the [`Offer`] type.
//! - [`isolation`]: a task's isolation options ([`Isolation`]) and the agent attributes that say
//!   what an agent enforces; the checks the coordinator makes at accept time.
//! - [`health`]: task health checks: a command or an HTTP GET, with timing, and
//!   the check of their form.
//! - [`gang`]: gangs, tasks that start together or not at all: [`gang::GangSpec`] and the
//!   check of its form.
//! - [`gpu`]: GPUs: the devices an agent reports ([`gpu::GpuDevice`]) and the whole-device
//!   count a task asks for.
//! - [`maintenance`]: draining agents: the drain request, the `agent_draining`
//!   event, the agent state names.
//! - [`reservation`]: static and dynamic reservations: the agent flag's
//!   `ROLE:resources`, the mark on reserved offers, the reserve / unreserve body.
//! - [`preempt`]: preemption toward fair share: a task's [`preempt::Priority`] and
//!   the `preemption` event.
//! - [`messages`]: request and response bodies of the framework, agent and operator APIs.
//! - [`events`]: the framework SSE stream ([`FrameworkEvent`]) and the operator offer stream
//!   ([`OfferEvent`]).
//! - [`sse`]: the one Server-Sent Events parser every client uses (the SDK, `parleyctl`, the
//!   test kit): bytes in, in chunks of any size, frames out, with a limit on a frame's size.
//! - [`error`]: the error body every endpoint returns (`{"error": {"code", "message"}}`).
//! - [`leader`]: several coordinator URLs and finding the leader among them (follow `307`,
//!   round-robin on `503 no_leader` or a dead URL): the pure logic every client shares.
//! - [`partition`]: network partitions: the `partition_aware` capability, partition timeouts,
//!   and when an agent cut off from the coordinator kills its tasks itself.
//! - [`backoff`]: [`Backoff`], the one capped exponential backoff (with equal jitter, from a
//!   value the caller draws) of every component, and [`backoff::SplitMix64`], a seeded source
//!   for it.
//! - [`capability`]: framework capabilities (`gpu_resources`) and the whole-device rule for
//!   `gpus` ([`capability::check_whole_gpus`]).
//!
//! Nothing here does I/O. Every type that crosses a boundary validates itself on deserialization,
//! so a value of one of these types is known to be well-formed.

#![deny(missing_docs)]

pub mod backoff;
pub mod capability;
pub mod command;
pub mod error;
pub mod events;
pub mod gang;
pub mod gpu;
pub mod health;
pub mod ids;
pub mod isolation;
pub mod leader;
pub mod maintenance;
pub mod messages;
pub mod offer;
pub mod partition;
pub mod preempt;
pub mod reservation;
pub mod resources;
pub mod role;
pub mod sse;
pub mod task;

pub use backoff::Backoff;
pub use command::CommandSpec;
pub use error::{ErrorBody, ErrorDetail};
pub use events::{FrameworkEvent, OfferEvent};
pub use health::HealthCheck;
pub use ids::{AgentId, FrameworkId, OfferId, TaskId, UpdateId};
pub use isolation::{Isolation, NetworkMode};
pub use offer::Offer;
pub use resources::{ResourceError, ResourceName, Resources};
pub use role::{RolePath, Weight};
pub use task::{TaskSpec, TaskState, TaskStatus, TaskUsage};

/// Timestamps on the wire: RFC 3339 strings in UTC.
pub type Timestamp = chrono::DateTime<chrono::Utc>;

/// The current time as a wire [`Timestamp`].
pub fn now() -> Timestamp {
    chrono::Utc::now()
}
