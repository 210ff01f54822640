//! The decline-filter store: per agent, a vector of compact filters sorted by framework slot.
//!
//! A filter is 16 bytes: the framework's leaf slot (`u32`), an index into a table of interned
//! refused vectors (`u32`; offers of one agent shape all refuse the same vector, so the table stays
//! tiny), and the expiry (`u64`). Ten million filters (10,000 agents x 1,000 frameworks) take
//! about 160 MB. Expired filters are dropped lazily: each agent remembers its earliest expiry and
//! is swept when a cycle reaches it after that time.

use super::idhash::IdMap;
use super::kinds::{fits, Dense};
use super::tree::Tree;

/// How many filters the unsorted tail of an agent's list holds before it is merged.
const TAIL: usize = 32;

/// How many filters an agent's list holds before it keeps the bitset and the role counts
/// ([`AgentFilters::has`], `under`). Below, a scan of the list answers, and an agent with a filter
/// or two (50,000 agents after one round of declines) does not allocate and zero a bitset as long
/// as the framework slots and a count per role (about 1.2 KiB at 6,000 frameworks).
const DENSE_AT: usize = 16;

/// One decline filter of one framework on one agent (the agent owns the list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Filter {
    /// The framework's leaf slot.
    pub(crate) leaf: u32,
    /// Index of the refused vector in the [`RefusedTable`].
    pub(crate) refused: u32,
    /// Blocks while `now < until`.
    pub(crate) until: u64,
}

/// The filters of one agent.
#[derive(Debug, Default, Clone)]
pub(crate) struct AgentFilters {
    /// At most one per leaf: `list[..sorted]` sorted by `leaf`, then a short unsorted tail.
    pub(crate) list: Vec<Filter>,
    /// The length of the sorted prefix of `list`.
    sorted: usize,
    /// The earliest `until` in `list` (`u64::MAX` when empty): no filter expires before it.
    pub(crate) min_until: u64,
    /// Per role number: how many leaves below that role have a filter in `list` (grown on
    /// demand; empty, so every count reads 0, until the list is dense). A role whose count
    /// equals its number of leaves has every leaf filtered here.
    pub(crate) under: Vec<u32>,
    /// The distinct refused-vector indices in `list`, each with how many filters use it.
    pub(crate) refused_used: Vec<(u32, u32)>,
    /// Bit `leaf` is set when `list` holds a filter of `leaf` (a one-cache-line test instead of a
    /// binary search over a cold list); kept, with `under`, only while the list is dense.
    has: Vec<u64>,
    /// Whether `has` and `under` are kept: from [`DENSE_AT`] filters until the list is empty.
    dense: bool,
}

impl AgentFilters {
    /// An empty list.
    pub(crate) fn new() -> Self {
        Self {
            list: Vec::new(),
            sorted: 0,
            min_until: u64::MAX,
            under: Vec::new(),
            refused_used: Vec::new(),
            has: Vec::new(),
            dense: false,
        }
    }

    /// Whether `list` holds a filter of `leaf` (expired or not).
    #[inline]
    pub(crate) fn has(&self, leaf: u32) -> bool {
        if !self.dense {
            return self.list.iter().any(|f| f.leaf == leaf);
        }
        self.has
            .get(leaf as usize / 64)
            .is_some_and(|w| w & (1 << (leaf % 64)) != 0)
    }

    /// How many leaves below role number `role_ix` have a filter here, counted from the list
    /// when it is not dense.
    #[cfg(test)]
    pub(crate) fn count_under(&self, tree: &Tree, role_ix: u32) -> u32 {
        if self.dense {
            return self.under.get(role_ix as usize).copied().unwrap_or(0);
        }
        let mut n = 0;
        for f in &self.list {
            tree.for_each_role_above(f.leaf, |r| n += u32::from(r == role_ix));
        }
        n
    }

    /// Counts (`add`) or uncounts a filter of `leaf` in its roles and its refused index.
    fn account(&mut self, tree: &Tree, leaf: u32, refused: u32, add: bool) {
        if self.dense {
            self.mark(tree, leaf, add);
        }
        match self.refused_used.iter().position(|&(i, _)| i == refused) {
            Some(p) if add => self.refused_used[p].1 += 1,
            Some(p) => {
                self.refused_used[p].1 -= 1;
                if self.refused_used[p].1 == 0 {
                    self.refused_used.swap_remove(p);
                }
            }
            None if add => self.refused_used.push((refused, 1)),
            None => {}
        }
    }

    /// Starts keeping the bitset and the role counts once the list reaches [`DENSE_AT`]; drops
    /// them (and their memory) when it is empty again.
    fn switch_density(&mut self, tree: &Tree) {
        if !self.dense && self.list.len() >= DENSE_AT {
            self.dense = true;
            for i in 0..self.list.len() {
                self.mark(tree, self.list[i].leaf, true);
            }
        } else if self.dense && self.list.is_empty() {
            self.dense = false;
            self.has = Vec::new();
            self.under = Vec::new();
        }
    }

    /// Sets or clears `leaf`'s bit and counts it in or out of the roles above it.
    fn mark(&mut self, tree: &Tree, leaf: u32, add: bool) {
        let word = leaf as usize / 64;
        if word >= self.has.len() {
            self.has.resize(word + 1, 0);
        }
        if add {
            self.has[word] |= 1 << (leaf % 64);
        } else {
            self.has[word] &= !(1 << (leaf % 64));
        }
        let under = &mut self.under;
        tree.for_each_role_above(leaf, |r| {
            let r = r as usize;
            if r >= under.len() {
                under.resize(r + 1, 0);
            }
            under[r] = if add {
                under[r] + 1
            } else {
                under[r].saturating_sub(1)
            };
        });
    }

    /// The position of `leaf`'s filter in `list`: a short list is scanned; a dense one's bitset
    /// answers "none" in O(1), then a binary search of the sorted prefix, then a scan of the
    /// short unsorted tail.
    fn position(&self, leaf: u32) -> Option<usize> {
        if !self.dense {
            return self.list.iter().position(|f| f.leaf == leaf);
        }
        if !self.has(leaf) {
            return None;
        }
        let (sorted, tail) = self.list.split_at(self.sorted.min(self.list.len()));
        match sorted.binary_search_by_key(&leaf, |f| f.leaf) {
            Ok(i) => Some(i),
            Err(_) => tail
                .iter()
                .position(|f| f.leaf == leaf)
                .map(|i| i + sorted.len()),
        }
    }

    /// The filter of `leaf`, if any (expired or not).
    pub(crate) fn get(&self, leaf: u32) -> Option<&Filter> {
        self.position(leaf).map(|i| &self.list[i])
    }

    /// Adds or replaces `leaf`'s filter (`tree` places the leaf, for the role counts); returns
    /// the refused index it replaced, if any. A new filter is appended to the unsorted tail,
    /// which is merged into the sorted prefix once it holds [`TAIL`] filters, so an insert costs
    /// O(1) plus an amortised O(len / TAIL) instead of a binary search and a move of half the
    /// list.
    pub(crate) fn insert(&mut self, tree: &Tree, filter: Filter) -> Option<u32> {
        self.min_until = self.min_until.min(filter.until);
        match self.position(filter.leaf) {
            Some(i) => {
                let old = self.list[i].refused;
                self.list[i] = filter;
                self.account(tree, filter.leaf, old, false);
                self.account(tree, filter.leaf, filter.refused, true);
                Some(old)
            }
            None => {
                self.list.push(filter);
                self.account(tree, filter.leaf, filter.refused, true);
                self.switch_density(tree);
                if self.list.len() - self.sorted >= TAIL {
                    self.merge_tail();
                }
                None
            }
        }
    }

    /// Sorts the tail and merges it into the sorted prefix in place, from the back (no
    /// allocation; linear in the list's length). A tail longer than [`TAIL`] (after a sweep)
    /// sorts the whole list instead.
    fn merge_tail(&mut self) {
        let n = self.sorted.min(self.list.len());
        let k = self.list.len() - n;
        if k > TAIL {
            self.list.sort_unstable_by_key(|f| f.leaf);
            self.sorted = self.list.len();
            return;
        }
        self.list[n..].sort_unstable_by_key(|f| f.leaf);
        let mut tail = [Filter {
            leaf: 0,
            refused: 0,
            until: 0,
        }; TAIL];
        tail[..k].copy_from_slice(&self.list[n..]);
        // Merge prefix [0, i) and tail [0, j) into [0, i + j), largest first.
        let (mut i, mut j) = (n, k);
        while j > 0 {
            if i > 0 && self.list[i - 1].leaf > tail[j - 1].leaf {
                self.list[i + j - 1] = self.list[i - 1];
                i -= 1;
            } else {
                self.list[i + j - 1] = tail[j - 1];
                j -= 1;
            }
        }
        self.sorted = self.list.len();
    }

    /// Removes `leaf`'s filter; returns it.
    pub(crate) fn remove(&mut self, tree: &Tree, leaf: u32) -> Option<Filter> {
        let i = self.position(leaf)?;
        let f = if i < self.sorted {
            self.sorted -= 1;
            self.list.remove(i)
        } else {
            self.list.swap_remove(i)
        };
        self.account(tree, f.leaf, f.refused, false);
        self.switch_density(tree);
        Some(f)
    }

    /// Drops the filters with `until <= now`, calling `dropped` with each; recomputes `min_until`.
    pub(crate) fn sweep(&mut self, tree: &Tree, now: u64, mut dropped: impl FnMut(&Filter)) {
        if now < self.min_until {
            return;
        }
        let mut gone = Vec::new();
        self.list.retain(|f| {
            let keep = now < f.until;
            if !keep {
                dropped(f);
                gone.push(*f);
            }
            keep
        });
        for f in gone {
            self.account(tree, f.leaf, f.refused, false);
        }
        self.switch_density(tree);
        self.list.sort_unstable_by_key(|f| f.leaf);
        self.sorted = self.list.len();
        self.min_until = self.list.iter().map(|f| f.until).min().unwrap_or(u64::MAX);
    }
}

/// Interned refused vectors with reference counts (so the table does not grow without bound).
#[derive(Debug, Default, Clone)]
pub(crate) struct RefusedTable {
    vecs: Vec<Dense>,
    refs: Vec<u64>,
    index: IdMap<Dense, u32>,
    free: Vec<u32>,
    /// The index `acquire` returned last: the declines of one round of offers mostly refuse
    /// the same vector, found again by one comparison instead of a hash and a lookup.
    last: u32,
}

impl RefusedTable {
    /// Interns `v` (trailing zeros trimmed) and takes a reference to it.
    pub(crate) fn acquire(&mut self, v: &[u64]) -> u32 {
        let end = v.iter().rposition(|&x| x > 0).map_or(0, |p| p + 1);
        let key = &v[..end];
        let last = self.last as usize;
        // A live entry only: a released one's vector is emptied, and may be reused.
        if self.refs.get(last).is_some_and(|&r| r > 0) && self.vecs[last] == key {
            self.refs[last] += 1;
            return self.last;
        }
        if let Some(&i) = self.index.get(key) {
            self.refs[i as usize] += 1;
            self.last = i;
            return i;
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.vecs[i as usize] = key.to_vec();
                self.refs[i as usize] = 1;
                i
            }
            None => {
                self.vecs.push(key.to_vec());
                self.refs.push(1);
                (self.vecs.len() - 1) as u32
            }
        };
        self.index.insert(key.to_vec(), i);
        self.last = i;
        i
    }

    /// Drops one reference to `i`.
    pub(crate) fn release(&mut self, i: u32) {
        let Some(r) = self.refs.get_mut(i as usize) else {
            return;
        };
        *r = r.saturating_sub(1);
        if *r == 0 {
            let v = std::mem::take(&mut self.vecs[i as usize]);
            self.index.remove(&v);
            self.free.push(i);
        }
    }

    /// The vector at `i`.
    pub(crate) fn get(&self, i: u32) -> &[u64] {
        self.vecs.get(i as usize).map_or(&[], |v| v.as_slice())
    }

    /// How many distinct vectors are live.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.index.len()
    }
}

/// True when a filter with refused vector `refused` and expiry `until` blocks an offer of `w` at
/// `now`: it has not expired and `w` fits in what was refused (Mesos semantics: if more has freed
/// up since, the framework may be offered it again). `w_unknown` marks a `w` holding a kind that
/// no refused vector can hold.
pub(crate) fn covers(refused: &[u64], until: u64, w: &[u64], w_unknown: bool, now: u64) -> bool {
    now < until && !w_unknown && fits(w, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_stays_sorted_and_sweeps_expired() {
        let tree = Tree::default();
        let mut f = AgentFilters::new();
        for (leaf, until) in [(5, 10), (1, 20), (3, 5)] {
            assert_eq!(
                f.insert(
                    &tree,
                    Filter {
                        leaf,
                        refused: 0,
                        until
                    }
                ),
                None
            );
        }
        assert_eq!(
            [1, 3, 5].map(|l| f.get(l).map(|x| x.until)),
            [Some(20), Some(5), Some(10)]
        );
        assert!(f.get(2).is_none());
        assert_eq!(f.min_until, 5);
        assert_eq!(
            f.insert(
                &tree,
                Filter {
                    leaf: 3,
                    refused: 7,
                    until: 30
                }
            ),
            Some(0)
        );
        let mut dropped = Vec::new();
        f.sweep(&tree, 10, |x| dropped.push(x.leaf));
        assert_eq!(dropped, vec![5]);
        assert_eq!(f.min_until, 20);
        assert_eq!(f.get(3).map(|x| x.refused), Some(7));
        assert_eq!(f.remove(&tree, 1).map(|x| x.until), Some(20));
        assert!(f.get(1).is_none());
        // Past the tail's length the list is merged and stays findable and sorted.
        for leaf in (10..100).rev() {
            f.insert(
                &tree,
                Filter {
                    leaf,
                    refused: 0,
                    until: 50,
                },
            );
        }
        assert!((10..100).all(|l| f.get(l).is_some_and(|x| x.leaf == l)));
        assert_eq!(f.get(3).map(|x| x.refused), Some(7));
        let sorted = &f.list[..f.sorted];
        assert!(sorted.windows(2).all(|w| w[0].leaf < w[1].leaf));
        assert!(f.sorted >= 90 - TAIL);
        assert_eq!(f.remove(&tree, 50).map(|x| x.leaf), Some(50));
        assert!(f.get(50).is_none() && f.get(51).is_some() && f.get(99).is_some());
    }

    #[test]
    fn role_counts_follow_inserts_removals_and_sweeps() {
        use protocol::{FrameworkId, RolePath};
        let mut tree = Tree::default();
        let role = |p: &str| RolePath::new(p).unwrap_or_else(|e| panic!("{e}"));
        let fw = |i: u128| FrameworkId(uuid::Uuid::from_u128(i));
        let a = tree.add_leaf(fw(1), &role("x/y"));
        let b = tree.add_leaf(fw(2), &role("x/y"));
        let c = tree.add_leaf(fw(3), &role("z"));
        let ix = |p: &str| tree.nodes[tree.roles[p] as usize].role_ix;
        let (x, y, z) = (ix("x"), ix("x/y"), ix("z"));
        let mut f = AgentFilters::new();
        let filter = |leaf, refused, until| Filter {
            leaf,
            refused,
            until,
        };
        f.insert(&tree, filter(a, 0, 10));
        f.insert(&tree, filter(b, 1, 20));
        f.insert(&tree, filter(c, 1, 20));
        assert_eq!((f.count_under(&tree, 0), f.count_under(&tree, x)), (3, 2));
        assert_eq!((f.count_under(&tree, y), f.count_under(&tree, z)), (2, 1));
        assert_eq!(f.refused_used, vec![(0, 1), (1, 2)]);
        assert!(f.has(a) && f.has(b) && f.has(c));
        // Replacing a filter counts nothing twice.
        f.insert(&tree, filter(b, 0, 30));
        assert_eq!((f.count_under(&tree, 0), f.count_under(&tree, y)), (3, 2));
        assert_eq!(f.refused_used, vec![(0, 2), (1, 1)]);
        f.sweep(&tree, 10, |_| {});
        assert_eq!((f.count_under(&tree, 0), f.count_under(&tree, y)), (2, 1));
        f.remove(&tree, c);
        assert_eq!((f.count_under(&tree, 0), f.count_under(&tree, z)), (1, 0));
        assert_eq!(f.refused_used, vec![(0, 1)]);
        assert!(f.has(b) && !f.has(a) && !f.has(c));
    }

    #[test]
    fn bitset_and_role_counts_are_kept_only_for_a_dense_list() {
        use protocol::{FrameworkId, RolePath};
        let mut tree = Tree::default();
        let role = |p: &str| RolePath::new(p).unwrap_or_else(|e| panic!("{e}"));
        let leaves: Vec<u32> = (0..40u128)
            .map(|i| {
                let r = if i % 3 == 0 { "z" } else { "x/y" };
                tree.add_leaf(FrameworkId(uuid::Uuid::from_u128(i + 1)), &role(r))
            })
            .collect();
        let ix = |p: &str| tree.nodes[tree.roles[p] as usize].role_ix;
        let (x, z) = (ix("x"), ix("z"));
        let expect = |f: &AgentFilters, n: usize| {
            let on = &leaves[..n];
            assert!(on.iter().all(|&l| f.has(l)));
            assert!(leaves[n..].iter().all(|&l| !f.has(l)));
            let in_z = (0..n).filter(|i| i % 3 == 0).count() as u32;
            assert_eq!(f.count_under(&tree, 0), n as u32);
            assert_eq!(f.count_under(&tree, z), in_z);
            assert_eq!(f.count_under(&tree, x), n as u32 - in_z);
        };
        let mut f = AgentFilters::new();
        for (n, &leaf) in leaves.iter().enumerate() {
            f.insert(
                &tree,
                Filter {
                    leaf,
                    refused: 0,
                    until: 100 + n as u64,
                },
            );
            assert_eq!(f.dense, n + 1 >= DENSE_AT, "after {} filters", n + 1);
            assert_eq!(f.has.is_empty() && f.under.is_empty(), !f.dense);
            expect(&f, n + 1);
        }
        // Removed from the back, the counts follow; an empty list drops the dense parts.
        for n in (0..leaves.len()).rev() {
            assert!(f.remove(&tree, leaves[n]).is_some());
            expect(&f, n);
        }
        assert!(!f.dense && f.has.capacity() == 0 && f.under.capacity() == 0);
        // A sweep that empties a dense list drops them too.
        for &leaf in &leaves {
            f.insert(
                &tree,
                Filter {
                    leaf,
                    refused: 0,
                    until: 10,
                },
            );
        }
        assert!(f.dense);
        f.sweep(&tree, 10, |_| {});
        assert!(!f.dense && f.list.is_empty() && f.has.capacity() == 0);
    }

    #[test]
    fn refused_table_interns_and_frees() {
        let mut t = RefusedTable::default();
        let a = t.acquire(&[1, 2, 0]);
        let b = t.acquire(&[1, 2]);
        assert_eq!(a, b);
        assert_eq!(t.live(), 1);
        t.release(a);
        assert_eq!(t.get(a), &[1, 2]);
        t.release(a);
        assert_eq!(t.live(), 0);
        let c = t.acquire(&[3]);
        assert_eq!(c, a, "freed slots are reused");
        assert_eq!(t.get(c), &[3]);
        // The last vector acquired is found again, and only while it is live.
        let d = t.acquire(&[4]);
        assert_eq!(t.acquire(&[3]), c);
        assert_eq!(t.acquire(&[3]), c);
        assert_eq!(t.acquire(&[4]), d);
        for _ in 0..3 {
            t.release(c);
        }
        t.release(d);
        t.release(d);
        assert_eq!(t.live(), 0);
        let e = t.acquire(&[]);
        assert_eq!(
            (t.get(e), t.live()),
            (&[][..], 1),
            "a live entry, not the memo of a freed one"
        );
        t.release(e);
        assert_eq!(t.live(), 0);
    }

    #[test]
    fn covers_follows_mesos_semantics() {
        assert!(covers(&[2, 2], 10, &[1, 2], false, 9));
        assert!(!covers(&[2, 2], 10, &[1, 2], false, 10), "expired");
        assert!(!covers(&[2, 2], 10, &[3, 0], false, 0), "more freed up");
        assert!(!covers(&[2, 2], 10, &[1], true, 0), "a kind never refused");
    }
}
