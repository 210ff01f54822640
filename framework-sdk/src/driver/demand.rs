//! When to suppress and when to revive offers: a small pure state machine, so it is unit-tested
//! without a coordinator.
//!
//! The rules: a framework with nothing to launch suppresses (it stops receiving offers, so it
//! neither holds nor declines resources others could use); when work appears, or grows, it
//! revives, which also clears its decline filters; revives are rate-limited because a storm of
//! them was a known way to overload Mesos' allocator.

use std::time::{Duration, Instant};

/// What the driver should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DemandAction {
    /// Nothing.
    None,
    /// Send `suppress`.
    Suppress,
    /// Send `revive`.
    Revive,
    /// A revive is wanted but rate-limited: decide again at this instant.
    ReviveAt(Instant),
}

/// What the driver knows about its standing with the allocator.
#[derive(Debug)]
pub(crate) struct DemandState {
    /// `Some(true)` suppressed, `Some(false)` receiving offers, `None` unknown (after a
    /// re-registration, or after a failed call).
    suppressed: Option<bool>,
    last_pending: usize,
    last_revive: Option<Instant>,
    revive_wanted: bool,
    interval: Duration,
}

impl DemandState {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            suppressed: None,
            last_pending: 0,
            last_revive: None,
            revive_wanted: false,
            interval,
        }
    }

    /// After a registration: a new framework receives offers; a re-registered one's state is
    /// unknown, so the next decision re-asserts it.
    pub(crate) fn registered(&mut self, reregistered: bool, pending: usize) {
        self.suppressed = if reregistered { None } else { Some(false) };
        self.last_pending = pending;
        self.revive_wanted = false;
    }

    /// Decides, given the scheduler's current count of tasks it wants to launch.
    pub(crate) fn decide(&mut self, pending: usize, now: Instant) -> DemandAction {
        let grew = pending > self.last_pending;
        self.last_pending = pending;
        if pending == 0 {
            self.revive_wanted = false;
            return if self.suppressed == Some(true) {
                DemandAction::None
            } else {
                DemandAction::Suppress
            };
        }
        if self.suppressed != Some(false) || grew {
            self.revive_wanted = true;
        }
        if !self.revive_wanted {
            return DemandAction::None;
        }
        match self.last_revive {
            Some(last) if now < last + self.interval => {
                DemandAction::ReviveAt(last + self.interval)
            }
            _ => DemandAction::Revive,
        }
    }

    /// Records the outcome of a `suppress` call.
    pub(crate) fn suppressed(&mut self, ok: bool) {
        self.suppressed = if ok { Some(true) } else { None };
    }

    /// Records the outcome of a `revive` call; a failed one is retried after the interval.
    pub(crate) fn revived(&mut self, ok: bool, now: Instant) {
        self.last_revive = Some(now);
        if ok {
            self.suppressed = Some(false);
            self.revive_wanted = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suppress_when_idle_and_revive_when_work_arrives() {
        let t0 = Instant::now();
        let mut d = DemandState::new(Duration::from_secs(1));
        d.registered(false, 3);
        assert_eq!(
            d.decide(3, t0),
            DemandAction::None,
            "a new framework already gets offers"
        );
        assert_eq!(
            d.decide(1, t0),
            DemandAction::None,
            "less work is no reason to revive"
        );
        assert_eq!(d.decide(0, t0), DemandAction::Suppress);
        d.suppressed(true);
        assert_eq!(d.decide(0, t0), DemandAction::None, "suppress only once");
        assert_eq!(d.decide(2, t0), DemandAction::Revive);
        d.revived(true, t0);
        assert_eq!(d.decide(2, t0), DemandAction::None);
    }

    #[test]
    fn revives_are_rate_limited() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut d = DemandState::new(second);
        d.registered(false, 1);
        assert_eq!(
            d.decide(2, t0),
            DemandAction::Revive,
            "more work clears filters"
        );
        d.revived(true, t0);
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(d.decide(3, t1), DemandAction::ReviveAt(t0 + second));
        // Nothing new happens, but the wanted revive is still owed when the timer fires.
        assert_eq!(d.decide(3, t0 + second), DemandAction::Revive);
    }

    #[test]
    fn unknown_state_after_reregistration_is_reasserted() {
        let t0 = Instant::now();
        let mut d = DemandState::new(Duration::from_secs(1));
        d.registered(true, 0);
        assert_eq!(d.decide(0, t0), DemandAction::Suppress);
        let mut d = DemandState::new(Duration::from_secs(1));
        d.registered(true, 4);
        assert_eq!(d.decide(4, t0), DemandAction::Revive);
    }

    #[test]
    fn failed_calls_are_retried() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut d = DemandState::new(second);
        d.registered(false, 0);
        assert_eq!(d.decide(0, t0), DemandAction::Suppress);
        d.suppressed(false);
        assert_eq!(d.decide(0, t0), DemandAction::Suppress);
        d.suppressed(true);
        assert_eq!(d.decide(1, t0), DemandAction::Revive);
        d.revived(false, t0);
        assert_eq!(d.decide(1, t0), DemandAction::ReviveAt(t0 + second));
    }
}
