//! Task health checks in the real agent: the verdict of each check feeds a small
//! state machine per task ([`Checker`]), which says when the task's health *changes*; only then
//! does the agent send a status update (`running` with `healthy`), through the engine's journaled,
//! acknowledged update path ([`crate::engine::Engine::health_changed`]).
//!
//! - [`Checker`] (here): grace period, consecutive failures, recovery. Pure; no clock, no I/O.
//! - [`probe`]: running one check: a command as the task's user in its sandbox, or an HTTP GET
//!   on `127.0.0.1:port`, each bounded by the check's timeout.
//!
//! Semantics (as Mesos' `TaskStatus.healthy`): the first passing check makes the task healthy;
//! `consecutive_failures` failing checks in a row make it unhealthy; a passing check after that
//! makes it healthy again. Failures during the grace period (counted from the task's start) are
//! ignored, unless a check has already passed. Simulated agents run no checks (see
//! [`crate::simulated`]).

pub mod probe;

use std::time::Duration;

use protocol::HealthCheck;

/// One task's health as its checks have shown it so far.
#[derive(Debug, Clone)]
pub struct Checker {
    grace: Duration,
    failures_to_unhealthy: u32,
    failures: u32,
    passed_once: bool,
    healthy: Option<bool>,
}

impl Checker {
    /// A checker for this (validated) check; nothing known yet.
    pub fn new(check: &HealthCheck) -> Self {
        Self {
            grace: Duration::try_from_secs_f64(check.grace_period()).unwrap_or_default(),
            failures_to_unhealthy: check.failures().max(1),
            failures: 0,
            passed_once: false,
            healthy: None,
        }
    }

    /// The health known so far (`None` before the first verdict).
    pub fn healthy(&self) -> Option<bool> {
        self.healthy
    }

    /// Takes one check's result, `since_start` after the task started; returns the new health
    /// when it changed.
    pub fn observe(&mut self, passed: bool, since_start: Duration) -> Option<bool> {
        let new = if passed {
            self.failures = 0;
            self.passed_once = true;
            true
        } else {
            if since_start < self.grace && !self.passed_once {
                return None;
            }
            self.failures = self.failures.saturating_add(1);
            if self.failures < self.failures_to_unhealthy {
                return None;
            }
            false
        };
        if self.healthy == Some(new) {
            return None;
        }
        self.healthy = Some(new);
        Some(new)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn checker(grace_s: f64, failures: u32) -> Checker {
        let mut check = HealthCheck::http(80, "/");
        check.grace_period_s = Some(grace_s);
        check.consecutive_failures = Some(failures);
        Checker::new(&check)
    }

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn the_first_pass_is_a_change_and_later_passes_are_not() {
        let mut c = checker(0.0, 3);
        assert_eq!(c.healthy(), None);
        assert_eq!(c.observe(true, s(1)), Some(true));
        assert_eq!(c.observe(true, s(2)), None);
        assert_eq!(c.healthy(), Some(true));
    }

    #[test]
    fn unhealthy_only_after_consecutive_failures() {
        let mut c = checker(0.0, 3);
        c.observe(true, s(1));
        assert_eq!(c.observe(false, s(2)), None);
        assert_eq!(c.observe(false, s(3)), None);
        assert_eq!(c.observe(true, s(4)), None, "a pass resets the count");
        assert_eq!(c.observe(false, s(5)), None);
        assert_eq!(c.observe(false, s(6)), None);
        assert_eq!(c.observe(false, s(7)), Some(false));
        assert_eq!(c.observe(false, s(8)), None, "reported once");
        assert_eq!(c.healthy(), Some(false));
    }

    #[test]
    fn a_task_that_never_passes_becomes_unhealthy() {
        let mut c = checker(0.0, 1);
        assert_eq!(c.observe(false, s(1)), Some(false));
    }

    #[test]
    fn failures_in_the_grace_period_are_ignored() {
        let mut c = checker(10.0, 2);
        for t in 0..10 {
            assert_eq!(c.observe(false, s(t)), None, "in grace at {t}s");
        }
        assert_eq!(c.observe(false, s(10)), None);
        assert_eq!(c.observe(false, s(11)), Some(false));
    }

    #[test]
    fn grace_ends_at_the_first_pass() {
        let mut c = checker(60.0, 1);
        assert_eq!(c.observe(true, s(1)), Some(true));
        assert_eq!(c.observe(false, s(2)), Some(false));
    }

    #[test]
    fn recovery_after_unhealthy() {
        let mut c = checker(0.0, 2);
        c.observe(false, s(1));
        assert_eq!(c.observe(false, s(2)), Some(false));
        assert_eq!(c.observe(true, s(3)), Some(true));
        assert_eq!(c.observe(false, s(4)), None);
        assert_eq!(c.observe(false, s(5)), Some(false));
    }
}
