//! Gaudi signals from the bridge's metrics file and from Synapse host lanes:
//! - `cpu_fallback`: ops the bridge ran on the CPU (`cpu_fallback.FallbackOps` of the last
//!   dump), with the host time of those ops where a trace shows them;
//! - `recompile`: graphs compiled after warm-up — the growth of `graph_compilation.TotalNumber`
//!   between `mark_step` dumps after the first `gaudi_warmup_steps`, and `synGraphCompile` calls
//!   inside steps after the warm-up steps.

use std::collections::BTreeMap;

use steplens_ingest::model::{CategoryClass, MetricDump};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::{MAX_EVIDENCE, human_ns};
use crate::context::Context;
use crate::finding::{Cost, Evidence, FindingKind, Raised, Severity};

const GAUDI_WARMUP_STEPS: Threshold = Threshold::int(
    "gaudi_warmup_steps",
    2,
    "graph compiles in the first this many steps (or `mark_step` metric dumps) are warm-up.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "gaudi",
    raises: &[
        Raises::new(FindingKind::CpuFallback, Saves::DeviceWork),
        Raises::new(FindingKind::Recompile, Saves::HostTime),
    ],
    thresholds: &[GAUDI_WARMUP_STEPS],
    advice: "Replace ops the Gaudi runs on the CPU with supported ones, and keep graph inputs static so the graph is not recompiled.",
    detect: |ctx, _| detect(ctx),
};

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let mut findings = cpu_fallback(ctx);
    let from_trace = compile_calls(ctx);
    // The metrics file counts the same compiles the trace shows; it only speaks when no loaded
    // trace has Synapse host lanes to place them in steps.
    if from_trace.is_empty() {
        findings.extend(metric_recompiles(ctx));
    }
    findings.extend(from_trace);
    findings.extend(new_graphs_without_host(ctx));
    findings
}

/// The graph index of a Synapse node name (`g_2_l1_fc1_gemm_0` → 2).
fn graph_index(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("g_")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.as_bytes().get(digits) != Some(&b'_') {
        return None;
    }
    rest[..digits].parse().ok()
}

/// A device-only capture (HW CSV, an `.hltv` without host lanes) shows no `synGraphCompile`,
/// but a graph compiled after the capture began shows up as node names with a graph index
/// never seen before (`g_2_…` after `g_0_…`/`g_1_…`), and the host compiled it while every
/// engine sat idle just before its first node. Graphs of the first derived iteration are the
/// loop's own; a new graph in a later iteration is a recompile. Lost time: the all-idle gap
/// before its first node (an estimate: the capture does not show the compile itself).
fn new_graphs_without_host(ctx: &Context<'_>) -> Vec<Raised> {
    use steplens_ingest::model::TrackKind;
    let t = ctx.timeline;
    let mut findings = Vec::new();
    for source in 0..t.sources.len() as u16 {
        let tracks: Vec<&steplens_ingest::model::Track> =
            t.tracks.iter().filter(|tr| tr.source == source).collect();
        let host = tracks.iter().any(|tr| tr.kind == TrackKind::HostThread);
        let steps: Vec<usize> = (0..t.steps.len())
            .filter(|&i| t.steps[i].source == source && t.steps[i].derived)
            .collect();
        if host || steps.len() < 2 {
            continue;
        }
        // First node of each graph index, and every device slice's range for the idle gap.
        let mut first_of: BTreeMap<u32, (i64, u32)> = BTreeMap::new();
        let mut busy: Vec<(i64, i64)> = Vec::new();
        for tr in &tracks {
            if !tr.kind.is_device() {
                continue;
            }
            for i in tr.slices.clone() {
                if !t.slice_class(i).is_device_work() {
                    continue;
                }
                let start = t.slices.start[i as usize];
                busy.push((start, t.slices.end(i)));
                if let Some(g) = graph_index(t.slice_name(i)) {
                    let e = first_of.entry(g).or_insert((start, i));
                    if start < e.0 {
                        *e = (start, i);
                    }
                }
            }
        }
        let busy = steplens_ingest::intervals::IntervalSet::from_ranges(busy);
        let loop_start = t.steps[steps[1]].start;
        for (graph, (start, slice)) in first_of {
            if start < loop_start {
                continue;
            }
            // The cost is the stretch with every engine idle that ends at the graph's first
            // node, if any (the host may have compiled while queued work kept the device busy).
            let idle = busy
                .gaps(t.steps[steps[0]].start, start)
                .last()
                .copied()
                // Shorter than the jitter threshold, it is launch jitter, not a compile stall.
                .filter(|g| g.1 == start && g.1 - g.0 >= ctx.thresholds.host_gap_min_ns);
            let lost = idle.map_or(0, |(from, to)| to - from);
            let (from, to) = idle.unwrap_or((start, start));
            // The iteration the host compiled in: where the idle stretch starts, else the one
            // that ran the new graph.
            let Some(step) = ctx
                .step_at(source, from)
                .or_else(|| ctx.step_at(source, start))
            else {
                continue;
            };
            let s = &t.steps[step];
            findings.push(Raised {
                kind: FindingKind::Recompile,
                severity: if lost > 0 {
                    Severity::of_share(lost, s.dur)
                } else {
                    Severity::Warning
                },
                title: if lost > 0 {
                    format!(
                        "graph g_{graph} first ran in the middle of the capture, in {}, after {} \
                         with every engine idle (the host compiling it)",
                        s.name,
                        human_ns(lost)
                    )
                } else {
                    format!(
                        "graph g_{graph} first ran in the middle of the capture, in {} (a \
                         compile; this capture does not show how long it took)",
                        s.name
                    )
                },
                step: Some(step),
                start_ns: from,
                end_ns: to.max(start),
                track: ctx.track_name(slice),
                ops: vec![format!("g_{graph}")],
                call_site: None,
                count: 1,
                lost_ns: lost,
                evidence: vec![ctx.evidence(slice)],
                recommendation: HPU_RECOMPILE_ADVICE.into(),
                // The compile itself is not in a device-only capture: the finding is the new
                // graph, whatever its visible cost, so no materiality floor applies.
                cost: Cost::pattern(source, idle.into_iter().collect()),
            });
        }
    }
    findings
}

fn last_dump<'t>(ctx: &Context<'t>, source: u16, metric: &str) -> Option<&'t MetricDump> {
    ctx.timeline
        .metrics
        .iter()
        .rev()
        .find(|d| d.source == source && d.metric == metric)
}

fn sources_with_metrics(ctx: &Context<'_>) -> Vec<u16> {
    let mut sources: Vec<u16> = ctx.timeline.metrics.iter().map(|d| d.source).collect();
    sources.sort_unstable();
    sources.dedup();
    sources
}

fn cpu_fallback(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let mut findings = Vec::new();
    for source in sources_with_metrics(ctx) {
        let Some(dump) = last_dump(ctx, source, "cpu_fallback") else {
            continue;
        };
        let ops: BTreeMap<String, u64> = dump
            .statistics
            .get("FallbackOps")
            .and_then(serde_json::Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(op, n)| {
                        Some((op.clone(), n.as_u64().or_else(|| n.as_str()?.parse().ok())?))
                    })
                    .filter(|(_, n)| *n > 0)
                    .collect()
            })
            .unwrap_or_default();
        if ops.is_empty() {
            continue;
        }
        // Host time of the fallen-back ops, where a loaded trace shows them.
        let mut evidence = Vec::new();
        let mut lost = 0;
        for (_, track) in ctx.host_tracks() {
            for i in track.slices.clone() {
                if t.slice_class(i) != CategoryClass::CpuOp {
                    continue;
                }
                let name = t.slice_name(i);
                let bare = name.strip_prefix("aten::").unwrap_or(name);
                if ops.contains_key(name) || ops.contains_key(bare) {
                    lost += t.slices.dur[i as usize];
                    if evidence.len() < MAX_EVIDENCE {
                        evidence.push(ctx.evidence(i));
                    }
                }
            }
        }
        let total: u64 = ops.values().sum();
        let mut listed: Vec<(&String, &u64)> = ops.iter().collect();
        listed.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let names: Vec<String> = listed.iter().map(|(op, _)| (*op).clone()).collect();
        let shown: Vec<String> = listed
            .iter()
            .take(5)
            .map(|(op, n)| format!("{op} ×{n}"))
            .collect();
        findings.push(Raised {
            kind: FindingKind::CpuFallback,
            severity: Severity::Warning,
            title: format!(
                "{total} op call{} fell back to the CPU: {}{}",
                if total == 1 { "" } else { "s" },
                shown.join(", "),
                if lost > 0 {
                    format!(" ({} on the host)", human_ns(lost))
                } else {
                    String::new()
                }
            ),
            step: None,
            start_ns: 0,
            end_ns: 0,
            track: None,
            ops: names,
            call_site: None,
            count: total,
            lost_ns: lost,
            evidence,
            // The ops may sit in any loaded trace; their count, not a time range, is the point.
            cost: Cost {
                pattern: true,
                ..Cost::default()
            },
            recommendation: "These ops have no HPU kernel for the given dtype or arguments, so \
                             their inputs travel to the host and back. Replace them with \
                             supported ops or dtypes, or move them out of the training step; \
                             LOG_LEVEL_PT_FALLBACK=1 logs each fallback with its reason."
                .into(),
        });
    }
    findings
}

fn metric_recompiles(ctx: &Context<'_>) -> Vec<Raised> {
    let warmup = ctx.thresholds.gaudi_warmup_steps;
    let mut findings = Vec::new();
    for source in sources_with_metrics(ctx) {
        let dumps: Vec<&MetricDump> = ctx
            .timeline
            .metrics
            .iter()
            .filter(|d| {
                d.source == source
                    && d.metric == "graph_compilation"
                    && d.triggered_by == "mark_step"
            })
            .collect();
        // Pair k spans mark_step k+2; steps 1..=warmup are warm-up.
        for (step, pair) in dumps.windows(2).enumerate().skip(warmup.saturating_sub(1)) {
            let count = |d: &MetricDump| d.number("TotalNumber").unwrap_or(0.0);
            let time_us = |d: &MetricDump| d.number("TotalTime").unwrap_or(0.0);
            let new = count(pair[1]) - count(pair[0]);
            if new < 1.0 {
                continue;
            }
            let lost = ((time_us(pair[1]) - time_us(pair[0])) * 1000.0).round() as i64;
            findings.push(Raised {
                kind: FindingKind::Recompile,
                severity: Severity::Warning,
                title: format!(
                    "{new:.0} HPU graph compile(s) after warm-up, at mark_step {} ({} compiling)",
                    step + 2,
                    human_ns(lost)
                ),
                step: None,
                start_ns: 0,
                end_ns: 0,
                track: None,
                ops: vec!["graph_compilation".into()],
                call_site: None,
                count: new as u64,
                lost_ns: lost.max(0),
                // A metrics-file count: no time range to own.
                cost: Cost::default(),
                evidence: vec![Evidence::Metric {
                    metric: "graph_compilation".into(),
                    generated_on: pair[1].generated_on.clone(),
                    total_number: count(pair[1]),
                }],
                recommendation: HPU_RECOMPILE_ADVICE.into(),
            });
        }
    }
    findings
}

const HPU_RECOMPILE_ADVICE: &str = "A new graph (recipe) was compiled after the warm-up steps: \
    input shapes or graph structure changed. Keep shapes static (pad or bucket them), avoid \
    data-dependent control flow between mark_steps, and consider \
    PT_HPU_ENABLE_REFINE_DYNAMIC_SHAPES=1 for truly dynamic inputs.";

fn compile_calls(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let warmup = ctx.thresholds.gaudi_warmup_steps;
    let mut per_step: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            if t.slice_name(i) != "synGraphCompile" {
                continue;
            }
            let Some(step) = ctx.step_at(track.source, t.slices.start[i as usize]) else {
                continue;
            };
            // An iteration derived from a Synapse-only capture starts at a graph launch, so a
            // compile falls just before the launch of the graph it made, in the iteration
            // before: whether it is past warm-up is told by the iteration that ran the new
            // recipe (its time stays where it was spent).
            let mut ran_in = step;
            if t.steps[step].derived
                && let Some(launch) = (i + 1..track.slices.end).find(|&j| {
                    t.slices.start[j as usize] >= t.slices.end(i)
                        && t.slice_name(j).starts_with("synLaunch")
                })
                && let Some(next) = ctx.step_at(track.source, t.slices.start[launch as usize])
            {
                ran_in = next;
            }
            // Warm-up counts per input: the first steps of its own step list.
            let index_in_source = t.steps[..ran_in]
                .iter()
                .filter(|s| s.source == t.steps[ran_in].source)
                .count();
            if index_in_source >= warmup {
                let calls = per_step.entry(step).or_default();
                // The bridge logs each Synapse call on two lanes; count it once.
                let same = |&j: &u32| {
                    t.slices.start[j as usize] < t.slices.end(i)
                        && t.slices.start[i as usize] < t.slices.end(j)
                };
                if !calls.iter().any(same) {
                    calls.push(i);
                }
            }
        }
    }
    per_step
        .into_iter()
        .map(|(step, calls)| {
            let s = &t.steps[step];
            let lost: i64 = calls.iter().map(|&i| t.slices.dur[i as usize]).sum();
            Raised {
                kind: FindingKind::Recompile,
                severity: Severity::of_share(lost, s.dur),
                title: format!(
                    "{} synGraphCompile call(s) in {} after warm-up ({} compiling)",
                    calls.len(),
                    s.name,
                    human_ns(lost)
                ),
                step: Some(step),
                start_ns: t.slices.start[calls[0] as usize],
                end_ns: calls
                    .iter()
                    .map(|&i| t.slices.end(i))
                    .max()
                    .unwrap_or(s.end()),
                track: ctx.track_name(calls[0]),
                ops: vec!["synGraphCompile".into()],
                call_site: ctx.call_site(calls[0]),
                count: calls.len() as u64,
                lost_ns: lost,
                evidence: calls
                    .iter()
                    .take(MAX_EVIDENCE)
                    .map(|&i| ctx.evidence(i))
                    .collect(),
                recommendation: HPU_RECOMPILE_ADVICE.into(),
                cost: Cost::measured(
                    s.source,
                    calls
                        .iter()
                        .map(|&i| (t.slices.start[i as usize], t.slices.end(i)))
                        .collect(),
                ),
            }
        })
        .collect()
}
