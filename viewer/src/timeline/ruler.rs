//! The ruler and the steps: step boundaries shaded across the tracks with their names in the
//! ruler, and the time ticks with their labels.

use eframe::egui::{self, Align2, Color32, CornerRadius, FontId, Pos2, Rect, Stroke};
use steplens_ingest::model::Timeline;

use super::lod::Viewport;
use crate::state::ViewState;

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

/// Step boundaries across every track, shaded every other step, with their names in the ruler.
#[allow(clippy::too_many_arguments)]
pub(super) fn paint_steps(
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
pub(super) fn paint_ruler(
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
}
