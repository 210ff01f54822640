//! [`Book`] itself: its jobs, its settings (aging, queue order, user limits) and lookups.

use std::collections::BTreeMap;

use super::job::Job;
use super::records::{QueueOrder, UserLimits};
use crate::clock::Millis;

/// How long a queued job waits to gain one point of priority (aging), by default.
pub const DEFAULT_AGING_MS: Millis = 60_000;

/// Lost attempts (agent gone, task preempted) do not use up retries, but an index lost this
/// many times fails, so a task that kills its agent cannot loop forever.
pub const MAX_LOST: usize = 10;

/// A service replica that ran this long before it ended was healthy: its next restart waits
/// only the first backoff again.
pub const STABLE_MS: Millis = 10_000;

/// Every job the service knows.
#[derive(Debug, Clone)]
pub struct Book {
    pub(super) jobs: BTreeMap<String, Job>,
    pub(super) next_seq: u64,
    pub(super) aging_ms: Millis,
    pub(super) order: QueueOrder,
    pub(super) limits: UserLimits,
    /// Jobs a cascade of dependencies started or failed since the last input's effects
    /// were made (they are said to have changed).
    pub(super) cascaded: Vec<String>,
}

impl Default for Book {
    fn default() -> Self {
        Self::new(DEFAULT_AGING_MS)
    }
}

impl Book {
    /// An empty book; a queued job gains a point of priority every `aging_ms` it waits.
    pub fn new(aging_ms: Millis) -> Self {
        Self {
            jobs: BTreeMap::new(),
            next_seq: 0,
            aging_ms,
            order: QueueOrder::Fifo,
            limits: UserLimits::default(),
            cascaded: Vec::new(),
        }
    }

    /// Sets how many tasks each user's jobs may run at once.
    pub fn set_user_limits(&mut self, limits: UserLimits) {
        self.limits = limits;
    }

    /// Sets how jobs of the same priority share the queue.
    pub fn set_order(&mut self, order: QueueOrder) {
        self.order = order;
    }

    /// The job named `name`.
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.get(name)
    }

    /// Every job, by name.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    /// The sequence number the next submitted job gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}
