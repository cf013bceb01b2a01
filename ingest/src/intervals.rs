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
        if !ranges.is_sorted() {
            ranges.sort_unstable();
        }
        let mut set = Self::default();
        for (s, e) in ranges {
            match set.ends.last_mut() {
                Some(last_end) if s <= *last_end => *last_end = (*last_end).max(e),
                _ => {
                    set.starts.push(s);
                    set.ends.push(e);
                }
            }
        }
        let mut total = 0;
        set.prefix = Vec::with_capacity(set.starts.len() + 1);
        for (s, e) in set.starts.iter().zip(&set.ends) {
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
        let mut at = from;
        let first = self.ends.partition_point(|&e| e <= from);
        for i in first..self.len() {
            let (s, e) = (self.starts[i], self.ends[i]);
            if s >= to {
                break;
            }
            if s > at {
                gaps.push((at, s));
            }
            at = at.max(e);
        }
        if at < to {
            gaps.push((at, to));
        }
        gaps
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

    /// The covered intervals of `self` that `other` does not cover.
    #[must_use]
    pub fn minus(&self, other: &Self) -> Self {
        let mut out = Vec::new();
        for (s, e) in self.iter() {
            out.extend(other.gaps(s, e));
        }
        Self::from_ranges(out)
    }

    /// The intervals covered by both `self` and `other`.
    #[must_use]
    pub fn intersect(&self, other: &Self) -> Self {
        let mut out = Vec::new();
        for (s, e) in self.iter() {
            out.extend(other.within(s, e));
        }
        Self::from_ranges(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
