//! The offers a scheduler holds without having answered them, with the time each must be
//! declined by.

use std::collections::HashSet;
use std::time::Instant;

use protocol::OfferId;

/// Held offers in arrival order, with a set for membership (a framework on a big cluster may
/// hold a thousand offers, and checks each one it launches on).
#[derive(Debug, Default)]
pub(crate) struct OfferBook {
    held: Vec<(OfferId, Instant)>,
    ids: HashSet<OfferId>,
}

impl OfferBook {
    pub(crate) fn hold(&mut self, offer_id: OfferId, deadline: Instant) {
        if self.ids.insert(offer_id) {
            self.held.push((offer_id, deadline));
        }
    }

    pub(crate) fn contains(&self, offer_id: OfferId) -> bool {
        self.ids.contains(&offer_id)
    }

    /// Forgets an offer; true when it was held.
    pub(crate) fn remove(&mut self, offer_id: OfferId) -> bool {
        if !self.ids.remove(&offer_id) {
            return false;
        }
        if let Some(at) = self.held.iter().position(|(id, _)| *id == offer_id) {
            self.held.remove(at);
        }
        true
    }

    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    pub(crate) fn ids(&self) -> Vec<OfferId> {
        self.held.iter().map(|(id, _)| *id).collect()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.held.iter().map(|(_, d)| *d).min()
    }

    /// Removes and returns the offers whose deadline has passed.
    pub(crate) fn take_expired(&mut self, now: Instant) -> Vec<OfferId> {
        let (expired, kept): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|(_, d)| *d <= now);
        self.held = kept;
        for (id, _) in &expired {
            self.ids.remove(id);
        }
        expired.into_iter().map(|(id, _)| id).collect()
    }

    pub(crate) fn take_all(&mut self) -> Vec<OfferId> {
        self.ids.clear();
        self.held.drain(..).map(|(id, _)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn expiry_in_deadline_order() {
        let t0 = Instant::now();
        let (a, b) = (OfferId::new(), OfferId::new());
        let mut book = OfferBook::default();
        book.hold(a, t0 + Duration::from_secs(2));
        book.hold(b, t0 + Duration::from_secs(1));
        book.hold(b, t0 + Duration::from_secs(9));
        assert_eq!(book.next_deadline(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(book.take_expired(t0 + Duration::from_secs(1)), vec![b]);
        assert_eq!(book.ids(), vec![a]);
        assert!(book.remove(a));
        assert!(!book.remove(a));
        assert_eq!(book.next_deadline(), None);
    }
}
