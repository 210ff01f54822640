//! Where the agent stands with the coordinator: registered or not, its id, the heartbeat
//! interval, and the retry delays (capped exponential backoff with jitter).

use std::time::Duration;

use protocol::backoff::{Backoff, SplitMix64};
use protocol::AgentId;

/// The registration phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A registration is due (a timer is set).
    Waiting,
    /// A registration request is in flight.
    Registering,
    /// Registered; heartbeating.
    Registered,
}

/// The agent's session with the coordinator.
#[derive(Debug)]
pub(crate) struct Session {
    pub agent_id: Option<AgentId>,
    pub phase: Phase,
    /// Bumped on every registration, so heartbeats of an older one are dropped.
    pub epoch: u32,
    pub interval: Duration,
    /// Failed registrations in a row.
    pub attempts: u32,
}

impl Session {
    pub fn new(agent_id: Option<AgentId>) -> Self {
        Self {
            agent_id,
            phase: Phase::Waiting,
            epoch: 0,
            interval: Duration::from_secs(15),
            attempts: 0,
        }
    }

    /// The id to stamp on statuses: the coordinator's, or nil before the first registration.
    pub fn stamp(&self) -> AgentId {
        self.agent_id.unwrap_or(AgentId(uuid::Uuid::nil()))
    }
}

/// Where retry delays get their jitter.
#[derive(Debug, Clone)]
pub enum Jitter {
    /// Draws from a small generator with this seed (different per agent, so that many agents
    /// do not retry in lockstep).
    Random(SplitMix64),
    /// No jitter: the full delay (tests).
    Off,
}

impl Jitter {
    /// Jitter drawn from a generator with this seed.
    pub fn seeded(seed: u64) -> Self {
        Jitter::Random(SplitMix64::new(seed))
    }

    /// The delay of the first heartbeat after a registration: drawn uniformly between a tenth
    /// of the interval and the whole of it (without jitter, the whole interval). Agents that
    /// registered together (a fleet's start, every agent after a failover) then heartbeat
    /// spread over the interval instead of in one wave each time, which would load the
    /// coordinator in bursts and have them all notice the next lost leader at once.
    pub fn first_beat(&mut self, interval: Duration) -> Duration {
        interval.mul_f64(self.uniform().map_or(1.0, |u| 0.1 + 0.9 * u))
    }

    /// The next draw in [0, 1); `None` without jitter.
    fn uniform(&mut self) -> Option<f64> {
        match self {
            Jitter::Off => None,
            Jitter::Random(rng) => Some(rng.next_unit()),
        }
    }

    /// The delay after `failures` failures in a row (counting the one just seen) of `backoff`:
    /// equal jitter (see [`protocol::backoff`]), or the whole delay without jitter.
    pub fn backoff(&mut self, backoff: &Backoff, failures: u32) -> Duration {
        let failures = u64::from(failures);
        match self.uniform() {
            Some(unit) => backoff.jittered(failures, unit),
            None => backoff.after(failures),
        }
    }
}

/// The heartbeat interval the coordinator asked for, made sane: at least `min`, at most an hour,
/// 15 s when the value is not a finite positive number.
pub(crate) fn heartbeat_interval(secs: f64, min: Duration) -> Duration {
    Duration::try_from_secs_f64(secs)
        .unwrap_or(Duration::from_secs(15))
        .clamp(min, Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_beats_spread_over_the_interval() {
        let interval = Duration::from_secs(15);
        let mut jitter = Jitter::seeded(11);
        let beats: Vec<Duration> = (0..1000).map(|_| jitter.first_beat(interval)).collect();
        assert!(beats.iter().all(|b| *b >= interval / 10 && *b <= interval));
        // Every tenth of the interval after the first gets some of them.
        for tenth in 1..10 {
            let (lo, hi) = (interval * tenth / 10, interval * (tenth + 1) / 10);
            let n = beats.iter().filter(|b| **b >= lo && **b < hi).count();
            assert!(n > 50, "{n} beats in tenth {tenth}");
        }
        assert_eq!(Jitter::Off.first_beat(interval), interval);
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let mut jitter = Jitter::seeded(7);
        let mut seen = std::collections::HashSet::new();
        for failures in 1..40 {
            let d = jitter.backoff(&b, failures);
            let full = b.after(failures.into());
            assert!(d <= full && d >= full / 2, "after {failures}: {d:?}");
            seen.insert(d);
        }
        assert!(seen.len() > 20, "jittered: {seen:?}");
        assert_eq!(Jitter::Off.backoff(&b, 4), Duration::from_millis(800));
        assert_eq!(Jitter::Off.backoff(&b, 30), b.max);
    }

    #[test]
    fn heartbeat_interval_is_sane() {
        let min = Duration::from_millis(10);
        assert_eq!(heartbeat_interval(0.5, min), Duration::from_millis(500));
        assert_eq!(heartbeat_interval(0.0, min), min);
        assert_eq!(heartbeat_interval(f64::NAN, min), Duration::from_secs(15));
        assert_eq!(heartbeat_interval(-1.0, min), Duration::from_secs(15));
        assert_eq!(heartbeat_interval(1e12, min), Duration::from_secs(3600));
    }
}
