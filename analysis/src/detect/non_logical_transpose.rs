//! `non_logical_transpose`: a permute/transpose that moves the innermost (stride-1) dimension,
//! whose result is then materialized by a copy.
//!
//! Reordering axes is free (a view) until something needs the data contiguous. When the last
//! dimension stays last, that copy moves whole rows ("logical" transpose); when the last dimension
//! moves, every element is gathered with a stride ("non-logical"), which is what this detector
//! reports. Read from `record_shapes` args: `Input Dims`, `Input Strides` and `Concrete Inputs`
//! (the permutation) of the transpose-like op give the view's shape and strides; the copy is the
//! first later copy-family op on the same thread in the same step whose input has exactly that
//! shape and those strides (`aten::contiguous`, `aten::clone` to a fixed memory format,
//! `aten::copy_` from it, an `aten::reshape` that clones).
//!
//! What does not count:
//! - transposes inside another aten op (`aten::t` > `aten::transpose`, the transposes inside
//!   SDPA kernels, `aten::t` inside `aten::linear`): the op's implementation, not a layout choice;
//! - in the forward pass, copies made inside an unrelated op (`native_layer_norm` making its
//!   input contiguous) — only copies the user asks for (at user level, or nested only in other
//!   copy-family ops such as `flatten` > `reshape` > `clone`); in the backward pass every op is
//!   issued by autograd, so a copy anywhere in the backward counts (`PermuteBackward0`'s permute
//!   gathered by `native_layer_norm_backward`'s `contiguous`);
//! - anything under torch.compile's machinery.
//!
//! Findings group the pairs per step and call site (per op, permutation and shape without
//! Python frames); a backward pair is attributed, through the `fwdbwd` flow of its autograd
//! node, to the forward op's call site.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use steplens_ingest::model::{CategoryClass, OpArg, SliceId, StrId, Timeline};

use super::registry::{Detector, Raises, Saves, Threshold};
use super::torch_ops::{children, concrete_inputs, dtype_bytes, in_backward, ints, tensor_arg};
use super::{MAX_EVIDENCE, Under, human_ns};
use crate::context::Context;
use crate::finding::{Cost, FindingKind, Raised, Severity};
use crate::nodes::{DeviceNode, NodeKernels, device_nodes};
use crate::op_names::EVALUATE_PREFIX;
use crate::units::human_bytes;

const DEVICE_TRANSPOSE_MIN_PCT: Threshold = Threshold::float(
    "device_transpose_min_pct",
    2.0,
    "on Gaudi device lanes, transpose kernels (`transpose_*`, `DmaTranspose`) are flagged when they take at least this share of the step, percent.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "non_logical_transpose",
    raises: &[Raises::new(
        FindingKind::NonLogicalTranspose,
        Saves::DeviceWork,
    )],
    thresholds: &[DEVICE_TRANSPOSE_MIN_PCT],
    advice: "Keep the layout the next op wants (channels-last, a transposed weight kept once) instead of transposing and making it contiguous each step.",
    detect: |ctx, _| detect(ctx),
};

/// Transpose-like ops and how they permute their input.
const TRANSPOSE_OPS: &[&str] = &[
    "aten::permute",
    "aten::transpose",
    "aten::t",
    "aten::swapaxes",
    "aten::swapdims",
    "aten::movedim",
    "aten::moveaxis",
    "aten::numpy_T",
    "aten::mT",
    "aten::mH",
    "aten::adjoint",
];

/// Ops that can materialize a strided view.
const COPY_OPS: &[&str] = &[
    "aten::contiguous",
    "aten::clone",
    "aten::copy_",
    "aten::reshape",
];

/// Ops a user-level forward copy may sit in (they are themselves copies or reshapes).
const COPY_WRAPPERS: &[&str] = &[
    "aten::contiguous",
    "aten::clone",
    "aten::copy_",
    "aten::reshape",
    "aten::flatten",
    "aten::to",
    "aten::_to_copy",
];

/// A transpose-like op that qualifies (outside other ops, not under compile), with its view.
struct Candidate {
    op: SliceId,
    perm: Vec<usize>,
    in_dims: Vec<i64>,
    out_dims: Vec<i64>,
    out_strides: Vec<i64>,
    backward: bool,
    /// End of the window a copy must start in (the step's end).
    window_end: i64,
}

/// A copy-family op with the shape and strides of what it copies.
struct Copy {
    op: SliceId,
    start: i64,
    dims: Vec<i64>,
    strides: Vec<i64>,
    backward: bool,
    /// Whether a forward transpose may claim it (user-level or nested only in copy ops).
    user_level: bool,
}

/// What a copy reads: shape, strides, and whether it runs in the backward pass.
type ViewKey<'a> = (&'a [i64], &'a [i64], bool);

/// A non-logical transpose and the copy that materialized it.
struct Pair {
    transpose: SliceId,
    copy: SliceId,
    perm: Vec<usize>,
    in_dims: Vec<i64>,
    bytes: Option<i64>,
    /// The autograd node the transpose ran in (backward pairs).
    node: Option<SliceId>,
}

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Raised> {
    let mut findings = host_transposes(ctx);
    findings.extend(gaudi_device_transposes(ctx));
    findings
}

/// Gaudi: a transpose that materialises runs on the device as transpose nodes (TPC
/// `transpose_*` kernels) or `DmaTranspose` on a DMA engine — the device side of the same copy.
/// A node split over many engines is one transpose (`crate::nodes`); its cost is its wall time.
/// One finding per step, counted in nodes.
fn gaudi_device_transposes(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let mut per_step: BTreeMap<(u16, Option<usize>), Vec<&DeviceNode>> = BTreeMap::new();
    let nodes = device_nodes(t);
    let mut kernels: Vec<String> = Vec::new();
    let mut kernel_of: FxHashMap<SliceId, usize> = FxHashMap::default();
    let names = NodeKernels::new(t);
    for node in &nodes {
        let kernel = names.of(t, node.first);
        let lower = kernel.to_ascii_lowercase();
        if !(kernel.starts_with("DmaTranspose") || lower.starts_with("transpose")) {
            continue;
        }
        let k = kernels
            .iter()
            .position(|x| *x == kernel)
            .unwrap_or_else(|| {
                kernels.push(kernel);
                kernels.len() - 1
            });
        kernel_of.insert(node.first, k);
        let step = ctx.step_at(node.source, node.start);
        per_step.entry((node.source, step)).or_default().push(node);
    }
    let min_pct = ctx.thresholds.device_transpose_min_pct;
    let mut findings = Vec::new();
    for ((source, step), nodes) in per_step {
        let ranges: Vec<(i64, i64)> = nodes.iter().map(|n| (n.start, n.end)).collect();
        // Wall time: parallel engines, and nodes that overlap each other, count once.
        let lost = steplens_ingest::intervals::IntervalSet::from_ranges(ranges.clone()).total();
        let step_ns = step.map_or_else(
            || t.time_range().map_or(0, |(a, b)| b - a),
            |s| t.steps[s].dur,
        );
        // A few layout transposes are part of any compiled graph; flag them when they add up
        // to a visible share of the step.
        if (lost as f64) * 100.0 < min_pct * step_ns as f64 {
            continue;
        }
        let engine_ns: i64 = nodes.iter().map(|n| n.engine_ns).sum();
        let widest = nodes.iter().map(|n| n.engines).max().unwrap_or(1);
        let mut ops: Vec<String> = nodes
            .iter()
            .filter_map(|n| kernel_of.get(&n.first).map(|&k| kernels[k].clone()))
            .collect();
        ops.sort();
        ops.dedup();
        let step_name = step.map(|s| t.steps[s].name.clone());
        let where_ = step_name
            .as_deref()
            .map_or_else(String::new, |s| format!(" in {s}"));
        findings.push(Raised {
            kind: FindingKind::NonLogicalTranspose,
            severity: Severity::of_share(lost, step.map_or(0, |s| t.steps[s].dur)),
            title: format!(
                "{} device transpose node(s){where_}: {} moving data ({}; up to {widest} \
                 engines per node, {} engine time)",
                nodes.len(),
                human_ns(lost),
                crate::units::name_list(&ops),
                human_ns(engine_ns),
            ),
            step,
            start_ns: nodes.iter().map(|n| n.start).min().unwrap_or(0),
            end_ns: nodes.iter().map(|n| n.end).max().unwrap_or(0),
            track: nodes.first().and_then(|n| ctx.track_name(n.first)),
            ops,
            call_site: None,
            count: nodes.len() as u64,
            lost_ns: lost,
            evidence: nodes
                .iter()
                .take(MAX_EVIDENCE)
                .map(|n| ctx.evidence(n.first))
                .collect(),
            recommendation: "The device spends time transposing tensors in memory. Produce \
                             the layout the consumer needs where the data is made (the data \
                             loader or the producing op), or pick a permutation that keeps \
                             the innermost dimension in place."
                .into(),
            cost: Cost::measured(source, ranges),
        });
    }
    findings
}

fn host_transposes(ctx: &Context<'_>) -> Vec<Raised> {
    let t = ctx.timeline;
    let names = Names::new(t);
    if names.transposes.is_empty() || names.copies.is_empty() {
        return Vec::new();
    }
    let fwd_of = forward_ops(t);
    let mut pairs: Vec<Pair> = Vec::new();
    for (_, track) in ctx.host_tracks() {
        let mut candidates = Vec::new();
        let mut copy_ops = Vec::new();
        for i in track.slices.clone() {
            let name = t.slices.name[i as usize];
            if t.slice_class(i) != CategoryClass::CpuOp {
                continue;
            }
            if names.transposes.contains(&name) {
                if let Some(c) = candidate(ctx, &names, i) {
                    candidates.push(c);
                }
            } else if names.copies.contains(&name) {
                copy_ops.push(i);
            }
        }
        if candidates.is_empty() {
            continue;
        }
        // A copy pairs only with a candidate whose view has the shape it reads: the others'
        // strides (and their other args) are never read.
        let wanted: FxHashSet<&[i64]> = candidates.iter().map(|c| &c.out_dims[..]).collect();
        let copies: Vec<Copy> = copy_ops
            .into_iter()
            .filter_map(|i| copy(ctx, &names, &wanted, i))
            .collect();
        if copies.is_empty() {
            continue;
        }
        // Slices are in start order on a track: pair each candidate with the first unused
        // matching copy after it, looked up by what the copy reads.
        let mut by_input: FxHashMap<ViewKey<'_>, usize> = FxHashMap::default();
        let mut lists: Vec<Vec<usize>> = Vec::new();
        for (n, k) in copies.iter().enumerate() {
            let slot = *by_input
                .entry((&k.dims, &k.strides, k.backward))
                .or_insert_with(|| {
                    lists.push(Vec::new());
                    lists.len() - 1
                });
            lists[slot].push(n);
        }
        let mut used = vec![false; copies.len()];
        // Per list, the first copy not taken yet: taken copies are never scanned again.
        let mut first_free = vec![0usize; lists.len()];
        for c in candidates {
            let key = (&c.out_dims[..], &c.out_strides[..], c.backward);
            let Some(&slot) = by_input.get(&key) else {
                continue;
            };
            let list = &lists[slot];
            let cursor = &mut first_free[slot];
            while list.get(*cursor).is_some_and(|&n| used[n]) {
                *cursor += 1;
            }
            let start = t.slices.start[c.op as usize];
            let from = list
                .partition_point(|&n| copies[n].start <= start)
                .max(*cursor);
            let found = list[from..]
                .iter()
                .copied()
                .take_while(|&n| copies[n].start < c.window_end)
                .find(|&n| !used[n] && (c.backward || copies[n].user_level));
            let Some(n) = found else {
                continue;
            };
            let k = &copies[n];
            // The copy and the copies inside it (`contiguous` > `clone` > `copy_`) are taken.
            let k_end = t.slices.end(k.op);
            for (j, inner) in copies.iter().enumerate().skip(n) {
                if inner.start >= k_end && j > n {
                    break;
                }
                used[j] = true;
            }
            let node = if c.backward {
                ctx.ancestors(c.op)
                    .find(|&a| t.slice_class(a) == CategoryClass::CpuOp)
            } else {
                None
            };
            let bytes = dtype_bytes(ctx, c.op).map(|b| c.in_dims.iter().product::<i64>() * b);
            pairs.push(Pair {
                transpose: c.op,
                copy: k.op,
                perm: c.perm,
                in_dims: c.in_dims,
                bytes,
                node,
            });
        }
    }
    // Group per (input, step, backward?, call site or op + permutation + shape).
    let mut groups: BTreeMap<(u16, Option<usize>, bool, String), Vec<Pair>> = BTreeMap::new();
    for p in pairs {
        let Some(track) = t.slice_track(p.transpose) else {
            continue;
        };
        let start = t.slices.start[p.transpose as usize];
        let step = ctx.step_at(track.source, start);
        let site = call_site(ctx, &p, &fwd_of);
        let key = site.unwrap_or_else(|| {
            format!(
                "{} {:?} of {}",
                t.slice_name(p.transpose),
                p.perm,
                shape(&p.in_dims)
            )
        });
        groups
            .entry((track.source, step, p.node.is_some(), key))
            .or_default()
            .push(p);
    }
    groups
        .into_iter()
        .map(|((_, step, _, _), pairs)| finding(ctx, step, &pairs, &fwd_of))
        .collect()
}

/// Interned ids of the op names the detector looks at.
struct Names {
    transposes: FxHashSet<StrId>,
    copies: FxHashSet<StrId>,
    wrappers: FxHashSet<StrId>,
    clone: Option<StrId>,
}

impl Names {
    fn new(t: &Timeline) -> Self {
        let ids = |list: &[&str]| -> FxHashSet<StrId> {
            list.iter().filter_map(|n| t.strings.lookup(n)).collect()
        };
        Self {
            transposes: ids(TRANSPOSE_OPS),
            copies: ids(COPY_OPS),
            wrappers: ids(COPY_WRAPPERS),
            clone: t.strings.lookup("aten::clone"),
        }
    }
}

/// The innermost enclosing `cpu_op`, if any.
fn cpu_parent(ctx: &Context<'_>, slice: SliceId) -> Option<SliceId> {
    if !ctx.is_under(slice, Under::OP) {
        // Most ops are outermost: no walk up through their Python frames.
        return None;
    }
    ctx.ancestors(slice)
        .find(|&a| ctx.timeline.slice_class(a) == CategoryClass::CpuOp)
}

/// Whether `node` is an autograd node (`PermuteBackward0`), i.e. sits directly in the engine's
/// `evaluate_function` range, or is that range itself.
fn is_autograd_node(ctx: &Context<'_>, node: SliceId) -> bool {
    let t = ctx.timeline;
    t.slice_name(node).starts_with(EVALUATE_PREFIX)
        || t.slices
            .parent
            .get(node as usize)
            .is_some_and(|&p| t.slice_name(p).starts_with(EVALUATE_PREFIX))
}

fn candidate(ctx: &Context<'_>, names: &Names, op: SliceId) -> Option<Candidate> {
    let t = ctx.timeline;
    // Only transposes the user's code (or an autograd node) issues: not one inside `aten::t`,
    // an SDPA kernel, `aten::linear`, a compiled region.
    if let Some(parent) = cpu_parent(ctx, op)
        && (names.transposes.contains(&t.slices.name[parent as usize])
            || !is_autograd_node(ctx, parent))
    {
        return None;
    }
    if ctx.under_compile(op) {
        return None;
    }
    let in_dims = tensor_arg(ctx, op, OpArg::InputDims, 0)?;
    let in_strides = tensor_arg(ctx, op, OpArg::InputStrides, 0)?;
    if in_dims.len() != in_strides.len() {
        return None;
    }
    let perm = permutation(ctx, op, in_dims.len())?;
    let n = perm.len();
    let out_dims: Vec<i64> = perm.iter().map(|&d| in_dims[d]).collect();
    let out_strides: Vec<i64> = perm.iter().map(|&d| in_strides[d]).collect();
    // Non-logical: the last dimension moves and the view's innermost stride is no longer 1,
    // so a copy of it is a strided gather.
    let moves_last = n > 0 && perm[n - 1] != n - 1;
    if !moves_last || out_strides[n - 1] == 1 || out_dims[n - 1] <= 1 {
        return None;
    }
    let track = t.slice_track(op)?;
    let start = t.slices.start[op as usize];
    let window_end = match ctx.step_at(track.source, start) {
        Some(s) => t.steps[s].end(),
        // No step: stay inside the outermost slice around the transpose.
        None => ctx
            .ancestors(op)
            .last()
            .map_or_else(|| t.slices.end(op), |root| t.slices.end(root)),
    };
    Some(Candidate {
        op,
        perm,
        in_dims,
        out_dims,
        out_strides,
        backward: in_backward(ctx, op),
        window_end,
    })
}

/// The copy `op`, when it is one and reads a view of one of the `wanted` shapes.
fn copy(ctx: &Context<'_>, names: &Names, wanted: &FxHashSet<&[i64]>, op: SliceId) -> Option<Copy> {
    let t = ctx.timeline;
    let name = t.slice_name(op);
    if ctx.under_compile(op) {
        return None;
    }
    // `dst.copy_(src)` copies its second input.
    let index = usize::from(name == "aten::copy_");
    let dims = tensor_arg(ctx, op, OpArg::InputDims, index)?;
    if !wanted.contains(&dims[..]) {
        return None;
    }
    let copies = match name {
        // A reshape copies only when it clones; `contiguous` only when it has work to do.
        "aten::reshape" => children(t, op).any(|c| Some(t.slices.name[c as usize]) == names.clone),
        "aten::contiguous" => children(t, op).next().is_some(),
        // `clone()` keeps the strides (preserve_format) unless told a memory format.
        "aten::clone" => {
            let format = concrete_inputs(ctx, op)?
                .get(1)
                .cloned()
                .unwrap_or_default();
            !format.is_empty() && format != "1"
        }
        _ => true,
    };
    if !copies {
        return None;
    }
    let strides = tensor_arg(ctx, op, OpArg::InputStrides, index)?;
    let user_level = !ctx.is_under(op, Under::OP)
        || ctx
            .ancestors(op)
            .filter(|&a| t.slice_class(a) == CategoryClass::CpuOp)
            .all(|a| names.wrappers.contains(&t.slices.name[a as usize]));
    Some(Copy {
        op,
        start: t.slices.start[op as usize],
        dims,
        strides,
        backward: in_backward(ctx, op),
        user_level,
    })
}

/// A dimension index (negative counts from the end) as a position in `0..n`.
fn wrap(d: i64, n: usize) -> Option<usize> {
    let n = i64::try_from(n).ok()?;
    let d = if d < 0 { d + n } else { d };
    usize::try_from(d).ok().filter(|&d| (d as i64) < n)
}

/// The permutation a transpose-like op applies to an `n`-dimensional input: output dimension
/// `k` is input dimension `perm[k]`.
fn permutation(ctx: &Context<'_>, op: SliceId, n: usize) -> Option<Vec<usize>> {
    let t = ctx.timeline;
    let concrete = concrete_inputs(ctx, op).unwrap_or_default();
    let arg = |k: usize| concrete.get(k).and_then(|s| ints(s));
    let identity: Vec<usize> = (0..n).collect();
    let swap = |a: usize, b: usize| {
        let mut p = identity.clone();
        p.swap(a, b);
        p
    };
    let perm = match t.slice_name(op) {
        "aten::permute" => arg(1)?
            .into_iter()
            .map(|d| wrap(d, n))
            .collect::<Option<Vec<_>>>()?,
        "aten::transpose" | "aten::swapaxes" | "aten::swapdims" => {
            let a = wrap(*arg(1)?.first()?, n)?;
            let b = wrap(*arg(2)?.first()?, n)?;
            swap(a, b)
        }
        "aten::t" => {
            if n == 2 {
                vec![1, 0]
            } else {
                identity
            }
        }
        "aten::numpy_T" => (0..n).rev().collect(),
        "aten::mT" | "aten::mH" | "aten::adjoint" => {
            if n < 2 {
                return None;
            }
            swap(n - 2, n - 1)
        }
        "aten::movedim" | "aten::moveaxis" => {
            let src = arg(1)?
                .into_iter()
                .map(|d| wrap(d, n))
                .collect::<Option<Vec<_>>>()?;
            let dst = arg(2)?
                .into_iter()
                .map(|d| wrap(d, n))
                .collect::<Option<Vec<_>>>()?;
            if src.len() != dst.len() {
                return None;
            }
            let mut perm = vec![usize::MAX; n];
            for (&s, &d) in src.iter().zip(&dst) {
                perm[d] = s;
            }
            let mut rest = (0..n).filter(|d| !src.contains(d));
            for slot in perm.iter_mut().filter(|p| **p == usize::MAX) {
                *slot = rest.next()?;
            }
            perm
        }
        _ => return None,
    };
    // A valid permutation of 0..n.
    let mut seen = vec![false; n];
    if perm.len() != n {
        return None;
    }
    for &d in &perm {
        if d >= n || std::mem::replace(&mut seen[d], true) {
            return None;
        }
    }
    Some(perm)
}

/// Forward op of each autograd node, from the `fwdbwd` flows (forward op → backward node).
fn forward_ops(t: &Timeline) -> FxHashMap<SliceId, SliceId> {
    t.flows
        .iter()
        .filter(|f| t.categories.class(f.cat) == CategoryClass::Flow)
        .filter(|f| t.categories.name(f.cat) == "fwdbwd")
        .map(|f| (f.to, f.from))
        .collect()
}

/// The forward op a backward node was created by.
fn forward_of(
    t: &Timeline,
    node: SliceId,
    fwd_of: &FxHashMap<SliceId, SliceId>,
) -> Option<SliceId> {
    fwd_of.get(&node).copied().or_else(|| {
        let parent = *t.slices.parent.get(node as usize)?;
        fwd_of.get(&parent).copied()
    })
}

/// The user's line: the transpose's own, or for a backward pair the forward op's.
fn call_site(
    ctx: &Context<'_>,
    pair: &Pair,
    fwd_of: &FxHashMap<SliceId, SliceId>,
) -> Option<String> {
    match pair.node {
        None => ctx.call_site(pair.transpose),
        Some(node) => forward_of(ctx.timeline, node, fwd_of).and_then(|f| ctx.call_site(f)),
    }
}

fn shape(dims: &[i64]) -> String {
    let parts: Vec<String> = dims.iter().map(ToString::to_string).collect();
    format!("({})", parts.join(", "))
}

fn perm_text(perm: &[usize]) -> String {
    let parts: Vec<String> = perm.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn finding(
    ctx: &Context<'_>,
    step: Option<usize>,
    pairs: &[Pair],
    fwd_of: &FxHashMap<SliceId, SliceId>,
) -> Raised {
    let t = ctx.timeline;
    let first = &pairs[0];
    let lost: i64 = pairs.iter().map(|p| t.slices.dur[p.copy as usize]).sum();
    let bytes: Option<i64> = pairs.iter().map(|p| p.bytes).sum();
    let start = pairs
        .iter()
        .map(|p| t.slices.start[p.transpose as usize])
        .min()
        .unwrap_or(0);
    let end = pairs
        .iter()
        .map(|p| t.slices.end(p.copy))
        .max()
        .unwrap_or(start);
    let mut ops: Vec<String> = pairs
        .iter()
        .flat_map(|p| [t.slice_name(p.transpose), t.slice_name(p.copy)])
        .map(str::to_owned)
        .collect();
    ops.sort();
    ops.dedup();
    let site = call_site(ctx, first, fwd_of);
    let step_name = step.map(|i| t.steps[i].name.clone());
    let step_ns = step.map_or(0, |i| t.steps[i].dur);
    let op = t
        .slice_name(first.transpose)
        .strip_prefix("aten::")
        .unwrap_or_else(|| t.slice_name(first.transpose));
    let dtype = t
        .arg_str(first.transpose, "Input type")
        .and_then(|s| serde_json::from_str::<Vec<String>>(&s).ok())
        .and_then(|v| v.into_iter().next())
        .unwrap_or_default();
    let copy_name = t.slice_name(first.copy);
    let count = pairs.len() as u64;
    let mut title = format!(
        "non-logical {op} {} of {}{}{} materialized by {copy_name}",
        perm_text(&first.perm),
        shape(&first.in_dims),
        if dtype.is_empty() { "" } else { " " },
        dtype,
    );
    if let Some(node) = first.node {
        title.push_str(&format!(" in backward ({})", t.slice_name(node)));
        if let Some(s) = &site {
            title.push_str(&format!(", backward of {s}"));
        }
    } else if let Some(s) = &site {
        title.push_str(&format!(" at {s}"));
    }
    let mut cost = Vec::new();
    if count > 1 {
        cost.push(format!("{count}×"));
    }
    if let Some(b) = bytes {
        cost.push(format!("{} gathered", human_bytes(b.unsigned_abs())));
    }
    cost.push(format!("copy {}", human_ns(lost)));
    title.push_str(&format!(" ({})", cost.join(", ")));
    if let Some(s) = &step_name {
        title.push_str(&format!(" in {s}"));
    }
    let evidence = pairs
        .iter()
        .flat_map(|p| [p.transpose, p.copy])
        .take(MAX_EVIDENCE)
        .map(|s| ctx.evidence(s))
        .collect();
    Raised {
        kind: FindingKind::NonLogicalTranspose,
        severity: Severity::of_share(lost, step_ns),
        title,
        step,
        start_ns: start,
        end_ns: end,
        track: ctx.track_name(first.transpose),
        ops,
        call_site: site,
        count,
        lost_ns: lost,
        evidence,
        recommendation: recommendation(first.node.is_some()),
        // The layout choice is the finding, however small the copy is on this trace.
        cost: Cost::pattern(
            t.slice_track(first.copy).map_or(0, |tr| tr.source),
            pairs
                .iter()
                .map(|p| (t.slices.start[p.copy as usize], t.slices.end(p.copy)))
                .collect(),
        ),
    }
}

fn recommendation(backward: bool) -> String {
    let mut text = String::from(
        "This reorder moves the innermost (stride-1) dimension, so making it contiguous is a \
         strided gather of the whole tensor, not a cheap row copy. Produce the data in the \
         layout the model consumes (convert once in the Dataset/DataLoader, not every step), \
         reorder axes so the last dimension stays last, or keep the strided view and let the \
         consumer take it; for images use a channels-last memory format \
         (`x.to(memory_format=torch.channels_last)`, `model.to(memory_format=…)`) instead of \
         permuting NCHW↔NHWC by hand.",
    );
    if backward {
        text.push_str(
            " This copy runs in the backward pass, on the gradient of a forward permute: \
             changing the forward layout removes it too.",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wraps_negative_dims() {
        assert_eq!(wrap(-1, 3), Some(2));
        assert_eq!(wrap(1, 3), Some(1));
        assert_eq!(wrap(3, 3), None);
        assert_eq!(wrap(-4, 3), None);
    }
}
