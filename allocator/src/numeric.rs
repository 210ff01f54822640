//! The H-DRF arithmetic shared by the reference and the fast path.
//!
//! Vectors are measured in *share units*: `x_j = U_j / R_j` as fixed point with `1.0 = 2^62`
//! (`u64`), only for the kinds of `Y` (those non-zero in `W` and in the capacity). Every vector
//! in the tree is at most its subtree's plain sum, so at most the capacity: no overflow.
//!
//! For a node with vector `x` and weight `w`: `s = max_j x_j`, the weighted share `ws = s / w`
//! (`f64`), and its *direction* `t = x * w / s * 2^42` (zero when `s = 0`; at most `2^62` since
//! `w <= 1e6 < 2^20`). A role's vector is `x = M * T / 2^42 + G` where `M` is the minimum `ws`
//! among its non-blocked children, `T` the sum of their directions and `G` the sum of its blocked
//! children's vectors. (Scaling child `c` to weighted share `M` is
//! `x_c * M * w_c / s_c = M * t_c / 2^42`.) `T` and `G` are integer sums, so they do not depend
//! on the order they are summed in: a cached sum can be corrected by subtracting and adding terms
//! and still be bit-identical to summing afresh, which is what lets the fast path agree exactly
//! with the reference. Rounding happens only where a value is derived from its own inputs
//! (`x_leaf`, `t`, `M * T`), identically in both.

/// `1.0` in share units.
pub(crate) const ONE_SHIFT: u32 = 62;
/// The scale of directions: `2^42`, so that `w * 2^42 < 2^62` for every valid weight.
const DIR_SCALE: f64 = 4_398_046_511_104.0;

/// A leaf's vector entry: `u / r` in share units (`r > 0`; `u <= r` for real allocations).
#[inline]
pub(crate) fn share_units(u: u64, r: u64) -> u64 {
    let v = ((u as u128) << ONE_SHIFT) / r as u128;
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// `s = max_j x_j`.
#[inline]
pub(crate) fn max_entry(x: &[u64]) -> u64 {
    x.iter().copied().max().unwrap_or(0)
}

/// The weighted share `s / w`.
#[inline]
pub(crate) fn weighted(s: u64, w: f64) -> f64 {
    s as f64 / w
}

/// The direction `t = x * w / s * 2^42` into `out` (zero when `s = 0`).
#[inline]
pub(crate) fn direction(x: &[u64], s: u64, w: f64, out: &mut [u64]) {
    if s == 0 {
        out.iter_mut().for_each(|o| *o = 0);
        return;
    }
    let sf = s as f64;
    for (o, &xj) in out.iter_mut().zip(x) {
        *o = ((xj as f64 / sf) * w * DIR_SCALE) as u64;
    }
}

/// A `u128` sum as `f64` (the common case, below `2^64`, without the slow generic conversion).
///
/// The halves are converted and checked apart: written as `u64::try_from(v)` with `v as f64`
/// for the rest, the compiler proves both arms equal and keeps only the slow conversion.
#[inline]
fn wide_to_f64(v: u128) -> f64 {
    let (hi, lo) = ((v >> 64) as u64, v as u64);
    if hi == 0 {
        lo as f64
    } else {
        wide_to_f64_cold(v)
    }
}

/// The generic conversion, kept out of line so that it is not merged with the common case.
#[cold]
#[inline(never)]
fn wide_to_f64_cold(v: u128) -> f64 {
    v as f64
}

/// A role's vector `x = M * T / 2^42 + G` into `out`; `G` alone when no child is non-blocked
/// (`m` infinite).
#[inline]
pub(crate) fn combine(m: f64, t: &[u128], g: &[u64], out: &mut [u64]) {
    if m.is_infinite() {
        out.copy_from_slice(g);
        return;
    }
    for ((o, &tj), &gj) in out.iter_mut().zip(t).zip(g) {
        *o = (((m * wide_to_f64(tj)) / DIR_SCALE) as u64).wrapping_add(gj);
    }
}

/// `a += b` (wrapping: used with matching subtractions, so the final value is exact).
#[inline]
pub(crate) fn add(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.wrapping_add(*y);
    }
}

/// `a -= b` (wrapping; see [`add`]).
#[inline]
pub(crate) fn sub(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.wrapping_sub(*y);
    }
}

/// `a += b` for direction sums.
#[inline]
pub(crate) fn add_wide(a: &mut [u128], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.wrapping_add(*y as u128);
    }
}

/// `a -= b` for direction sums.
#[inline]
pub(crate) fn sub_wide(a: &mut [u128], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.wrapping_sub(*y as u128);
    }
}

/// The kinds of `Y` for `W = w` against capacity `r`: indices with `w_j > 0` and `r_j > 0`.
pub(crate) fn y_kinds(w: &[u64], r: &[u64]) -> Vec<usize> {
    (0..w.len().min(r.len()))
        .filter(|&j| w[j] > 0 && r[j] > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_the_minimum_child_keeps_it() {
        // A child at the minimum weighted share is scaled by 1: x comes back (to f64 precision).
        let x = [share_units(1, 10), share_units(3, 10)];
        let s = max_entry(&x);
        let mut t = [0u64; 2];
        direction(&x, s, 2.0, &mut t);
        let m = weighted(s, 2.0);
        let mut back = [0u64; 2];
        let wide = [t[0] as u128, t[1] as u128];
        combine(m, &wide, &[0, 0], &mut back);
        for (a, b) in back.iter().zip(&x) {
            let rel = (*a as f64 - *b as f64).abs() / *b as f64;
            assert!(rel < 1e-12, "{a} vs {b}");
        }
        combine(f64::INFINITY, &wide, &[5, 6], &mut back);
        assert_eq!(back, [5, 6]);
    }

    #[test]
    fn wide_sums_convert_as_the_generic_conversion_does() {
        for v in [
            0u128,
            1,
            (1 << 53) + 1,
            u64::MAX as u128,
            (u64::MAX as u128) + 1,
            (1 << 100) + (1 << 47) + 3,
            u128::MAX,
        ] {
            assert_eq!(wide_to_f64(v).to_bits(), (v as f64).to_bits(), "{v}");
        }
    }

    #[test]
    fn sums_are_order_independent() {
        let terms = [[3u64, 9], [1 << 60, 7], [5, 1 << 61]];
        let mut a = [0u128; 2];
        for t in &terms {
            add_wide(&mut a, t);
        }
        let mut b = [0u128; 2];
        for t in terms.iter().rev() {
            add_wide(&mut b, t);
        }
        assert_eq!(a, b);
        sub_wide(&mut a, &terms[1]);
        add_wide(&mut a, &terms[1]);
        assert_eq!(a, b);
        let mut c = [1u64, 2];
        sub(&mut c, &[3, 3]);
        add(&mut c, &[3, 3]);
        assert_eq!(c, [1, 2], "wrapping deltas cancel exactly");
    }
}
