//! The TensorBoard plugin's views on the HTML report: the step-time breakdown as stacked bars
//! and a table, the GPU summary, the operator and kernel tables and the distributed view, all
//! sortable and filterable, with the plugin's definitions (`docs/report-schema.md`).

use std::fmt::Write as _;

use steplens_analysis::Report;
use steplens_analysis::table_spec::{
    BREAKDOWN_COLUMNS, ColumnSpec, KERNEL_COLUMNS, OPERATOR_COLUMNS, WORKER_COLLECTIVE_COLUMNS,
    WORKER_COLUMNS, WorkerCollective, gpu_summary_columns,
};
use steplens_analysis::tensorboard::Breakdown;
use steplens_analysis::units::human_ns;

use super::{Html, PALETTE, axis_y, esc, legend, spec_table};

/// Rows shown per operator or kernel table: the page stays light on a 500 MB trace (the JSON
/// has them all).
const MAX_ROWS: usize = 500;

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
    spec_table(
        h,
        "tb-steps",
        BREAKDOWN_COLUMNS,
        &crate::views::breakdown_rows(report, o),
    );
    titled(
        h,
        "GPU summary",
        "tb-gpu",
        gpu_summary_columns(multi),
        &report.gpu_summary,
    );
    titled(
        h,
        "Operators",
        "tb-ops",
        OPERATOR_COLUMNS,
        &report.operators,
    );
    titled(
        h,
        "Operators by input shape",
        "tb-ops-shape",
        OPERATOR_COLUMNS,
        &report.operators_by_shape,
    );
    titled(h, "Kernels", "tb-kernels", KERNEL_COLUMNS, &report.kernels);
    titled(
        h,
        "Kernels by launching op",
        "tb-kernels-op",
        KERNEL_COLUMNS,
        &report.kernels_by_op,
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

/// One of the plugin's tables under `title`, its first [`MAX_ROWS`] rows; nothing without rows.
fn titled<T>(h: &mut Html<'_>, title: &str, id: &str, spec: &[ColumnSpec<T>], rows: &[T]) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(h, "<h3>{}</h3>", esc(title));
    spec_table(h, id, spec, &rows[..rows.len().min(MAX_ROWS)]);
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
    titled(
        h,
        "Distributed: per step, per worker (means)",
        "tb-dist",
        WORKER_COLUMNS,
        rows,
    );
    titled(
        h,
        "Collectives per worker",
        "tb-comm",
        WORKER_COLLECTIVE_COLUMNS,
        &WorkerCollective::of(rows),
    );
}
