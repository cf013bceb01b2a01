//! Confidence intervals for the change in a per-step figure between two runs, so that `check`
//! can tell a regression from noise.
//!
//! The interval is a percentile bootstrap: both sides are resampled with replacement, the
//! statistic (median or mean) of each resample is taken, and the difference current − baseline
//! is collected; the interval is the central `confidence` share of those differences. The
//! random stream is a fixed-seed SplitMix64, so a check gives the same verdict every time it
//! runs on the same inputs.

/// The q-quantile (0 ≤ q ≤ 1) of `sorted`, interpolated linearly between the two nearest
/// ranks (position q·(n−1), numpy's default), rounded down to the ns. `percentile(v, 0.5)` is
/// [`median`]. `None` when empty. The one percentile every figure uses (op p50/p99, step
/// medians, `check`, `diff`, the rank tables, the benchmarks).
#[must_use]
pub fn percentile(sorted: &[i64], q: f64) -> Option<i64> {
    let last = sorted.len().checked_sub(1)?;
    let at = q.clamp(0.0, 1.0) * last as f64;
    let lo = at.floor() as usize;
    let (a, b) = (sorted[lo], sorted[(lo + 1).min(last)]);
    let frac = at - lo as f64;
    Some(a + ((b - a) as f64 * frac).floor() as i64)
}

/// The median: the middle value, or for an even count the mean of the two middle values
/// (rounded down). `None` when empty.
#[must_use]
pub fn median(mut values: Vec<i64>) -> Option<i64> {
    percentile_unsorted(&mut values, 0.5)
}

/// [`percentile`] of `values` in any order, without sorting them: the rank it falls on is
/// selected, and the next rank up (for the interpolation) is the smallest of those above it.
/// Linear, where a sort of millions of durations is n log n; `values` is left reordered.
#[must_use]
pub fn percentile_unsorted(values: &mut [i64], q: f64) -> Option<i64> {
    let last = values.len().checked_sub(1)?;
    let at = q.clamp(0.0, 1.0) * last as f64;
    let lo = at.floor() as usize;
    let (_, &mut a, above) = values.select_nth_unstable(lo);
    let b = above.iter().copied().min().unwrap_or(a);
    let frac = at - lo as f64;
    Some(a + ((b - a) as f64 * frac).floor() as i64)
}

/// [`percentile`] of float samples (benchmark timings), not rounded.
#[must_use]
pub fn percentile_f64(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let at = q.clamp(0.0, 1.0) * last as f64;
    let lo = at.floor() as usize;
    let (a, b) = (sorted[lo], sorted[(lo + 1).min(last)]);
    Some(a + (b - a) * (at - lo as f64))
}

/// [`median`] of float samples.
#[must_use]
pub fn median_f64(mut values: Vec<f64>) -> Option<f64> {
    values.sort_unstable_by(f64::total_cmp);
    percentile_f64(&values, 0.5)
}

/// Which per-step statistic a rule compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statistic {
    /// The median (step time).
    Median,
    /// The mean (mean step time, lost time per step).
    Mean,
}

impl Statistic {
    /// The statistic of `values` (sorted in place for the median). `None` when empty.
    #[must_use]
    pub fn of(self, values: &mut [i64]) -> Option<f64> {
        if values.is_empty() {
            return None;
        }
        Some(match self {
            Self::Mean => values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64,
            Self::Median => {
                // Fractional: a bootstrap of medians must not round each one.
                let floats: Vec<f64> = values.iter().map(|&v| v as f64).collect();
                median_f64(floats).unwrap_or(0.0)
            }
        })
    }
}

/// A change with its interval, in the figure's unit (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// The statistic of current − that of baseline, on the samples as given.
    pub point: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
}

impl Shift {
    /// Whether the interval lies wholly above zero: the figure grew, beyond noise.
    #[must_use]
    pub fn significant_increase(&self) -> bool {
        self.low > 0.0
    }
}

/// Resamples per interval.
const RESAMPLES: usize = 2000;

/// The bootstrap interval of `statistic(current) − statistic(baseline)` at `confidence`
/// (0.5 ..= 0.9999). `None` when either side is empty.
#[must_use]
pub fn bootstrap_shift(
    baseline: &[i64],
    current: &[i64],
    statistic: Statistic,
    confidence: f64,
) -> Option<Shift> {
    let point = statistic.of(&mut current.to_vec())? - statistic.of(&mut baseline.to_vec())?;
    let mut rng = SplitMix64(0x5EED_5EED_u64);
    let mut a = vec![0i64; baseline.len()];
    let mut b = vec![0i64; current.len()];
    let mut diffs = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        for slot in &mut a {
            *slot = baseline[rng.below(baseline.len())];
        }
        for slot in &mut b {
            *slot = current[rng.below(current.len())];
        }
        diffs.push(statistic.of(&mut b)? - statistic.of(&mut a)?);
    }
    diffs.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence.clamp(0.5, 0.9999)) / 2.0;
    let at = |q: f64| diffs[((q * (RESAMPLES - 1) as f64).round() as usize).min(RESAMPLES - 1)];
    Some(Shift {
        point,
        low: at(tail),
        high: at(1.0 - tail),
    })
}

/// SplitMix64: small, fast and good enough for resampling indexes.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0; the modulo bias is negligible for step counts).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_median_and_one_percentile() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![5, 1, 3]), Some(3));
        assert_eq!(median(vec![4, 1, 3, 2]), Some(2));
        assert_eq!(median(vec![10, 11]), Some(10));
        assert_eq!(median(vec![10, 14]), Some(12));
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[7], 0.99), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(median_f64(vec![1.0, 2.0]), Some(1.5));
        assert_eq!(Statistic::Median.of(&mut [4, 1, 3, 2]), Some(2.5));
    }

    #[test]
    fn percentiles_by_selection_are_the_sorted_percentiles() {
        let mut seed = 3u64;
        for n in 0..200usize {
            let values: Vec<i64> = (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    (seed >> 40) as i64 % 1000 - 500
                })
                .collect();
            let mut sorted = values.clone();
            sorted.sort_unstable();
            for q in [0.0, 0.25, 0.5, 0.9, 0.99, 1.0] {
                let mut shuffled = values.clone();
                assert_eq!(
                    percentile_unsorted(&mut shuffled, q),
                    percentile(&sorted, q),
                    "n = {n}, q = {q}"
                );
            }
            assert_eq!(median(values), percentile(&sorted, 0.5), "n = {n}");
        }
    }

    #[test]
    fn statistics() {
        assert_eq!(Statistic::Median.of(&mut [3, 1, 2]), Some(2.0));
        assert_eq!(Statistic::Median.of(&mut [4, 1, 2, 3]), Some(2.5));
        assert_eq!(Statistic::Mean.of(&mut [1, 2, 6]), Some(3.0));
        assert_eq!(Statistic::Mean.of(&mut []), None);
    }

    #[test]
    fn a_clear_shift_is_significant_and_noise_is_not() {
        let base: Vec<i64> = (0..20).map(|i| 100 + (i * 7) % 11).collect();
        let slower: Vec<i64> = base.iter().map(|v| v + 30).collect();
        let s = bootstrap_shift(&base, &slower, Statistic::Median, 0.99).unwrap();
        assert!(s.significant_increase(), "{s:?}");
        assert!((s.point - 30.0).abs() < 1e-9);
        // The same values in another order: no shift at all.
        let mut shuffled = base.clone();
        shuffled.reverse();
        let s = bootstrap_shift(&base, &shuffled, Statistic::Median, 0.99).unwrap();
        assert!(!s.significant_increase(), "{s:?}");
        assert!(s.low <= 0.0 && s.high >= 0.0);
    }

    #[test]
    fn wide_noise_gives_a_wide_interval() {
        let base = [100, 300, 120, 280, 90, 310];
        let cur = [150, 320, 130, 300, 95, 330];
        let s = bootstrap_shift(&base, &cur, Statistic::Median, 0.99).unwrap();
        assert!(!s.significant_increase(), "{s:?}");
        assert!(s.high - s.low > 100.0, "{s:?}");
    }

    #[test]
    fn the_interval_is_the_same_every_time() {
        let base = [10, 12, 11, 13, 12];
        let cur = [14, 15, 13, 16, 15];
        assert_eq!(
            bootstrap_shift(&base, &cur, Statistic::Mean, 0.99),
            bootstrap_shift(&base, &cur, Statistic::Mean, 0.99)
        );
    }
}
