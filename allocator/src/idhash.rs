//! A fast, deterministic hasher for the allocator's internal maps.
//!
//! Keys are UUIDs (already random) and short integer vectors, and the maps are never exposed to
//! attacker-chosen collisions in a way that matters more than elsewhere in the coordinator (ids
//! are coordinator-chosen UUIDs), so SipHash's cost is not worth paying on every allocate /
//! release. This is the FxHash mixing step (rotate, xor, multiply) over 8-byte words.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style hasher.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IdHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    /// A final avalanche (MurmurHash3's fmix64): the mixing step alone leaves the low bits
    /// constant for keys whose entropy sits in the high bytes of a word (big-endian UUIDs).
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A `HashMap` with [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_work_and_hash_all_bytes() {
        let mut m: IdMap<Vec<u64>, u32> = IdMap::default();
        m.insert(vec![1, 2], 1);
        m.insert(vec![2, 1], 2);
        assert_eq!(m.get(&vec![1, 2]), Some(&1));
        assert_eq!(m.get(&vec![2, 1]), Some(&2));
        let mut a = IdHasher::default();
        a.write(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let mut b = IdHasher::default();
        b.write(&[1, 2, 3, 4, 5, 6, 7, 8, 10]);
        assert_ne!(a.finish(), b.finish());
        // Keys differing only in a word's high byte still differ in the low bits.
        let low = |x: u64| {
            let mut h = IdHasher::default();
            h.write_u64(x << 56);
            h.finish() & 0xff
        };
        let distinct: std::collections::HashSet<u64> = (0..64).map(low).collect();
        assert!(
            distinct.len() > 32,
            "low bits poorly mixed: {}",
            distinct.len()
        );
    }
}
