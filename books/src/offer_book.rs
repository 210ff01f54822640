//! [`OfferBook`]: the outstanding offers, and how recently ended ones ended (so a reused offer id
//! is answered "gone, accepted / declined / rescinded / expired" rather than "unknown"). It owns
//! its maps privately: the rules in `offers.rs` add, look up and end offers only through it.
//! It also lists the outstanding offers on each agent, so that rescinding one agent's offers
//! (it registers again, is lost or drains) costs its own offers, not every outstanding one.

use std::collections::{BTreeMap, HashMap};

use protocol::{AgentId, Offer, OfferId};

use super::admission::FreshOffers;
use super::remembered::Remembered;

/// How many ended offers are remembered, to answer 409 (not 404) for a reused offer id.
const ENDED_OFFERS_REMEMBERED: usize = 100_000;

/// An outstanding offer.
#[derive(Debug, Clone)]
pub(crate) struct OfferRecord {
    offer: Offer,
    created_ms: u64,
    expires_ms: u64,
    /// The tasks of its framework's demand hint it held when it was made.
    holds: u32,
}

impl OfferRecord {
    /// The offer as the framework was sent it.
    pub(crate) fn offer(&self) -> &Offer {
        &self.offer
    }

    /// The offer, taking the record apart.
    pub(crate) fn into_offer(self) -> Offer {
        self.offer
    }

    /// The tasks of its framework's demand hint it held when it was made.
    pub(crate) fn holds(&self) -> u32 {
        self.holds
    }

    /// When it expires, on the books' monotonic clock.
    pub(crate) fn expires_ms(&self) -> u64 {
        self.expires_ms
    }
}

/// The outstanding offers by id, and the ends of the last [`ENDED_OFFERS_REMEMBERED`].
#[derive(Debug)]
pub(crate) struct OfferBook {
    outstanding: BTreeMap<OfferId, OfferRecord>,
    /// The outstanding offers on each agent (no empty lists; an agent has one or two).
    by_agent: HashMap<AgentId, Vec<OfferId>>,
    ended: Remembered<OfferId, &'static str>,
    /// The outstanding offers made in the last seconds, for the launch window.
    fresh: FreshOffers,
}

impl Default for OfferBook {
    fn default() -> Self {
        Self {
            outstanding: BTreeMap::new(),
            by_agent: HashMap::new(),
            ended: Remembered::new(ENDED_OFFERS_REMEMBERED),
            fresh: FreshOffers::default(),
        }
    }
}

impl OfferBook {
    /// How many offers are outstanding.
    pub(crate) fn len(&self) -> usize {
        self.outstanding.len()
    }

    /// Records a new outstanding offer, made at `created_ms`, holding `holds` tasks.
    pub(crate) fn insert(&mut self, offer: Offer, created_ms: u64, expires_ms: u64, holds: u32) {
        self.fresh.made(created_ms);
        self.by_agent
            .entry(offer.agent_id)
            .or_default()
            .push(offer.offer_id);
        self.outstanding.insert(
            offer.offer_id,
            OfferRecord {
                offer,
                created_ms,
                expires_ms,
                holds,
            },
        );
    }

    /// How many outstanding offers were made in the last [`FreshOffers`] horizon before
    /// `now_ms`.
    pub(crate) fn fresh(&mut self, now_ms: u64) -> usize {
        self.fresh.count(now_ms)
    }

    /// The outstanding offer `id`.
    pub(crate) fn get(&self, id: &OfferId) -> Option<&OfferRecord> {
        self.outstanding.get(id)
    }

    /// How offer `id` ended, if it ended recently enough to be remembered.
    pub(crate) fn ended(&self, id: &OfferId) -> Option<&'static str> {
        self.ended.get(id).copied()
    }

    /// The outstanding offers, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &OfferRecord> {
        self.outstanding.values()
    }

    /// The ids of the outstanding offers that `keep` selects, by id.
    pub(crate) fn ids_where(&self, keep: impl Fn(&OfferRecord) -> bool) -> Vec<OfferId> {
        self.outstanding
            .iter()
            .filter(|(_, r)| keep(r))
            .map(|(id, _)| *id)
            .collect()
    }

    /// The ids of the outstanding offers on `agent`, by id.
    pub(crate) fn on_agent(&self, agent: AgentId) -> Vec<OfferId> {
        let mut ids = self.by_agent.get(&agent).cloned().unwrap_or_default();
        ids.sort_unstable();
        ids
    }

    /// Takes offer `id` off the books, remembering that it ended `how`; `None` if it is not
    /// outstanding (nothing changes then).
    pub(crate) fn end(&mut self, id: OfferId, how: &'static str) -> Option<OfferRecord> {
        let rec = self.outstanding.remove(&id)?;
        let agent = rec.offer.agent_id;
        if let Some(ids) = self.by_agent.get_mut(&agent) {
            ids.retain(|o| *o != id);
            if ids.is_empty() {
                self.by_agent.remove(&agent);
            }
        }
        self.fresh.ended(rec.created_ms);
        self.ended.remember(id, how);
        Some(rec)
    }
}

#[cfg(test)]
impl OfferBook {
    /// Panics unless the per-agent lists are what the outstanding offers say.
    pub(crate) fn assert_index_agrees(&self) {
        let mut by_agent: HashMap<AgentId, Vec<OfferId>> = HashMap::new();
        for (id, r) in &self.outstanding {
            by_agent.entry(r.offer.agent_id).or_default().push(*id);
        }
        let mut ours = self.by_agent.clone();
        ours.values_mut().for_each(|ids| ids.sort_unstable());
        assert_eq!(ours, by_agent, "offers by agent");
    }
}
