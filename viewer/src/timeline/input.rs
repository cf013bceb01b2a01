//! The timeline widget's mouse and keyboard handling: zoom, pan, scroll, drags (pan and range
//! selection), clicks on slices, group headers and folded rows, and what the pointer is over.

use eframe::egui::{self, Key, Pos2, Rect};
use steplens_ingest::model::SliceId;

use super::layout::RowKind;
use super::lod::{self, Viewport};
use super::{Drag, TimelineInput, TimelineWidget, fit_selection, viewport};
use crate::state::{KeyInput, TimeRange, ViewState};

impl TimelineWidget {
    /// What a folded row under gutter height `y` (points from the top of the track area, before
    /// scrolling by `scroll_y`) holds, and how to open it.
    pub(super) fn fold_hint(
        &self,
        input: &TimelineInput<'_>,
        scroll_y: f32,
        y: f32,
    ) -> Option<String> {
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
    pub(super) fn handle_input(
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
    pub(super) fn slice_at(
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
}
