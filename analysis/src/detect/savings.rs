//! What fixing each finding saves: how much shorter its step's critical path gets.
//!
//! A finding's cost is a set of wall-clock ranges (what its detector measured) and a lost time
//! (what its detector says those ranges hold of waste: a chain's measured time less its modelled
//! fused cost, say). Its saving is the part of the step's critical path inside those ranges that
//! the fix can remove, scaled by the same share the detector claims of the ranges:
//! - fixes that take host-side waste away (a sync, a copy, a gap, data loading, a compile,
//!   host-side op overhead) shorten only the path's host, launch, gap and wait stretches: a
//!   host thread that waits while the device computes costs the step nothing;
//! - fixes that take device work away (a transpose copy, a pad, an unfused chain or optimizer
//!   loop, fp32 matrix work) shorten the path's device stretches too; a host-side fix that also
//!   takes away device work the step waited for (a pageable copy, which a pinned, asynchronous
//!   copy hides) names those ranges (`Cost::device_ranges`), and only there do its device
//!   stretches count.
//!
//! Within a step, savings have one owner per nanosecond, taken in [`FindingKind::OWNER_ORDER`](crate::finding::FindingKind::OWNER_ORDER),
//! so they add up to at most the step.

use rustc_hash::FxHashMap;

use super::registry::Saves;
use crate::context::Context;
use crate::finding::Finding;
use steplens_ingest::intervals::IntervalSet;

/// Fills in `saving_ns` of every finding that has a measured cost; `claimed[i]` is finding
/// `i`'s lost time as its detector measured it, before the one-owner settling.
pub(super) fn settle_savings(ctx: &Context<'_>, findings: &mut [Finding], claimed: &[i64]) {
    let t = ctx.timeline;
    let paths = ctx.critical_paths();
    let mut order: Vec<usize> = (0..findings.len()).collect();
    order.sort_by_key(|&i| (findings[i].kind.owner_rank(), findings[i].start_ns));
    // Per (clock, step index; `None` outside every step): the path time already saved by an
    // earlier finding.
    let mut taken: FxHashMap<(u16, Option<usize>), IntervalSet> = FxHashMap::default();
    for i in order {
        let f = &mut findings[i];
        let saves = super::registry::saves(f.kind);
        if saves == Saves::NotStepTime {
            continue;
        }
        f.saving_ns = 0;
        let Some(source) = f.cost.source else {
            continue;
        };
        if f.cost.ranges.is_empty() {
            continue;
        }
        let Some((path, (lo, hi))) = paths
            .of(t, source, f.step_index)
            .and_then(|p| Some((p, p.span()?)))
        else {
            f.cost.saving_unknown = true;
            continue;
        };
        let ranges = IntervalSet::from_ranges(f.cost.ranges.clone());
        let ranges = IntervalSet::from_ranges(ranges.within(lo, hi));
        let measured = ranges.total();
        if measured <= 0 {
            continue;
        }
        let device_too = saves == Saves::DeviceWork;
        let mut on_path =
            IntervalSet::from_ranges(path.runs_of(|b| device_too || !b.is_device_work()))
                .intersect(&ranges);
        if !device_too && !f.cost.device_ranges.is_empty() {
            let device = IntervalSet::from_ranges(path.runs_of(|b| b.is_device_work()))
                .intersect(&IntervalSet::from_ranges(f.cost.device_ranges.clone()))
                .intersect(&ranges);
            on_path = IntervalSet::from_ranges(on_path.iter().chain(device.iter()).collect());
        }
        let owned = taken
            .entry((t.step_source(source), f.step_index))
            .or_default();
        let free = on_path.minus(owned);
        // The detector's claim as a share of what it measured: a chain's fused cost stays.
        let share = (claimed[i] as f64 / measured as f64).clamp(0.0, 1.0);
        f.saving_ns = (free.total() as f64 * share).round() as i64;
        if let Some(cap) = f.cost.saving_cap_ns {
            f.saving_ns = f.saving_ns.min(cap.max(0));
        }
        *owned = IntervalSet::from_ranges(owned.iter().chain(free.iter()).collect());
        // How much it matters is what fixing it saves: a wait the device would have made
        // anyway is no emergency.
        if !f.cost.pattern {
            let step_ns = path.total_ns;
            f.severity = crate::finding::Severity::of_share(f.saving_ns, step_ns);
        }
    }
}
