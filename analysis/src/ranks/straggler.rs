//! The `straggler` finding: a rank that arrives last at most collectives and computes longer
//! per step than the others' median; the ops that grew most on it, and the collectives it
//! arrived last at as its evidence.

use std::collections::BTreeMap;

use steplens_ingest::model::Timeline;

use super::{LateArrivals, Occurrence, RankStats, RankSummary};
use crate::finding::{Cost, FindingKind, Raised, Severity};
use crate::stats::median;

const STRAGGLER_ADVICE: &str = "One rank reaches the collectives late and every other rank \
    waits for it. Compare its step with the others: uneven data (bucket or pad batches to equal \
    cost), a slower data loader or host on that rank (more workers, pinned memory), a slower or \
    throttled device, or extra work only that rank does (logging, checkpointing, evaluation on \
    rank 0) moved out of the step.";

/// A rank that arrives last at most collectives (at least `straggler_min_collectives` matched,
/// and more than its fair share) and computes longer per step than the others' median.
pub(super) fn straggler(
    summaries: &[RankSummary],
    rows: &[RankStats],
    caused: &[i64],
    late: &LateArrivals,
    matched: usize,
    thresholds: &crate::thresholds::Thresholds,
) -> Vec<Raised> {
    let n = rows.len();
    if matched < thresholds.straggler_min_collectives || n < 2 {
        return Vec::new();
    }
    let Some((worst, row)) = rows
        .iter()
        .enumerate()
        .max_by_key(|(_, r)| (r.last_arrivals, std::cmp::Reverse(r.rank)))
    else {
        return Vec::new();
    };
    // Arriving last half the time with 2 ranks is chance; ask for clearly more than 1/n and
    // for a majority.
    if row.last_arrivals * 2 <= matched || row.last_arrivals * n <= matched * 2 {
        return Vec::new();
    }
    let others = rows
        .iter()
        .filter(|r| r.rank != row.rank)
        .filter_map(|r| r.compute_p50_ns)
        .collect();
    let Some(others_p50) = median(others) else {
        return Vec::new();
    };
    let extra = row.compute_p50_ns.unwrap_or(0) - others_p50;
    let step = row.step_p50_ns.unwrap_or(0).max(1);
    // Below `straggler_min_pct` of the step the others' wait is noise, not a straggler.
    if (extra as f64) * 100.0 < thresholds.straggler_min_pct * step as f64 {
        return Vec::new();
    }
    // What each other rank waits per step of its own: `caused` sums the waits of the n - 1
    // other ranks over their steps.
    let per_step_cost = caused[worst] / (row.steps.max(1) as i64 * (n as i64 - 1));
    // Where it happened: the collectives it arrived last at, on its own clock.
    let source = row.source as usize;
    let own: Vec<&Occurrence> = late
        .get(source)
        .into_iter()
        .flatten()
        .filter_map(|&(k, _)| summaries.get(source)?.collectives.get(k))
        .collect();
    let start_ns = own.iter().map(|o| o.start).min().unwrap_or(0);
    let end_ns = own.iter().map(|o| o.end).max().unwrap_or(0);
    let grew = grown_ops(summaries, row.source as usize);
    vec![Raised {
        kind: FindingKind::Straggler,
        severity: if extra * 5 >= step {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "rank {} arrives last at {} of {} collectives and computes {} longer per step than \
             the others' median{}; each other rank waits {} per step for it",
            row.rank,
            row.last_arrivals,
            matched,
            crate::units::human_ns(extra),
            if grew.is_empty() {
                String::new()
            } else {
                format!(" (grew most: {})", grew.join(", "))
            },
            crate::units::human_ns(per_step_cost)
        ),
        step: None,
        start_ns,
        end_ns,
        track: None,
        ops: Vec::new(),
        call_site: None,
        count: row.last_arrivals as u64,
        lost_ns: caused[worst],
        evidence: Vec::new(),
        cost: Cost {
            // Without its extra work the straggler arrives with the others: every rank's step
            // shortens by the others' average wait, at most by the straggler's extra compute;
            // the run saves that once per rank.
            measured_saving_ns: Some(crate::finding::run_saving_ns(
                (caused[worst] / (n as i64 - 1)).min(extra * row.steps.max(1) as i64),
                n,
            )),
            ..Cost::pattern(row.source, Vec::new())
        },
        recommendation: STRAGGLER_ADVICE.into(),
    }]
}

/// A straggler's evidence, where its trace is loaded: the collectives it arrived last at, the
/// ones that made the other ranks wait longest first, on the straggler's track.
pub(super) fn late_arrival_evidence(
    t: &Timeline,
    summaries: &[RankSummary],
    late: &LateArrivals,
    f: &mut Raised,
) {
    let Some(source) = f.cost.source.map(usize::from) else {
        return;
    };
    let (Some(summary), Some(arrivals)) = (summaries.get(source), late.get(source)) else {
        return;
    };
    let mut arrivals = arrivals.clone();
    arrivals.sort_by_key(|&(k, wait)| (std::cmp::Reverse(wait), k));
    f.evidence = arrivals
        .iter()
        .filter_map(|&(k, _)| summary.collectives.get(k))
        .filter(|o| (o.slice as usize) < t.slices.len())
        .take(crate::finding::MAX_EVIDENCE)
        .map(|o| crate::finding::Evidence::Slice {
            slice: o.slice,
            name: t.slice_name(o.slice).to_owned(),
            track: t.slice_track(o.slice).map(|tr| tr.name.clone()),
            start_ns: t.slices.start[o.slice as usize],
            dur_ns: t.slices.dur[o.slice as usize],
        })
        .collect();
    f.track = f.evidence.first().and_then(|e| match e {
        crate::finding::Evidence::Slice { track, .. } => track.clone(),
        _ => None,
    });
}

/// The ops whose self time per step on input `mine` most exceeds the other ranks' median.
fn grown_ops(summaries: &[RankSummary], mine: usize) -> Vec<String> {
    let per_rank: Vec<&BTreeMap<String, i64>> =
        summaries.iter().map(|s| &s.self_ns_per_step).collect();
    if mine >= per_rank.len() {
        return Vec::new();
    }
    let mut grown: Vec<(String, i64)> = per_rank[mine]
        .iter()
        .map(|(op, &ns)| {
            let others = per_rank
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != mine)
                .map(|(_, m)| m.get(op).copied().unwrap_or(0))
                .collect();
            (op.clone(), ns - median(others).unwrap_or(0))
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    grown.sort_by_key(|g| std::cmp::Reverse(g.1));
    grown
        .into_iter()
        .take(3)
        .map(|(op, d)| format!("{op} +{}", crate::units::human_ns(d)))
        .collect()
}
