//! Network partitions: what a framework is told about the tasks of an agent the coordinator
//! cannot reach, and how long those tasks may run on without it.
//!
//! The coordinator declares an agent lost when it misses its heartbeats for the *agent timeout*
//! (`heartbeat interval × max missed heartbeats`), which it tells the agent at registration
//! ([`crate::messages::AgentRegistered::agent_timeout_s`]). What its tasks become depends on
//! the framework:
//! - A framework that is not partition-aware is told `lost`. The agent kills such tasks itself
//!   once it has not reached the coordinator for [`fence_after`] (a little less than the agent
//!   timeout, counted from the *sending* of its last acknowledged heartbeat, so the kill is
//!   always ordered before the coordinator's verdict), and the coordinator kills any it still
//!   finds when the agent returns. So `lost` is true: the task no longer runs, and a framework
//!   may launch it again safely.
//! - A framework that declares [`PARTITION_AWARE`] is told `unreachable`; the task keeps
//!   running and comes back `running` (or with its real end) when the agent returns. After the
//!   framework's partition timeout (`partition_timeout_s`, [`DEFAULT_PARTITION_TIMEOUT_S`]
//!   unless set) it becomes `gone`: the agent has killed it by then on its own, and the
//!   coordinator kills it if the agent returns with it.
//!
//! Nothing here does I/O or reads a clock.

use std::time::Duration;

/// The capability string of a framework whose tasks go `unreachable` (not `lost`) while their
/// agent is cut off, as Mesos' `PARTITION_AWARE`.
pub const PARTITION_AWARE: &str = "partition_aware";

/// How long a partition-aware framework's tasks stay `unreachable` before they are `gone`,
/// unless it sets `partition_timeout_s`.
pub const DEFAULT_PARTITION_TIMEOUT_S: f64 = 900.0;

/// The longest partition timeout accepted: a week.
pub const MAX_PARTITION_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;

/// Whether `capabilities` declares [`PARTITION_AWARE`] (case-insensitively, so Mesos'
/// `PARTITION_AWARE` spelling maps to the same).
pub fn declares_partition_aware(capabilities: &[String]) -> bool {
    capabilities
        .iter()
        .any(|c| c.eq_ignore_ascii_case(PARTITION_AWARE))
}

/// Checks a requested partition timeout: finite, more than 0, at most
/// [`MAX_PARTITION_TIMEOUT_S`]. The message names the field.
pub fn check_partition_timeout(secs: f64) -> Result<(), PartitionTimeoutError> {
    if !secs.is_finite() || secs <= 0.0 || secs > MAX_PARTITION_TIMEOUT_S {
        return Err(PartitionTimeoutError { secs });
    }
    Ok(())
}

/// A `partition_timeout_s` out of range; the message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "partition_timeout_s must be more than 0 and at most {MAX_PARTITION_TIMEOUT_S} (a week), got {secs}"
)]
pub struct PartitionTimeoutError {
    /// The value given.
    pub secs: f64,
}

/// How long after the sending of its last acknowledged heartbeat an agent kills a task on its
/// own: `agent_timeout` less a margin for a non-partition-aware framework's task
/// (`partition_timeout` `None`), `agent_timeout + partition_timeout` less the same margin for
/// a partition-aware one's. The margin is one heartbeat interval, but at most half the agent
/// timeout, and covers the kill itself and timer delays: the agent's kill is asked for before
/// the coordinator can have declared the task `lost` (or `gone`).
pub fn fence_after(
    agent_timeout: Duration,
    heartbeat_interval: Duration,
    partition_timeout: Option<Duration>,
) -> Duration {
    let margin = heartbeat_interval.min(agent_timeout / 2);
    (agent_timeout + partition_timeout.unwrap_or_default()).saturating_sub(margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capability_is_case_insensitive() {
        assert!(declares_partition_aware(&["PARTITION_AWARE".into()]));
        assert!(declares_partition_aware(&[
            "gpu_resources".into(),
            "partition_aware".into()
        ]));
        assert!(!declares_partition_aware(&["gpu_resources".into()]));
    }

    #[test]
    fn partition_timeouts_are_bounded() {
        assert!(check_partition_timeout(0.5).is_ok());
        assert!(check_partition_timeout(MAX_PARTITION_TIMEOUT_S).is_ok());
        for bad in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            MAX_PARTITION_TIMEOUT_S + 1.0,
        ] {
            let e = check_partition_timeout(bad).unwrap_err().to_string();
            assert!(e.contains("partition_timeout_s"), "{e}");
        }
    }

    #[test]
    fn the_fence_comes_a_margin_before_the_verdict() {
        let s = Duration::from_secs;
        // 2 s heartbeats, 3 missed: lost after 6 s; the agent kills after 4 s.
        assert_eq!(fence_after(s(6), s(2), None), s(4));
        // One missed heartbeat: the margin is at most half the timeout.
        assert_eq!(fence_after(s(2), s(2), None), s(1));
        // Partition-aware: gone 60 s after lost; killed 2 s before.
        assert_eq!(fence_after(s(6), s(2), Some(s(60))), s(64));
        assert!(fence_after(s(75), s(15), None) < s(75));
    }
}
