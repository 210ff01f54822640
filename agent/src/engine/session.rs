//! Where the agent stands with the coordinator: registered or not, its id, the heartbeat
//! interval, and the retry delays (capped exponential backoff with jitter).

use std::time::Duration;

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
    /// A factor in [0.5, 1] from a small generator with this seed (different per agent, so that
    /// many agents do not retry in lockstep).
    Random(u64),
    /// No jitter: the full delay (tests).
    Off,
}

impl Jitter {
    /// The next factor in [0.5, 1].
    fn factor(&mut self) -> f64 {
        self.uniform().map_or(1.0, |u| 0.5 + 0.5 * u)
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
            Jitter::Random(state) => {
                // splitmix64: tiny, and good enough to spread retries.
                *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = *state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                Some((z >> 11) as f64 / (1u64 << 53) as f64)
            }
        }
    }

    /// Delay before retry number `attempt` (0-based): `min * 2^attempt`, capped at `max`, then
    /// scaled by the jitter factor.
    pub fn backoff(&mut self, attempt: u32, min: Duration, max: Duration) -> Duration {
        let exp = min.saturating_mul(1u32 << attempt.min(20));
        exp.min(max).mul_f64(self.factor())
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
        let mut jitter = Jitter::Random(11);
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
        let min = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        let mut jitter = Jitter::Random(7);
        let mut seen = std::collections::HashSet::new();
        for attempt in 0..40 {
            let d = jitter.backoff(attempt, min, max);
            let full = min.saturating_mul(1 << attempt.min(20)).min(max);
            assert!(d <= full && d >= full / 2, "attempt {attempt}: {d:?}");
            seen.insert(d);
        }
        assert!(seen.len() > 20, "jittered: {seen:?}");
        assert_eq!(Jitter::Off.backoff(3, min, max), Duration::from_millis(800));
        assert_eq!(Jitter::Off.backoff(30, min, max), max);
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
