//! `host_bound_gap`: every device engine sits idle while the host is busy dispatching ops,
//! building graphs or launching kernels — the device waits for Python, not the other way round.
//!
//! Per step, the gaps in the union of all engines' busy time are found; each gap longer than
//! the jitter threshold counts for the part of it the host spent in op work, minus the time it
//! spent waiting for data (DataLoader ranges) or blocked in a sync (those are their own kinds).
//! A gap counts only if the host was late with the work that ends it: the launch of that work
//! (its runtime call, by the launch index) started after the gap began, the rule HTA's "host
//! wait" uses per stream. Work queued before the gap, such as the kernels of a CUDA graph
//! replayed by one earlier launch, was waiting on something else (another stream, an event, a
//! copy), not on the host; device work without a launch link counts as before.
//! A step is flagged when that host-bound idle time reaches the share threshold. The ops that
//! filled the gaps are named, by the time they overlapped them.

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, NO_PARENT, SliceId};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::{BLOCKING_CALLS, human_ns, ranked_names};
use crate::context::{Context, NameSet};
use crate::finding::{Cost, Evidence, FindingKind, Raised, Severity};
use steplens_ingest::intervals::IntervalSet;

const HOST_GAP_MIN_NS: Threshold = Threshold::int(
    "host_gap_min_ns",
    50_000,
    "a device-idle gap shorter than this is launch jitter, not a finding, ns.",
);

const HOST_GAP_MIN_PCT: Threshold = Threshold::float(
    "host_gap_min_pct",
    5.0,
    "the host-bound idle time of a step must reach this share of the step, percent.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "host_bound_gap",
    raises: &[Raises::new(FindingKind::HostBoundGap, Saves::HostTime)],
    thresholds: &[HOST_GAP_MIN_NS, HOST_GAP_MIN_PCT],
    advice: "Launch less from Python per step: larger batches, torch.compile or CUDA graphs, fused ops.",
    detect: |ctx, _| detect(ctx),
};

/// A device-idle gap: `(start, end, host-bound ns)`.
type Gap = (i64, i64, i64);

/// A flagged step: its index, host-bound ns, its gaps and the host-bound intervals.
type Flagged = (usize, i64, Vec<Gap>, Vec<(i64, i64)>);

/// Ops named in a finding.
const TOP_OPS: usize = 5;
/// Gaps kept as evidence.
const MAX_EVIDENCE: usize = 10;

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let th = ctx.thresholds;
    // Outermost host ops per input, sorted by start, and the blocked intervals.
    let mut host_ops: FxHashMap<u16, Vec<SliceId>> = FxHashMap::default();
    let mut blocked: FxHashMap<u16, Vec<(i64, i64)>> = FxHashMap::default();
    let mut compiling: FxHashMap<u16, Vec<(i64, i64)>> = FxHashMap::default();
    let blocking = NameSet::new(t, |name| BLOCKING_CALLS.contains(&name));
    let compile = NameSet::new(t, crate::op_names::is_graph_compile);
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            let class = t.slice_class(i);
            if !class.is_host_work() {
                continue;
            }
            let range = (t.slices.start[i as usize], t.slices.end(i));
            let compiling_here = compile.has(t, i);
            // Waiting in a sync, or compiling a graph, is the device idle for reasons that
            // have their own kinds (`sync_point`, `recompile`).
            if (class == CategoryClass::Runtime && blocking.has(t, i)) || compiling_here {
                blocked.entry(track.source).or_default().push(range);
            }
            if compiling_here {
                compiling.entry(track.source).or_default().push(range);
            }
            let parent = t.slices.parent[i as usize];
            if parent == NO_PARENT || !t.slice_class(parent).is_host_work() {
                host_ops.entry(track.source).or_default().push(i);
            }
        }
    }
    // Time the host spent waiting (for data or in a sync), per input.
    let excluded: FxHashMap<u16, IntervalSet> = ctx
        .channels
        .iter()
        .map(|(&source, c)| {
            let mut ranges: Vec<(i64, i64)> = c.dataloader.iter().collect();
            ranges.extend(blocked.get(&source).into_iter().flatten().copied());
            (source, IntervalSet::from_ranges(ranges))
        })
        .collect();
    let compile: FxHashMap<u16, IntervalSet> = compiling
        .into_iter()
        .map(|(source, ranges)| (source, IntervalSet::from_ranges(ranges)))
        .collect();
    let queued = QueuedWork::new(ctx);
    // Pass 1: the host-bound gaps of every step; keep the steps over the threshold.
    let mut flagged: Vec<Flagged> = Vec::new();
    for (index, step) in t.steps.iter().enumerate() {
        let Some(channels) = ctx.channels.get(&step.source).filter(|c| c.has_device) else {
            continue;
        };
        let Some(excluded) = excluded.get(&step.source) else {
            continue;
        };
        let mut lost = 0;
        let mut gaps = Vec::new();
        let mut ranges = Vec::new();
        for (from, to) in channels.device.gaps(step.start, step.end()) {
            if to - from < th.host_gap_min_ns || queued.was_queued(step.source, from, to) {
                continue;
            }
            // Host op work in the gap, less the waits that belong to other kinds. A derived step
            // (Synapse-only run) shows the host's API calls but not its Python work: with the
            // device idle and nothing else to wait for, the whole gap is the host's.
            let host = if step.derived {
                IntervalSet::from_ranges(vec![(from, to)])
            } else {
                IntervalSet::from_ranges(channels.host.within(from, to))
            };
            let busy = host.minus(excluded);
            let bound = busy.total();
            if bound > 0 {
                lost += bound;
                gaps.push((from, to, bound));
                ranges.extend(busy.iter());
            }
        }
        // The share is of the step's time outside compiles: a step that also compiled a graph
        // still shows its ordinary dispatch gaps (the compile is the recompile's).
        let compiling = compile
            .get(&step.source)
            .map_or(0, |c| c.covered(step.start, step.end()));
        let pct = lost as f64 * 100.0 / (step.dur - compiling).max(1) as f64;
        if !gaps.is_empty() && pct >= th.host_gap_min_pct {
            flagged.push((index, lost, gaps, ranges));
        }
    }
    // Pass 2: which ops filled the flagged gaps. Gaps are disjoint and sorted per input, so
    // each op finds its gaps by binary search.
    let mut all_gaps: FxHashMap<u16, Vec<(i64, i64, usize)>> = FxHashMap::default();
    for (slot, (index, _, gaps, _)) in flagged.iter().enumerate() {
        let source = t.steps[*index].source;
        all_gaps
            .entry(source)
            .or_default()
            .extend(gaps.iter().map(|g| (g.0, g.1, slot)));
    }
    let mut by_op: Vec<FxHashMap<u32, i64>> = vec![FxHashMap::default(); flagged.len()];
    for (source, gaps) in &mut all_gaps {
        gaps.sort_unstable();
        for &i in host_ops.get(source).map_or(&[][..], Vec::as_slice) {
            let (op_start, op_end) = (t.slices.start[i as usize], t.slices.end(i));
            let first = gaps.partition_point(|g| g.1 <= op_start);
            for &(from, to, slot) in gaps[first..].iter().take_while(|g| g.0 < op_end) {
                let overlap = op_end.min(to) - op_start.max(from);
                if overlap > 0 {
                    *by_op[slot].entry(t.slices.name[i as usize]).or_insert(0) += overlap;
                }
            }
        }
    }
    let mut findings = Vec::new();
    for ((index, lost, mut gaps, ranges), by_op) in flagged.into_iter().zip(by_op) {
        let step = &t.steps[index];
        let pct = lost as f64 * 100.0 / step.dur.max(1) as f64;
        let ops_named = ranked_names(t, by_op, TOP_OPS);
        gaps.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let evidence = gaps
            .iter()
            .take(MAX_EVIDENCE)
            .map(|&(from, to, bound)| Evidence::HostGap {
                gap_start_ns: from,
                gap_end_ns: to,
                host_bound_ns: bound,
            })
            .collect();
        let start = gaps.iter().map(|g| g.0).min().unwrap_or(step.start);
        let end = gaps.iter().map(|g| g.1).max().unwrap_or(step.end());
        findings.push(Raised {
            kind: FindingKind::HostBoundGap,
            severity: Severity::of_share(lost, step.dur),
            title: format!(
                "device idle {} ({pct:.0}% of {}) in {} gap{} {}{}",
                human_ns(lost),
                step.name,
                gaps.len(),
                if gaps.len() == 1 { "" } else { "s" },
                if step.derived {
                    "with no work queued: the host was late (its Python side is not in this capture)"
                } else {
                    "while the host dispatched ops"
                },
                ops_named.first().map_or_else(String::new, |op| format!(" (mostly {op})"))
            ),
            step: Some(index),
            start_ns: start,
            end_ns: end,
            track: None,
            ops: ops_named,
            call_site: None,
            // A gap counts when its host-bound part is itself past the jitter threshold; the
            // small remainders still add to the lost time.
            count: gaps.iter().filter(|g| g.2 >= ctx.thresholds.host_gap_min_ns).count().max(1) as u64,
            lost_ns: lost,
            evidence,
            cost: Cost::measured(step.source, ranges),
            recommendation: "The device waits for the host to issue work. Give it more work \
                             per launch (larger batches, fused ops via torch.compile), cut \
                             launch overhead (CUDA graphs: torch.compile mode=\"reduce-overhead\"), \
                             and move host-side preprocessing into DataLoader workers."
                .into(),
        });
    }
    findings
}

/// Per input, its linked device work by start: `(start, when its launch started)`.
struct QueuedWork(FxHashMap<u16, Vec<(i64, i64)>>);

impl QueuedWork {
    fn new(ctx: &Context<'_>) -> Self {
        let t = ctx.timeline;
        let launches = ctx.launches();
        let mut by_source: FxHashMap<u16, Vec<(i64, i64)>> = FxHashMap::default();
        if launches.is_empty() {
            return Self(by_source);
        }
        for track in t.tracks.iter().filter(|tr| tr.kind.is_device()) {
            let out = by_source.entry(track.source).or_default();
            for d in track.slices.clone() {
                if !t.slice_class(d).is_device_work() {
                    continue;
                }
                // Unlinked work sorts as launched at `i64::MAX`: never queued before a gap.
                let launched = launches.launched_at(t, d).unwrap_or(i64::MAX);
                out.push((t.slices.start[d as usize], launched));
            }
        }
        for work in by_source.values_mut() {
            work.sort_unstable();
        }
        Self(by_source)
    }

    /// Whether every piece of device work of `source` that starts at `to` (the end of a gap
    /// that began at `from`) was launched before the gap began.
    fn was_queued(&self, source: u16, from: i64, to: i64) -> bool {
        let Some(work) = self.0.get(&source) else {
            return false;
        };
        let first = work.partition_point(|w| w.0 < to);
        let mut starting = work[first..].iter().take_while(|w| w.0 == to).peekable();
        starting.peek().is_some() && starting.all(|&(_, launched)| launched <= from)
    }
}
