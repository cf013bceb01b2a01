//! A finding in the Details tab: its title, cost, recommendation and evidence, and for a memory
//! finding the device's memory (its peak, what is held, and the curve of its counters).
//!
//! Costs: the memory curve is built once when a memory finding is selected (O(counter
//! samples)) and drawn in O([`MEMORY_CURVE_COLUMNS`]) a frame; the rest is O(evidence).

use eframe::egui::{self, Color32, RichText};
use steplens_analysis::Evidence;
use steplens_analysis::FindingKind;
use steplens_analysis::memory::DeviceMemory;
use steplens_analysis::report::Finding;
use steplens_analysis::units::human_ns;
use steplens_ingest::model::{SliceId, Timeline, TrackId};

use crate::state::ViewState;

/// One member of a group in the findings list: `ProfilerStep#5 · rank 2 · saves 4.10 ms` (the
/// step and rank when it has them, else its title).
#[must_use]
pub fn member_label(f: &Finding) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(step) = &f.step {
        parts.push(step.clone());
    }
    if let Some(rank) = f.rank {
        parts.push(format!("rank {rank}"));
    }
    if parts.is_empty() {
        parts.push(f.title.clone());
    }
    parts.push(format!("saves {}", human_ns(f.saving_ns)));
    parts.join(" · ")
}

/// What a click in a finding's details asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Go to this slice.
    Slice(SliceId),
    /// Show this time range (absolute ns; an instant when both are equal).
    Time(i64, i64),
}

/// A device's memory counters reduced to a fixed number of columns for the Details tab: built
/// once when a memory finding is selected (O(samples)), drawn in O(columns) a frame.
#[derive(Debug, Clone)]
pub struct MemoryCurve {
    /// First and last sample time, absolute ns.
    pub span: (i64, i64),
    /// Largest value of either series, bytes.
    pub max: f64,
    /// Per column, the largest `memory allocated` sample in it.
    pub allocated: Vec<Option<f64>>,
    /// Per column, the largest `memory reserved` sample in it.
    pub reserved: Vec<Option<f64>>,
}

/// Columns of a [`MemoryCurve`].
pub const MEMORY_CURVE_COLUMNS: usize = 400;

impl MemoryCurve {
    /// The curve of the counter tracks `allocated` and `reserved` (either may be missing);
    /// `None` when they have no samples.
    #[must_use]
    pub fn new(
        timeline: &Timeline,
        allocated: Option<TrackId>,
        reserved: Option<TrackId>,
    ) -> Option<Self> {
        let c = &timeline.counters;
        let samples = |track: Option<TrackId>| -> std::ops::Range<usize> {
            track.map_or(0..0, |t| {
                c.track.partition_point(|&x| x < t)..c.track.partition_point(|&x| x <= t)
            })
        };
        let (a, r) = (samples(allocated), samples(reserved));
        let times = c.ts.get(a.clone()).into_iter().chain(c.ts.get(r.clone()));
        let (t0, t1) = times
            .flatten()
            .fold((i64::MAX, i64::MIN), |(lo, hi), &t| (lo.min(t), hi.max(t)));
        if t0 > t1 {
            return None;
        }
        let width = (t1 - t0).max(1) as f64;
        let columns = |range: std::ops::Range<usize>| {
            let mut out = vec![None::<f64>; MEMORY_CURVE_COLUMNS];
            for k in range {
                let (Some(&ts), Some(&v)) = (c.ts.get(k), c.value.get(k)) else {
                    continue;
                };
                let col = (((ts - t0) as f64 / width) * (MEMORY_CURVE_COLUMNS - 1) as f64).round()
                    as usize;
                if let Some(slot) = out.get_mut(col) {
                    *slot = Some(slot.map_or(v, |old: f64| old.max(v)));
                }
            }
            out
        };
        let (allocated, reserved) = (columns(a), columns(r));
        let max = allocated
            .iter()
            .chain(&reserved)
            .flatten()
            .fold(0.0f64, |m, &v| m.max(v));
        Some(Self {
            span: (t0, t1),
            max,
            allocated,
            reserved,
        })
    }
}

/// The Details tab for finding `f` (no slice selected): what it is, what it costs, what to do,
/// its evidence and, for a memory finding, the device's memory (with `curve` when the trace has
/// its counters). Returns the link clicked, if any.
pub fn details_ui(
    ui: &mut egui::Ui,
    f: &Finding,
    memory: &[DeviceMemory],
    curve: Option<&MemoryCurve>,
    view: &ViewState,
) -> Option<Link> {
    let origin = view.origin;
    let at = |ns: i64| human_ns(ns - origin);
    let mut go = None;
    let mut show = None;
    egui::ScrollArea::vertical()
        .id_salt("finding-details")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            ui.label(RichText::new(&f.title).strong());
            egui::Grid::new("finding-grid")
                .num_columns(2)
                .show(ui, |ui| {
                    let mut rows = vec![
                        ("kind", f.kind.to_string()),
                        ("severity", f.severity.to_string()),
                        ("saves", human_ns(f.saving_ns)),
                        ("owns", human_ns(f.lost_ns)),
                    ];
                    if let Some(step) = &f.step {
                        rows.push(("step", step.clone()));
                    }
                    if let Some(track) = &f.track {
                        rows.push(("track", track.clone()));
                    }
                    rows.push((
                        "time",
                        match (f.start_ns, f.end_ns) {
                            (0, 0) => "none (not tied to a time range)".to_owned(),
                            (a, b) if b > a => {
                                format!("{} to {} ({})", at(a), at(b), human_ns(b - a))
                            }
                            (a, _) => format!("at {}", at(a)),
                        },
                    ));
                    if f.count > 1 {
                        rows.push(("occurrences", f.count.to_string()));
                    }
                    if !f.ops.is_empty() {
                        rows.push(("ops", f.ops.join(", ")));
                    }
                    if let Some(site) = &f.call_site {
                        rows.push(("call site", site.clone()));
                    }
                    for (k, v) in rows {
                        ui.label(k);
                        ui.label(v);
                        ui.end_row();
                    }
                });
            ui.label(RichText::new("recommendation").strong());
            ui.label(&f.recommendation);
            if let Some(m) = finding_memory(memory, f) {
                memory_ui(ui, m, curve, view, &mut show);
            }
            if !f.evidence.is_empty() {
                ui.label(RichText::new("evidence").strong());
            }
            for e in &f.evidence {
                match e {
                    Evidence::Slice {
                        dur_ns,
                        name,
                        slice,
                        track,
                        ..
                    } => {
                        let text = format!(
                            "{name} ({}{})",
                            human_ns(*dur_ns),
                            track.as_ref().map(|t| format!(", {t}")).unwrap_or_default()
                        );
                        if ui.link(text).clicked() {
                            go = Some(*slice);
                        }
                    }
                    Evidence::HostGap {
                        gap_end_ns,
                        gap_start_ns,
                        host_bound_ns,
                    } => {
                        let text = format!(
                            "device idle {} at {} (host busy {} of it)",
                            human_ns(gap_end_ns - gap_start_ns),
                            at(*gap_start_ns),
                            human_ns(*host_bound_ns)
                        );
                        if ui.link(text).clicked() {
                            show = Some((*gap_start_ns, *gap_end_ns));
                        }
                    }
                    Evidence::MmeIdle {
                        mme_idle_end_ns,
                        mme_idle_start_ns,
                        tpc_busy_ns,
                    } => {
                        let text = format!(
                            "MME idle {} at {} (TPC busy {} of it)",
                            human_ns(mme_idle_end_ns - mme_idle_start_ns),
                            at(*mme_idle_start_ns),
                            human_ns(*tpc_busy_ns)
                        );
                        if ui.link(text).clicked() {
                            show = Some((*mme_idle_start_ns, *mme_idle_end_ns));
                        }
                    }
                    Evidence::Metric {
                        total_number,
                        generated_on,
                        metric,
                    } => {
                        ui.label(format!("{metric}: {total_number} ({generated_on})"));
                    }
                    Evidence::Other(map) => {
                        ui.label(truncate(
                            &serde_json::Value::Object(map.clone()).to_string(),
                            300,
                        ));
                    }
                }
            }
        });
    go.map(Link::Slice)
        .or_else(|| show.map(|(a, b)| Link::Time(a, b)))
}

/// The device memory a memory finding (`memory_growth`, `reserved_slack`) is about: the
/// report's entry for the device its title starts with.
#[must_use]
pub fn finding_memory<'a>(memory: &'a [DeviceMemory], f: &Finding) -> Option<&'a DeviceMemory> {
    if !matches!(
        f.kind,
        FindingKind::MemoryGrowth | FindingKind::ReservedSlack
    ) {
        return None;
    }
    memory
        .iter()
        .find(|m| f.title.starts_with(&format!("{}: ", m.device)))
}

/// The memory counter tracks of `device` (`memory allocated <device>`, `memory reserved
/// <device>`), those of input `source` first when known.
#[must_use]
pub fn memory_tracks(timeline: &Timeline, device: &str, source: Option<u16>) -> Vec<TrackId> {
    let names = [
        format!("memory allocated {device}"),
        format!("memory reserved {device}"),
    ];
    let mut tracks: Vec<TrackId> = timeline
        .tracks
        .iter()
        .enumerate()
        .filter(|(_, t)| names.contains(&t.name))
        .map(|(i, _)| i as TrackId)
        .collect();
    tracks.sort_by_key(|&k| {
        let t = &timeline.tracks[k as usize];
        (
            Some(t.source) != source,
            !t.name.starts_with("memory allocated"),
        )
    });
    tracks
}

/// A device's memory in the Details tab: its peak (a link that shows it), the slack, what is
/// never freed and held at the peak, the per-step baseline, and the curve of its counters
/// (click it to go there). Sets `show` to the instant to show.
fn memory_ui(
    ui: &mut egui::Ui,
    m: &DeviceMemory,
    curve: Option<&MemoryCurve>,
    view: &ViewState,
    show: &mut Option<(i64, i64)>,
) {
    use steplens_analysis::memory::human_bytes;
    ui.label(RichText::new(format!("memory of {}", m.device)).strong());
    egui::Grid::new("memory-grid")
        .num_columns(2)
        .show(ui, |ui| {
            ui.label("peak allocated");
            if m.peak_allocated_ns != 0 {
                let text = format!(
                    "{} at {}",
                    human_bytes(m.peak_allocated_bytes),
                    human_ns(m.peak_allocated_ns - view.origin)
                );
                if ui.link(text).on_hover_text("show the peak").clicked() {
                    *show = Some((m.peak_allocated_ns, m.peak_allocated_ns));
                }
            } else {
                ui.label(human_bytes(m.peak_allocated_bytes));
            }
            ui.end_row();
            if m.peak_reserved_bytes > 0 {
                ui.label("peak reserved");
                ui.label(human_bytes(m.peak_reserved_bytes));
                ui.end_row();
                ui.label("reserved, not allocated, at the peak");
                ui.label(human_bytes(m.slack_at_peak_bytes));
                ui.end_row();
            }
            ui.label("never freed");
            ui.label(human_bytes(m.never_freed_bytes));
            ui.end_row();
        });
    if let Some(curve) = curve {
        memory_curve_ui(ui, curve, m, view, show);
    } else {
        ui.label(RichText::new("(this trace has no memory counter track for the device)").weak());
    }
    if !m.held_at_peak.is_empty() {
        ui.label(RichText::new("held at the peak").strong());
        for h in m.held_at_peak.iter().take(5) {
            let site = h
                .call_site
                .as_ref()
                .map(|s| format!(" at {s}"))
                .unwrap_or_default();
            ui.label(format!(
                "{}: {} in {}{site}",
                h.op,
                human_bytes(h.bytes),
                crate::count(h.count, "allocation", "allocations")
            ));
        }
    }
    if !m.steps.is_empty() {
        ui.label(RichText::new("allocated at each step's start").strong());
        egui::Grid::new("memory-steps")
            .num_columns(3)
            .show(ui, |ui| {
                for st in &m.steps {
                    ui.label(&st.step);
                    ui.label(human_bytes(st.start_allocated_bytes));
                    ui.label(format!("peak {}", human_bytes(st.peak_allocated_bytes)));
                    ui.end_row();
                }
            });
    }
}

/// The memory curve: allocated filled, reserved as a line, the peak marked, the visible range
/// shaded; a click shows that instant.
fn memory_curve_ui(
    ui: &mut egui::Ui,
    curve: &MemoryCurve,
    m: &DeviceMemory,
    view: &ViewState,
    show: &mut Option<(i64, i64)>,
) {
    let width = ui.available_width().clamp(100.0, 640.0);
    let (rect, response) = ui.allocate_exact_size(egui::vec2(width, 72.0), egui::Sense::click());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let (t0, t1) = curve.span;
    let span = (t1 - t0).max(1) as f64;
    let n = curve.allocated.len().max(2);
    let x_of = |col: usize| rect.left() + rect.width() * col as f32 / (n - 1) as f32;
    let x_at = |t: i64| rect.left() + rect.width() * ((t - t0) as f64 / span) as f32;
    let y_of =
        |v: f64| rect.bottom() - 2.0 - (rect.height() - 4.0) * (v / curve.max.max(1.0)) as f32;
    let (v0, v1) = (
        view.abs(view.visible.start).clamp(t0, t1),
        view.abs(view.visible.end).clamp(t0, t1),
    );
    if v1 > v0 {
        painter.rect_filled(
            egui::Rect::from_x_y_ranges(x_at(v0)..=x_at(v1), rect.y_range()),
            0.0,
            Color32::from_white_alpha(18),
        );
    }
    let fill = Color32::from_rgb(90, 160, 220);
    let mut last = None;
    for (col, v) in curve.allocated.iter().enumerate() {
        // Between samples the counter holds its value.
        let Some(v) = v.or(last) else { continue };
        last = Some(v);
        let x = x_of(col);
        painter.rect_filled(
            egui::Rect::from_min_max(
                egui::pos2(x, y_of(v)),
                egui::pos2(x + rect.width() / n as f32 + 0.5, rect.bottom() - 2.0),
            ),
            0.0,
            fill.gamma_multiply(0.7),
        );
    }
    let mut line = Vec::new();
    let mut last = None;
    for (col, v) in curve.reserved.iter().enumerate() {
        if let Some(v) = v.or(last) {
            last = Some(v);
            line.push(egui::pos2(x_of(col), y_of(v)));
        }
    }
    if line.len() > 1 {
        painter.add(egui::Shape::line(
            line,
            egui::Stroke::new(1.5, Color32::from_rgb(240, 180, 80)),
        ));
    }
    if m.peak_allocated_ns >= t0 && m.peak_allocated_ns <= t1 && m.peak_allocated_ns != 0 {
        let p = egui::pos2(
            x_at(m.peak_allocated_ns),
            y_of(m.peak_allocated_bytes as f64),
        );
        painter.circle_filled(p, 3.5, Color32::from_rgb(230, 60, 60));
    }
    painter.text(
        rect.left_top() + egui::vec2(4.0, 2.0),
        egui::Align2::LEFT_TOP,
        format!(
            "allocated (filled), reserved (line); max {}",
            steplens_analysis::memory::human_bytes(curve.max as i64)
        ),
        egui::FontId::proportional(11.0),
        ui.visuals().text_color(),
    );
    if response.clicked()
        && let Some(p) = response.interact_pointer_pos()
    {
        let t = t0 + (span * f64::from((p.x - rect.left()) / rect.width())) as i64;
        *show = Some((t, t));
    }
    response.on_hover_text("click to show that time on the timeline");
}

/// `s` cut to `max` characters with an ellipsis.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}
