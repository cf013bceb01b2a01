//! Level of detail: turning the slices of the visible rows into a bounded list of rectangles.
//!
//! [`LaneIndex`] keeps, for each track and nesting depth (a *lane*), its slices in start order:
//! ids, and alongside them contiguous copies of their starts and ends (20 bytes a slice), a
//! coarse start every [`COARSE_EVERY`] slices, and merged [`Level`]s (a mipmap). It is built
//! once after loading, on the loading thread, in O(slices). Slices of one lane are siblings,
//! which never overlap (the Timeline's nesting guarantees it; the rare partial overlap it keeps
//! as a sibling only makes a run a little shorter or longer).
//!
//! [`build_frame`] draws each visible lane one of two ways:
//! - **zoomed out** (a pixel spans at least the resolution of one of the lane's levels): it
//!   walks the coarsest such level's entries in view. Each entry is a slice long enough to be
//!   seen or a run of shorter slices with gaps under the resolution, so the picture is the one
//!   the slice walk would draw, and a span holds at most `2 × span / res + 2` entries: at most
//!   `8 × width_px + 2` per lane, read from contiguous memory.
//! - **zoomed in**: it walks the slices **by pixel column, not by slice**: a slice at least
//!   [`MIN_SLICE_PX`] wide becomes its own rectangle; a narrower one starts a *density run* and
//!   the walk jumps (galloping over the coarse starts, then a binary search in one block) to the
//!   first slice starting after the current pixel column; consecutive columns with work merge
//!   into one run. Because siblings do not overlap, only the last slice skipped can reach past
//!   the column, so it is checked and drawn on its own when wide. Each step emits a rectangle
//!   at least one pixel wide or advances one column: at most `2 × width_px + 2` steps of
//!   O(log slices) per lane.
//!
//! **Per-frame bound**: O(visible lanes × width_px × log n) whatever the zoom and the number of
//! slices, and O(visible lanes × width_px) rectangles. Counters cost O(visible counter rows ×
//! width_px × [`MAX_COUNTER_SAMPLES_PER_PX`]); instants at most one per pixel column and track.
//! Labels are drawn only on rectangles wider than [`LABEL_MIN_PX`], so their number is bounded
//! by `width_px / LABEL_MIN_PX` per lane. A folded row ([`RowKind::Folded`]) walks each lane
//! folded into it, so it counts as that many lanes (never more than the rows it replaces).
//! `examples/frame_bench.rs` measures it.
//!
//! Over 800 lines on purpose: the index and the walks that read it share its layout (blocks,
//! levels, coarse starts); apart, every walk would re-derive that layout's invariants.

use std::ops::Range;

use steplens_ingest::model::{SliceId, Timeline, TrackId, TrackKind};

use super::layout::{Layout, RowKind};

/// Slices narrower than this (pixels) merge into density runs.
pub const MIN_SLICE_PX: f32 = 1.0;
/// Runs closer than this (pixels) merge into one.
pub const RUN_MERGE_GAP_PX: f32 = 1.0;
/// Rectangles narrower than this (pixels) get no label.
pub const LABEL_MIN_PX: f32 = 36.0;
/// At most this many counter samples are read per pixel column (evenly strided beyond).
pub const MAX_COUNTER_SAMPLES_PER_PX: usize = 64;
/// One coarse start is kept per this many slices of a lane (8 bytes per 32 slices).
pub const COARSE_EVERY: usize = 32;
/// Resolution of the finest merged level, ns; each next level is [`LEVEL_FACTOR`] × coarser.
pub const LEVEL0_NS: i64 = 256;
/// Resolution ratio between consecutive merged levels.
pub const LEVEL_FACTOR: i64 = 4;

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

    fn len(&self) -> usize {
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
fn gallop(s: &[i64], t: i64) -> usize {
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

/// The mapping between time and horizontal pixels for one frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    /// Absolute ns of relative 0.
    pub origin: i64,
    /// Visible start, relative ns.
    pub start: f64,
    /// Visible end, relative ns.
    pub end: f64,
    /// Left edge of the track area, points.
    pub x0: f32,
    /// Width of the track area, points.
    pub width: f32,
}

impl Viewport {
    /// Points per relative ns.
    #[must_use]
    pub fn scale(&self) -> f64 {
        f64::from(self.width) / (self.end - self.start).max(1e-9)
    }

    /// Screen x of an absolute time.
    #[must_use]
    pub fn x(&self, abs_ns: i64) -> f32 {
        self.x_rel((abs_ns - self.origin) as f64)
    }

    /// Screen x of a relative time.
    #[must_use]
    pub fn x_rel(&self, rel_ns: f64) -> f32 {
        (f64::from(self.x0) + (rel_ns - self.start) * self.scale()) as f32
    }

    /// Relative time at screen x.
    #[must_use]
    pub fn t_rel(&self, x: f32) -> f64 {
        self.start + f64::from(x - self.x0) / self.scale()
    }

    /// Absolute time at screen x, rounded up (the first ns at or right of x).
    #[must_use]
    pub fn t_abs_ceil(&self, x: f32) -> i64 {
        self.origin.saturating_add(self.t_rel(x).ceil() as i64)
    }
}

/// What a rectangle stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RectKind {
    /// One slice.
    Slice(SliceId),
    /// Several sub-pixel slices merged; `first` is the first of them.
    Run {
        /// Slices merged.
        count: u32,
        /// First slice of the run.
        first: SliceId,
    },
}

/// One rectangle of the paint list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameRect {
    /// Left, points (clipped to the viewport ± 1).
    pub x0: f32,
    /// Right, points.
    pub x1: f32,
    /// Row index in the [`Layout`].
    pub row: u32,
    /// Slice or run.
    pub kind: RectKind,
}

/// One counter row: per pixel column the (min, max) of the values, each scaled to 0..=1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterStrip {
    /// Row index in the [`Layout`].
    pub row: u32,
    /// One entry per pixel column; `None` before the first sample.
    pub columns: Vec<Option<(f32, f32)>>,
}

/// The paint list of one frame (reused between frames to avoid allocating).
#[derive(Debug, Clone, Default)]
pub struct Frame {
    /// Slice and run rectangles.
    pub rects: Vec<FrameRect>,
    /// Counter area charts.
    pub counters: Vec<CounterStrip>,
    /// Instant markers: row and x (at most one per pixel column and track).
    pub instants: Vec<(u32, f32)>,
    /// Walk steps taken (for the benchmark and tests of the bound).
    pub steps: usize,
}

/// Builds the paint list for `rows` of the layout (see the module docs for the bound).
pub fn build_frame(
    timeline: &Timeline,
    index: &LaneIndex,
    layout: &Layout,
    rows: Range<usize>,
    vp: &Viewport,
    out: &mut Frame,
) {
    out.rects.clear();
    out.counters.clear();
    out.instants.clear();
    out.steps = 0;
    if vp.width <= 0.0 || vp.end <= vp.start {
        return;
    }
    for r in rows {
        let Some(row) = layout.rows.get(r) else {
            continue;
        };
        match row.kind {
            RowKind::Header { .. } => {}
            RowKind::Lane { track, depth } => {
                out.steps += walk_lane(index.lane_ref(track, depth), r as u32, vp, out);
                if depth == 0 {
                    out.steps +=
                        walk_instants(timeline, index.instant_range(track), r as u32, vp, out);
                }
            }
            RowKind::Folded { track, from, to } => {
                // Shallow first, so the deeper slices are drawn over their parents.
                for depth in from..=to {
                    out.steps += walk_lane(index.lane_ref(track, depth), r as u32, vp, out);
                }
                if from == 0 {
                    out.steps +=
                        walk_instants(timeline, index.instant_range(track), r as u32, vp, out);
                }
            }
            RowKind::Counter { track } => {
                let is_counter = timeline
                    .tracks
                    .get(track as usize)
                    .is_some_and(|t| t.kind == TrackKind::Counter);
                if is_counter {
                    let strip = counter_strip(timeline, index, track, r as u32, vp);
                    out.steps += strip.columns.len();
                    out.counters.push(strip);
                }
            }
        }
    }
}

/// Draws one lane from its coarsest merged level whose resolution is at most a pixel, else by
/// walking its slices; returns the steps taken.
fn walk_lane(lane: LaneRef<'_>, row: u32, vp: &Viewport, out: &mut Frame) -> usize {
    let px_ns = 1.0 / vp.scale();
    match lane.levels.iter().rev().find(|l| l.res as f64 <= px_ns) {
        Some(level) => walk_level(lane, level, row, vp, out),
        None => walk_slices(lane, row, vp, out),
    }
}

/// A rectangle being extended while a lane is walked: x0, x1, slices merged, first slice.
type PendingRun = (f32, f32, u32, SliceId);

/// Ends the pending run: one slice is its own rectangle, several are a density run. Both lane
/// walks (merged level and slice by slice) end their runs here.
fn flush_run(run: &mut Option<PendingRun>, out: &mut Frame, row: u32, left: f32, right: f32) {
    if let Some((x0, x1, count, first)) = run.take() {
        out.rects.push(FrameRect {
            x0: x0.max(left),
            x1: x1.max(x0 + MIN_SLICE_PX).min(right),
            row,
            kind: if count == 1 {
                RectKind::Slice(first)
            } else {
                RectKind::Run { count, first }
            },
        });
    }
}

/// Walks a merged level's entries in the view (see [`Level`] for why this draws the same).
fn walk_level(lane: LaneRef<'_>, level: &Level, row: u32, vp: &Viewport, out: &mut Frame) -> usize {
    let t0 = vp.origin.saturating_add(vp.start.floor() as i64);
    let t1 = vp.origin.saturating_add(vp.end.ceil() as i64);
    let left = vp.x0 - 1.0;
    let right = vp.x0 + vp.width + 1.0;
    let mut e = level.start.partition_point(|&s| s < t0);
    if e > 0 && level.end.get(e - 1).is_some_and(|&end| end > t0) {
        e -= 1;
    }
    let mut run: Option<PendingRun> = None;
    let mut steps = 0;
    let flush = |run: &mut Option<PendingRun>, out: &mut Frame| {
        flush_run(run, out, row, left, right);
    };
    while e < level.len() {
        let (s, end, f, c) = (level.start[e], level.end[e], level.first[e], level.count[e]);
        if s >= t1 {
            break;
        }
        steps += 1;
        e += 1;
        let id = lane.ids.get(f as usize).copied().unwrap_or(0);
        let (xs, xe) = (vp.x(s), vp.x(end));
        if c == 1 && xe - xs >= MIN_SLICE_PX {
            flush(&mut run, out);
            out.rects.push(FrameRect {
                x0: xs.max(left),
                x1: xe.min(right),
                row,
                kind: RectKind::Slice(id),
            });
            continue;
        }
        match &mut run {
            Some((_, rx1, rc, _)) if xs <= *rx1 + RUN_MERGE_GAP_PX => {
                *rx1 = rx1.max(xe);
                *rc += c;
            }
            _ => {
                flush(&mut run, out);
                run = Some((xs, xe, c, id));
            }
        }
    }
    flush(&mut run, out);
    steps
}

/// Walks one lane's slices by pixel column; returns the steps taken.
fn walk_slices(lane: LaneRef<'_>, row: u32, vp: &Viewport, out: &mut Frame) -> usize {
    let end_at = |k: usize| lane.ends.get(k).copied().unwrap_or(i64::MIN);
    let t0 = vp.origin.saturating_add(vp.start.floor() as i64);
    let t1 = vp.origin.saturating_add(vp.end.ceil() as i64);
    let left = vp.x0 - 1.0;
    let right = vp.x0 + vp.width + 1.0;

    let ids = lane.ids;
    let mut i = lane.first_at_or_after(0, t0);
    // Siblings do not overlap, so at most the one slice before can reach into the view.
    if i > 0 && end_at(i - 1) > t0 {
        i -= 1;
    }
    let mut run: Option<PendingRun> = None;
    let mut steps = 0;
    let flush = |run: &mut Option<PendingRun>, out: &mut Frame| {
        flush_run(run, out, row, left, right);
    };
    while let Some(&id) = ids.get(i) {
        steps += 1;
        let s = lane.starts.get(i).copied().unwrap_or(i64::MAX);
        if s >= t1 {
            break;
        }
        let xs = vp.x(s);
        let xe = vp.x(end_at(i));
        if xe - xs >= MIN_SLICE_PX {
            flush(&mut run, out);
            out.rects.push(FrameRect {
                x0: xs.max(left),
                x1: xe.min(right),
                row,
                kind: RectKind::Slice(id),
            });
            i += 1;
            continue;
        }
        // A sub-pixel slice: skip every slice starting in the same pixel column.
        let col_end_x = xs.floor() + 1.0;
        let t_col_end = vp.t_abs_ceil(col_end_x);
        let j = lane.first_at_or_after(i + 1, t_col_end);
        let mut jump = j;
        let mut x_end = xe;
        if j - 1 > i {
            let last_start = lane.starts[j - 1];
            let last_xe = vp.x(end_at(j - 1));
            if last_xe - vp.x(last_start) >= MIN_SLICE_PX {
                // The last slice of the column is wide: draw it on its own next.
                jump = j - 1;
                x_end = x_end.max(vp.x(end_at(jump - 1)));
            } else {
                x_end = x_end.max(last_xe);
            }
        }
        let count = (jump - i) as u32;
        match &mut run {
            Some((_, rx1, rc, _)) if xs <= *rx1 + RUN_MERGE_GAP_PX => {
                *rx1 = rx1.max(x_end);
                *rc += count;
            }
            _ => {
                flush(&mut run, out);
                run = Some((xs, x_end, count, id));
            }
        }
        i = jump;
    }
    flush(&mut run, out);
    steps
}

/// Instants of one track, at most one per pixel column; returns the steps taken.
fn walk_instants(
    timeline: &Timeline,
    range: Range<usize>,
    row: u32,
    vp: &Viewport,
    out: &mut Frame,
) -> usize {
    let ts = timeline.instants.ts.get(range).unwrap_or(&[]);
    let t0 = vp.t_abs_ceil(vp.x0);
    let t1 = vp.t_abs_ceil(vp.x0 + vp.width);
    let mut k = ts.partition_point(|&t| t < t0);
    let mut steps = 0;
    while let Some(&t) = ts.get(k) {
        if t > t1 {
            break;
        }
        steps += 1;
        let x = vp.x(t);
        out.instants.push((row, x));
        let next = vp.t_abs_ceil(x.floor() + 1.0);
        k += 1 + ts
            .get(k + 1..)
            .unwrap_or(&[])
            .partition_point(|&u| u < next);
    }
    steps
}

/// Per pixel column min/max of a counter track (values held until the next sample).
fn counter_strip(
    timeline: &Timeline,
    index: &LaneIndex,
    track: TrackId,
    row: u32,
    vp: &Viewport,
) -> CounterStrip {
    let range = index.counter_range(track);
    let ts = timeline.counters.ts.get(range.clone()).unwrap_or(&[]);
    let values = timeline.counters.value.get(range).unwrap_or(&[]);
    let (lo, hi) = index.counter_bounds(track);
    let scale = if hi > lo { 1.0 / (hi - lo) } else { 0.0 };
    let norm = |v: f64| ((v - lo) * scale).clamp(0.0, 1.0) as f32;
    let width = vp.width.max(0.0).ceil() as usize;
    let mut columns = Vec::with_capacity(width);
    let mut k = ts.partition_point(|&t| t < vp.t_abs_ceil(vp.x0));
    for c in 0..width {
        let col_end = vp.t_abs_ceil(vp.x0 + c as f32 + 1.0);
        let end = k + ts.get(k..).unwrap_or(&[]).partition_point(|&t| t < col_end);
        // The value held at the column's start is the previous sample's.
        let held = k.checked_sub(1).and_then(|p| values.get(p)).copied();
        let mut lo_v = held;
        let mut hi_v = held;
        let n = end - k;
        let stride = n.div_ceil(MAX_COUNTER_SAMPLES_PER_PX).max(1);
        let mut p = k;
        while p < end {
            if let Some(&v) = values.get(p) {
                lo_v = Some(lo_v.map_or(v, |x| x.min(v)));
                hi_v = Some(hi_v.map_or(v, |x| x.max(v)));
            }
            p += stride;
        }
        // Keep the last sample of the column exact: it is the value held afterwards.
        if end > k
            && let Some(&v) = values.get(end - 1)
        {
            lo_v = Some(lo_v.map_or(v, |x| x.min(v)));
            hi_v = Some(hi_v.map_or(v, |x| x.max(v)));
        }
        columns.push(match (lo_v, hi_v) {
            (Some(a), Some(b)) => Some((norm(a), norm(b))),
            _ => None,
        });
        k = end;
    }
    CounterStrip { row, columns }
}

/// The slice of a lane under `[t_lo, t_hi]` (absolute ns), preferring one containing the
/// middle; looks at a bounded number of neighbours.
#[must_use]
pub fn hit(timeline: &Timeline, ids: &[SliceId], t_lo: i64, t_hi: i64) -> Option<SliceId> {
    let starts = &timeline.slices.start;
    let mid = t_lo + (t_hi - t_lo) / 2;
    let after = ids.partition_point(|&id| starts.get(id as usize).is_some_and(|&s| s <= t_hi));
    let mut best: Option<(i64, SliceId)> = None;
    for &id in ids.get(..after)?.iter().rev().take(64) {
        let s = *starts.get(id as usize)?;
        let e = timeline.slices.end(id);
        if e < t_lo {
            break;
        }
        let distance = if s <= mid && mid <= e {
            0
        } else {
            (s - mid).abs().min((e - mid).abs())
        };
        if best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, id));
        }
    }
    best.map(|(_, id)| id)
}

#[cfg(test)]
mod tests;
