//! [`Backoff`]: the one capped exponential backoff of every Parley component (the agent's
//! registration and status retries, the SDK's reconnections and revives, the clients' retries
//! between coordinators, the jobs service's retries of failed tasks), and [`SplitMix64`], a
//! small seeded source for its jitter.
//!
//! It reads no clock and draws nothing by itself: a delay is a pure function of the policy and
//! the number of failures in a row, and a jittered one also of a random value the caller
//! passes, so the engines that use it stay deterministic under test.
//!
//! # Jitter
//!
//! "Equal jitter" (as the AWS Architecture Blog's *Exponential Backoff And Jitter* names it):
//! a jittered delay is uniform in `[d/2, d]` for the exponential delay `d`. Half of the delay
//! is random, so many clients that failed together (a fleet of agents after a coordinator
//! failover, the frameworks of a restarted coordinator) spread their retries; the other half
//! is kept, so no client retries at once (full jitter, uniform in `[0, d]`, lets some retry
//! almost immediately, hammering a server that is just coming back) and a client's waits still
//! grow with its failures.

use std::time::Duration;

/// A capped exponential backoff: no wait before any failure, `base` after the first,
/// multiplied by `factor` after each further one, never more than `max`. It counts the
/// failures in a row ([`Backoff::fail`], [`Backoff::reset`]); [`Backoff::after`] is the same
/// delay as a pure function of a count kept elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// What each further failure multiplies the delay by (2: it doubles). `0` counts as `1`.
    pub factor: u32,
    /// The longest delay.
    pub max: Duration,
    /// The failures in a row so far.
    failures: u64,
}

impl Backoff {
    /// A backoff that starts at `base` and doubles up to `max`, with no failure yet.
    pub const fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            factor: 2,
            max,
            failures: 0,
        }
    }

    /// The same, multiplying by `factor` instead of 2.
    pub const fn with_factor(self, factor: u32) -> Self {
        Self { factor, ..self }
    }

    /// The delay after `failures` failures in a row: zero for none, then `base`,
    /// `base * factor`, `base * factor²`, ..., at most `max` (`max` too when `base` exceeds
    /// it). Saturates: any count, however large, gives `max`, never an overflow.
    pub fn after(&self, failures: u64) -> Duration {
        let Some(further) = failures.checked_sub(1) else {
            return Duration::ZERO;
        };
        let exponent = u32::try_from(further).unwrap_or(u32::MAX);
        self.factor
            .max(1)
            .checked_pow(exponent)
            .and_then(|multiplier| self.base.checked_mul(multiplier))
            .map_or(self.max, |delay| delay.min(self.max))
    }

    /// [`Backoff::after`] with equal jitter (see the module docs): uniform in `[d/2, d]` as
    /// `unit` goes over `[0, 1]`; a `unit` out of that range is clamped, and one that is not a
    /// number gives `d`.
    pub fn jittered(&self, failures: u64, unit: f64) -> Duration {
        let unit = if unit.is_nan() {
            1.0
        } else {
            unit.clamp(0.0, 1.0)
        };
        let delay = self.after(failures);
        // The whole delay less a random part of its half: no product above the delay, so
        // none that overflows even for `Duration::MAX`.
        delay.saturating_sub((delay / 2).mul_f64(1.0 - unit))
    }

    /// Counts one more failure and returns the delay after it (without jitter).
    pub fn fail(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.after(self.failures)
    }

    /// Counts one more failure and returns the jittered delay after it, `unit` drawn by the
    /// caller in `[0, 1]` (see [`Backoff::jittered`]).
    pub fn fail_jittered(&mut self, unit: f64) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.jittered(self.failures, unit)
    }

    /// The failures in a row so far.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// A success: the next failure waits `base` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// splitmix64: a tiny seeded generator of values in `[0, 1)` for [`Backoff::jittered`], good
/// enough to spread retries (not for anything secret). Seeded differently per client (a random
/// seed), so clients that failed together do not draw alike; seeded alike in tests, so their
/// delays repeat.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator with this seed.
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next value, uniform in `[0, 1)`.
    pub fn next_unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn ms(d: Duration) -> u128 {
        d.as_millis()
    }

    #[test]
    fn it_waits_nothing_before_a_failure_then_doubles_up_to_the_cap() {
        let b = Backoff::new(MS * 100, MS * 2000);
        let delays: Vec<u128> = (0..8).map(|n| ms(b.after(n))).collect();
        assert_eq!(delays, [0, 100, 200, 400, 800, 1600, 2000, 2000]);
    }

    #[test]
    fn another_factor_multiplies_by_it_and_zero_counts_as_one() {
        let b = Backoff::new(MS * 10, MS * 1000).with_factor(3);
        let delays: Vec<u128> = (1..6).map(|n| ms(b.after(n))).collect();
        assert_eq!(delays, [10, 30, 90, 270, 810]);
        let flat = Backoff::new(MS * 10, MS * 1000).with_factor(0);
        assert_eq!(flat.after(50), MS * 10);
    }

    #[test]
    fn a_base_above_the_cap_gives_the_cap() {
        let b = Backoff::new(Duration::from_secs(10), Duration::from_secs(1));
        assert_eq!(b.after(1), Duration::from_secs(1));
    }

    #[test]
    fn huge_failure_counts_give_the_cap_without_overflow() {
        let b = Backoff::new(MS * 100, Duration::from_secs(30));
        for n in [31, 32, 63, 64, 65, 1_000, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(b.after(n), Duration::from_secs(30), "after {n} failures");
        }
        let huge = Backoff::new(Duration::MAX, Duration::MAX).with_factor(u32::MAX);
        assert_eq!(huge.after(u64::MAX), Duration::MAX);
        assert_eq!(huge.jittered(u64::MAX, 1.0), Duration::MAX);
    }

    #[test]
    fn jitter_stays_between_half_and_the_whole_delay() {
        let b = Backoff::new(MS * 100, MS * 2000);
        let mut rng = SplitMix64::new(7);
        let mut seen = std::collections::HashSet::new();
        for n in 0..200 {
            let full = b.after(n % 10);
            let d = b.jittered(n % 10, rng.next_unit());
            assert!(d >= full / 2 && d <= full, "{n}: {d:?} of {full:?}");
            seen.insert(d);
        }
        assert!(seen.len() > 100, "hardly jittered: {} delays", seen.len());
        // The ends of the range, and values outside it.
        assert_eq!(b.jittered(3, 0.0), MS * 200);
        assert_eq!(b.jittered(3, 1.0), MS * 400);
        assert_eq!(b.jittered(3, -5.0), MS * 200);
        assert_eq!(b.jittered(3, 7.0), MS * 400);
        assert_eq!(b.jittered(3, f64::NAN), MS * 400);
    }

    #[test]
    fn failures_are_counted_and_a_reset_starts_over() {
        let mut b = Backoff::new(MS * 10, MS * 1000);
        let delays: Vec<u128> = (0..4).map(|_| ms(b.fail())).collect();
        assert_eq!(delays, [10, 20, 40, 80]);
        assert_eq!(b.failures(), 4);
        b.reset();
        assert_eq!(b.failures(), 0);
        assert_eq!(b.fail(), MS * 10);
        let jittered = b.fail_jittered(0.0);
        assert_eq!((jittered, b.failures()), (MS * 10, 2));
    }

    #[test]
    fn the_generator_is_uniform_and_repeats_with_its_seed() {
        let draws: Vec<f64> = {
            let mut rng = SplitMix64::new(11);
            (0..10_000).map(|_| rng.next_unit()).collect()
        };
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        for tenth in 0..10 {
            let lo = f64::from(tenth) / 10.0;
            let n = draws.iter().filter(|u| **u >= lo && **u < lo + 0.1).count();
            assert!((800..1200).contains(&n), "{n} draws in [{lo}, {lo} + 0.1)");
        }
        let mut again = SplitMix64::new(11);
        assert_eq!(again.next_unit(), draws[0]);
        assert_ne!(SplitMix64::new(12).next_unit(), draws[0]);
    }
}
