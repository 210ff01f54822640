//! Resource kinds interned to small integers, and the dense vectors built on them.
//!
//! Inside the allocator a resource vector is a `Vec<u64>` of thousandths indexed by kind. Kinds
//! are interned the first time they are seen and never forgotten, so a vector made before a kind
//! existed is simply shorter: a missing entry is zero. Conversion to and from
//! [`protocol::Resources`] happens only at the API boundary.
//!
//! A cluster has a handful of kinds, and looking those up by scanning is cheaper than hashing
//! the name; past [`SCAN_KINDS`] a hash map answers instead, so a flood of names costs O(1) per
//! lookup, not a scan. The number of kinds is capped ([`Kinds::max`], default
//! [`DEFAULT_MAX_KINDS`]): every later vector is as long as the number of kinds, so a caller
//! checks [`Kinds::check`] before a change that would intern new ones.

use std::collections::HashMap;

use protocol::{ResourceName, Resources};

use crate::AllocatorError;

/// A dense resource vector in thousandths; index = kind. Missing trailing entries are zero.
pub(crate) type Dense = Vec<u64>;

/// The default cap on distinct resource kinds.
pub const DEFAULT_MAX_KINDS: usize = 256;

/// Up to this many kinds, lookups scan the names; past it, the map answers.
const SCAN_KINDS: usize = 8;

/// The interned resource kinds.
#[derive(Debug, Clone)]
pub(crate) struct Kinds {
    names: Vec<ResourceName>,
    /// The kind indices in name order (the order of a [`Resources`]' amounts).
    by_name: Vec<usize>,
    /// Name to index; kept in step with `names`, consulted past [`SCAN_KINDS`].
    index: HashMap<String, usize>,
    /// The most kinds there may be.
    max: usize,
}

impl Default for Kinds {
    fn default() -> Self {
        Self {
            names: Vec::new(),
            by_name: Vec::new(),
            index: HashMap::new(),
            max: DEFAULT_MAX_KINDS,
        }
    }
}

impl Kinds {
    /// How many kinds are known.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// The cap on kinds.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Sets the cap on kinds (kinds already known stay).
    pub(crate) fn set_max(&mut self, max: usize) {
        self.max = max;
    }

    /// Refuses `r` if interning its names would take the kinds past the cap; changes nothing.
    pub(crate) fn check(&self, r: &Resources) -> Result<(), AllocatorError> {
        let known = self.len();
        // Counting stops at the first name past the cap, so a huge vector costs no more.
        let mut new = 0usize;
        for name in r.names() {
            if self.find(name.as_str()).is_none() {
                new += 1;
                if known + new > self.max {
                    return Err(AllocatorError::TooManyKinds {
                        known,
                        max: self.max,
                    });
                }
            }
        }
        Ok(())
    }

    /// The kind index of `name`, interning it if new (the caller has checked the cap).
    pub(crate) fn intern(&mut self, name: &ResourceName) -> usize {
        if let Some(i) = self.find(name.as_str()) {
            return i;
        }
        let i = self.names.len();
        let at = self.by_name.partition_point(|&j| self.names[j] < *name);
        self.by_name.insert(at, i);
        self.names.push(name.clone());
        self.index.insert(name.as_str().to_owned(), i);
        i
    }

    /// The kind index of `name`, if known.
    #[inline]
    fn find(&self, name: &str) -> Option<usize> {
        if self.names.len() <= SCAN_KINDS {
            // A name handed out by `resources` shares its text with ours: the same address and
            // length is the same name, found without comparing any text.
            self.names
                .iter()
                .position(|n| std::ptr::eq(n.as_str(), name))
                .or_else(|| self.names.iter().position(|n| n.as_str() == name))
        } else {
            self.index.get(name).copied()
        }
    }

    /// `r` as a dense vector, interning new kinds (the caller has checked the cap).
    pub(crate) fn dense(&mut self, r: &Resources) -> Dense {
        for (n, _) in r.iter() {
            self.intern(n);
        }
        self.dense_lookup(r).0
    }

    /// `r` as a dense vector without interning. The flag is true when `r` has a non-zero amount of
    /// a kind no one has mentioned yet (it is left out of the vector).
    pub(crate) fn dense_lookup(&self, r: &Resources) -> (Dense, bool) {
        let mut out = Dense::new();
        let unknown = self.dense_lookup_into(r, &mut out);
        (out, unknown)
    }

    /// [`Kinds::dense_lookup`] into `out` (its old content replaced, its room reused); returns
    /// the flag.
    pub(crate) fn dense_lookup_into(&self, r: &Resources, out: &mut Dense) -> bool {
        out.clear();
        out.resize(self.len(), 0);
        let mut unknown = false;
        for (n, v) in r.iter() {
            match self.find(n.as_str()) {
                Some(i) => out[i] = v,
                None => unknown = true,
            }
        }
        unknown
    }

    /// A dense vector back as [`Resources`]: the amounts are taken in name order, so the vector
    /// is built in one allocation, without a search per name.
    pub(crate) fn resources(&self, v: &[u64]) -> Resources {
        self.by_name
            .iter()
            .filter_map(|&i| match v.get(i) {
                Some(&x) if x > 0 => Some((self.names[i].clone(), x)),
                _ => None,
            })
            .collect()
    }
}

/// Entry `j` of `v` (zero past its end).
#[inline]
pub(crate) fn at(v: &[u64], j: usize) -> u64 {
    v.get(j).copied().unwrap_or(0)
}

/// `a += b`, growing `a` as needed (saturating; unreachable with validated inputs).
pub(crate) fn add_into(a: &mut Dense, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}

/// `a -= b`; the caller has checked `fits(b, a)`.
pub(crate) fn sub_from(a: &mut Dense, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_sub(*y);
    }
}

/// True when every entry of `a` is at most the same entry of `b`.
pub(crate) fn fits(a: &[u64], b: &[u64]) -> bool {
    a.iter().enumerate().all(|(j, &x)| x <= at(b, j))
}

/// True when every entry is zero.
pub(crate) fn is_zero(v: &[u64]) -> bool {
    v.iter().all(|&x| x == 0)
}

/// The dominant share of `v` against `total`, over the kinds where `mask` is set and `total`
/// is non-zero.
pub(crate) fn share_over(v: &[u64], total: &[u64], mask: &[bool]) -> f64 {
    let mut s = 0.0f64;
    for (j, &t) in total.iter().enumerate() {
        if t > 0 && mask.get(j).copied().unwrap_or(false) {
            let x = at(v, j) as f64 / t as f64;
            if x > s {
                s = x;
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_round_trip_and_late_kinds() {
        let mut k = Kinds::default();
        let a = k.dense(&"cpus=2,mem=3".parse().unwrap_or_default());
        let b = k.dense(&"gpus=1".parse().unwrap_or_default());
        assert_eq!(a.len(), 2);
        assert_eq!(b.len(), 3);
        let mut sum = a.clone();
        add_into(&mut sum, &b);
        assert_eq!(k.resources(&sum).to_string(), "cpus=2,gpus=1,mem=3");
        assert!(fits(&a, &sum));
        assert!(!fits(&b, &a));
        sub_from(&mut sum, &b);
        assert_eq!(k.resources(&sum), k.resources(&a));
        let (d, unknown) = k.dense_lookup(&"disk=1,cpus=1".parse().unwrap_or_default());
        assert!(unknown);
        assert_eq!(d, vec![1000, 0, 0]);
    }

    fn names(range: std::ops::Range<usize>) -> Resources {
        let mut r = Resources::new();
        for i in range {
            if let Ok(n) = ResourceName::new(format!("k{i}")) {
                r.set_millis(n, 1);
            }
        }
        r
    }

    #[test]
    fn the_cap_refuses_new_kinds_and_changes_nothing() {
        let mut k = Kinds::default();
        k.set_max(20);
        let first = names(0..20);
        assert_eq!(k.check(&first), Ok(()), "at the cap");
        k.dense(&first);
        assert_eq!(k.len(), 20);
        assert_eq!(
            k.check(&names(5..15)),
            Ok(()),
            "known kinds are always fine"
        );
        assert_eq!(
            k.check(&names(19..21)),
            Err(AllocatorError::TooManyKinds { known: 20, max: 20 })
        );
        assert_eq!(k.len(), 20);
        // Past the scan threshold the map answers, and agrees with the names interned.
        for i in 0..20 {
            let name = format!("k{i}");
            let at = k.find(&name).map(|j| k.names[j].as_str());
            assert_eq!(at, Some(name.as_str()));
        }
        assert_eq!(k.find("k20"), None);
    }
}
