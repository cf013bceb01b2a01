//! The `steplens.report/1` report: sources, device, per-step breakdown, findings, op summary
//! and the top-level summary, as documented in `docs/report-schema.md`.
//!
//! These types are the machine contract: fields are only ever added, never renamed or removed,
//! within one schema version.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use steplens_ingest::model::Timeline;

use crate::busy::{Channels, channels};
use crate::context::Context;
use crate::detect::run_all;
use crate::engines::{EngineStats, engine_utilization};
use crate::finding::FindingKind;
pub use crate::finding::{Cost, Finding};
use crate::idle::{StreamIdle, idle_breakdown_with};
use crate::ops::OpStats;
use crate::steps::{StepStats, step_breakdown_with};
use crate::thresholds::Thresholds;
use rustc_hash::FxHashMap;

/// Schema id written in every report.
pub const SCHEMA: &str = "steplens.report/1";

/// One input of the report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceReport {
    /// Path as given.
    pub path: String,
    /// Format id (`kineto-json`, …).
    pub format: steplens_ingest::FormatId,
    /// Trace events read.
    pub events: u64,
    /// Size of the (decompressed) input, bytes.
    pub bytes: u64,
    /// Rank from `distributedInfo`, when present.
    pub rank: Option<i64>,
    /// What was repaired or dropped while reading.
    pub warnings: Vec<WarningReport>,
}

/// A load warning.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WarningReport {
    /// Stable code (`damaged`, `negative_duration`, `overlap`, …).
    pub code: String,
    /// Byte offset in the input, when the warning is about a place.
    pub offset: Option<u64>,
    /// One line for humans.
    pub message: String,
}

/// The device.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceReport {
    /// `cuda`, `rocm`, `mtia`, `hpu` or `cpu`.
    pub kind: String,
    /// Device model, when recorded.
    pub name: Option<String>,
    /// Devices with activity (or properties) in the trace.
    pub count: usize,
}

/// The top-level summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Number of steps.
    pub steps: usize,
    /// Mean step duration, ns (null without steps).
    pub mean_step_ns: Option<i64>,
    /// Median step duration, ns (null without steps).
    pub p50_step_ns: Option<i64>,
    /// Share of step time (or of the trace, without steps) with a device engine busy, percent;
    /// null without a device.
    pub device_busy_pct: Option<f64>,
    /// Time covered by the trace's slices, ns.
    pub trace_ns: i64,
    /// Findings per kind.
    pub findings_by_kind: BTreeMap<FindingKind, u64>,
    /// Lost time per finding kind, ns.
    pub lost_ns_by_kind: BTreeMap<FindingKind, i64>,
    /// Gaudi: time the MME and at least one TPC were busy together, ns (null without both).
    pub mme_tpc_overlap_ns: Option<i64>,
    /// Lost time of the findings that belong to a step, as a share of all steps' time, percent
    /// (null without steps). Within a step no nanosecond is lost to two findings, so this is at
    /// most 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_pct_of_steps: Option<f64>,
    /// What fixing the findings of each kind saves, ns (their `saving_ns` added up).
    #[serde(default)]
    pub saving_ns_by_kind: BTreeMap<FindingKind, i64>,
    /// What fixing every finding saves, as a share of all steps' time, percent (null without
    /// steps). Savings within a step have one owner per nanosecond, so this is at most 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saving_pct_of_steps: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Inputs.
    pub sources: Vec<SourceReport>,
    /// Device.
    pub device: DeviceReport,
    /// Per-step breakdown, in time order.
    pub steps: Vec<StepStats>,
    /// Findings, ranked by `saving_ns`, then `lost_ns`: one per step (and rank) it occurs in.
    pub findings: Vec<Finding>,
    /// The findings grouped by kind and place (call site, else ops, else track), ranked by
    /// their total saving: what the text, Markdown and HTML reports list. Members are indices
    /// into `findings`.
    #[serde(default)]
    pub finding_groups: Vec<crate::finding::FindingGroup>,
    /// Op summary, by total time.
    pub ops: Vec<OpStats>,
    /// Device idle time per stream (HTA's host wait / kernel wait / other split).
    pub idle: Vec<StreamIdle>,
    /// Utilization per engine class over the whole trace.
    pub engines: Vec<EngineStats>,
    /// Busy share of each engine class over the trace in equal bins (the HTML page's chart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<crate::engines::Utilization>,
    /// Memory per device, from `[memory]` events (`profile_memory=True`); absent without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<crate::memory::DeviceMemory>,
    /// The critical path of the whole trace, when it has no steps (each step has its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_path: Option<crate::critical_path::CriticalPath>,
    /// Whether the profiler's own cost distorts the trace's timings (and so the savings): its
    /// estimated share of a step and the steps' drift; absent without steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiler_overhead: Option<crate::profiler_overhead::ProfilerOverhead>,
    /// The ranks of a run with collectives (one rank's trace included); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<crate::ranks::RanksReport>,
    /// The TensorBoard plugin's Overview: its steps (stretched to their device work) with the
    /// time split, and the mean step, per input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overview: Option<crate::tensorboard::Overview>,
    /// The plugin's GPU summary, per input and device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_summary: Vec<crate::tensorboard::GpuSummary>,
    /// The plugin's operator table, per op name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<crate::tensorboard::OperatorRow>,
    /// The operator table per op name and input shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators_by_shape: Vec<crate::tensorboard::OperatorRow>,
    /// Gaudi device node occurrences, by start, in the columns of the profiler's
    /// `analyzed_nodes.csv`; absent without Gaudi engine lanes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<crate::nodes::NodeRow>,
    /// The plugin's kernel table, per kernel name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<crate::tensorboard::KernelRow>,
    /// The performance model per op signature (name, shapes, dtypes) whose calls launched
    /// device work: FLOPs and bytes per call, achieved rates, share of the device's peak
    /// (`op_perf.rs`, `docs/roofline.md`); by kernel time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub op_perf: Vec<crate::op_perf::OpPerf>,
    /// The kernel table per kernel, launching op and launch shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels_by_op: Vec<crate::tensorboard::KernelRow>,
    /// Summary.
    pub summary: Summary,
}

impl Report {
    /// The finding groups; computed from `findings` for a saved report written before groups
    /// were part of the JSON.
    #[must_use]
    pub fn groups(&self) -> std::borrow::Cow<'_, [crate::finding::FindingGroup]> {
        if self.finding_groups.is_empty() && !self.findings.is_empty() {
            std::borrow::Cow::Owned(crate::finding::group_findings(&self.findings))
        } else {
            std::borrow::Cow::Borrowed(&self.finding_groups)
        }
    }
}

/// Builds the report for a Timeline with the default thresholds.
#[must_use]
pub fn build_report(timeline: &Timeline) -> Report {
    build_report_with(timeline, &Thresholds::default())
}

/// Builds the report for a Timeline with the given detector thresholds.
#[must_use]
pub fn build_report_with(timeline: &Timeline, thresholds: &Thresholds) -> Report {
    build_report_ledgered(timeline, thresholds, None)
}

/// Builds the report, recording each pass's time in `ledger` when one is given
/// (`steplens-bench`'s phase ledger).
#[must_use]
pub fn build_report_ledgered(
    timeline: &Timeline,
    thresholds: &Thresholds,
    ledger: Option<&crate::ledger::Ledger>,
) -> Report {
    build_report_parts(timeline, thresholds, Parts::ALL, ledger)
}

/// What a report is built with: the text and Markdown reports without `--view` show no
/// TensorBoard view, so they need not compute them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// The TensorBoard plugin's views (`overview`, `gpu_summary`, `operators`,
    /// `operators_by_shape`, `kernels`, `kernels_by_op`, each step's `breakdown`, the rank
    /// table's `distributed`). Without them those fields stay empty.
    pub views: bool,
}

impl Parts {
    /// Everything: what JSON, HTML, the viewer and Python get.
    pub const ALL: Self = Self { views: true };
    /// Without the TensorBoard views.
    pub const WITHOUT_VIEWS: Self = Self { views: false };
}

/// Builds the report with `parts`, recording each pass in `ledger` when one is given.
#[must_use]
pub fn build_report_parts(
    timeline: &Timeline,
    thresholds: &Thresholds,
    parts: Parts,
    ledger: Option<&crate::ledger::Ledger>,
) -> Report {
    let channels = crate::ledger::timed(ledger, "steps: busy channels", || channels(timeline));
    let mut ctx = Context::new(timeline, thresholds, &channels);
    if let Some(l) = ledger {
        ctx = ctx.with_ledger(l);
    }
    if parts.views {
        ctx = ctx.with_views();
    }
    // The detectors are half the analysis and need nothing the tables below compute: they run
    // on a second core meanwhile. The findings keep their order (detectors, memory, ranks).
    // The TensorBoard-style views need neither: a third thread, which takes whichever core
    // the other two leave idle first.
    let ((tables, mut findings), views) = crate::parallel::side_by_side(
        || crate::parallel::side_by_side(|| tables(&ctx), || run_all(&ctx)),
        || {
            if !parts.views {
                return crate::tensorboard::Views::default();
            }
            let launches = ctx.launches();
            ctx.find_op_args();
            crate::tensorboard::views_with(timeline, launches, &|op, arg| ctx.arg(op, arg), ledger)
        },
    );
    let Tables {
        mut steps,
        ops,
        memory,
        mut ranks,
        idle,
        engines,
        mme_tpc_overlap_ns,
        critical_path,
        device_nodes,
        op_perf,
    } = tables;
    let rank_of_source = crate::ranks::known_ranks(timeline);
    let rank_of = |source: Option<u16>| {
        source.and_then(|s| rank_of_source.get(usize::from(s)).copied().flatten())
    };
    // Every pass that reads the critical paths is done: each step takes its own.
    if let Some(paths) = ctx.take_critical_paths() {
        for (step, path) in steps.iter_mut().zip(paths.steps) {
            step.critical_path = path;
        }
    }
    // The step table is in `timeline.steps` order, as the views' per-step breakdowns are.
    for (index, step) in steps.iter_mut().enumerate() {
        step.rank = rank_of(Some(step.source));
        step.breakdown = views.step_breakdowns.get(index).copied().flatten();
    }
    if let Some(r) = ranks.as_mut() {
        r.distributed.clone_from(&views.distributed);
    }
    for f in &mut findings {
        f.source = f.cost.source;
        f.rank = rank_of(f.cost.source);
    }
    let finding_groups = ctx.timed("finding groups", || {
        crate::finding::group_findings(&findings)
    });
    let mut summary = ctx.timed("summary", || {
        summarize(timeline, &channels, &steps, &findings)
    });
    summary.mme_tpc_overlap_ns = mme_tpc_overlap_ns;
    let mut sources: Vec<SourceReport> = timeline
        .sources
        .iter()
        .map(|s| SourceReport {
            path: s.path.clone(),
            format: s.format,
            events: s.events,
            bytes: s.bytes,
            rank: s.rank,
            warnings: s
                .warnings
                .iter()
                .map(|w| WarningReport {
                    code: w.code.as_str().to_owned(),
                    offset: w.offset,
                    message: w.message.clone(),
                })
                .collect(),
        })
        .collect();
    // What the rank analysis warns about is said with the inputs' own warnings (on the first
    // input it names); a refused analysis leaves no rank table.
    if let Some(r) = &ranks {
        for w in &r.warnings {
            let at = w.sources.first().map_or(0, |&s| usize::from(s));
            if let Some(source) = sources.get_mut(at) {
                source.warnings.push(WarningReport {
                    code: w.code.clone(),
                    offset: None,
                    message: w.message.clone(),
                });
            }
        }
    }
    if ranks
        .as_ref()
        .is_some_and(crate::ranks::RanksReport::refused)
    {
        ranks = None;
    }
    Report {
        schema: SCHEMA.to_owned(),
        sources,
        device: DeviceReport {
            kind: timeline.device.kind.as_str().to_owned(),
            name: timeline.device.name.clone(),
            count: timeline.device.count,
        },
        steps,
        findings,
        finding_groups,
        ops,
        idle,
        engines,
        utilization: ctx.timed("utilization", || {
            crate::engines::utilization(timeline, &channels)
        }),
        memory,
        critical_path,
        profiler_overhead: ctx.timed("profiler overhead", || {
            crate::profiler_overhead::profiler_overhead(timeline)
        }),
        ranks,
        overview: (!views.overview.steps.is_empty()).then_some(views.overview),
        gpu_summary: views.gpu_summary,
        operators: views.operators,
        operators_by_shape: views.operators_by_shape,
        device_nodes,
        kernels: views.kernels,
        kernels_by_op: views.kernels_by_op,
        op_perf,
        summary,
    }
}

/// Everything in the report but the detectors' findings.
struct Tables {
    steps: Vec<StepStats>,
    ops: Vec<OpStats>,
    memory: Vec<crate::memory::DeviceMemory>,
    ranks: Option<crate::ranks::RanksReport>,
    idle: Vec<StreamIdle>,
    engines: Vec<EngineStats>,
    mme_tpc_overlap_ns: Option<i64>,
    critical_path: Option<crate::critical_path::CriticalPath>,
    device_nodes: Vec<crate::nodes::NodeRow>,
    op_perf: Vec<crate::op_perf::OpPerf>,
}

fn tables(ctx: &Context<'_>) -> Tables {
    let timeline = ctx.timeline;
    let windows = ctx.step_windows();
    let mut steps = ctx.timed("steps", || {
        step_breakdown_with(timeline, ctx.channels, windows)
    });
    let nodes = ctx.timed("device nodes", || crate::nodes::node_index(timeline));
    let (ops, op_steps) = ctx.timed("ops", || {
        crate::ops::op_summary_per_step(timeline, &nodes, ctx.self_time(), crate::ops::OPS_PER_STEP)
    });
    let device_nodes = nodes
        .nodes
        .iter()
        .map(|n| crate::nodes::NodeRow::of(timeline, n))
        .collect();
    for (step, op_self_ns) in steps.iter_mut().zip(op_steps) {
        step.op_self_ns = op_self_ns;
    }
    // Each step's path joins its step once every pass is done (`build_report_parts`): moved,
    // not copied, since the paths are the report's largest part.
    let paths = ctx.critical_paths();
    // Without steps: the longest input's path.
    let critical_path = paths
        .whole
        .iter()
        .max_by_key(|(_, p)| p.total_ns)
        .map(|(_, p)| p.clone());
    let memory = ctx.memory().to_vec();
    let ranks = ctx.ranks().map(|a| a.report.clone());
    if let Some(primary) = crate::memory::primary(&memory) {
        for (step, m) in steps.iter_mut().zip(&primary.steps) {
            if step.name == m.step {
                step.memory_peak_bytes = Some(m.peak_allocated_bytes);
            }
        }
    }
    let (engines, mme_tpc_overlap_ns) =
        ctx.timed("engines", || engine_utilization(timeline, ctx.channels));
    let idle = ctx.timed("idle", || {
        idle_breakdown_with(timeline, ctx.launches(), ctx.thresholds.kernel_wait_max_ns)
    });
    let op_perf = ctx.timed("op perf: rows", || ctx.op_perf());
    Tables {
        steps,
        ops,
        memory,
        ranks,
        idle,
        engines,
        mme_tpc_overlap_ns,
        critical_path,
        device_nodes,
        op_perf,
    }
}

fn summarize(
    timeline: &Timeline,
    channels: &FxHashMap<u16, Channels>,
    steps: &[StepStats],
    findings: &[Finding],
) -> Summary {
    let mut durations: Vec<i64> = steps.iter().map(|s| s.dur_ns).collect();
    durations.sort_unstable();
    let total: i64 = durations.iter().sum();
    let mean_step_ns = (!durations.is_empty()).then(|| total / durations.len() as i64);
    let p50_step_ns = crate::stats::percentile(&durations, 0.5);
    let trace_ns = timeline.time_range().map_or(0, |(a, b)| b - a);
    let device_busy_pct = if !timeline.has_device() {
        None
    } else if !steps.is_empty() {
        let busy: i64 = steps.iter().filter_map(|s| s.device_busy_ns).sum();
        (total > 0).then(|| crate::units::round2(busy as f64 * 100.0 / total as f64))
    } else {
        // Device busy over every input, from the sets the step table was cut from.
        let ranges = channels.values().flat_map(|c| c.device.iter()).collect();
        let busy = steplens_ingest::intervals::IntervalSet::from_ranges(ranges).total();
        (trace_ns > 0).then(|| crate::units::round2(busy as f64 * 100.0 / trace_ns as f64))
    };
    let mut findings_by_kind = BTreeMap::new();
    let mut lost_ns_by_kind = BTreeMap::new();
    let lost_in_steps: i64 = findings
        .iter()
        .filter(|f| f.step.is_some())
        .map(|f| f.lost_ns)
        .sum();
    let lost_pct_of_steps =
        (total > 0).then(|| crate::units::round2(lost_in_steps as f64 * 100.0 / total as f64));
    let mut saving_ns_by_kind = BTreeMap::new();
    for f in findings {
        *findings_by_kind.entry(f.kind).or_insert(0) += 1;
        *lost_ns_by_kind.entry(f.kind).or_insert(0) += f.lost_ns;
        *saving_ns_by_kind.entry(f.kind).or_insert(0) += f.saving_ns;
    }
    let saved: i64 = findings.iter().map(|f| f.saving_ns).sum();
    let saving_pct_of_steps =
        (total > 0).then(|| crate::units::round2((saved as f64 * 100.0 / total as f64).min(100.0)));
    Summary {
        steps: steps.len(),
        mean_step_ns,
        p50_step_ns,
        device_busy_pct,
        trace_ns,
        findings_by_kind,
        lost_ns_by_kind,
        mme_tpc_overlap_ns: None,
        lost_pct_of_steps,
        saving_ns_by_kind,
        saving_pct_of_steps,
    }
}
