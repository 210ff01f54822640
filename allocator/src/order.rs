//! The non-blocked children of one node in `(weighted share, position)` order, for the fast
//! path's caches: a sorted vector of `(share key, position, child)` entries.
//!
//! A change of one leaf's allocation moves one entry per ancestor, usually by a few places: a
//! sorted vector finds it by binary search and shifts only the entries between its old and its
//! new place, where a B-tree set would take it out and put it back (two searches and node
//! rebalancing). Reading the minimum and walking in order are plain slice accesses.

/// One child's entry: its weighted share as ordered bits, its position among its siblings (the
/// tie-break), its node slot. Entries are unique: positions differ between siblings.
pub(crate) type Entry = (u64, u32, u32);

/// The entries of one node's non-blocked children, sorted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Order {
    entries: Vec<Entry>,
}

impl Order {
    /// The least entry (the minimum child), if any.
    #[inline]
    pub(crate) fn first(&self) -> Option<&Entry> {
        self.entries.first()
    }

    /// Whether no child is in the order.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, least first.
    #[inline]
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Entry> {
        self.entries.iter()
    }

    /// Adds `e` (not present) in its place.
    pub(crate) fn insert(&mut self, e: Entry) {
        let at = self.entries.partition_point(|x| *x < e);
        self.entries.insert(at, e);
    }

    /// Takes `e` out, if present.
    pub(crate) fn remove(&mut self, e: &Entry) {
        if let Ok(at) = self.entries.binary_search(e) {
            self.entries.remove(at);
        }
    }

    /// Replaces `old` by `new` (not present), moving only the entries between their places.
    /// Without `old`, `new` is simply inserted.
    pub(crate) fn replace(&mut self, old: &Entry, new: Entry) {
        let Ok(from) = self.entries.binary_search(old) else {
            self.insert(new);
            return;
        };
        if new < *old {
            let to = self.entries[..from].partition_point(|x| *x < new);
            self.entries[to..=from].rotate_right(1);
            self.entries[to] = new;
        } else {
            let to = from + 1 + self.entries[from + 1..].partition_point(|x| *x < new);
            self.entries[from..to].rotate_left(1);
            self.entries[to - 1] = new;
        }
    }

    /// Sorts entries added with [`Order::push_unsorted`].
    pub(crate) fn sort(&mut self) {
        self.entries.sort_unstable();
    }

    /// Appends `e` without keeping the order; [`Order::sort`] must follow before any read.
    pub(crate) fn push_unsorted(&mut self, e: Entry) {
        self.entries.push(e);
    }
}

impl<'a> IntoIterator for &'a Order {
    type Item = &'a Entry;
    type IntoIter = std::slice::Iter<'a, Entry>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
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
                prop_assert!(order.iter().eq(model.iter()));
                prop_assert_eq!(order.first(), model.first());
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
        assert_eq!(order.first(), Some(&(1, 1, 1)));
        assert_eq!(order.iter().map(|e| e.2).collect::<Vec<_>>(), vec![1, 2, 0]);
    }
}
