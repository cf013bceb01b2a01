//! Vertical layout of the timeline: groups (a process or device of one input), their tracks and
//! each track's rows (one per nesting depth; one taller row for a counter).
//!
//! The layout is rebuilt only when a group is collapsed or expanded (O(tracks + depth rows)),
//! never per frame. Per frame, [`Layout::rows_in`] finds the rows inside the viewport by binary
//! search, so vertical culling costs O(log rows).

use std::ops::Range;

use steplens_ingest::model::{LaneId, Timeline, TrackId, TrackKind};

/// Height of a slice row, points.
pub const ROW_H: f32 = 18.0;
/// Height of a counter row, points.
pub const COUNTER_H: f32 = 36.0;
/// Height of a group header row, points.
pub const HEADER_H: f32 = 20.0;
/// Gap after each track, points.
pub const TRACK_GAP: f32 = 3.0;

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
}

impl Layout {
    /// Groups the Timeline's tracks (consecutive tracks of one input and process) with every
    /// group expanded.
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
                let mut name = if track.process_name.is_empty() {
                    match track.pid {
                        LaneId::Int(pid) => format!("pid {pid}"),
                        LaneId::Str(id) => timeline.strings.get(id).to_owned(),
                    }
                } else {
                    track.process_name.clone()
                };
                if let TrackKind::Counter = track.kind {
                    name.push_str(" (counters)");
                }
                if multi_source && let Some(src) = timeline.sources.get(track.source as usize) {
                    let file = src.path.rsplit('/').next().unwrap_or(&src.path);
                    name = match rank(track.source) {
                        Some(rank) => format!("rank {rank} · {file}: {name}"),
                        None => format!("{file}: {name}"),
                    };
                }
                groups.push(Group {
                    name,
                    tracks: Vec::new(),
                    collapsed: false,
                });
                last_key = Some(key);
            }
            if let Some(g) = groups.last_mut() {
                g.tracks.push(i as TrackId);
            }
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
        let mut layout = Self {
            groups,
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
                    for depth in 0..=track.max_depth {
                        self.rows.push(Row {
                            kind: RowKind::Lane { track: t, depth },
                            y,
                            h: ROW_H,
                        });
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

    /// The row of `track` at `depth` (`None` when its group is collapsed).
    #[must_use]
    pub fn lane_row(&self, track: TrackId, depth: u16) -> Option<usize> {
        let first = (*self.track_row.get(track as usize)?)?;
        let row = first + depth as usize;
        match self.rows.get(row)?.kind {
            RowKind::Lane { track: t, .. } if t == track => Some(row),
            RowKind::Counter { track: t } if t == track => Some(first),
            _ => None,
        }
    }

    /// The group holding `track`.
    #[must_use]
    pub fn group_of(&self, track: TrackId) -> Option<usize> {
        self.groups.iter().position(|g| g.tracks.contains(&track))
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
