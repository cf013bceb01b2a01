//! `dataloader_stall`: the step waits for its next batch.
//!
//! With a device in the trace, the wait is the part of each `enumerate(DataLoader)#…` range
//! during which the device runs nothing (no kernel, copy or memset on any engine of the same
//! clock) — what the TensorBoard profiler plugin's "DataLoader" column measures; collating on
//! the host while queued device work runs costs nothing. On a CPU-only trace it is the part no
//! op covers: time spent in Python (`__getitem__`, decoding, `time.sleep`), in worker hand-off
//! or in I/O. A step is flagged when that wait reaches both thresholds (share of the step and
//! absolute time).
//!
//! Its saving is at most the wait less what the main process keeps paying per batch once
//! workers load the data ([`handoff_residual`]): the hand-off of each batch from a worker, and
//! one pass over the batch's bytes (received through shared memory and pinned) — measured in
//! the wait as the batch's collate copies.

use steplens_ingest::model::SliceId;

use super::human_ns;
use super::registry::{Detector, Raises, Saves, Threshold};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use crate::op_names::DATALOADER_PREFIX;
use steplens_ingest::intervals::IntervalSet;

const DATALOADER_STALL_MIN_PCT: Threshold = Threshold::float(
    "dataloader_stall_min_pct",
    5.0,
    "data wait (DataLoader time not covered by any op) must reach this share of the step, percent.",
);

const DATALOADER_STALL_MIN_NS: Threshold = Threshold::int(
    "dataloader_stall_min_ns",
    1_000_000,
    "the data wait must also be at least this long, ns.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "dataloader_stall",
    raises: &[Raises::new(FindingKind::DataloaderStall, Saves::HostTime)],
    thresholds: &[DATALOADER_STALL_MIN_PCT, DATALOADER_STALL_MIN_NS],
    advice: "Give the DataLoader more workers (num_workers), pin_memory=True and persistent_workers, or move the input transforms off the training loop.",
    detect: |ctx, _| detect(ctx),
};

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let mut findings = annotated(ctx);
    findings.extend(gaudi_wait_before_launch(ctx));
    findings
}

/// Host calls that launch a Gaudi graph.
const LAUNCHES: &[&str] = &["synLaunchWithExternalEvents", "synLaunchExt", "synLaunch"];

/// Gaudi lazy mode without DataLoader annotations: the time at the start of a step before its
/// first graph launch during which no op ran on any host thread — the host was waiting for the
/// batch.
fn gaudi_wait_before_launch(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    if t.device.kind != steplens_ingest::model::DeviceKind::Hpu {
        return Vec::new();
    }
    let th = ctx.thresholds;
    let mut findings = Vec::new();
    for (index, step) in t.steps.iter().enumerate() {
        // A derived step has no torch ops to tell data waits from host compute.
        if step.derived {
            continue;
        }
        let mut first_launch: Option<SliceId> = None;
        let mut has_dataloader = false;
        let mut ops = Vec::new();
        for (_, track) in ctx.host_tracks() {
            if t.step_source(track.source) != step.source {
                continue;
            }
            let range = t.track_slices_between(track, step.start, step.end());
            for i in range {
                let name = t.slice_name(i);
                if name.starts_with(DATALOADER_PREFIX) {
                    has_dataloader = true;
                }
                if LAUNCHES.iter().any(|l| name.starts_with(l))
                    && first_launch
                        .is_none_or(|f| t.slices.start[i as usize] < t.slices.start[f as usize])
                {
                    first_launch = Some(i);
                }
                if t.slice_class(i).is_host_work() && !LAUNCHES.iter().any(|l| name.starts_with(l))
                {
                    ops.push((t.slices.start[i as usize], t.slices.end(i)));
                }
            }
        }
        let Some(launch) = first_launch.filter(|_| !has_dataloader) else {
            continue;
        };
        let until = t.slices.start[launch as usize];
        let idle = IntervalSet::from_ranges(ops).gaps(step.start, until);
        let wait: i64 = idle.iter().map(|g| g.1 - g.0).sum();
        let pct = wait as f64 * 100.0 / step.dur.max(1) as f64;
        if wait < th.dataloader_stall_min_ns || pct < th.dataloader_stall_min_pct {
            continue;
        }
        findings.push(Raised {
            kind: FindingKind::DataloaderStall,
            severity: Severity::of_share(wait, step.dur),
            title: format!(
                "{} waits {} with the host idle before its first graph launch ({pct:.0}% of the step)",
                step.name,
                human_ns(wait)
            ),
            step: Some(index),
            start_ns: step.start,
            end_ns: until,
            track: ctx.track_name(launch),
            ops: vec![t.slice_name(launch).to_owned()],
            call_site: None,
            count: 1,
            lost_ns: wait,
            evidence: vec![ctx.evidence(t.steps[index].slice), ctx.evidence(launch)],
            recommendation: RECOMMENDATION.into(),
            cost: Cost::measured(step.source, idle),
        });
    }
    findings
}

const RECOMMENDATION: &str = "Load batches in the background: DataLoader(num_workers>0, \
    pin_memory=True, persistent_workers=True, prefetch_factor≥2), copy with \
    .to(device, non_blocking=True), and move heavy per-sample work (decoding, augmentation) out \
    of the step.";

/// The PyTorch DataLoader's `__next__` ranges.
fn annotated(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    // Per step: (data wait, DataLoader time, the DataLoader slices).
    let mut per_step: Vec<(i64, i64, Vec<SliceId>)> = vec![(0, 0, Vec::new()); t.steps.len()];
    // Per step: what the main process keeps paying per batch after the fix.
    let mut residual: Vec<i64> = vec![0; t.steps.len()];
    let mut waits: Vec<Vec<(i64, i64)>> = vec![Vec::new(); t.steps.len()];
    let device = device_per_clock(ctx);
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            if !t.slice_name(i).starts_with(DATALOADER_PREFIX)
                || ctx
                    .ancestors(i)
                    .any(|a| t.slice_name(a).starts_with(DATALOADER_PREFIX))
            {
                continue;
            }
            let start = t.slices.start[i as usize];
            let Some(step) = ctx.step_at(track.source, start) else {
                continue;
            };
            let gaps = match device.get(&t.step_source(track.source)) {
                Some(busy) => IntervalSet::from_ranges(vec![(start, t.slices.end(i))])
                    .minus(busy)
                    .iter()
                    .collect(),
                None => uncovered(ctx, i),
            };
            residual[step] += handoff_residual(ctx, i, &gaps);
            let entry = &mut per_step[step];
            entry.0 += gaps.iter().map(|g| g.1 - g.0).sum::<i64>();
            waits[step].extend(gaps);
            entry.1 += t.slices.dur[i as usize];
            entry.2.push(i);
        }
    }
    let th = ctx.thresholds;
    per_step
        .into_iter()
        .enumerate()
        .filter(|(_, (_, _, slices))| !slices.is_empty())
        .filter_map(|(step, (wait, total, slices))| {
            let s = &t.steps[step];
            let ranges = std::mem::take(&mut waits[step]);
            let pct = wait as f64 * 100.0 / s.dur.max(1) as f64;
            if wait < th.dataloader_stall_min_ns || pct < th.dataloader_stall_min_pct {
                return None;
            }
            let first = *slices.first()?;
            let end = slices
                .iter()
                .map(|&i| t.slices.end(i))
                .max()
                .unwrap_or(s.start);
            Some(Raised {
                kind: FindingKind::DataloaderStall,
                severity: Severity::of_share(wait, s.dur),
                title: format!(
                    "{} waits {} for its batch ({pct:.0}% of the step; {} in the DataLoader)",
                    s.name,
                    human_ns(wait),
                    human_ns(total)
                ),
                step: Some(step),
                start_ns: t.slices.start[first as usize],
                end_ns: end,
                track: ctx.track_name(first),
                ops: vec![t.slice_name(first).to_owned()],
                call_site: ctx.call_site(first),
                count: slices.len() as u64,
                lost_ns: wait,
                evidence: slices.iter().map(|&i| ctx.evidence(i)).collect(),
                cost: Cost {
                    saving_cap_ns: Some((wait - residual[step]).max(0)),
                    ..Cost::measured(s.source, ranges)
                },
                recommendation: RECOMMENDATION.into(),
            })
        })
        .collect()
}

/// What the main process still spends on one batch once workers load it, ns: the worker
/// hand-off (`_MultiProcessingDataLoaderIter.__next__` with its batch ready: 44–63 µs, median
/// 61 µs, in `samples/whatif-cuda/dataloader_workers.fixed`), which [`HANDOFF_NS`] stands for,
/// plus one pass over the batch's bytes: a worker collates into shared memory, and the main
/// process maps the batch and copies it into pinned memory (`pin_memory=True`). That pass is
/// read from the trace as the time of the batch's outermost collate copies (`aten::stack`,
/// `aten::cat`, `aten::pin_memory`) inside the `__next__` range that falls in its wait (`gaps`):
/// on a CPU-only trace the wait leaves ops out, so only the hand-off remains.
fn handoff_residual(ctx: &Context<'_>, slice: SliceId, gaps: &[(i64, i64)]) -> i64 {
    let t = ctx.timeline;
    let i = slice as usize;
    let (end, depth) = (t.slices.end(slice), t.slices.depth[i]);
    let track_end = t.slice_track(slice).map_or(slice, |tr| tr.slices.end);
    let mut copies = Vec::new();
    let mut inside_copy_until = i64::MIN;
    for j in slice + 1..track_end {
        let ju = j as usize;
        if t.slices.start[ju] >= end || t.slices.depth[ju] <= depth {
            break;
        }
        if t.slices.start[ju] < inside_copy_until {
            continue;
        }
        if BATCH_COPIES.contains(&t.slice_name(j)) {
            let copy_end = t.slices.end(j).min(end);
            copies.push((t.slices.start[ju], copy_end));
            inside_copy_until = copy_end;
        }
    }
    let copy_in_wait = IntervalSet::from_ranges(copies)
        .intersect(&IntervalSet::from_ranges(gaps.to_vec()))
        .total();
    HANDOFF_NS + copy_in_wait
}

/// A batch's hand-off from a worker process to the main process (see [`handoff_residual`]).
const HANDOFF_NS: i64 = 50_000;

/// The ops that write a batch's bytes once in the main process: default_collate's stack (and
/// the cat under it) and pinning.
const BATCH_COPIES: &[&str] = &[
    "aten::stack",
    "aten::cat",
    "aten::pin_memory",
    "aten::_pin_memory",
];

/// Device work per clock (all inputs on one clock together), for the clocks that have a device.
fn device_per_clock(ctx: &Context<'_>) -> rustc_hash::FxHashMap<u16, IntervalSet> {
    let mut ranges: rustc_hash::FxHashMap<u16, Vec<(i64, i64)>> = rustc_hash::FxHashMap::default();
    for (&source, c) in ctx.channels {
        if c.has_device {
            ranges
                .entry(ctx.timeline.step_source(source))
                .or_default()
                .extend(c.device.iter());
        }
    }
    ranges
        .into_iter()
        .map(|(clock, r)| (clock, IntervalSet::from_ranges(r)))
        .collect()
}

/// The stretches inside `slice` not covered by any op below it.
fn uncovered(ctx: &Context<'_>, slice: SliceId) -> Vec<(i64, i64)> {
    let t = ctx.timeline;
    let i = slice as usize;
    let (start, end, depth) = (t.slices.start[i], t.slices.end(slice), t.slices.depth[i]);
    let track_end = t.slice_track(slice).map_or(slice, |tr| tr.slices.end);
    let mut ops = Vec::new();
    for j in slice + 1..track_end {
        let ju = j as usize;
        if t.slices.start[ju] >= end || t.slices.depth[ju] <= depth {
            break;
        }
        if t.slice_class(j).is_host_work() {
            ops.push((t.slices.start[ju].max(start), t.slices.end(j).min(end)));
        }
    }
    IntervalSet::from_ranges(ops).gaps(start, end)
}
