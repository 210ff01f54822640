//! The queue of updates the coordinator has not acknowledged, oldest first, and how it is sent:
//! in order, in batches of up to `max_batch`, one request at a time, until the coordinator
//! answers `200`.
//!
//! - Another `4xx` refuses the whole batch (a batch is all or nothing): its updates are then
//!   sent one at a time, so the refused one is found and dropped alone, then batching resumes.
//! - A `404` normally means the coordinator forgot the agent (register again). When the same
//!   oldest update gets `404` three times in a row, across registrations, the coordinator
//!   refuses the update itself: it is treated as refused.
//! - Anything else (no answer, `5xx`) is retried after a backoff.
//!
//! An update that finds the sender idle (nothing queued, nothing in flight) waits up to the
//! agent's `status_linger` (a few milliseconds) for others, so tasks that end together share one
//! request; updates queued behind a request in flight go as soon as it is answered.

use std::collections::VecDeque;
use std::time::Instant;

use protocol::{TaskStatus, UpdateId};

/// `404`s to the same oldest update, in a row, after which it counts as refused.
pub(crate) const NOT_FOUND_LIMIT: u32 = 3;

/// Unacknowledged updates and the state of sending them.
#[derive(Debug, Default)]
pub(crate) struct Updates {
    /// Oldest first; the first `in_flight` are being sent.
    pub queue: VecDeque<TaskStatus>,
    /// How many of the oldest updates the request in flight carries (0: none in flight).
    pub in_flight: usize,
    /// After a refused batch of this many: send them one at a time.
    pub one_at_a_time: usize,
    /// Failed attempts in a row (for the backoff).
    pub attempts: u32,
    /// No new attempt before this (a backoff is running).
    pub retry_at: Option<Instant>,
    /// The oldest update and how many `404`s in a row it got.
    pub not_found: Option<(UpdateId, u32)>,
    /// When an update found the sender idle: the batch waits until this plus the linger.
    pub linger_from: Option<Instant>,
    /// A timer for the end of the linger is set.
    pub linger_timer: bool,
}

impl Updates {
    /// How many updates the next request may carry, if one may start now.
    pub fn next_batch(&self, now: Instant, max_batch: usize) -> Option<usize> {
        if self.in_flight > 0 || self.queue.is_empty() || self.retry_at.is_some_and(|at| now < at) {
            return None;
        }
        let limit = if self.one_at_a_time > 0 { 1 } else { max_batch };
        Some(limit.min(self.queue.len()))
    }

    /// Queues an update made at `now`.
    pub fn push(&mut self, status: TaskStatus, now: Instant) {
        if self.queue.is_empty() && self.in_flight == 0 {
            self.linger_from = Some(now);
        }
        self.queue.push_back(status);
    }

    /// Marks the oldest `n` as in flight.
    pub fn start(&mut self, n: usize) {
        self.linger_from = None;
        self.linger_timer = false;
        self.in_flight = n;
        self.retry_at = None;
        self.one_at_a_time = self.one_at_a_time.saturating_sub(1);
    }

    /// The in-flight updates were recorded (or dropped): removes and returns them.
    pub fn finish(&mut self) -> Vec<TaskStatus> {
        let n = std::mem::take(&mut self.in_flight).min(self.queue.len());
        self.queue.drain(..n).collect()
    }

    /// The id of the oldest update in flight.
    pub fn front_id(&self) -> Option<UpdateId> {
        self.queue.front().map(|s| s.update_id)
    }

    /// Counts a `404` to the oldest update; true once it reached [`NOT_FOUND_LIMIT`].
    pub fn count_not_found(&mut self) -> bool {
        let Some(front) = self.front_id() else {
            return false;
        };
        let count = match self.not_found {
            Some((id, n)) if id == front => n + 1,
            _ => 1,
        };
        self.not_found = Some((front, count));
        count >= NOT_FOUND_LIMIT
    }

    /// True when some unacknowledged update is about `task`.
    pub fn has_task(&self, (fw, id): &super::TaskKey) -> bool {
        self.queue
            .iter()
            .any(|s| s.framework_id == *fw && &s.task_id == id)
    }
}
