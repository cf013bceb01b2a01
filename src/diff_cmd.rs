//! `steplens diff A B`: two runs side by side as text, Markdown or JSON.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Result;
use steplens_analysis::compare::RunFigures;
use steplens_analysis::diff::{Diff, DiffSide, FindingChange, OpChange, OpStatus, diff};
use steplens_analysis::units::{human_ns, signed_ns};

use crate::render::{Style, Table, truncate};
use crate::run_input::load_pair;
use crate::{LoadArgs, ReportFormat, output, read_budget};

#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// Run A (the reference): a trace or a saved JSON report.
    a: PathBuf,
    /// Run B: a trace or a saved JSON report.
    b: PathBuf,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Write the diff to FILE instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Changed ops shown in text and Markdown (JSON has all).
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// Steps left out at the start of each input.
    #[arg(long, value_name = "N", default_value_t = 1)]
    warmup: usize,
    /// Budget file whose `[thresholds]` table overrides detector thresholds.
    #[arg(long, value_name = "FILE")]
    budget: Option<PathBuf>,
    #[command(flatten)]
    load: LoadArgs,
}

impl DiffArgs {
    /// Whether the output is JSON (errors are then written as JSON too).
    pub(crate) fn json_output(&self) -> bool {
        self.format == ReportFormat::Json
    }
}

pub(crate) fn run(args: &DiffArgs) -> Result<()> {
    let thresholds = match &args.budget {
        Some(path) => read_budget(path)?.thresholds,
        None => steplens_analysis::Thresholds::default(),
    };
    let (a, b) = load_pair(
        std::slice::from_ref(&args.a),
        std::slice::from_ref(&args.b),
        &args.load.options(),
        &thresholds,
        true,
    )?;
    let fa = RunFigures::of(&a.report, args.warmup);
    let fb = RunFigures::of(&b.report, args.warmup);
    let result = diff(
        &DiffSide {
            label: a.label.clone(),
            figures: &fa,
            ops: &a.ops,
        },
        &DiffSide {
            label: b.label.clone(),
            figures: &fb,
            ops: &b.ops,
        },
    );
    let (mut out, color) = output(args.output.as_deref())?;
    match args.format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &result)?;
            writeln!(out)?;
        }
        ReportFormat::Text => write(&mut out, &result, args.top, Some(Style { color }))?,
        ReportFormat::Md => write(&mut out, &result, args.top, None)?,
        ReportFormat::Html => out.write_all(crate::html::diff_page(&result).as_bytes())?,
    }
    out.flush()?;
    Ok(())
}

fn opt_ns(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_owned(), human_ns)
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}%"))
}

fn ns_change(a: Option<i64>, b: Option<i64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0 => format!(
            "{} ({:+.1}%)",
            signed_ns(b - a),
            (b - a) as f64 * 100.0 / a as f64
        ),
        (Some(a), Some(b)) => signed_ns(b - a),
        _ => String::new(),
    }
}

fn pct_change(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:+.1} points", b - a),
        _ => String::new(),
    }
}

fn steps_line(f: &RunFigures) -> String {
    format!(
        "{} steps ({} warm-up left out)",
        f.steps_total, f.warmup_skipped
    )
}

fn step_table(d: &Diff) -> Table {
    let mut t = Table::new(&[("", false), ("A", true), ("B", true), ("change", true)]);
    let (a, b) = (&d.a, &d.b);
    let rows: [(&str, Option<i64>, Option<i64>); 6] = [
        ("median step", a.step_p50_ns, b.step_p50_ns),
        ("mean step", a.step_mean_ns, b.step_mean_ns),
        ("fastest step", a.step_min_ns, b.step_min_ns),
        ("slowest step", a.step_max_ns, b.step_max_ns),
        ("host busy (median)", a.host_busy_p50_ns, b.host_busy_p50_ns),
        (
            "data loader (median)",
            a.dataloader_p50_ns,
            b.dataloader_p50_ns,
        ),
    ];
    for (label, x, y) in rows {
        t.row(vec![
            label.to_owned(),
            opt_ns(x),
            opt_ns(y),
            ns_change(x, y),
        ]);
    }
    if a.device_busy_pct.is_some() || b.device_busy_pct.is_some() {
        t.row(vec![
            "device busy (median)".to_owned(),
            opt_pct(a.device_busy_pct),
            opt_pct(b.device_busy_pct),
            pct_change(a.device_busy_pct, b.device_busy_pct),
        ]);
    }
    for e in &d.engines {
        t.row(vec![
            format!("{} utilization", e.class),
            opt_pct(e.a_pct),
            opt_pct(e.b_pct),
            pct_change(e.a_pct, e.b_pct),
        ]);
    }
    t
}

fn finding_rows(t: &mut Table, what: &str, changes: &[FindingChange]) {
    for c in changes {
        let lost = |g: Option<&steplens_analysis::compare::FindingGroup>| {
            g.map_or_else(|| "-".to_owned(), |g| human_ns(g.lost_ns))
        };
        t.row(vec![
            what.to_owned(),
            c.key.to_string(),
            lost(c.a.as_ref()),
            lost(c.b.as_ref()),
        ]);
    }
}

fn op_status(s: OpStatus) -> &'static str {
    match s {
        OpStatus::Added => "added",
        OpStatus::Removed => "removed",
        OpStatus::Slower => "slower",
        OpStatus::Faster => "faster",
        OpStatus::Same => "same",
    }
}

fn op_table(ops: &[&OpChange], with_shapes: bool) -> Table {
    let mut columns = vec![("", false), ("op", false)];
    if with_shapes {
        columns.push(("input shapes", false));
    }
    columns.extend([
        ("A calls", true),
        ("B calls", true),
        ("A time", true),
        ("B time", true),
        ("change", true),
    ]);
    let mut t = Table::new(&columns);
    for op in ops {
        let mut row = vec![op_status(op.status).to_owned(), truncate(&op.name, 60)];
        if with_shapes {
            row.push(truncate(&op.shapes, 40));
        }
        row.extend([
            format!("{:.1}", op.a_calls_per_step),
            format!("{:.1}", op.b_calls_per_step),
            human_ns(op.a_ns_per_step),
            human_ns(op.b_ns_per_step),
            signed_ns(op.delta_ns_per_step),
        ]);
        t.row(row);
    }
    t
}

/// Text (with a style) or Markdown (without).
fn write(out: &mut dyn Write, d: &Diff, top: usize, style: Option<Style>) -> io::Result<()> {
    let md = style.is_none();
    let style = style.unwrap_or(Style { color: false });
    let heading = |out: &mut dyn Write, title: &str| -> io::Result<()> {
        if md {
            writeln!(out, "\n### {title}\n")
        } else {
            writeln!(out, "\n{}", style.bold(title))
        }
    };
    let table = |out: &mut dyn Write, t: &Table| -> io::Result<()> {
        if md {
            t.markdown(out)
        } else {
            t.text(out, style)
        }
    };
    if md {
        writeln!(out, "## steplens diff\n")?;
        writeln!(out, "- **A** `{}`: {}", d.a_label, steps_line(&d.a))?;
        writeln!(out, "- **B** `{}`: {}", d.b_label, steps_line(&d.b))?;
    } else {
        writeln!(out, "{}", style.bold("steplens diff"))?;
        writeln!(out, "  A  {}: {}", d.a_label, steps_line(&d.a))?;
        writeln!(out, "  B  {}: {}", d.b_label, steps_line(&d.b))?;
    }
    heading(out, "Steps (medians over the measured steps)")?;
    table(out, &step_table(d))?;

    heading(out, "Findings")?;
    if d.appeared.is_empty() && d.gone.is_empty() && d.persisting.is_empty() {
        writeln!(out, "{}none in either run", if md { "" } else { "  " })?;
    } else {
        let mut t = Table::new(&[
            ("", false),
            ("finding", false),
            ("A lost", true),
            ("B lost", true),
        ]);
        finding_rows(&mut t, "appeared", &d.appeared);
        finding_rows(&mut t, "gone", &d.gone);
        finding_rows(&mut t, "both", &d.persisting);
        table(out, &t)?;
    }

    let joined_on = if d.ops_by_shape {
        "joined on op name and input shapes"
    } else {
        "joined on op name"
    };
    heading(
        out,
        &format!("Ops, time per step over the whole trace ({joined_on})"),
    )?;
    let count = |s: OpStatus| d.ops.iter().filter(|o| o.status == s).count();
    let counts = format!(
        "{} added, {} removed, {} slower, {} faster, {} within ±{}% or ±{}",
        count(OpStatus::Added),
        count(OpStatus::Removed),
        count(OpStatus::Slower),
        count(OpStatus::Faster),
        count(OpStatus::Same),
        steplens_analysis::diff::OP_CHANGE_MIN_PCT,
        human_ns(steplens_analysis::diff::OP_CHANGE_MIN_NS),
    );
    writeln!(out, "{}{counts}", if md { "" } else { "  " })?;
    let changed: Vec<&OpChange> = d
        .ops
        .iter()
        .filter(|o| o.status != OpStatus::Same)
        .take(top)
        .collect();
    if !changed.is_empty() {
        if md {
            writeln!(out)?;
        }
        table(out, &op_table(&changed, d.ops_by_shape))?;
    }
    Ok(())
}
