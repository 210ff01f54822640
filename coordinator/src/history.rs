//! [`History`]: a ring of samples of the books, one a second for the last ten minutes, that
//! the dashboard draws its charts from (`GET /api/v1/history`).
//!
//! A timer task (`server::history_loop`) takes each sample: it reads the books once
//! ([`crate::state::State::history_sample`], O(agents + tasks + roles + frameworks), no
//! serialization) and the offer counters; nothing on a request's path does any of this. The
//! ring holds at most [`History::CAPACITY`] samples, each with at most
//! [`crate::state::SAMPLE_MAX_SHARES`] roles and frameworks, so its memory is bounded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::state::BookSample;

/// Offers created and ended since the coordinator started (counters, as in `/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OfferCounts {
    /// Offers made.
    pub created: u64,
    /// Offers accepted.
    pub accepted: u64,
    /// Offers declined.
    pub declined: u64,
    /// Offers rescinded.
    pub rescinded: u64,
    /// Offers expired unanswered.
    pub expired: u64,
}

/// One sample: the books at `at_ms` and the offer counters then.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sample {
    /// Increases by one per sample, from 1.
    pub seq: u64,
    /// When it was taken, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The offer counters.
    pub offers: OfferCounts,
    /// What the books said.
    #[serde(flatten)]
    pub books: BookSample,
}

/// The ring of samples; shared by the sampler and the API behind its own small lock (never the
/// books').
#[derive(Debug, Default)]
pub struct History {
    ring: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    samples: VecDeque<Arc<Sample>>,
    last_seq: u64,
}

impl History {
    /// Samples kept: ten minutes at one a second.
    pub const CAPACITY: usize = 600;

    /// How often the sampler takes one.
    pub const INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

    /// Adds a sample (numbered next), dropping the oldest beyond [`History::CAPACITY`].
    pub fn push(&self, at_ms: u64, offers: OfferCounts, books: BookSample) {
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.last_seq += 1;
        let sample = Sample {
            seq: ring.last_seq,
            at_ms,
            offers,
            books,
        };
        ring.samples.push_back(Arc::new(sample));
        while ring.samples.len() > Self::CAPACITY {
            ring.samples.pop_front();
        }
    }

    /// The number of the latest sample (0 before the first).
    pub fn latest(&self) -> u64 {
        self.ring.lock().unwrap_or_else(|p| p.into_inner()).last_seq
    }

    /// The samples numbered above `after` (all kept ones for 0), oldest first.
    pub fn after(&self, after: u64) -> Vec<Arc<Sample>> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.samples
            .iter()
            .filter(|s| s.seq > after)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn books(offers: usize) -> BookSample {
        BookSample {
            outstanding_offers: offers,
            ..BookSample::default()
        }
    }

    #[test]
    fn numbers_samples_and_returns_those_after_a_number() {
        let h = History::default();
        assert!(h.after(0).is_empty());
        assert_eq!(h.latest(), 0);
        for i in 0..3 {
            h.push(1000 + i, OfferCounts::default(), books(i as usize));
        }
        let all = h.after(0);
        assert_eq!(all.iter().map(|s| s.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(all[2].at_ms, 1002);
        assert_eq!(all[2].books.outstanding_offers, 2);
        assert_eq!(h.after(2).len(), 1);
        assert!(h.after(3).is_empty());
        assert_eq!(h.latest(), 3);
    }

    #[test]
    fn keeps_only_the_latest_capacity_samples() {
        let h = History::default();
        for i in 0..(History::CAPACITY as u64 + 25) {
            h.push(i, OfferCounts::default(), books(0));
        }
        let all = h.after(0);
        assert_eq!(all.len(), History::CAPACITY);
        assert_eq!(all.first().map(|s| s.seq), Some(26));
        assert_eq!(
            all.last().map(|s| s.seq),
            Some(History::CAPACITY as u64 + 25)
        );
    }

    #[test]
    fn a_sample_serializes_flat() {
        let h = History::default();
        let mut b = books(4);
        b.tasks.insert("running", 2);
        h.push(
            7,
            OfferCounts {
                created: 5,
                ..OfferCounts::default()
            },
            b,
        );
        let json = serde_json::to_value(&*h.after(0)[0]).unwrap_or_default();
        assert_eq!(json["seq"], 1);
        assert_eq!(json["offers"]["created"], 5);
        assert_eq!(json["outstanding_offers"], 4);
        assert_eq!(json["tasks"]["running"], 2);
    }
}
