//! The report page's sections: overview, step and utilization charts, lost time and ops charts,
//! findings with their evidence timelines, rank and memory tables, and the report's tables.

use std::fmt::Write as _;
use std::io;

use steplens_analysis::critical_path::{Bound, CriticalPath};
use steplens_analysis::memory::human_bytes;
use steplens_analysis::steps::{Channels, StepStats};
use steplens_analysis::units::human_ns;
use steplens_analysis::{Evidence, FindingKind, Report};
use steplens_ingest::Timeline;

use super::{
    Html, PALETTE, STYLE, axis_y, bytes_cell, close_page, esc, hbars, legend, ns_cell, opt_ns_cell,
    pct, table, text_cell,
};

/// The whole page as one `String`: [`write_report_page`] into memory.
#[must_use]
pub fn report_page(report: &Report, timeline: &Timeline) -> String {
    super::sink::page_string(|out| write_report_page(out, report, timeline))
}

/// The whole page, written to `out` section by section as it renders, so that it is never held
/// whole in memory (wrap a file or stdout in a `BufWriter`).
///
/// # Errors
/// The first error `out` returns; nothing is written after it.
pub fn write_report_page(
    out: &mut dyn io::Write,
    report: &Report,
    timeline: &Timeline,
) -> io::Result<()> {
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
    utilization_chart(h, timeline);
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

/// Stacked bar per step: with a device, device busy and then the rest of the step split into
/// compile, sync, data-loader and other (host) time; without one, compile, sync and data-loader
/// time first and then the rest of the host's busy time, so a compile step draws as compile.
fn step_chart(h: &mut Html<'_>, report: &Report) {
    if report.steps.is_empty() {
        return;
    }
    h.push_str("<h2>Steps</h2>");
    // A step's findings are those of its own input: ranks share step names.
    let lost = |step: &StepStats, kind: &str| -> i64 {
        report
            .findings
            .iter()
            .filter(|f| {
                f.step.as_deref() == Some(step.name.as_str())
                    && f.kind == kind
                    && f.source.is_none_or(|source| source == step.source)
            })
            .map(|f| f.lost_ns)
            .sum()
    };
    let multi = report.sources.len() > 1;
    let steps = crate::steps::steps_by_rank(report);
    let has_device = report.steps.iter().any(|s| s.device_busy_ns.is_some());
    let busy = (
        if has_device {
            "device busy"
        } else {
            "host busy"
        },
        PALETTE[4],
    );
    let causes = [
        ("compile", bound_colour(Bound::Compile)),
        ("sync wait", bound_colour(Bound::SyncWait)),
        ("data loader", bound_colour(Bound::DataLoading)),
    ];
    let rest = (
        if has_device {
            "device idle, host working"
        } else {
            "other"
        },
        PALETTE[7],
    );
    // Stacking order, bottom up; the legend lists it in the same order.
    let series: Vec<(&str, &str)> = if has_device {
        std::iter::once(busy).chain(causes).chain([rest]).collect()
    } else {
        causes.into_iter().chain([busy, rest]).collect()
    };
    let bars: Vec<(&StepStats, Vec<i64>)> = steps
        .iter()
        .map(|s| {
            let busy = if has_device {
                s.device_busy_ns.unwrap_or(0)
            } else {
                s.host_busy_ns
            };
            // A warm-up compile is no recompile finding: the step's compile time shows it.
            let causes = [
                lost(s, "recompile").max(s.compile_ns),
                lost(s, "sync_point"),
                lost(s, "dataloader_stall").max(0),
            ];
            let parts: Vec<i64> = if has_device {
                std::iter::once(busy).chain(causes).collect()
            } else {
                // Host time in a compile, a sync or the loader is part of the host's busy time.
                let caused: i64 = causes.iter().sum();
                causes.into_iter().chain([(busy - caused).max(0)]).collect()
            };
            // The parts share one step: each is cut to what the ones before it left (a sync
            // wait overlaps device work; the bar shows the step's wall time, never more).
            let mut left_over = s.dur_ns;
            let mut parts: Vec<i64> = parts
                .into_iter()
                .map(|v| {
                    let v = v.clamp(0, left_over);
                    left_over -= v;
                    v
                })
                .collect();
            parts.push(left_over);
            (*s, parts)
        })
        .collect();
    let shown: Vec<(&str, &str, f64)> = series
        .iter()
        .enumerate()
        .map(|(k, (name, colour))| {
            let total: i64 = bars.iter().map(|(_, parts)| parts[k]).sum();
            (*name, *colour, total as f64)
        })
        .collect();
    legend(h, &shown);
    let (w, ht, left, bottom) = (1100.0, 260.0, 60.0, 40.0);
    let n = steps.len() as f64;
    let bar = ((w - left) / n * 0.8).max(1.0);
    let x_of = |i: usize| left + i as f64 * (w - left) / n + 2.0;
    let _ = write!(
        h,
        "<svg width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"step time\">"
    );
    let max_ns = report.steps.iter().map(|s| s.dur_ns).max().unwrap_or(1);
    let max = axis_y(h, left, ht - bottom, max_ns);
    rank_groups(h, report, &steps, x_of, ht - bottom + 30.0);
    for (i, (s, parts)) in bars.iter().enumerate() {
        let x = x_of(i);
        let label = crate::steps::step_label(&s.name, s.source, s.rank, multi);
        let mut y = ht - bottom;
        for (k, v) in parts.iter().enumerate() {
            let hh = *v as f64 / max * (ht - bottom - 10.0);
            y -= hh;
            let _ = write!(
                h,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{hh:.1}\" fill=\"{}\"><title>{}: {} {} ({:.0}% of {})</title></rect>",
                series[k].1,
                esc(&label),
                series[k].0,
                human_ns(*v),
                pct(*v, s.dur_ns),
                human_ns(s.dur_ns)
            );
        }
        if steps.len() <= 40 {
            let _ = write!(
                h,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                ht - bottom + 14.0,
                esc(s.name.trim_start_matches("ProfilerStep"))
            );
        }
    }
    if let Some(p50) = report.summary.p50_step_ns {
        let y = ht - bottom - p50 as f64 / max * (ht - bottom - 10.0);
        let _ = write!(
            h,
            "<line x1=\"{left}\" x2=\"{w}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#000\" stroke-dasharray=\"4 3\"><title>median step {}</title></line><text x=\"{}\" y=\"{:.1}\">median {}</text>",
            human_ns(p50),
            w - 90.0,
            y - 3.0,
            human_ns(p50)
        );
    }
    h.push_str("</svg>");
}

/// Under a chart of one bar per step (in [`crate::steps::steps_by_rank`] order): each rank's
/// (else input's) name under its first bar, after a divider. Nothing for one input.
fn rank_groups(
    h: &mut Html<'_>,
    report: &Report,
    steps: &[&StepStats],
    x_of: impl Fn(usize) -> f64,
    label_y: f64,
) {
    if report.sources.len() < 2 {
        return;
    }
    let mut current: Option<String> = None;
    for (i, s) in steps.iter().enumerate() {
        let group = crate::steps::rank_group(s);
        if current.as_ref() == Some(&group) {
            continue;
        }
        let x = x_of(i);
        if i > 0 {
            let _ = write!(
                h,
                "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"10\" y2=\"{label_y:.1}\" stroke=\"#999\"/>",
                x - 2.0,
                x - 2.0
            );
        }
        let _ = write!(
            h,
            "<text x=\"{x:.1}\" y=\"{label_y:.1}\">{}</text>",
            esc(&group)
        );
        current = Some(group);
    }
}

/// One colour per kind of work, the same in the step chart and the critical-path chart.
fn bound_colour(b: Bound) -> &'static str {
    match b {
        Bound::HostCompute => PALETTE[1],
        Bound::LaunchOverhead => PALETTE[3],
        Bound::DeviceCompute => PALETTE[4],
        Bound::Communication => PALETTE[2],
        Bound::KernelGap => PALETTE[7],
        Bound::SyncWait => PALETTE[5],
        Bound::DataLoading => PALETTE[0],
        Bound::Compile => PALETTE[6],
    }
}

/// One stacked bar per step: its critical path by what bounds it.
fn critical_path_chart(h: &mut Html<'_>, report: &Report) {
    let multi = report.sources.len() > 1;
    let steps: Vec<&StepStats> = crate::steps::steps_by_rank(report)
        .into_iter()
        .filter(|s| s.critical_path.is_some())
        .collect();
    let paths: Vec<(String, &CriticalPath)> = steps
        .iter()
        .filter_map(|s| {
            let label = crate::steps::step_label(&s.name, s.source, s.rank, multi);
            s.critical_path.as_ref().map(|p| (label, p))
        })
        .chain(
            report
                .critical_path
                .iter()
                .filter(|_| steps.is_empty())
                .map(|p| ("whole trace".to_owned(), p)),
        )
        .collect();
    if paths.is_empty() {
        return;
    }
    h.push_str("<h2>Critical path: what bounds each step</h2>");
    // Only the bounds some path holds.
    let series: Vec<(&str, &str, f64)> = Bound::ALL
        .iter()
        .map(|&b| {
            let total: i64 = paths
                .iter()
                .map(|(_, p)| p.by_bound.get(&b).copied().unwrap_or(0).max(0))
                .sum();
            (b.as_str(), bound_colour(b), total as f64)
        })
        .collect();
    legend(h, &series);
    let (w, ht, left, bottom) = (1100.0, 240.0, 60.0, 40.0);
    let max_ns = paths.iter().map(|(_, p)| p.total_ns).max().unwrap_or(1);
    let n = paths.len() as f64;
    let bar = ((w - left) / n * 0.8).max(1.0);
    let x_of = |i: usize| left + i as f64 * (w - left) / n + 2.0;
    let _ = write!(
        h,
        "<svg width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"critical path by bound\">"
    );
    let max = axis_y(h, left, ht - bottom, max_ns);
    rank_groups(h, report, &steps, x_of, ht - bottom + 30.0);
    for (i, (label, path)) in paths.iter().enumerate() {
        let x = x_of(i);
        let mut y = ht - bottom;
        for b in Bound::ALL {
            let v = path.by_bound.get(&b).copied().unwrap_or(0);
            if v <= 0 {
                continue;
            }
            let hh = v as f64 / max * (ht - bottom - 10.0);
            y -= hh;
            let _ = write!(
                h,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{hh:.1}\" fill=\"{}\"><title>{}: {} {} ({:.0}% of the path)</title></rect>",
                bound_colour(b),
                esc(label),
                b.as_str(),
                human_ns(v),
                pct(v, path.total_ns)
            );
        }
        if paths.len() <= 40 {
            let short = steps.get(i).map_or(label.as_str(), |s| {
                s.name.trim_start_matches("ProfilerStep")
            });
            let _ = write!(
                h,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                ht - bottom + 14.0,
                esc(short)
            );
        }
    }
    h.push_str("</svg>");
}

/// Busy share per engine class in 120 bins over the trace, with step boundaries.
fn utilization_chart(h: &mut Html<'_>, timeline: &Timeline) {
    let channels = steplens_analysis::steps::channels(timeline);
    let mut engines: std::collections::BTreeMap<&String, Vec<&Channels>> = Default::default();
    for c in channels.values() {
        for name in c.engines.keys() {
            engines.entry(name).or_default().push(c);
        }
    }
    let Some((from, to)) = timeline.time_range() else {
        return;
    };
    if engines.is_empty() || to <= from {
        return;
    }
    let (w, ht, left, bottom, bins) = (1100.0, 200.0, 60.0, 24.0, 120usize);
    let span = (to - from) as f64;
    // Each engine class's line; a class never busy in the trace draws no line and no legend.
    let mut lines: Vec<(usize, &String, String)> = Vec::new();
    for (i, (name, sets)) in engines.iter().enumerate() {
        let mut points = String::new();
        let mut any = false;
        for b in 0..bins {
            let a = from + (span * b as f64 / bins as f64) as i64;
            let z = from + (span * (b + 1) as f64 / bins as f64) as i64;
            let busy: i64 = sets
                .iter()
                .filter_map(|c| c.engines.get(*name))
                .map(|set| set.covered(a, z))
                .sum();
            any |= busy > 0;
            let share = (busy as f64 / (z - a).max(1) as f64 / sets.len() as f64).min(1.0);
            let x = left + (b as f64 + 0.5) / bins as f64 * (w - left);
            let y = ht - bottom - share * (ht - bottom - 10.0);
            let _ = write!(points, "{x:.1},{y:.1} ");
        }
        if any {
            lines.push((i, name, points));
        }
    }
    if lines.is_empty() {
        return;
    }
    h.push_str("<h2>Engine utilization over the trace</h2>");
    let names: Vec<(&str, &str, f64)> = lines
        .iter()
        .map(|(i, n, _)| (n.as_str(), PALETTE[i % PALETTE.len()], 1.0))
        .collect();
    legend(h, &names);
    let _ = write!(
        h,
        "<svg width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"utilization\">"
    );
    for pct in (0..=100).step_by(20) {
        let y = ht - bottom - (ht - bottom - 10.0) * f64::from(pct) / 100.0;
        let _ = write!(
            h,
            "<text class=\"tick\" data-axis=\"y\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{pct}%</text><line x1=\"{left}\" x2=\"{w}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>",
            left - 4.0,
            y + 4.0,
        );
    }
    for step in &timeline.steps {
        let x = left + (step.start - from) as f64 / span * (w - left);
        let _ = write!(
            h,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"10\" y2=\"{}\" stroke=\"#bbb\" stroke-dasharray=\"2 3\"><title>{}</title></line>",
            ht - bottom,
            esc(&step.name)
        );
    }
    for (i, name, points) in &lines {
        let _ = write!(
            h,
            "<polyline points=\"{points}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"><title>{} busy share per bin of {}</title></polyline>",
            PALETTE[i % PALETTE.len()],
            esc(name),
            human_ns((span / bins as f64) as i64)
        );
    }
    // The time axis: round times from the trace's start.
    time_ticks(h, to - from, (left, w), ht - 6.0, "", None, "");
    h.push_str("</svg>");
}

/// Round time ticks along an x axis from `xs.0` (time 0) to `xs.1` (time `span`), labels at `y`,
/// each after `prefix` (`+` for a time from a window's start), with a short mark down from
/// `mark` when given and `attrs` on each label; a tick never lies past `span`.
fn time_ticks(
    h: &mut Html<'_>,
    span: i64,
    xs: (f64, f64),
    y: f64,
    prefix: &str,
    mark: Option<f64>,
    attrs: &str,
) {
    let (x0, x1) = xs;
    let ticks = super::Ticks::new(span);
    let span = span.max(1);
    for v in ticks.values().take_while(|v| *v <= span) {
        let x = x0 + (x1 - x0) * v as f64 / span as f64;
        // Labels at the ends stay inside the chart.
        let anchor = if x - x0 < 30.0 {
            "start"
        } else if x1 - x < 30.0 {
            "end"
        } else {
            "middle"
        };
        let label = if v == 0 {
            "0".to_owned()
        } else {
            format!("{prefix}{}", ticks.time_label(v))
        };
        if let Some(m) = mark {
            let _ = write!(
                h,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{m}\" y2=\"{:.1}\" stroke=\"#333\"/>",
                m + 4.0
            );
        }
        let _ = write!(
            h,
            "<text class=\"tick\" data-axis=\"x\" x=\"{x:.1}\" y=\"{y:.1}\"{attrs} text-anchor=\"{anchor}\">{label}</text>"
        );
    }
}

/// One colour per finding kind, the same as the step chart's where the kind is there.
fn kind_colour(kind: FindingKind) -> &'static str {
    match kind {
        FindingKind::Recompile => bound_colour(Bound::Compile),
        FindingKind::SyncPoint => bound_colour(Bound::SyncWait),
        FindingKind::DataloaderStall => bound_colour(Bound::DataLoading),
        FindingKind::HostBoundGap => bound_colour(Bound::KernelGap),
        FindingKind::MmeIdleBehindTpc => PALETTE[1],
        FindingKind::NonLogicalTranspose => PALETTE[2],
        FindingKind::Straggler => PALETTE[4],
        _ => PALETTE[3],
    }
}

/// What fixing the findings of each kind saves (`summary.saving_ns_by_kind`), largest first: the
/// same figure the headline and the findings' ranking use.
fn savings_chart(h: &mut Html<'_>, report: &Report) {
    let mut kinds: Vec<(FindingKind, i64)> = report
        .summary
        .saving_ns_by_kind
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| (*k, *v))
        .collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let rows: Vec<(String, i64, &str)> = kinds
        .iter()
        .map(|(k, v)| (k.title().to_owned(), *v, kind_colour(*k)))
        .collect();
    if rows.is_empty() {
        return;
    }
    h.push_str(
        "<div data-chart=\"savings-by-kind\"><h2>What fixing each kind of finding saves</h2>",
    );
    hbars(h, &rows);
    h.push_str("</div>");
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

fn ops_chart(h: &mut Html<'_>, report: &Report) {
    let mut ops: Vec<&steplens_analysis::ops::OpStats> = report.ops.iter().collect();
    ops.sort_by_key(|o| std::cmp::Reverse(o.self_ns));
    let rows: Vec<(String, i64, &str)> = ops
        .iter()
        .take(15)
        .map(|o| {
            let device = o.track_kind == "device";
            let label = format!("{} [{}]", o.name, o.track_kind);
            (
                label,
                o.self_ns,
                if device { PALETTE[2] } else { PALETTE[1] },
            )
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    h.push_str("<h2>Top ops by self time</h2>");
    let total = |colour: &str| -> f64 {
        rows.iter()
            .filter(|r| r.2 == colour)
            .map(|r| r.1 as f64)
            .sum()
    };
    legend(
        h,
        &[
            ("host", PALETTE[1], total(PALETTE[1])),
            ("device", PALETTE[2], total(PALETTE[2])),
        ],
    );
    hbars(h, &rows);
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

/// The ranks of a multi-rank run and the memory per device, when the report has them.
fn ranks_and_memory(h: &mut Html<'_>, report: &Report) {
    if let Some(ranks) = &report.ranks {
        let _ = write!(
            h,
            "<h2>Ranks</h2><p>{}{}; {}</p>",
            crate::count::plural(ranks.world_size as u64, "rank"),
            ranks
                .backend
                .as_deref()
                .map(|b| format!(" ({})", esc(b)))
                .unwrap_or_default(),
            esc(&ranks.clock)
        );
        let rows: Vec<Vec<(String, Option<f64>)>> = ranks
            .ranks
            .iter()
            .map(|r| {
                vec![
                    (r.rank.to_string(), Some(r.rank as f64)),
                    text_cell(&r.rank_from),
                    opt_ns_cell(r.step_p50_ns),
                    opt_ns_cell(r.compute_p50_ns),
                    opt_ns_cell(r.collective_p50_ns),
                    opt_ns_cell(r.exposed_comm_p50_ns),
                    (
                        format!("{} of {}", r.last_arrivals, r.collectives),
                        Some(r.last_arrivals as f64),
                    ),
                    ns_cell(r.wait_ns),
                    r.comm_overlap_pct
                        .map_or_else(|| text_cell("-"), |p| (format!("{p:.0}%"), Some(p))),
                ]
            })
            .collect();
        table(
            h,
            "ranks",
            &[
                ("rank", true),
                ("from", false),
                ("median step", true),
                ("compute", true),
                ("in collectives", true),
                ("exposed", true),
                ("last to arrive", true),
                ("waited", true),
                ("comm hidden", true),
            ],
            &rows,
        );
        let rows: Vec<Vec<(String, Option<f64>)>> = ranks
            .collectives
            .iter()
            .map(|c| {
                vec![
                    text_cell(&c.name),
                    (c.count.to_string(), Some(c.count as f64)),
                    ns_cell(c.latency_p50_ns),
                    ns_cell(c.wait_p50_ns),
                    ns_cell(c.max_start_skew_ns),
                    c.bytes.map_or_else(|| text_cell(""), bytes_cell),
                    c.bus_gbps
                        .map_or_else(|| text_cell(""), |g| (format!("{g:.2}"), Some(g))),
                ]
            })
            .collect();
        table(
            h,
            "collectives",
            &[
                ("collective", false),
                ("count", true),
                ("latency p50", true),
                ("wait p50", true),
                ("max start skew", true),
                ("size", true),
                ("bus GB/s", true),
            ],
            &rows,
        );
    }
    if !report.memory.is_empty() {
        h.push_str("<h2>Memory</h2>");
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .memory
            .iter()
            .map(|m| {
                vec![
                    text_cell(&m.device),
                    bytes_cell(m.peak_allocated_bytes),
                    bytes_cell(m.peak_reserved_bytes),
                    bytes_cell(m.slack_at_peak_bytes),
                    (m.allocations.to_string(), Some(m.allocations as f64)),
                    (m.frees.to_string(), Some(m.frees as f64)),
                    bytes_cell(m.never_freed_bytes),
                    (
                        m.integrity_breaks.to_string(),
                        Some(m.integrity_breaks as f64),
                    ),
                ]
            })
            .collect();
        table(
            h,
            "memory",
            &[
                ("device", false),
                ("peak allocated", true),
                ("peak reserved", true),
                ("slack at peak", true),
                ("allocations", true),
                ("frees", true),
                ("never freed", true),
                ("lost events", true),
            ],
            &rows,
        );
        h.push_str("<p>Held at the allocated peak:</p>");
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .memory
            .iter()
            .flat_map(|m| {
                m.held_at_peak.iter().map(|hold| {
                    vec![
                        text_cell(&m.device),
                        text_cell(&hold.op),
                        text_cell(hold.call_site.as_deref().unwrap_or("")),
                        bytes_cell(hold.bytes),
                        (hold.count.to_string(), Some(hold.count as f64)),
                    ]
                })
            })
            .collect();
        table(
            h,
            "holders",
            &[
                ("device", false),
                ("op", false),
                ("call site", false),
                ("bytes", true),
                ("allocations", true),
            ],
            &rows,
        );
    }
}

fn tables(h: &mut Html<'_>, report: &Report) {
    if !report.steps.is_empty() {
        h.push_str("<h2>Steps table</h2>");
        // Several inputs share step names: a rank (else input) column tells their rows apart.
        let multi = report.sources.len() > 1;
        let by_rank = multi && report.steps.iter().any(|s| s.rank.is_some());
        let rows: Vec<Vec<(String, Option<f64>)>> = crate::steps::steps_by_rank(report)
            .into_iter()
            .map(|s| {
                let whose = if by_rank {
                    s.rank
                        .map_or_else(|| text_cell("-"), |r| (r.to_string(), Some(r as f64)))
                } else {
                    (s.source.to_string(), Some(f64::from(s.source)))
                };
                multi
                    .then_some(whose)
                    .into_iter()
                    .chain([
                        text_cell(&s.name),
                        ns_cell(s.dur_ns),
                        ns_cell(s.host_busy_ns),
                        opt_ns_cell(s.device_busy_ns),
                        opt_ns_cell(s.device_launched_ns),
                        ns_cell(s.dataloader_ns),
                        s.memory_peak_bytes
                            .map_or_else(|| text_cell("-"), |b| (human_bytes(b), Some(b as f64))),
                    ])
                    .collect()
            })
            .collect();
        let whose = [(if by_rank { "rank" } else { "input" }, true)];
        let columns: Vec<(&str, bool)> = whose[..usize::from(multi)]
            .iter()
            .copied()
            .chain([
                ("step", false),
                ("duration", true),
                ("host busy", true),
                ("device busy", true),
                ("device launched", true),
                ("data loader", true),
                ("memory peak", true),
            ])
            .collect();
        table(h, "steps", &columns, &rows);
    }
    if !report.engines.is_empty() {
        h.push_str("<h2>Engines</h2>");
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .engines
            .iter()
            .map(|e| {
                vec![
                    text_cell(&e.class),
                    (e.engines.to_string(), Some(e.engines as f64)),
                    ns_cell(e.busy_ns),
                    (format!("{:.1}%", e.busy_pct), Some(e.busy_pct)),
                    (
                        format!("{:.1}%", e.mean_engine_utilization_pct),
                        Some(e.mean_engine_utilization_pct),
                    ),
                ]
            })
            .collect();
        table(
            h,
            "engines",
            &[
                ("class", false),
                ("engines", true),
                ("busy", true),
                ("% of trace", true),
                ("mean per engine", true),
            ],
            &rows,
        );
    }
    if !report.idle.is_empty() {
        let _ = write!(
            h,
            "<h2>{}</h2><p class=\"note\">{}</p>",
            esc(crate::text::STREAM_IDLE_HEADING),
            esc(crate::text::STREAM_IDLE_NOTE)
        );
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .idle
            .iter()
            .map(|i| {
                vec![
                    text_cell(&i.stream),
                    (i.kernels.to_string(), Some(i.kernels as f64)),
                    ns_cell(i.idle_ns),
                    ns_cell(i.host_wait_ns),
                    ns_cell(i.kernel_wait_ns),
                    ns_cell(i.other_ns),
                ]
            })
            .collect();
        table(
            h,
            "idle",
            &[
                ("stream", false),
                ("kernels", true),
                ("idle", true),
                ("host wait", true),
                ("kernel wait", true),
                ("other", true),
            ],
            &rows,
        );
    }
    h.push_str("<h2>Ops (all)</h2>");
    // CUDA/HIP graph launches: the device work each graph ran, as one unit.
    let graphs = report.ops.iter().any(|o| o.graph_kernels.is_some());
    let rows: Vec<Vec<(String, Option<f64>)>> = report
        .ops
        .iter()
        .map(|o| {
            let mut row = vec![
                text_cell(&o.name),
                text_cell(&o.track_kind),
                (o.count.to_string(), Some(o.count as f64)),
                ns_cell(o.total_ns),
                ns_cell(o.self_ns),
                ns_cell(o.mean_ns),
                ns_cell(o.p50_ns),
                ns_cell(o.p99_ns),
            ];
            if graphs {
                row.push(
                    o.graph_kernels
                        .map_or_else(|| text_cell(""), |k| (k.to_string(), Some(k as f64))),
                );
                row.push(o.graph_device_ns.map_or_else(|| text_cell(""), ns_cell));
            }
            row
        })
        .collect();
    let mut columns = vec![
        ("op", false),
        ("where", false),
        ("count", true),
        ("total", true),
        ("self", true),
        ("mean", true),
        ("p50", true),
        ("p99", true),
    ];
    if graphs {
        columns.extend([("graph kernels", true), ("graph device", true)]);
    }
    table(h, "ops", &columns, &rows);
}
