//! The regression check: a run's figures against a baseline's, rule by rule, under a budget.
//!
//! Every rule is one comparison with a verdict (pass, fail, skipped) and a message that names the
//! figures, so CI output (JUnit test cases, annotations, a Markdown table) is one row per rule.
//! Time rules regress only when the increase is past *both* tolerances that are set: the relative
//! one keeps large steps from failing on noise, the absolute one keeps tiny steps from failing on
//! a few microseconds. A ceiling (`max_ms`) fails on its own.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub use crate::compare::budget::{CheckBudget, KindKey, PctLimit, SpreadLimit, TimeLimit};
use crate::compare::figures::{FindingKey, RunFigures};
use crate::finding::FindingKind;
use crate::stats::{Statistic, bootstrap_shift};
use crate::units::{human_ns, signed_ns};

/// A rule's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Within the budget.
    Pass,
    /// Regressed past the budget, beyond noise.
    Fail,
    /// Past the budget on its face, but within the noise (the interval reaches zero) or with too
    /// few steps to tell: profile more steps.
    Inconclusive,
    /// Past the budget on a rule that does not fail the check (op self time, by default).
    Warn,
    /// Not comparable (a figure missing on one side).
    Skipped,
}

/// One budget rule and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleResult {
    /// Rule name: `step_time`, `engine_utilization.MME`, `lost_time.sync_point`,
    /// `new_findings.sync_point`, `op_self_time.aten::mm`, ….
    pub rule: String,
    /// Verdict.
    pub status: Status,
    /// Baseline figure as shown.
    pub baseline: String,
    /// Current figure as shown.
    pub current: String,
    /// The change as shown.
    pub change: String,
    /// The limit as shown.
    pub limit: String,
    /// The change's confidence interval as shown (`[+0.21 ms, +1.4 ms] at 99%`), for rules
    /// compared over per-step samples.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub interval: String,
    /// One line saying why it passed, failed or was skipped.
    pub message: String,
    /// For `new_findings.*`: the findings the baseline lacks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub new_findings: Vec<NewFinding>,
}

impl RuleResult {
    /// A passing rule with its figures shown; the caller fills in the change and message.
    fn passing(rule: &str, baseline: String, current: String, limit: String) -> Self {
        Self {
            rule: rule.to_owned(),
            status: Status::Pass,
            baseline,
            current,
            change: String::new(),
            limit,
            interval: String::new(),
            message: String::new(),
            new_findings: Vec::new(),
        }
    }
}

/// A finding in the current run whose key the baseline does not have.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewFinding {
    /// Its key.
    pub key: FindingKey,
    /// Title of its first finding.
    pub title: String,
    /// Lost time in the measured steps, ns.
    pub lost_ns: i64,
    /// Findings (steps) with this key.
    pub findings: u64,
}

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutcome {
    /// `steplens.check/1`.
    pub schema: String,
    /// Whether every rule passed or was skipped.
    pub passed: bool,
    /// The baseline's figures.
    pub baseline: RunFigures,
    /// The current run's figures.
    pub current: RunFigures,
    /// Every rule, in a fixed order: steps, device, engines, findings, ops.
    pub rules: Vec<RuleResult>,
}

impl CheckOutcome {
    /// The rules that failed.
    pub fn failures(&self) -> impl Iterator<Item = &RuleResult> {
        self.rules.iter().filter(|r| r.status == Status::Fail)
    }
}

/// Schema name of the check's JSON output.
pub const CHECK_SCHEMA: &str = "steplens.check/1";

/// Checks `current` against `baseline` under `budget`.
#[must_use]
pub fn check(baseline: &RunFigures, current: &RunFigures, budget: &CheckBudget) -> CheckOutcome {
    let mut rules = vec![
        time_rule(
            "step_time",
            "median step",
            baseline.step_p50_ns,
            current.step_p50_ns,
            budget.step_time,
            Some(
                Samples::of(
                    &baseline.step_samples_ns,
                    &current.step_samples_ns,
                    Statistic::Median,
                    budget,
                )
                .with_floor(step_noise_pct(baseline, budget)),
            ),
        ),
        time_rule(
            "step_time_mean",
            "mean step",
            baseline.step_mean_ns,
            current.step_mean_ns,
            budget.step_time_mean,
            Some(
                Samples::of(
                    &baseline.step_samples_ns,
                    &current.step_samples_ns,
                    Statistic::Mean,
                    budget,
                )
                .with_floor(step_noise_pct(baseline, budget)),
            ),
        ),
        pct_rule(
            "device_busy",
            "device busy",
            baseline.device_busy_pct,
            current.device_busy_pct,
            budget.device_busy,
        ),
    ];
    let classes: BTreeSet<&String> = baseline
        .engine_pct
        .keys()
        .chain(current.engine_pct.keys())
        .collect();
    for class in classes {
        rules.push(pct_rule(
            &format!("engine_utilization.{class}"),
            &format!("{class} utilization"),
            baseline.engine_pct.get(class).copied(),
            current.engine_pct.get(class).copied(),
            budget.engine_limit(class),
        ));
    }
    let kinds: BTreeSet<FindingKind> = baseline
        .lost_ns_per_step
        .keys()
        .chain(current.lost_ns_per_step.keys())
        .copied()
        .collect();
    for &kind in &kinds {
        let samples = |run: &RunFigures| {
            run.lost_samples_ns
                .get(&kind)
                .cloned()
                .unwrap_or_else(|| vec![0; run.step_samples_ns.len()])
        };
        let (base_samples, cur_samples) = (samples(baseline), samples(current));
        rules.push(time_rule(
            &format!("lost_time.{kind}"),
            &format!("{kind} lost time per step"),
            Some(baseline.lost_ns_per_step.get(&kind).copied().unwrap_or(0)),
            Some(current.lost_ns_per_step.get(&kind).copied().unwrap_or(0)),
            budget.lost_limit(kind),
            Some(
                Samples::of(&base_samples, &cur_samples, Statistic::Mean, budget)
                    .with_step_floor(step_noise_pct(baseline, budget), baseline.step_p50_ns),
            ),
        ));
    }
    for &kind in &kinds {
        rules.push(new_findings_rule(kind, baseline, current, budget));
    }
    for op in top_ops(baseline, current, budget.top_ops) {
        // Per-step samples on both sides: the distributions are compared (mean self time per
        // measured step), so an op fails only when its change is significant. Else the
        // whole-run averages, as reports saved without samples allow.
        let sampled = baseline
            .op_samples_ns
            .get(&op)
            .zip(current.op_samples_ns.get(&op));
        let figure = |run: &RunFigures| match sampled {
            Some(_) => run
                .op_samples_ns
                .get(&op)
                .filter(|s| !s.is_empty())
                .map(|s| s.iter().sum::<i64>() / s.len() as i64),
            None => Some(run.op_self_ns_per_step.get(&op).copied().unwrap_or(0)),
        };
        let mut rule = time_rule(
            &format!("op_self_time.{op}"),
            &format!("{op} self time per step"),
            figure(baseline),
            figure(current),
            budget.op_limit(&op),
            sampled.map(|(base, cur)| Samples::of(base, cur, Statistic::Mean, budget)),
        );
        if rule.status == Status::Fail && !budget.fail_on_op_rules {
            rule.status = Status::Warn;
            rule.message
                .push_str(" (a warning: op rules fail only with fail_on_op_rules)");
        }
        rules.push(rule);
    }
    rules.push(spread_rule(
        "rank_spread",
        baseline.rank_spread_pct,
        current.rank_spread_pct,
        budget.rank_spread,
    ));
    let mut exposed = time_rule(
        "exposed_comm",
        "exposed communication per step (median over ranks)",
        baseline.exposed_comm_ns,
        current.exposed_comm_ns,
        budget.exposed_comm,
        None,
    );
    // One number per run, no per-step samples: a rise within the step's run-to-run noise is
    // not told apart from it.
    if exposed.status == Status::Fail
        && let (Some(base), Some(cur), Some(step)) = (
            baseline.exposed_comm_ns,
            current.exposed_comm_ns,
            baseline.step_p50_ns,
        )
    {
        let noise = step as f64 * step_noise_pct(baseline, budget) / 100.0;
        if ((cur - base) as f64) < noise {
            exposed.status = Status::Inconclusive;
            exposed.message.push_str(&format!(
                " (within the run-to-run noise of {}: compare several baseline runs)",
                human_ns(noise as i64)
            ));
        }
    }
    rules.push(exposed);
    explain_step_time(&mut rules, baseline, current);
    CheckOutcome {
        schema: CHECK_SCHEMA.to_owned(),
        passed: rules.iter().all(|r| r.status != Status::Fail),
        baseline: baseline.clone(),
        current: current.clone(),
        rules,
    }
}

/// The ops with the most time per step in either run, largest first.
fn top_ops(baseline: &RunFigures, current: &RunFigures, n: usize) -> Vec<String> {
    let mut best: BTreeMap<&String, i64> = BTreeMap::new();
    for (op, &ns) in baseline
        .op_self_ns_per_step
        .iter()
        .chain(&current.op_self_ns_per_step)
    {
        let entry = best.entry(op).or_insert(0);
        *entry = (*entry).max(ns);
    }
    let mut ops: Vec<(&String, i64)> = best.into_iter().collect();
    ops.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    ops.into_iter().take(n).map(|(op, _)| op.clone()).collect()
}

fn ms_to_ns(ms: f64) -> i64 {
    (ms * 1e6).round() as i64
}

/// Per-step samples of both runs for a rule, with how to compare them.
#[derive(Clone, Copy)]
struct Samples<'a> {
    baseline: &'a [i64],
    current: &'a [i64],
    statistic: Statistic,
    confidence: f64,
    min_steps: usize,
    /// Run-to-run noise, percent of the baseline figure, the change must reach. The interval
    /// answers whether the steps moved at all; the floor whether by more than runs of the same
    /// work differ, which per-step samples of one run cannot show.
    floor_pct: f64,
    /// The same floor in ns, for figures that are a part of the step (lost time per step): the
    /// change must also reach this share of the baseline step.
    floor_ns: f64,
}

impl<'a> Samples<'a> {
    fn of(
        baseline: &'a [i64],
        current: &'a [i64],
        statistic: Statistic,
        budget: &CheckBudget,
    ) -> Self {
        Self {
            baseline,
            current,
            statistic,
            confidence: budget.confidence,
            min_steps: budget.min_steps.max(1),
            floor_pct: 0.0,
            floor_ns: 0.0,
        }
    }

    /// The same samples held to a run-to-run noise floor.
    fn with_floor(mut self, floor_pct: f64) -> Self {
        self.floor_pct = floor_pct.max(0.0);
        self
    }

    /// The same samples held to the step's run-to-run noise floor, `floor_pct` of a
    /// `step_ns` step: a part of the step moves with the step's noise.
    fn with_step_floor(mut self, floor_pct: f64, step_ns: Option<i64>) -> Self {
        self.floor_pct = floor_pct.max(0.0);
        self.floor_ns = step_ns.map_or(0.0, |s| s as f64 * self.floor_pct / 100.0);
        self
    }

    /// The smallest change that clears the floor, for a rule whose baseline figure is `base`.
    fn floor_of(&self, base: i64) -> f64 {
        (base as f64 * self.floor_pct / 100.0).max(self.floor_ns)
    }
}

/// The run-to-run noise of the baseline's step time, percent: measured from several baseline
/// runs, else the budget's assumption.
fn step_noise_pct(baseline: &RunFigures, budget: &CheckBudget) -> f64 {
    let medians = &baseline.run_step_p50_ns;
    match (medians.iter().min(), medians.iter().max()) {
        (Some(&lo), Some(&hi)) if medians.len() >= 2 && lo > 0 => {
            ((hi - lo) as f64 * 100.0 / lo as f64).max(2.0)
        }
        _ => budget.noise_floor_pct,
    }
}

fn time_rule(
    rule: &str,
    what: &str,
    baseline: Option<i64>,
    current: Option<i64>,
    limit: TimeLimit,
    samples: Option<Samples<'_>>,
) -> RuleResult {
    let shown = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), human_ns);
    let mut result = RuleResult::passing(rule, shown(baseline), shown(current), limit.describe());
    let Some(cur) = current else {
        result.status = Status::Skipped;
        result.message = format!("{what}: the current run has no figure");
        return result;
    };
    if let Some(max) = limit.max_ms
        && cur > ms_to_ns(max)
    {
        result.status = Status::Fail;
        result.message = format!("{what} {} is over the ceiling of {max} ms", human_ns(cur));
        if let Some(base) = baseline {
            result.change = change_text(base, cur);
        }
        return result;
    }
    let Some(base) = baseline else {
        result.status = Status::Skipped;
        result.message = format!("{what}: the baseline has no figure");
        return result;
    };
    let delta = cur - base;
    result.change = change_text(base, cur);
    let over_abs = limit.max_increase_ms.is_none_or(|ms| delta > ms_to_ns(ms));
    let over_rel = limit.max_increase_pct.is_none_or(|pct| {
        if base > 0 {
            delta as f64 * 100.0 / base as f64 > pct
        } else {
            delta > 0
        }
    });
    let has_tolerance = limit.max_increase_ms.is_some() || limit.max_increase_pct.is_some();
    let shift = samples.as_ref().and_then(|s| {
        bootstrap_shift(s.baseline, s.current, s.statistic, s.confidence).map(|shift| (s, shift))
    });
    if let Some((s, shift)) = &shift {
        result.interval = format!(
            "[{}, {}] at {}%",
            signed_ns(shift.low.round() as i64),
            signed_ns(shift.high.round() as i64),
            s.confidence * 100.0
        );
    }
    if has_tolerance && delta > 0 && over_abs && over_rel {
        let past = format!(
            "{what} went from {} to {}: {}, past {}",
            human_ns(base),
            human_ns(cur),
            result.change,
            limit.describe()
        );
        match (&samples, &shift) {
            // Without per-step samples (a run without steps) the figures are all there is.
            (None, _) => {
                result.status = Status::Fail;
                result.message = past;
            }
            (Some(s), _) if s.baseline.len() < s.min_steps || s.current.len() < s.min_steps => {
                result.status = Status::Inconclusive;
                result.message = format!(
                    "{past}; too few steps to tell ({} and {}, {} needed on each side): profile more steps",
                    s.baseline.len(),
                    s.current.len(),
                    s.min_steps
                );
            }
            (Some(s), Some((_, shift)))
                if shift.significant_increase() && shift.point >= s.floor_of(base) =>
            {
                result.status = Status::Fail;
                result.message = format!("{past}, beyond noise ({})", result.interval);
            }
            (Some(s), _) => {
                result.status = Status::Inconclusive;
                let floor = if s.floor_ns > 0.0 {
                    format!(
                        ", or the change is under the run-to-run noise floor of {:.1}% of the \
                         step, {}",
                        s.floor_pct,
                        crate::units::human_ns(s.floor_ns.round() as i64)
                    )
                } else if s.floor_pct > 0.0 {
                    format!(
                        ", or the change is under the {:.1}% run-to-run noise floor",
                        s.floor_pct
                    )
                } else {
                    String::new()
                };
                result.message = format!(
                    "{past}, but within the noise ({} includes no change{floor}): profile more \
                     steps, or give several baseline runs",
                    result.interval
                );
            }
        }
    } else {
        result.message = format!(
            "{what} {} (baseline {}, {})",
            human_ns(cur),
            human_ns(base),
            result.change
        );
    }
    result
}

/// When the step time failed, names the ops whose self time per step grew the most, with their
/// share of the step's growth.
fn explain_step_time(rules: &mut [RuleResult], baseline: &RunFigures, current: &RunFigures) {
    let (Some(base), Some(cur)) = (baseline.step_p50_ns, current.step_p50_ns) else {
        return;
    };
    let growth = cur - base;
    if growth <= 0 {
        return;
    }
    let mut grown: Vec<(&String, i64)> = current
        .op_self_ns_per_step
        .iter()
        .map(|(op, &ns)| {
            (
                op,
                ns - baseline.op_self_ns_per_step.get(op).copied().unwrap_or(0),
            )
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    grown.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let named: Vec<String> = grown
        .iter()
        .take(3)
        .map(|(op, d)| {
            format!(
                "{op} {} ({:.0}% of it)",
                signed_ns(*d),
                *d as f64 * 100.0 / growth as f64
            )
        })
        .collect();
    if named.is_empty() {
        return;
    }
    for rule in rules
        .iter_mut()
        .filter(|r| r.rule.starts_with("step_time") && r.status == Status::Fail)
    {
        rule.message = format!("{}; grew most: {}", rule.message, named.join(", "));
    }
}

fn change_text(base: i64, cur: i64) -> String {
    let delta = cur - base;
    if base > 0 {
        format!(
            "{} ({:+.1}%)",
            signed_ns(delta),
            delta as f64 * 100.0 / base as f64
        )
    } else {
        signed_ns(delta)
    }
}

fn pct_rule(
    rule: &str,
    what: &str,
    baseline: Option<f64>,
    current: Option<f64>,
    limit: PctLimit,
) -> RuleResult {
    let shown = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}%"));
    let mut result = RuleResult::passing(rule, shown(baseline), shown(current), limit.describe());
    let (Some(base), Some(cur)) = (baseline, current) else {
        result.status = Status::Skipped;
        result.message = match (baseline, current) {
            (None, None) => format!("{what}: neither run has the figure"),
            (None, _) => format!("{what}: the baseline has no figure"),
            _ => format!("{what}: the current run has no figure"),
        };
        return result;
    };
    let drop = base - cur;
    result.change = format!("{:+.1} points", cur - base);
    if let Some(min) = limit.min_pct
        && cur < min
    {
        result.status = Status::Fail;
        result.message = format!("{what} {cur:.1}% is under the floor of {min}%");
    } else if let Some(max_drop) = limit.max_drop_points
        && drop > max_drop
    {
        result.status = Status::Fail;
        result.message = format!(
            "{what} fell from {base:.1}% to {cur:.1}% ({drop:.1} points), past -{max_drop} points"
        );
    } else {
        result.message = format!("{what} {cur:.1}% (baseline {base:.1}%)");
    }
    result
}

/// A spread that may not grow past `limit` (skipped where a run has a single rank).
fn spread_rule(
    rule: &str,
    baseline: Option<f64>,
    current: Option<f64>,
    limit: SpreadLimit,
) -> RuleResult {
    let shown = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}%"));
    let describe = [
        limit.max_increase_points.map(|p| format!("+{p} points")),
        limit.max_pct.map(|p| format!("≤ {p}%")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ");
    let mut result = RuleResult::passing(rule, shown(baseline), shown(current), describe);
    let (Some(base), Some(cur)) = (baseline, current) else {
        result.status = Status::Skipped;
        result.message = "rank spread: needs several ranks on both sides".to_owned();
        return result;
    };
    result.change = format!("{:+.1} points", cur - base);
    if let Some(max) = limit.max_pct
        && cur > max
    {
        result.status = Status::Fail;
        result.message =
            format!("the ranks' compute spread {cur:.1}% is over the ceiling of {max}%");
    } else if let Some(rise) = limit.max_increase_points
        && cur - base > rise
    {
        result.status = Status::Fail;
        result.message = format!(
            "the ranks' compute spread grew from {base:.1}% to {cur:.1}% of the step (+{:.1} points), past +{rise} points: a rank computes longer than the others",
            cur - base
        );
    } else {
        result.message =
            format!("the ranks' compute spread {cur:.1}% of the step (baseline {base:.1}%)");
    }
    result
}

fn new_findings_rule(
    kind: FindingKind,
    baseline: &RunFigures,
    current: &RunFigures,
    budget: &CheckBudget,
) -> RuleResult {
    let of_kind = |run: &RunFigures| run.findings.keys().filter(|k| k.kind == kind).count();
    let new: Vec<NewFinding> = current
        .findings
        .iter()
        .filter(|(key, _)| key.kind == kind && !baseline.findings.contains_key(*key))
        .map(|(key, group)| NewFinding {
            key: key.clone(),
            title: group.title.clone(),
            lost_ns: group.lost_ns,
            findings: group.findings,
        })
        .collect();
    let allowed = budget.allow_new.contains(&kind);
    let status = if new.is_empty() || allowed {
        Status::Pass
    } else {
        Status::Fail
    };
    let message = if new.is_empty() {
        format!("no new {kind} findings")
    } else {
        let sites: Vec<String> = new.iter().map(|n| n.key.to_string()).collect();
        let allowed_note = if allowed {
            " (allowed by the budget)"
        } else {
            ""
        };
        format!("new {kind}: {}{allowed_note}", sites.join("; "))
    };
    RuleResult {
        rule: format!("new_findings.{kind}"),
        status,
        baseline: format!("{} sites", of_kind(baseline)),
        current: format!("{} sites", of_kind(current)),
        change: format!("{} new", new.len()),
        limit: if allowed {
            "allowed".to_owned()
        } else {
            "none new".to_owned()
        },
        interval: String::new(),
        message,
        new_findings: new,
    }
}

#[cfg(test)]
mod tests;
