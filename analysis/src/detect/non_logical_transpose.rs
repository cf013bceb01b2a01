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
use steplens_ingest::model::{CategoryClass, SliceId, StrId, Timeline};

use super::{Context, short_ns};
use crate::finding::{Cost, Finding, FindingKind, Severity};
use crate::nodes::{DeviceNode, NodeKernels, device_nodes};

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

/// Name prefix of the autograd engine's per-node range.
pub(super) const EVALUATE_PREFIX: &str = "autograd::engine::evaluate_function: ";

/// Most evidence references kept per finding.
const MAX_EVIDENCE: usize = 20;

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

pub(crate) fn detect(ctx: &Context<'_>) -> Vec<Finding> {
    let mut findings = host_transposes(ctx);
    findings.extend(gaudi_device_transposes(ctx));
    findings
}

/// Gaudi: a transpose that materialises runs on the device as transpose nodes (TPC
/// `transpose_*` kernels) or `DmaTranspose` on a DMA engine — the device side of the same copy.
/// A node split over many engines is one transpose (`crate::nodes`); its cost is its wall time.
/// One finding per step, counted in nodes.
fn gaudi_device_transposes(ctx: &Context<'_>) -> Vec<Finding> {
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
        let lost = crate::intervals::IntervalSet::from_ranges(ranges.clone()).total();
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
        findings.push(Finding {
            kind: FindingKind::NonLogicalTranspose,
            severity: Severity::of_share(lost, step.map_or(0, |s| t.steps[s].dur)),
            title: format!(
                "{} device transpose node(s){where_}: {} moving data ({}; up to {widest} \
                 engines per node, {} engine time)",
                nodes.len(),
                short_ns(lost),
                ops.join(", "),
                short_ns(engine_ns),
            ),
            step: step_name,
            start_ns: nodes.iter().map(|n| n.start).min().unwrap_or(0),
            end_ns: nodes.iter().map(|n| n.end).max().unwrap_or(0),
            track: nodes.first().and_then(|n| ctx.track_name(n.first)),
            ops,
            call_site: None,
            count: nodes.len() as u64,
            lost_ns: lost,
            evidence: nodes
                .iter()
                .take(20)
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

fn host_transposes(ctx: &Context<'_>) -> Vec<Finding> {
    let t = ctx.timeline;
    let names = Names::new(t);
    if names.transposes.is_empty() || names.copies.is_empty() {
        return Vec::new();
    }
    let fwd_of = forward_ops(t);
    let mut pairs: Vec<Pair> = Vec::new();
    for (_, track) in ctx.host_tracks() {
        let mut candidates = Vec::new();
        let mut copies = Vec::new();
        for i in track.slices.clone() {
            let name = t.slices.name[i as usize];
            if t.slice_class(i) != CategoryClass::CpuOp {
                continue;
            }
            if names.transposes.contains(&name) {
                if let Some(c) = candidate(ctx, &names, i) {
                    candidates.push(c);
                }
            } else if names.copies.contains(&name)
                && let Some(c) = copy(ctx, &names, i)
            {
                copies.push(c);
            }
        }
        if candidates.is_empty() || copies.is_empty() {
            continue;
        }
        // Slices are in start order on a track: pair each candidate with the first unused
        // matching copy after it, looked up by what the copy reads.
        let mut by_input: FxHashMap<ViewKey<'_>, Vec<usize>> = FxHashMap::default();
        for (n, k) in copies.iter().enumerate() {
            by_input
                .entry((&k.dims, &k.strides, k.backward))
                .or_default()
                .push(n);
        }
        let mut used = vec![false; copies.len()];
        for c in candidates {
            let key = (&c.out_dims[..], &c.out_strides[..], c.backward);
            let Some(list) = by_input.get(&key) else {
                continue;
            };
            let start = t.slices.start[c.op as usize];
            let from = list.partition_point(|&n| copies[n].start <= start);
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
            let bytes = dtype_bytes(t, c.op).map(|b| c.in_dims.iter().product::<i64>() * b);
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
    ctx.ancestors(slice)
        .find(|&a| ctx.timeline.slice_class(a) == CategoryClass::CpuOp)
}

/// Whether `slice` runs inside the autograd engine (the backward pass).
pub(super) fn in_backward(ctx: &Context<'_>, slice: SliceId) -> bool {
    ctx.ancestors(slice)
        .any(|a| ctx.timeline.slice_name(a).starts_with(EVALUATE_PREFIX))
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
    let in_dims = tensor_arg(t, op, "Input Dims", 0)?;
    let in_strides = tensor_arg(t, op, "Input Strides", 0)?;
    if in_dims.len() != in_strides.len() {
        return None;
    }
    let perm = permutation(t, op, in_dims.len())?;
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

fn copy(ctx: &Context<'_>, names: &Names, op: SliceId) -> Option<Copy> {
    let t = ctx.timeline;
    let name = t.slice_name(op);
    let copies = match name {
        // A reshape copies only when it clones; `contiguous` only when it has work to do.
        "aten::reshape" => children(t, op).any(|c| Some(t.slices.name[c as usize]) == names.clone),
        "aten::contiguous" => children(t, op).next().is_some(),
        // `clone()` keeps the strides (preserve_format) unless told a memory format.
        "aten::clone" => {
            let format = concrete_inputs(t, op)?.get(1).cloned().unwrap_or_default();
            !format.is_empty() && format != "1"
        }
        _ => true,
    };
    if !copies {
        return None;
    }
    if ctx.under_compile(op) {
        return None;
    }
    // `dst.copy_(src)` copies its second input.
    let index = usize::from(name == "aten::copy_");
    let dims = tensor_arg(t, op, "Input Dims", index)?;
    let strides = tensor_arg(t, op, "Input Strides", index)?;
    let user_level = ctx
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

/// Direct children of `slice` on its track.
pub(super) fn children(t: &Timeline, slice: SliceId) -> impl Iterator<Item = SliceId> + '_ {
    let begin = t.slices.start[slice as usize];
    let end = t.slices.end(slice);
    let track_end = t.slice_track(slice).map_or(slice, |tr| tr.slices.end);
    (slice + 1..track_end)
        .take_while(move |&j| {
            let s = t.slices.start[j as usize];
            s < end || s == begin
        })
        .filter(move |&j| t.slices.parent[j as usize] == slice)
}

/// The `index`-th entry of a shape-like arg (`Input Dims`, `Input Strides`) when it is one
/// tensor's list of integers.
pub(super) fn tensor_arg(
    t: &Timeline,
    slice: SliceId,
    key: &str,
    index: usize,
) -> Option<Vec<i64>> {
    nth_int_list(t.arg_raw(slice, key)?, index)
}

/// The `index`-th element of a JSON array when it is an array of integers, read straight from
/// the arg's raw text: transformer traces have a shape arg on every one of hundreds of
/// thousands of ops, and a `serde_json::Value` per number cost the detectors a fifth of their
/// time. `None` when the text is not an array, the element is missing or holds anything but
/// integers (a tensor list, a float, a string) — what `as_i64` over parsed values gave.
fn nth_int_list(raw: &[u8], index: usize) -> Option<Vec<i64>> {
    let mut at = skip_ws(raw, 0);
    if raw.get(at) != Some(&b'[') {
        return None;
    }
    at += 1;
    for _ in 0..index {
        at = skip_element(raw, skip_ws(raw, at))?;
        at = skip_ws(raw, at);
        if raw.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
    at = skip_ws(raw, at);
    if raw.get(at) != Some(&b'[') {
        return None;
    }
    let close = at + 1 + raw.get(at + 1..)?.iter().position(|&b| b == b']')?;
    let inner = std::str::from_utf8(&raw[at + 1..close]).ok()?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|n| n.trim().parse::<i64>().ok())
        .collect()
}

fn skip_ws(raw: &[u8], mut at: usize) -> usize {
    while raw.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The index just past the JSON value starting at `at` (strings and nesting respected).
fn skip_element(raw: &[u8], mut at: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        match *raw.get(at)? {
            b'"' => {
                at += 1;
                loop {
                    match *raw.get(at)? {
                        b'\\' => at += 2,
                        b'"' => break,
                        _ => at += 1,
                    }
                }
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                if depth == 0 {
                    return Some(at);
                }
                depth -= 1;
            }
            b',' if depth == 0 => return Some(at),
            _ => {}
        }
        at += 1;
        if depth == 0 && matches!(raw.get(at), Some(b',' | b']')) {
            return Some(at);
        }
    }
}

/// The `index`-th entry of a shape-like arg when it is a tensor list (`_foreach_*` ops): one
/// shape per tensor.
pub(super) fn tensor_list_arg(
    t: &Timeline,
    slice: SliceId,
    key: &str,
    index: usize,
) -> Option<Vec<Vec<i64>>> {
    let raw = t.arg_raw(slice, key)?;
    let all: Vec<serde_json::Value> = serde_json::from_slice(raw).ok()?;
    all.get(index)?
        .as_array()?
        .iter()
        .map(|s| {
            s.as_array()?
                .iter()
                .map(serde_json::Value::as_i64)
                .collect()
        })
        .collect()
}

/// `Concrete Inputs` as strings (`""` for tensors).
fn concrete_inputs(t: &Timeline, slice: SliceId) -> Option<Vec<String>> {
    let raw = t.arg_raw(slice, "Concrete Inputs")?;
    let all: Vec<serde_json::Value> = serde_json::from_slice(raw).ok()?;
    Some(
        all.into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            })
            .collect(),
    )
}

/// One integer or a list of integers, as `Concrete Inputs` writes them (`"1"`, `"[0, 2, 1]"`).
fn ints(text: &str) -> Option<Vec<i64>> {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        if inner.trim().is_empty() {
            return Some(Vec::new());
        }
        inner.split(',').map(|x| x.trim().parse().ok()).collect()
    } else {
        Some(vec![text.parse().ok()?])
    }
}

/// A dimension index (negative counts from the end) as a position in `0..n`.
fn wrap(d: i64, n: usize) -> Option<usize> {
    let n = i64::try_from(n).ok()?;
    let d = if d < 0 { d + n } else { d };
    usize::try_from(d).ok().filter(|&d| (d as i64) < n)
}

/// The permutation a transpose-like op applies to an `n`-dimensional input: output dimension
/// `k` is input dimension `perm[k]`.
fn permutation(t: &Timeline, op: SliceId, n: usize) -> Option<Vec<usize>> {
    let concrete = concrete_inputs(t, op).unwrap_or_default();
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

/// Bytes per element of the op's first input, from `Input type`.
pub(super) fn dtype_bytes(t: &Timeline, op: SliceId) -> Option<i64> {
    let raw = t.arg_raw(op, "Input type")?;
    let types: Vec<String> = serde_json::from_slice(raw).ok()?;
    let ty = types.first()?.as_str();
    Some(match ty {
        "double" | "long int" | "long long int" | "c10::complex<float>" => 8,
        "float" | "int" | "unsigned int" | "c10::complex<c10::Half>" => 4,
        "c10::Half" | "c10::BFloat16" | "short int" | "unsigned short" => 2,
        "bool" | "signed char" | "unsigned char" | "char" => 1,
        "c10::complex<double>" => 16,
        _ if ty.starts_with("c10::Float8") => 1,
        _ => return None,
    })
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

/// Bytes for titles: `4.0 MiB`.
pub(super) fn short_bytes(bytes: i64) -> String {
    let v = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1} KiB", v / 1024.0)
    } else if bytes < 1024 * 1024 * 1024 {
        format!("{:.1} MiB", v / (1024.0 * 1024.0))
    } else {
        format!("{:.2} GiB", v / (1024.0 * 1024.0 * 1024.0))
    }
}

fn finding(
    ctx: &Context<'_>,
    step: Option<usize>,
    pairs: &[Pair],
    fwd_of: &FxHashMap<SliceId, SliceId>,
) -> Finding {
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
        cost.push(format!("{} gathered", short_bytes(b)));
    }
    cost.push(format!("copy {}", short_ns(lost)));
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
    Finding {
        kind: FindingKind::NonLogicalTranspose,
        severity: Severity::of_share(lost, step_ns),
        title,
        step: step_name,
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
    #[test]
    fn int_lists_are_read_from_the_raw_text_as_parsed_json_would_give_them() {
        use super::nth_int_list;
        let raw = br#"[[64, 128], [], "x,]", [[1, 2], [3]], [1.5], [-3,4] ,7]"#;
        assert_eq!(nth_int_list(raw, 0), Some(vec![64, 128]));
        assert_eq!(nth_int_list(raw, 1), Some(vec![]));
        assert_eq!(nth_int_list(raw, 2), None);
        assert_eq!(nth_int_list(raw, 3), None);
        assert_eq!(nth_int_list(raw, 4), None);
        assert_eq!(nth_int_list(raw, 5), Some(vec![-3, 4]));
        assert_eq!(nth_int_list(raw, 6), None);
        assert_eq!(nth_int_list(raw, 7), None);
        assert_eq!(nth_int_list(b"{}", 0), None);
        assert_eq!(nth_int_list(b"[", 0), None);
        assert_eq!(nth_int_list(br#"[["a\"]", 1], [2]]"#, 1), Some(vec![2]));
    }

    use super::{ints, short_bytes, wrap};

    #[test]
    fn parses_concrete_ints() {
        assert_eq!(ints("[0, 2, 3, 1]"), Some(vec![0, 2, 3, 1]));
        assert_eq!(ints("-1"), Some(vec![-1]));
        assert_eq!(ints("[]"), Some(vec![]));
        assert_eq!(ints(""), None);
    }

    #[test]
    fn wraps_negative_dims() {
        assert_eq!(wrap(-1, 3), Some(2));
        assert_eq!(wrap(1, 3), Some(1));
        assert_eq!(wrap(3, 3), None);
        assert_eq!(wrap(-4, 3), None);
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(short_bytes(512), "512 B");
        assert_eq!(short_bytes(16 * 16 * 32 * 32 * 4), "1.0 MiB");
    }
}
