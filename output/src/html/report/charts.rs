//! The report page's charts: the steps (stacked by what their time went to), the critical path
//! of each step, engine utilization over the trace, what fixing each kind of finding saves and
//! the top ops by self time; and the colours and time ticks the findings' timelines share.

use std::fmt::Write as _;

use steplens_analysis::FindingKind;
use steplens_analysis::Report;
use steplens_analysis::critical_path::{Bound, CriticalPath};
use steplens_analysis::steps::StepStats;
use steplens_analysis::units::human_ns;

use crate::html::{Html, PALETTE, Ticks, axis_y, esc, hbars, legend, pct};

/// Stacked bar per step: with a device, device busy and then the rest of the step split into
/// compile, sync, data-loader and other (host) time; without one, compile, sync and data-loader
/// time first and then the rest of the host's busy time, so a compile step draws as compile.
pub(super) fn step_chart(h: &mut Html<'_>, report: &Report) {
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
pub(super) fn critical_path_chart(h: &mut Html<'_>, report: &Report) {
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
pub(super) fn utilization_chart(h: &mut Html<'_>, report: &Report) {
    let Some(u) = &report.utilization else {
        return;
    };
    let (from, to) = (u.from_ns, u.to_ns);
    if u.classes.is_empty() || to <= from {
        return;
    }
    let (w, ht, left, bottom) = (1100.0, 200.0, 60.0, 24.0);
    let bins = steplens_analysis::engines::UTILIZATION_BINS;
    let span = (to - from) as f64;
    // Each engine class's line; a class never busy in the trace draws no line and no legend.
    let mut lines: Vec<(usize, &String, String)> = Vec::new();
    for (i, class) in u.classes.iter().enumerate() {
        if !class.busy_share.iter().any(|&share| share > 0.0) {
            continue;
        }
        let mut points = String::new();
        for (b, share) in class.busy_share.iter().enumerate() {
            let x = left + (b as f64 + 0.5) / bins as f64 * (w - left);
            let y = ht - bottom - share * (ht - bottom - 10.0);
            let _ = write!(points, "{x:.1},{y:.1} ");
        }
        lines.push((i, &class.class, points));
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
    for step in &report.steps {
        let Some(start) = step.host_start_ns else {
            continue;
        };
        let x = left + (start - from) as f64 / span * (w - left);
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
pub(super) fn time_ticks(
    h: &mut Html<'_>,
    span: i64,
    xs: (f64, f64),
    y: f64,
    prefix: &str,
    mark: Option<f64>,
    attrs: &str,
) {
    let (x0, x1) = xs;
    let ticks = Ticks::new(span);
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
pub(super) fn kind_colour(kind: FindingKind) -> &'static str {
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
pub(super) fn savings_chart(h: &mut Html<'_>, report: &Report) {
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

pub(super) fn ops_chart(h: &mut Html<'_>, report: &Report) {
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
