//! Detectors: each module looks for one kind of problem in a Timeline and returns
//! [`Finding`]s that say what it costs and what to change.
//!
//! The detectors share a [`Context`](crate::context::Context) (the Timeline, its steps, call-site resolution, evidence
//! references) and one [`Thresholds`] table, the single documented place for every threshold
//! (also in `docs/findings.md`); a budget file can override any of them.

mod collectives;
mod data_parallel;
mod dataloader_stall;
mod debug_api;
pub(crate) mod enclosure;
mod exposed_comm;
mod gaudi;
mod host_bound_gap;
pub(crate) mod host_copies;
mod layer_patterns;
mod memory;
mod mme_idle;
mod non_logical_transpose;
mod optimizer;
mod pointwise;
mod precision;
mod python_data_tensor;
mod recompile;
pub mod registry;
mod savings;
mod slow_gemm;
mod slow_zero_grad;
mod straggler;
mod sync_point;
pub(crate) mod torch_ops;

pub(crate) use torch_ops::is_pointwise as is_pointwise_name;

use serde::{Deserialize, Serialize};
use steplens_ingest::model::Timeline;

use crate::context::Context;
use crate::finding::{Finding, FindingKind, Severity};
use crate::intervals::IntervalSet;

pub(crate) use crate::finding::MAX_EVIDENCE;
/// Durations in titles read as in the tables.
pub(crate) use crate::units::human_ns;
pub(crate) use enclosure::Under;

/// Every detector threshold, with its default. Field names are the keys of the budget file's
/// `[thresholds]` table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// `dataloader_stall`: data wait (DataLoader time not covered by any op) must reach this
    /// share of the step, percent.
    pub dataloader_stall_min_pct: f64,
    /// `dataloader_stall`: … and at least this long, ns.
    pub dataloader_stall_min_ns: i64,
    /// `host_bound_gap`: a device-idle gap shorter than this is launch jitter, not a finding, ns.
    pub host_gap_min_ns: i64,
    /// `host_bound_gap`: the host-bound idle time of a step must reach this share of the step,
    /// percent.
    pub host_gap_min_pct: f64,
    /// Idle breakdown: a gap between kernels on a stream shorter than this, not caused by a
    /// late launch, is kernel-launch overhead ("kernel wait"), ns. HTA's default (30 µs).
    pub kernel_wait_max_ns: i64,
    /// `mme_idle_behind_tpc`: MME idle time behind TPC work per step must reach this, ns.
    pub mme_idle_min_ns: i64,
    /// `mme_idle_behind_tpc` without steps: device work separated by this long with every
    /// engine idle belongs to different graph launches, ns.
    pub graph_gap_ns: i64,
    /// `straggler`: the slowest rank's extra compute per step must reach this share of its
    /// step, percent.
    pub straggler_min_pct: f64,
    /// `straggler`: collectives matched across the ranks needed to name one, count.
    pub straggler_min_collectives: usize,
    /// `mme_idle_behind_tpc`: a stretch with less TPC work than this is node-to-node jitter,
    /// not counted, ns.
    pub mme_idle_stretch_min_ns: i64,
    /// `non_logical_transpose` on Gaudi device lanes: transpose kernels (`transpose_*`,
    /// `DmaTranspose`) are flagged when they take at least this share of the step, percent.
    pub device_transpose_min_pct: f64,
    /// Gaudi `recompile`: graph compiles in the first this many steps (or `mark_step` metric
    /// dumps) are warm-up.
    pub gaudi_warmup_steps: usize,
    /// `recompile`: compiles with an index below this are warm-up, not recompiles (`F/0` is the
    /// first compile of frame `F`).
    pub recompile_warmup_compiles: u32,
    /// Materiality: a finding with a measured cost must cost at least this share of its step
    /// (of the trace, without steps), percent …
    pub min_finding_pct: f64,
    /// … and at least this long, ns.
    pub min_finding_ns: i64,
    /// `memory_growth`: the allocated baseline must rise by at least this much over the run of
    /// steps, bytes.
    pub memory_growth_min_bytes: i64,
    /// `reserved_slack`: reserved − allocated at their peaks must reach this, bytes …
    pub reserved_slack_min_bytes: i64,
    /// … and this share of the peak reserved, percent.
    pub reserved_slack_min_pct: f64,
    /// `no_mixed_precision`: fp32 matrix kernels must take at least this share of the step,
    /// percent.
    pub fp32_compute_min_pct: f64,
    /// `unfused_pointwise`: a chain has at least this many elementwise ops …
    pub pointwise_chain_min_ops: usize,
    /// … over a tensor of at least this many elements.
    pub pointwise_min_elems: i64,
    /// `unfused_optimizer`: per-parameter math ops in one optimizer step before it counts as a
    /// loop.
    pub optimizer_loop_min_ops: usize,
    /// … and its estimated cost must reach this share of the step, percent.
    pub optimizer_loop_min_pct: f64,
    /// `fragmented_collectives`: collectives of one kind in one step before they count as
    /// fragmented …
    pub fragmented_min_per_step: usize,
    /// … and, where every call's size is recorded, more than this many times the all-reduces
    /// DDP's default 25 MiB buckets would need for the step's bytes.
    pub fragmented_over_needed: f64,
    /// `exposed_communication`: collective time with no compute beside it must reach this
    /// share of the step, percent.
    pub exposed_comm_min_pct: f64,
    /// `slow_gemm`: a GEMM signature whose rate is below this share of what the trace's
    /// well-shaped GEMMs of its dtype reach (or its memory roof) runs slow, percent.
    pub slow_gemm_max_pct: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            dataloader_stall_min_pct: 5.0,
            dataloader_stall_min_ns: 1_000_000,
            host_gap_min_ns: 50_000,
            host_gap_min_pct: 5.0,
            kernel_wait_max_ns: 30_000,
            mme_idle_min_ns: 20_000,
            mme_idle_stretch_min_ns: 10_000,
            graph_gap_ns: 100_000,
            straggler_min_pct: 5.0,
            straggler_min_collectives: 3,
            gaudi_warmup_steps: 2,
            device_transpose_min_pct: 2.0,
            recompile_warmup_compiles: 1,
            min_finding_pct: 1.0,
            min_finding_ns: 20_000,
            memory_growth_min_bytes: 1 << 20,
            reserved_slack_min_bytes: 256 << 20,
            reserved_slack_min_pct: 30.0,
            fp32_compute_min_pct: 10.0,
            pointwise_chain_min_ops: 4,
            pointwise_min_elems: 1024,
            optimizer_loop_min_ops: 8,
            optimizer_loop_min_pct: 5.0,
            fragmented_min_per_step: 8,
            exposed_comm_min_pct: 5.0,
            fragmented_over_needed: 2.0,
            slow_gemm_max_pct: 50.0,
        }
    }
}

/// Runtime calls that block the host until the device is done.
pub(crate) const BLOCKING_CALLS: &[&str] = &[
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyWithStream",
    "synStreamSynchronize",
    "synEventSynchronize",
    "synDeviceSynchronize",
];

/// The `n` names with the most time in `by_name`, most first (ties by name id).
pub(crate) fn ranked_names(
    t: &Timeline,
    by_name: rustc_hash::FxHashMap<u32, i64>,
    n: usize,
) -> Vec<String> {
    let mut ranked: Vec<(u32, i64)> = by_name.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
        .iter()
        .take(n)
        .map(|&(id, _)| t.strings.get(id).to_owned())
        .collect()
}

/// Runs every detector of the registry ([`registry::DETECTORS`]), settles who owns each lost
/// nanosecond, drops what is immaterial, prices what fixing each saves, and ranks them by it.
#[must_use]
pub fn run_all(ctx: &Context<'_>) -> Vec<Finding> {
    // The detectors read the timeline only: two halves run on two cores, their findings
    // concatenated in registry order, so the report does not depend on the scheduling. The
    // first half ends with the costliest detector on torch traces (non_logical_transpose reads
    // the shapes of every transpose and copy); the other half takes the rest.
    let detectors = registry::DETECTORS;
    let split = detectors
        .iter()
        .position(|d| d.name == "non_logical_transpose")
        .map_or(0, |i| i + 1);
    let (first, second) = detectors.split_at(split);
    let run = |half: &[&registry::Detector]| {
        let mut findings: Vec<Finding> = Vec::new();
        for d in half {
            let raised = ctx.timed(&format!("detector {}", d.name), || (d.detect)(ctx));
            findings.extend(raised.into_iter().map(Finding::from));
        }
        findings
    };
    let (mut findings, second) = side_by_side(|| run(first), || run(second));
    findings.extend(second);
    let claimed: Vec<i64> = findings.iter().map(|f| f.lost_ns).collect();
    ctx.timed("findings: one owner per ns", || {
        settle_lost_time(ctx, &mut findings);
    });
    let compiling = compile_time_per_step(ctx, &findings);
    let material: Vec<bool> = findings
        .iter()
        .map(|f| is_material(ctx, f, &compiling))
        .collect();
    let (mut findings, claimed): (Vec<Finding>, Vec<i64>) = findings
        .into_iter()
        .zip(claimed)
        .zip(material)
        .filter(|(_, keep)| *keep)
        .map(|(pair, _)| pair)
        .unzip();
    ctx.timed("findings: savings", || {
        savings::settle_savings(ctx, &mut findings, &claimed);
    });
    rank_by_saving(&mut findings);
    findings
}

/// Ranks findings by what fixing them saves, then by the time they own, largest first.
pub fn rank_by_saving(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.saving_ns
            .cmp(&a.saving_ns)
            .then_with(|| b.lost_ns.cmp(&a.lost_ns))
            .then_with(|| a.start_ns.cmp(&b.start_ns))
            .then_with(|| a.kind.cmp(&b.kind))
    });
}

/// Runs `first` on this thread and `second` on another, and returns both results; a panic in
/// `second` (a bug) is raised here rather than lost.
pub(crate) fn side_by_side<A, B: Send>(
    first: impl FnOnce() -> A,
    second: impl FnOnce() -> B + Send,
) -> (A, B) {
    std::thread::scope(|scope| {
        let other = scope.spawn(second);
        let mine = first();
        let theirs = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (mine, theirs)
    })
}

/// The step a finding names, as its device-inclusive window `(start, end)` on the clock of input
/// `source`, and that window's duration. A cost outside the window (host work of a device-bound
/// step that ran ahead of the device) costs the step nothing.
fn step_window(ctx: &Context<'_>, source: u16, step: Option<&str>) -> Option<((i64, i64), i64)> {
    let name = step?;
    let source = ctx.timeline.step_source(source);
    let index = ctx
        .timeline
        .steps
        .iter()
        .position(|s| s.source == source && s.name == name)?;
    let w = ctx.step_window(index)?;
    Some(((w.start, w.end), w.dur()))
}

/// A step on one input's clock: (clock source, step name; `None` outside every step).
type StepOfClock = (u16, Option<String>);

/// One owner for each lost nanosecond: within an input's clock, findings take their lost
/// intervals (clipped to their step) in [`FindingKind::OWNER_ORDER`]; what an earlier finding owns is taken
/// off a later one's `lost_ns`, and the title says where it went. Per step, the findings' lost
/// time then adds up to at most the step.
fn settle_lost_time(ctx: &Context<'_>, findings: &mut [Finding]) {
    let t = ctx.timeline;
    let mut order: Vec<usize> = (0..findings.len()).collect();
    order.sort_by_key(|&i| (findings[i].kind.owner_rank(), findings[i].start_ns));
    // Per clock and step (steps of one clock never overlap, so findings of different steps
    // cannot claim the same nanosecond): (owner kind, intervals it owns).
    let mut owned: rustc_hash::FxHashMap<StepOfClock, Vec<(FindingKind, IntervalSet)>> =
        rustc_hash::FxHashMap::default();
    for i in order {
        let f = &mut findings[i];
        let Some(source) = f.cost.source else {
            continue;
        };
        if f.cost.ranges.is_empty() {
            continue;
        }
        let clock = t.step_source(source);
        let window = step_window(ctx, source, f.step.as_deref());
        let mine = IntervalSet::from_ranges(f.cost.ranges.clone());
        let inside = match window {
            Some(((a, b), _)) => IntervalSet::from_ranges(mine.within(a, b)),
            None => mine.clone(),
        };
        let owners = owned.entry((clock, f.step.clone())).or_default();
        let mut free = inside.clone();
        let mut taken_by: Vec<(FindingKind, i64)> = Vec::new();
        for (kind, set) in owners.iter() {
            let before = free.total();
            free = free.minus(set);
            let taken = before - free.total();
            if taken > 0 {
                match taken_by.iter_mut().find(|(k, _)| k == kind) {
                    Some(entry) => entry.1 += taken,
                    None => taken_by.push((*kind, taken)),
                }
            }
        }
        let taken = mine.total() - free.total();
        let lost = (f.lost_ns - taken.max(0)).clamp(0, free.total());
        if lost != f.lost_ns {
            if !taken_by.is_empty() {
                // "[302 µs of it is counted under MME idle behind TPC]"
                let parts: Vec<String> = taken_by
                    .iter()
                    .map(|(k, ns)| {
                        format!("{} of it is counted under {}", human_ns(*ns), k.title())
                    })
                    .collect();
                f.title.push_str(&format!(" [{}]", parts.join("; ")));
            }
            f.lost_ns = lost;
            if !f.cost.pattern {
                let step_ns = window.map_or(0, |(_, dur)| dur);
                f.severity = Severity::of_share(lost, step_ns);
            }
        }
        owners.push((f.kind, free));
    }
}

/// Recompile time per (clock, step name), after settling.
fn compile_time_per_step(
    ctx: &Context<'_>,
    findings: &[Finding],
) -> rustc_hash::FxHashMap<(u16, String), i64> {
    let mut out = rustc_hash::FxHashMap::default();
    for f in findings.iter().filter(|f| f.kind == FindingKind::Recompile) {
        if let (Some(source), Some(step)) = (f.cost.source, &f.step) {
            *out.entry((ctx.timeline.step_source(source), step.clone()))
                .or_insert(0) += f.lost_ns;
        }
    }
    out
}

/// Materiality: a finding whose cost this trace measures must cost at least `min_finding_pct`
/// of its step (of the trace, without a step) and `min_finding_ns`. The step's share leaves out
/// the step's recompile time: a one-off compile does not dilute the step's other costs. Pattern
/// findings, and counts without a time range (metrics files), are exempt.
fn is_material(
    ctx: &Context<'_>,
    f: &Finding,
    compiling: &rustc_hash::FxHashMap<(u16, String), i64>,
) -> bool {
    if f.cost.pattern || f.cost.ranges.is_empty() {
        return true;
    }
    let th = ctx.thresholds;
    let in_step = f.cost.source.and_then(|source| {
        let (_, dur) = step_window(ctx, source, f.step.as_deref())?;
        let clock = ctx.timeline.step_source(source);
        let compile = if f.kind == FindingKind::Recompile {
            0
        } else {
            f.step
                .as_ref()
                .and_then(|s| compiling.get(&(clock, s.clone())))
                .copied()
                .unwrap_or(0)
        };
        Some((dur - compile).max(0))
    });
    let base = in_step
        .or_else(|| ctx.timeline.time_range().map(|(a, b)| b - a))
        .unwrap_or(0);
    f.lost_ns >= th.min_finding_ns && f.lost_ns as f64 * 100.0 >= th.min_finding_pct * base as f64
}

/// ` at file.py:12` for a title, or nothing without a call site.
pub(crate) fn at_site(call_site: Option<&str>) -> String {
    call_site.map(|c| format!(" at {c}")).unwrap_or_default()
}

