//! The report for people: a terminal report (with color when asked) and Markdown. This module
//! owns the page around the tables: the header and summary lines, the findings, the section
//! headings and notes, and the critical path section; the tables themselves are in `tables`.

use std::fmt::Write as _;
use std::io::{self, Write};

use steplens_analysis::{Report, Severity};

use crate::escape;

pub use crate::table::{Style, Table, truncate};
pub use steplens_analysis::units::{human_bytes, human_ns};

pub use crate::count::thousands;

mod tables;

pub use tables::{collectives_table, ranks_table};
use tables::{
    critical_path_table, engine_table, holders_table, idle_table, memory_table, op_table,
    step_table,
};

fn pct(part: i64, whole: i64) -> String {
    if whole <= 0 {
        return "-".into();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

fn device_line(report: &Report) -> String {
    let d = &report.device;
    device_text(&d.kind, d.name.as_deref(), d.count)
}

/// The device line every output writes (text, Markdown, HTML, `info`): `cuda, NVIDIA H100 (1
/// device active)`, a blank name left out; `none (host-only trace)` for a trace with no device
/// (never "cpu, 0 active"); `cuda (no device work in the trace)` for a device named but idle.
pub(crate) fn device_text(kind: &str, name: Option<&str>, count: usize) -> String {
    if kind == "cpu" {
        return "none (host-only trace)".into();
    }
    let what = match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => format!("{kind}, {name}"),
        None => kind.to_owned(),
    };
    if count == 0 {
        format!("{what} (no device work in the trace)")
    } else {
        format!(
            "{what} ({} active)",
            crate::count::plural(count as u64, "device")
        )
    }
}

fn summary_line(report: &Report) -> String {
    let s = &report.summary;
    let mut line = crate::steps::step_count(report);
    if let Some(mean) = s.mean_step_ns {
        let _ = write!(line, ", mean {}", human_ns(mean));
    }
    if let Some(p50) = s.p50_step_ns {
        let _ = write!(line, ", median {}", human_ns(p50));
    }
    if let Some(busy) = s.device_busy_pct {
        let _ = write!(line, ", device busy {busy:.1}%");
    }
    if let Some(overlap) = s.mme_tpc_overlap_ns {
        let _ = write!(line, ", MME and TPC busy together {}", human_ns(overlap));
    }
    let _ = write!(line, "; trace spans {}", human_ns(s.trace_ns));
    if let Some(m) = steplens_analysis::memory::primary(&report.memory) {
        let _ = write!(
            line,
            "; memory peak {} on {}",
            steplens_analysis::memory::human_bytes(m.peak_allocated_bytes),
            m.device
        );
        // Within a tenth of the device's memory, the next larger batch or sequence runs out.
        if let Some(total) = m.device_total_bytes.filter(|&t| t > 0)
            && m.peak_allocated_bytes * 10 > total * 9
        {
            let _ = write!(
                line,
                " ({} of its {}: close to out of memory)",
                pct(m.peak_allocated_bytes, total),
                steplens_analysis::memory::human_bytes(total)
            );
        }
    }
    line
}

/// Findings listed in text and Markdown (the JSON has all).
const MAX_FINDINGS_SHOWN: usize = 10;

/// What the step table's device idle column measures, printed under it: the report has two
/// idle figures, and they answer different questions.
pub(crate) const STEP_IDLE_NOTE: &str = "device idle: the part of the step with nothing running \
     on any device stream (duration − device busy)";

/// What the step table's host step column is, printed under it when shown.
pub(crate) const HOST_STEP_NOTE: &str = "host step: the ProfilerStep range on the host; a step \
     lasts until the device work it launched is done (duration), which on a device-bound run \
     is far longer";

/// Whether any step lasts longer than its host range: its device work ran past it.
fn runs_ahead(report: &Report) -> bool {
    report
        .steps
        .iter()
        .any(|s| s.host_dur_ns.is_some_and(|h| h != s.dur_ns))
}

/// Heading of the per-stream idle table.
pub(crate) const STREAM_IDLE_HEADING: &str = "Gaps between kernels, per stream (whole trace)";

/// What the per-stream idle table measures, and why it is smaller than the steps' device idle.
pub(crate) const STREAM_IDLE_NOTE: &str = "idle: the gaps between one stream's consecutive \
     kernels, from its first to its last (HTA's idle time); it leaves out the time before a \
     stream's first kernel and after its last, which the steps' device idle counts";

/// `Findings (12, by what fixing them saves: sync_point 9 (saves 1.2 ms), …; fixing them all
/// saves 8.1% of step time)`, kinds by saving; counts are of finding groups (kind and place).
fn findings_heading(report: &Report) -> String {
    let s = &report.summary;
    let groups = report.groups();
    if groups.is_empty() {
        return "Findings".into();
    }
    let mut kinds: Vec<(steplens_analysis::FindingKind, usize, i64)> = Vec::new();
    for g in groups.iter() {
        match kinds.iter_mut().find(|k| k.0 == g.kind) {
            Some(k) => k.1 += 1,
            None => kinds.push((
                g.kind,
                1,
                s.saving_ns_by_kind.get(&g.kind).copied().unwrap_or(0),
            )),
        }
    }
    kinds.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let kinds: Vec<String> = kinds
        .iter()
        .map(|(kind, n, saving)| {
            if *saving > 0 {
                format!("{} {n} (saves {})", kind.title(), human_ns(*saving))
            } else {
                format!("{} {n}", kind.title())
            }
        })
        .collect();
    // With nothing measured (every time-costing group's saving unknown), no share to claim.
    let measured = groups
        .iter()
        .any(|g| g.saving_ns > 0 || (g.lost_ns > 0 && !g.saving_unknown));
    let share = s
        .saving_pct_of_steps
        .filter(|_| measured)
        .map_or_else(String::new, |pct| {
            format!("; fixing them all saves {pct:.1}% of step time")
        });
    format!(
        "Findings ({}, by what fixing them saves: {}{share})",
        finding_count(report),
        kinds.join(", ")
    )
}

/// `2 groups · 19 findings` (groups of one kind and place), or `3 findings` when every group is
/// one finding: the count the text report, the viewer and the Python `repr` give.
#[must_use]
pub fn finding_count(report: &Report) -> String {
    let plural = |n: usize, one: &str| crate::count::plural(n as u64, one);
    let (groups, findings) = (report.groups().len(), report.findings.len());
    if groups == findings {
        plural(findings, "finding")
    } else {
        format!(
            "{} · {}",
            plural(groups, "group"),
            plural(findings, "finding")
        )
    }
}

/// A group's representative finding (its largest saving) and its figures line
/// ([`steplens_analysis::finding::FindingGroup::figures`]).
pub(crate) fn group_lead<'r>(
    report: &'r Report,
    g: &steplens_analysis::finding::FindingGroup,
) -> (&'r steplens_analysis::Finding, String) {
    let lead = &report.findings[g.findings[0]];
    let figures = g.figures();
    (lead, figures)
}

/// Greedy word wrap.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

fn severity_mark(style: Style, severity: Severity) -> String {
    match severity {
        Severity::Critical => style.paint("31;1", "!! "),
        Severity::Warning => style.yellow("!  "),
        Severity::Info => style.dim("-  "),
    }
}

/// The report for a terminal.
pub fn text(out: &mut dyn Write, report: &Report, top: usize, color: bool) -> io::Result<()> {
    let style = Style { color };
    for source in &report.sources {
        writeln!(
            out,
            "{} {}",
            style.bold(&source.path),
            style.dim(&format!(
                "({}, {})",
                source.format,
                crate::count::plural(source.events, "event")
            ))
        )?;
    }
    writeln!(out, "  device   {}", escape::terminal(&device_line(report)))?;
    writeln!(
        out,
        "  summary  {}",
        escape::terminal(&summary_line(report))
    )?;
    for source in &report.sources {
        for w in &source.warnings {
            writeln!(
                out,
                "  {} {}",
                style.yellow("warning:"),
                escape::terminal(&w.message)
            )?;
        }
    }
    if let Some(p) = report.profiler_overhead.as_ref().filter(|p| p.distorts) {
        writeln!(
            out,
            "  {} {}",
            style.yellow("profiler:"),
            escape::terminal(&p.message)
        )?;
    }
    writeln!(out)?;
    if report.steps.is_empty() {
        writeln!(out, "{}", style.bold("Steps"))?;
        writeln!(
            out,
            "  no ProfilerStep#N annotations: the figures below cover the whole trace \
             (use torch.profiler's schedule and prof.step() to get per-step figures)"
        )?;
    } else {
        writeln!(
            out,
            "{}",
            style.bold(&format!("Steps ({})", crate::steps::table_count(report)))
        )?;
        step_table(report).text(out, style)?;
        if report.steps.iter().any(|s| s.device_idle_ns.is_some()) {
            writeln!(out, "  {}", style.dim(STEP_IDLE_NOTE))?;
        }
        if runs_ahead(report) {
            writeln!(out, "  {}", style.dim(HOST_STEP_NOTE))?;
        }
    }
    writeln!(out)?;
    writeln!(out, "{}", style.bold(&findings_heading(report)))?;
    let groups = report.groups();
    if groups.is_empty() {
        writeln!(out, "  none")?;
    } else {
        let mut advised: Vec<&str> = Vec::new();
        for g in groups.iter().take(MAX_FINDINGS_SHOWN) {
            let (f, figures) = group_lead(report, g);
            writeln!(
                out,
                "  {}{} {}  {}",
                severity_mark(style, g.severity),
                style.cyan(f.kind.title()),
                escape::terminal(&f.title),
                style.dim(&figures)
            )?;
            // The same advice under every finding of a kind is noise: say it once.
            if !advised.contains(&f.recommendation.as_str()) {
                advised.push(&f.recommendation);
                for line in wrap(&f.recommendation, 96) {
                    writeln!(out, "    {}", style.dim(&line))?;
                }
            }
        }
        if let Some(more) = groups
            .len()
            .checked_sub(MAX_FINDINGS_SHOWN)
            .filter(|&n| n > 0)
        {
            writeln!(out, "  … and {more} more (all of them in --format json)")?;
        }
        if groups.iter().any(|g| g.lost_ns > 0) {
            writeln!(
                out,
                "  {}",
                style.dim(steplens_analysis::finding::OWNS_NOTE)
            )?;
        }
    }
    if !report.engines.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", style.bold("Engines (whole trace)"))?;
        engine_table(report).text(out, style)?;
    }
    if !report.idle.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", style.bold(STREAM_IDLE_HEADING))?;
        idle_table(report).text(out, style)?;
        writeln!(out, "  {}", style.dim(STREAM_IDLE_NOTE))?;
    }
    if let Some(ranks) = &report.ranks {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            style.bold(&format!("Ranks ({}; {})", ranks.world_size, ranks.clock))
        )?;
        ranks_table(ranks).text(out, style)?;
        collectives_table(ranks).text(out, style)?;
    }
    if !report.memory.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", style.bold("Memory (whole trace)"))?;
        memory_table(report).text(out, style)?;
        writeln!(out)?;
        writeln!(out, "{}", style.bold("Held at the allocated peak"))?;
        holders_table(report).text(out, style)?;
    }
    writeln!(out)?;
    let shown = top.min(report.ops.len());
    writeln!(
        out,
        "{}",
        style.bold(&format!(
            "Top ops by total time ({shown} of {})",
            report.ops.len()
        ))
    )?;
    op_table(&report.ops, top).text(out, style)?;
    Ok(())
}

/// The critical path section for a terminal (`report --critical-path`).
pub fn critical_path_text(out: &mut dyn Write, report: &Report, color: bool) -> io::Result<()> {
    let style = Style { color };
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        style.bold("Critical path: what bounds each step")
    )?;
    match critical_path_table(report) {
        Some(table) => table.text(out, style),
        None => writeln!(out, "  no host ops to build a path from"),
    }
}

/// The critical path section as Markdown (`report --critical-path -f md`).
pub fn critical_path_markdown(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    writeln!(out, "\n## Critical path: what bounds each step\n")?;
    match critical_path_table(report) {
        Some(table) => table.markdown(out),
        None => writeln!(out, "No host ops to build a path from."),
    }
}

/// The report as Markdown.
pub fn markdown(out: &mut dyn Write, report: &Report, top: usize) -> io::Result<()> {
    writeln!(out, "# steplens report\n")?;
    for source in &report.sources {
        writeln!(
            out,
            "- {} ({}, {})",
            escape::markdown_code(&source.path),
            source.format,
            crate::count::plural(source.events, "event")
        )?;
    }
    writeln!(out, "- device: {}", escape::markdown(&device_line(report)))?;
    writeln!(
        out,
        "- summary: {}",
        escape::markdown(&summary_line(report))
    )?;
    for source in &report.sources {
        for w in &source.warnings {
            writeln!(out, "- **warning:** {}", escape::markdown(&w.message))?;
        }
    }
    if let Some(p) = report.profiler_overhead.as_ref().filter(|p| p.distorts) {
        writeln!(out, "- **profiler:** {}", escape::markdown(&p.message))?;
    }
    if crate::steps::step_ranks(report) > 1 {
        writeln!(out, "\n## Steps ({})\n", crate::steps::step_count(report))?;
    } else {
        writeln!(out, "\n## Steps\n")?;
    }
    if report.steps.is_empty() {
        writeln!(out, "No `ProfilerStep#N` annotations in the trace.")?;
    } else {
        step_table(report).markdown(out)?;
        if report.steps.iter().any(|s| s.device_idle_ns.is_some()) {
            writeln!(out, "\n_{STEP_IDLE_NOTE}_")?;
        }
        if runs_ahead(report) {
            writeln!(out, "\n_{HOST_STEP_NOTE}_")?;
        }
    }
    writeln!(out, "\n## {}\n", findings_heading(report))?;
    let groups = report.groups();
    if groups.is_empty() {
        writeln!(out, "None.")?;
    } else {
        for g in groups.iter().take(MAX_FINDINGS_SHOWN) {
            let (f, figures) = group_lead(report, g);
            writeln!(
                out,
                "- **{}** {} ({}): {}",
                f.kind.title(),
                escape::markdown(&f.title),
                escape::markdown(&figures),
                escape::markdown_prose(&f.recommendation)
            )?;
        }
        if let Some(more) = groups
            .len()
            .checked_sub(MAX_FINDINGS_SHOWN)
            .filter(|&n| n > 0)
        {
            writeln!(out, "- … and {more} more (all of them in the JSON report)")?;
        }
        if groups.iter().any(|g| g.lost_ns > 0) {
            writeln!(out, "\n_{}_", steplens_analysis::finding::OWNS_NOTE)?;
        }
    }
    if !report.engines.is_empty() {
        writeln!(out, "\n## Engines (whole trace)\n")?;
        engine_table(report).markdown(out)?;
    }
    if !report.idle.is_empty() {
        writeln!(out, "\n## {STREAM_IDLE_HEADING}\n")?;
        idle_table(report).markdown(out)?;
        writeln!(out, "\n_{STREAM_IDLE_NOTE}_")?;
    }
    if let Some(ranks) = &report.ranks {
        writeln!(
            out,
            "\n## Ranks ({}; {})\n",
            ranks.world_size,
            escape::markdown(&ranks.clock)
        )?;
        ranks_table(ranks).markdown(out)?;
        writeln!(out)?;
        collectives_table(ranks).markdown(out)?;
    }
    if !report.memory.is_empty() {
        writeln!(out, "\n## Memory (whole trace)\n")?;
        memory_table(report).markdown(out)?;
        writeln!(out, "\nHeld at the allocated peak:\n")?;
        holders_table(report).markdown(out)?;
    }
    let shown = top.min(report.ops.len());
    writeln!(
        out,
        "\n## Top ops by total time ({shown} of {})\n",
        report.ops.len()
    )?;
    op_table(&report.ops, top).markdown(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_ns(850), "850 ns");
        assert_eq!(human_ns(12_345), "12.3 µs");
        assert_eq!(human_ns(4_560_000), "4.56 ms");
        assert_eq!(human_ns(1_234_000_000), "1.23 s");
        assert_eq!(human_ns(-2_500), "-2.50 µs");
        assert_eq!(thousands(1_391_885), "1,391,885");
        assert_eq!(thousands(12), "12");
        assert_eq!(human_bytes(2048), "2.0 KiB");
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert!(wrap("", 5).is_empty());
    }

    /// A group's figures line counts in the singular for one: no "1 steps", "1 times" or "ranks
    /// 0" (issue 49).
    #[test]
    fn group_figures_count_in_the_singular_for_one() {
        use steplens_analysis::FindingKind;
        use steplens_analysis::finding::FindingGroup;
        let group = |findings: usize, steps: usize, ranks: Vec<i64>| FindingGroup {
            kind: FindingKind::SyncPoint,
            severity: Severity::Warning,
            place: "train.py:10".into(),
            findings: (0..findings).collect(),
            steps,
            ranks,
            count: findings as u64,
            lost_ns: 2_000_000,
            saving_ns: 1_000_000,
            saving_unknown: false,
        };
        let figures = |g: FindingGroup| g.figures();
        assert_eq!(figures(group(1, 1, vec![])), "saves 1.00 ms · owns 2.00 ms");
        assert_eq!(
            figures(group(2, 1, vec![])),
            "2 times · saves 1.00 ms · owns 2.00 ms"
        );
        assert_eq!(
            figures(group(3, 3, vec![])),
            "in 3 steps · saves 1.00 ms · owns 2.00 ms"
        );
        assert_eq!(
            figures(group(2, 1, vec![2])),
            "on rank 2 · saves 1.00 ms · owns 2.00 ms"
        );
        assert_eq!(
            figures(group(8, 2, vec![0, 1, 2, 3])),
            "in 2 steps on ranks 0–3 · saves 1.00 ms · owns 2.00 ms"
        );
        for findings in 1..4 {
            for steps in 0..4 {
                let line = figures(group(findings, steps, vec![0]));
                for bad in [" 1 steps", " 1 times", " 1 findings", " 1 calls", " 1 gaps"] {
                    assert!(!line.contains(bad), "{line}");
                }
            }
        }
    }

    #[test]
    fn a_blank_device_name_is_left_out() {
        assert_eq!(device_text("rocm", Some(" "), 1), "rocm (1 device active)");
        assert_eq!(
            device_text("rocm", Some("MI250X"), 1),
            "rocm, MI250X (1 device active)"
        );
        assert_eq!(
            device_text("cuda", Some("NVIDIA H100"), 8),
            "cuda, NVIDIA H100 (8 devices active)"
        );
        assert_eq!(device_text("cpu", None, 0), "none (host-only trace)");
        assert_eq!(
            device_text("cuda", None, 0),
            "cuda (no device work in the trace)"
        );
    }
}
