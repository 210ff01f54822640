//! Runnable example frameworks built on `framework-sdk`. Each example's logic is a library
//! function (`examples::hello::run(args, shutdown)`), so the binaries in `src/bin/` stay thin
//! and the end-to-end tests call the same code without spawning processes.
//!
//! # Layout
//!
//! - [`common`]: the flags every example takes (`--coordinator`, `--role`, ...), building a
//!   `DriverConfig` from them, logging setup, and Ctrl-C as a shutdown future (each example
//!   runs its driver with `Driver::run_until`).
//! - [`hello`]: the smallest framework: launch N shell commands, print their states, exit when
//!   all have ended.
//! - [`tetris_batch`]: a batch framework: a queue of jobs placed with a chosen policy (Tetris by
//!   default); reports makespan and average job completion time.
//! - [`placement_sim`]: an offline discrete-event simulation comparing placement policies on
//!   makespan and job completion time (`placement-sim` binary).
//! - [`service`]: keeps K replicas of a long-running command alive, replacing any that end.
//! - [`gpu_jobs`]: N one-GPU tasks (with the `gpu_resources` capability), each printing the
//!   device it was given; fails fast when `explain` says no agent offers `gpus`.
//!
//! Partitions: `service` is partition-aware (a replica whose agent is cut off is `unreachable`
//! and left alone until it returns or is `gone`); the others are not (such a task is `lost`,
//! and its agent has killed it by then).

pub mod common;
pub mod gpu_jobs;
pub mod hello;
pub mod placement_sim;
pub mod service;
pub mod tetris_batch;

#[cfg(test)]
mod test_support;
