//! The lane index: each lane's slice ids with contiguous copies of their starts and ends, the
//! coarse starts and the merged levels, built once after loading; and the counter and instant
//! ranges per track.

use std::ops::Range;

use steplens_ingest::model::{SliceId, Timeline, TrackId};

use super::{COARSE_EVERY, LEVEL_FACTOR, LEVEL0_NS};

/// A lane merged at one resolution: every slice at least `res` long is its own entry; runs of
/// shorter slices separated by gaps shorter than `res` are one entry. At a zoom where a pixel
/// is at least `res` wide, walking these entries draws exactly what walking the slices would
/// (a run's members and gaps are all under a pixel), and there are at most `2 × span / res + 2`
/// of them in a span: at most `8 × width + 2` per lane, read from contiguous memory.
#[derive(Debug, Clone, Default)]
pub struct Level {
    /// Resolution, ns.
    pub res: i64,
    /// Entry starts (sorted).
    pub start: Vec<i64>,
    /// Entry ends.
    pub end: Vec<i64>,
    /// First lane position of the entry.
    pub first: Vec<u32>,
    /// Slices in the entry (1 = one slice).
    pub count: Vec<u32>,
}

impl Level {
    fn push(&mut self, (s, e, f, c): (i64, i64, u32, u32)) {
        self.start.push(s);
        self.end.push(e);
        self.first.push(f);
        self.count.push(c);
    }

    pub(super) fn len(&self) -> usize {
        self.start.len()
    }

    fn entries(&self) -> impl Iterator<Item = (i64, i64, u32, u32)> + '_ {
        self.start
            .iter()
            .zip(&self.end)
            .zip(self.first.iter().zip(&self.count))
            .map(|((&s, &e), (&f, &c))| (s, e, f, c))
    }

    fn heap_bytes(&self) -> usize {
        self.start.capacity() * 8
            + self.end.capacity() * 8
            + self.first.capacity() * 4
            + self.count.capacity() * 4
    }

    /// Merges `entries` (in start order) at resolution `res`.
    fn merge(entries: impl Iterator<Item = (i64, i64, u32, u32)>, res: i64) -> Self {
        let mut out = Self {
            res,
            ..Self::default()
        };
        let mut open: Option<(i64, i64, u32, u32)> = None;
        for (s, e, f, c) in entries {
            if c == 1 && e - s >= res {
                // Long enough to be seen on its own at every zoom this level serves.
                if let Some(o) = open.take() {
                    out.push(o);
                }
                out.push((s, e, f, c));
                continue;
            }
            match &mut open {
                Some(o) if s - o.1 < res => {
                    o.1 = o.1.max(e);
                    o.3 += c;
                }
                _ => {
                    if let Some(o) = open.take() {
                        out.push(o);
                    }
                    open = Some((s, e, f, c));
                }
            }
        }
        if let Some(o) = open {
            out.push(o);
        }
        out
    }

    /// The merged levels of one lane worth keeping: each at most half the lane's size (else
    /// the slices themselves are as cheap to walk), until one has at most 16 entries.
    fn build(starts: &[i64], ends: &[i64]) -> Vec<Self> {
        let n = starts.len();
        let mut levels = Vec::new();
        if n < 64 {
            return levels;
        }
        let raw = starts
            .iter()
            .zip(ends)
            .enumerate()
            .map(|(k, (&s, &e))| (s, e, k as u32, 1));
        let mut res = LEVEL0_NS;
        let mut level = Self::merge(raw, res);
        for _ in 0..24 {
            let done = level.len() <= 16;
            res = res.saturating_mul(LEVEL_FACTOR);
            let next = if done {
                None
            } else {
                Some(Self::merge(level.entries(), res))
            };
            if level.len() * 2 <= n {
                levels.push(level);
            }
            match next {
                Some(l) => level = l,
                None => break,
            }
        }
        levels
    }
}

/// Slice ids per lane (track × depth), in start order; counter sample ranges per track.
#[derive(Debug, Default, Clone)]
pub struct LaneIndex {
    /// Slice ids of every lane, lanes one after another.
    ids: Vec<SliceId>,
    /// The start of each slice of `ids`, alongside: searches read this contiguous copy instead
    /// of the Timeline's column, where a lane's starts are scattered among other lanes'.
    starts: Vec<i64>,
    /// The end of each slice of `ids`, alongside (same reason).
    ends: Vec<i64>,
    /// For lane `l`, its ids are `ids[lane_start[l]..lane_start[l + 1]]`.
    lane_start: Vec<usize>,
    /// First lane of each track (`track_lane[t]..track_lane[t + 1]`).
    track_lane: Vec<usize>,
    /// For each track, its range in [`Timeline::counters`].
    counters: Vec<Range<usize>>,
    /// For each track, the smallest and largest counter value (0, 0 when none).
    counter_bounds: Vec<(f64, f64)>,
    /// For each track, its range in [`Timeline::instants`].
    instants: Vec<Range<usize>>,
    /// Every [`COARSE_EVERY`]th start of every lane, lanes one after another: a small,
    /// contiguous array searched before the ids (whose starts are scattered in the Timeline).
    coarse: Vec<i64>,
    /// For lane `l`, its coarse starts are `coarse[coarse_start[l]..coarse_start[l + 1]]`.
    coarse_start: Vec<usize>,
    /// For lane `l`, its merged levels, finest first.
    levels: Vec<Vec<Level>>,
}

/// One lane's slice ids, their starts and its coarse start index.
#[derive(Debug, Clone, Copy)]
pub struct LaneRef<'a> {
    /// Slice ids in start order.
    pub ids: &'a [SliceId],
    /// `starts[k]` is the start of `ids[k]`.
    pub starts: &'a [i64],
    /// `ends[k]` is the end of `ids[k]`.
    pub ends: &'a [i64],
    /// Start of every [`COARSE_EVERY`]th slice of `ids`.
    pub coarse: &'a [i64],
    /// Merged levels, finest first.
    pub levels: &'a [Level],
}

impl LaneRef<'_> {
    /// The first position `j >= from` whose slice starts at or after `t` (`ids.len()` if none),
    /// searched by galloping over the coarse starts, then by binary search inside one block:
    /// O(log distance) probes, nearly all in contiguous memory.
    #[must_use]
    pub fn first_at_or_after(&self, from: usize, t: i64) -> usize {
        let block = from / COARSE_EVERY;
        let rest = self.coarse.get(block + 1..).unwrap_or(&[]);
        let next_block = block + 1 + gallop(rest, t);
        let lo = from.max((next_block - 1) * COARSE_EVERY);
        let hi = (next_block * COARSE_EVERY).min(self.starts.len());
        if lo >= hi {
            return lo.min(self.starts.len());
        }
        lo + self.starts[lo..hi].partition_point(|&s| s < t)
    }
}

/// `s.partition_point(|x| x < t)` by exponential search from the front.
pub(super) fn gallop(s: &[i64], t: i64) -> usize {
    let mut lo = 0;
    let mut step = 1;
    while lo + step <= s.len() && s[lo + step - 1] < t {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(s.len());
    lo + s[lo..hi].partition_point(|&x| x < t)
}

impl LaneIndex {
    /// Builds the index: one pass over the slices and one over the counter samples.
    #[must_use]
    pub fn new(timeline: &Timeline) -> Self {
        let slices = &timeline.slices;
        let mut track_lane = Vec::with_capacity(timeline.tracks.len() + 1);
        let mut lanes = 0usize;
        for track in &timeline.tracks {
            track_lane.push(lanes);
            lanes += track.max_depth as usize + 1;
        }
        track_lane.push(lanes);
        // Count per lane, then place (a counting sort keeps start order inside each lane
        // because the Timeline's slices are sorted by (track, start)).
        let mut counts = vec![0usize; lanes + 1];
        for (t, track) in timeline.tracks.iter().enumerate() {
            for i in track.slices.clone() {
                let depth = slices.depth.get(i as usize).copied().unwrap_or(0) as usize;
                if let Some(c) = counts.get_mut(track_lane[t] + depth) {
                    *c += 1;
                }
            }
        }
        let mut lane_start = Vec::with_capacity(lanes + 1);
        let mut acc = 0;
        for c in &counts[..lanes] {
            lane_start.push(acc);
            acc += c;
        }
        lane_start.push(acc);
        let mut fill = lane_start.clone();
        let mut ids = vec![0; acc];
        for (t, track) in timeline.tracks.iter().enumerate() {
            for i in track.slices.clone() {
                let depth = slices.depth.get(i as usize).copied().unwrap_or(0) as usize;
                let lane = track_lane[t] + depth;
                if let Some(slot) = fill.get_mut(lane)
                    && let Some(id) = ids.get_mut(*slot)
                {
                    *id = i;
                    *slot += 1;
                }
            }
        }
        let counter_tracks = &timeline.counters.track;
        let mut counters = Vec::with_capacity(timeline.tracks.len());
        let mut counter_bounds = Vec::with_capacity(timeline.tracks.len());
        for t in 0..timeline.tracks.len() as TrackId {
            let a = counter_tracks.partition_point(|&x| x < t);
            let b = counter_tracks.partition_point(|&x| x <= t);
            let values = timeline.counters.value.get(a..b).unwrap_or(&[]);
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            counter_bounds.push(if lo.is_finite() && hi.is_finite() {
                (lo.min(0.0), hi)
            } else {
                (0.0, 0.0)
            });
            counters.push(a..b);
        }
        let starts: Vec<i64> = ids
            .iter()
            .map(|&id| slices.start.get(id as usize).copied().unwrap_or(i64::MAX))
            .collect();
        let ends: Vec<i64> = ids
            .iter()
            .zip(&starts)
            .map(|(&id, &s)| s.saturating_add(slices.dur.get(id as usize).copied().unwrap_or(0)))
            .collect();
        let mut coarse = Vec::with_capacity(acc / COARSE_EVERY + lanes);
        let mut coarse_start = Vec::with_capacity(lanes + 1);
        for l in 0..lanes {
            coarse_start.push(coarse.len());
            let lane = starts.get(lane_start[l]..lane_start[l + 1]).unwrap_or(&[]);
            coarse.extend(lane.iter().step_by(COARSE_EVERY));
        }
        coarse_start.push(coarse.len());
        let levels = (0..lanes)
            .map(|l| {
                let r = lane_start[l]..lane_start[l + 1];
                Level::build(
                    starts.get(r.clone()).unwrap_or(&[]),
                    ends.get(r).unwrap_or(&[]),
                )
            })
            .collect();
        let instant_tracks = &timeline.instants.track;
        let instants = (0..timeline.tracks.len() as TrackId)
            .map(|t| {
                instant_tracks.partition_point(|&x| x < t)
                    ..instant_tracks.partition_point(|&x| x <= t)
            })
            .collect();
        Self {
            ids,
            starts,
            ends,
            lane_start,
            track_lane,
            counters,
            counter_bounds,
            instants,
            coarse,
            coarse_start,
            levels,
        }
    }

    /// The slice ids of `track` at `depth`, in start order.
    #[must_use]
    pub fn lane(&self, track: TrackId, depth: u16) -> &[SliceId] {
        self.lane_range(track, depth)
            .and_then(|r| self.ids.get(r))
            .unwrap_or(&[])
    }

    fn lane_column<'a>(&self, column: &'a [i64], track: TrackId, depth: u16) -> &'a [i64] {
        self.lane_range(track, depth)
            .and_then(|r| column.get(r))
            .unwrap_or(&[])
    }

    fn lane_range(&self, track: TrackId, depth: u16) -> Option<Range<usize>> {
        let first = *self.track_lane.get(track as usize)?;
        let next_track = *self.track_lane.get(track as usize + 1)?;
        let lane = first + depth as usize;
        if lane >= next_track {
            return None;
        }
        Some(*self.lane_start.get(lane)?..*self.lane_start.get(lane + 1)?)
    }

    /// The slice ids of `track` at `depth` with their coarse starts.
    #[must_use]
    pub fn lane_ref(&self, track: TrackId, depth: u16) -> LaneRef<'_> {
        let ids = self.lane(track, depth);
        let starts = self.lane_column(&self.starts, track, depth);
        let ends = self.lane_column(&self.ends, track, depth);
        let lane = self
            .track_lane
            .get(track as usize)
            .map(|&first| first + depth as usize);
        let coarse = lane
            .and_then(|l| Some((*self.coarse_start.get(l)?, *self.coarse_start.get(l + 1)?)))
            .and_then(|(a, b)| self.coarse.get(a..b))
            .unwrap_or(&[]);
        // An unknown lane has no ids; keep the pair consistent.
        let coarse = if ids.is_empty() { &[] } else { coarse };
        let levels = lane
            .and_then(|l| self.levels.get(l))
            .map_or(&[][..], Vec::as_slice);
        LaneRef {
            ids,
            starts,
            ends,
            coarse,
            levels,
        }
    }

    /// Counter samples of `track` (a range of [`Timeline::counters`]).
    #[must_use]
    pub fn counter_range(&self, track: TrackId) -> Range<usize> {
        self.counters.get(track as usize).cloned().unwrap_or(0..0)
    }

    /// Smallest (at most 0) and largest counter value of `track`.
    #[must_use]
    pub fn counter_bounds(&self, track: TrackId) -> (f64, f64) {
        self.counter_bounds
            .get(track as usize)
            .copied()
            .unwrap_or((0.0, 0.0))
    }

    /// Instants of `track` (a range of [`Timeline::instants`]).
    #[must_use]
    pub fn instant_range(&self, track: TrackId) -> Range<usize> {
        self.instants.get(track as usize).cloned().unwrap_or(0..0)
    }

    /// Bytes used by the index.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.ids.capacity() * 4
            + self.starts.capacity() * 8
            + self.ends.capacity() * 8
            + self
                .levels
                .iter()
                .flatten()
                .map(Level::heap_bytes)
                .sum::<usize>()
            + self.coarse.capacity() * 8
            + (self.lane_start.capacity()
                + self.track_lane.capacity()
                + self.coarse_start.capacity())
                * 8
    }
}
