//! The operator tables (by name, and by name and input shape): calls, device and host self and
//! total time, Tensor Core eligibility and share, call stacks.

use rustc_hash::FxHashMap;
use steplens_ingest::Timeline;
use steplens_ingest::model::{ARGS_AHEAD, CategoryClass, OpArg, SliceId, TrackKind};

use super::arg_text::{json_text, python_repr};
use super::steps_and_links::{enclosing_op, is_dataloader, is_step};
use super::{Links, OperatorRow, pct, tensor_cores};

/// Ops looked at to tell whether the trace was recorded with stacks.
const STACK_PROBE: usize = 2000;

/// Ops the operator table lists (others are walked through).
fn listed(name: &str) -> bool {
    !(is_step(name)
        || is_dataloader(name)
        || name == "DataParallel.forward"
        || name == "DistributedDataParallel.forward"
        || name.starts_with("Optimizer."))
}

#[derive(Default)]
struct OpAcc<'t> {
    calls: u64,
    device_self: i64,
    device_total: i64,
    host_self: i64,
    host_total: i64,
    tc_self: i64,
    tc_total: i64,
    tc_eligible: Option<bool>,
    /// Up to five distinct `Call stack` values, raw (decoded when the row is made).
    stacks: Vec<&'t [u8]>,
    first: (i64, SliceId),
}

pub(super) fn operators<'t>(
    t: &'t Timeline,
    links: &Links,
    op_arg: &dyn Fn(SliceId, OpArg) -> Option<&'t [u8]>,
) -> (Vec<OperatorRow>, Vec<OperatorRow>, f64) {
    // The op tree as flat arrays (a trace holds millions of ops): each op's nearest op
    // ancestor is its parent; each runtime call belongs to its nearest op. Slice → node by a
    // dense array.
    const NONE: u32 = u32::MAX;
    let mut index: Vec<u32> = vec![NONE; t.slices.len()];
    let mut slice_of: Vec<SliceId> = Vec::new();
    for track in &t.tracks {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for i in track.slices.clone() {
            if t.slice_class(i) == CategoryClass::CpuOp {
                index[i as usize] = slice_of.len() as u32;
                slice_of.push(i);
            }
        }
    }
    let node_of = |slice: SliceId| index.get(slice as usize).copied().filter(|&n| n != NONE);
    let parent: Vec<u32> = slice_of
        .iter()
        .map(|&s| enclosing_op(t, s).and_then(node_of).unwrap_or(NONE))
        .collect();
    // Only "exactly one child op" is asked of the count: a byte that stops at its top.
    let mut child_count = vec![0u8; slice_of.len()];
    for &p in parent.iter().filter(|&&p| p != NONE) {
        child_count[p as usize] = child_count[p as usize].saturating_add(1);
    }
    // Children before parents: by depth, deepest first.
    let by_depth = deepest_first(&slice_of, &t.slices.depth);
    // An op whose only child op has its name takes over that child's children and runtimes:
    // `owner` is the node whose figures a node's go to, itself unless folded (parents first).
    let mut owner: Vec<u32> = (0..slice_of.len() as u32).collect();
    for &n in by_depth.iter().rev() {
        let p = parent[n as usize];
        if p != NONE
            && child_count[p as usize] == 1
            && t.slices.name[slice_of[n as usize] as usize]
                == t.slices.name[slice_of[p as usize] as usize]
        {
            owner[n as usize] = owner[p as usize];
        }
    }
    // What is no longer needed goes as soon as it is done with: a trace holds millions of ops,
    // and this view runs beside the other passes at the report's peak of memory.
    drop(child_count);
    let folded = |n: u32| owner[n as usize] != n;
    // Name tests, once per interned name: a trace has far fewer names than slices.
    let per_name = |test: &dyn Fn(&str) -> bool| -> Vec<bool> {
        t.strings.iter().map(|(_, name)| test(name)).collect()
    };
    let tc_names = per_name(&tensor_cores::kernel_uses_tensor_cores);
    let eligible_names = per_name(&tensor_cores::op_is_eligible);
    let listed_names = per_name(&listed);
    let name_has = |names: &[bool], slice: SliceId| {
        names
            .get(t.slices.name[slice as usize] as usize)
            .copied()
            .unwrap_or(false)
    };
    let tc_kernel =
        |k: SliceId| t.slice_class(k) == CategoryClass::Kernel && name_has(&tc_names, k);
    // Per op, in arrays of their own (a trace holds millions of ops): the host time of its
    // child ops and runtime calls (what its host self time leaves out), its Tensor Core flags,
    // and its device figures only when the trace has device tracks.
    const ELIGIBLE: u8 = 1;
    const HAS_ELIGIBLE_BELOW: u8 = 2;
    const CHILD_ELIGIBLE: u8 = 4;
    const OWN_TC_KERNEL: u8 = 8;
    #[derive(Clone, Copy, Default)]
    struct Device {
        self_ns: i64,
        total_ns: i64,
        kernel_self: i64,
        tc_self: i64,
        tc_total: i64,
    }
    let has_device = t.tracks.iter().any(|tr| tr.kind.is_device());
    let mut below = vec![0i64; slice_of.len()];
    let mut flags = vec![0u8; slice_of.len()];
    let mut device = vec![Device::default(); if has_device { slice_of.len() } else { 0 }];
    // Self figures: the device work each op's runtime calls launched.
    for track in &t.tracks {
        if track.kind != TrackKind::HostThread {
            continue;
        }
        for r in track.slices.clone() {
            if t.slice_class(r) != CategoryClass::Runtime {
                continue;
            }
            let Some(n) = enclosing_op(t, r).and_then(node_of) else {
                continue;
            };
            let o = owner[n as usize] as usize;
            below[o] += t.slices.dur[r as usize];
            for d in links.launched_by(r) {
                let Some(f) = device.get_mut(o) else {
                    break;
                };
                let dur = t.slices.dur[d as usize];
                f.self_ns += dur;
                if t.slice_class(d) == CategoryClass::Kernel {
                    f.kernel_self += dur;
                }
                if tc_kernel(d) {
                    f.tc_self += dur;
                    flags[o] |= OWN_TC_KERNEL;
                }
            }
        }
    }
    drop(index);
    // Totals bottom-up: each op's own figures plus its (unfolded) children's totals.
    for &n in &by_depth {
        if folded(n) {
            continue;
        }
        let d = device
            .get_mut(n as usize)
            .map_or_else(Device::default, |d| {
                d.total_ns += d.self_ns;
                d.tc_total += d.tc_self;
                *d
            });
        if name_has(&eligible_names, slice_of[n as usize])
            || flags[n as usize] & (CHILD_ELIGIBLE | OWN_TC_KERNEL) != 0
        {
            flags[n as usize] |= ELIGIBLE;
        }
        let f = flags[n as usize];
        let p = parent[n as usize];
        if p == NONE {
            continue;
        }
        let o = owner[p as usize] as usize;
        if let Some(pd) = device.get_mut(o) {
            pd.total_ns += d.total_ns;
            pd.tc_total += d.tc_total;
        }
        below[o] += t.slices.dur[slice_of[n as usize] as usize];
        if f & ELIGIBLE != 0 {
            flags[o] |= CHILD_ELIGIBLE | HAS_ELIGIBLE_BELOW;
        } else if f & HAS_ELIGIBLE_BELOW != 0 {
            flags[o] |= HAS_ELIGIBLE_BELOW;
        }
    }
    drop(parent);
    // Keyed by name id and shape index while counting: strings are made once per row.
    let mut by_name: FxHashMap<u32, OpAcc> = FxHashMap::default();
    let mut by_shape: FxHashMap<(u32, usize), OpAcc> = FxHashMap::default();
    // Shapes repeat: each distinct `Input Dims` text is printed once.
    let mut shape_index: FxHashMap<&[u8], usize> = FxHashMap::default();
    let mut shape_texts: Vec<String> = vec!["[]".to_owned()];
    // A trace recorded with stacks has a `Call stack` on nearly every op; one without has none.
    // Looking among the first ops tells which, so the others' args are not searched in vain.
    let has_stacks = slice_of
        .iter()
        .take(STACK_PROBE)
        .any(|&op| t.arg_raw(op, "Call stack").is_some());
    let (mut eligible_bottom_kernel, mut all_kernel_self) = (0i64, 0i64);
    // Each listed op's shape index, for the stacks' pass below.
    let mut shape_of: Vec<u32> = if has_stacks {
        vec![0; slice_of.len()]
    } else {
        Vec::new()
    };
    // In node order, which is each thread's order in time and so the args' order in memory:
    // no figure here depends on the order (a row's first call is the earliest by start).
    // The ops that are rows: listed, and not folded into a parent of their name.
    let is_row = |n: u32| !folded(n) && name_has(&listed_names, slice_of[n as usize]);
    let rows = || (0..slice_of.len() as u32).filter(|&n| is_row(n));
    // A second walk, one batch ahead, fetches the next rows' args together: one wait for
    // memory, not one per op.
    let mut ahead = rows().skip(ARGS_AHEAD);
    for (k, n) in rows().enumerate() {
        if k % ARGS_AHEAD == 0 {
            let batch = ahead.by_ref().take(ARGS_AHEAD);
            t.touch_args(batch.map(|n| slice_of[n as usize]), 512);
        }
        let op = slice_of[n as usize];
        let (eligible, f) = (
            flags[n as usize] & ELIGIBLE != 0,
            device.get(n as usize).copied().unwrap_or_default(),
        );
        let host_total = t.slices.dur[op as usize];
        let host_self = host_total - below[n as usize];
        all_kernel_self += f.kernel_self;
        if eligible && flags[n as usize] & HAS_ELIGIBLE_BELOW == 0 {
            eligible_bottom_kernel += f.kernel_self;
        }
        let shape = match op_arg(op, OpArg::InputDims) {
            Some(raw) => *shape_index.entry(raw).or_insert_with(|| {
                shape_texts.push(python_repr(raw));
                shape_texts.len() - 1
            }),
            None => 0,
        };
        let name_id = t.slices.name[op as usize];
        if let Some(slot) = shape_of.get_mut(n as usize) {
            *slot = shape as u32;
        }
        for acc in [
            by_name.entry(name_id).or_default(),
            by_shape.entry((name_id, shape)).or_default(),
        ] {
            let start = (t.slices.start[op as usize], op);
            if acc.calls == 0 || start < acc.first {
                acc.first = start;
                acc.tc_eligible = Some(eligible);
            }
            acc.calls += 1;
            acc.device_self += f.self_ns;
            acc.device_total += f.total_ns;
            acc.host_self += host_self;
            acc.host_total += host_total;
            acc.tc_self += f.tc_self;
            acc.tc_total += f.tc_total;
        }
    }
    // A row keeps the first five distinct stacks met deepest op first (children before their
    // parents). Raw bytes, compared as they are: decoded only for the five a row keeps.
    if has_stacks {
        for &n in by_depth.iter().filter(|&&n| is_row(n)) {
            let op = slice_of[n as usize];
            let Some(stack) = t.arg_raw(op, "Call stack") else {
                continue;
            };
            let name_id = t.slices.name[op as usize];
            let shape = shape_of[n as usize] as usize;
            for acc in [
                by_name.get_mut(&name_id),
                by_shape.get_mut(&(name_id, shape)),
            ]
            .into_iter()
            .flatten()
            {
                if acc.stacks.len() < 5 && !acc.stacks.contains(&stack) {
                    acc.stacks.push(stack);
                }
            }
        }
    }
    let row = |name: String, shape: Option<String>, a: OpAcc| OperatorRow {
        name,
        input_shape: shape,
        calls: a.calls,
        device_self_ns: a.device_self,
        device_total_ns: a.device_total,
        host_self_ns: a.host_self,
        host_total_ns: a.host_total,
        tc_eligible: a.tc_eligible.unwrap_or(false),
        tc_self_pct: pct(a.tc_self, a.device_self),
        tc_total_pct: pct(a.tc_total, a.device_total),
        call_stacks: a.stacks.iter().map(|raw| json_text(raw)).collect(),
    };
    let sort = |rows: &mut Vec<OperatorRow>| {
        if has_device {
            rows.sort_by(|a, b| {
                b.device_self_ns
                    .cmp(&a.device_self_ns)
                    .then(a.name.cmp(&b.name))
                    .then(a.input_shape.cmp(&b.input_shape))
            });
        } else {
            rows.sort_by(|a, b| {
                b.host_self_ns
                    .cmp(&a.host_self_ns)
                    .then(a.name.cmp(&b.name))
                    .then(a.input_shape.cmp(&b.input_shape))
            });
        }
    };
    let mut names: Vec<OperatorRow> = by_name
        .into_iter()
        .map(|(name, a)| row(t.strings.get(name).to_owned(), None, a))
        .collect();
    sort(&mut names);
    let mut shapes: Vec<OperatorRow> = by_shape
        .into_iter()
        .map(|((name, shape), a)| {
            row(
                t.strings.get(name).to_owned(),
                Some(shape_texts[shape].clone()),
                a,
            )
        })
        .collect();
    sort(&mut shapes);
    let share = if all_kernel_self > 0 {
        eligible_bottom_kernel as f64 / all_kernel_self as f64
    } else {
        0.0
    };
    (names, shapes, share)
}

/// The indexes of `nodes` ordered by their slices' depth, deepest first, in index order within
/// a depth (what a stable sort by depth, reversed, gives): a counting sort, since depths are few
/// and a trace holds millions of ops, whose comparison sort through `depth` misses the cache
/// on every compare.
fn deepest_first(nodes: &[SliceId], depth: &[u16]) -> Vec<u32> {
    let depth_of = |slice: SliceId| usize::from(depth[slice as usize]);
    let deepest = nodes.iter().map(|&s| depth_of(s)).max().unwrap_or(0);
    // Where each depth's run starts in the output, deepest depth first.
    let mut next = vec![0usize; deepest + 1];
    for &s in nodes {
        next[depth_of(s)] += 1;
    }
    let mut at = 0;
    for d in (0..=deepest).rev() {
        let count = next[d];
        next[d] = at;
        at += count;
    }
    let mut out = vec![0u32; nodes.len()];
    for (n, &s) in nodes.iter().enumerate() {
        let d = depth_of(s);
        out[next[d]] = n as u32;
        next[d] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::deepest_first;

    #[test]
    fn deepest_first_is_a_stable_sort_by_depth_reversed() {
        let depth: Vec<u16> = vec![0, 2, 1, 2, 0, 1, 3];
        let nodes: Vec<u32> = vec![6, 0, 1, 2, 3, 4, 5];
        let mut expected: Vec<u32> = (0..nodes.len() as u32).collect();
        expected.sort_by_key(|&n| std::cmp::Reverse(depth[nodes[n as usize] as usize]));
        assert_eq!(deepest_first(&nodes, &depth), expected);
        assert!(deepest_first(&[], &depth).is_empty());
    }
}
