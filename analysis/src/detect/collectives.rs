//! `fragmented_collectives`: a step issues many small collectives of one kind where a few large
//! ones would move the same data (DDP gradient buckets set too small, or per-tensor
//! all-reduces in a custom loop).
//!
//! Per input and step, the all-reduces the rank records (`ranks::collect`: NCCL/RCCL kernels,
//! `nccl:`/`gloo:`/`hccl:` ranges, `c10d::` ops, `record_param_comms`), counted by their start;
//! other collectives (send/recv, all-to-all, FSDP's per-layer all-gathers) are split by
//! design, not by a bucket size. Fragmentation is a count against need: DDP's default 25 MiB
//! buckets would issue `ceil(total bytes / 25 MiB)` all-reduces for the step's bytes. A step is
//! fragmented when one collective comes `fragmented_min_per_step` times or more and, where the
//! trace records every call's size, more than `fragmented_over_needed` times what those buckets
//! would need (so 14 all-reduces of just over 1 MiB, `bucket_cap_mb=1`, are fragmented, and a
//! large model's few default buckets are not). One pattern finding per step and collective;
//! count = the collectives.
//!
//! Lost time, the model: every collective pays a fixed latency (its setup and the ring's first
//! hop), which the smallest of them shows best; the buckets that would do (one when sizes are
//! unknown) pay it, the others' latency is lost: (count − needed) × the shortest duration. An
//! upper bound when the collectives overlap compute.

use std::collections::BTreeMap;

use super::human_ns;
use super::registry::{Detector, Raises, Saves, Threshold};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};

const FRAGMENTED_MIN_PER_STEP: Threshold = Threshold::int(
    "fragmented_min_per_step",
    8,
    "collectives of one kind in one step before they count as fragmented.",
);

const FRAGMENTED_OVER_NEEDED: Threshold = Threshold::float(
    "fragmented_over_needed",
    2.0,
    "where every call's size is recorded, the calls must also number more than this many times the all-reduces DDP's default 25 MiB buckets would need for the step's bytes.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "collectives",
    raises: &[Raises::new(
        FindingKind::FragmentedCollectives,
        Saves::DeviceWork,
    )],
    thresholds: &[FRAGMENTED_MIN_PER_STEP, FRAGMENTED_OVER_NEEDED],
    advice: "Bucket the gradients into fewer, larger all-reduces (DDP bucket_cap_mb, gradient accumulation with no_sync).",
    detect: |ctx, _| detect(ctx),
};

/// DDP's default bucket size.
const DEFAULT_BUCKET_BYTES: i64 = 25 << 20;

/// The all-reduces DDP's default buckets would issue for `total_bytes` (at least one).
pub(super) fn buckets_needed(total_bytes: i64) -> i64 {
    ((total_bytes + DEFAULT_BUCKET_BYTES - 1) / DEFAULT_BUCKET_BYTES).max(1)
}

/// Whether `count` all-reduces are more than `fragmented_over_needed` times the `needed`
/// buckets: many calls against need, not a size cut-off.
pub(super) fn more_than_needed(
    count: usize,
    needed: i64,
    th: &crate::thresholds::Thresholds,
) -> bool {
    count as f64 > th.fragmented_over_needed * needed as f64
}

/// How a finding names input `source`: `rank 3` where the trace or its file name says it.
pub(super) fn rank_label(known: &[Option<i64>], source: u16) -> String {
    known
        .get(usize::from(source))
        .copied()
        .flatten()
        .map_or_else(|| format!("input {source}"), |r| format!("rank {r}"))
}

const ADVICE: &str = "Many small collectives each pay the full launch and network latency. \
    With DDP, raise bucket_cap_mb (the default 25 MB suits most models) so gradients travel in \
    a few large all-reduces; in a custom loop, flatten the tensors (torch._utils.\
    _flatten_dense_tensors) or use the coalesced collectives instead of one call per tensor.";

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let th = ctx.thresholds;
    let mut findings = Vec::new();
    let known = crate::ranks::known_ranks(t);
    for (source, occurrences) in ctx.collectives().per_input.iter().enumerate() {
        let source = source as u16;
        if occurrences.len() < th.fragmented_min_per_step {
            continue;
        }
        // (step, collective) → occurrence indices.
        let mut groups: BTreeMap<(usize, &str), Vec<usize>> = BTreeMap::new();
        for (k, o) in occurrences.iter().enumerate() {
            // Gradient all-reduces are what buckets merge; point-to-point and all-to-all
            // exchanges (embeddings) and FSDP's per-layer all-gathers are per design.
            if o.name != "all_reduce" {
                continue;
            }
            if let Some(step) = ctx.step_at(source, o.start) {
                groups.entry((step, o.name.as_str())).or_default().push(k);
            }
        }
        for ((step, name), members) in groups {
            if members.len() < th.fragmented_min_per_step {
                continue;
            }
            let sizes: Vec<i64> = members
                .iter()
                .filter_map(|&k| occurrences[k].bytes)
                .collect();
            let median_bytes = crate::stats::median(sizes.clone());
            let total_bytes: i64 = sizes.iter().sum();
            let sized = sizes.len() == members.len();
            let needed = if sized {
                buckets_needed(total_bytes)
            } else {
                1
            };
            if sized && !more_than_needed(members.len(), needed, th) {
                continue;
            }
            let shortest = members
                .iter()
                .map(|&k| occurrences[k].end - occurrences[k].start)
                .min()
                .unwrap_or(0);
            let lost = (members.len() as i64 - needed).max(0) * shortest;
            let s = &t.steps[step];
            let first = &occurrences[members[0]];
            let size = median_bytes
                .map(|b| format!(", median {}", crate::units::human_bytes(b.unsigned_abs())))
                .unwrap_or_default();
            let who = rank_label(&known, source);
            findings.push(Raised {
                kind: FindingKind::FragmentedCollectives,
                severity: Severity::of_share(lost, s.dur),
                title: format!(
                    "{}× small {name} in {} ({who}{size}); {needed} bucketed would do: about {} of per-call latency",
                    members.len(),
                    s.name,
                    human_ns(lost)
                ),
                step: Some(step),
                start_ns: first.start,
                end_ns: occurrences[members[members.len() - 1]].end,
                track: None,
                ops: vec![name.to_owned()],
                call_site: None,
                count: members.len() as u64,
                lost_ns: lost,
                evidence: Vec::new(),
                cost: Cost::pattern(
                    source,
                    members
                        .iter()
                        .map(|&k| (occurrences[k].start, occurrences[k].end))
                        .collect(),
                ),
                recommendation: ADVICE.into(),
            });
        }
    }
    findings
}
