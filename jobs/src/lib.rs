//! `parley-jobs`: run work on Parley without writing a framework. The service registers as
//! one framework (through the SDK's `Driver`, no private coordinator API) and runs every job
//! submitted to its REST API: batch arrays with retries and exponential backoff, per-task
//! time limits, dependencies between jobs, priorities with aging, and limits on the tasks
//! running at once per job and per user; and services, whose replicas are restarted whenever they end and can be scaled.
//! Tasks are placed with the SDK's policies and constraints. Its state is durable in a redb
//! file, and a restarted service takes its tasks over without launching any attempt twice.
//!
//! # Layout
//!
//! - [`clock`]: [`clock::Millis`] and [`clock::now_ms`], the service's time.
//! - [`spec_error`]: [`spec_error::SpecError`], a refused spec naming its field.
//! - [`spec`]: job specs (TOML or JSON, one versioned schema), checked field by field; an
//!   error names the field and, for TOML, the line.
//! - [`ranges`]: [`ranges::Ranges`], sets of task indexes kept as ranges.
//! - [`schedule`]: periodic jobs' cron schedules, time zones and concurrency policies.
//! - [`book`]: [`book::Book`], the pure state of every job (queue order, indexes, attempts,
//!   retries, dependencies, service replicas): one input in, its effects out; no I/O, time
//!   passed in.
//! - [`store`]: [`store::Store`], the redb file (framework id, jobs, attempts) and the book's
//!   rebuild after a restart.
//! - [`writer`]: [`writer::Writer`], the store's one writer: the book's writes in order, off
//!   its lock, with group commit.
//! - [`scheduler`]: [`scheduler::JobsScheduler`], the SDK `Scheduler` that launches the
//!   book's tasks on offers.
//! - [`users`]: [`users::Users`], the API's users file: each user's token hash and running
//!   task limit.
//! - [`state`]: [`state::Shared`], what the scheduler, the API and the timer share, and
//!   the events the API streams.
//! - [`api`]: the axum router under `/api/v1/jobs`; who calls, and who may change a job.
//! - [`cli`]: [`cli::Args`], the binary's command line, and [`cli::Settings`], its settings as
//!   flags, environment variables and file keys (`--config FILE`).
//! - [`service`]: [`service::ServiceConfig`], [`service::run`] and [`service::start`]: the
//!   store, the driver, the API and the service's clock wired together.
//!
//! The binary (`src/main.rs`) reads flags and runs [`service::run`] until Ctrl-C or SIGTERM.

#![deny(missing_docs)]

pub mod api;
pub mod book;
pub mod cli;
pub mod clock;
pub mod ranges;
pub mod schedule;
pub mod scheduler;
pub mod service;
pub mod spec;
pub mod spec_error;
pub mod state;
pub mod store;
pub mod users;
pub mod writer;

pub use service::{run, start, ServiceConfig};

/// The jobs service's port under `parley --dev`.
pub const DEV_PORT: u16 = 5070;
