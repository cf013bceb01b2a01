//! The sortable tables of the bottom panel: steps, engines, ops and a range's aggregate.
//!
//! Columns have fixed widths so rows line up without a table crate; only the rows on screen are
//! laid out ([`egui::ScrollArea::show_rows`]), so a table costs O(visible rows) to draw plus
//! O(rows log rows) to sort.

use std::cmp::Ordering;

use eframe::egui::{self, RichText};
use steplens_analysis::engines::EngineStats;
use steplens_analysis::ops::OpStats;
use steplens_analysis::steps::StepStats;
use steplens_analysis::table_spec::{OP_COLUMNS, Unit, shown};
use steplens_analysis::units::human_ns;

use crate::query::RangeAggregate;

/// Sort order of one table: column index and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    /// Column.
    pub column: usize,
    /// Largest first.
    pub descending: bool,
}

impl Sort {
    const fn by(column: usize, descending: bool) -> Self {
        Self { column, descending }
    }

    /// Clicking a header: the same column flips the direction, another sorts by it.
    pub fn click(&mut self, column: usize) {
        if self.column == column {
            self.descending = !self.descending;
        } else {
            *self = Self::by(column, true);
        }
    }

    fn apply(self, o: Ordering) -> Ordering {
        if self.descending { o.reverse() } else { o }
    }
}

/// Sorting of every table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableState {
    /// Steps table (default: time order).
    pub steps: Sort,
    /// Engines table (default: busy time).
    pub engines: Sort,
    /// Ops table (default: total time).
    pub ops: Sort,
}

impl Default for TableState {
    fn default() -> Self {
        Self {
            steps: Sort::by(0, false),
            engines: Sort::by(2, true),
            ops: Sort::by(4, true),
        }
    }
}

const ROW_H: f32 = 18.0;

fn header(ui: &mut egui::Ui, cols: &[(&str, f32)], sort: &mut Sort) {
    ui.horizontal(|ui| {
        for (i, &(name, w)) in cols.iter().enumerate() {
            let mark = match (sort.column == i, sort.descending) {
                (true, true) => " ▾",
                (true, false) => " ▴",
                _ => "",
            };
            let b = egui::Button::new(RichText::new(format!("{name}{mark}")).strong()).frame(false);
            if fixed(ui, w, |ui| ui.add(b)).clicked() {
                sort.click(i);
            }
        }
    });
}

/// A left-aligned, truncated cell of fixed width.
fn cell(ui: &mut egui::Ui, w: f32, text: impl Into<egui::WidgetText>) {
    fixed(ui, w, |ui| {
        ui.add(egui::Label::new(text).truncate());
    });
}

/// Runs `add` in a left-to-right box exactly `w` wide.
fn fixed<R>(ui: &mut egui::Ui, w: f32, add: impl FnOnce(&mut egui::Ui) -> R) -> R {
    let layout = egui::Layout::left_to_right(egui::Align::Center);
    ui.allocate_ui_with_layout(egui::vec2(w, ROW_H), layout, |ui| {
        ui.set_width(w);
        add(ui)
    })
    .inner
}

/// Sorted row order for `n` rows compared by `cmp(a, b, column)`.
#[must_use]
pub fn order(n: usize, sort: Sort, cmp: impl Fn(usize, usize, usize) -> Ordering) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| sort.apply(cmp(a, b, sort.column)).then(a.cmp(&b)));
    idx
}

/// Columns of the step table: `rank` first in a multi-rank run (several inputs, a rank known),
/// as the text report's step table, then the step and its figures.
#[must_use]
pub fn step_columns(steps: &[StepStats]) -> Vec<(&'static str, f32)> {
    let mut cols = Vec::with_capacity(7);
    let several_inputs = steps.windows(2).any(|w| w[0].source != w[1].source);
    if several_inputs && steps.iter().any(|s| s.rank.is_some()) {
        cols.push(("rank", 50.0));
    }
    cols.extend([
        ("step", 150.0),
        ("duration", 90.0),
        ("host busy", 90.0),
        ("device busy", 90.0),
        ("device idle", 90.0),
        ("data loader", 90.0),
    ]);
    cols
}

/// Row order of the step table under `sort`: the rank column orders by rank then start (so
/// the default, column 0 ascending, groups a multi-rank run's steps by rank in time order),
/// the step column by start, the others by their value.
#[must_use]
pub fn steps_order(steps: &[StepStats], sort: Sort) -> Vec<usize> {
    let cols = step_columns(steps);
    let key = |s: &StepStats, c: usize| -> (i64, i64) {
        let value = match cols.get(c).map_or("", |c| c.0) {
            "rank" => s.rank.unwrap_or(-1),
            "duration" => s.dur_ns,
            "host busy" => s.host_busy_ns,
            "device busy" => s.device_busy_ns.unwrap_or(-1),
            "device idle" => s.device_idle_ns.unwrap_or(-1),
            "data loader" => s.dataloader_ns,
            _ => s.start_ns,
        };
        (value, s.start_ns)
    };
    order(steps.len(), sort, |a, b, c| {
        key(&steps[a], c).cmp(&key(&steps[b], c))
    })
}

/// The step table (with a rank column for a multi-rank run).
pub fn steps_ui(ui: &mut egui::Ui, steps: &[StepStats], state: &mut TableState) {
    if steps.is_empty() {
        ui.label("No steps: the trace has no ProfilerStep ranges.");
        return;
    }
    let cols = step_columns(steps);
    header(ui, &cols, &mut state.steps);
    let idx = steps_order(steps, state.steps);
    let opt = |v: Option<i64>| v.map_or_else(|| "–".to_owned(), human_ns);
    egui::ScrollArea::vertical()
        .id_salt("steps-table")
        .show_rows(ui, ROW_H, idx.len(), |ui, range| {
            for &i in &idx[range] {
                let s = &steps[i];
                ui.horizontal(|ui| {
                    for &(name, w) in &cols {
                        let text = match name {
                            "rank" => s.rank.map_or_else(|| "–".to_owned(), |r| r.to_string()),
                            "step" => s.name.clone(),
                            "duration" => human_ns(s.dur_ns),
                            "host busy" => human_ns(s.host_busy_ns),
                            "device busy" => opt(s.device_busy_ns),
                            "device idle" => opt(s.device_idle_ns),
                            _ => human_ns(s.dataloader_ns),
                        };
                        cell(ui, w, text);
                    }
                });
            }
        });
}

/// Per-engine-class utilization.
pub fn engines_ui(ui: &mut egui::Ui, engines: &[EngineStats], state: &mut TableState) {
    if engines.is_empty() {
        ui.label("No device engines in this trace.");
        return;
    }
    let cols = [
        ("engine class", 150.0),
        ("engines", 70.0),
        ("busy", 90.0),
        ("busy %", 70.0),
        ("mean engine util %", 130.0),
    ];
    header(ui, &cols, &mut state.engines);
    let idx = order(engines.len(), state.engines, |a, b, c| {
        let (x, y) = (&engines[a], &engines[b]);
        match c {
            0 => x.class.cmp(&y.class),
            1 => x.engines.cmp(&y.engines),
            2 => x.busy_ns.cmp(&y.busy_ns),
            3 => x.busy_pct.total_cmp(&y.busy_pct),
            _ => x
                .mean_engine_utilization_pct
                .total_cmp(&y.mean_engine_utilization_pct),
        }
    });
    for i in idx {
        let e = &engines[i];
        ui.horizontal(|ui| {
            cell(ui, cols[0].1, &e.class);
            cell(ui, cols[1].1, e.engines.to_string());
            cell(ui, cols[2].1, human_ns(e.busy_ns));
            cell(ui, cols[3].1, format!("{:.1}", e.busy_pct));
            cell(
                ui,
                cols[4].1,
                format!("{:.1}", e.mean_engine_utilization_pct),
            );
        });
    }
}

/// The op summary, with the columns of [`OP_COLUMNS`]; returns the op clicked (to highlight its
/// slices).
pub fn ops_ui(ui: &mut egui::Ui, ops: &[OpStats], state: &mut TableState) -> Option<String> {
    if ops.is_empty() {
        ui.label("No ops in this trace.");
        return None;
    }
    let columns = shown(OP_COLUMNS, ops, false);
    let cols: Vec<(&str, f32)> = columns
        .iter()
        .map(|c| {
            let width = match (c.unit, c.key) {
                (_, "name") => 260.0,
                (_, "track_kind") => 55.0,
                (Unit::Text, _) => 100.0,
                _ => 80.0_f32.max(8.0 * c.header.len() as f32),
            };
            (c.header, width)
        })
        .collect();
    header(ui, &cols, &mut state.ops);
    let idx = order(ops.len(), state.ops, |a, b, c| {
        columns.get(c).map_or(Ordering::Equal, |col| {
            (col.value)(&ops[a]).cmp_same_column((col.value)(&ops[b]))
        })
    });
    let mut clicked = None;
    egui::ScrollArea::vertical().id_salt("ops-table").show_rows(
        ui,
        ROW_H,
        idx.len(),
        |ui, range| {
            for &i in &idx[range] {
                let o = &ops[i];
                ui.horizontal(|ui| {
                    for (column, &(_, width)) in columns.iter().zip(&cols) {
                        if column.key == "name" {
                            let link = egui::Button::new(o.name.as_str()).frame(false).truncate();
                            if fixed(ui, width, |ui| ui.add(link))
                                .on_hover_text("highlight its slices")
                                .clicked()
                            {
                                clicked = Some(o.name.clone());
                            }
                            continue;
                        }
                        cell(ui, width, (column.value)(o).display(column.missing));
                    }
                });
            }
        },
    );
    clicked
}

/// A range selection's aggregate: time per name and busy time per track inside the range.
pub fn aggregate_ui(ui: &mut egui::Ui, agg: &RangeAggregate) {
    ui.label(format!(
        "{} selected · {} it",
        human_ns(agg.end - agg.start),
        crate::count(agg.slices, "slice overlaps", "slices overlap")
    ));
    ui.columns(2, |cols| {
        let [left, right] = cols else {
            return;
        };
        egui::ScrollArea::vertical().id_salt("agg-names").show_rows(
            left,
            ROW_H,
            agg.rows.len(),
            |ui, range| {
                for r in &agg.rows[range] {
                    ui.horizontal(|ui| {
                        cell(ui, 230.0, &r.name);
                        cell(ui, 50.0, r.kind);
                        cell(ui, 50.0, r.count.to_string());
                        cell(ui, 80.0, human_ns(r.total_ns));
                    });
                }
            },
        );
        egui::ScrollArea::vertical()
            .id_salt("agg-tracks")
            .show_rows(right, ROW_H, agg.tracks.len(), |ui, range| {
                for r in &agg.tracks[range] {
                    let share = r.busy_ns as f64 * 100.0 / (agg.end - agg.start).max(1) as f64;
                    ui.horizontal(|ui| {
                        cell(ui, 230.0, &r.name);
                        cell(ui, 80.0, human_ns(r.busy_ns));
                        cell(ui, 60.0, format!("{share:.1} %"));
                    });
                }
            });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_toggles_and_orders() {
        let mut s = Sort::by(0, false);
        s.click(0);
        assert!(s.descending);
        s.click(2);
        assert_eq!(s, Sort::by(2, true));
        let v = [3, 1, 2];
        assert_eq!(
            order(3, Sort::by(0, true), |a, b, _| v[a].cmp(&v[b])),
            vec![0, 2, 1]
        );
        assert_eq!(
            order(3, Sort::by(0, false), |a, b, _| v[a].cmp(&v[b])),
            vec![1, 2, 0]
        );
    }
}
