//! The timeline widget: the ruler, the track gutter, slices, counters, steps, findings, flows and
//! selections, and the mouse and keyboard navigation.
//!
//! Over 800 lines on purpose: input handling and painting read and write the same per-frame
//! state (visible range, hover, drag, selection); the layout and the level-of-detail paint list
//! are their own modules.
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

pub mod layout;
pub mod lod;

use eframe::egui::{
    self, Align2, Color32, CornerRadius, FontId, Key, Mesh, Pos2, Rect, Sense, Shape, Stroke,
    StrokeKind, Vec2,
};
use steplens_analysis::report::Finding;
use steplens_ingest::model::{SliceId, Timeline, TrackId};

use crate::state::{KeyInput, TimeRange, ViewState};
use layout::{Layout, RowKind};
use lod::{Frame, LaneIndex, RectKind, Viewport};

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

    /// What a folded row under gutter height `y` (points from the top of the track area, before
    /// scrolling by `scroll_y`) holds, and how to open it.
    fn fold_hint(&self, input: &TimelineInput<'_>, scroll_y: f32, y: f32) -> Option<String> {
        let r = self.layout.row_at(y + scroll_y)?;
        let RowKind::Folded { track, from, to } = self.layout.rows.get(r)?.kind else {
            return None;
        };
        if from > 0 {
            return Some(format!(
                "depths {from}–{to} drawn in one row, the deepest on top; click to unfold"
            ));
        }
        // The outer frames by name, outermost first (their first slice at each depth).
        let names: Vec<&str> = (from..=to)
            .filter_map(|d| input.index.lane(track, d).first())
            .map(|&id| input.timeline.slice_name(id))
            .collect();
        Some(format!(
            "{} outer Python frames in one row ({}); click to unfold",
            names.len(),
            names.join(" › ")
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn handle_input(
        &mut self,
        ui: &egui::Ui,
        response: &egui::Response,
        input: &TimelineInput<'_>,
        view: &mut ViewState,
        ruler: Rect,
        tracks: Rect,
        gutter: Rect,
    ) {
        let vp = viewport(view, tracks);
        let pointer = response.hover_pos();
        let anchor = pointer
            .filter(|p| p.x >= tracks.left())
            .map(|p| vp.t_rel(p.x));

        // Keyboard, unless a text field has focus (a clicked button may keep focus: keys must
        // still navigate then).
        if !ui.ctx().text_edit_focused() {
            let (keys, fit, escape) = ui.input(|i| {
                // Presses, not repeats: a held key zooms through `key_down` already.
                let presses = |key: Key| {
                    i.events
                        .iter()
                        .filter(|e| {
                            matches!(e, egui::Event::Key { key: k, pressed: true, repeat: false, modifiers, .. }
                                if *k == key && !modifiers.command && !modifiers.alt)
                        })
                        .count() as u32
                };
                (
                    KeyInput {
                        zoom_in: i.key_down(Key::W),
                        zoom_out: i.key_down(Key::S),
                        pan_left: i.key_down(Key::A),
                        pan_right: i.key_down(Key::D),
                        zoom_in_presses: presses(Key::W),
                        zoom_out_presses: presses(Key::S),
                        pan_left_presses: presses(Key::A),
                        pan_right_presses: presses(Key::D),
                        dt: f64::from(i.stable_dt),
                        anchor,
                    },
                    i.key_pressed(Key::F),
                    i.key_pressed(Key::Escape),
                )
            });
            if view.apply_keys(&keys) {
                ui.ctx().request_repaint();
            }
            if fit {
                fit_selection(input.timeline, view);
            }
            if escape {
                view.clear();
            }
        }

        // Wheel: scroll tracks; shift (or a horizontal wheel) pans; ctrl zooms.
        if response.hovered() {
            let (zoom, scroll) = ui.input(|i| (i.zoom_delta(), i.smooth_scroll_delta));
            if (zoom - 1.0).abs() > 1e-4 {
                view.zoom(1.0 / f64::from(zoom), anchor);
            }
            if scroll.x != 0.0 {
                view.pan_ns(-f64::from(scroll.x) / vp.scale());
            }
            if scroll.y != 0.0 {
                view.scroll_y -= scroll.y;
            }
        }

        // Drags.
        if response.drag_started()
            && let Some(p) = response.interact_pointer_pos()
        {
            let shift = ui.input(|i| i.modifiers.shift);
            self.drag = if ruler.contains(p) || (shift && tracks.contains(p)) {
                Some(Drag::Range {
                    anchor: vp.t_rel(p.x),
                })
            } else {
                Some(Drag::Pan)
            };
        }
        if response.dragged() {
            match self.drag {
                Some(Drag::Range { anchor }) => {
                    if let Some(p) = response.interact_pointer_pos() {
                        let t = vp.t_rel(p.x.clamp(tracks.left(), tracks.right()));
                        view.range = Some(TimeRange::new(anchor, t));
                    }
                }
                Some(Drag::Pan) => {
                    let d = response.drag_delta();
                    view.pan_ns(-f64::from(d.x) / vp.scale());
                    view.scroll_y -= d.y;
                }
                None => {}
            }
        }
        if response.drag_stopped() {
            if let (Some(Drag::Range { .. }), Some(r)) = (self.drag, view.range)
                && vp.x_rel(r.end) - vp.x_rel(r.start) < 2.0
            {
                // A click-sized drag on the ruler is not a range.
                view.range = None;
            }
            self.drag = None;
        }

        // Clicks.
        if let Some(p) = response
            .interact_pointer_pos()
            .filter(|_| response.clicked())
        {
            if gutter.contains(p) {
                let y = p.y - tracks.top() + view.scroll_y;
                match self
                    .layout
                    .row_at(y)
                    .and_then(|r| self.layout.rows.get(r))
                    .map(|r| r.kind)
                {
                    Some(RowKind::Header { group }) => self.layout.toggle(group, input.timeline),
                    Some(RowKind::Lane { track, depth: 0 } | RowKind::Folded { track, .. }) => {
                        self.layout.toggle_track(track, input.timeline);
                    }
                    _ => {}
                }
            } else if tracks.contains(p) {
                view.selected = self.slice_at(input, view, &vp, tracks, p);
            }
        }
        if response.double_clicked()
            && let Some(p) = response.interact_pointer_pos()
            && tracks.contains(p)
            && let Some(id) = self.slice_at(input, view, &vp, tracks, p)
        {
            view.selected = Some(id);
            let t = input.timeline;
            view.fit(
                view.rel(t.slices.start[id as usize]),
                view.rel(t.slices.end(id)),
            );
        }
    }

    /// The slice under screen position `pos` (3 px of tolerance for thin slices).
    fn slice_at(
        &self,
        input: &TimelineInput<'_>,
        view: &ViewState,
        vp: &Viewport,
        tracks: Rect,
        pos: Pos2,
    ) -> Option<SliceId> {
        let y = pos.y - tracks.top() + view.scroll_y;
        let row = self.layout.rows.get(self.layout.row_at(y)?)?;
        let lo = view.abs(vp.t_rel(pos.x - 3.0));
        let hi = view.abs(vp.t_rel(pos.x + 3.0));
        match row.kind {
            RowKind::Lane { track, depth } => {
                lod::hit(input.timeline, input.index.lane(track, depth), lo, hi)
            }
            // The deepest slice under the pointer: the one drawn on top.
            RowKind::Folded { track, from, to } => (from..=to)
                .rev()
                .find_map(|d| lod::hit(input.timeline, input.index.lane(track, d), lo, hi)),
            RowKind::Header { .. } | RowKind::Counter { .. } => None,
        }
    }

    fn paint_slices(
        &self,
        painter: &egui::Painter,
        input: &TimelineInput<'_>,
        view: &ViewState,
        row_y: &dyn Fn(usize) -> Option<(f32, f32)>,
    ) {
        let t = input.timeline;
        let mut mesh = Mesh::default();
        let mut outlines = Vec::new();
        let font = FontId::proportional(11.0);
        let mut labels = Vec::new();
        for r in &self.frame.rects {
            let Some((y0, y1)) = row_y(r.row as usize) else {
                continue;
            };
            let rect = Rect::from_min_max(Pos2::new(r.x0, y0 + 1.0), Pos2::new(r.x1, y1 - 1.0));
            match r.kind {
                RectKind::Slice(id) => {
                    let name = t.slices.name.get(id as usize).copied().unwrap_or(0);
                    mesh.add_colored_rect(rect, name_color(name));
                    if view.is_match(id) {
                        outlines.push((rect, Stroke::new(1.5, MATCH_COLOUR)));
                    }
                    if view.highlight.contains(id, name) {
                        outlines.push((rect, Stroke::new(2.0, Color32::YELLOW)));
                    }
                    if view.selected == Some(id) {
                        outlines.push((rect, Stroke::new(2.0, Color32::WHITE)));
                    }
                    // A folded row draws several depths over each other: its labels go on the
                    // parts left uncovered (below).
                    let folded = matches!(
                        self.layout.rows.get(r.row as usize).map(|row| row.kind),
                        Some(RowKind::Folded { .. })
                    );
                    if rect.width() >= lod::LABEL_MIN_PX && !folded {
                        labels.push((rect, id));
                    }
                }
                RectKind::Run { first, .. } => {
                    let name = t.slices.name.get(first as usize).copied().unwrap_or(0);
                    mesh.add_colored_rect(rect, run_color(name_color(name)));
                }
            }
        }
        // Instants: a thin tick over the track's first row.
        let tick = Color32::from_rgb(255, 220, 120);
        for &(row, x) in &self.frame.instants {
            if let Some((y0, y1)) = row_y(row as usize) {
                mesh.add_colored_rect(
                    Rect::from_min_max(Pos2::new(x - 0.5, y0 + 1.0), Pos2::new(x + 1.0, y1 - 1.0)),
                    tick,
                );
            }
        }
        painter.add(Shape::mesh(mesh));
        let clip = painter.clip_rect();
        for rects in self.frame.rects.chunk_by(|a, b| a.row == b.row) {
            let Some(first) = rects.first() else {
                continue;
            };
            if !matches!(
                self.layout.rows.get(first.row as usize).map(|row| row.kind),
                Some(RowKind::Folded { .. })
            ) {
                continue;
            }
            let Some((y0, y1)) = row_y(first.row as usize) else {
                continue;
            };
            for (k, x0, x1) in uncovered_runs(rects, clip.left(), clip.width()) {
                if let Some(RectKind::Slice(id)) = rects.get(k).map(|r| r.kind) {
                    labels.push((
                        Rect::from_min_max(Pos2::new(x0, y0 + 1.0), Pos2::new(x1, y1 - 1.0)),
                        id,
                    ));
                }
            }
        }
        for (rect, id) in labels {
            let visible = rect.intersect(painter.clip_rect());
            if let Some(text) = fit_label(input.timeline.slice_name(id), visible.width()) {
                painter.text(
                    Pos2::new(visible.left() + 3.0, visible.center().y),
                    Align2::LEFT_CENTER,
                    text,
                    font.clone(),
                    Color32::BLACK,
                );
            }
        }
        for (rect, stroke) in outlines {
            painter.rect_stroke(rect, CornerRadius::ZERO, stroke, StrokeKind::Inside);
        }
    }

    fn paint_counters(
        &self,
        painter: &egui::Painter,
        vp: &Viewport,
        row_y: &dyn Fn(usize) -> Option<(f32, f32)>,
        visuals: &egui::Visuals,
    ) {
        let fill = Color32::from_rgb(90, 160, 220);
        let mut mesh = Mesh::default();
        for strip in &self.frame.counters {
            let Some((y0, y1)) = row_y(strip.row as usize) else {
                continue;
            };
            let h = (y1 - y0 - 4.0).max(1.0);
            let base = y1 - 2.0;
            for (c, col) in strip.columns.iter().enumerate() {
                let Some((lo, hi)) = col else {
                    continue;
                };
                let x = vp.x0 + c as f32;
                // Area up to the max, a darker bar for the min..max spread of the column.
                mesh.add_colored_rect(
                    Rect::from_min_max(Pos2::new(x, base - hi * h), Pos2::new(x + 1.0, base)),
                    fill.gamma_multiply(0.6),
                );
                mesh.add_colored_rect(
                    Rect::from_min_max(
                        Pos2::new(x, base - hi * h),
                        Pos2::new(x + 1.0, base - lo * h + 1.0),
                    ),
                    fill,
                );
            }
            painter.hline(
                vp.x0..=vp.x0 + vp.width,
                base,
                visuals.widgets.noninteractive.bg_stroke,
            );
        }
        painter.add(Shape::mesh(mesh));
    }

    #[allow(clippy::too_many_arguments)]
    fn paint_marks(
        &self,
        painter: &egui::Painter,
        full_painter: &egui::Painter,
        input: &TimelineInput<'_>,
        vp: &Viewport,
        row_y: &dyn Fn(usize) -> Option<(f32, f32)>,
        tracks: Rect,
        ruler: Rect,
    ) {
        let t0 = vp.origin.saturating_add(vp.start as i64);
        let t1 = vp.origin.saturating_add(vp.end as i64);
        for m in input.marks {
            if m.end < t0 || m.start > t1 {
                continue;
            }
            let active = input.active_finding == Some(m.finding);
            let rows = self.layout.track_rows(m.track);
            if rows.is_empty() {
                continue;
            }
            let (Some((y0, _)), Some((_, y1))) = (row_y(rows.start), row_y(rows.end - 1)) else {
                continue;
            };
            let mut x0 = vp.x(m.start).max(tracks.left() - 2.0);
            let mut x1 = vp.x(m.end).min(tracks.right() + 2.0);
            if x1 - x0 < 3.0 {
                let mid = (x0 + x1) / 2.0;
                x0 = mid - 1.5;
                x1 = mid + 1.5;
            }
            let red = Color32::from_rgb(230, 60, 60);
            if active {
                // The clicked finding: a band over the whole track.
                let rect = Rect::from_min_max(Pos2::new(x0, y0), Pos2::new(x1, y1));
                painter.rect_filled(
                    rect,
                    CornerRadius::ZERO,
                    Color32::from_rgba_unmultiplied(230, 60, 60, 50),
                );
                painter.rect_stroke(
                    rect,
                    CornerRadius::ZERO,
                    Stroke::new(2.0, red),
                    StrokeKind::Inside,
                );
            } else {
                // Other findings: a bar along the top of the track, so slices stay readable.
                let bar = Rect::from_min_max(Pos2::new(x0, y0), Pos2::new(x1, y0 + 3.0));
                painter.rect_filled(bar, CornerRadius::ZERO, red);
            }
            // A tick in the ruler so findings on scrolled-away tracks are still seen.
            let tick = Rect::from_min_max(
                Pos2::new(x0.max(ruler.left()), ruler.top()),
                Pos2::new(x1.min(ruler.right()).max(x0 + 2.0), ruler.top() + 4.0),
            );
            full_painter.rect_filled(tick, CornerRadius::ZERO, Color32::from_rgb(230, 60, 60));
        }
    }

    fn paint_flows(
        &self,
        painter: &egui::Painter,
        input: &TimelineInput<'_>,
        view: &ViewState,
        vp: &Viewport,
        row_y: &dyn Fn(usize) -> Option<(f32, f32)>,
    ) {
        let Some(sel) = view.selected else {
            return;
        };
        let t = input.timeline;
        let anchor = |id: SliceId, at_start: bool| -> Option<Pos2> {
            let track = *t.slices.track.get(id as usize)?;
            let depth = *t.slices.depth.get(id as usize)?;
            let (y0, y1) = row_y(self.layout.lane_row(track, depth)?)?;
            let ts = if at_start {
                t.slices.start[id as usize]
            } else {
                t.slices.end(id)
            };
            Some(Pos2::new(vp.x(ts), (y0 + y1) / 2.0))
        };
        let color = Color32::from_rgb(255, 170, 0);
        for &(other, outgoing) in input.flows {
            let (from, to) = if outgoing {
                (anchor(sel, true), anchor(other, true))
            } else {
                (anchor(other, true), anchor(sel, true))
            };
            let (Some(a), Some(b)) = (from, to) else {
                continue;
            };
            painter.line_segment([a, b], Stroke::new(1.5, color));
            let dir = (b - a).normalized();
            if dir.is_finite() {
                let side = Vec2::new(-dir.y, dir.x) * 4.0;
                let back = b - dir * 8.0;
                painter.add(Shape::convex_polygon(
                    vec![b, back + side, back - side],
                    color,
                    Stroke::NONE,
                ));
            }
        }
    }

    /// The critical path: a bar under each event on it, coloured by what bounds it, and a
    /// connector from each event to the next one on the path.
    fn paint_critical_path(
        &self,
        painter: &egui::Painter,
        input: &TimelineInput<'_>,
        vp: &Viewport,
        row_y: &dyn Fn(usize) -> Option<(f32, f32)>,
    ) {
        let Some(path) = input.critical_path else {
            return;
        };
        let t = input.timeline;
        let row_of = |id: SliceId| -> Option<(f32, f32)> {
            let track = *t.slices.track.get(id as usize)?;
            let depth = *t.slices.depth.get(id as usize)?;
            row_y(self.layout.lane_row(track, depth)?)
        };
        let visible = painter.clip_rect();
        let mut prev: Option<(Pos2, SliceId)> = None;
        for s in &path.slices {
            let Some(id) = s.slice else { continue };
            let Some((y0, y1)) = row_of(id) else {
                continue;
            };
            let (x0, x1) = (vp.x(s.start_ns), vp.x(s.start_ns + s.dur_ns));
            let colour = bound_colour(s.bound);
            if x1 >= visible.left() && x0 <= visible.right() {
                let bar =
                    Rect::from_min_max(Pos2::new(x0, y1 - 3.0), Pos2::new(x1.max(x0 + 1.0), y1));
                painter.rect_filled(bar, CornerRadius::ZERO, colour);
            }
            let here = Pos2::new(x0, (y0 + y1) / 2.0);
            if let Some((from, prev_id)) = prev
                && prev_id != id
                && (from.y - here.y).abs() > 1.0
            {
                painter.line_segment([from, here], Stroke::new(1.5, colour));
            }
            prev = Some((Pos2::new(x1, (y0 + y1) / 2.0), id));
        }
    }

    fn paint_gutter(
        &self,
        painter: &egui::Painter,
        timeline: &Timeline,
        gutter: Rect,
        row_y: &dyn Fn(usize) -> Option<(f32, f32)>,
        rows: std::ops::Range<usize>,
        visuals: &egui::Visuals,
    ) {
        // A group's name runs on into its header row over the track area (no slices there),
        // so long names (`rank 2 · file: process`) are not cut at the gutter.
        let header_painter = painter.with_clip_rect(Rect::from_x_y_ranges(
            gutter.left()..=painter.clip_rect().right(),
            gutter.y_range(),
        ));
        let header_w = header_painter.clip_rect().width() - 8.0;
        let painter = painter.with_clip_rect(gutter);
        painter.rect_filled(gutter, CornerRadius::ZERO, visuals.panel_fill);
        let font = FontId::proportional(12.0);
        for r in rows {
            let (Some(row), Some((y0, y1))) = (self.layout.rows.get(r), row_y(r)) else {
                continue;
            };
            match row.kind {
                RowKind::Header { group } => {
                    let Some(g) = self.layout.groups.get(group) else {
                        continue;
                    };
                    painter.rect_filled(
                        Rect::from_x_y_ranges(gutter.x_range(), y0..=y1),
                        CornerRadius::ZERO,
                        visuals.faint_bg_color,
                    );
                    let arrow = if g.collapsed { "+" } else { "-" };
                    let text =
                        fit_label(&format!("{arrow} {}", g.name), header_w).unwrap_or_default();
                    header_painter.text(
                        Pos2::new(gutter.left() + 4.0, (y0 + y1) / 2.0),
                        Align2::LEFT_CENTER,
                        text,
                        FontId::proportional(12.0),
                        visuals.strong_text_color(),
                    );
                }
                // A track's name goes on its first row: depth 0, or its outer frames' row.
                RowKind::Lane { track, depth: 0 }
                | RowKind::Counter { track }
                | RowKind::Folded { track, from: 0, .. } => {
                    let Some(tr) = timeline.tracks.get(track as usize) else {
                        continue;
                    };
                    let mut name = tr.name.clone();
                    if let steplens_ingest::model::TrackKind::DeviceEngine { class, .. } = &tr.kind
                    {
                        name = format!("{name} [{class}]");
                    }
                    if self.layout.foldable.get(track as usize).copied() == Some(true) {
                        let sign = if self.layout.is_folded(track) {
                            "▸"
                        } else {
                            "▾"
                        };
                        name = format!("{sign} {name}");
                    }
                    let text = fit_label(&name, GUTTER_W - 20.0).unwrap_or_default();
                    painter.text(
                        Pos2::new(gutter.left() + 14.0, (y0 + y1) / 2.0),
                        Align2::LEFT_CENTER,
                        text,
                        font.clone(),
                        visuals.text_color(),
                    );
                }
                RowKind::Folded { from, to, .. } => {
                    let text = format!("depths {from}–{to} folded");
                    painter.text(
                        Pos2::new(gutter.left() + 24.0, (y0 + y1) / 2.0),
                        Align2::LEFT_CENTER,
                        fit_label(&text, GUTTER_W - 30.0).unwrap_or_default(),
                        FontId::proportional(11.0),
                        visuals.weak_text_color(),
                    );
                }
                RowKind::Lane { .. } => {}
            }
        }
        painter.vline(
            gutter.right() - 0.5,
            gutter.y_range(),
            visuals.widgets.noninteractive.bg_stroke,
        );
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

/// Step boundaries across every track, shaded every other step, with their names in the ruler.
/// Indexes of the steps that overlap `[t0, t1]`. Steps are sorted by input, then start: each
/// input's run is searched on its own (an earlier input's steps past the view must not hide a
/// later input's), and the runs' hits are merged by start so alternate shading and the 8 px
/// spacing see them in time order.
fn steps_in_view(steps: &[steplens_ingest::model::Step], t0: i64, t1: i64) -> Vec<usize> {
    let mut out = Vec::new();
    let mut run_start = 0;
    while run_start < steps.len() {
        let source = steps[run_start].source;
        let run_len = steps[run_start..].partition_point(|s| s.source == source);
        let run = &steps[run_start..run_start + run_len];
        let first = run.partition_point(|s| s.end() < t0);
        out.extend(
            run[first..]
                .iter()
                .take_while(|s| s.start <= t1)
                .enumerate()
                .map(|(j, _)| run_start + first + j),
        );
        run_start += run_len;
    }
    out.sort_by_key(|&k| (steps[k].start, k));
    out
}

#[allow(clippy::too_many_arguments)]
fn paint_steps(
    track_painter: &egui::Painter,
    painter: &egui::Painter,
    timeline: &Timeline,
    ranks: &[Option<i64>],
    view: &ViewState,
    vp: &Viewport,
    tracks: Rect,
    ruler: Rect,
    labels: &mut Vec<(Rect, String)>,
) {
    labels.clear();
    // With several ranks each step is named with its rank ("r2 step 3"): the ranks' steps
    // start at different times, and "step 3" twice in one view reads as a mistake. With a
    // slice selected, only its rank's steps are named.
    let rank_of = |source: u16| ranks.get(usize::from(source)).copied().flatten();
    let named_source = view
        .selected
        .and_then(|id| timeline.slice_track(id))
        .map(|tr| tr.source)
        .filter(|&s| rank_of(s).is_some());
    let ruler_painter = painter.with_clip_rect(ruler);
    let font = FontId::proportional(10.0);
    let label_colour = Color32::from_rgb(200, 200, 120);
    let t0 = view.abs(vp.start);
    let t1 = view.abs(vp.end);
    let steps = &timeline.steps;
    let line = Stroke::new(1.0, Color32::from_rgba_unmultiplied(200, 200, 120, 110));
    // Step boundaries are drawn only while they are at least 8 px apart (bounded by width / 8;
    // denser, they would hatch over the slices).
    let mut last_x = f32::NEG_INFINITY;
    for k in steps_in_view(steps, t0, t1) {
        let s = &steps[k];
        let x0 = vp.x(s.start);
        let x1 = vp.x(s.end());
        if x0 - last_x < 8.0 || x1 - x0 < 8.0 {
            continue;
        }
        last_x = x0;
        if k % 2 == 1 {
            track_painter.rect_filled(
                Rect::from_x_y_ranges(
                    x0.max(tracks.left())..=x1.min(tracks.right()),
                    tracks.y_range(),
                ),
                CornerRadius::ZERO,
                Color32::from_white_alpha(6),
            );
        }
        track_painter.vline(x0, tracks.y_range(), line);
        track_painter.vline(x1, tracks.y_range(), line);
        if x1 - x0 > 60.0 && named_source.is_none_or(|src| src == s.source) {
            let mut label = s
                .number
                .map_or_else(|| s.name.clone(), |n| format!("step {n}"));
            if let Some(rank) = rank_of(s.source) {
                label = format!("r{rank} {label}");
            }
            // With several ranks the same step starts at about the same x on each: a label
            // that would overlap the one before it (or repeat it close by) is dropped.
            let galley = ruler_painter.layout_no_wrap(label.clone(), font.clone(), label_colour);
            let at = Pos2::new(x0.max(ruler.left()) + 3.0, ruler.bottom() - 2.0);
            let rect = Align2::LEFT_BOTTOM.anchor_size(at, galley.size());
            let clash = labels.last().is_some_and(|(prev, text)| {
                rect.left() < prev.right() + 6.0
                    || (*text == label && rect.left() < prev.right() + 60.0)
            });
            // Only inside the part of its step in view: not cut at the ruler's right edge.
            let fits = rect.right() <= x1.min(ruler.right());
            if fits && !clash {
                ruler_painter.galley(rect.min, galley, label_colour);
                labels.push((rect, label));
            }
        }
    }
}

/// The ruler: ticks at 1/2/5 × 10ⁿ ns, labelled relative to the trace start; each label right
/// of its tick, or left of it where it would run past the ruler's right edge.
fn paint_ruler(
    painter: &egui::Painter,
    view: &ViewState,
    vp: &Viewport,
    ruler: Rect,
    visuals: &egui::Visuals,
    labels: &mut Vec<(Rect, String)>,
) {
    labels.clear();
    let painter = painter.with_clip_rect(ruler);
    painter.hline(
        ruler.x_range(),
        ruler.bottom() - 0.5,
        visuals.widgets.noninteractive.bg_stroke,
    );
    let step = tick_step(view.visible.span(), f64::from(vp.width));
    let first = (view.visible.start / step).ceil() as i64;
    let last = (view.visible.end / step).floor() as i64;
    let font = FontId::monospace(10.0);
    for k in first..=last.min(first + 200) {
        let t = k as f64 * step;
        let x = vp.x_rel(t);
        painter.vline(
            x,
            ruler.top() + 8.0..=ruler.bottom(),
            visuals.widgets.noninteractive.fg_stroke,
        );
        let text = tick_label(t, step);
        let galley = painter.layout_no_wrap(text.clone(), font.clone(), visuals.text_color());
        let left = label_left(x, galley.size().x, ruler.right());
        let rect = Rect::from_min_size(Pos2::new(left, ruler.top() + 3.0), galley.size());
        painter.galley(rect.min, galley, visuals.text_color());
        labels.push((rect, text));
    }
}

/// Where a tick label `width` wide starts: 3 points right of its tick at `x`, or ending 3
/// points left of it when it would run past `right` (the last tick's label is not cut).
#[must_use]
pub fn label_left(x: f32, width: f32, right: f32) -> f32 {
    if x + 3.0 + width <= right {
        x + 3.0
    } else {
        x - 3.0 - width
    }
}

/// Tick spacing (ns): the smallest 1/2/5 × 10ⁿ at least 100 px apart.
#[must_use]
pub fn tick_step(span_ns: f64, width_px: f64) -> f64 {
    let min = (span_ns * 100.0 / width_px.max(1.0)).max(1.0);
    let mut p = 10f64.powf(min.log10().floor());
    loop {
        for m in [1.0, 2.0, 5.0] {
            if p * m >= min {
                return p * m;
            }
        }
        p *= 10.0;
    }
}

/// A tick label in the unit of the value with as many decimals as the tick step needs.
#[must_use]
pub fn tick_label(t_ns: f64, step_ns: f64) -> String {
    let mag = t_ns.abs().max(step_ns);
    let (unit, name) = if mag >= 1e9 {
        (1e9, "s")
    } else if mag >= 1e6 {
        (1e6, "ms")
    } else if mag >= 1e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    };
    let decimals = (-(step_ns / unit).log10()).ceil().max(0.0) as usize;
    format!("{:.*} {name}", decimals.min(9), t_ns / unit)
}

/// `name` cut to fit `width` points (about 6 points a character), or `None` when not even
/// three characters fit.
#[must_use]
pub fn fit_label(name: &str, width: f32) -> Option<String> {
    let max = ((width - 6.0) / 6.0).floor();
    if max < 3.0 {
        return None;
    }
    let max = max as usize;
    if name.chars().count() <= max {
        return Some(name.to_owned());
    }
    let mut s: String = name.chars().take(max - 1).collect();
    s.push('…');
    Some(s)
}

/// The parts of a folded row's rectangles (in paint order: a later one covers an earlier one)
/// left uncovered, at least [`lod::LABEL_MIN_PX`] wide, as (index in `rects`, x0, x1), over
/// the `width` points from `left`: one pass over the pixel columns each rectangle covers, so
/// O(rectangles × their width), within the folded lanes' own bound.
#[must_use]
pub fn uncovered_runs(rects: &[lod::FrameRect], left: f32, width: f32) -> Vec<(usize, f32, f32)> {
    let columns = width.max(0.0).ceil() as usize;
    let mut top = vec![usize::MAX; columns];
    let col = |x: f32| ((x - left).max(0.0) as usize).min(columns);
    for (k, r) in rects.iter().enumerate() {
        for slot in &mut top[col(r.x0)..col(r.x1)] {
            *slot = k;
        }
    }
    let mut out = Vec::new();
    let mut c = 0;
    while c < columns {
        let k = top[c];
        let start = c;
        while c < columns && top[c] == k {
            c += 1;
        }
        if k != usize::MAX && (c - start) as f32 >= lod::LABEL_MIN_PX {
            out.push((k, left + start as f32, left + c as f32));
        }
    }
    out
}

/// A stable colour per name.
#[must_use]
pub fn name_color(name: u32) -> Color32 {
    const PALETTE: [Color32; 12] = [
        Color32::from_rgb(110, 170, 230),
        Color32::from_rgb(120, 200, 140),
        Color32::from_rgb(240, 180, 90),
        Color32::from_rgb(200, 140, 220),
        Color32::from_rgb(230, 130, 130),
        Color32::from_rgb(100, 200, 200),
        Color32::from_rgb(210, 210, 110),
        Color32::from_rgb(160, 160, 240),
        Color32::from_rgb(240, 150, 190),
        Color32::from_rgb(150, 210, 100),
        Color32::from_rgb(230, 160, 120),
        Color32::from_rgb(140, 190, 220),
    ];
    let h = name.wrapping_mul(0x9E37_79B9) >> 16;
    PALETTE[(h as usize) % PALETTE.len()]
}

/// The muted colour of a density run.
fn run_color(c: Color32) -> Color32 {
    let grey = |v: u8| ((u16::from(v) + 2 * 128) / 3) as u8;
    Color32::from_rgb(grey(c.r()), grey(c.g()), grey(c.b()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_or_five_times_a_power_of_ten() {
        for (span, width) in [(8e8, 1000.0), (2.66e8, 750.0), (3.3e4, 1234.0), (1e3, 90.0)] {
            let step = tick_step(span, width);
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
                "{span} over {width} px: {step}"
            );
        }
    }

    #[test]
    fn the_last_tick_label_turns_left_at_the_right_edge() {
        assert_eq!(label_left(100.0, 40.0, 500.0), 103.0);
        assert_eq!(label_left(480.0, 40.0, 500.0), 437.0);
    }

    #[test]
    fn ticks_are_round_and_labels_precise_enough() {
        assert_eq!(tick_step(1e9, 1000.0), 1e8);
        assert_eq!(tick_step(3e6, 1000.0), 5e5);
        assert_eq!(tick_label(1.5e9, 1e8), "1.5 s");
        assert_eq!(tick_label(1_234_500_000.0, 1e5), "1.2345 s");
        assert_eq!(tick_label(2500.0, 500.0), "2.5 µs");
        assert_eq!(tick_label(0.0, 100.0), "0 ns");
    }

    fn step(source: u16, start: i64, dur: i64) -> steplens_ingest::model::Step {
        steplens_ingest::model::Step {
            name: format!("ProfilerStep#{start}"),
            number: None,
            start,
            dur,
            track: 0,
            slice: 0,
            source,
            derived: false,
        }
    }

    #[test]
    fn steps_of_a_later_input_show_when_an_earlier_one_runs_past_the_view() {
        // Input 0 has a step far past the view; input 1's steps are in it.
        let steps = vec![
            step(0, 0, 10),
            step(0, 1_000, 10),
            step(1, 100, 10),
            step(1, 120, 10),
        ];
        assert_eq!(steps_in_view(&steps, 90, 200), vec![2, 3]);
        assert_eq!(steps_in_view(&steps, 0, 2_000), vec![0, 2, 3, 1]);
        assert!(steps_in_view(&steps, 500, 600).is_empty());
    }

    #[test]
    fn a_folded_row_labels_what_deeper_slices_leave_uncovered() {
        let rect = |x0: f32, x1: f32, id: u32| lod::FrameRect {
            x0,
            x1,
            row: 0,
            kind: RectKind::Slice(id),
        };
        // A parent 0..200 with a child 50..100 drawn over it, and a narrow child at 150..160.
        let rects = [
            rect(0.0, 200.0, 1),
            rect(50.0, 100.0, 2),
            rect(150.0, 160.0, 3),
        ];
        assert_eq!(
            uncovered_runs(&rects, 0.0, 300.0),
            vec![
                (0, 0.0, 50.0),
                (1, 50.0, 100.0),
                (0, 100.0, 150.0),
                (0, 160.0, 200.0)
            ]
        );
    }

    #[test]
    fn labels_are_cut_to_fit() {
        assert_eq!(fit_label("aten::mm", 200.0).as_deref(), Some("aten::mm"));
        assert_eq!(
            fit_label("aten::convolution", 50.0).as_deref(),
            Some("aten::…")
        );
        assert_eq!(fit_label("aten::mm", 20.0), None);
    }
}
