//! The diff page (`steplens diff -f html`) and the check page (`steplens check --html`).

use std::fmt::Write as _;
use std::io;

use steplens_analysis::FindingKind;
use steplens_analysis::units::human_ns;

use super::{Html, PALETTE, close_page, esc, hbars, legend, ns_cell, open_page, table, text_cell};

/// `steplens diff -f html`: the two runs' figures, lost time by kind before and after, the
/// findings that appeared or went, and every op change (sortable, filterable).
#[must_use]
pub fn diff_page(d: &steplens_analysis::compare::diff::Diff) -> String {
    super::sink::page_string(|out| write_diff_page(out, d))
}

/// [`diff_page`] written to `out` as it renders (wrap a file or stdout in a `BufWriter`).
///
/// # Errors
/// The first error `out` returns; nothing is written after it.
pub fn write_diff_page(
    out: &mut dyn io::Write,
    d: &steplens_analysis::compare::diff::Diff,
) -> io::Result<()> {
    let mut h = Html::new(out);
    open_page(
        &mut h,
        &format!("steplens diff — {} vs {}", d.a_label, d.b_label),
        "steplens diff",
    );
    let median = |f: &steplens_analysis::compare::figures::RunFigures| f.step_p50_ns.unwrap_or(0);
    let (a, b) = (median(&d.a), median(&d.b));
    let _ = write!(
        h,
        "<p class=\"headline\">median step {} → {} ({:+.1}%): A = {}, B = {}</p>",
        human_ns(a),
        human_ns(b),
        if a > 0 {
            (b - a) as f64 * 100.0 / a as f64
        } else {
            0.0
        },
        esc(&d.a_label),
        esc(&d.b_label)
    );
    let kinds: std::collections::BTreeSet<&FindingKind> =
        d.a.lost_ns_per_step
            .keys()
            .chain(d.b.lost_ns_per_step.keys())
            .collect();
    if !kinds.is_empty() {
        h.push_str("<h2>Lost time per step by finding kind, A then B</h2>");
        let total = |m: &std::collections::BTreeMap<FindingKind, i64>| -> f64 {
            m.values().map(|v| (*v).max(0) as f64).sum()
        };
        legend(
            &mut h,
            &[
                ("A (before)", PALETTE[7], total(&d.a.lost_ns_per_step)),
                ("B (after)", PALETTE[5], total(&d.b.lost_ns_per_step)),
            ],
        );
        let mut rows = Vec::new();
        for k in kinds {
            rows.push((
                format!("{k} (A)"),
                d.a.lost_ns_per_step.get(k).copied().unwrap_or(0),
                PALETTE[7],
            ));
            rows.push((
                format!("{k} (B)"),
                d.b.lost_ns_per_step.get(k).copied().unwrap_or(0),
                PALETTE[5],
            ));
        }
        hbars(&mut h, &rows);
    }
    h.push_str("<h2>Findings</h2><ul>");
    for (what, list) in [
        ("appeared", &d.appeared),
        ("gone", &d.gone),
        ("persisting", &d.persisting),
    ] {
        for f in list.iter() {
            let title =
                f.b.as_ref()
                    .or(f.a.as_ref())
                    .map_or("", |g| g.title.as_str());
            let _ = write!(
                h,
                "<li><b>{what}</b> {} — {}</li>",
                esc(&f.key.to_string()),
                esc(title)
            );
        }
    }
    h.push_str("</ul><h2>Op changes (per step)</h2>");
    let rows: Vec<Vec<(String, Option<f64>)>> = d
        .ops
        .iter()
        .map(|o| {
            vec![
                text_cell(&o.name),
                text_cell(&format!("{:?}", o.status).to_lowercase()),
                ns_cell(o.a_ns_per_step),
                ns_cell(o.b_ns_per_step),
                (
                    steplens_analysis::units::signed_ns(o.delta_ns_per_step),
                    Some(o.delta_ns_per_step as f64),
                ),
            ]
        })
        .collect();
    table(
        &mut h,
        "ops",
        &[
            ("op", false),
            ("status", false),
            ("A", true),
            ("B", true),
            ("change", true),
        ],
        &rows,
    );
    close_page(&mut h);
    h.finish()
}

/// `steplens check --html FILE`: the verdict, every rule with its interval, and lost time per
/// step by kind, baseline beside current.
#[must_use]
pub fn check_page(
    outcome: &steplens_analysis::compare::check::CheckOutcome,
    baseline: &str,
    current: &str,
) -> String {
    super::sink::page_string(|out| write_check_page(out, outcome, baseline, current))
}

/// [`check_page`] written to `out` as it renders (wrap a file or stdout in a `BufWriter`).
///
/// # Errors
/// The first error `out` returns; nothing is written after it.
pub fn write_check_page(
    out: &mut dyn io::Write,
    outcome: &steplens_analysis::compare::check::CheckOutcome,
    baseline: &str,
    current: &str,
) -> io::Result<()> {
    use steplens_analysis::compare::check::Status;
    let mut h = Html::new(out);
    open_page(&mut h, "steplens check", "steplens check");
    let count = |st: Status| outcome.rules.iter().filter(|r| r.status == st).count();
    let _ = write!(
        h,
        "<p class=\"headline\">{}: {}, {} failed, {} inconclusive, {}<br><span class=\"muted\">baseline {} · current {}</span></p>",
        if outcome.passed {
            "passed"
        } else {
            "REGRESSED"
        },
        crate::count::plural(outcome.rules.len() as u64, "rule"),
        count(Status::Fail),
        count(Status::Inconclusive),
        crate::count::plural(count(Status::Warn) as u64, "warning"),
        esc(baseline),
        esc(current)
    );
    let kinds: std::collections::BTreeSet<&FindingKind> = outcome
        .baseline
        .lost_ns_per_step
        .keys()
        .chain(outcome.current.lost_ns_per_step.keys())
        .collect();
    if !kinds.is_empty() {
        h.push_str("<h2>Lost time per step by finding kind</h2>");
        let total = |m: &std::collections::BTreeMap<FindingKind, i64>| -> f64 {
            m.values().map(|v| (*v).max(0) as f64).sum()
        };
        legend(
            &mut h,
            &[
                (
                    "baseline",
                    PALETTE[7],
                    total(&outcome.baseline.lost_ns_per_step),
                ),
                (
                    "current",
                    PALETTE[5],
                    total(&outcome.current.lost_ns_per_step),
                ),
            ],
        );
        let mut rows = Vec::new();
        for k in kinds {
            let get =
                |m: &std::collections::BTreeMap<FindingKind, i64>| m.get(k).copied().unwrap_or(0);
            rows.push((
                format!("{k} (baseline)"),
                get(&outcome.baseline.lost_ns_per_step),
                PALETTE[7],
            ));
            rows.push((
                format!("{k} (current)"),
                get(&outcome.current.lost_ns_per_step),
                PALETTE[5],
            ));
        }
        hbars(&mut h, &rows);
    }
    h.push_str("<h2>Rules</h2>");
    let order = |st: Status| -> f64 {
        match st {
            Status::Fail => 0.0,
            Status::Inconclusive => 1.0,
            Status::Warn => 2.0,
            Status::Pass => 3.0,
            Status::Skipped => 4.0,
        }
    };
    let mut rules: Vec<&steplens_analysis::compare::check::RuleResult> =
        outcome.rules.iter().collect();
    rules.sort_by(|a, b| order(a.status).total_cmp(&order(b.status)));
    let rows: Vec<Vec<(String, Option<f64>)>> = rules
        .iter()
        .map(|r| {
            let status = serde_json::to_value(r.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            vec![
                (status, Some(order(r.status))),
                text_cell(&r.rule),
                text_cell(&r.baseline),
                text_cell(&r.current),
                text_cell(&r.change),
                text_cell(&r.interval),
                text_cell(&r.limit),
                text_cell(&r.message),
            ]
        })
        .collect();
    table(
        &mut h,
        "rules",
        &[
            ("verdict", false),
            ("rule", false),
            ("baseline", false),
            ("current", false),
            ("change", false),
            ("interval", false),
            ("limit", false),
            ("why", false),
        ],
        &rows,
    );
    close_page(&mut h);
    h.finish()
}
