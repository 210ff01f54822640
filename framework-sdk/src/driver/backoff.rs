//! Reconnection delays: exponential backoff with jitter.

use std::time::Duration;

use rand::Rng;

use super::DriverConfig;

/// Exponential backoff with jitter, so many frameworks do not reconnect in lockstep.
pub(super) struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub(super) fn new(config: &DriverConfig) -> Self {
        let (min, max) = (config.reconnect_backoff_min, config.reconnect_backoff_max);
        Self {
            min,
            max,
            current: min,
        }
    }

    pub(super) fn reset(&mut self) {
        self.current = self.min;
    }

    pub(super) fn next(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current * 2).min(self.max);
        base.mul_f64(rand::thread_rng().gen_range(0.5..=1.0))
    }
}
