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

use steplens_ingest::model::{SliceId, Timeline};

use crate::context::{Context, NameSet};
use crate::finding::{Finding, FindingKind, Severity};
use steplens_ingest::intervals::IntervalSet;

pub(crate) use crate::context::enclosure::Under;
pub(crate) use crate::finding::MAX_EVIDENCE;
/// Durations in titles read as in the tables.
pub(crate) use crate::units::human_ns;

/// Every detector, in the order their findings are concatenated before ranking (ties in the
/// ranking keep this order, so the report does not depend on scheduling).
pub static DETECTORS: &[&registry::Detector] = &[
    &dataloader_stall::DETECTOR,
    &recompile::DETECTOR,
    &mme_idle::DETECTOR,
    &gaudi::DETECTOR,
    &non_logical_transpose::DETECTOR,
    &sync_point::DETECTOR,
    &host_copies::DETECTOR,
    &python_data_tensor::DETECTOR,
    &host_bound_gap::DETECTOR,
    &slow_zero_grad::DETECTOR,
    &debug_api::DETECTOR,
    &layer_patterns::DETECTOR,
    &precision::DETECTOR,
    &slow_gemm::DETECTOR,
    &data_parallel::DETECTOR,
    &pointwise::DETECTOR,
    &optimizer::DETECTOR,
    &collectives::DETECTOR,
    &exposed_comm::DETECTOR,
    &memory::DETECTOR,
    &straggler::DETECTOR,
];

/// What several detectors read, found once per report on first use: the host-to-device copies
/// (their own findings, and the syncs they claim) and which names are elementwise ops.
pub struct Shared {
    host_copies: std::sync::OnceLock<Vec<host_copies::HostCopy>>,
    pointwise_names: std::sync::OnceLock<NameSet>,
}

impl Shared {
    fn new() -> Self {
        Self {
            host_copies: std::sync::OnceLock::new(),
            pointwise_names: std::sync::OnceLock::new(),
        }
    }

    /// Host-to-device copies from pageable or host-made tensors.
    pub(crate) fn host_copies(&self, ctx: &Context<'_>) -> &[host_copies::HostCopy] {
        self.host_copies
            .get_or_init(|| ctx.timed("host copies", || host_copies::host_copies(ctx)))
    }

    /// Whether slice `slice` is an elementwise ATen op ([`torch_ops::is_pointwise`] of its
    /// name, classified once per name: a transformer trace has a million ops).
    pub(crate) fn is_pointwise_op(&self, ctx: &Context<'_>, slice: SliceId) -> bool {
        self.pointwise_names
            .get_or_init(|| NameSet::new(ctx.timeline, torch_ops::is_pointwise))
            .has(ctx.timeline, slice)
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

/// Runs every detector of the registry ([`DETECTORS`]), settles who owns each lost
/// nanosecond, drops what is immaterial, prices what fixing each saves, and ranks them by it.
#[must_use]
pub fn run_all(ctx: &Context<'_>) -> Vec<Finding> {
    // The detectors read the timeline only: two halves run on two cores, their findings
    // concatenated in registry order, so the report does not depend on the scheduling. The
    // first half ends with the costliest detector on torch traces (non_logical_transpose reads
    // the shapes of every transpose and copy); the other half takes the rest.
    let detectors = DETECTORS;
    let split = detectors
        .iter()
        .position(|d| d.name == "non_logical_transpose")
        .map_or(0, |i| i + 1);
    let (first, second) = detectors.split_at(split);
    let shared = Shared::new();
    let run = |half: &[&registry::Detector]| {
        let mut findings: Vec<Finding> = Vec::new();
        for d in half {
            let raised = ctx.timed(&format!("detector {}", d.name), || (d.detect)(ctx, &shared));
            findings.extend(raised.into_iter().map(|r| r.settle(&ctx.timeline.steps)));
        }
        findings
    };
    let (mut findings, second) = crate::parallel::side_by_side(|| run(first), || run(second));
    findings.extend(second);
    let claimed: Vec<i64> = findings.iter().map(|f| f.lost_ns).collect();
    ctx.timed("findings: one owner per ns", || {
        settle_lost_time(ctx, &mut findings);
    });
    let compiling = compile_time_per_step(&findings);
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

/// A finding's step (an index into the Timeline's steps) as its device-inclusive window
/// `(start, end)` on its clock, and that window's duration. A cost outside the window (host
/// work of a device-bound step that ran ahead of the device) costs the step nothing.
fn step_window(ctx: &Context<'_>, step: Option<usize>) -> Option<((i64, i64), i64)> {
    let w = ctx.step_window(step?)?;
    Some(((w.start, w.end), w.dur()))
}

/// A step on one input's clock: (clock source, step index; `None` outside every step).
type StepOfClock = (u16, Option<usize>);

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
        let window = step_window(ctx, f.step_index);
        let mine = IntervalSet::from_ranges(f.cost.ranges.clone());
        let inside = match window {
            Some(((a, b), _)) => IntervalSet::from_ranges(mine.within(a, b)),
            None => mine.clone(),
        };
        let owners = owned.entry((clock, f.step_index)).or_default();
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

/// Recompile time per step (an index into the Timeline's steps), after settling.
fn compile_time_per_step(findings: &[Finding]) -> rustc_hash::FxHashMap<usize, i64> {
    let mut out = rustc_hash::FxHashMap::default();
    for f in findings.iter().filter(|f| f.kind == FindingKind::Recompile) {
        if let Some(step) = f.step_index {
            *out.entry(step).or_insert(0) += f.lost_ns;
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
    compiling: &rustc_hash::FxHashMap<usize, i64>,
) -> bool {
    if f.cost.pattern || f.cost.ranges.is_empty() {
        return true;
    }
    let th = ctx.thresholds;
    let in_step = f.cost.source.and_then(|_| {
        let (_, dur) = step_window(ctx, f.step_index)?;
        let compile = if f.kind == FindingKind::Recompile {
            0
        } else {
            f.step_index
                .and_then(|s| compiling.get(&s))
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

#[cfg(test)]
mod tests {
    use steplens_ingest::{LoadOptions, load_bytes};

    use crate::finding::FindingKind;
    use crate::report::build_report;

    /// A complete event on thread `tid`, µs.
    fn x(cat: &str, name: &str, tid: u32, ts: f64, dur: f64) -> String {
        format!(
            r#"{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 1, "tid": {tid}, "ts": {ts}, "dur": {dur}, "args": {{}}}}"#
        )
    }

    /// Two steps of one name (a trace whose step counter restarted, as two profiler sessions
    /// written into one file): each step's data wait is found in its own step's window. Looked
    /// up by name, the second wait fell outside the first step's window and was lost.
    #[test]
    fn findings_of_two_steps_of_one_name_keep_their_own_step() {
        let loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
        let events = [
            x("user_annotation", "ProfilerStep#1", 1, 0.0, 10_000.0),
            x("user_annotation", loader, 1, 0.0, 3_000.0),
            x("cpu_op", "aten::mm", 1, 3_000.0, 7_000.0),
            x("user_annotation", "ProfilerStep#1", 1, 20_000.0, 10_000.0),
            x("user_annotation", loader, 1, 20_000.0, 6_000.0),
            x("cpu_op", "aten::mm", 1, 26_000.0, 4_000.0),
        ];
        let json = format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n"));
        let Ok(t) = load_bytes("two.json", json.into_bytes(), &LoadOptions::default()) else {
            panic!("the trace loads");
        };
        let names: Vec<&str> = t.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ProfilerStep#1", "ProfilerStep#1"]);
        let mut lost: Vec<(Option<usize>, i64)> = build_report(&t)
            .findings
            .iter()
            .filter(|f| f.kind == FindingKind::DataloaderStall)
            .map(|f| (f.step_index, f.lost_ns))
            .collect();
        lost.sort_unstable();
        assert_eq!(lost, [(Some(0), 3_000_000), (Some(1), 6_000_000)]);
    }
}
