//! The TensorBoard plugin's views as terminal text and Markdown (`report --view …`): Overview
//! (the step breakdown and the GPU summary), Operators, Kernels and Distributed. Times are in
//! µs, rounded as the plugin prints them, so its users can compare figure for figure. Also
//! steplens' own Roofline: the per-op performance model (`op_perf[]`) and its summary by family.

use std::io::{self, Write};

use steplens_analysis::Report;
use steplens_analysis::table_spec::{
    BREAKDOWN_COLUMNS, BreakdownRow, ColumnSpec, FAMILY_COLUMNS, KERNEL_COLUMNS, OP_PERF_COLUMNS,
    OPERATOR_COLUMNS, WORKER_COLLECTIVE_COLUMNS, WORKER_COLUMNS, WorkerCollective,
    gpu_summary_columns,
};
use steplens_analysis::tensorboard::Overview;

use crate::steps::step_label;
use crate::table::{Durations, Style, Table};

/// One of the plugin's views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Step-time breakdown and GPU summary.
    Overview,
    /// Operator table, by name and by name and input shape.
    Operators,
    /// Kernel table, by name and by launching op.
    Kernels,
    /// Per-worker computation, overlap, communication and collectives.
    Distributed,
    /// The per-op performance model: work, achieved rates and share of the device's peak.
    Roofline,
}

/// The sections of `view`: a title and its table, or a line saying why there is none.
fn sections(report: &Report, view: View, top: usize) -> Vec<(String, Result<Table, String>)> {
    match view {
        View::Overview => overview(report),
        View::Operators => vec![
            (
                "Operators (by name)".into(),
                top_rows(
                    OPERATOR_COLUMNS,
                    &report.operators,
                    top,
                    "no ops in the trace",
                ),
            ),
            (
                "Operators (by name and input shape)".into(),
                top_rows(
                    OPERATOR_COLUMNS,
                    &report.operators_by_shape,
                    top,
                    "no ops in the trace",
                ),
            ),
        ],
        View::Kernels => vec![
            (
                "Kernels (by name)".into(),
                top_rows(
                    KERNEL_COLUMNS,
                    &report.kernels,
                    top,
                    "no kernels in the trace",
                ),
            ),
            (
                "Kernels (by launching op and launch shape)".into(),
                top_rows(
                    KERNEL_COLUMNS,
                    &report.kernels_by_op,
                    top,
                    "no kernels in the trace",
                ),
            ),
        ],
        View::Distributed => distributed(report),
        View::Roofline => roofline(report, top),
    }
}

/// `op_perf[]` by signature, then its kernel time, work and share of peak by family.
fn roofline(report: &Report, top: usize) -> Vec<(String, Result<Table, String>)> {
    let rows = &report.op_perf;
    if rows.is_empty() {
        return vec![(
            "Roofline".into(),
            Err(
                "needs ops that launched device work (a trace with kernels and launch links)"
                    .into(),
            ),
        )];
    }
    let device = report
        .device
        .name
        .as_deref()
        .and_then(steplens_analysis::device_rates::device_class)
        .map_or_else(
            || "device unknown: achieved rates only".to_owned(),
            |c| {
                format!(
                    "{}: dense peak {:.0} TFLOP/s fp32, {:.0} bf16; {:.2} TB/s",
                    c.name, c.peak.fp32, c.peak.bf16, c.memory_tbps
                )
            },
        );
    let ops = Table::from_spec(
        OP_PERF_COLUMNS,
        &rows[..top.min(rows.len())],
        Durations::Micros,
    );
    let by_family = Table::from_spec(
        FAMILY_COLUMNS,
        &steplens_analysis::op_perf::by_family(rows),
        Durations::Micros,
    );
    vec![
        (format!("Roofline: ops by kernel time ({device})"), Ok(ops)),
        ("Roofline: by family".into(), Ok(by_family)),
    ]
}

/// The breakdown table's rows: each step, then each input's average step, labelled by input or
/// rank in a run of several.
pub(crate) fn breakdown_rows(report: &Report, o: &Overview) -> Vec<BreakdownRow> {
    let multi = report.sources.len() > 1;
    o.steps
        .iter()
        .map(|s| BreakdownRow::step(step_label(&s.name, s.source, s.rank, multi), s))
        .chain(
            o.average
                .iter()
                .map(|a| BreakdownRow::average(step_label("average", a.source, a.rank, multi), a)),
        )
        .collect()
}

fn overview(report: &Report) -> Vec<(String, Result<Table, String>)> {
    let Some(o) = &report.overview else {
        return vec![(
            "Step time breakdown".into(),
            Err("no host ops to make steps from".into()),
        )];
    };
    let multi = report.sources.len() > 1;
    let steps = Table::from_spec(
        BREAKDOWN_COLUMNS,
        &breakdown_rows(report, o),
        Durations::Micros,
    );
    let mut out = vec![("Step time breakdown (µs)".to_owned(), Ok(steps))];
    if !report.gpu_summary.is_empty() {
        let gpu = Table::from_spec(
            gpu_summary_columns(multi),
            &report.gpu_summary,
            Durations::Micros,
        );
        out.push(("GPU summary".to_owned(), Ok(gpu)));
    }
    out
}

/// The first `top` of `rows` as the plugin's µs table, or `none` when there are no rows.
fn top_rows<T>(
    spec: &[ColumnSpec<T>],
    rows: &[T],
    top: usize,
    none: &str,
) -> Result<Table, String> {
    if rows.is_empty() {
        return Err(none.to_owned());
    }
    Ok(Table::from_spec(
        spec,
        &rows[..top.min(rows.len())],
        Durations::Micros,
    ))
}

fn distributed(report: &Report) -> Vec<(String, Result<Table, String>)> {
    let rows = report
        .ranks
        .as_ref()
        .map(|r| r.distributed.as_slice())
        .unwrap_or_default();
    if rows.is_empty() {
        return vec![(
            "Distributed".into(),
            Err(
                "needs collectives (nccl:*/gloo:* ops), matching one to one across the ranks loaded"
                    .into(),
            ),
        )];
    }
    let workers = Table::from_spec(WORKER_COLUMNS, rows, Durations::Micros);
    let ops = Table::from_spec(
        WORKER_COLLECTIVE_COLUMNS,
        &WorkerCollective::of(rows),
        Durations::Micros,
    );
    vec![
        (
            "Distributed: per step, per worker (means)".into(),
            Ok(workers),
        ),
        ("Collectives per worker".into(), Ok(ops)),
    ]
}

/// The views as terminal text.
pub fn views_text(
    out: &mut dyn Write,
    report: &Report,
    views: &[View],
    top: usize,
    color: bool,
) -> io::Result<()> {
    let style = Style { color };
    for &view in views {
        for (title, table) in sections(report, view, top) {
            writeln!(out, "{}", style.bold(&title))?;
            match table {
                Ok(t) => t.text(out, style)?,
                Err(why) => writeln!(out, "  {why}")?,
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// The views as Markdown.
pub fn views_markdown(
    out: &mut dyn Write,
    report: &Report,
    views: &[View],
    top: usize,
) -> io::Result<()> {
    for &view in views {
        for (title, table) in sections(report, view, top) {
            writeln!(out, "## {title}\n")?;
            match table {
                Ok(t) => t.markdown(out)?,
                Err(why) => writeln!(out, "{why}.")?,
            }
            writeln!(out)?;
        }
    }
    Ok(())
}
