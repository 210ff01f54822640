//! [`IdSource`]: where the books' generated ids come from. Random UUIDs in production; in
//! tests a counter per kind of id, so a test knows every id the books will hand out and can
//! assert effects exactly (`assert_eq!(fx, [Effect::…])`).

use protocol::{AgentId, FrameworkId, OfferId, UpdateId};
use uuid::Uuid;

/// Makes the ids of offers, status updates, and of frameworks and agents registering
/// without one.
#[derive(Debug, Clone)]
pub struct IdSource {
    counters: Option<Counters>,
}

#[derive(Debug, Clone, Default)]
struct Counters {
    offers: u128,
    updates: u128,
    frameworks: u128,
    agents: u128,
}

impl Default for IdSource {
    fn default() -> Self {
        Self::random()
    }
}

impl IdSource {
    /// Random (v4) UUIDs: what a coordinator uses.
    pub fn random() -> Self {
        Self { counters: None }
    }

    /// Counters: the `n`th id of each kind (from 1) is [`IdSource::nth`]`(n)`.
    pub fn sequential() -> Self {
        Self {
            counters: Some(Counters::default()),
        }
    }

    /// The UUID of the `n`th id of a kind made by [`IdSource::sequential`].
    pub fn nth(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn next(&mut self, pick: fn(&mut Counters) -> &mut u128) -> Uuid {
        match &mut self.counters {
            None => protocol::ids::random_uuid(),
            Some(c) => {
                let n = pick(c);
                *n += 1;
                Self::nth(*n)
            }
        }
    }

    /// A new offer id.
    pub fn offer_id(&mut self) -> OfferId {
        OfferId(self.next(|c| &mut c.offers))
    }

    /// A new update id (for a status the coordinator makes).
    pub fn update_id(&mut self) -> UpdateId {
        UpdateId(self.next(|c| &mut c.updates))
    }

    /// A new framework id.
    pub fn framework_id(&mut self) -> FrameworkId {
        FrameworkId(self.next(|c| &mut c.frameworks))
    }

    /// A new agent id.
    pub fn agent_id(&mut self) -> AgentId {
        AgentId(self.next(|c| &mut c.agents))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_count_per_kind() {
        let mut ids = IdSource::sequential();
        assert_eq!(ids.offer_id(), OfferId(IdSource::nth(1)));
        assert_eq!(ids.offer_id(), OfferId(IdSource::nth(2)));
        assert_eq!(ids.update_id(), UpdateId(IdSource::nth(1)));
        assert_eq!(ids.agent_id(), AgentId(IdSource::nth(1)));
    }

    #[test]
    fn random_ids_differ() {
        let mut ids = IdSource::random();
        assert_ne!(ids.offer_id(), ids.offer_id());
    }
}
