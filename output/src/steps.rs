//! How every output lists and labels steps: by rank (else input), then start, and named with
//! their rank when a report has several inputs.

use steplens_analysis::report::Report;
use steplens_analysis::steps::StepStats;

/// The report's steps as the step tables list them: by rank (else input), then start.
pub(crate) fn steps_by_rank(report: &Report) -> Vec<&StepStats> {
    let mut steps: Vec<_> = report.steps.iter().collect();
    steps.sort_by_key(|s| (s.rank, s.source, s.start_ns));
    steps
}

/// A plugin step's label: its name, and with several inputs the rank (or input) it is from.
pub(crate) fn step_label(name: &str, source: u16, rank: Option<i64>, multi: bool) -> String {
    match (multi, rank) {
        (true, Some(r)) => format!("{name} [rank {r}]"),
        (true, None) => format!("{name} [{source}]"),
        _ => name.to_owned(),
    }
}

/// The rank (else input) a step belongs to, as charts head each group of bars: `rank 2`.
pub(crate) fn rank_group(s: &StepStats) -> String {
    s.rank
        .map_or_else(|| format!("input {}", s.source), |r| format!("rank {r}"))
}

/// The ranks (else inputs) the steps come from.
pub(crate) fn step_ranks(report: &Report) -> usize {
    let mut ranks: Vec<(Option<i64>, u16)> = report
        .steps
        .iter()
        .map(|s| (s.rank, if s.rank.is_some() { 0 } else { s.source }))
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks.len()
}

/// How many steps a report has, per rank when several ranks (else inputs) have them: `8 steps ×
/// 4 ranks` (32 step rows), `1 step`, `9 steps over 2 ranks` when the ranks' counts differ.
#[must_use]
pub fn step_count(report: &Report) -> String {
    let n = report.steps.len();
    let plural = |n: usize, one: &str| crate::count::plural(n as u64, one);
    let whose = if report.steps.iter().any(|s| s.rank.is_some()) {
        "ranks"
    } else {
        "inputs"
    };
    match step_ranks(report) {
        r if r > 1 && n.is_multiple_of(r) => format!("{} × {r} {whose}", plural(n / r, "step")),
        r if r > 1 => format!("{} over {r} {whose}", plural(n, "step")),
        _ => plural(n, "step"),
    }
}

/// The step table's heading count: `3` for one input, `8 steps × 4 ranks` for several.
pub(crate) fn table_count(report: &Report) -> String {
    if step_ranks(report) > 1 {
        step_count(report)
    } else {
        report.steps.len().to_string()
    }
}
