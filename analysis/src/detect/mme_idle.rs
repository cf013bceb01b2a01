//! `mme_idle_behind_tpc` (Gaudi): the matrix engine sits idle while vector (TPC) kernels run,
//! with MME work on both sides of the stretch in the same step (or, without steps, the same
//! trace) — the graph serialises TPC work between matrix ops.
//!
//! Per window, the gaps inside the MME engines' busy union (after the first MME work, before
//! the last) are checked; the part of a gap during which a TPC engine ran is MME idle time
//! behind TPC work. A window is flagged when that time reaches `mme_idle_min_ns`. The finding
//! names the TPC kernels that filled the stretches, by time.

use rustc_hash::FxHashMap;
use steplens_ingest::model::{EngineClass, SliceId, TrackKind};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::{human_ns, ranked_names};
use crate::context::Context;
use crate::finding::{Cost, Evidence, FindingKind, Raised, Severity};
use steplens_ingest::intervals::IntervalSet;

const MME_IDLE_MIN_NS: Threshold = Threshold::int(
    "mme_idle_min_ns",
    20_000,
    "MME idle time behind TPC work per step must reach this, ns.",
);

const MME_IDLE_STRETCH_MIN_NS: Threshold = Threshold::int(
    "mme_idle_stretch_min_ns",
    10_000,
    "a stretch with less TPC work than this is node-to-node jitter, not counted, ns.",
);

const GRAPH_GAP_NS: Threshold = Threshold::int(
    "graph_gap_ns",
    100_000,
    "without steps, device work separated by this long with every engine idle belongs to different graph launches, ns.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "mme_idle",
    raises: &[Raises::new(
        FindingKind::MmeIdleBehindTpc,
        Saves::DeviceWork,
    )],
    thresholds: &[MME_IDLE_MIN_NS, MME_IDLE_STRETCH_MIN_NS, GRAPH_GAP_NS],
    advice: "Cut the vector (TPC) work between matrix ops: fuse or drop the elementwise and layout ops the MME waits behind.",
    detect: |ctx, _| detect(ctx),
};

/// TPC kernels named in a finding.
const TOP_KERNELS: usize = 5;
/// Stretches kept as evidence.
const MAX_EVIDENCE: usize = 10;

struct Engines {
    mme: Vec<(i64, i64)>,
    tpc: Vec<SliceId>,
}

/// Stretches of device work separated by at least `gap_ns` with every engine idle.
fn bursts(mme: &IntervalSet, tpc: &IntervalSet, gap_ns: i64) -> Vec<(Option<usize>, i64, i64)> {
    let all = IntervalSet::from_ranges(mme.iter().chain(tpc.iter()).collect());
    let mut out: Vec<(Option<usize>, i64, i64)> = Vec::new();
    for (a, b) in all.iter() {
        match out.last_mut() {
            Some(last) if a - last.2 < gap_ns => last.2 = b,
            _ => out.push((None, a, b)),
        }
    }
    out
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let mut per_source: FxHashMap<u16, Engines> = FxHashMap::default();
    for track in &t.tracks {
        let TrackKind::DeviceEngine { class, .. } = &track.kind else {
            continue;
        };
        if !matches!(class, EngineClass::Mme | EngineClass::Tpc) {
            continue;
        }
        let e = per_source.entry(track.source).or_insert_with(|| Engines {
            mme: Vec::new(),
            tpc: Vec::new(),
        });
        for i in track.slices.clone() {
            if !t.slice_class(i).is_device_work() {
                continue;
            }
            if *class == EngineClass::Mme {
                e.mme.push((t.slices.start[i as usize], t.slices.end(i)));
            } else {
                e.tpc.push(i);
            }
        }
    }
    let mut findings = Vec::new();
    for (source, engines) in per_source {
        if engines.mme.is_empty() || engines.tpc.is_empty() {
            continue;
        }
        let mme = IntervalSet::from_ranges(engines.mme);
        let mut tpc_slices = engines.tpc;
        tpc_slices.sort_by_key(|&i| t.slices.start[i as usize]);
        let tpc = IntervalSet::from_ranges(
            tpc_slices
                .iter()
                .map(|&i| (t.slices.start[i as usize], t.slices.end(i)))
                .collect(),
        );
        let longest_tpc = tpc_slices
            .iter()
            .map(|&i| t.slices.dur[i as usize])
            .max()
            .unwrap_or(0);
        // Windows: the steps of the input's clock, or without steps each burst of device work
        // (graph launches are separated by stretches with every engine idle).
        let step_source = t.step_source(source);
        let own: Vec<(Option<usize>, i64, i64)> = t
            .steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.source == step_source)
            .map(|(i, s)| (Some(i), s.start, s.end()))
            .collect();
        let steps = if own.is_empty() {
            bursts(&mme, &tpc, ctx.thresholds.graph_gap_ns)
        } else {
            own
        };
        for (step, from, to) in steps {
            let inside: Vec<(i64, i64)> = mme.overlapping(from, to).collect();
            let (Some(first), Some(last)) = (inside.first(), inside.last()) else {
                continue;
            };
            let mut stretches = Vec::new();
            for (gap_start, gap_end) in mme.gaps(first.1, last.0) {
                let behind = tpc.covered(gap_start, gap_end);
                if behind >= ctx.thresholds.mme_idle_stretch_min_ns {
                    stretches.push((gap_start, gap_end, behind));
                }
            }
            let lost: i64 = stretches.iter().map(|s| s.2).sum();
            if lost < ctx.thresholds.mme_idle_min_ns {
                continue;
            }
            // TPC kernels that ran in the stretches, by overlapped time.
            let mut by_kernel: FxHashMap<u32, i64> = FxHashMap::default();
            for &(a, b, _) in &stretches {
                let first_tpc =
                    tpc_slices.partition_point(|&i| t.slices.start[i as usize] < a - longest_tpc);
                for &i in tpc_slices[first_tpc..]
                    .iter()
                    .take_while(|&&i| t.slices.start[i as usize] < b)
                {
                    let overlap = t.slices.end(i).min(b) - t.slices.start[i as usize].max(a);
                    if overlap > 0 {
                        *by_kernel.entry(t.slices.name[i as usize]).or_insert(0) += overlap;
                    }
                }
            }
            let ops = ranked_names(t, by_kernel, TOP_KERNELS);
            let step_name = step.map(|s| t.steps[s].name.clone());
            let step_ns = step.map_or(last.1 - first.0, |s| t.steps[s].dur);
            let mut longest = stretches.clone();
            longest.sort_by(|x, y| y.2.cmp(&x.2).then(x.0.cmp(&y.0)));
            let where_ = step_name
                .as_deref()
                .map_or_else(String::new, |s| format!(" in {s}"));
            findings.push(Raised {
                kind: FindingKind::MmeIdleBehindTpc,
                severity: Severity::of_share(lost, step_ns),
                title: format!(
                    "MME idle {} behind TPC work{where_} ({} stretch{}{})",
                    human_ns(lost),
                    stretches.len(),
                    if stretches.len() == 1 { "" } else { "es" },
                    ops.first()
                        .map_or_else(String::new, |k| format!(", mostly {k}"))
                ),
                step,
                start_ns: stretches.first().map_or(first.0, |s| s.0),
                end_ns: stretches.last().map_or(last.1, |s| s.1),
                track: Some("MME".into()),
                ops,
                call_site: None,
                count: stretches.len() as u64,
                lost_ns: lost,
                cost: Cost::measured(
                    source,
                    stretches
                        .iter()
                        .flat_map(|&(a, b, _)| tpc.within(a, b))
                        .collect(),
                ),
                evidence: longest
                    .iter()
                    .take(MAX_EVIDENCE)
                    .map(|&(a, b, behind)| Evidence::MmeIdle {
                        mme_idle_start_ns: a,
                        mme_idle_end_ns: b,
                        tpc_busy_ns: behind,
                    })
                    .collect(),
                recommendation: "The matrix engine waits for vector kernels between its own \
                                 ops. Move reductions and similar math onto the MME (e.g. a \
                                 reduce_sum expressed as a matmul or convolution), fuse the TPC \
                                 ops, or reorder independent work so MME and TPC overlap."
                    .into(),
            });
        }
    }
    findings.sort_by_key(|f| f.start_ns);
    findings
}

#[cfg(test)]
mod tests {
    use steplens_ingest::TimelineBuilder;
    use steplens_ingest::model::{ArgsRef, LaneId};

    use crate::report::build_report;

    const US: i64 = 1_000;

    /// A lane name and its slices `(name, start µs, dur µs)`.
    type Lane<'a> = (&'a str, &'a [(&'a str, i64, i64)]);

    fn report(lanes: &[Lane<'_>]) -> crate::report::Report {
        let mut b = TimelineBuilder::default();
        let device = LaneId::Int(0);
        b.process_meta(0, device, Some("accel0".into()), Some("HPU 0".into()), None);
        let kernel = b.intern_cat("Kernel");
        for (tid, (lane, slices)) in lanes.iter().enumerate() {
            let tid = LaneId::Int(tid as i64);
            b.thread_meta(0, device, tid, Some((*lane).into()), None);
            let track = b.track(0, device, tid);
            for (name, start, dur) in *slices {
                let name = b.intern(name);
                b.push_slice(track, start * US, dur * US, name, kernel, ArgsRef::NONE);
            }
        }
        build_report(&b.finish())
    }

    #[test]
    fn tpc_between_mme_ops_is_flagged() {
        let r = report(&[
            ("[HD0] MME", &[("matmul_1", 0, 100), ("matmul_2", 400, 100)]),
            (
                "[HD0] TPC 0",
                &[("cast_f32", -50, 40), ("reduce_sum_fwd_f32", 100, 300)],
            ),
        ]);
        let f: Vec<_> = r
            .findings
            .iter()
            .filter(|f| f.kind == crate::finding::FindingKind::MmeIdleBehindTpc)
            .collect();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].lost_ns, 300 * US);
        assert_eq!(f[0].ops, ["reduce_sum_fwd_f32"]);
        assert_eq!(f[0].count, 1);
        assert_eq!(r.summary.mme_tpc_overlap_ns, Some(0));
    }

    #[test]
    fn tpc_overlapping_mme_or_outside_it_is_not() {
        // TPC work only before the first MME op and alongside MME work: nothing to flag.
        let r = report(&[
            ("[HD0] MME", &[("matmul_1", 0, 100), ("matmul_2", 105, 100)]),
            ("[HD0] TPC 0", &[("pack", -300, 290), ("relu", 20, 60)]),
        ]);
        assert!(
            r.findings.iter().all(|f| f.kind != "mme_idle_behind_tpc"),
            "{:?}",
            r.findings
        );
        assert_eq!(r.summary.mme_tpc_overlap_ns, Some(60 * US));
    }
}
