//! [`OfferBook`]: the outstanding offers, and how recently ended ones ended (so a reused offer id
//! is answered "gone, accepted / declined / rescinded / expired" rather than "unknown"). It owns
//! its maps privately: the rules in `offers.rs` add, look up and end offers only through it.

use std::collections::BTreeMap;

use protocol::{Offer, OfferId};

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

    /// When it expires, on the books' monotonic clock.
    pub(crate) fn expires_ms(&self) -> u64 {
        self.expires_ms
    }
}

/// The outstanding offers by id, and the ends of the last [`ENDED_OFFERS_REMEMBERED`].
#[derive(Debug)]
pub(crate) struct OfferBook {
    outstanding: BTreeMap<OfferId, OfferRecord>,
    ended: Remembered<OfferId, &'static str>,
    /// The outstanding offers made in the last seconds, for the launch window.
    fresh: FreshOffers,
}

impl Default for OfferBook {
    fn default() -> Self {
        Self {
            outstanding: BTreeMap::new(),
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

    /// Records a new outstanding offer, made at `created_ms`.
    pub(crate) fn insert(&mut self, offer: Offer, created_ms: u64, expires_ms: u64) {
        self.fresh.made(created_ms);
        self.outstanding.insert(
            offer.offer_id,
            OfferRecord {
                offer,
                created_ms,
                expires_ms,
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

    /// Takes offer `id` off the books, remembering that it ended `how`; `None` if it is not
    /// outstanding (nothing changes then).
    pub(crate) fn end(&mut self, id: OfferId, how: &'static str) -> Option<OfferRecord> {
        let rec = self.outstanding.remove(&id)?;
        self.fresh.ended(rec.created_ms);
        self.ended.remember(id, how);
        Some(rec)
    }
}
