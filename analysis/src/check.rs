//! The regression check: a run's figures against a baseline's, rule by rule, under a budget.
//!
//! Every rule is one comparison with a verdict (pass, fail, skipped) and a message that names the
//! figures, so CI output (JUnit test cases, annotations, a Markdown table) is one row per rule.
//! Time rules regress only when the increase is past *both* tolerances that are set: the relative
//! one keeps large steps from failing on noise, the absolute one keeps tiny steps from failing on
//! a few microseconds. A ceiling (`max_ms`) fails on its own.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub use crate::budget::{CheckBudget, KindKey, PctLimit, SpreadLimit, TimeLimit};
use crate::compare::{FindingKey, RunFigures};
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
            Some(Samples::of(
                &base_samples,
                &cur_samples,
                Statistic::Mean,
                budget,
            )),
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
        }
    }

    /// The same samples held to a run-to-run noise floor.
    fn with_floor(mut self, floor_pct: f64) -> Self {
        self.floor_pct = floor_pct.max(0.0);
        self
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
                if shift.significant_increase()
                    && shift.point >= base as f64 * s.floor_pct / 100.0 =>
            {
                result.status = Status::Fail;
                result.message = format!("{past}, beyond noise ({})", result.interval);
            }
            (Some(s), _) => {
                result.status = Status::Inconclusive;
                let floor = if s.floor_pct > 0.0 {
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
mod tests {
    use super::*;

    fn run(step_ns: i64) -> RunFigures {
        RunFigures {
            steps_total: 4,
            steps_measured: 3,
            warmup_skipped: 1,
            step_p50_ns: Some(step_ns),
            step_mean_ns: Some(step_ns),
            step_min_ns: Some(step_ns),
            step_max_ns: Some(step_ns),
            host_busy_p50_ns: Some(step_ns / 2),
            dataloader_p50_ns: Some(0),
            device_busy_pct: None,
            engine_pct: BTreeMap::new(),
            findings: BTreeMap::new(),
            lost_ns_per_step: BTreeMap::new(),
            op_self_ns_per_step: BTreeMap::new(),
            step_samples_ns: vec![step_ns; 3],
            lost_samples_ns: BTreeMap::new(),
            op_samples_ns: BTreeMap::new(),
            run_step_p50_ns: vec![step_ns],
            rank_spread_pct: None,
            exposed_comm_ns: None,
        }
    }

    #[test]
    fn rank_rules_skip_one_rank_and_hold_the_spread() {
        let base = run(10_000_000);
        let outcome = check(&base, &base, &CheckBudget::default());
        assert_eq!(rule(&outcome, "rank_spread").status, Status::Skipped);
        let mut spread = base.clone();
        spread.rank_spread_pct = Some(8.0);
        let mut wider = base.clone();
        wider.rank_spread_pct = Some(30.0);
        let outcome = check(&spread, &wider, &CheckBudget::default());
        assert_eq!(rule(&outcome, "rank_spread").status, Status::Fail);
        let outcome = check(&spread, &spread, &CheckBudget::default());
        assert_eq!(rule(&outcome, "rank_spread").status, Status::Pass);
        // Exposed comm up 0.6 ms on a 10 ms step: past +10 % and +0.5 ms, but within the 10 %
        // run-to-run noise floor of one baseline run: inconclusive, not a failure.
        let mut exposed = base.clone();
        exposed.exposed_comm_ns = Some(2_000_000);
        let mut more = base;
        more.exposed_comm_ns = Some(2_600_000);
        let outcome = check(&exposed, &more, &CheckBudget::default());
        assert_eq!(rule(&outcome, "exposed_comm").status, Status::Inconclusive);
        more.exposed_comm_ns = Some(4_000_000);
        let outcome = check(&exposed, &more, &CheckBudget::default());
        assert_eq!(rule(&outcome, "exposed_comm").status, Status::Fail);
    }

    /// A run whose steps are `ms` apart from one another (noisy), median `median_ms`.
    fn noisy(median_ms: f64, spread_ms: f64, steps: usize) -> RunFigures {
        let samples: Vec<i64> = (0..steps)
            .map(|i| {
                let offset = (i as f64 / (steps - 1).max(1) as f64 - 0.5) * 2.0 * spread_ms;
                ((median_ms + offset) * 1e6) as i64
            })
            .collect();
        let mut figures = run((median_ms * 1e6) as i64);
        figures.step_samples_ns = samples;
        figures.steps_measured = steps;
        figures
    }

    #[test]
    fn a_change_within_the_noise_is_inconclusive_and_does_not_fail() {
        // +10 % on the median, but steps spread ±50 %: the interval reaches zero.
        let outcome = check(
            &noisy(10.0, 5.0, 6),
            &noisy(11.0, 5.0, 6),
            &CheckBudget::default(),
        );
        let r = rule(&outcome, "step_time");
        assert_eq!(r.status, Status::Inconclusive, "{}", r.message);
        assert!(r.message.contains("profile more steps"), "{}", r.message);
        assert!(r.interval.ends_with("at 99%"), "{}", r.interval);
        assert!(outcome.passed);
        // +20 % with steps ±2 % apart is a regression, past the 10 % run-to-run noise floor.
        let outcome = check(
            &noisy(10.0, 0.2, 6),
            &noisy(12.0, 0.2, 6),
            &CheckBudget::default(),
        );
        assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
        // +10 %, the smallest regression the gate must catch with one baseline run.
        let outcome = check(
            &noisy(10.0, 0.2, 6),
            &noisy(11.0, 0.2, 6),
            &CheckBudget::default(),
        );
        assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
        // +7 % is within the assumed run-to-run noise of a single baseline run …
        let outcome = check(
            &noisy(10.0, 0.2, 6),
            &noisy(10.7, 0.2, 6),
            &CheckBudget::default(),
        );
        let r = rule(&outcome, "step_time");
        assert_eq!(r.status, Status::Inconclusive, "{}", r.message);
        assert!(
            r.message.contains("8.0% run-to-run noise floor"),
            "{}",
            r.message
        );
        // … but not when several baseline runs agree within 1 %.
        let mut runs = vec![
            noisy(10.0, 0.2, 6),
            noisy(10.1, 0.2, 6),
            noisy(10.05, 0.2, 6),
        ];
        for r in &mut runs[1..] {
            r.findings.clear();
        }
        let pooled = RunFigures::pooled(&runs).unwrap();
        assert_eq!(pooled.run_step_p50_ns.len(), 3);
        assert_eq!(pooled.step_samples_ns.len(), 18);
        let outcome = check(&pooled, &noisy(10.8, 0.2, 6), &CheckBudget::default());
        assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
    }

    #[test]
    fn too_few_steps_are_inconclusive() {
        let outcome = check(
            &noisy(10.0, 0.1, 2),
            &noisy(12.0, 0.1, 2),
            &CheckBudget::default(),
        );
        let r = rule(&outcome, "step_time");
        assert_eq!(r.status, Status::Inconclusive);
        assert!(r.message.contains("too few steps"), "{}", r.message);
    }

    #[test]
    fn op_rules_warn_unless_the_budget_makes_them_fail_and_explain_a_slower_step() {
        let mut base = run(10_000_000);
        let mut cur = run(12_000_000);
        base.op_self_ns_per_step
            .insert("aten::mm".into(), 4_000_000);
        cur.op_self_ns_per_step.insert("aten::mm".into(), 5_500_000);
        let outcome = check(&base, &cur, &CheckBudget::default());
        assert_eq!(rule(&outcome, "op_self_time.aten::mm").status, Status::Warn);
        let step = rule(&outcome, "step_time");
        assert_eq!(step.status, Status::Fail);
        assert!(
            step.message
                .contains("grew most: aten::mm +1.50 ms (75% of it)"),
            "{}",
            step.message
        );
        let strict = CheckBudget {
            fail_on_op_rules: true,
            ..CheckBudget::default()
        };
        let outcome = check(&base, &cur, &strict);
        assert_eq!(rule(&outcome, "op_self_time.aten::mm").status, Status::Fail);
    }

    #[test]
    fn op_rules_with_per_step_samples_fail_only_when_the_change_is_significant() {
        let strict = CheckBudget {
            fail_on_op_rules: true,
            ..CheckBudget::default()
        };
        let with_mm = |samples: Vec<i64>| {
            let mut figures = noisy(10.0, 0.2, samples.len());
            figures
                .op_self_ns_per_step
                .insert("aten::mm".into(), samples.iter().sum::<i64>() / 6);
            figures.op_samples_ns.insert("aten::mm".into(), samples);
            figures
        };
        // 2 ms a step, steady, against 3 ms a step: significant, past +20 % and +0.2 ms.
        let base = with_mm(vec![
            2_000_000, 2_050_000, 1_950_000, 2_000_000, 2_020_000, 1_980_000,
        ]);
        let cur = with_mm(vec![
            3_000_000, 3_050_000, 2_950_000, 3_000_000, 3_020_000, 2_980_000,
        ]);
        let r = rule(&check(&base, &cur, &strict), "op_self_time.aten::mm").clone();
        assert_eq!(r.status, Status::Fail, "{}", r.message);
        assert!(r.interval.starts_with("[+"), "{}", r.interval);
        // The same +50 % in the mean, from one step of six that took 5 ms more: within the noise.
        let spiky = with_mm(vec![
            2_000_000, 2_050_000, 1_950_000, 7_000_000, 2_020_000, 1_980_000,
        ]);
        let r = rule(&check(&base, &spiky, &strict), "op_self_time.aten::mm").clone();
        assert_eq!(r.status, Status::Inconclusive, "{}", r.message);
    }

    fn rule<'a>(outcome: &'a CheckOutcome, name: &str) -> &'a RuleResult {
        outcome
            .rules
            .iter()
            .find(|r| r.rule == name)
            .unwrap_or_else(|| panic!("no rule {name}"))
    }

    #[test]
    fn a_run_against_itself_passes() {
        let outcome = check(&run(10_000_000), &run(10_000_000), &CheckBudget::default());
        assert!(outcome.passed);
        assert_eq!(rule(&outcome, "device_busy").status, Status::Skipped);
    }

    #[test]
    fn both_tolerances_must_be_exceeded() {
        // +5 % and +0.1 ms; no run-to-run noise assumed, to test the tolerances alone.
        let budget = CheckBudget {
            noise_floor_pct: 0.0,
            ..CheckBudget::default()
        };
        // +20 % but only 20 µs: noise on a tiny step.
        let tiny = check(&run(100_000), &run(120_000), &budget);
        assert_eq!(rule(&tiny, "step_time").status, Status::Pass);
        // +1 ms but only 1 %: noise on a long step.
        let long = check(&run(100_000_000), &run(101_000_000), &budget);
        assert_eq!(rule(&long, "step_time").status, Status::Pass);
        // +10 % and +1 ms.
        let slower = check(&run(10_000_000), &run(11_000_000), &budget);
        assert_eq!(rule(&slower, "step_time").status, Status::Fail);
        assert!(!slower.passed);
        assert!(
            rule(&slower, "step_time")
                .message
                .contains("10.0 ms to 11.0 ms")
        );
    }

    #[test]
    fn a_ceiling_fails_on_its_own() {
        let budget = CheckBudget {
            step_time: TimeLimit {
                max_ms: Some(5.0),
                ..TimeLimit::default()
            },
            ..CheckBudget::default()
        };
        let outcome = check(&run(6_000_000), &run(6_000_000), &budget);
        assert_eq!(rule(&outcome, "step_time").status, Status::Fail);
    }

    #[test]
    fn a_new_call_site_fails_unless_allowed() {
        let base = run(10_000_000);
        let mut cur = run(10_000_000);
        cur.findings.insert(
            FindingKey {
                kind: FindingKind::SyncPoint,
                site: "train.py:43".into(),
            },
            crate::compare::FindingGroup {
                findings: 3,
                count: 3,
                lost_ns: 3_000,
                title: "loss.item()".into(),
                severity: crate::finding::Severity::Info,
            },
        );
        cur.lost_ns_per_step.insert(FindingKind::SyncPoint, 1_000);
        let outcome = check(&base, &cur, &CheckBudget::default());
        let new = rule(&outcome, "new_findings.sync_point");
        assert_eq!(new.status, Status::Fail);
        assert!(new.message.contains("sync_point @ train.py:43"));
        // 1 µs per step is inside the lost-time tolerance: only the new site fails.
        assert_eq!(rule(&outcome, "lost_time.sync_point").status, Status::Pass);

        let allowing = CheckBudget {
            allow_new: vec![FindingKind::SyncPoint],
            ..CheckBudget::default()
        };
        assert!(check(&base, &cur, &allowing).passed);
    }

    #[test]
    fn utilization_drops_are_in_points() {
        let mut base = run(10_000_000);
        base.engine_pct.insert("MME".into(), 60.0);
        let mut cur = run(10_000_000);
        cur.engine_pct.insert("MME".into(), 45.0);
        let outcome = check(&base, &cur, &CheckBudget::default());
        let mme = rule(&outcome, "engine_utilization.MME");
        assert_eq!(mme.status, Status::Fail);
        assert_eq!(mme.change, "-15.0 points");
    }

    #[test]
    fn per_name_limits_override_the_default() {
        // The CLI reads the budget from TOML; the JSON form has the same shape.
        let budget: CheckBudget = serde_json::from_value(serde_json::json!({
            "warmup_steps": 2,
            "lost_time": {
                "default": { "max_increase_ms": 2.0 },
                "sync_point": { "max_increase_pct": 1.0 }
            }
        }))
        .unwrap();
        assert_eq!(budget.warmup_steps, 2);
        let limit = budget.lost_limit(FindingKind::SyncPoint);
        assert_eq!(limit.max_increase_ms, Some(2.0));
        assert_eq!(limit.max_increase_pct, Some(1.0));
        assert_eq!(
            budget.lost_limit(FindingKind::Recompile).max_increase_pct,
            Some(10.0)
        );
        assert_eq!(
            budget.lost_limit(FindingKind::Recompile).max_increase_ms,
            Some(2.0)
        );
    }

    #[test]
    fn unknown_budget_keys_are_rejected() {
        let typo = serde_json::json!({ "step_time": { "max_increase_precent": 5.0 } });
        assert!(serde_json::from_value::<CheckBudget>(typo).is_err());
    }
}
