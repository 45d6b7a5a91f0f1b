//! The nearest-rank percentile.

/// The `q`-quantile (`0.0..=1.0`) of `sorted` (ascending) by the nearest-rank
/// rule: the smallest value with at least `ceil(q * n)` of the `n` values at
/// or below it. `q` outside `0..=1` is clamped (`0` gives the minimum);
/// `None` when `sorted` is empty.
pub fn percentile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    // `q` NaN clamps to NaN and casts to 0: the minimum.
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

#[cfg(test)]
mod tests {
    use super::percentile;
    use proptest::prelude::*;

    #[test]
    fn small_cases() {
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&v, 0.1), Some(1));
        assert_eq!(percentile(&v, 0.11), Some(2));
        assert_eq!(percentile(&v, 0.5), Some(5));
        assert_eq!(percentile(&v, 0.99), Some(10));
        assert_eq!(percentile(&v, 1.0), Some(10));
        assert_eq!(percentile(&v, 7.0), Some(10));
        assert_eq!(percentile(&v, f64::NAN), Some(1));
        assert_eq!(percentile::<u32>(&[], 0.5), None);
    }

    proptest! {
        /// The nearest-rank definition itself: at least `ceil(q n)` values
        /// are at or below the answer, and fewer are strictly below it.
        #[test]
        fn is_the_nearest_rank(mut v in prop::collection::vec(0u32..50, 1..200), q in 0.0f64..=1.0) {
            v.sort_unstable();
            let p = percentile(&v, q).unwrap();
            let want = ((q * v.len() as f64).ceil() as usize).max(1);
            prop_assert!(v.iter().filter(|&&x| x <= p).count() >= want);
            prop_assert!(v.iter().filter(|&&x| x < p).count() < want);
        }

        /// A higher quantile never gives a smaller value.
        #[test]
        fn is_monotone_in_q(mut v in prop::collection::vec(any::<u64>(), 1..100), a in 0.0f64..=1.0, b in 0.0f64..=1.0) {
            v.sort_unstable();
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(percentile(&v, lo) <= percentile(&v, hi));
        }
    }
}
