//! Vertical layout of the timeline: groups (a process or device of one input), their tracks and
//! each track's rows (one per nesting depth; one taller row for a counter).
//!
//! A host thread nested deeper than [`FOLD_MIN_ROWS`] rows (a trace recorded with Python
//! stacks nests ~20–40 `python_function` frames), or one that starts with outer Python frames
//! (`<module>`, `spawn_main`, `_main`, `_bootstrap`: depths holding only a few
//! `python_function` slices that cover nearly the whole track, [`outer_python_depths`]),
//! starts *folded* unless everything fits on screen unfolded ([`Layout::unfold_if_it_fits`]):
//! the outer frames share one [`RowKind::Folded`] row at the top, the next [`FOLD_SHOWN`]
//! depths keep their rows and every deeper depth shares one more folded row, the deepest slice
//! on top, so the rows that hold the step's work and the device tracks below stay in view.
//! Clicking the track's name unfolds it ([`Layout::toggle_track`]); selecting a slice in a
//! folded row unfolds its track ([`Layout::unfold_for`]).
//!
//! The layout is rebuilt only when a group is collapsed or expanded or a track folded or
//! unfolded (O(tracks + depth rows)), never per frame. Per frame, [`Layout::rows_in`] finds the
//! rows inside the viewport by binary search, so vertical culling costs O(log rows).

use std::ops::Range;

use steplens_ingest::model::{
    CategoryClass, DeviceKind, LaneId, Timeline, Track, TrackId, TrackKind,
};

/// Height of a slice row, points.
pub const ROW_H: f32 = 18.0;
/// Height of a counter row, points.
pub const COUNTER_H: f32 = 36.0;
/// Height of a group header row, points.
pub const HEADER_H: f32 = 20.0;
/// Gap after each track, points.
pub const TRACK_GAP: f32 = 3.0;
/// A host thread with more depth rows than this starts folded.
pub const FOLD_MIN_ROWS: u16 = 6;
/// Depths a folded track keeps as their own rows (below its outer frames); the deeper ones
/// share one row.
pub const FOLD_SHOWN: u16 = 4;
/// An outer Python frame's depth covers at least this share of its track's span.
pub const OUTER_COVER: f64 = 0.9;
/// An outer Python frame's depth holds at most this many slices (a frame entered once, or a
/// few times around a short call).
pub const OUTER_MAX_SLICES: u32 = 8;
/// At most this many outer depths are looked for.
pub const OUTER_MAX_DEPTHS: u16 = 12;

/// What a row shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// A group header (click to collapse or expand).
    Header {
        /// Index in [`Layout::groups`].
        group: usize,
    },
    /// The slices of one track at one nesting depth.
    Lane {
        /// Track.
        track: TrackId,
        /// Depth.
        depth: u16,
    },
    /// A counter track's area chart.
    Counter {
        /// Track.
        track: TrackId,
    },
    /// The depths `from..=to` of a folded track, drawn over each other in one row (deeper on
    /// top): its outer Python frames (`from` 0) or its deep frames.
    Folded {
        /// Track.
        track: TrackId,
        /// First depth in the row.
        from: u16,
        /// Last depth in the row.
        to: u16,
    },
}

/// One row, placed vertically.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// What the row shows.
    pub kind: RowKind,
    /// Top, points from the top of the track area.
    pub y: f32,
    /// Height, points.
    pub h: f32,
}

/// A process or device of one input: the unit that collapses.
#[derive(Debug, Clone)]
pub struct Group {
    /// Display name.
    pub name: String,
    /// Its tracks, in display order.
    pub tracks: Vec<TrackId>,
    /// Whether only the header shows.
    pub collapsed: bool,
}

/// The vertical layout of every group, track and row.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Groups in display order (the Timeline's track order: host above its device; with
    /// several ranks, by rank).
    pub groups: Vec<Group>,
    /// Rows top to bottom.
    pub rows: Vec<Row>,
    /// Total height, points.
    pub height: f32,
    /// For each track, the index of its first row (`None` while its group is collapsed).
    pub track_row: Vec<Option<usize>>,
    /// For each track, whether it is deep enough to fold ([`FOLD_MIN_ROWS`]) or has outer
    /// Python frames to fold.
    pub foldable: Vec<bool>,
    /// For each track, how many of its first depths are outer Python frames
    /// ([`outer_python_depths`]; 0 for none).
    pub outer: Vec<u16>,
    /// For each track, whether it is unfolded (every depth its own row); tracks that are not
    /// foldable always are.
    pub unfolded: Vec<bool>,
    /// For each input, its rank, when the Timeline holds several inputs of known ranks
    /// (empty otherwise: one rank, or positions in the argument list, which are no ranks).
    pub ranks: Vec<Option<i64>>,
}

impl Layout {
    /// Groups the Timeline's tracks (consecutive tracks of one input and process), every group
    /// expanded but the profiler's own near-empty async ones.
    #[must_use]
    pub fn new(timeline: &Timeline) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        let mut last_key = None;
        let multi_source = timeline.sources.len() > 1;
        // Ranks as the report reads them; a position in the argument list is no rank to show.
        let rank_of: Vec<Option<i64>> = if multi_source {
            steplens_analysis::ranks::input_ranks(timeline)
                .into_iter()
                .map(|(rank, from)| (from != "input order").then_some(rank))
                .collect()
        } else {
            Vec::new()
        };
        let rank = |source: u16| rank_of.get(source as usize).copied().flatten();
        for (i, track) in timeline.tracks.iter().enumerate() {
            let key = (track.source, track.process_name.as_str(), track.pid);
            if last_key != Some(key) {
                groups.push(Group {
                    name: String::new(),
                    tracks: Vec::new(),
                    collapsed: false,
                });
                last_key = Some(key);
            }
            if let Some(g) = groups.last_mut() {
                g.tracks.push(i as TrackId);
            }
        }
        for g in &mut groups {
            let Some(track) = g
                .tracks
                .first()
                .and_then(|&t| timeline.tracks.get(t as usize))
            else {
                continue;
            };
            let mut name = group_name(timeline, &g.tracks, !multi_source);
            if let TrackKind::Counter = track.kind {
                name.push_str(" (counters)");
            }
            let src = timeline.sources.get(track.source as usize);
            if multi_source && let Some(src) = src {
                let file = file_name(&src.path);
                name = match rank(track.source) {
                    Some(rank) => format!("rank {rank} · {file}: {name}"),
                    None => format!("{file}: {name}"),
                };
            } else if let Some(src) = src
                && let Some(rank) = src.rank
                && src.world_size.is_some_and(|w| w > 1)
            {
                // One rank of a larger job.
                name = format!("rank {rank} · {name}");
            }
            g.name = name;
            g.collapsed = is_profiler_noise(timeline, &g.tracks);
        }
        if multi_source {
            // Ranks top to bottom in rank order, whatever order the files were given in;
            // inputs without a rank after them, each input's groups in their own order.
            groups.sort_by_key(|g| {
                let rank = g
                    .tracks
                    .first()
                    .and_then(|&t| timeline.tracks.get(t as usize))
                    .and_then(|tr| rank(tr.source));
                (rank.is_none(), rank)
            });
        }
        let outer: Vec<u16> = (0..timeline.tracks.len())
            .map(|t| outer_python_depths(timeline, t as TrackId))
            .collect();
        let foldable: Vec<bool> = timeline
            .tracks
            .iter()
            .zip(&outer)
            .map(|(t, &o)| {
                t.kind == TrackKind::HostThread && (t.max_depth >= FOLD_MIN_ROWS || o > 0)
            })
            .collect();
        let first_rank = rank_of.iter().flatten().next().copied();
        let ranks = if rank_of.iter().flatten().any(|&r| Some(r) != first_rank) {
            rank_of
        } else {
            Vec::new()
        };
        let mut layout = Self {
            groups,
            ranks,
            unfolded: vec![false; foldable.len()],
            foldable,
            outer,
            ..Self::default()
        };
        layout.rebuild(timeline);
        layout
    }

    /// Recomputes the rows after a group was collapsed or expanded.
    pub fn rebuild(&mut self, timeline: &Timeline) {
        self.rows.clear();
        self.track_row = vec![None; timeline.tracks.len()];
        let mut y = 0.0;
        for (g, group) in self.groups.iter().enumerate() {
            self.rows.push(Row {
                kind: RowKind::Header { group: g },
                y,
                h: HEADER_H,
            });
            y += HEADER_H;
            if group.collapsed {
                continue;
            }
            for &t in &group.tracks {
                let Some(track) = timeline.tracks.get(t as usize) else {
                    continue;
                };
                if let Some(slot) = self.track_row.get_mut(t as usize) {
                    *slot = Some(self.rows.len());
                }
                if track.kind == TrackKind::Counter {
                    self.rows.push(Row {
                        kind: RowKind::Counter { track: t },
                        y,
                        h: COUNTER_H,
                    });
                    y += COUNTER_H;
                } else {
                    for kind in self.track_row_kinds(t, track.max_depth) {
                        self.rows.push(Row { kind, y, h: ROW_H });
                        y += ROW_H;
                    }
                }
                y += TRACK_GAP;
            }
        }
        self.height = y;
    }

    /// Collapses or expands group `g`.
    pub fn toggle(&mut self, g: usize, timeline: &Timeline) {
        if let Some(group) = self.groups.get_mut(g) {
            group.collapsed = !group.collapsed;
            self.rebuild(timeline);
        }
    }

    /// The rows of slice track `track` (deepest depth `max_depth`) as it is now: with its
    /// outer frames and deep frames each in one row while it is folded.
    fn track_row_kinds(&self, track: TrackId, max_depth: u16) -> Vec<RowKind> {
        let (outer, deep) = if self.is_folded(track) {
            self.folds(track, max_depth)
        } else {
            (0, None)
        };
        let mut kinds = Vec::new();
        if outer > 0 {
            kinds.push(RowKind::Folded {
                track,
                from: 0,
                to: outer - 1,
            });
        }
        let last = deep.map_or(max_depth, |d| d - 1);
        kinds.extend((outer..=last).map(|depth| RowKind::Lane { track, depth }));
        if let Some(from) = deep {
            kinds.push(RowKind::Folded {
                track,
                from,
                to: max_depth,
            });
        }
        kinds
    }

    /// What folding `track` hides: its outer depths (`0..outer` in one row) and the first of
    /// its deep depths (`from..=max_depth` in one row), if it is deep enough.
    fn folds(&self, track: TrackId, max_depth: u16) -> (u16, Option<u16>) {
        let outer = self.outer.get(track as usize).copied().unwrap_or(0);
        let deep = (max_depth >= outer.saturating_add(FOLD_MIN_ROWS)).then(|| outer + FOLD_SHOWN);
        (outer, deep)
    }

    /// Whether `track`'s outer frames or deep rows are folded.
    #[must_use]
    pub fn is_folded(&self, track: TrackId) -> bool {
        self.foldable.get(track as usize).copied().unwrap_or(false)
            && !self.unfolded.get(track as usize).copied().unwrap_or(true)
    }

    /// Folds or unfolds `track` (nothing for a track that is not foldable).
    pub fn toggle_track(&mut self, track: TrackId, timeline: &Timeline) {
        if self.foldable.get(track as usize).copied().unwrap_or(false)
            && let Some(open) = self.unfolded.get_mut(track as usize)
        {
            *open = !*open;
            self.rebuild(timeline);
        }
    }

    /// Unfolds `track` when the row of `depth` is a folded one (a selected slice or a
    /// finding's evidence there must get its own row). Returns whether it did.
    pub fn unfold_for(&mut self, track: TrackId, depth: u16, timeline: &Timeline) -> bool {
        let folded_here = self
            .lane_row(track, depth)
            .and_then(|r| self.rows.get(r))
            .is_some_and(|row| matches!(row.kind, RowKind::Folded { .. }));
        if folded_here && let Some(open) = self.unfolded.get_mut(track as usize) {
            *open = true;
            self.rebuild(timeline);
            return true;
        }
        false
    }

    /// Unfolds every folded track when the whole layout then fits in `height` points (a deep
    /// thread is folded only to make room). Returns whether it did.
    pub fn unfold_if_it_fits(&mut self, timeline: &Timeline, height: f32) -> bool {
        let extra: f32 = timeline
            .tracks
            .iter()
            .enumerate()
            .filter(|&(t, _)| {
                self.is_folded(t as TrackId) && self.track_row.get(t).is_some_and(Option::is_some)
            })
            .map(|(t, tr)| {
                let rows = self.track_row_kinds(t as TrackId, tr.max_depth).len();
                (f32::from(tr.max_depth) + 1.0 - rows as f32) * ROW_H
            })
            .sum();
        if extra == 0.0 || self.height + extra > height {
            return false;
        }
        self.unfolded.iter_mut().for_each(|u| *u = true);
        self.rebuild(timeline);
        true
    }

    /// The rows of `track` (empty while its group is collapsed).
    #[must_use]
    pub fn track_rows(&self, track: TrackId) -> Range<usize> {
        let Some(first) = self.track_row.get(track as usize).copied().flatten() else {
            return 0..0;
        };
        let n = self.rows[first..]
            .iter()
            .take_while(|r| match r.kind {
                RowKind::Lane { track: t, .. }
                | RowKind::Counter { track: t }
                | RowKind::Folded { track: t, .. } => t == track,
                RowKind::Header { .. } => false,
            })
            .count();
        first..first + n
    }

    /// Rows overlapping `[y0, y1)` (points from the top of the track area).
    #[must_use]
    pub fn rows_in(&self, y0: f32, y1: f32) -> Range<usize> {
        let a = self.rows.partition_point(|r| r.y + r.h <= y0);
        let b = self.rows.partition_point(|r| r.y < y1);
        a..b.max(a)
    }

    /// The row at `y`, if any.
    #[must_use]
    pub fn row_at(&self, y: f32) -> Option<usize> {
        let i = self.rows.partition_point(|r| r.y + r.h <= y);
        self.rows.get(i).filter(|r| r.y <= y).map(|_| i)
    }

    /// The row of `track` at `depth` (the folded row for a depth folded into it; `None` when
    /// its group is collapsed): a walk over the track's rows, at most its depth + 1.
    #[must_use]
    pub fn lane_row(&self, track: TrackId, depth: u16) -> Option<usize> {
        self.track_rows(track).find(|&r| match self.rows[r].kind {
            RowKind::Counter { .. } => true,
            RowKind::Lane { depth: d, .. } => d == depth,
            RowKind::Folded { from, to, .. } => (from..=to).contains(&depth),
            RowKind::Header { .. } => false,
        })
    }

    /// The group holding `track`.
    #[must_use]
    pub fn group_of(&self, track: TrackId) -> Option<usize> {
        self.groups.iter().position(|g| g.tracks.contains(&track))
    }
}

/// How many of `track`'s first depths are outer Python frames: a host thread's depths from 0
/// down that each hold only `python_function` slices, at most [`OUTER_MAX_SLICES`] of them,
/// covering at least [`OUTER_COVER`] of the track's span (the interpreter's `<module>`,
/// `spawn_main`, `_main`, `_bootstrap` around all the work). At least one depth is left below
/// them, and a single such depth is not counted (folding it would save no row).
///
/// One pass over the track's slices, stopped at the first slice that rules depth 0 or 1 out (a
/// thread whose top level is not a Python frame costs one slice or two).
#[must_use]
pub fn outer_python_depths(timeline: &Timeline, track: TrackId) -> u16 {
    let Some(tr) = timeline.tracks.get(track as usize) else {
        return 0;
    };
    if tr.kind != TrackKind::HostThread || tr.max_depth == 0 {
        return 0;
    }
    let slices = &timeline.slices;
    let depths = usize::from(tr.max_depth.min(OUTER_MAX_DEPTHS));
    // Per depth: slices seen, time covered, whether all are Python frames.
    let mut count = vec![0u32; depths];
    let mut covered = vec![0i64; depths];
    let mut python = vec![true; depths];
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for i in tr.slices.clone() {
        let (Some(&depth), Some(&start), Some(&dur), Some(&cat)) = (
            slices.depth.get(i as usize),
            slices.start.get(i as usize),
            slices.dur.get(i as usize),
            slices.cat.get(i as usize),
        ) else {
            continue;
        };
        first = first.min(start);
        last = last.max(start.saturating_add(dur));
        let d = usize::from(depth);
        if d >= depths {
            continue;
        }
        count[d] = count[d].saturating_add(1);
        covered[d] = covered[d].saturating_add(dur);
        if timeline.categories.class(cat) != CategoryClass::PythonFunction {
            python[d] = false;
        }
        // Fewer than two outer depths fold nothing: stop as soon as depth 0 or 1 is ruled out.
        if d <= 1 && (!python[d] || count[d] > OUTER_MAX_SLICES) {
            return 0;
        }
    }
    let span = (last - first).max(1) as f64;
    let outer = (0..depths)
        .take_while(|&d| {
            python[d] && count[d] <= OUTER_MAX_SLICES && covered[d] as f64 >= OUTER_COVER * span
        })
        .count() as u16;
    if outer < 2 { 0 } else { outer }
}

/// Whether a group is only async lanes with at most one event in all: the profiler's own
/// `PyTorch Profiler` span, an empty `Traces` or global lane. Such groups start collapsed (their
/// header stays), so they do not push the threads and devices down, once per rank.
fn is_profiler_noise(timeline: &Timeline, tracks: &[TrackId]) -> bool {
    let instants = &timeline.instants.track;
    let mut events = 0;
    for &t in tracks {
        let Some(track) = timeline.tracks.get(t as usize) else {
            continue;
        };
        if track.kind != TrackKind::Async {
            return false;
        }
        events += track.slices.len()
            + (instants.partition_point(|&x| x <= t) - instants.partition_point(|&x| x < t));
    }
    events <= 1
}

/// The last part of a path (the file name).
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The text of a pid as written.
fn pid_text(timeline: &Timeline, pid: LaneId) -> String {
    match pid {
        LaneId::Int(pid) => pid.to_string(),
        LaneId::Str(id) => timeline.strings.get(id).to_owned(),
    }
}

/// The name of the group of `tracks` (one process of one input): its process name as written
/// (without the `*` sort prefixes of Synapse's TEF), unless that is empty or a number (the pid:
/// `9`, `-1`): then the device (`GPU 0`, `Gaudi 0`), the lanes of an async group, the runtime of
/// a `Runtime/Thread N` thread, the one category of all its slices (the profiler's
/// `overhead`), and last the pid with the input's file name (`with_file`; several inputs
/// already prefix it).
#[must_use]
pub fn group_name(timeline: &Timeline, tracks: &[TrackId], with_file: bool) -> String {
    let members: Vec<&Track> = tracks
        .iter()
        .filter_map(|&t| timeline.tracks.get(t as usize))
        .collect();
    let Some(first) = members.first() else {
        return String::new();
    };
    let pid = pid_text(timeline, first.pid);
    let written = first.process_name.trim().trim_start_matches('*').trim();
    // A number is the pid written back (Kineto's `9`, `-1` without a `process_name`).
    if !written.is_empty() && written.parse::<i64>().is_err() {
        return written.to_owned();
    }
    let pid_suffix = if pid.is_empty() {
        String::new()
    } else {
        format!(" (pid {pid})")
    };
    if members.iter().all(|t| t.kind.is_device()) {
        let family = match timeline.device.kind {
            DeviceKind::Cuda | DeviceKind::Rocm => "GPU",
            DeviceKind::Hpu => "Gaudi",
            DeviceKind::Mtia => "MTIA",
            DeviceKind::Cpu => "device",
        };
        let mut devices = members.iter().map(|t| match t.kind {
            TrackKind::DeviceEngine { device, .. } => device,
            _ => None,
        });
        let one = devices.next().flatten();
        return match one {
            Some(d) if devices.all(|x| x == Some(d)) => format!("{family} {d}"),
            _ => format!("{family}{pid_suffix}"),
        };
    }
    if members.iter().all(|t| t.kind == TrackKind::Async) {
        let mut lanes: Vec<&str> = members.iter().map(|t| t.name.as_str()).collect();
        lanes.dedup();
        let more = if lanes.len() > 3 { ", …" } else { "" };
        lanes.truncate(3);
        return format!("async: {}{more}", lanes.join(", "));
    }
    // Synapse's API calls come on a `Synapse/Thread N` thread of a process without a name.
    let runtime = first.name.split_once('/').map(|(r, _)| r.trim());
    if let Some(runtime) = runtime
        && !runtime.is_empty()
        && members
            .iter()
            .all(|t| t.name.split_once('/').map(|(r, _)| r.trim()) == Some(runtime))
    {
        return format!("{runtime}{pid_suffix}");
    }
    // One category for all of its slices: Kineto's pid -1 holds the profiler's `overhead`.
    let slices = &timeline.slices;
    let mut cats = members
        .iter()
        .flat_map(|t| t.slices.clone())
        .filter_map(|i| slices.cat.get(i as usize).copied());
    if let Some(cat) = cats.next()
        && cats.all(|c| c == cat)
    {
        let name = timeline.categories.name(cat).trim();
        if !name.is_empty() {
            return format!("{name}{pid_suffix}");
        }
    }
    let file = timeline
        .sources
        .get(first.source as usize)
        .map_or("", |s| file_name(&s.path));
    match (pid.is_empty(), with_file && !file.is_empty()) {
        (false, true) => format!("pid {pid} · {file}"),
        (false, false) => format!("pid {pid}"),
        (true, true) => file.to_owned(),
        (true, false) => "(unnamed)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(hs: &[f32]) -> Layout {
        let mut y = 0.0;
        let rows = hs
            .iter()
            .map(|&h| {
                let r = Row {
                    kind: RowKind::Header { group: 0 },
                    y,
                    h,
                };
                y += h;
                r
            })
            .collect();
        Layout {
            rows,
            height: y,
            ..Layout::default()
        }
    }

    fn track(pid: i64, process_name: &str, kind: TrackKind, name: &str) -> Track {
        Track {
            source: 0,
            pid: LaneId::Int(pid),
            tid: LaneId::Int(1),
            kind,
            name: name.to_owned(),
            process_name: process_name.to_owned(),
            sort_key: (0, 0),
            slices: 0..0,
            max_depth: 0,
        }
    }

    #[test]
    fn unnamed_groups_are_named_by_device_runtime_or_pid_and_file() {
        let mut t = Timeline::default();
        t.device.kind = DeviceKind::Hpu;
        let engine = |device| TrackKind::DeviceEngine {
            class: steplens_ingest::model::EngineClass::Mme,
            device: Some(device),
        };
        t.tracks = vec![
            track(3, "3", engine(0), "MME 0"),
            track(3, "3", engine(0), "MME 1"),
            track(9, "9", TrackKind::HostThread, "Synapse/Thread 52891"),
            track(7, "", TrackKind::HostThread, "thread 7"),
            track(5, "python3", TrackKind::HostThread, "thread 5"),
            track(6, "***Host", TrackKind::HostThread, "thread 6"),
        ];
        t.sources = vec![steplens_ingest::model::SourceInfo {
            path: "runs/a/trace.json".into(),
            format: steplens_ingest::FormatId::KinetoJson,
            bytes: 0,
            stored_bytes: 0,
            compressed: false,
            events: 0,
            events_by_phase: Vec::new(),
            warnings: Vec::new(),
            top_level: Vec::new(),
            rank: None,
            world_size: None,
        }];
        let name = |tracks: &[TrackId]| group_name(&t, tracks, true);
        assert_eq!(name(&[0, 1]), "Gaudi 0");
        assert_eq!(name(&[2]), "Synapse (pid 9)");
        assert_eq!(name(&[3]), "pid 7 · trace.json");
        assert_eq!(name(&[4]), "python3");
        assert_eq!(name(&[5]), "Host");
        t.device.kind = DeviceKind::Cuda;
        assert_eq!(group_name(&t, &[0], true), "GPU 0");
    }

    /// A host thread under three outer Python frames (the third a little shorter), then 20
    /// ops each nesting 7 deep.
    fn python_thread() -> Timeline {
        use steplens_ingest::TimelineBuilder;
        use steplens_ingest::model::ArgsRef;
        let mut b = TimelineBuilder::default();
        let track = b.track(0, LaneId::Int(1), LaneId::Int(1));
        let py = b.intern_cat("python_function");
        let op = b.intern_cat("cpu_op");
        for (k, frame) in ["<module>", "spawn_main", "train"].into_iter().enumerate() {
            let name = b.intern(frame);
            let k = k as i64;
            b.push_slice(track, k, 100_000 - 2 * k, name, py, ArgsRef::NONE);
        }
        let name = b.intern("aten::mm");
        for i in 0..20 {
            for d in 0..7 {
                b.push_slice(
                    track,
                    100 + i * 4_000 + d,
                    3_000 - 2 * d,
                    name,
                    op,
                    ArgsRef::NONE,
                );
            }
        }
        b.finish()
    }

    #[test]
    fn outer_python_frames_share_one_row_and_unfold_for_a_slice_in_them() {
        let t = python_thread();
        assert_eq!(t.tracks[0].max_depth, 9);
        assert_eq!(outer_python_depths(&t, 0), 3);
        let mut l = Layout::new(&t);
        assert!(l.is_folded(0));
        let kinds: Vec<RowKind> = l.rows.iter().map(|r| r.kind).collect();
        let lane = |depth| RowKind::Lane { track: 0, depth };
        assert_eq!(
            kinds[1..],
            [
                RowKind::Folded {
                    track: 0,
                    from: 0,
                    to: 2
                },
                lane(3),
                lane(4),
                lane(5),
                lane(6),
                RowKind::Folded {
                    track: 0,
                    from: 7,
                    to: 9
                },
            ]
        );
        assert_eq!(l.lane_row(0, 1), Some(1));
        assert_eq!(l.lane_row(0, 4), Some(3));
        assert_eq!(l.lane_row(0, 8), Some(6));
        assert!(!l.unfold_for(0, 4, &t), "depth 4 has its own row");
        assert!(l.unfold_for(0, 1, &t));
        assert!(!l.is_folded(0));
        assert_eq!(l.track_rows(0).len(), 10);
        assert_eq!(l.lane_row(0, 1), Some(2));
    }

    #[test]
    fn rows_in_a_window_are_found_by_binary_search() {
        let l = rows(&[10.0, 10.0, 10.0, 10.0]);
        assert_eq!(l.rows_in(0.0, 10.0), 0..1);
        assert_eq!(l.rows_in(5.0, 25.0), 0..3);
        assert_eq!(l.rows_in(40.0, 50.0), 4..4);
        assert_eq!(l.row_at(15.0), Some(1));
        assert_eq!(l.row_at(45.0), None);
    }
}
