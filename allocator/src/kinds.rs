//! Resource kinds interned to small integers, and the dense vectors built on them.
//!
//! Inside the allocator a resource vector is a `Vec<u64>` of thousandths indexed by kind. Kinds
//! are interned the first time they are seen and never forgotten (there are only a handful), so a
//! vector made before a kind existed is simply shorter: a missing entry is zero. Conversion to and
//! from [`protocol::Resources`] happens only at the API boundary.

use protocol::{ResourceName, Resources};

/// A dense resource vector in thousandths; index = kind. Missing trailing entries are zero.
pub(crate) type Dense = Vec<u64>;

/// The interned resource kinds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Kinds {
    /// Few (a handful), so lookups scan linearly: cheaper than hashing the name.
    names: Vec<ResourceName>,
}

impl Kinds {
    /// How many kinds are known.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// The kind index of `name`, interning it if new.
    pub(crate) fn intern(&mut self, name: &ResourceName) -> usize {
        if let Some(i) = self.find(name.as_str()) {
            return i;
        }
        self.names.push(name.clone());
        self.names.len() - 1
    }

    /// The kind index of `name`, if known.
    #[inline]
    fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n.as_str() == name)
    }

    /// `r` as a dense vector, interning new kinds.
    pub(crate) fn dense(&mut self, r: &Resources) -> Dense {
        let pairs: Vec<(usize, u64)> = r.iter().map(|(n, v)| (self.intern(n), v)).collect();
        let mut out = vec![0; self.len()];
        for (i, v) in pairs {
            out[i] = v;
        }
        out
    }

    /// `r` as a dense vector without interning. The flag is true when `r` has a non-zero amount of
    /// a kind no one has mentioned yet (it is left out of the vector).
    pub(crate) fn dense_lookup(&self, r: &Resources) -> (Dense, bool) {
        let mut out = vec![0; self.len()];
        let mut unknown = false;
        for (n, v) in r.iter() {
            match self.find(n.as_str()) {
                Some(i) => out[i] = v,
                None => unknown = true,
            }
        }
        (out, unknown)
    }

    /// A dense vector back as [`Resources`].
    pub(crate) fn resources(&self, v: &[u64]) -> Resources {
        let mut out = Resources::new();
        for (i, &x) in v.iter().enumerate() {
            if x > 0 {
                if let Some(name) = self.names.get(i) {
                    out.set_millis(name.clone(), x);
                }
            }
        }
        out
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
}
