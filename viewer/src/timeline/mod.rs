//! The timeline widget: the ruler, the track gutter, slices, counters, steps, findings, flows and
//! selections, and the mouse and keyboard navigation.
//!
//! This module owns the widget's state between frames and its frame ([`TimelineWidget::ui`]);
//! the input handling (`input`), the painting of the tracks (`paint`) and the ruler with the
//! steps (`ruler`) are `impl` blocks and functions beside it that read and write the same
//! state. The layout and the level-of-detail paint list are their own modules.
//!
//! The widget owns no data. Per frame it asks [`layout::Layout::rows_in`] for the visible rows,
//! [`lod::build_frame`] for the paint list, and paints that list as one mesh plus the labels
//! that fit (in a folded row, on the parts deeper slices leave uncovered: [`uncovered_runs`]);
//! everything else drawn is bounded by the screen (ruler ticks, step lines and names inside the
//! view, findings inside the view, flows of the one selected slice).
//!
//! Navigation (Perfetto / chrome://tracing habits): W/S zoom around the pointer (a press one
//! step, held on and on), A/D pan, wheel scrolls the tracks, shift+wheel pans, ctrl+wheel
//! zooms, drag pans, drag on the ruler or shift+drag selects a time range, F fits the
//! selection, double-click zooms to a slice, Escape clears, a click on a group header collapses
//! it and one on a deep thread's name folds or unfolds its rows. [`KEYS`] lists them for the
//! shortcuts overlay.

mod input;
pub mod layout;
pub mod lod;
mod paint;
mod ruler;

use eframe::egui::{self, Align2, Color32, CornerRadius, FontId, Pos2, Rect, Sense, Stroke};
use steplens_analysis::report::Finding;
use steplens_ingest::model::{SliceId, Timeline, TrackId};

use crate::state::ViewState;
use layout::{Layout, RowKind};
use lod::{Frame, LaneIndex, Viewport};
pub use paint::{fit_label, name_color, uncovered_runs};
pub use ruler::{label_left, tick_label, tick_step};
use ruler::{paint_ruler, paint_steps};

/// Every key and mouse gesture the viewer handles, as the shortcuts overlay (`?`) lists them:
/// (keys, what they do). The timeline's input handling below and the app's (search, `?`) are
/// what this describes.
pub const KEYS: &[(&str, &str)] = &[
    (
        "W / S",
        "zoom in / out around the pointer (a press: one step; held: on and on)",
    ),
    (
        "A / D",
        "pan earlier / later (a press: one step; held: on and on)",
    ),
    ("F", "fit the selected range, else the selected slice"),
    (
        "Escape",
        "clear the range selection, then the slice selection and highlight",
    ),
    ("?", "show or hide this list"),
    (
        "Enter / Shift+Enter",
        "in the search box: next / previous match",
    ),
    ("Enter in the path field", "open the traces typed there"),
    ("Wheel", "scroll the tracks up and down"),
    ("Shift+wheel", "pan earlier / later"),
    ("Ctrl+wheel, pinch", "zoom around the pointer"),
    ("Drag", "pan (and scroll the tracks)"),
    ("Drag on the ruler, Shift+drag", "select a time range"),
    ("Click a slice", "select it (details below)"),
    ("Double-click a slice", "zoom to it"),
    ("Click a group header", "collapse or expand the group"),
    (
        "Click a thread name with ▸ / ▾",
        "unfold or fold its outer and deep rows",
    ),
    ("Drop files on the window", "open them"),
];

/// Width of the track-name gutter, points.
pub const GUTTER_W: f32 = 190.0;
/// Height of the time ruler, points.
pub const RULER_H: f32 = 26.0;

/// A finding drawn on a track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// Track.
    pub track: TrackId,
    /// Start, absolute ns.
    pub start: i64,
    /// End, absolute ns.
    pub end: i64,
    /// Index in the report's findings.
    pub finding: usize,
}

/// Where findings go on the tracks: the finding's track (by name) and its evidence's tracks.
#[must_use]
pub fn finding_marks(timeline: &Timeline, findings: &[Finding]) -> Vec<Mark> {
    let mut marks = Vec::new();
    for (f, finding) in findings.iter().enumerate() {
        let mut tracks: Vec<TrackId> = Vec::new();
        if let Some(name) = &finding.track {
            tracks.extend(
                timeline
                    .tracks
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| &t.name == name)
                    .map(|(i, _)| i as TrackId),
            );
        }
        for id in evidence_slices(finding) {
            if let Some(&t) = timeline.slices.track.get(id as usize) {
                marks.push(Mark {
                    track: t,
                    start: timeline.slices.start[id as usize],
                    end: timeline.slices.end(id),
                    finding: f,
                });
            }
        }
        tracks.sort_unstable();
        tracks.dedup();
        for t in tracks {
            marks.push(Mark {
                track: t,
                start: finding.start_ns,
                end: finding.end_ns,
                finding: f,
            });
        }
    }
    marks
}

/// The slice ids a finding's evidence points at.
#[must_use]
pub fn evidence_slices(finding: &Finding) -> Vec<SliceId> {
    finding
        .evidence
        .iter()
        .filter_map(steplens_analysis::Evidence::slice)
        .collect()
}

/// What the timeline needs to draw one frame.
pub struct TimelineInput<'a> {
    /// The data.
    pub timeline: &'a Timeline,
    /// Lanes for level of detail.
    pub index: &'a LaneIndex,
    /// Findings to mark.
    pub marks: &'a [Mark],
    /// Other ends of the selected slice's flows.
    pub flows: &'a [(SliceId, bool)],
    /// The finding whose marks are emphasised.
    pub active_finding: Option<usize>,
    /// A step's critical path to draw over the slices, when the toggle is on.
    pub critical_path: Option<&'a steplens_analysis::critical_path::CriticalPath>,
}

/// The outline of a search match.
pub const MATCH_COLOUR: Color32 = Color32::from_rgb(80, 220, 255);

/// The colour of a critical-path stretch of `bound`.
#[must_use]
pub fn bound_colour(bound: steplens_analysis::critical_path::Bound) -> Color32 {
    use steplens_analysis::critical_path::Bound;
    match bound {
        Bound::HostCompute => Color32::from_rgb(80, 160, 255),
        Bound::LaunchOverhead => Color32::from_rgb(255, 200, 60),
        Bound::DeviceCompute => Color32::from_rgb(60, 200, 90),
        Bound::Communication => Color32::from_rgb(190, 110, 255),
        Bound::KernelGap => Color32::from_rgb(255, 120, 60),
        Bound::SyncWait => Color32::from_rgb(240, 60, 60),
        Bound::DataLoading => Color32::from_rgb(40, 200, 200),
        Bound::Compile => Color32::from_rgb(255, 100, 200),
    }
}

/// State of the timeline widget kept between frames.
#[derive(Debug)]
pub struct TimelineWidget {
    /// Vertical layout.
    pub layout: Layout,
    frame: Frame,
    drag: Option<Drag>,
    /// Where the track area was in the last frame (screen points).
    pub tracks_rect: Rect,
    step_labels: Vec<(Rect, String)>,
    ruler_labels: Vec<(Rect, String)>,
    /// Whether the first frame checked if the deep threads fit unfolded.
    fold_checked: bool,
}

#[derive(Debug, Clone, Copy)]
enum Drag {
    Pan,
    Range { anchor: f64 },
}

impl TimelineWidget {
    /// A widget for `timeline`, every group expanded.
    #[must_use]
    pub fn new(timeline: &Timeline) -> Self {
        Self {
            layout: Layout::new(timeline),
            frame: Frame::default(),
            drag: None,
            tracks_rect: Rect::NOTHING,
            step_labels: Vec::new(),
            ruler_labels: Vec::new(),
            fold_checked: false,
        }
    }

    /// The step names drawn in the ruler in the last frame, with where they were drawn.
    #[must_use]
    pub fn step_labels(&self) -> &[(Rect, String)] {
        &self.step_labels
    }

    /// The time labels drawn in the ruler in the last frame, with where they were drawn.
    #[must_use]
    pub fn ruler_labels(&self) -> &[(Rect, String)] {
        &self.ruler_labels
    }

    /// Whether a drag (pan or range selection) is in progress.
    #[must_use]
    pub fn is_dragging(&self) -> bool {
        self.drag.is_some()
    }

    /// The paint list built for the last frame.
    #[must_use]
    pub fn last_frame(&self) -> &Frame {
        &self.frame
    }

    /// Scrolls so the row of `track` at `depth` is visible in a track area `height` tall,
    /// expanding its group and unfolding its track if needed.
    pub fn reveal_row(
        &mut self,
        timeline: &Timeline,
        view: &mut ViewState,
        track: TrackId,
        depth: u16,
        height: f32,
    ) {
        self.reveal_rows(timeline, view, &[(track, depth)], height);
    }

    /// Makes the rows of `lanes` (track, depth) visible in a track area `height` tall: expands
    /// their groups, unfolds the tracks whose fold hides one of them, and scrolls so they are
    /// all on screen when they fit in `height`, else so the first one is.
    pub fn reveal_rows(
        &mut self,
        timeline: &Timeline,
        view: &mut ViewState,
        lanes: &[(TrackId, u16)],
        height: f32,
    ) {
        for &(track, depth) in lanes {
            if self.layout.lane_row(track, depth).is_none()
                && let Some(g) = self.layout.group_of(track)
                && self.layout.groups.get(g).is_some_and(|g| g.collapsed)
            {
                self.layout.toggle(g, timeline);
            }
            self.layout.unfold_for(track, depth, timeline);
        }
        let spans: Vec<(f32, f32)> = lanes
            .iter()
            .filter_map(|&(track, depth)| {
                let row = self.layout.rows.get(self.layout.lane_row(track, depth)?)?;
                Some((row.y, row.y + row.h))
            })
            .collect();
        let Some(&(first_top, first_bottom)) = spans.first() else {
            return;
        };
        let top = spans.iter().map(|s| s.0).fold(f32::INFINITY, f32::min);
        let bottom = spans.iter().map(|s| s.1).fold(f32::NEG_INFINITY, f32::max);
        let h = height.max(60.0);
        if top >= view.scroll_y && bottom <= view.scroll_y + h {
            return;
        }
        view.scroll_y = if bottom - top <= h {
            // All of them, with up to a third of the area above them for context.
            (top - ((h - (bottom - top)) / 2.0).min(h / 3.0)).max(0.0)
        } else if first_top >= view.scroll_y && first_bottom <= view.scroll_y + h {
            view.scroll_y
        } else {
            (first_top - h / 3.0).max(0.0)
        };
    }

    /// Draws the timeline into the remaining space of `ui` and handles its input.
    pub fn ui(&mut self, ui: &mut egui::Ui, input: &TimelineInput<'_>, view: &mut ViewState) {
        let full = ui.available_rect_before_wrap();
        let response = ui.allocate_rect(full, Sense::click_and_drag());
        let ruler = Rect::from_min_max(
            Pos2::new(full.left() + GUTTER_W, full.top()),
            Pos2::new(full.right(), full.top() + RULER_H),
        );
        let tracks = Rect::from_min_max(
            Pos2::new(full.left() + GUTTER_W, full.top() + RULER_H),
            full.right_bottom(),
        );
        let gutter = Rect::from_min_max(
            Pos2::new(full.left(), full.top() + RULER_H),
            Pos2::new(full.left() + GUTTER_W, full.bottom()),
        );
        self.tracks_rect = tracks;
        if !self.fold_checked && tracks.height() > 0.0 {
            // Deep threads start folded only when the tracks would not fit unfolded.
            self.fold_checked = true;
            self.layout
                .unfold_if_it_fits(input.timeline, tracks.height());
        }
        self.handle_input(ui, &response, input, view, ruler, tracks, gutter);

        let max_scroll = (self.layout.height - tracks.height() + 20.0).max(0.0);
        view.scroll_y = view.scroll_y.clamp(0.0, max_scroll);
        let vp = viewport(view, tracks);
        let rows = self
            .layout
            .rows_in(view.scroll_y, view.scroll_y + tracks.height());
        lod::build_frame(
            input.timeline,
            input.index,
            &self.layout,
            rows.clone(),
            &vp,
            &mut self.frame,
        );

        let painter = ui.painter_at(full);
        let visuals = ui.visuals().clone();
        painter.rect_filled(full, CornerRadius::ZERO, visuals.extreme_bg_color);
        let track_painter = painter.with_clip_rect(tracks);
        let row_y = |r: usize| -> Option<(f32, f32)> {
            let row = self.layout.rows.get(r)?;
            let top = tracks.top() + row.y - view.scroll_y;
            Some((top, top + row.h))
        };

        // Group headers span the track area too, so the eye can follow them.
        for r in rows.clone() {
            if let (Some(row), Some((y0, y1))) = (self.layout.rows.get(r), row_y(r))
                && let RowKind::Header { .. } = row.kind
            {
                track_painter.rect_filled(
                    Rect::from_x_y_ranges(tracks.x_range(), y0..=y1),
                    CornerRadius::ZERO,
                    visuals.faint_bg_color,
                );
            }
        }
        paint_steps(
            &track_painter,
            &painter,
            input.timeline,
            &self.layout.ranks,
            view,
            &vp,
            tracks,
            ruler,
            &mut self.step_labels,
        );
        self.paint_slices(&track_painter, input, view, &row_y);
        self.paint_counters(&track_painter, &vp, &row_y, &visuals);
        self.paint_marks(&track_painter, &painter, input, &vp, &row_y, tracks, ruler);
        self.paint_flows(&track_painter, input, view, &vp, &row_y);
        self.paint_critical_path(&track_painter, input, &vp, &row_y);
        if let Some(range) = view.range {
            let x0 = vp.x_rel(range.start).max(tracks.left());
            let x1 = vp.x_rel(range.end).min(tracks.right());
            if x1 >= x0 {
                let band = Rect::from_x_y_ranges(x0..=x1, ruler.top()..=full.bottom());
                painter.rect_filled(band, CornerRadius::ZERO, Color32::from_white_alpha(20));
                painter.vline(x0, band.y_range(), Stroke::new(1.0, Color32::LIGHT_BLUE));
                painter.vline(x1, band.y_range(), Stroke::new(1.0, Color32::LIGHT_BLUE));
                painter.text(
                    Pos2::new((x0 + x1) / 2.0, ruler.bottom() - 2.0),
                    Align2::CENTER_BOTTOM,
                    steplens_analysis::units::human_ns(range.span().round() as i64),
                    FontId::proportional(11.0),
                    Color32::LIGHT_BLUE,
                );
            }
        }
        paint_ruler(&painter, view, &vp, ruler, &visuals, &mut self.ruler_labels);
        self.paint_gutter(&painter, input.timeline, gutter, &row_y, rows, &visuals);

        if let Some(pos) = response.hover_pos()
            && tracks.contains(pos)
            && self.drag.is_none()
            && let Some(id) = self.slice_at(input, view, &vp, tracks, pos)
        {
            let t = input.timeline;
            let text = format!(
                "{}\n{}",
                t.slice_name(id),
                steplens_analysis::units::human_ns(t.slices.dur[id as usize])
            );
            response.on_hover_text_at_pointer(text);
        } else if let Some(pos) = response.hover_pos()
            && gutter.contains(pos)
            && let Some(text) = self.fold_hint(input, view.scroll_y, pos.y - tracks.top())
        {
            response.on_hover_text_at_pointer(text);
        }
    }
}

/// The time ↔ x mapping of the track area.
#[must_use]
pub fn viewport(view: &ViewState, tracks: Rect) -> Viewport {
    Viewport {
        origin: view.origin,
        start: view.visible.start,
        end: view.visible.end,
        x0: tracks.left(),
        width: tracks.width(),
    }
}

/// F: shows the range selection, else the selected slice.
pub fn fit_selection(timeline: &Timeline, view: &mut ViewState) {
    if let Some(r) = view.range {
        view.fit(r.start, r.end);
    } else if let Some(id) = view.selected
        && let Some(&s) = timeline.slices.start.get(id as usize)
    {
        view.fit(view.rel(s), view.rel(timeline.slices.end(id)));
    }
}
