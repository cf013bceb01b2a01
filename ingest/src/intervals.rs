//! Sets of time intervals: the union of many (possibly nested or overlapping) ranges, and how
//! much of it falls inside a window. Busy time, idle time and data-loader time are all this.

/// A union of half-open `[start, end)` intervals, kept sorted and disjoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    starts: Vec<i64>,
    ends: Vec<i64>,
    /// `prefix[i]` = total length of intervals before `i`.
    prefix: Vec<i64>,
}

impl IntervalSet {
    /// The union of `ranges` (any order, overlaps allowed; empty ranges ignored).
    #[must_use]
    pub fn from_ranges(mut ranges: Vec<(i64, i64)>) -> Self {
        ranges.retain(|(s, e)| e > s);
        let merged = union_of_runs(&mut ranges).unwrap_or_else(|| {
            ranges.sort_unstable();
            let kept = collapse(&mut ranges);
            ranges.truncate(kept);
            ranges
        });
        let mut set = Self {
            starts: Vec::with_capacity(merged.len()),
            ends: Vec::with_capacity(merged.len()),
            prefix: Vec::with_capacity(merged.len() + 1),
        };
        let mut total = 0;
        for (s, e) in merged {
            set.starts.push(s);
            set.ends.push(e);
            set.prefix.push(total);
            total += e - s;
        }
        set.prefix.push(total);
        set
    }

    /// Total covered length.
    #[must_use]
    pub fn total(&self) -> i64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Number of disjoint intervals.
    #[must_use]
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether nothing is covered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Covered length inside `[from, to)`.
    #[must_use]
    pub fn covered(&self, from: i64, to: i64) -> i64 {
        if to <= from || self.is_empty() {
            return 0;
        }
        // Intervals entirely before `from` end at or before it; those after start at `to`.
        let first = self.ends.partition_point(|&e| e <= from);
        let last = self.starts.partition_point(|&s| s < to);
        if first >= last {
            return 0;
        }
        let mut sum = self.prefix[last] - self.prefix[first];
        sum -= (from - self.starts[first]).max(0);
        sum -= (self.ends[last - 1] - to).max(0);
        sum
    }

    /// The disjoint intervals, in order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.starts.iter().copied().zip(self.ends.iter().copied())
    }

    /// Gaps (uncovered stretches) inside `[from, to)`, in order.
    #[must_use]
    pub fn gaps(&self, from: i64, to: i64) -> Vec<(i64, i64)> {
        let mut gaps = Vec::new();
        let first = self.ends.partition_point(|&e| e <= from);
        self.push_gaps(first, from, to, &mut gaps);
        gaps
    }

    /// Appends the gaps inside `[from, to)` to `out`; `first` is the first interval that ends
    /// after `from`.
    fn push_gaps(&self, first: usize, from: i64, to: i64, out: &mut Vec<(i64, i64)>) {
        let mut at = from;
        for i in first..self.len() {
            let (s, e) = (self.starts[i], self.ends[i]);
            if s >= to {
                break;
            }
            if s > at {
                out.push((at, s));
            }
            at = at.max(e);
        }
        if at < to {
            out.push((at, to));
        }
    }

    /// The intervals that overlap `[from, to)`, whole (not clipped), in order: found by binary
    /// search, so a query per step costs the step's intervals, not the trace's.
    pub fn overlapping(&self, from: i64, to: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        let first = self.ends.partition_point(|&e| e <= from);
        let last = self.starts.partition_point(|&s| s < to).max(first);
        self.starts[first..last]
            .iter()
            .copied()
            .zip(self.ends[first..last].iter().copied())
    }

    /// The covered intervals inside `[from, to)`, clipped to it, in order.
    #[must_use]
    pub fn within(&self, from: i64, to: i64) -> Vec<(i64, i64)> {
        self.overlapping(from, to)
            .map(|(s, e)| (s.max(from), e.min(to)))
            .filter(|(s, e)| e > s)
            .collect()
    }

    /// The covered intervals of `self` that `other` does not cover: [`Self::gaps`] of
    /// `other` in each of `self`'s intervals, found in one walk over both (both are in
    /// order), not by a search and a list per interval.
    #[must_use]
    pub fn minus(&self, other: &Self) -> Self {
        let mut out = Vec::new();
        let mut first = 0;
        for (s, e) in self.iter() {
            first = other.first_ending_after(first, s);
            other.push_gaps(first, s, e, &mut out);
        }
        Self::from_ranges(out)
    }

    /// The intervals covered by both `self` and `other`: [`Self::within`] each of `self`'s
    /// intervals, in one walk over both.
    #[must_use]
    pub fn intersect(&self, other: &Self) -> Self {
        let mut out = Vec::new();
        let mut first = 0;
        for (s, e) in self.iter() {
            first = other.first_ending_after(first, s);
            for i in first..other.len() {
                let (os, oe) = (other.starts[i], other.ends[i]);
                if os >= e {
                    break;
                }
                let (from, to) = (os.max(s), oe.min(e));
                if to > from {
                    out.push((from, to));
                }
            }
        }
        Self::from_ranges(out)
    }

    /// The first interval from index `from` on that ends after `ts` (ends rise with index).
    /// Galloping: steps of 1, 2, 4, … then a binary search in the last step, so a walk of two
    /// sets of like size stays linear, and a few intervals against a trace-long set (one copy's
    /// memcpys against the device's busy time) cost a logarithm each, not the set's length.
    fn first_ending_after(&self, from: usize, ts: i64) -> usize {
        let ends = &self.ends[from.min(self.ends.len())..];
        let mut bound = 1;
        while bound <= ends.len() && ends[bound - 1] <= ts {
            bound *= 2;
        }
        let lower = bound / 2;
        let upper = bound.min(ends.len());
        from + lower + ends[lower..upper].partition_point(|&e| e <= ts)
    }
}

/// Most runs of ranges in start order that [`union_of_runs`] merges run by run.
const MAX_RUNS: usize = 64;

/// The union of `ranges` when they are a few runs each in start order (what callers that push
/// each track's slices in turn give): each run collapsed in place, then the runs merged pairwise,
/// all linear, where sorting the lot costs n log n and misses the cache. `None` when there are
/// more than [`MAX_RUNS`] runs.
fn union_of_runs(ranges: &mut Vec<(i64, i64)>) -> Option<Vec<(i64, i64)>> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    for i in 1..=ranges.len() {
        if i == ranges.len() || ranges[i].0 < ranges[i - 1].0 {
            if runs.len() == MAX_RUNS {
                return None;
            }
            runs.push((from, i));
            from = i;
        }
    }
    if let [(0, end)] = runs[..]
        && end == ranges.len()
    {
        let kept = collapse(ranges);
        ranges.truncate(kept);
        return Some(std::mem::take(ranges));
    }
    // Each run collapsed in place, to the front of its own stretch.
    let kept: Vec<(usize, usize)> = runs
        .into_iter()
        .map(|(a, b)| (a, a + collapse(&mut ranges[a..b])))
        .collect();
    let mut sets: Vec<Vec<(i64, i64)>> = kept
        .chunks(2)
        .map(|pair| match *pair {
            [(a, b), (c, d)] => merge_sorted(&ranges[a..b], &ranges[c..d]),
            _ => ranges[pair[0].0..pair[0].1].to_vec(),
        })
        .collect();
    ranges.clear();
    ranges.shrink_to_fit();
    while sets.len() > 1 {
        let mut next = Vec::with_capacity(sets.len().div_ceil(2));
        let mut pairs = sets.into_iter();
        while let Some(a) = pairs.next() {
            next.push(match pairs.next() {
                Some(b) => merge_sorted(&a, &b),
                None => a,
            });
        }
        sets = next;
    }
    Some(sets.pop().unwrap_or_default())
}

/// Two lists in start order merged into one, collapsed.
fn merge_sorted(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = if j == b.len() || (i < a.len() && a[i].0 <= b[j].0) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        push_merged(&mut out, next);
    }
    out
}

/// Ranges in start order collapsed in place into disjoint intervals at the front of `ranges`
/// (touching ones join); returns how many there are.
fn collapse(ranges: &mut [(i64, i64)]) -> usize {
    let mut kept = 0;
    for i in 0..ranges.len() {
        let (s, e) = ranges[i];
        if kept > 0 && s <= ranges[kept - 1].1 {
            ranges[kept - 1].1 = ranges[kept - 1].1.max(e);
        } else {
            ranges[kept] = (s, e);
            kept += 1;
        }
    }
    kept
}

/// Appends a range (in start order) to disjoint intervals, joining the last when they touch.
fn push_merged(out: &mut Vec<(i64, i64)>, (s, e): (i64, i64)) {
    match out.last_mut() {
        Some(last) if s <= last.1 => last.1 = last.1.max(e),
        _ => out.push((s, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The union by runs equals the union by sorting, for inputs of a few runs, many runs, and
    /// one run: shuffled-looking ranges from a fixed generator.
    #[test]
    fn union_by_runs_equals_union_by_sorting() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: i64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as i64
        };
        for runs in [1usize, 2, 5, 64, 65, 300] {
            let mut ranges = Vec::new();
            for _ in 0..runs {
                let mut at = next(1000);
                for _ in 0..next(40) + 1 {
                    at += next(30);
                    ranges.push((at, at + next(50) - 5));
                }
            }
            let mut sorted = ranges.clone();
            sorted.retain(|(s, e)| e > s);
            sorted.sort_unstable();
            let kept = collapse(&mut sorted);
            sorted.truncate(kept);
            let set = IntervalSet::from_ranges(ranges);
            let got: Vec<(i64, i64)> = set.iter().collect();
            assert_eq!(got, sorted, "{runs} runs");
            assert_eq!(set.total(), sorted.iter().map(|(s, e)| e - s).sum::<i64>());
        }
    }

    #[test]
    fn minus_and_intersect_walk_as_a_search_per_interval_does() {
        let mut seed = 11u64;
        let mut next = move |m: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) % m) as i64
        };
        // Sets of like size, and a few intervals against many (where the walk gallops).
        for (case, (few, many)) in [(40, 40), (4, 400), (400, 4)]
            .repeat(200)
            .into_iter()
            .enumerate()
        {
            let mut ranges = |n: u64, span: u64| -> Vec<(i64, i64)> {
                (0..next(n))
                    .map(|_| {
                        let s = next(span);
                        (s, s + next(60))
                    })
                    .collect()
            };
            let span = if case % 2 == 0 { 1000 } else { 20_000 };
            let (a, b) = (
                IntervalSet::from_ranges(ranges(few, span)),
                IntervalSet::from_ranges(ranges(many, span)),
            );
            let by_search = |per: &dyn Fn(i64, i64) -> Vec<(i64, i64)>| {
                IntervalSet::from_ranges(a.iter().flat_map(|(s, e)| per(s, e)).collect())
            };
            assert_eq!(a.minus(&b), by_search(&|s, e| b.gaps(s, e)));
            assert_eq!(a.intersect(&b), by_search(&|s, e| b.within(s, e)));
        }
    }

    #[test]
    fn set_algebra() {
        let a = IntervalSet::from_ranges(vec![(0, 10), (20, 30)]);
        let b = IntervalSet::from_ranges(vec![(5, 25)]);
        assert_eq!(a.within(5, 25), vec![(5, 10), (20, 25)]);
        assert_eq!(
            a.minus(&b).iter().collect::<Vec<_>>(),
            vec![(0, 5), (25, 30)]
        );
        assert_eq!(
            a.intersect(&b).iter().collect::<Vec<_>>(),
            vec![(5, 10), (20, 25)]
        );
        assert_eq!(a.intersect(&b).total() + a.minus(&b).total(), a.total());
    }

    #[test]
    fn union_and_window() {
        let set = IntervalSet::from_ranges(vec![(10, 20), (0, 5), (15, 30), (40, 50), (3, 4)]);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            vec![(0, 5), (10, 30), (40, 50)]
        );
        assert_eq!(set.total(), 35);
        assert_eq!(set.covered(0, 100), 35);
        assert_eq!(set.covered(4, 12), 3);
        assert_eq!(set.covered(30, 40), 0);
        assert_eq!(set.covered(45, 45), 0);
        assert_eq!(set.covered(12, 13), 1);
        assert_eq!(set.gaps(0, 60), vec![(5, 10), (30, 40), (50, 60)]);
        assert_eq!(set.gaps(11, 29), vec![]);
    }

    #[test]
    fn empty_set() {
        let set = IntervalSet::from_ranges(vec![(5, 5), (7, 3)]);
        assert!(set.is_empty());
        assert_eq!(set.covered(0, 10), 0);
        assert_eq!(set.gaps(0, 10), vec![(0, 10)]);
    }
}
