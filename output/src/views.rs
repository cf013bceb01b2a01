//! The TensorBoard plugin's views as terminal text and Markdown (`report --view …`): Overview
//! (the step breakdown and the GPU summary), Operators, Kernels and Distributed. Times are in
//! µs, rounded as the plugin prints them, so its users can compare figure for figure. Also
//! steplens' own Roofline: the per-op performance model (`op_perf[]`) and its summary by family.

use std::io::{self, Write};

use steplens_analysis::Report;
use steplens_analysis::tensorboard::{Breakdown, KernelRow, OperatorRow};

use crate::steps::step_label;
use crate::table::{Style, Table};
use crate::text::thousands;

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

/// µs, rounded to the nearest (the plugin's integer microseconds).
fn us(ns: i64) -> String {
    let v = (ns as f64 / 1000.0).round() as i64;
    if v < 0 {
        format!("-{}", thousands(v.unsigned_abs()))
    } else {
        thousands(v as u64)
    }
}

fn us_f(ns: f64) -> String {
    us(ns.round() as i64)
}

fn pct(v: f64) -> String {
    format!("{v:.2}")
}

/// The sections of `view`: a title and its table, or a line saying why there is none.
fn sections(report: &Report, view: View, top: usize) -> Vec<(String, Result<Table, String>)> {
    match view {
        View::Overview => overview(report),
        View::Operators => vec![
            (
                "Operators (by name)".into(),
                operator_table(&report.operators, false, top),
            ),
            (
                "Operators (by name and input shape)".into(),
                operator_table(&report.operators_by_shape, true, top),
            ),
        ],
        View::Kernels => vec![
            (
                "Kernels (by name)".into(),
                kernel_table(&report.kernels, false, top),
            ),
            (
                "Kernels (by launching op and launch shape)".into(),
                kernel_table(&report.kernels_by_op, true, top),
            ),
        ],
        View::Distributed => distributed(report),
        View::Roofline => roofline(report, top),
    }
}

/// A rate or share with the digits that matter, `-` when unknown.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// The columns of an `op_perf[]` row after its kernel time, in the text and HTML tables.
pub(crate) const ROOFLINE_RATE_COLUMNS: [(&str, bool); 8] = [
    ("GFLOP/call", true),
    ("MB/call", true),
    ("FLOP/B", true),
    ("TFLOP/s", true),
    ("TB/s", true),
    ("% peak", true),
    ("% BW", true),
    ("bound", false),
];

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
    let mut columns = vec![
        ("op", false),
        ("input shape", false),
        ("dtype", false),
        ("calls", true),
        ("kernel µs", true),
    ];
    columns.extend(ROOFLINE_RATE_COLUMNS);
    let mut ops = Table::new(&columns);
    for r in rows.iter().take(top) {
        ops.row(vec![
            crate::table::truncate(&r.name, 40),
            crate::table::truncate(&r.input_shape, 40),
            r.dtype.clone(),
            thousands(r.calls),
            us(r.kernel_ns),
            opt(r.flops_per_call.map(|f| f / 1e9), 3),
            opt(r.bytes_per_call.map(|b| b / 1e6), 2),
            opt(r.flops_per_byte, 1),
            opt(r.tflops_per_s, 1),
            opt(r.tbytes_per_s(), 3),
            opt(r.pct_of_peak_compute, 1),
            opt(r.pct_of_peak_bandwidth, 1),
            r.bound.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    let mut by_family = Table::new(&[
        ("family", false),
        ("kernel µs", true),
        ("% of kernel time", true),
        ("% of peak (FLOP-weighted)", true),
    ]);
    for f in steplens_analysis::op_perf::by_family(rows) {
        by_family.row(vec![
            f.family.as_str().to_owned(),
            us(f.kernel_ns),
            pct(f.pct_of_kernel_time),
            opt(f.pct_of_peak, 1),
        ]);
    }
    vec![
        (format!("Roofline: ops by kernel time ({device})"), Ok(ops)),
        ("Roofline: by family".into(), Ok(by_family)),
    ]
}

fn overview(report: &Report) -> Vec<(String, Result<Table, String>)> {
    let Some(o) = &report.overview else {
        return vec![(
            "Step time breakdown".into(),
            Err("no host ops to make steps from".into()),
        )];
    };
    let multi = report.sources.len() > 1;
    let mut columns: Vec<(&str, bool)> = vec![("step", false), ("total µs", true)];
    columns.extend(Breakdown::LABELS.iter().map(|l| (*l, true)));
    let mut steps = Table::new(&columns);
    for s in &o.steps {
        let mut row = vec![step_label(&s.name, s.source, s.rank, multi), us(s.dur_ns)];
        row.extend(s.breakdown.parts().iter().map(|&v| us(v)));
        steps.row(row);
    }
    for a in &o.average {
        let mut row = vec![
            step_label("average", a.source, a.rank, multi),
            us_f(a.dur_ns),
        ];
        for v in a.breakdown.parts() {
            let share = if a.dur_ns > 0.0 {
                v * 100.0 / a.dur_ns
            } else {
                0.0
            };
            row.push(format!("{} ({share:.2}%)", us_f(v)));
        }
        steps.row(row);
    }
    let mut out = vec![("Step time breakdown (µs)".to_owned(), Ok(steps))];
    if !report.gpu_summary.is_empty() {
        let mut gpu = Table::new(&[
            ("device", false),
            ("name", false),
            ("GPU utilization %", true),
            ("est. SM efficiency %", true),
            ("est. achieved occupancy %", true),
            ("kernel time using Tensor Cores %", true),
        ]);
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), pct);
        for g in &report.gpu_summary {
            let device = if multi {
                format!("{} [{}]", g.device, g.source)
            } else {
                g.device.to_string()
            };
            gpu.row(vec![
                device,
                g.name.clone().unwrap_or_default(),
                pct(g.utilization_pct),
                opt(g.sm_efficiency_pct),
                opt(g.achieved_occupancy_pct),
                opt(g.tensor_core_pct),
            ]);
        }
        out.push(("GPU summary".to_owned(), Ok(gpu)));
    }
    out
}

fn operator_table(rows: &[OperatorRow], by_shape: bool, top: usize) -> Result<Table, String> {
    if rows.is_empty() {
        return Err("no ops in the trace".into());
    }
    let mut columns: Vec<(&str, bool)> = vec![("op", false)];
    if by_shape {
        columns.push(("input shape", false));
    }
    columns.extend([
        ("calls", true),
        ("device self µs", true),
        ("device total µs", true),
        ("host self µs", true),
        ("host total µs", true),
        ("TC eligible", false),
        ("TC self %", true),
        ("TC total %", true),
    ]);
    let mut table = Table::new(&columns);
    for r in rows.iter().take(top) {
        let mut row = vec![crate::table::truncate(&r.name, 60)];
        if by_shape {
            row.push(crate::table::truncate(
                r.input_shape.as_deref().unwrap_or(""),
                40,
            ));
        }
        row.extend([
            thousands(r.calls),
            us(r.device_self_ns),
            us(r.device_total_ns),
            us(r.host_self_ns),
            us(r.host_total_ns),
            if r.tc_eligible { "yes" } else { "no" }.to_owned(),
            pct(r.tc_self_pct),
            pct(r.tc_total_pct),
        ]);
        table.row(row);
    }
    Ok(table)
}

fn kernel_table(rows: &[KernelRow], by_op: bool, top: usize) -> Result<Table, String> {
    if rows.is_empty() {
        return Err("no kernels in the trace".into());
    }
    let mut columns: Vec<(&str, bool)> = vec![("kernel", false)];
    if by_op {
        columns.extend([("op", false), ("grid", false), ("block", false)]);
    }
    columns.extend([
        ("calls", true),
        ("total µs", true),
        ("mean µs", true),
        ("max µs", true),
        ("min µs", true),
        ("Tensor Cores", false),
        ("blocks/SM", true),
        ("occupancy %", true),
    ]);
    let mut table = Table::new(&columns);
    for r in rows.iter().take(top) {
        let mut row = vec![crate::table::truncate(&r.name, 60)];
        if by_op {
            row.push(crate::table::truncate(r.op.as_deref().unwrap_or(""), 40));
            let launch = r.launch.as_ref();
            row.push(launch.map(|l| l.grid.clone()).unwrap_or_default());
            row.push(launch.map(|l| l.block.clone()).unwrap_or_default());
        }
        row.extend([
            thousands(r.calls),
            us(r.total_ns),
            us_f(r.mean_ns),
            us(r.max_ns),
            us(r.min_ns),
            if r.tensor_cores { "yes" } else { "no" }.to_owned(),
            pct(r.blocks_per_sm),
            pct(r.occupancy_pct),
        ]);
        table.row(row);
    }
    Ok(table)
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
    let mut workers = Table::new(&[
        ("rank", true),
        ("computation µs", true),
        ("overlap µs", true),
        ("communication µs", true),
        ("other µs", true),
        ("data transfer µs", true),
        ("synchronizing µs", true),
    ]);
    let mut ops = Table::new(&[
        ("rank", true),
        ("collective", false),
        ("calls", true),
        ("total bytes", true),
        ("avg bytes", true),
        ("total latency µs", true),
        ("avg latency µs", true),
        ("data transfer µs", true),
    ]);
    for r in rows {
        workers.row(vec![
            r.rank.to_string(),
            us(r.computation_ns),
            us(r.overlap_ns),
            us(r.communication_ns),
            us(r.other_ns),
            us(r.transfer_ns),
            us(r.sync_ns),
        ]);
        for op in &r.comm_ops {
            let calls = op.calls.max(1);
            ops.row(vec![
                r.rank.to_string(),
                op.name.clone(),
                thousands(op.calls),
                thousands(op.bytes),
                thousands((op.bytes as f64 / calls as f64).round() as u64),
                us(op.latency_ns),
                us_f(op.latency_ns as f64 / calls as f64),
                us(op.transfer_ns),
            ]);
        }
    }
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
