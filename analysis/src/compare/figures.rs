//! The figures two runs are compared on, taken from a [`Report`] (built from a trace or read back
//! from a saved `steplens.report/1` JSON file, which gives the same figures).
//!
//! Step figures are medians over the measured steps: the first `warmup_steps` steps of every
//! input are left out, since they carry compilation, allocator growth and cold caches. Findings
//! on warm-up steps are left out for the same reason; findings not tied to a step always count.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::finding::{FindingKind, Severity};
use crate::ops::op_label;
use crate::report::{Finding, Report};
use crate::stats::median;

/// A finding's identity across runs: its kind and where it happens (call site, else the ops
/// involved, else the track). A new `loss.item()` at another line is a new key even when the
/// time barely moves.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct FindingKey {
    /// Finding kind (`sync_point`, …).
    pub kind: FindingKind,
    /// Call site, ops or track; empty when the finding names none.
    pub site: String,
}

impl FindingKey {
    /// The key of a finding.
    #[must_use]
    pub fn of(finding: &Finding) -> Self {
        let site = if let Some(site) = &finding.call_site {
            site.clone()
        } else if !finding.ops.is_empty() {
            finding.ops.join(" + ")
        } else {
            finding.track.clone().unwrap_or_default()
        };
        Self {
            kind: finding.kind,
            site,
        }
    }
}

impl std::fmt::Display for FindingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.site.is_empty() {
            f.write_str(self.kind.as_str())
        } else {
            write!(f, "{} @ {}", self.kind, self.site)
        }
    }
}

/// Findings of one key in one run (measured steps only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingGroup {
    /// How many findings (one per step where the detector reports per step).
    pub findings: u64,
    /// Occurrences the findings count (calls, recompiles, …).
    pub count: u64,
    /// Lost time, ns.
    pub lost_ns: i64,
    /// Title of the first finding, for the verdict.
    pub title: String,
    /// Severity of the worst finding.
    pub severity: Severity,
}

/// The figures of one run that `check` and `diff` compare.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFigures {
    /// Steps in the run.
    pub steps_total: usize,
    /// Steps compared (after the warm-up).
    pub steps_measured: usize,
    /// Warm-up steps left out.
    pub warmup_skipped: usize,
    /// Median step time over the measured steps, ns.
    pub step_p50_ns: Option<i64>,
    /// Mean step time over the measured steps, ns.
    pub step_mean_ns: Option<i64>,
    /// Fastest and slowest measured step, ns.
    pub step_min_ns: Option<i64>,
    /// Slowest measured step, ns.
    pub step_max_ns: Option<i64>,
    /// Median host busy time per step, ns.
    pub host_busy_p50_ns: Option<i64>,
    /// Median data-loader time per step, ns.
    pub dataloader_p50_ns: Option<i64>,
    /// Median of the per-step device busy share, percent (null without a device).
    pub device_busy_pct: Option<f64>,
    /// Median of the per-step busy share of each engine class, percent. Without steps, the
    /// whole-trace utilization.
    pub engine_pct: BTreeMap<String, f64>,
    /// Findings by key (measured steps only); a list of `{kind, site, …}` in JSON.
    #[serde(serialize_with = "findings_as_list")]
    pub findings: BTreeMap<FindingKey, FindingGroup>,
    /// Lost time per measured step by finding kind, ns (whole-run totals without steps).
    pub lost_ns_per_step: BTreeMap<FindingKind, i64>,
    /// Op self time per step by op name (host and device ops apart), ns, over the whole trace.
    /// Self time, so a slower kernel fails one rule rather than every op wrapped around it.
    pub op_self_ns_per_step: BTreeMap<String, i64>,
    /// Duration of each measured step, ns: the samples the step-time rules compare.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub step_samples_ns: Vec<i64>,
    /// Lost time of each measured step by finding kind, ns (0 in a step without the kind).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub lost_samples_ns: BTreeMap<FindingKind, Vec<i64>>,
    /// Self time of each measured step by op (the ops the report samples per step, see
    /// [`crate::ops::OPS_PER_STEP`]), ns: the samples the op rules compare. Absent in reports
    /// saved before they were written.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub op_samples_ns: BTreeMap<String, Vec<i64>>,
    /// Median step of each run these figures pool (one entry for a single run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub run_step_p50_ns: Vec<i64>,
    /// Several ranks: the spread of their compute per step (slowest − fastest rank's median, as
    /// a share of the median step), percentage points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_spread_pct: Option<f64>,
    /// Several ranks: the median over ranks of their exposed communication per step, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposed_comm_ns: Option<i64>,
}

/// The rank figures of a report with several ranks: (spread of compute, exposed comm).
fn rank_figures(report: &Report) -> (Option<f64>, Option<i64>) {
    // One rank's trace has a rank table too, but a rank's exposed communication is judged against
    // the other ranks of its run: a run of one keeps the rules off (docs/check.md).
    let Some(ranks) = report.ranks.as_ref().filter(|r| r.ranks.len() >= 2) else {
        return (None, None);
    };
    let compute: Vec<i64> = ranks
        .ranks
        .iter()
        .filter_map(|r| r.compute_p50_ns)
        .collect();
    let step = median(ranks.ranks.iter().filter_map(|r| r.step_p50_ns).collect());
    let spread = match (compute.iter().max(), compute.iter().min(), step) {
        (Some(&hi), Some(&lo), Some(step)) if compute.len() >= 2 && step > 0 => {
            Some(crate::units::round2((hi - lo) as f64 * 100.0 / step as f64))
        }
        _ => None,
    };
    let exposed = median(
        ranks
            .ranks
            .iter()
            .filter_map(|r| r.exposed_comm_p50_ns)
            .collect(),
    );
    (spread, exposed)
}

impl RunFigures {
    /// The figures of a report, leaving out the first `warmup_steps` steps of each input.
    #[must_use]
    pub fn of(report: &Report, warmup_steps: usize) -> Self {
        let mut per_source: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, step) in report.steps.iter().enumerate() {
            per_source.entry(step.source).or_default().push(i);
        }
        let mut measured: Vec<usize> = Vec::new();
        let mut warmup_names: Vec<(u16, &str)> = Vec::new();
        for indices in per_source.values_mut() {
            indices.sort_by_key(|&i| report.steps[i].start_ns);
            // A run shorter than its warm-up is compared on all its steps rather than none.
            let skip = if indices.len() > warmup_steps {
                warmup_steps
            } else {
                0
            };
            for (n, &i) in indices.iter().enumerate() {
                if n < skip {
                    warmup_names.push((report.steps[i].source, report.steps[i].name.as_str()));
                } else {
                    measured.push(i);
                }
            }
        }
        let steps: Vec<_> = measured.iter().map(|&i| &report.steps[i]).collect();
        let durations: Vec<i64> = steps.iter().map(|s| s.dur_ns).collect();
        let median_of = |values: Vec<i64>| median(values);
        let share = |part: i64, whole: i64| (whole > 0).then(|| part as f64 * 100.0 / whole as f64);
        let device_busy_pct =
            if steps.iter().all(|s| s.device_busy_ns.is_some()) && !steps.is_empty() {
                crate::stats::median_f64(
                    steps
                        .iter()
                        .filter_map(|s| share(s.device_busy_ns.unwrap_or(0), s.dur_ns))
                        .collect(),
                )
            } else if steps.is_empty() {
                report.summary.device_busy_pct
            } else {
                None
            };
        let mut engine_pct = BTreeMap::new();
        if steps.is_empty() {
            for engine in &report.engines {
                engine_pct.insert(engine.class.clone(), engine.busy_pct);
            }
        } else {
            let classes: std::collections::BTreeSet<&String> =
                steps.iter().flat_map(|s| s.engines.keys()).collect();
            for class in classes {
                let shares = steps
                    .iter()
                    .filter_map(|s| share(s.engines.get(class).copied().unwrap_or(0), s.dur_ns))
                    .collect();
                if let Some(pct) = crate::stats::median_f64(shares) {
                    engine_pct.insert(class.clone(), crate::units::round2(pct));
                }
            }
        }

        let is_warmup = |f: &Finding| {
            f.step.as_deref().is_some_and(|name| {
                warmup_names.iter().any(|&(_, warm)| warm == name)
                    && !measured.iter().any(|&i| report.steps[i].name == name)
            })
        };
        let mut findings: BTreeMap<FindingKey, FindingGroup> = BTreeMap::new();
        let mut lost_by_kind: BTreeMap<FindingKind, i64> = BTreeMap::new();
        let mut lost_samples_ns: BTreeMap<FindingKind, Vec<i64>> = BTreeMap::new();
        for finding in report.findings.iter().filter(|f| !is_warmup(f)) {
            let group = findings
                .entry(FindingKey::of(finding))
                .or_insert_with(|| FindingGroup {
                    findings: 0,
                    count: 0,
                    lost_ns: 0,
                    title: finding.title.clone(),
                    severity: finding.severity,
                });
            group.findings += 1;
            group.count += finding.count;
            group.lost_ns += finding.lost_ns;
            group.severity = group.severity.max(finding.severity);
            *lost_by_kind.entry(finding.kind).or_insert(0) += finding.lost_ns;
            // Per measured step and kind, for the statistical rules.
            if let Some(at) = finding
                .step
                .as_deref()
                .and_then(|name| steps.iter().position(|s| s.name == name))
            {
                lost_samples_ns
                    .entry(finding.kind)
                    .or_insert_with(|| vec![0; steps.len()])[at] += finding.lost_ns;
            }
        }
        let per_step = steps.len().max(1) as i64;
        let lost_ns_per_step = lost_by_kind
            .into_iter()
            .map(|(kind, ns)| (kind, ns / per_step))
            .collect();
        let all_steps = report.steps.len().max(1) as i64;
        let mut op_self_ns_per_step: BTreeMap<String, i64> = BTreeMap::new();
        for op in &report.ops {
            *op_self_ns_per_step
                .entry(op_label(&op.name, &op.track_kind))
                .or_insert(0) += op.self_ns / all_steps;
        }

        // Only ops sampled in every measured step: a partial series would compare apples with
        // gaps.
        let op_samples_ns = steps
            .first()
            .map(|first| {
                first
                    .op_self_ns
                    .keys()
                    .filter(|op| steps.iter().all(|s| s.op_self_ns.contains_key(*op)))
                    .map(|op| {
                        let samples = steps
                            .iter()
                            .map(|s| s.op_self_ns.get(op).copied().unwrap_or(0))
                            .collect();
                        (op.clone(), samples)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let (rank_spread_pct, exposed_comm_ns) = rank_figures(report);
        Self {
            steps_total: report.steps.len(),
            steps_measured: steps.len(),
            warmup_skipped: report.steps.len() - steps.len(),
            step_p50_ns: median_of(durations.clone()),
            step_mean_ns: (!durations.is_empty())
                .then(|| durations.iter().sum::<i64>() / durations.len() as i64),
            step_min_ns: durations.iter().min().copied(),
            step_max_ns: durations.iter().max().copied(),
            host_busy_p50_ns: median_of(steps.iter().map(|s| s.host_busy_ns).collect()),
            dataloader_p50_ns: median_of(steps.iter().map(|s| s.dataloader_ns).collect()),
            device_busy_pct: device_busy_pct.map(crate::units::round2),
            engine_pct,
            findings,
            lost_ns_per_step,
            op_self_ns_per_step,
            run_step_p50_ns: median(durations.clone()).into_iter().collect(),
            step_samples_ns: durations,
            lost_samples_ns,
            op_samples_ns,
            rank_spread_pct,
            exposed_comm_ns,
        }
    }

    /// Several runs of the same work as one side: their steps pooled (medians and means over
    /// all of them), findings seen in any run, lost and op time per step averaged over runs, and
    /// each run's median kept to measure the run-to-run noise.
    #[must_use]
    pub fn pooled(runs: &[Self]) -> Option<Self> {
        let (first, rest) = runs.split_first()?;
        if rest.is_empty() {
            return Some(first.clone());
        }
        let mut out = first.clone();
        for run in rest {
            out.steps_total += run.steps_total;
            out.steps_measured += run.steps_measured;
            out.warmup_skipped += run.warmup_skipped;
            out.step_samples_ns.extend(&run.step_samples_ns);
            out.run_step_p50_ns.extend(&run.run_step_p50_ns);
            for (key, group) in &run.findings {
                out.findings
                    .entry(key.clone())
                    .or_insert_with(|| group.clone());
            }
        }
        let kinds: std::collections::BTreeSet<FindingKind> = runs
            .iter()
            .flat_map(|r| r.lost_samples_ns.keys().copied())
            .collect();
        out.lost_samples_ns = kinds
            .into_iter()
            .map(|kind| {
                let pooled = runs
                    .iter()
                    .flat_map(|r| {
                        r.lost_samples_ns
                            .get(&kind)
                            .cloned()
                            .unwrap_or_else(|| vec![0; r.step_samples_ns.len()])
                    })
                    .collect();
                (kind, pooled)
            })
            .collect();
        // An op sampled in some runs only has no pooled series: its rule uses the averages.
        out.op_samples_ns = first
            .op_samples_ns
            .keys()
            .filter(|op| rest.iter().all(|r| r.op_samples_ns.contains_key(*op)))
            .map(|op| {
                let pooled = runs
                    .iter()
                    .flat_map(|r| r.op_samples_ns.get(op).into_iter().flatten().copied())
                    .collect();
                (op.clone(), pooled)
            })
            .collect();
        out.rank_spread_pct =
            crate::stats::median_f64(runs.iter().filter_map(|r| r.rank_spread_pct).collect());
        out.exposed_comm_ns = median(runs.iter().filter_map(|r| r.exposed_comm_ns).collect());
        out.lost_ns_per_step = average(runs, |r| &r.lost_ns_per_step);
        out.op_self_ns_per_step = average(runs, |r| &r.op_self_ns_per_step);
        let samples = &out.step_samples_ns;
        out.step_p50_ns = median(samples.clone());
        out.step_mean_ns =
            (!samples.is_empty()).then(|| samples.iter().sum::<i64>() / samples.len() as i64);
        out.step_min_ns = samples.iter().min().copied();
        out.step_max_ns = samples.iter().max().copied();
        Some(out)
    }
}

/// JSON objects need string keys: the findings map is written as a list of key + figures.
fn findings_as_list<S: serde::Serializer>(
    map: &BTreeMap<FindingKey, FindingGroup>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Row<'a> {
        #[serde(flatten)]
        key: &'a FindingKey,
        #[serde(flatten)]
        group: &'a FindingGroup,
    }
    serializer.collect_seq(map.iter().map(|(key, group)| Row { key, group }))
}

/// Per key, the mean over `runs` of a per-run figure (0 in a run without the key).
fn average<K: Ord + Clone>(
    runs: &[RunFigures],
    get: impl Fn(&RunFigures) -> &BTreeMap<K, i64>,
) -> BTreeMap<K, i64> {
    let n = runs.len().max(1) as i64;
    let mut sum: BTreeMap<K, i64> = BTreeMap::new();
    for run in runs {
        for (k, v) in get(run) {
            *sum.entry(k.clone()).or_insert(0) += v;
        }
    }
    sum.into_iter().map(|(k, v)| (k, v / n)).collect()
}
