//! `unfused_optimizer`: the optimizer updates the parameters one at a time, a few small ops per
//! parameter, where a multi-tensor (`foreach=True`) or fused (`fused=True`) step issues each
//! operation once for all of them.
//!
//! Read inside each `Optimizer.step#<Class>.step` range: the ops the optimizer's own code
//! issues (outermost ops in the range, not the children a `_foreach_*` op falls back to on the
//! CPU). The step is a per-parameter loop when none of them is a multi-tensor or fused op
//! (`aten::_foreach_*`, `aten::_fused_*`, or a class named `Fused…`) and at least
//! `optimizer_loop_min_ops` of them are elementwise math on tensors (scalar bookkeeping such as
//! a step counter's `add_`, or AdamW's `step.item()` per parameter, is not counted).
//!
//! One finding per optimizer step; count = the per-parameter math ops. Lost time, the model: a
//! multi-tensor op costs about as much as one of the per-parameter ops it replaces (small
//! tensors are launch- and dispatch-bound), and the Python loop around them goes too, so the
//! fused step costs one call of each op name plus the optimizer's other ops (bookkeeping);
//! the rest of the `Optimizer.step` range is lost. It must reach `optimizer_loop_min_pct` of
//! the step: a loop that costs less is not worth changing the optimizer for.

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, DeviceKind, OpArg, SliceId};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::torch_ops::tensor_arg;
use super::{MAX_EVIDENCE, Under, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};

const OPTIMIZER_LOOP_MIN_OPS: Threshold = Threshold::int(
    "optimizer_loop_min_ops",
    8,
    "per-parameter math ops in one optimizer step before it counts as a loop.",
);

const OPTIMIZER_LOOP_MIN_PCT: Threshold = Threshold::float(
    "optimizer_loop_min_pct",
    5.0,
    "the loop's estimated cost must also reach this share of the step, percent.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "optimizer",
    raises: &[Raises::new(
        FindingKind::UnfusedOptimizer,
        Saves::DeviceWork,
    )],
    thresholds: &[OPTIMIZER_LOOP_MIN_OPS, OPTIMIZER_LOOP_MIN_PCT],
    advice: "Use the optimizer's foreach=True or fused=True implementation.",
    detect,
};

const STEP_PREFIX: &str = "Optimizer.step#";

/// Whether `name` is an optimizer annotation's class that already fuses its math.
fn is_fused_class(annotation: &str) -> bool {
    annotation
        .strip_prefix(STEP_PREFIX)
        .is_some_and(|class| class.contains("Fused"))
}

fn advice(device: DeviceKind) -> &'static str {
    match device {
        DeviceKind::Hpu => {
            "The optimizer updates one parameter at a time. On Gaudi use the fused optimizers \
             (habana_frameworks.torch.hpex.optimizers.FusedAdamW, FusedSGD) and FusedClipNorm \
             for gradient clipping: one fused kernel updates every parameter."
        }
        DeviceKind::Cpu => {
            "The optimizer updates one parameter at a time. Create it with fused=True (Adam, \
             AdamW, SGD and Adagrad have a fused CPU step since PyTorch 2.4) so one kernel \
             updates every parameter."
        }
        _ => {
            "The optimizer updates one parameter at a time, launching a few tiny kernels per \
             parameter. Create it with fused=True (or foreach=True) so each operation is issued \
             once for all parameters."
        }
    }
}

/// Outermost ops inside the optimizer range `step` on its thread: no op between them and the
/// step.
fn own_ops(ctx: &Context<'_>, step: SliceId) -> Vec<SliceId> {
    let t = ctx.timeline;
    // Without an op around the step (the usual case), "no op between" is "no op around it".
    let step_in_op = ctx.is_under(step, Under::OP);
    ctx.descendants(step)
        .filter(|&j| {
            t.slice_class(j) == CategoryClass::CpuOp
                && if step_in_op {
                    !ctx.ancestors(j)
                        .take_while(|&a| a != step)
                        .any(|a| t.slice_class(a) == CategoryClass::CpuOp)
                } else {
                    !ctx.is_under(j, Under::OP)
                }
        })
        .collect()
}

/// Whether an op's first input is a tensor of more than one element (shape unknown: assumed).
fn on_a_tensor(ctx: &Context<'_>, op: SliceId) -> bool {
    match tensor_arg(ctx, op, OpArg::InputDims, 0) {
        Some(shape) => shape.iter().product::<i64>() > 1,
        None => ctx.arg(op, OpArg::InputDims).is_none(),
    }
}

pub(crate) fn detect(ctx: &Context<'_>, shared: &super::Shared) -> Vec<Raised> {
    let t = ctx.timeline;
    let min_ops = ctx.thresholds.optimizer_loop_min_ops.max(2);
    let mut findings = Vec::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            let name = t.slice_name(i);
            if t.slice_class(i) != CategoryClass::UserAnnotation
                || !name.starts_with(STEP_PREFIX)
                || is_fused_class(name)
            {
                continue;
            }
            let ops = own_ops(ctx, i);
            if ops.iter().any(|&o| {
                let n = t.slice_name(o);
                n.starts_with("aten::_foreach_") || n.starts_with("aten::_fused_")
            }) {
                continue;
            }
            let (math, others): (Vec<SliceId>, Vec<SliceId>) = ops
                .into_iter()
                .partition(|&o| shared.is_pointwise_op(ctx, o) && on_a_tensor(ctx, o));
            let others_ns: i64 = others.iter().map(|&o| t.slices.dur[o as usize]).sum();
            if math.len() < min_ops {
                continue;
            }
            let Some(step) = ctx.step_at(track.source, t.slices.start[i as usize]) else {
                continue;
            };
            let f = finding(ctx, track.source, step, i, &math, others_ns);
            let step_ns = t.steps[step].dur as f64;
            if f.lost_ns as f64 * 100.0 >= ctx.thresholds.optimizer_loop_min_pct * step_ns {
                findings.push(f);
            }
        }
    }
    findings
}

fn finding(
    ctx: &Context<'_>,
    source: u16,
    step: usize,
    annotation: SliceId,
    math: &[SliceId],
    others_ns: i64,
) -> Raised {
    let t = ctx.timeline;
    let s = &t.steps[step];
    // Per op name: (calls, total time).
    let mut by_name: FxHashMap<u32, (i64, i64)> = FxHashMap::default();
    for &o in math {
        let e = by_name.entry(t.slices.name[o as usize]).or_insert((0, 0));
        e.0 += 1;
        e.1 += t.slices.dur[o as usize];
    }
    let one_each: i64 = by_name.values().map(|&(n, d)| d / n.max(1)).sum();
    // The loop's whole range: its ops and the Python between them, per parameter.
    let total = t.slices.dur[annotation as usize];
    let lost = (total - one_each - others_ns).max(0);
    let params = by_name.values().map(|v| v.0).min().unwrap_or(0);
    let mut names: Vec<(String, i64)> = by_name
        .iter()
        .map(|(&id, &(n, _))| (t.strings.get(id).to_owned(), n))
        .collect();
    names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let class = t
        .slice_name(annotation)
        .trim_start_matches(STEP_PREFIX)
        .split('.')
        .next()
        .unwrap_or("optimizer")
        .to_owned();
    Raised {
        kind: FindingKind::UnfusedOptimizer,
        severity: Severity::of_share(lost, s.dur),
        title: format!(
            "{class} step issues {} small ops one parameter at a time (about {params} parameters) in {}: {} of {}",
            math.len(),
            s.name,
            human_ns(lost),
            human_ns(total)
        ),
        step: Some(step),
        start_ns: t.slices.start[annotation as usize],
        end_ns: t.slices.end(annotation),
        track: ctx.track_name(annotation),
        ops: names.into_iter().map(|(n, _)| n).collect(),
        call_site: ctx.call_site(annotation),
        count: math.len() as u64,
        lost_ns: lost,
        evidence: std::iter::once(annotation)
            .chain(math.iter().copied())
            .take(MAX_EVIDENCE)
            .map(|i| ctx.evidence(i))
            .collect(),
        cost: Cost::measured(
            source,
            vec![(
                t.slices.start[annotation as usize],
                t.slices.end(annotation),
            )],
        ),
        recommendation: advice(t.device.kind).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::is_fused_class;

    #[test]
    fn fused_classes() {
        assert!(is_fused_class("Optimizer.step#FusedAdam.step"));
        assert!(is_fused_class("Optimizer.step#DeepSpeedFusedLamb.step"));
        assert!(!is_fused_class("Optimizer.step#AdamW.step"));
    }
}
