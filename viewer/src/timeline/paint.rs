//! Painting the tracks: the level-of-detail frame as one mesh with the labels that fit, counters,
//! finding marks, flows of the selected slice, the critical path and the track gutter; and the
//! colours and label fitting they share.

use eframe::egui::{
    self, Align2, Color32, CornerRadius, FontId, Mesh, Pos2, Rect, Shape, Stroke, StrokeKind, Vec2,
};
use steplens_ingest::model::{SliceId, Timeline};

use super::layout::RowKind;
use super::lod::{self, RectKind, Viewport};
use super::{GUTTER_W, MATCH_COLOUR, TimelineInput, TimelineWidget, bound_colour};
use crate::state::ViewState;

impl TimelineWidget {
    pub(super) fn paint_slices(
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

    pub(super) fn paint_counters(
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
    pub(super) fn paint_marks(
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

    pub(super) fn paint_flows(
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
    pub(super) fn paint_critical_path(
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

    pub(super) fn paint_gutter(
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
    pub(super) fn a_folded_row_labels_what_deeper_slices_leave_uncovered() {
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
    pub(super) fn labels_are_cut_to_fit() {
        assert_eq!(fit_label("aten::mm", 200.0).as_deref(), Some("aten::mm"));
        assert_eq!(
            fit_label("aten::convolution", 50.0).as_deref(),
            Some("aten::…")
        );
        assert_eq!(fit_label("aten::mm", 20.0), None);
    }
}
