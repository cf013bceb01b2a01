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
