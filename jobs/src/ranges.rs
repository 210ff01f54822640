//! [`Ranges`]: a set of task indexes kept as sorted, disjoint, half-open ranges, so a
//! million-task array that has not started (or has all succeeded) is one pair of numbers.

use serde::{Deserialize, Serialize};

/// A set of `u32` indexes as sorted, disjoint, non-adjacent half-open ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ranges(Vec<(u32, u32)>);

impl Ranges {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The indexes `0..count`.
    pub fn full(count: u32) -> Self {
        if count == 0 {
            Self::new()
        } else {
            Self(vec![(0, count)])
        }
    }

    /// How many indexes the set holds.
    pub fn len(&self) -> u64 {
        self.0.iter().map(|(a, b)| u64::from(b - a)).sum()
    }

    /// True when the set holds nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: u32) -> bool {
        self.find(i).is_ok()
    }

    /// The position of the range holding `i` (`Ok`), or where one starting at `i` would go.
    fn find(&self, i: u32) -> Result<usize, usize> {
        self.0.binary_search_by(|&(a, b)| {
            if b <= i {
                std::cmp::Ordering::Less
            } else if a > i {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
    }

    /// Adds `i`, merging with its neighbours. Returns false when it was there already.
    pub fn insert(&mut self, i: u32) -> bool {
        let at = match self.find(i) {
            Ok(_) => return false,
            Err(at) => at,
        };
        let joins_left = at > 0 && self.0[at - 1].1 == i;
        let joins_right = at < self.0.len() && i.checked_add(1) == Some(self.0[at].0);
        match (joins_left, joins_right) {
            (true, true) => {
                self.0[at - 1].1 = self.0[at].1;
                self.0.remove(at);
            }
            (true, false) => self.0[at - 1].1 = i + 1,
            (false, true) => self.0[at].0 = i,
            // `i + 1` cannot overflow here only when `i < u32::MAX`; indexes are below
            // `MAX_COUNT`, far from it.
            (false, false) => self.0.insert(at, (i, i.saturating_add(1))),
        }
        true
    }

    /// Removes `i`, splitting its range. Returns false when it was not there.
    pub fn remove(&mut self, i: u32) -> bool {
        let Ok(at) = self.find(i) else {
            return false;
        };
        let (a, b) = self.0[at];
        match (a == i, b == i + 1) {
            (true, true) => {
                self.0.remove(at);
            }
            (true, false) => self.0[at].0 = i + 1,
            (false, true) => self.0[at].1 = i,
            (false, false) => {
                self.0[at].1 = i;
                self.0.insert(at + 1, (i + 1, b));
            }
        }
        true
    }

    /// Adds the indexes `start..end`, merging.
    pub fn insert_range(&mut self, start: u32, end: u32) {
        if start >= end {
            return;
        }
        self.0.push((start, end));
        self.0.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(self.0.len());
        for (a, b) in self.0.drain(..) {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.0 = merged;
    }

    /// Removes the indexes `start..end`.
    pub fn remove_range(&mut self, start: u32, end: u32) {
        if start >= end {
            return;
        }
        let mut kept = Vec::with_capacity(self.0.len() + 1);
        for &(a, b) in &self.0 {
            if b <= start || a >= end {
                kept.push((a, b));
                continue;
            }
            if a < start {
                kept.push((a, start));
            }
            if b > end {
                kept.push((end, b));
            }
        }
        self.0 = kept;
    }

    /// The smallest index, if any.
    pub fn first(&self) -> Option<u32> {
        self.0.first().map(|(a, _)| *a)
    }

    /// The indexes in order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().flat_map(|&(a, b)| a..b)
    }

    /// The ranges, as `[start, end)` pairs.
    pub fn spans(&self) -> &[(u32, u32)] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_and_removes_keep_ranges_merged() {
        let mut r = Ranges::new();
        for i in [5, 3, 4, 0, 1, 9] {
            assert!(r.insert(i));
        }
        assert!(!r.insert(4));
        assert_eq!(r.spans(), [(0, 2), (3, 6), (9, 10)]);
        assert_eq!(r.len(), 6);
        assert!(r.insert(2));
        assert_eq!(r.spans(), [(0, 6), (9, 10)]);
        assert!(r.remove(3));
        assert!(!r.remove(3));
        assert!(r.remove(0) && r.remove(9));
        assert_eq!(r.spans(), [(1, 3), (4, 6)]);
        assert_eq!(r.iter().collect::<Vec<_>>(), [1, 2, 4, 5]);
        let mut full = Ranges::full(1_000_000);
        assert!(full.remove(0));
        assert_eq!((full.first(), full.len()), (Some(1), 999_999));
        assert!(full.contains(999_999) && !full.contains(1_000_000));
    }

    #[test]
    fn ranges_of_indexes_are_added_and_removed_whole() {
        let mut r = Ranges::new();
        r.insert_range(10, 20);
        r.insert_range(0, 5);
        r.insert_range(5, 10);
        assert_eq!(r.spans(), [(0, 20)]);
        r.insert_range(30, 40);
        r.insert_range(15, 35);
        assert_eq!(r.spans(), [(0, 40)]);
        r.remove_range(5, 10);
        r.remove_range(38, 100);
        assert_eq!(r.spans(), [(0, 5), (10, 38)]);
        r.remove_range(0, 38);
        assert!(r.is_empty());
        r.insert_range(3, 3);
        assert!(r.is_empty());
    }
}
