//! Savings checked against fixed runs: a pair of traces of the same training loop, one with a
//! problem and one with the finding's fix applied. The estimate is what the report of the
//! problem trace says fixing the finding saves per step; the realized saving is the difference
//! of the two runs' median steps, read from their `ProfilerStep#N` ranges, with a bootstrap
//! interval (`steplens-bench whatif` prints the table; `tests/it/whatif.rs` holds the estimates to
//! the realized savings of the committed pairs).

use crate::finding::FindingKind;
use crate::report::Report;
use crate::stats::{Shift, Statistic, bootstrap_shift};

/// The per-step statistic a kind's saving is compared by: the mean for costs that fall in a few
/// steps (a recompile takes seconds in the steps where shapes change and nothing in the rest,
/// so the median step does not move), the median otherwise.
#[must_use]
pub fn statistic_for(kind: FindingKind) -> Statistic {
    if kind == FindingKind::Recompile {
        Statistic::Mean
    } else {
        Statistic::Median
    }
}

/// The estimated saving per step of fixing the findings of `kind`: per step, the savings of
/// the kind's findings in it (0 in a step without one), and the kind's statistic
/// ([`statistic_for`]) over the steps; a finding without a step spreads its saving evenly over
/// the steps. `None` without steps.
#[must_use]
pub fn estimated_saving_per_step(report: &Report, kind: FindingKind) -> Option<f64> {
    if report.steps.is_empty() {
        return None;
    }
    let mut per_step: Vec<i64> = report
        .steps
        .iter()
        .map(|s| {
            report
                .findings
                .iter()
                .filter(|f| {
                    f.kind == kind
                        && f.step.as_deref() == Some(s.name.as_str())
                        && f.cost_source_matches(s.source)
                })
                .map(|f| f.saving_ns)
                .sum()
        })
        .collect();
    let spread: i64 = report
        .findings
        .iter()
        .filter(|f| f.kind == kind && f.step.is_none())
        .map(|f| f.saving_ns)
        .sum::<i64>()
        / per_step.len() as i64;
    for v in &mut per_step {
        *v += spread;
    }
    statistic_for(kind).of(&mut per_step)
}

/// The step durations of a report, ns.
#[must_use]
pub fn step_durations(report: &Report) -> Vec<i64> {
    report.steps.iter().map(|s| s.dur_ns).collect()
}

/// What the fix saved per step: the statistic (median or mean) of `problem`'s steps − that of
/// `fixed`'s, with its 95 % bootstrap interval. `None` when either side has no steps.
#[must_use]
pub fn realized_saving(problem: &[i64], fixed: &[i64], statistic: Statistic) -> Option<Shift> {
    // bootstrap_shift gives current − baseline: the problem run is the "current" one.
    bootstrap_shift(fixed, problem, statistic, 0.95)
}

/// Whether `estimate` agrees with a realized saving: within ±`tolerance` (a share, 0.3 for
/// ±30 %) of its point, or inside its interval.
#[must_use]
pub fn agrees(estimate: f64, realized: &Shift, tolerance: f64) -> bool {
    let point = realized.point;
    let near = (estimate - point).abs() <= tolerance * point.abs();
    let inside = estimate >= realized.low && estimate <= realized.high;
    near || inside
}

impl crate::finding::Finding {
    /// Whether the finding belongs to input `source`'s clock (findings without an input do).
    fn cost_source_matches(&self, source: u16) -> bool {
        self.cost.source.is_none_or(|s| s == source)
    }
}
