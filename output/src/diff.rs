//! The diff's renderers: terminal text and Markdown.

use std::io::{self, Write};

use steplens_analysis::compare::diff::{Diff, FindingChange, OpChange, OpStatus};
use steplens_analysis::compare::figures::RunFigures;
use steplens_analysis::units::{human_ns, signed_ns};

use crate::escape;
use crate::text::{Style, Table, truncate};

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
        "{} ({} warm-up left out)",
        crate::count::plural(f.steps_total as u64, "step"),
        f.warmup_skipped
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
        let lost = |g: Option<&steplens_analysis::compare::figures::FindingGroup>| {
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
/// The diff as a terminal report (`style: Some`) or Markdown (`None`): step figures, findings
/// that appeared, went or changed, and the `top` ops that changed most.
///
/// # Errors
/// When `out` cannot be written.
pub fn write(out: &mut dyn Write, d: &Diff, top: usize, style: Option<Style>) -> io::Result<()> {
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
        for (side, label, figures) in [("A", &d.a_label, &d.a), ("B", &d.b_label, &d.b)] {
            let label = escape::markdown_code(label);
            writeln!(out, "- **{side}** {label}: {}", steps_line(figures))?;
        }
    } else {
        writeln!(out, "{}", style.bold("steplens diff"))?;
        for (side, label, figures) in [("A", &d.a_label, &d.a), ("B", &d.b_label, &d.b)] {
            let label = escape::terminal(label);
            writeln!(out, "  {side}  {label}: {}", steps_line(figures))?;
        }
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
        steplens_analysis::compare::diff::OP_CHANGE_MIN_PCT,
        human_ns(steplens_analysis::compare::diff::OP_CHANGE_MIN_NS),
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
