//! One frame's paint list: the viewport's time ↔ pixel mapping, the rectangles, counter strips
//! and instants of the visible rows, built by walking each lane's merged levels or its slices
//! by pixel column; and the hit test of a click.

use std::ops::Range;

use steplens_ingest::model::{SliceId, Timeline, TrackId, TrackKind};

use super::super::layout::{Layout, RowKind};
use super::{
    LaneIndex, LaneRef, Level, MAX_COUNTER_SAMPLES_PER_PX, MIN_SLICE_PX, RUN_MERGE_GAP_PX,
};

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
pub(super) fn walk_level(
    lane: LaneRef<'_>,
    level: &Level,
    row: u32,
    vp: &Viewport,
    out: &mut Frame,
) -> usize {
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
pub(super) fn walk_slices(lane: LaneRef<'_>, row: u32, vp: &Viewport, out: &mut Frame) -> usize {
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
