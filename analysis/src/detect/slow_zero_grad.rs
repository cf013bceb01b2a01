//! `slow_zero_grad`: gradients are zeroed in place every step (`zero_grad(set_to_none=False)`),
//! so every gradient buffer is written with zeros and backward then reads, adds and writes it
//! again instead of just storing the new gradient.
//!
//! The pattern, not the duration: user-level `aten::zero_` / `aten::_foreach_zero_` ops (not
//! inside another op: the `aten::zero_` calls inside backward kernels such as
//! `aten::nll_loss_backward` or `aten::max_pool2d_with_indices_backward` are the kernels' own),
//! typically under `Optimizer.zero_grad#…` or directly under the step for
//! `nn.Module.zero_grad(set_to_none=False)`, **and** `torch::autograd::AccumulateGrad` nodes doing
//! `aten::add_` into gradients of the same shapes in the same step (with gradients set to `None`
//! AccumulateGrad takes the new gradient over with `aten::detach`, no add). Zeroed tensors are
//! paired with AccumulateGrad additions by shape, so zeroing an unrelated buffer does not count.
//! One finding per step.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, OpArg, SliceId};

use super::registry::{Detector, Raises, Saves};
use super::torch_ops::{children, tensor_arg, tensor_list_arg};
use super::{MAX_EVIDENCE, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "slow_zero_grad",
    raises: &[Raises::new(FindingKind::SlowZeroGrad, Saves::HostTime)],
    thresholds: &[],
    advice: "Call optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0).",
    detect: |ctx, _| detect(ctx),
};

/// In-place zeroing ops a `zero_grad(set_to_none=False)` issues.
const ZEROING_OPS: &[&str] = &["aten::zero_", "aten::_foreach_zero_"];

/// The autograd node that accumulates a leaf's gradient.
const ACCUMULATE_GRAD: &str = "torch::autograd::AccumulateGrad";

/// Annotation prefix of `Optimizer.zero_grad`.
const OPTIMIZER_ZERO_GRAD: &str = "Optimizer.zero_grad#";

#[derive(Default)]
struct StepOps {
    /// User-level zeroing ops with the shapes they zero.
    zeroing: Vec<(SliceId, Vec<Vec<i64>>)>,
    /// `aten::add_` inside AccumulateGrad, with the gradient's shape.
    adds: Vec<(SliceId, Vec<i64>)>,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let zero_ids: Vec<_> = ZEROING_OPS
        .iter()
        .filter_map(|n| t.strings.lookup(n))
        .collect();
    let Some(acc_id) = t.strings.lookup(ACCUMULATE_GRAD) else {
        return Vec::new();
    };
    let Some(add_id) = t.strings.lookup("aten::add_") else {
        return Vec::new();
    };
    if zero_ids.is_empty() {
        return Vec::new();
    }
    let mut per_step: BTreeMap<(u16, Option<usize>), StepOps> = BTreeMap::new();
    for (_, track) in ctx.host_tracks() {
        for i in track.slices.clone() {
            let name = t.slices.name[i as usize];
            if t.slice_class(i) != CategoryClass::CpuOp {
                continue;
            }
            let start = t.slices.start[i as usize];
            if zero_ids.contains(&name) {
                // User level: no op around it (a backward kernel's own zeroing is not).
                if inside_op(ctx, i) || ctx.under_compile(i) {
                    continue;
                }
                let shapes = if t.slice_name(i) == "aten::_foreach_zero_" {
                    tensor_list_arg(ctx, i, OpArg::InputDims, 0)
                } else {
                    tensor_arg(ctx, i, OpArg::InputDims, 0).map(|s| vec![s])
                };
                let Some(shapes) = shapes else {
                    continue;
                };
                let step = ctx.step_at(track.source, start);
                per_step
                    .entry((track.source, step))
                    .or_default()
                    .zeroing
                    .push((i, shapes));
            } else if name == acc_id {
                for c in children(t, i) {
                    if t.slices.name[c as usize] != add_id {
                        continue;
                    }
                    let Some(shape) = tensor_arg(ctx, c, OpArg::InputDims, 0) else {
                        continue;
                    };
                    let step = ctx.step_at(track.source, start);
                    per_step
                        .entry((track.source, step))
                        .or_default()
                        .adds
                        .push((c, shape));
                }
            }
        }
    }
    per_step
        .into_iter()
        .filter_map(|((_, step), ops)| finding(ctx, step, &ops))
        .collect()
}

/// Whether `slice` runs inside another op: a `cpu_op` ancestor, or the op rounding pushed it
/// out of. Traces with whole-µs timestamps show `aten::zeros [321, 324]` and its `aten::zero_` at
/// `[324, 324]`, which nests as a sibling; a zero-length op is taken to be inside the deepest
/// preceding `cpu_op` of another name that ends exactly where it starts (back-to-back `zero_`
/// calls of a `zero_grad` keep each other's company and stay user level).
fn inside_op(ctx: &Context<'_>, slice: SliceId) -> bool {
    let t = ctx.timeline;
    if ctx
        .ancestors(slice)
        .any(|a| t.slice_class(a) == CategoryClass::CpuOp)
    {
        return true;
    }
    let i = slice as usize;
    let Some(track) = t.slice_track(slice) else {
        return false;
    };
    if t.slices.dur[i] != 0 || slice == track.slices.start {
        return false;
    }
    let start = t.slices.start[i];
    let parent = t.slices.parent[i];
    let prev = slice - 1;
    std::iter::once(prev)
        .chain(ctx.ancestors(prev))
        .take_while(|&k| k != parent)
        .any(|k| {
            t.slice_class(k) == CategoryClass::CpuOp
                && t.slices.end(k) == start
                && t.slices.name[k as usize] != t.slices.name[i]
        })
}

fn finding(ctx: &Context<'_>, step: Option<usize>, ops: &StepOps) -> Option<Raised> {
    let t = ctx.timeline;
    if ops.zeroing.is_empty() || ops.adds.is_empty() {
        return None;
    }
    // Pair zeroed tensors with AccumulateGrad additions of the same shape: each zeroed shape
    // takes the earliest addition of that shape not taken yet (a queue per shape, so a model
    // with thousands of parameters is not paired in quadratic time).
    let mut adds_left: FxHashMap<&[i64], std::collections::VecDeque<SliceId>> =
        FxHashMap::default();
    for (add, shape) in &ops.adds {
        adds_left
            .entry(shape.as_slice())
            .or_default()
            .push_back(*add);
    }
    let mut zero_ops: Vec<SliceId> = Vec::new();
    let mut add_ops: Vec<SliceId> = Vec::new();
    for (op, shapes) in &ops.zeroing {
        let mut matched = false;
        for shape in shapes {
            if let Some(add) = adds_left
                .get_mut(shape.as_slice())
                .and_then(std::collections::VecDeque::pop_front)
            {
                add_ops.push(add);
                matched = true;
            }
        }
        if matched {
            zero_ops.push(*op);
        }
    }
    if zero_ops.is_empty() {
        return None;
    }
    add_ops.sort_unstable();
    let zero_ns: i64 = zero_ops.iter().map(|&i| t.slices.dur[i as usize]).sum();
    let add_ns: i64 = add_ops.iter().map(|&i| t.slices.dur[i as usize]).sum();
    let lost = zero_ns + add_ns;
    let grads = add_ops.len() as u64;
    let first = zero_ops[0];
    let start = zero_ops
        .iter()
        .chain(&add_ops)
        .map(|&i| t.slices.start[i as usize])
        .min()
        .unwrap_or(0);
    let end = zero_ops
        .iter()
        .chain(&add_ops)
        .map(|&i| t.slices.end(i))
        .max()
        .unwrap_or(start);
    let mut names: Vec<String> = zero_ops
        .iter()
        .map(|&i| t.slice_name(i).to_owned())
        .collect();
    names.sort();
    names.dedup();
    let mut per_name: FxHashMap<&str, usize> = FxHashMap::default();
    for &i in &zero_ops {
        *per_name.entry(t.slice_name(i)).or_insert(0) += 1;
    }
    let zero_text = names
        .iter()
        .map(|n| {
            let k = per_name.get(n.as_str()).copied().unwrap_or(0);
            format!("{k} × {n}")
        })
        .collect::<Vec<_>>()
        .join(" + ");
    let under = ctx
        .ancestors(first)
        .map(|a| t.slice_name(a))
        .find(|n| n.starts_with(OPTIMIZER_ZERO_GRAD))
        .map_or_else(
            || " (nn.Module.zero_grad or a manual loop)".to_owned(),
            |n| format!(" in {n}"),
        );
    names.push("aten::add_".to_owned());
    names.sort();
    let step_name = step.map(|i| t.steps[i].name.clone());
    let step_ns = step.map_or(0, |i| t.steps[i].dur);
    let title = format!(
        "gradients zeroed in place: {zero_text}{under}, then {grads} AccumulateGrad \
         aten::add_ ({} zeroing + {} adding{})",
        human_ns(zero_ns),
        human_ns(add_ns),
        step_name
            .as_deref()
            .map_or_else(String::new, |s| format!(" in {s}")),
    );
    let evidence = zero_ops
        .iter()
        .chain(&add_ops)
        .take(MAX_EVIDENCE)
        .map(|&i| ctx.evidence(i))
        .collect();
    Some(Raised {
        kind: FindingKind::SlowZeroGrad,
        severity: Severity::of_share(lost, step_ns),
        title,
        step,
        start_ns: start,
        end_ns: end,
        track: ctx.track_name(first),
        ops: names,
        call_site: ctx.call_site(first),
        count: grads,
        lost_ns: lost,
        cost: Cost::pattern(
            t.slice_track(first).map_or(0, |tr| tr.source),
            zero_ops
                .iter()
                .chain(&add_ops)
                .map(|&i| (t.slices.start[i as usize], t.slices.end(i)))
                .collect(),
        ),
        evidence,
        recommendation: "Drop the gradients instead of zeroing them: \
                         `optimizer.zero_grad(set_to_none=True)` (the default since PyTorch \
                         2.0), `model.zero_grad(set_to_none=True)`, or `p.grad = None`. Zeroing \
                         writes every gradient buffer once more, and backward then has to \
                         read-add-write into it instead of simply storing the new gradient. Keep \
                         `set_to_none=False` only if code reads `.grad` between zero_grad and \
                         backward and relies on zeros there."
            .into(),
    })
}
