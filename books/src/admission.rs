//! The launch window: how many agents an allocation may offer now, so that the tasks launched
//! and not yet reported by their agents, with what the outstanding offers are expected to
//! launch, stay within a bound. A queue of work then waits in its frameworks, where it can
//! still go to whichever agent frees first, rather than in the launch pipeline, where every
//! task waits behind all the others: accept → running stays as short as the pipeline is.
//!
//! Only offers made in the last [`FRESH_MS`] count: a framework that sits on its offers (until
//! they expire, a minute by default) must not hold the window, and so every other framework's
//! offers, for that long.

use crate::{Now, State};

/// How long an outstanding offer counts in the window.
pub(crate) const FRESH_MS: u64 = 2_000;

/// The width of one bucket of [`FreshOffers`].
const BUCKET_MS: u64 = 100;

/// Buckets in [`FRESH_MS`].
const BUCKETS: usize = (FRESH_MS / BUCKET_MS) as usize;

/// How much one accept's tasks per offer move the running estimate (an exponential average).
const WEIGHT: f64 = 0.05;

/// The running estimate of tasks launched per accepted offer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TasksPerOffer(f64);

impl Default for TasksPerOffer {
    fn default() -> Self {
        TasksPerOffer(1.0)
    }
}

impl TasksPerOffer {
    /// Counts an accept of `offers` offers that launched `tasks` tasks.
    pub(crate) fn observe(&mut self, tasks: usize, offers: usize) {
        if offers == 0 {
            return;
        }
        let seen = tasks as f64 / offers as f64;
        self.0 += WEIGHT * (seen - self.0);
    }

    /// The estimate, at least one task per offer.
    fn get(self) -> f64 {
        self.0.max(1.0)
    }
}

/// The outstanding offers made in the last [`FRESH_MS`], counted in buckets of [`BUCKET_MS`]
/// by when they were made: bucket `b` (a time divided by [`BUCKET_MS`]) is at `b % BUCKETS` while
/// `newest - BUCKETS < b <= newest`, and older ones are zeroed as `newest` moves on. An ended
/// offer leaves its bucket if that is still counted.
#[derive(Debug, Default, Clone)]
pub(crate) struct FreshOffers {
    counts: [usize; BUCKETS],
    newest: u64,
}

impl FreshOffers {
    /// Moves the newest bucket on to `ms`'s, zeroing those that leave the horizon.
    fn advance(&mut self, ms: u64) {
        let to = ms / BUCKET_MS;
        if to <= self.newest {
            return;
        }
        if to - self.newest >= BUCKETS as u64 {
            self.counts = [0; BUCKETS];
        } else {
            for b in self.newest + 1..=to {
                self.counts[(b % BUCKETS as u64) as usize] = 0;
            }
        }
        self.newest = to;
    }

    /// Whether bucket `b` is still counted.
    fn counted(&self, b: u64) -> bool {
        b <= self.newest && b + BUCKETS as u64 > self.newest
    }

    /// An offer made at `ms`.
    pub(crate) fn made(&mut self, ms: u64) {
        self.advance(ms);
        let b = ms / BUCKET_MS;
        if self.counted(b) {
            self.counts[(b % BUCKETS as u64) as usize] += 1;
        }
    }

    /// An offer made at `made_ms` ended.
    pub(crate) fn ended(&mut self, made_ms: u64) {
        let b = made_ms / BUCKET_MS;
        if self.counted(b) {
            let c = &mut self.counts[(b % BUCKETS as u64) as usize];
            *c = c.saturating_sub(1);
        }
    }

    /// The offers made in the horizon before `now_ms` and not ended.
    pub(crate) fn count(&mut self, now_ms: u64) -> usize {
        self.advance(now_ms);
        self.counts.iter().sum()
    }
}

impl State {
    /// Tasks launched and not yet reported by their agent (`staging`).
    pub fn launching(&self) -> usize {
        self.tasks.staging()
    }

    /// How many agents an allocation part may offer now within a launch window of `window`
    /// tasks: the room left by the tasks launching and by the offers made in the last 2 s and
    /// still outstanding, each counted as the tasks an accepted offer has
    /// lately launched, divided by that. Zero when the window is full; no bound when `window`
    /// is 0.
    pub fn admissible_agents(&mut self, window: usize, now: &Now) -> usize {
        if window == 0 {
            return usize::MAX;
        }
        let per_offer = self.tasks_per_offer.get();
        let offers = self.offers.fresh(now.ms);
        let in_flight = self.tasks.staging() as f64 + per_offer * offers as f64;
        let room = window as f64 - in_flight;
        if room < per_offer {
            0
        } else {
            (room / per_offer) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_follows_accepts_and_stays_at_least_one() {
        let mut e = TasksPerOffer::default();
        assert_eq!(e.get(), 1.0);
        for _ in 0..200 {
            e.observe(12, 2);
        }
        assert!((e.get() - 6.0).abs() < 0.01, "{e:?}");
        for _ in 0..200 {
            e.observe(0, 1);
        }
        assert_eq!(e.get(), 1.0, "declines count as no tasks, the floor is one");
        e.observe(5, 0);
        assert_eq!(e.get(), 1.0, "no offers, nothing learnt");
    }

    #[test]
    fn offers_count_for_two_seconds_from_when_they_were_made() {
        let mut f = FreshOffers::default();
        f.made(1_000);
        f.made(1_050);
        f.made(2_500);
        assert_eq!(f.count(2_500), 3);
        f.ended(1_050);
        assert_eq!(f.count(2_600), 2);
        // 1,000 leaves at 3,000 (its bucket is 10, counted while the newest is below 30).
        assert_eq!(f.count(2_999), 2);
        assert_eq!(f.count(3_000), 1);
        // An offer ending after it left changes nothing.
        f.ended(1_000);
        assert_eq!(f.count(3_000), 1);
        assert_eq!(f.count(4_499), 1);
        assert_eq!(f.count(4_500), 0);
        // A long gap clears everything; an offer made then counts.
        f.made(100_000);
        assert_eq!(f.count(100_000), 1);
        f.ended(100_000);
        assert_eq!(f.count(100_001), 0);
    }
}
