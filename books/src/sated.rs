//! Offers sized to demand. A framework may say how many more tasks it wants launched
//! (`pending_tasks` on a revive, an accept or a decline). While its outstanding offers hold
//! that many tasks of its demand hint, the allocator holds it back (`sated`), so the agents it
//! would only decline go to frameworks that want them, and are not offered, declined and
//! filtered over and over.
//!
//! Each offer records how many tasks it holds when it is made, so the count stays exact
//! however the hint changes later. An offer holds at least one task (one too small for the
//! hint still counts as one), so a bound is always reached; without a hint each offer counts
//! as one task.

use protocol::{FrameworkId, Resources};

use super::{Effect, Effects, FrameworkRecord, State, StateError};

/// How many tasks of `demand` fit in `offered` (at least one; one without a demand).
pub(crate) fn tasks_held(demand: Option<&Resources>, offered: &Resources) -> u32 {
    let Some(demand) = demand.filter(|d| !d.is_empty()) else {
        return 1;
    };
    demand
        .iter()
        .filter(|(_, need)| *need > 0)
        .map(|(name, need)| offered.millis(name.as_str()) / need)
        .min()
        .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX).max(1))
}

impl FrameworkRecord {
    /// Whether its outstanding offers hold every task it said it still wants: the allocator
    /// holds it back then (the books keep the two equal after every call).
    pub(crate) fn is_sated(&self) -> bool {
        self.pending_tasks
            .is_some_and(|wanted| self.offered_tasks >= wanted)
    }

    /// An offer holding `holds` tasks is being made to it, in an allocation run; returns
    /// whether that holds it back now (the allocator then holds it back itself).
    pub(crate) fn offer_made(&mut self, holds: u32) -> bool {
        let was = self.is_sated();
        self.offered_tasks = self.offered_tasks.saturating_add(holds);
        !was && self.is_sated()
    }
}

impl State {
    /// Records how many more tasks the framework wants launched: `Some(n)` holds it back from
    /// offers while its outstanding offers hold `n` tasks of its demand hint; `None` lifts the
    /// bound. Changes nothing for an unknown or removed framework (the error says which).
    pub fn want_tasks(
        &mut self,
        id: FrameworkId,
        pending: Option<u32>,
        fx: &mut Effects,
    ) -> Result<(), StateError> {
        let fw = self.live_framework_mut(id)?;
        fw.pending_tasks = pending;
        if self.refresh_sated(id) == Some(false) {
            fx.push(Effect::Allocate);
        }
        Ok(())
    }

    /// An offer of `id` holding `holds` tasks ended (accepted, declined, rescinded, expired).
    /// When that lets the framework be offered again, an allocation run is asked for.
    pub(crate) fn offer_gone(&mut self, id: FrameworkId, holds: u32, fx: &mut Effects) {
        if let Some(fw) = self.frameworks.get_mut(id) {
            fw.offered_tasks = fw.offered_tasks.saturating_sub(holds);
        }
        if self.refresh_sated(id) == Some(false) {
            fx.push(Effect::Allocate);
        }
    }

    /// Brings the allocator's flag in line with the framework's count; returns the new state
    /// when it changed.
    pub(crate) fn refresh_sated(&mut self, id: FrameworkId) -> Option<bool> {
        let sated = self.frameworks.get(id)?.is_sated();
        if self.ledger.allocator().is_sated(id)? == sated {
            return None;
        }
        self.ledger.set_sated(id, sated);
        Some(sated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Resources {
        s.parse().unwrap()
    }

    #[test]
    fn an_offer_holds_the_tasks_of_the_hint_that_fit_and_at_least_one() {
        let hint = r("cpus=1,mem=1024");
        assert_eq!(tasks_held(Some(&hint), &r("cpus=8,mem=4096")), 4);
        assert_eq!(tasks_held(Some(&hint), &r("cpus=8,mem=65536,disk=9")), 8);
        assert_eq!(
            tasks_held(Some(&hint), &r("cpus=0.5,mem=512")),
            1,
            "too small"
        );
        assert_eq!(tasks_held(Some(&hint), &r("mem=4096")), 1, "a kind missing");
        assert_eq!(tasks_held(None, &r("cpus=8")), 1, "no hint: one per offer");
        assert_eq!(tasks_held(Some(&Resources::new()), &r("cpus=8")), 1);
    }
}
