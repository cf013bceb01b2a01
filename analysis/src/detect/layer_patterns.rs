//! Layer patterns the performance guides advise against, read from the op sequence and the
//! `record_shapes` args of the forward pass:
//!
//! - `explicit_pad`: a pad op (`aten::pad` / `aten::constant_pad_nd`, outermost) whose output is
//!   the next convolution's input — the input shape grown in its trailing dimensions, the next
//!   convolution on the same thread. The convolution's own `padding=` does it without the copy.
//!   Counted per step and call site; lost = the pad op's time (the copy it makes) and its backward
//!   node's (found through the `fwdbwd` flow that leaves the pad). A pattern
//!   finding: the copy is small next to the convolution, but it is pure waste in every step, so
//!   it is reported whatever its share.
//! - `bias_before_batchnorm`: a convolution or linear with a bias (a non-empty third `Input Dims`
//!   entry) whose next op on the thread is `aten::batch_norm` over as many channels as the layer
//!   has outputs: the norm subtracts the mean, so the bias does nothing but cost a parameter and
//!   its gradient. One finding per step; count = such layers; a pattern finding (the bias add is
//!   fused into the layer's kernel, so no time of its own shows).

use std::collections::BTreeMap;

use steplens_ingest::model::{CategoryClass, OpArg, SliceId};

use super::registry::{Detector, Raises, Saves};
use super::torch_ops::tensor_arg;
use super::{at_site, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "layer_patterns",
    raises: &[
        Raises::new(FindingKind::ExplicitPad, Saves::DeviceWork),
        Raises::new(FindingKind::BiasBeforeBatchnorm, Saves::DeviceWork),
    ],
    thresholds: &[],
    advice: "Let the layer pad itself (padding=...), and drop the bias of a layer that batch norm follows (bias=False).",
    detect: |ctx, _| detect(ctx),
};

const PAD_OPS: &[&str] = &["aten::pad", "aten::constant_pad_nd"];
const CONV_OPS: &[&str] = &[
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::convolution",
    "aten::_convolution",
];
const BIASED_OPS: &[&str] = &[
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::linear",
];

const PAD_ADVICE: &str = "A separate pad copies the whole activation before the convolution \
    reads it. Give the convolution the padding instead (nn.Conv2d(..., padding=p), or \
    padding_mode='reflect'/'replicate' for non-zero padding) and drop the F.pad call.";

const BIAS_ADVICE: &str = "A batch norm right after this layer subtracts the mean, which \
    cancels the layer's bias: create the layer with bias=False to save the parameter, its \
    gradient and its optimizer update.";

/// Whether `slice` is an outermost op of one of `names` (not inside another of them).
fn outermost_of(ctx: &Context<'_>, slice: SliceId, names: &[&str]) -> bool {
    let t = ctx.timeline;
    names.contains(&t.slice_name(slice))
        && !ctx
            .ancestors(slice)
            .any(|a| names.contains(&t.slice_name(a)))
}

/// The first op (ATen, not a Python frame or annotation) that starts after `slice` ends on its
/// track, skipping scalar bookkeeping (BatchNorm's `num_batches_tracked.add_(1)` runs between a
/// layer and its norm).
fn next_op(ctx: &Context<'_>, slice: SliceId) -> Option<SliceId> {
    let t = ctx.timeline;
    let track = t.slice_track(slice)?;
    let end = t.slices.end(slice);
    let range = t.track_slices_between(track, end, i64::MAX);
    range.into_iter().find(|&j| {
        t.slice_class(j) == CategoryClass::CpuOp
            && !tensor_arg(ctx, j, OpArg::InputDims, 0).is_some_and(|shape| shape.is_empty())
    })
}

/// Whether `padded` is `shape` grown in some trailing dimensions (and equal elsewhere).
fn is_padded(shape: &[i64], padded: &[i64]) -> bool {
    shape.len() == padded.len()
        && shape.iter().zip(padded).all(|(a, b)| b >= a)
        && shape.iter().zip(padded).any(|(a, b)| b > a)
        && shape.first() == padded.first()
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let mut findings = explicit_pad(ctx);
    findings.extend(bias_before_batchnorm(ctx));
    findings
}

fn explicit_pad(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    if PAD_OPS.iter().all(|n| t.strings.lookup(n).is_none()) {
        return Vec::new();
    }
    // (source, step, call site) → pads.
    let mut groups: BTreeMap<(u16, usize, Option<String>), Vec<SliceId>> = BTreeMap::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            if !outermost_of(ctx, i, PAD_OPS) {
                continue;
            }
            let Some(shape) = tensor_arg(ctx, i, OpArg::InputDims, 0) else {
                continue;
            };
            let Some(next) = next_op(ctx, i).filter(|&j| CONV_OPS.contains(&t.slice_name(j)))
            else {
                continue;
            };
            if !tensor_arg(ctx, next, OpArg::InputDims, 0).is_some_and(|p| is_padded(&shape, &p)) {
                continue;
            }
            let Some(step) = ctx.step_at(track.source, t.slices.start[i as usize]) else {
                continue;
            };
            groups
                .entry((track.source, step, ctx.call_site(i)))
                .or_default()
                .push(i);
        }
    }
    let backward = pad_backward_nodes(ctx, groups.values().flatten().copied());
    groups
        .into_iter()
        .map(|((source, step, call_site), pads)| {
            let s = &t.steps[step];
            // The pad's copy, and its backward node (cutting the gradient back to size).
            let ranges: Vec<(i64, i64)> = pads
                .iter()
                .chain(pads.iter().filter_map(|p| backward.get(p)))
                .map(|&p| (t.slices.start[p as usize], t.slices.end(p)))
                .collect();
            let lost = steplens_ingest::intervals::IntervalSet::from_ranges(ranges.clone()).total();
            let first = pads[0];
            Raised {
                kind: FindingKind::ExplicitPad,
                severity: Severity::of_share(lost, s.dur),
                title: format!(
                    "{}× pad before a convolution{} in {} ({} copying)",
                    pads.len(),
                    at_site(call_site.as_deref()),
                    s.name,
                    human_ns(lost)
                ),
                step: Some(step),
                start_ns: t.slices.start[first as usize],
                end_ns: t.slices.end(first),
                track: ctx.track_name(first),
                ops: vec![t.slice_name(first).to_owned()],
                call_site,
                count: pads.len() as u64,
                lost_ns: lost,
                evidence: pads.iter().map(|&p| ctx.evidence(p)).collect(),
                cost: Cost::pattern(source, ranges),
                recommendation: PAD_ADVICE.into(),
            }
        })
        .collect()
}

/// The backward node of each pad op (its `evaluate_function` range), from the `fwdbwd` flows that
/// leave the pad or an op inside it.
fn pad_backward_nodes(
    ctx: &Context<'_>,
    pads: impl Iterator<Item = SliceId>,
) -> rustc_hash::FxHashMap<SliceId, SliceId> {
    let t = ctx.timeline;
    let mut pad_of: rustc_hash::FxHashMap<SliceId, SliceId> = rustc_hash::FxHashMap::default();
    for pad in pads {
        pad_of.insert(pad, pad);
        for d in ctx.descendants(pad) {
            pad_of.insert(d, pad);
        }
    }
    let mut out = rustc_hash::FxHashMap::default();
    if pad_of.is_empty() {
        return out;
    }
    for f in &t.flows {
        let Some(&pad) = pad_of.get(&f.from) else {
            continue;
        };
        let node = f.to;
        let parent = t.slices.parent.get(node as usize).copied();
        let range = parent
            .filter(|&p| {
                p != steplens_ingest::model::NO_PARENT
                    && t.slice_name(p)
                        .starts_with(crate::op_names::EVALUATE_PREFIX)
            })
            .unwrap_or(node);
        if t.slice_name(node).contains("Backward") {
            out.insert(pad, range);
        }
    }
    out
}

fn bias_before_batchnorm(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    if t.strings.lookup("aten::batch_norm").is_none() {
        return Vec::new();
    }
    let mut per_step: BTreeMap<(u16, usize), Vec<SliceId>> = BTreeMap::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            if !outermost_of(ctx, i, BIASED_OPS) {
                continue;
            }
            // A bias is the third input; its shape is [out_features].
            let Some(bias) = tensor_arg(ctx, i, OpArg::InputDims, 2).filter(|b| b.len() == 1)
            else {
                continue;
            };
            let Some(next) = next_op(ctx, i).filter(|&j| t.slice_name(j) == "aten::batch_norm")
            else {
                continue;
            };
            let channels =
                tensor_arg(ctx, next, OpArg::InputDims, 0).and_then(|s| s.get(1).copied());
            if channels != Some(bias[0]) {
                continue;
            }
            if let Some(step) = ctx.step_at(track.source, t.slices.start[i as usize]) {
                per_step.entry((track.source, step)).or_default().push(i);
            }
        }
    }
    per_step
        .into_iter()
        .map(|((source, step), layers)| {
            let s = &t.steps[step];
            let first = layers[0];
            let mut names: Vec<&str> = layers.iter().map(|&l| t.slice_name(l)).collect();
            names.dedup();
            Raised {
                kind: FindingKind::BiasBeforeBatchnorm,
                severity: Severity::Info,
                title: format!(
                    "{} layer(s) with a bias feed straight into batch norm in {} ({})",
                    layers.len(),
                    s.name,
                    crate::units::name_list(&names)
                ),
                step: Some(step),
                start_ns: t.slices.start[first as usize],
                end_ns: t.slices.end(first),
                track: ctx.track_name(first),
                ops: names.iter().map(|n| (*n).to_owned()).collect(),
                call_site: ctx.call_site(first),
                count: layers.len() as u64,
                lost_ns: 0,
                evidence: layers.iter().map(|&l| ctx.evidence(l)).collect(),
                cost: Cost::pattern(source, Vec::new()),
                recommendation: BIAS_ADVICE.into(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::is_padded;

    #[test]
    fn padded_shapes() {
        assert!(is_padded(&[8, 3, 32, 32], &[8, 3, 34, 34]));
        assert!(!is_padded(&[8, 3, 32, 32], &[8, 3, 32, 32]));
        assert!(!is_padded(&[8, 3, 32, 32], &[8, 3, 30, 30]));
        assert!(!is_padded(&[8, 3, 32], &[8, 3, 34, 34]));
        assert!(!is_padded(&[8, 3, 32, 32], &[16, 3, 34, 34]));
    }
}
