//! `exposed_communication`: a rank's collectives run while nothing else does, so the step waits
//! for the network. Works on one rank's trace (the common case) as on many.
//!
//! Per input and step (its device-inclusive window), over the collectives the rank records
//! (`ranks::collect`: NCCL/RCCL/HCCL kernels, else `nccl:`/`gloo:`/`hccl:` ranges, `c10d::`
//! ops):
//! - communication: the union of the collectives' time in the window;
//! - compute: the rank's other work, as the rank analysis reads it — its non-collective kernels,
//!   copies and memsets when it has a device, else the outermost host work of its threads that
//!   issue no collective;
//! - exposed: communication with no compute beside it, less (with several ranks loaded) the
//!   time the rank waited inside a collective for the last rank to arrive (the straggler's
//!   cost).
//!
//! Per collective call: its size (`In msg nelems` × `dtype`, else the host annotation's
//! `Input Dims` × `Input type`), algorithm bandwidth (bytes / time) and bus bandwidth (nccl-tests:
//! bytes × the collective's factor for `n` ranks / time, `n` from `Group size`, else the trace's
//! world size), compared with what an all-reduce reaches on the device class's link
//! ([`crate::device_rates`]).
//!
//! Raised when the exposed time reaches `exposed_comm_min_pct` of the step. The advice follows
//! what the trace shows: many calls well below DDP's 25 MiB bucket → buckets; large calls far
//! below the link's bus bandwidth → the network or topology; otherwise → overlap (communication
//! after the backward's compute). Lost time, the model: the exposed part that overlap would
//! hide, capped by the step's compute not already beside a collective (what there is to hide
//! it behind).

use std::collections::BTreeMap;

use super::registry::{Detector, Raises, Saves, Threshold};
use super::{MAX_EVIDENCE, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use crate::ranks::Occurrence;
use steplens_ingest::intervals::IntervalSet;

const EXPOSED_COMM_MIN_PCT: Threshold = Threshold::float(
    "exposed_comm_min_pct",
    5.0,
    "collective time with no compute beside it must reach this share of the step, percent.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "exposed_comm",
    raises: &[Raises::new(
        FindingKind::ExposedCommunication,
        Saves::DeviceWork,
    )],
    thresholds: &[EXPOSED_COMM_MIN_PCT],
    advice: "Overlap communication with compute: DDP's bucketed backward, FSDP prefetch, or fewer, larger collectives.",
    detect: |ctx, _| detect(ctx),
};

/// A call this large should approach the link's bus bandwidth.
const LARGE_CALL_BYTES: i64 = 8 << 20;
/// Below this share of the link's bus bandwidth, large calls point at the network.
const SLOW_LINK_SHARE: f64 = 0.25;

const ADVICE_OVERLAP: &str = "Communication runs after the compute it could hide behind. With \
    DDP, gradients are all-reduced bucket by bucket during backward: keep the last layers out of \
    activation checkpointing (recomputing them delays their gradients), and order parameters so \
    the first buckets fill early; with FSDP, turn on backward_prefetch=BACKWARD_PRE and \
    forward_prefetch so the next all-gather overlaps the current layer.";
const ADVICE_BUCKETS: &str = "Many small all-reduces each pay the full latency and none of them \
    fills the link. With DDP, raise bucket_cap_mb (25 MB is the default) and set \
    gradient_as_bucket_view=True so gradients are not copied into the buckets; in a custom loop, \
    flatten the tensors or use the coalesced collectives.";
const ADVICE_NETWORK: &str = "Large collectives move far below what the link carries: check the \
    topology (NCCL_DEBUG=INFO shows the transport; a PCIe or socket path instead of NVLink/IB \
    or RoCE), NCCL_IB_HCA / NCCL_SOCKET_IFNAME, and whether the ranks of one node share one \
    NIC; then overlap what remains with backward (DDP buckets, FSDP prefetch).";

/// What fix the trace points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fix {
    Overlap,
    Buckets,
    Network,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let collectives = ctx.collectives();
    let known = crate::ranks::known_ranks(t);
    let class = t
        .device
        .name
        .as_deref()
        .and_then(crate::device_rates::device_class);
    let mut findings = Vec::new();
    for (source, occurrences) in collectives.per_input.iter().enumerate() {
        let source = source as u16;
        if occurrences.is_empty() {
            continue;
        }
        let compute = crate::ranks::compute_intervals(t, source, occurrences, &collectives.names);
        // With several ranks loaded, the time a rank spent inside a collective waiting for the
        // last rank to arrive is the straggler's cost, not the network's.
        let waiting = IntervalSet::from_ranges(
            ctx.ranks()
                .and_then(|r| r.waits.get(usize::from(source)))
                .cloned()
                .unwrap_or_default(),
        );
        let mut per_step: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (k, o) in occurrences.iter().enumerate() {
            let step = ctx
                .device_step_at(source, o.start)
                .or_else(|| ctx.step_at(source, o.start));
            if let Some(step) = step {
                per_step.entry(step).or_default().push(k);
            }
        }
        let who = super::collectives::rank_label(&known, source);
        for (step, members) in per_step {
            let Some(w) = ctx.step_window(step).copied() else {
                continue;
            };
            let calls: Vec<&Occurrence> = members.iter().map(|&k| &occurrences[k]).collect();
            let busy = Busy {
                compute: &compute,
                waiting: &waiting,
            };
            if let Some(f) = step_finding(ctx, source, step, &w, &calls, &busy, class, &who) {
                findings.push(f);
            }
        }
    }
    findings
}

/// What else a rank was doing while its collectives ran.
struct Busy<'a> {
    /// Its compute.
    compute: &'a IntervalSet,
    /// Its waits for the last rank inside matched collectives.
    waiting: &'a IntervalSet,
}

/// One call's figures.
struct Call {
    bytes: Option<i64>,
    /// Bus bandwidth, GB/s (bytes/ns), when the size and the group are known.
    bus_gbps: Option<f64>,
    /// Algorithm bandwidth, GB/s, when the size is known.
    alg_gbps: Option<f64>,
}

#[allow(clippy::too_many_arguments)]
fn step_finding(
    ctx: &Context<'_>,
    source: u16,
    step: usize,
    w: &crate::step_windows::StepWindow,
    calls: &[&Occurrence],
    busy: &Busy<'_>,
    class: Option<&crate::device_rates::DeviceClass>,
    who: &str,
) -> Option<Raised> {
    let t = ctx.timeline;
    let th = ctx.thresholds;
    let comm = IntervalSet::from_ranges(
        calls
            .iter()
            .map(|o| {
                (
                    o.start.max(w.start),
                    o.end.min(w.end).max(o.start.max(w.start)),
                )
            })
            .collect(),
    );
    let comm_ns = comm.total();
    let step_compute = IntervalSet::from_ranges(busy.compute.within(w.start, w.end));
    let exposed = comm.minus(&step_compute).minus(busy.waiting);
    let exposed_ns = exposed.total();
    if w.dur() <= 0 || (exposed_ns as f64) * 100.0 < th.exposed_comm_min_pct * w.dur() as f64 {
        return None;
    }
    let beside_comm = step_compute.intersect(&comm).total();
    let free_compute = (step_compute.total() - beside_comm).max(0);
    let hideable = exposed_ns.min(free_compute);
    let figures: Vec<Call> = calls
        .iter()
        .map(|o| {
            let dur = (o.end - o.start).max(1);
            let n = o.group_size.and_then(|g| usize::try_from(g).ok());
            Call {
                bytes: o.bytes,
                bus_gbps: o
                    .bytes
                    .zip(n)
                    .map(|(b, n)| b as f64 * crate::ranks::bus_factor(&o.name, n) / dur as f64),
                alg_gbps: o.bytes.map(|b| b as f64 / dur as f64),
            }
        })
        .collect();
    let sizes: Vec<i64> = figures.iter().filter_map(|c| c.bytes).collect();
    let median_bytes = crate::stats::median(sizes.clone());
    let bus = crate::stats::median_f64(figures.iter().filter_map(|c| c.bus_gbps).collect());
    let alg = crate::stats::median_f64(figures.iter().filter_map(|c| c.alg_gbps).collect());
    let needed = super::collectives::buckets_needed(sizes.iter().sum());
    let all_reduces = calls.iter().filter(|o| o.name == "all_reduce").count();
    // Many all-reduces against what DDP's default buckets would need: the rule of
    // `fragmented_collectives`.
    let fix = if sizes.len() == calls.len()
        && all_reduces >= 4
        && super::collectives::more_than_needed(all_reduces, needed, th)
    {
        Fix::Buckets
    } else if let (Some(c), Some(bus), Some(b)) = (class, bus, median_bytes)
        && b >= LARGE_CALL_BYTES
        && bus < SLOW_LINK_SHARE * c.link_busbw_gbps
    {
        Fix::Network
    } else {
        Fix::Overlap
    };
    let mut ops: Vec<String> = calls.iter().map(|o| o.name.clone()).collect();
    ops.sort();
    ops.dedup();
    let s = &t.steps[step];
    let size_text = match (sizes.iter().min(), sizes.iter().max()) {
        (Some(&lo), Some(&hi)) if lo == hi => format!(", {} each", bytes(lo)),
        (Some(&lo), Some(&hi)) => format!(", {}–{}", bytes(lo), bytes(hi)),
        _ => String::new(),
    };
    let bandwidth = match (bus, alg) {
        (Some(bus), _) => {
            let link = class.map_or_else(String::new, |c| {
                format!(
                    ", {:.0}% of the ~{:.0} GB/s an all-reduce reaches over {}",
                    bus * 100.0 / c.link_busbw_gbps,
                    c.link_busbw_gbps,
                    c.link
                )
            });
            format!("; bus bandwidth {}{link}", rate(bus))
        }
        (None, Some(alg)) => format!("; algorithm bandwidth {}", rate(alg)),
        (None, None) => String::new(),
    };
    let fix_text = match fix {
        Fix::Overlap => "it runs after the compute it could overlap",
        Fix::Buckets => "many calls well below DDP's 25 MiB bucket",
        Fix::Network => "large calls far below the link",
    };
    let title = format!(
        "{} exposes {} of {} on {who}: {} of communication in {} call{}{size_text}{bandwidth}; {fix_text}; hiding it behind compute saves up to {}",
        ops.join(", "),
        human_ns(exposed_ns),
        s.name,
        human_ns(comm_ns),
        calls.len(),
        if calls.len() == 1 { "" } else { "s" },
        human_ns(hideable)
    );
    // The calls with the most exposed time are the evidence.
    let mut by_exposed: Vec<(i64, &Occurrence)> = calls
        .iter()
        .map(|o| {
            let own = IntervalSet::from_ranges(vec![(o.start, o.end)]);
            (exposed.intersect(&own).total(), *o)
        })
        .collect();
    by_exposed.sort_by_key(|&(ns, o)| (std::cmp::Reverse(ns), o.start));
    let first = calls.first()?;
    let last = calls.last()?;
    Some(Raised {
        kind: FindingKind::ExposedCommunication,
        severity: Severity::of_share(hideable, w.dur()),
        title,
        step: Some(step),
        start_ns: first.start,
        end_ns: last.end,
        track: ctx.track_name(first.slice),
        ops,
        call_site: None,
        count: calls.len() as u64,
        lost_ns: hideable,
        evidence: by_exposed
            .iter()
            .take(MAX_EVIDENCE)
            .map(|(_, o)| ctx.evidence(o.slice))
            .collect(),
        cost: Cost::measured(source, exposed.iter().collect()),
        recommendation: match fix {
            Fix::Overlap => ADVICE_OVERLAP,
            Fix::Buckets => ADVICE_BUCKETS,
            Fix::Network => ADVICE_NETWORK,
        }
        .into(),
    })
}

fn bytes(b: i64) -> String {
    crate::units::human_bytes(b.unsigned_abs())
}

/// A bandwidth given in GB/s, in the unit that shows its digits.
fn rate(gbps: f64) -> String {
    if gbps >= 1.0 {
        format!("{gbps:.1} GB/s")
    } else {
        format!("{:.0} MB/s", gbps * 1000.0)
    }
}
