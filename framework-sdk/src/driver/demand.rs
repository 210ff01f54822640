//! When to suppress and when to revive offers: a small pure state machine, so it is unit-tested
//! without a coordinator.
//!
//! The rules: a framework with nothing to launch suppresses (it stops receiving offers, so it
//! neither holds nor declines resources others could use); when work appears, or grows, it
//! revives, which also clears its decline filters; revives are rate-limited because a storm of
//! them was a known way to overload Mesos' allocator.
//!
//! The coordinator holds a framework back once its offers hold the tasks it last said it
//! wants (`pending_tasks`), so the driver remembers what it last told and revives whenever
//! the scheduler wants more than that: after launches fail and their tasks are queued again,
//! the coordinator would otherwise go on believing the framework wants nothing and never
//! offer it anything again. A failed launch also asks for a revive (which clears the decline
//! filters set with the answers), backing off while launches keep failing.

use std::time::{Duration, Instant};

use protocol::Backoff;

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
    /// The `pending_tasks` the coordinator last heard from us (`None`: no bound).
    told: Option<usize>,
    /// Counts the answers in a row with a failed launch: each doubles the wait before the
    /// next revive, from the revive interval.
    failures: Backoff,
}

/// The longest wait between revives while launches keep failing, as a multiple of the
/// revive interval (1 s by default: at most 32 s).
const MAX_BACKOFF_MULTIPLE: u32 = 32;

impl DemandState {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            suppressed: None,
            last_pending: 0,
            last_revive: None,
            revive_wanted: false,
            told: None,
            failures: Backoff::new(interval, interval.saturating_mul(MAX_BACKOFF_MULTIPLE)),
        }
    }

    /// The coordinator heard `pending` with an answer or a revive.
    pub(crate) fn told(&mut self, pending: Option<usize>) {
        self.told = pending;
    }

    /// Some launches of an answer failed and their tasks are queued again: revive, after a
    /// wait that doubles while launches keep failing.
    pub(crate) fn launch_failed(&mut self) {
        self.failures.fail();
        self.revive_wanted = true;
    }

    /// Tasks have waited long for an offer: revive, whatever the driver believes.
    pub(crate) fn starved(&mut self) {
        self.revive_wanted = true;
    }

    /// An answer launched tasks: the backoff starts over.
    pub(crate) fn launched(&mut self) {
        self.failures.reset();
    }

    /// The wait between revives now.
    fn wait(&self) -> Duration {
        // No failure yet waits the interval too.
        self.failures.after(self.failures.failures().max(1))
    }

    /// After a registration: a new framework receives offers; a re-registered one's state is
    /// unknown, so the next decision re-asserts it.
    pub(crate) fn registered(&mut self, reregistered: bool, pending: usize) {
        self.suppressed = if reregistered { None } else { Some(false) };
        self.last_pending = pending;
        self.revive_wanted = false;
        // A registration sets no bound; a re-registered framework's last one stands.
        if !reregistered {
            self.told = None;
        }
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
        let told_less = self.told.is_some_and(|told| pending > told);
        if self.suppressed != Some(false) || grew || told_less {
            self.revive_wanted = true;
        }
        if !self.revive_wanted {
            return DemandAction::None;
        }
        match self.last_revive {
            Some(last) if now < last + self.wait() => DemandAction::ReviveAt(last + self.wait()),
            _ => DemandAction::Revive,
        }
    }

    /// Records the outcome of a `suppress` call.
    pub(crate) fn suppressed(&mut self, ok: bool) {
        self.suppressed = if ok { Some(true) } else { None };
    }

    /// Records the outcome of a `revive` call that said `pending`; a failed one is retried
    /// after the interval.
    pub(crate) fn revived(&mut self, ok: bool, pending: Option<usize>, now: Instant) {
        self.last_revive = Some(now);
        if ok {
            self.suppressed = Some(false);
            self.revive_wanted = false;
            self.told = pending;
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
        d.revived(true, None, t0);
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
        d.revived(true, None, t0);
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
    fn a_coordinator_told_fewer_tasks_than_are_wanted_is_told_again() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut d = DemandState::new(second);
        d.registered(false, 20_000);
        // Every task placed: the answers say none is wanted any more.
        assert_eq!(d.decide(0, t0), DemandAction::Suppress);
        d.suppressed(false);
        let mut d = DemandState::new(second);
        d.registered(false, 20_000);
        d.told(Some(0));
        // The launches failed and the tasks are queued again: as many as before, but the
        // coordinator last heard zero.
        assert_eq!(d.decide(20_000, t0), DemandAction::Revive);
        d.revived(true, Some(20_000), t0);
        assert_eq!(
            d.decide(20_000, t0 + second),
            DemandAction::None,
            "told now"
        );
        d.told(Some(5));
        assert_eq!(d.decide(5, t0 + second), DemandAction::None, "it knows");
        assert_eq!(d.decide(6, t0 + second), DemandAction::Revive);
    }

    #[test]
    fn failed_launches_revive_with_a_doubling_wait_that_success_resets() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut d = DemandState::new(second);
        d.registered(false, 3);
        d.launch_failed();
        assert_eq!(d.decide(3, t0), DemandAction::Revive, "the first at once");
        d.revived(true, Some(3), t0);
        d.launch_failed();
        assert_eq!(d.decide(3, t0), DemandAction::ReviveAt(t0 + 2 * second));
        for _ in 0..10 {
            d.launch_failed();
        }
        assert_eq!(
            d.decide(3, t0),
            DemandAction::ReviveAt(t0 + 32 * second),
            "bounded"
        );
        d.launched();
        assert_eq!(d.decide(3, t0), DemandAction::ReviveAt(t0 + second));
        assert_eq!(d.decide(3, t0 + second), DemandAction::Revive, "still owed");
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
        d.revived(false, None, t0);
        assert_eq!(d.decide(1, t0), DemandAction::ReviveAt(t0 + second));
    }
}
