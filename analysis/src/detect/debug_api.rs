//! `debug_api_enabled`: a debugging API left on in the training loop.
//!
//! - **Anomaly detection** (`torch.autograd.set_detect_anomaly(True)` / `detect_anomaly()`):
//!   after every backward node the engine checks each gradient it produced for NaN. Nothing else
//!   marks the mode in a trace; the checks are ops directly under the engine's
//!   `autograd::engine::evaluate_function: <Node>` range, beside the node itself: `aten::isnan`,
//!   `aten::_is_any_true` (> `aten::any`; plain `aten::any` in older releases) and `aten::item`
//!   (a host read of the result, a device sync per gradient on accelerators).
//! - **`torch.autograd.gradcheck` / `gradgradcheck`**: only visible through Python frames
//!   (`with_stack=True`): `torch/autograd/gradcheck.py(…): gradcheck` and `…: gradgradcheck`
//!   (gradgradcheck runs gradcheck inside: counted once, as gradgradcheck).
//!
//! Anomaly mode also records a Python stack for every autograd node the forward pass creates,
//! inside the op that creates it: the trace shows it only as those ops' self time. Its cost is
//! estimated per node from the view ops (whose own work is negligible) that recorded a node,
//! less the same views that recorded none, times the forward ops that recorded a node (a
//! `Sequence number` arg outside the backward pass; needs `record_shapes`-era Kineto args).
//!
//! `record_function` ranges and nested profilers cannot be told from intended instrumentation in
//! a trace, so they are not reported. One finding per step and API.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use steplens_ingest::model::{CategoryClass, SliceId, StrId};

use super::registry::{Detector, Raises, Saves};
use super::torch_ops::{children, in_backward};
use super::{MAX_EVIDENCE, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use crate::op_names::EVALUATE_PREFIX;
/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "debug_api",
    raises: &[Raises::new(FindingKind::DebugApiEnabled, Saves::HostTime)],
    thresholds: &[],
    advice: "Turn off anomaly detection, profiler debug APIs and synchronous launches outside debugging.",
    detect: |ctx, _| detect(ctx),
};

/// Ops anomaly mode adds after each backward node, directly under its `evaluate_function`.
const NAN_CHECK_OPS: &[&str] = &[
    "aten::isnan",
    "aten::_is_any_true",
    "aten::any",
    "aten::item",
];

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Api {
    Anomaly,
    GradCheck,
    GradGradCheck,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    // Names are interned: classify each distinct name once, compare ids per slice.
    let check_ids: FxHashSet<StrId> = NAN_CHECK_OPS
        .iter()
        .filter_map(|n| t.strings.lookup(n))
        .collect();
    let gradcheck_ids: FxHashMap<StrId, Api> = t
        .strings
        .iter()
        .filter_map(|(id, name)| gradcheck_frame(name).map(|api| (id, api)))
        .collect();
    if check_ids.is_empty() && gradcheck_ids.is_empty() {
        return Vec::new();
    }
    let gradcheck_of = |s: SliceId| {
        if t.slice_class(s) != CategoryClass::PythonFunction {
            return None;
        }
        gradcheck_ids.get(&t.slices.name[s as usize]).copied()
    };
    let mut groups: BTreeMap<(u16, Option<usize>, Api), Vec<SliceId>> = BTreeMap::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            let api = if check_ids.contains(&t.slices.name[i as usize])
                && t.slice_class(i) == CategoryClass::CpuOp
            {
                let parent = t.slices.parent[i as usize];
                if !t.slice_name(parent).starts_with(EVALUATE_PREFIX) {
                    continue;
                }
                Api::Anomaly
            } else if let Some(api) = gradcheck_of(i) {
                // Outermost only: gradgradcheck calls gradcheck, which recurses.
                if ctx.ancestors(i).any(|a| gradcheck_of(a).is_some()) {
                    continue;
                }
                api
            } else {
                continue;
            };
            if ctx.under_compile(i) {
                continue;
            }
            let step = ctx.step_at(track.source, t.slices.start[i as usize]);
            groups.entry((track.source, step, api)).or_default().push(i);
        }
    }
    groups
        .into_iter()
        .filter_map(|((_, step, api), slices)| finding(ctx, step, api, &slices))
        .collect()
}

/// Which gradcheck entry point a Python frame name is (`torch/autograd/gradcheck.py(2045):
/// gradcheck`).
fn gradcheck_frame(name: &str) -> Option<Api> {
    let (file, func) = name.rsplit_once("): ")?;
    if !file.contains("autograd/gradcheck.py(") {
        return None;
    }
    match func {
        "gradcheck" => Some(Api::GradCheck),
        "gradgradcheck" => Some(Api::GradGradCheck),
        _ => None,
    }
}

fn finding(ctx: &Context<'_>, step: Option<usize>, api: Api, slices: &[SliceId]) -> Option<Raised> {
    let t = ctx.timeline;
    let count_of = |name: &str| slices.iter().filter(|&&i| t.slice_name(i) == name).count();
    let checks = count_of("aten::isnan");
    // Anomaly mode needs the NaN test and its reduction; an isolated `item` under a node is not it.
    if api == Api::Anomaly
        && (checks == 0 || count_of("aten::_is_any_true") + count_of("aten::any") == 0)
    {
        return None;
    }
    let first = *slices.first()?;
    let checks_ns: i64 = slices.iter().map(|&i| t.slices.dur[i as usize]).sum();
    // Anomaly mode also records a Python stack for every autograd node the forward pass makes.
    let capture = match (api, step) {
        (Api::Anomaly, Some(step)) => stack_capture(ctx, step),
        _ => StackCapture::default(),
    };
    let lost = checks_ns + capture.cost_ns;
    let start = t.slices.start[first as usize];
    let end = slices
        .iter()
        .map(|&i| t.slices.end(i))
        .max()
        .unwrap_or(start);
    // A gradcheck frame's own `CallFrom` is the user's line: resolve it from inside the frame.
    let site = match api {
        Api::Anomaly => ctx.call_site(first),
        Api::GradCheck | Api::GradGradCheck => children(t, first)
            .next()
            .and_then(|c| ctx.call_site(c))
            .or_else(|| ctx.call_site(first)),
    };
    let step_name = step.map(|i| t.steps[i].name.clone());
    let step_ns = step.map_or(0, |i| t.steps[i].dur);
    let in_step = step_name
        .as_deref()
        .map_or_else(String::new, |s| format!(" in {s}"));
    let (title, ops, count, recommendation) = match api {
        Api::Anomaly => {
            let nodes = {
                let mut parents: Vec<SliceId> = slices
                    .iter()
                    .map(|&i| t.slices.parent[i as usize])
                    .collect();
                parents.sort_unstable();
                parents.dedup();
                parents.len()
            };
            let mut ops: Vec<String> = slices.iter().map(|&i| t.slice_name(i).to_owned()).collect();
            ops.sort();
            ops.dedup();
            (
                format!(
                    "autograd anomaly detection is on: {checks} gradient NaN checks after \
                     {nodes} backward nodes{} ({}{in_step})",
                    if capture.recording_ops.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ", a stack recorded for each of {} forward autograd nodes (≈ {} each)",
                            capture.recording_ops.len(),
                            human_ns(capture.per_node_ns)
                        )
                    },
                    human_ns(lost)
                ),
                ops,
                checks as u64,
                "torch.autograd.set_detect_anomaly(True) (or the detect_anomaly() context) \
                 makes every backward node scan each gradient it produces for NaN and read the \
                 answer on the host — a device sync per gradient on an accelerator — and records \
                 a Python stack for every forward op. Use it to hunt down a NaN, then turn it off \
                 (set_detect_anomaly(False), or drop the context manager) for real training runs.",
            )
        }
        Api::GradCheck | Api::GradGradCheck => {
            let func = if api == Api::GradCheck {
                "gradcheck"
            } else {
                "gradgradcheck"
            };
            (
                format!(
                    "torch.autograd.{func} runs in the training loop: {} call{} ({}{in_step})",
                    slices.len(),
                    if slices.len() == 1 { "" } else { "s" },
                    human_ns(lost)
                ),
                vec![format!("torch.autograd.{func}")],
                slices.len() as u64,
                "gradcheck/gradgradcheck compare analytical gradients with finite differences, \
                 evaluating the function many times (in double precision): a correctness test, \
                 not part of training. Move it to the test suite, or run it once on a small input \
                 before the training loop.",
            )
        }
    };
    Some(Raised {
        kind: FindingKind::DebugApiEnabled,
        severity: Severity::of_share(lost, step_ns),
        title,
        step,
        start_ns: start,
        end_ns: end,
        track: ctx.track_name(first),
        ops,
        call_site: site,
        count,
        lost_ns: lost,
        cost: Cost::pattern(
            t.slice_track(first).map_or(0, |tr| tr.source),
            slices
                .iter()
                .chain(&capture.recording_ops)
                .map(|&i| (t.slices.start[i as usize], t.slices.end(i)))
                .collect(),
        ),
        evidence: slices
            .iter()
            .take(MAX_EVIDENCE)
            .map(|&i| ctx.evidence(i))
            .collect(),
        recommendation: recommendation.into(),
    })
}

/// Ops that only make a view: their own work is a few hundred nanoseconds of metadata, so in
/// anomaly mode their self time is almost all the stack capture of the node they record.
const VIEW_OPS: &[&str] = &[
    "aten::view",
    "aten::_unsafe_view",
    "aten::transpose",
    "aten::t",
    "aten::permute",
    "aten::expand",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::select",
    "aten::slice",
    "aten::as_strided",
    "aten::alias",
    "aten::unflatten",
];

/// The forward cost of anomaly mode in one step.
#[derive(Default)]
struct StackCapture {
    /// Forward ops that recorded an autograd node (a `Sequence number` outside the backward).
    recording_ops: Vec<SliceId>,
    /// Estimated stack capture per node, ns.
    per_node_ns: i64,
    /// `per_node_ns` × the recording ops, ns.
    cost_ns: i64,
}

/// Anomaly mode's stack capture in step `step`: per node, the median self time of the view ops
/// that recorded a node less that of the same views that recorded none (in the backward pass,
/// under `no_grad`); times the forward ops that recorded a node. Nothing without such views.
fn stack_capture(ctx: &Context<'_>, step: usize) -> StackCapture {
    let t = ctx.timeline;
    let s = &t.steps[step];
    let mut recording = Vec::new();
    let mut view_with: Vec<i64> = Vec::new();
    let mut view_without: Vec<i64> = Vec::new();
    for (_, track) in ctx.host_tracks() {
        if t.step_source(track.source) != s.source {
            continue;
        }
        for i in t.track_slices_between(track, s.start, s.end()) {
            if t.slice_class(i) != CategoryClass::CpuOp {
                continue;
            }
            let name = t.slice_name(i);
            let is_view = VIEW_OPS.contains(&name);
            let backward = in_backward(ctx, i) || name.contains("Backward");
            let records = !backward && t.arg_raw(i, "Sequence number").is_some();
            if records {
                recording.push(i);
            }
            if is_view {
                let own = t.slices.dur[i as usize]
                    - children(t, i)
                        .map(|c| t.slices.dur[c as usize])
                        .sum::<i64>();
                if records {
                    view_with.push(own);
                } else {
                    view_without.push(own);
                }
            }
        }
    }
    let median = |v: &mut Vec<i64>| crate::stats::median(std::mem::take(v));
    let Some(with) = median(&mut view_with) else {
        return StackCapture::default();
    };
    let per_node_ns = (with - median(&mut view_without).unwrap_or(0)).max(0);
    StackCapture {
        cost_ns: per_node_ns * recording.len() as i64,
        per_node_ns,
        recording_ops: recording,
    }
}

#[cfg(test)]
mod tests {
    use super::{Api, gradcheck_frame};

    #[test]
    fn gradcheck_frames() {
        assert!(matches!(
            gradcheck_frame("torch/autograd/gradcheck.py(2045): gradcheck"),
            Some(Api::GradCheck)
        ));
        assert!(matches!(
            gradcheck_frame(
                "/usr/lib/python3/site-packages/torch/autograd/gradcheck.py(2182): gradgradcheck"
            ),
            Some(Api::GradGradCheck)
        ));
        assert!(gradcheck_frame("torch/autograd/gradcheck.py(635): <genexpr>").is_none());
        assert!(gradcheck_frame("mytests.py(10): gradcheck").is_none());
    }
}
