//! The report page ([`report_page`], [`write_report_page`]): the page in section order, its
//! overview (headline, device, sources), what to change first and the findings with their
//! evidence timelines. The charts are in `charts`, the rank, memory and report tables in
//! `tables`; the roofline and TensorBoard sections are the page's siblings.

use std::fmt::Write as _;
use std::io;

use steplens_analysis::units::human_ns;
use steplens_analysis::{Evidence, FindingKind, Report};

use super::{Html, STYLE, close_page, esc};

mod charts;
mod tables;

use charts::{
    critical_path_chart, kind_colour, ops_chart, savings_chart, step_chart, time_ticks,
    utilization_chart,
};
use tables::{ranks_and_memory, tables};

/// The whole page as one `String`: [`write_report_page`] into memory.
#[must_use]
pub fn report_page(report: &Report) -> String {
    super::sink::page_string(|out| write_report_page(out, report))
}

/// The whole page, written to `out` section by section as it renders, so that it is never held
/// whole in memory (wrap a file or stdout in a `BufWriter`).
///
/// # Errors
/// The first error `out` returns; nothing is written after it.
pub fn write_report_page(out: &mut dyn io::Write, report: &Report) -> io::Result<()> {
    let mut page = Html::new(out);
    let h = &mut page;
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    let _ = write!(
        h,
        "<title>steplens report — {}</title>",
        esc(&sources_label(report))
    );
    let _ = write!(h, "<style>{STYLE}</style></head><body>");
    let _ = write!(h, "<h1>steplens report</h1>");
    overview(h, report);
    top_findings(h, report);
    step_chart(h, report);
    critical_path_chart(h, report);
    utilization_chart(h, report);
    savings_chart(h, report);
    ops_chart(h, report);
    findings(h, report);
    ranks_and_memory(h, report);
    tables(h, report);
    super::roofline::roofline(h, report);
    super::views::views(h, report);
    close_page(h);
    page.finish()
}

fn sources_label(report: &Report) -> String {
    report
        .sources
        .iter()
        .map(|s| s.path.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `median step 31.5 ms; fixing the findings saves 38 % of step time: 21 % host-bound gap, 12 %
/// host-device sync …`. Each part is a share of all steps' time (every rank's), and they add up
/// to the whole.
fn headline(report: &Report) -> String {
    let s = &report.summary;
    let total: i64 = report.steps.iter().map(|st| st.dur_ns).sum();
    let mut line = match s.p50_step_ns {
        Some(p50) => format!("median step {}", human_ns(p50)),
        None => format!("no steps; trace spans {}", human_ns(s.trace_ns)),
    };
    if total > 0 {
        let mut kinds: Vec<(&FindingKind, i64)> = s
            .saving_ns_by_kind
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| (k, *v))
            .collect();
        kinds.sort_by_key(|(_, v)| std::cmp::Reverse(*v));
        // The parts never add up to more than the steps: a whole-run saving (a straggler's,
        // counted once per rank) takes what the per-step ones left.
        let mut left = total;
        let parts: Vec<String> = kinds
            .iter()
            .map(|(k, v)| {
                let v = (*v).min(left);
                left -= v;
                format!("{:.0}% {}", v as f64 * 100.0 / total as f64, k.title())
            })
            .collect();
        let saved = (total - left) as f64 * 100.0 / total as f64;
        if parts.is_empty() && report.groups().iter().any(|g| g.saving_unknown) {
            line.push_str(
                "; what fixing the findings saves is unknown (no host ops in the trace to measure it on)",
            );
        } else if parts.is_empty() {
            line.push_str("; no finding would shorten a step");
        } else {
            let _ = write!(
                line,
                "; fixing the findings saves {saved:.0}% of step time: {}",
                parts.join(", ")
            );
        }
    }
    line
}

fn overview(h: &mut Html<'_>, report: &Report) {
    let _ = write!(h, "<p class=\"headline\">{}</p>", esc(&headline(report)));
    if let Some(p) = report.profiler_overhead.as_ref().filter(|p| p.distorts) {
        let _ = write!(h, "<p class=\"advice\">Profiler: {}</p>", esc(&p.message));
    }
    h.push_str("<table>");
    let device = crate::text::device_text(
        &report.device.kind,
        report.device.name.as_deref(),
        report.device.count,
    );
    let rows = [
        ("device", device),
        ("steps", crate::steps::step_count(report)),
        ("trace span", human_ns(report.summary.trace_ns)),
        (
            "device busy",
            report
                .summary
                .device_busy_pct
                .map_or_else(|| "-".into(), |p| format!("{p:.1}%")),
        ),
    ];
    for (k, v) in rows {
        let _ = write!(h, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    for s in &report.sources {
        let _ = write!(
            h,
            "<tr><th>source</th><td>{} <span class=\"muted\">({}, {})</span>",
            esc(&s.path),
            esc(s.format.as_str()),
            crate::count::plural(s.events, "event")
        );
        for w in &s.warnings {
            let _ = write!(
                h,
                "<br><span class=\"warn\">warning: {}</span>",
                esc(&w.message)
            );
        }
        h.push_str("</td></tr>");
    }
    h.push_str("</table>");
}

fn top_findings(h: &mut Html<'_>, report: &Report) {
    h.push_str("<h2>What to change first</h2>");
    let groups = report.groups();
    if groups.is_empty() {
        h.push_str("<p>No findings: nothing in this trace costs a material share of a step.</p>");
        return;
    }
    h.push_str("<ol>");
    let mut advised: Vec<&str> = Vec::new();
    for g in groups.iter().take(5) {
        let (f, figures) = crate::text::group_lead(report, g);
        let _ = write!(
            h,
            "<li><span class=\"kind\">{}</span> — {} <span class=\"muted\">({})</span>",
            esc(f.kind.title()),
            esc(&f.title),
            owns_tooltip(&figures)
        );
        if !advised.contains(&f.recommendation.as_str()) {
            advised.push(&f.recommendation);
            let _ = write!(h, "<p class=\"advice\">{}</p>", esc(&f.recommendation));
        }
        h.push_str("</li>");
    }
    h.push_str("</ol>");
}

/// A figures line (`saves 1.2 ms · owns 2.4 ms`), escaped, with what "owns" means as its
/// tooltip.
fn owns_tooltip(figures: &str) -> String {
    esc(figures).replace(
        "owns ",
        &format!(
            "<abbr title=\"{}\">owns</abbr> ",
            esc(steplens_analysis::finding::OWNS_NOTE)
        ),
    )
}

fn findings(h: &mut Html<'_>, report: &Report) {
    h.push_str("<h2>Findings</h2>");
    if report.findings.is_empty() {
        h.push_str("<p>None.</p>");
        return;
    }
    let mut kinds: Vec<FindingKind> = report.findings.iter().map(|f| f.kind).collect();
    kinds.sort_unstable_by_key(|k| k.title());
    kinds.dedup();
    h.push_str(
        "<p class=\"noprint\">Kind: <select id=\"kind-filter\"><option value=\"\">all</option>",
    );
    for k in &kinds {
        let _ = write!(
            h,
            "<option value=\"{}\">{}</option>",
            esc(k.as_str()),
            esc(k.title())
        );
    }
    h.push_str("</select></p>");
    for g in report.groups().iter() {
        let (f, figures) = crate::text::group_lead(report, g);
        let _ = write!(
            h,
            "<div class=\"finding sev-{}\" data-kind=\"{}\"><div><span class=\"kind\">{}</span> <span class=\"muted\">{} · {}{}{}</span></div><div>{}</div>",
            esc(g.severity.as_str()),
            esc(f.kind.as_str()),
            esc(f.kind.title()),
            esc(g.severity.as_str()),
            owns_tooltip(&figures),
            // A group of several steps names them in its figures, not by its first member.
            f.step
                .as_deref()
                .filter(|_| g.findings.len() == 1)
                .map(|s| format!(" · {}", esc(s)))
                .unwrap_or_default(),
            f.call_site
                .as_deref()
                .map(|s| format!(" · {}", esc(s)))
                .unwrap_or_default(),
            esc(&f.title)
        );
        evidence_timeline(h, report, f);
        let _ = write!(
            h,
            "<p class=\"advice\">{}</p></div>",
            esc(&f.recommendation)
        );
    }
}

/// The evidence slices of a finding drawn in its step's window (else around the finding), over
/// a time axis from the window's start, with what the window is written above it.
fn evidence_timeline(h: &mut Html<'_>, report: &Report, f: &steplens_analysis::report::Finding) {
    let spans: Vec<(i64, i64, String)> = f
        .evidence
        .iter()
        .filter_map(|e| match e {
            Evidence::Slice {
                start_ns,
                dur_ns,
                name,
                ..
            } => Some((*start_ns, *dur_ns, name.clone())),
            _ => None,
        })
        .collect();
    if spans.is_empty() {
        return;
    }
    // Ranks share step names: the step is the finding's own input's.
    let step = f.step.as_deref().and_then(|name| {
        report
            .steps
            .iter()
            .find(|s| s.name == name && f.source.is_none_or(|source| source == s.source))
    });
    let (from, to) = match step {
        Some(s) => (s.start_ns, s.start_ns + s.dur_ns),
        None => {
            let a = spans.iter().map(|s| s.0).min().unwrap_or(0);
            let z = spans.iter().map(|s| s.0 + s.1).max().unwrap_or(a + 1);
            (a, z.max(a + 1))
        }
    };
    let shown = spans.len().min(MAX_EVIDENCE_DRAWN);
    let what = format!(
        "{shown} evidence slice{}",
        if shown == 1 { "" } else { "s" }
    );
    let caption = match step {
        Some(s) => format!(
            "{what} in {} ({})",
            crate::steps::step_label(&s.name, s.source, s.rank, report.sources.len() > 1),
            human_ns(to - from)
        ),
        None => format!("{what} over {}", human_ns(to - from)),
    };
    let (w, ht, top) = (700.0, 62.0, 16.0);
    let span = (to - from).max(1) as f64;
    let _ = write!(
        h,
        "<svg width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"{caption}\"><text x=\"0\" y=\"11\" font-size=\"11\" fill=\"#555\">{caption}</text><rect x=\"0\" y=\"{top}\" width=\"{w}\" height=\"18\" fill=\"#f3f3f3\"/>",
        caption = esc(&caption),
    );
    let colour = kind_colour(f.kind);
    for (start, dur, name) in spans.iter().take(MAX_EVIDENCE_DRAWN) {
        let x = ((start - from) as f64 / span * w).clamp(0.0, w);
        let bw = (*dur as f64 / span * w).max(1.5).min(w - x);
        let _ = write!(
            h,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"14\" fill=\"{colour}\"><title>{}: {} at +{}</title></rect>",
            top + 2.0,
            esc(name),
            human_ns(*dur),
            human_ns(start - from)
        );
    }
    // The axis: a tick and a round time from the window's start.
    let axis_y = top + 20.0;
    let _ = write!(
        h,
        "<line x1=\"0\" x2=\"{w}\" y1=\"{axis_y}\" y2=\"{axis_y}\" stroke=\"#333\"/>"
    );
    time_ticks(
        h,
        to - from,
        (0.0, w),
        axis_y + 15.0,
        "+",
        Some(axis_y),
        " font-size=\"10\" fill=\"#333\"",
    );
    h.push_str("</svg>");
}

/// Evidence bars drawn per finding card (the JSON keeps every reference).
const MAX_EVIDENCE_DRAWN: usize = 200;
