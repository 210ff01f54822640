//! [`Book`]: the pure state of every job — the queue, each array's indexes, every attempt —
//! with no I/O and no clock (the time is passed in, in milliseconds since the Unix epoch).
//!
//! Every change comes in as one [`Input`] through [`Book::handle`], which answers with the
//! [`Effect`]s that follow, in order: what to store, what to kill, which jobs changed. The
//! service carries them out (`state::Shared`: one writer stores them, off the book's lock and
//! in the order they were made). Reads ([`Book::candidates`], [`Book::view`], ...) borrow the
//! book. An input the book refuses ([`BookError`]) changes nothing.
//!
//! An array is kept as ranges: the indexes not yet launched and those that succeeded are
//! [`Ranges`](crate::ranges::Ranges); only indexes running, waiting for a retry, or with a
//! failed attempt have records of their own. Task ids are derived from the job, the index and
//! the attempt ([`task_id`]), so an attempt is never launched twice under two names, and a
//! restarted service recognises the tasks it launched before.
//!
//! # Layout
//!
//! - `base`: [`Book`] itself, its settings and lookups.
//! - `records`: the records it keeps and hands out ([`AttemptRecord`], [`JobRecord`], ...).
//! - `error`: [`BookError`].
//! - `job`: [`Job`], one job's indexes and attempts.
//! - `queue`: submission, dependencies, the order of the queue, stop and delete.
//! - `attempts`: launches, status updates, retries and time limits.
//! - `services`: scaling, rolling updates, health and restarts of replicas.
//! - `periodic`: periodic jobs' due runs.
//! - `restore`: the book rebuilt from the store.
//! - `views`: what the API shows ([`JobSummary`], [`JobView`], [`TaskView`]).
//! - `input`: [`Input`], [`Effect`] and [`Book::handle`], the one way to change the book.

pub use crate::clock::Millis;

mod attempts;
mod base;
mod error;
mod input;
mod job;
mod periodic;
mod queue;
mod records;
mod restore;
mod services;
mod views;

pub use base::{Book, DEFAULT_AGING_MS, MAX_LOST, STABLE_MS};
pub use error::BookError;
pub use input::{Effect, Input, KillWhy};
pub use job::{Estimator, Job, SERVICE_HISTORY};
pub use records::{
    parse_task_id, task_id, AttemptRecord, Candidate, Failure, JobRecord, JobState, QueueOrder,
    Running, UserLimits,
};
pub use services::runs_differently;
pub use views::{JobSummary, JobView, Retrying, TaskCounts, TaskView};

#[cfg(test)]
mod tests;
