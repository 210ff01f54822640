//! The non-blocked children of one node in `(weighted share, position)` order, for the fast
//! path's caches: a sorted vector of `(share key, position, child)` entries.
//!
//! A change of one leaf's allocation moves one entry per ancestor, usually by a few places: a
//! sorted vector finds it by binary search and shifts only the entries between its old and its
//! new place (a linear walk: a child whose share jumps far in a long order pays the distance), where a B-tree set would take it out and put it back (two searches and node
//! rebalancing). Reading the minimum and walking in order are plain slice accesses. Each entry
//! is packed into one `u128` whose integer order is the entries' order, so a comparison is one
//! wide compare rather than three.

/// One child's entry: its weighted share as ordered bits, its position among its siblings (the
/// tie-break), its node slot. Entries are unique: positions differ between siblings.
pub(crate) type Entry = (u64, u32, u32);

/// The entries of one node's non-blocked children, sorted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Order {
    entries: Vec<u128>,
}

/// `e` as one integer ordered as the entries are.
#[inline]
fn pack(e: Entry) -> u128 {
    (e.0 as u128) << 64 | (e.1 as u128) << 32 | e.2 as u128
}

/// The entry packed by [`pack`].
#[inline]
fn unpack(k: u128) -> Entry {
    ((k >> 64) as u64, (k >> 32) as u32, k as u32)
}

impl Order {
    /// The least entry (the minimum child), if any.
    #[inline]
    pub(crate) fn first(&self) -> Option<Entry> {
        self.entries.first().map(|&k| unpack(k))
    }

    /// Whether no child is in the order.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, least first.
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        self.entries.iter().map(|&k| unpack(k))
    }

    /// Adds `e` (not present) in its place.
    pub(crate) fn insert(&mut self, e: Entry) {
        let e = pack(e);
        let at = self.entries.partition_point(|x| *x < e);
        self.entries.insert(at, e);
    }

    /// Takes `e` out, if present.
    pub(crate) fn remove(&mut self, e: &Entry) {
        if let Ok(at) = self.entries.binary_search(&pack(*e)) {
            self.entries.remove(at);
        }
    }

    /// Replaces `old` by `new` (not present), moving only the entries between their places.
    /// Without `old`, `new` is simply inserted.
    pub(crate) fn replace(&mut self, old: &Entry, new: Entry) {
        let Ok(from) = self.entries.binary_search(&pack(*old)) else {
            self.insert(new);
            return;
        };
        let (old, new) = (pack(*old), pack(new));
        // Shift the entries between the two places by one, one by one (they are few; a
        // general rotation costs more than the move itself).
        let e = &mut self.entries;
        let mut at = from;
        if new < old {
            while at > 0 && e[at - 1] > new {
                e[at] = e[at - 1];
                at -= 1;
            }
        } else {
            while at + 1 < e.len() && e[at + 1] < new {
                e[at] = e[at + 1];
                at += 1;
            }
        }
        e[at] = new;
    }

    /// Sorts entries added with [`Order::push_unsorted`].
    pub(crate) fn sort(&mut self) {
        self.entries.sort_unstable();
    }

    /// Appends `e` without keeping the order; [`Order::sort`] must follow before any read.
    pub(crate) fn push_unsorted(&mut self, e: Entry) {
        self.entries.push(pack(e));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Inserts, removals and replacements keep the same entries, in the same order, as a
        /// B-tree set given the same operations.
        #[test]
        fn follows_a_btree_set(
            ops in prop::collection::vec((0u8..3, 0u64..8, 0u32..6, 0u64..8), 0..200),
        ) {
            let mut order = Order::default();
            let mut model = BTreeSet::new();
            // Child `c` has position `c`: at most one entry per child, as in the tree.
            let mut key_of = [None; 6];
            for (op, share, child, new_share) in ops {
                let c = child as usize;
                match (op, key_of[c]) {
                    (0, None) => {
                        let e = (share, child, child);
                        order.insert(e);
                        model.insert(e);
                        key_of[c] = Some(share);
                    }
                    (1, Some(s)) => {
                        let e = (s, child, child);
                        order.remove(&e);
                        model.remove(&e);
                        key_of[c] = None;
                    }
                    (_, Some(s)) => {
                        let (old, new) = ((s, child, child), (new_share, child, child));
                        order.replace(&old, new);
                        model.remove(&old);
                        model.insert(new);
                        key_of[c] = Some(new_share);
                    }
                    _ => {}
                }
                prop_assert!(order.iter().eq(model.iter().copied()));
                prop_assert_eq!(order.first(), model.first().copied());
                prop_assert_eq!(order.is_empty(), model.is_empty());
            }
        }
    }

    #[test]
    fn unsorted_pushes_then_sort() {
        let mut order = Order::default();
        for e in [(3, 0, 0), (1, 2, 2), (1, 1, 1)] {
            order.push_unsorted(e);
        }
        order.sort();
        assert_eq!(order.first(), Some((1, 1, 1)));
        assert_eq!(order.iter().map(|e| e.2).collect::<Vec<_>>(), vec![1, 2, 0]);
    }
}
