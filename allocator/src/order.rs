//! The non-blocked children of one node in `(weighted share, position)` order, for the fast
//! path's caches: `(share key, position, child)` entries, each packed into one `u128` whose
//! integer order is the entries' order (one wide compare rather than three).
//!
//! A change of one leaf's allocation moves one entry per ancestor. A node with a few children
//! (up to [`SMALL`]) keeps them in a sorted vector: a binary search finds the entry and only the
//! entries between its old and its new place shift, where a B-tree set would take it out and put
//! it back (two searches and node rebalancing). A node with more (a flat tree of a thousand
//! frameworks under the root) keeps a B-tree set, whose move costs O(log children) however far
//! the entry goes, instead of shifting up to every entry of a long vector.

use std::collections::{btree_set, BTreeSet};

/// One child's entry: its weighted share as ordered bits, its position among its siblings (the
/// tie-break), its node slot. Entries are unique: positions differ between siblings.
pub(crate) type Entry = (u64, u32, u32);

/// The most entries kept in a sorted vector; past it, a B-tree set.
const SMALL: usize = 64;

/// The entries of one node's non-blocked children, sorted.
#[derive(Debug, Clone)]
pub(crate) enum Order {
    /// Up to [`SMALL`] entries (more only between [`Order::push_unsorted`] and
    /// [`Order::sort`]), sorted.
    Small(Vec<u128>),
    /// More than [`SMALL`] entries.
    Large(BTreeSet<u128>),
}

impl Default for Order {
    fn default() -> Self {
        Order::Small(Vec::new())
    }
}

/// `e` as one integer ordered as the entries are.
#[inline]
fn pack(e: Entry) -> u128 {
    (e.0 as u128) << 64 | (e.1 as u128) << 32 | e.2 as u128
}

/// The entry packed by [`pack`].
#[inline]
fn unpack(k: &u128) -> Entry {
    ((k >> 64) as u64, (k >> 32) as u32, *k as u32)
}

/// The entries of an [`Order`], least first.
pub(crate) enum Iter<'a> {
    /// Over a sorted vector.
    Small(std::slice::Iter<'a, u128>),
    /// Over a B-tree set.
    Large(btree_set::Iter<'a, u128>),
}

impl Iterator for Iter<'_> {
    type Item = Entry;

    #[inline]
    fn next(&mut self) -> Option<Entry> {
        match self {
            Iter::Small(it) => it.next().map(unpack),
            Iter::Large(it) => it.next().map(unpack),
        }
    }
}

impl Order {
    /// The least entry (the minimum child), if any.
    #[inline]
    pub(crate) fn first(&self) -> Option<Entry> {
        match self {
            Order::Small(v) => v.first().map(unpack),
            Order::Large(set) => set.first().map(unpack),
        }
    }

    /// Whether no child is in the order.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Order::Small(v) => v.is_empty(),
            Order::Large(set) => set.is_empty(),
        }
    }

    /// The entries, least first.
    #[inline]
    pub(crate) fn iter(&self) -> Iter<'_> {
        match self {
            Order::Small(v) => Iter::Small(v.iter()),
            Order::Large(set) => Iter::Large(set.iter()),
        }
    }

    /// Adds `e` (not present) in its place.
    pub(crate) fn insert(&mut self, e: Entry) {
        let e = pack(e);
        match self {
            Order::Small(v) if v.len() < SMALL => {
                let at = v.partition_point(|x| *x < e);
                v.insert(at, e);
            }
            Order::Small(v) => {
                let mut set: BTreeSet<u128> = v.drain(..).collect();
                set.insert(e);
                *self = Order::Large(set);
            }
            Order::Large(set) => {
                set.insert(e);
            }
        }
    }

    /// Takes `e` out, if present.
    pub(crate) fn remove(&mut self, e: &Entry) {
        let e = pack(*e);
        match self {
            Order::Small(v) => {
                if let Ok(at) = v.binary_search(&e) {
                    v.remove(at);
                }
            }
            Order::Large(set) => {
                set.remove(&e);
            }
        }
    }

    /// Replaces `old` by `new` (not present). Without `old`, `new` is simply inserted.
    pub(crate) fn replace(&mut self, old: &Entry, new: Entry) {
        let v = match self {
            Order::Small(v) => v,
            Order::Large(set) => {
                set.remove(&pack(*old));
                set.insert(pack(new));
                return;
            }
        };
        let Ok(from) = v.binary_search(&pack(*old)) else {
            self.insert(new);
            return;
        };
        let (old, new) = (pack(*old), pack(new));
        // Shift the entries between the two places by one (at most `SMALL` of them).
        if new < old {
            let to = v[..from].partition_point(|x| *x < new);
            v.copy_within(to..from, to + 1);
            v[to] = new;
        } else {
            let to = from + 1 + v[from + 1..].partition_point(|x| *x < new);
            v.copy_within(from + 1..to, from);
            v[to - 1] = new;
        }
    }

    /// Appends `e` without keeping the order; [`Order::sort`] must follow before any read.
    pub(crate) fn push_unsorted(&mut self, e: Entry) {
        match self {
            Order::Small(v) => v.push(pack(e)),
            Order::Large(set) => {
                set.insert(pack(e));
            }
        }
    }

    /// Sorts entries added with [`Order::push_unsorted`] (into a B-tree set past [`SMALL`]).
    pub(crate) fn sort(&mut self) {
        if let Order::Small(v) = self {
            if v.len() > SMALL {
                *self = Order::Large(v.drain(..).collect());
            } else {
                v.sort_unstable();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Inserts, removals and replacements keep the same entries, in the same order, as a
        /// B-tree set given the same operations, below and past the vector's size.
        #[test]
        fn follows_a_btree_set(
            ops in prop::collection::vec((0u8..4, 0u64..8, 0u32..100, 0u64..8), 0..600),
        ) {
            let mut order = Order::default();
            let mut model = BTreeSet::new();
            // Child `c` has position `c`: at most one entry per child, as in the tree.
            let mut key_of = [None; 100];
            for (op, share, child, new_share) in ops {
                let c = child as usize;
                match (op, key_of[c]) {
                    (0 | 3, None) => {
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
        // Past the vector's size the entries go to a set, in the same order.
        let mut long = Order::default();
        for c in (0..SMALL as u32 * 2).rev() {
            long.push_unsorted((u64::from(c % 3), c, c));
        }
        long.sort();
        assert!(matches!(long, Order::Large(_)));
        let keys: Vec<Entry> = long.iter().collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(long.first(), Some((0, 0, 0)));
    }
}
