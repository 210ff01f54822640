//! The launch window: how many agents an allocation may offer now, so that the tasks launched
//! and not yet reported by their agents, with what the outstanding offers are expected to
//! launch, stay within a bound. A queue of work then waits in its frameworks, where it can
//! still go to whichever agent frees first, rather than in the launch pipeline, where every
//! task waits behind all the others: accept → running stays as short as the pipeline is.

use crate::State;

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

impl State {
    /// Tasks launched and not yet reported by their agent (`staging`).
    pub fn launching(&self) -> usize {
        self.tasks.staging()
    }

    /// How many agents an allocation part may offer now within a launch window of `window`
    /// tasks: the room left by the tasks launching and by the outstanding offers, each counted
    /// as the tasks an accepted offer has lately launched, divided by that. Zero when the window
    /// is full; no bound when `window` is 0.
    pub fn admissible_agents(&self, window: usize) -> usize {
        if window == 0 {
            return usize::MAX;
        }
        let per_offer = self.tasks_per_offer.get();
        let in_flight = self.tasks.staging() as f64 + per_offer * self.offers.len() as f64;
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
}
