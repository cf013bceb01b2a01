//! The TensorBoard plugin's views on the HTML report: the step-time breakdown as stacked bars
//! and a table, the GPU summary, the operator and kernel tables and the distributed view, all
//! sortable and filterable, with the plugin's definitions (`docs/report-schema.md`).

use std::fmt::Write as _;

use steplens_analysis::Report;
use steplens_analysis::tensorboard::{Breakdown, KernelRow, OperatorRow};
use steplens_analysis::units::human_ns;

use super::{Html, PALETTE, axis_y, esc, legend, ns_cell, table, text_cell};
use crate::steps::step_label;

/// Rows shown per operator or kernel table: the page stays light on a 500 MB trace (the JSON
/// has them all).
const MAX_ROWS: usize = 500;

type Cell = (String, Option<f64>);

fn num(v: f64, decimals: usize) -> Cell {
    (format!("{v:.decimals$}"), Some(v))
}

fn count(v: u64) -> Cell {
    (crate::text::thousands(v), Some(v as f64))
}

/// Writes every view the report has.
pub(super) fn views(h: &mut Html<'_>, report: &Report) {
    let Some(o) = &report.overview else {
        return;
    };
    h.push_str("<h2 id=\"tb-views\">TensorBoard plugin views</h2>");
    h.push_str(
        "<p class=\"note\">As the PyTorch TensorBoard profiler plugin computed them: each step \
         stretched to the end of the device work it launched, its time given to the first of \
         Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec that covers it.</p>",
    );
    breakdown_chart(h, report);
    let multi = report.sources.len() > 1;
    let step_name =
        |name: &str, source: u16, rank: Option<i64>| step_label(name, source, rank, multi);
    let mut heads: Vec<(&str, bool)> = vec![("step", false), ("total", true)];
    heads.extend(Breakdown::LABELS.iter().map(|l| (*l, true)));
    let mut rows: Vec<Vec<Cell>> = o
        .steps
        .iter()
        .map(|s| {
            let mut row = vec![
                text_cell(&step_name(&s.name, s.source, s.rank)),
                ns_cell(s.dur_ns),
            ];
            row.extend(s.breakdown.parts().iter().map(|&v| ns_cell(v)));
            row
        })
        .collect();
    for a in &o.average {
        let mut row = vec![
            text_cell(&step_name("average", a.source, a.rank)),
            ns_cell(a.dur_ns.round() as i64),
        ];
        row.extend(a.breakdown.parts().map(|v| ns_cell(v.round() as i64)));
        rows.push(row);
    }
    table(h, "tb-steps", &heads, &rows);
    if !report.gpu_summary.is_empty() {
        h.push_str("<h3>GPU summary</h3>");
        let opt = |v: Option<f64>| v.map_or_else(|| text_cell("-"), |v| num(v, 2));
        let rows: Vec<Vec<Cell>> = report
            .gpu_summary
            .iter()
            .map(|g| {
                vec![
                    text_cell(&g.device.to_string()),
                    text_cell(g.name.as_deref().unwrap_or("")),
                    num(g.utilization_pct, 2),
                    opt(g.sm_efficiency_pct),
                    opt(g.achieved_occupancy_pct),
                    opt(g.tensor_core_pct),
                ]
            })
            .collect();
        table(
            h,
            "tb-gpu",
            &[
                ("device", false),
                ("name", false),
                ("GPU utilization %", true),
                ("est. SM efficiency %", true),
                ("est. achieved occupancy %", true),
                ("kernel time using Tensor Cores %", true),
            ],
            &rows,
        );
    }
    operators(h, "Operators", "tb-ops", &report.operators, false);
    operators(
        h,
        "Operators by input shape",
        "tb-ops-shape",
        &report.operators_by_shape,
        true,
    );
    kernels(h, "Kernels", "tb-kernels", &report.kernels, false);
    kernels(
        h,
        "Kernels by launching op",
        "tb-kernels-op",
        &report.kernels_by_op,
        true,
    );
    distributed(h, report);
}

fn breakdown_chart(h: &mut Html<'_>, report: &Report) {
    let Some(o) = &report.overview else {
        return;
    };
    if o.steps.is_empty() {
        return;
    }
    let series: Vec<(&str, &str)> = Breakdown::LABELS
        .iter()
        .zip([
            PALETTE[4], PALETTE[1], PALETTE[2], PALETTE[6], PALETTE[5], PALETTE[0], PALETTE[3],
            PALETTE[7],
        ])
        .map(|(l, c)| (*l, c))
        .collect();
    let shown: Vec<(&str, &str, f64)> = series
        .iter()
        .enumerate()
        .map(|(k, (name, colour))| {
            let total: i64 = o.steps.iter().map(|s| s.breakdown.parts()[k].max(0)).sum();
            (*name, *colour, total as f64)
        })
        .collect();
    legend(h, &shown);
    let (w, ht, left, bottom) = (1100.0, 240.0, 60.0, 30.0);
    let max_ns = o.steps.iter().map(|s| s.dur_ns).max().unwrap_or(1);
    let n = o.steps.len() as f64;
    let bar = ((w - left) / n * 0.8).max(1.0);
    let _ = write!(
        h,
        "<svg width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"step time breakdown\">"
    );
    let max = axis_y(h, left, ht - bottom, max_ns);
    for (i, s) in o.steps.iter().enumerate() {
        let x = left + i as f64 * (w - left) / n + 2.0;
        let mut y = ht - bottom;
        for (k, v) in s.breakdown.parts().iter().enumerate() {
            let hh = *v as f64 / max * (ht - bottom - 10.0);
            y -= hh;
            let _ = write!(
                h,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{hh:.1}\" fill=\"{}\"><title>step {}: {} {}</title></rect>",
                series[k].1,
                esc(&s.name),
                series[k].0,
                human_ns(*v),
            );
        }
    }
    h.push_str("</svg>");
}

fn operators(h: &mut Html<'_>, title: &str, id: &str, rows: &[OperatorRow], by_shape: bool) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(h, "<h3>{}</h3>", esc(title));
    let mut heads: Vec<(&str, bool)> = vec![("op", false)];
    if by_shape {
        heads.push(("input shape", false));
    }
    heads.extend([
        ("calls", true),
        ("device self", true),
        ("device total", true),
        ("host self", true),
        ("host total", true),
        ("TC eligible", false),
        ("TC self %", true),
        ("TC total %", true),
    ]);
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .take(MAX_ROWS)
        .map(|r| {
            let mut row = vec![text_cell(&r.name)];
            if by_shape {
                row.push(text_cell(r.input_shape.as_deref().unwrap_or("")));
            }
            row.extend([
                count(r.calls),
                ns_cell(r.device_self_ns),
                ns_cell(r.device_total_ns),
                ns_cell(r.host_self_ns),
                ns_cell(r.host_total_ns),
                text_cell(if r.tc_eligible { "yes" } else { "no" }),
                num(r.tc_self_pct, 2),
                num(r.tc_total_pct, 2),
            ]);
            row
        })
        .collect();
    table(h, id, &heads, &cells);
}

fn kernels(h: &mut Html<'_>, title: &str, id: &str, rows: &[KernelRow], by_op: bool) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(h, "<h3>{}</h3>", esc(title));
    let mut heads: Vec<(&str, bool)> = vec![("kernel", false)];
    if by_op {
        heads.extend([("op", false), ("grid", false), ("block", false)]);
    }
    heads.extend([
        ("calls", true),
        ("total", true),
        ("mean", true),
        ("max", true),
        ("min", true),
        ("Tensor Cores", false),
        ("blocks per SM", true),
        ("est. occupancy %", true),
    ]);
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .take(MAX_ROWS)
        .map(|r| {
            let mut row = vec![text_cell(&r.name)];
            if by_op {
                let launch = r.launch.as_ref();
                row.push(text_cell(r.op.as_deref().unwrap_or("")));
                row.push(text_cell(launch.map_or("", |l| l.grid.as_str())));
                row.push(text_cell(launch.map_or("", |l| l.block.as_str())));
            }
            row.extend([
                count(r.calls),
                ns_cell(r.total_ns),
                ns_cell(r.mean_ns.round() as i64),
                ns_cell(r.max_ns),
                ns_cell(r.min_ns),
                text_cell(if r.tensor_cores { "yes" } else { "no" }),
                num(r.blocks_per_sm, 2),
                num(r.occupancy_pct, 2),
            ]);
            row
        })
        .collect();
    table(h, id, &heads, &cells);
}

fn distributed(h: &mut Html<'_>, report: &Report) {
    let Some(rows) = report
        .ranks
        .as_ref()
        .map(|r| &r.distributed)
        .filter(|d| !d.is_empty())
    else {
        return;
    };
    h.push_str("<h3>Distributed: per step, per worker (means)</h3>");
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .map(|r| {
            vec![
                count(r.rank.max(0) as u64),
                ns_cell(r.computation_ns),
                ns_cell(r.overlap_ns),
                ns_cell(r.communication_ns),
                ns_cell(r.other_ns),
                ns_cell(r.transfer_ns),
                ns_cell(r.sync_ns),
            ]
        })
        .collect();
    table(
        h,
        "tb-dist",
        &[
            ("rank", true),
            ("computation", true),
            ("overlap", true),
            ("communication", true),
            ("other", true),
            ("data transfer", true),
            ("synchronizing", true),
        ],
        &cells,
    );
    h.push_str("<h3>Collectives per worker</h3>");
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .flat_map(|r| {
            r.comm_ops.iter().map(move |op| {
                vec![
                    count(r.rank.max(0) as u64),
                    text_cell(&op.name),
                    count(op.calls),
                    count(op.bytes),
                    ns_cell(op.latency_ns),
                    ns_cell(op.transfer_ns),
                ]
            })
        })
        .collect();
    table(
        h,
        "tb-comm",
        &[
            ("rank", true),
            ("collective", false),
            ("calls", true),
            ("total bytes", true),
            ("total latency", true),
            ("data transfer", true),
        ],
        &cells,
    );
}
