//! The distributed view: per worker, computation, overlap, communication and other time per
//! step, and its collectives matched by order with every other worker's (transfer and sync
//! time, bytes).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::Timeline;
use steplens_ingest::model::{CategoryClass, NO_PARENT, OpArg, SliceId, TrackKind};

use super::steps_and_links::{
    PluginStep, PluginSteps, comm_op_by_id, comm_ops_by_external_id, role_ranges,
};
use super::{CommOpRow, DistributedRow, Links, is_comm_op};
use steplens_ingest::intervals::IntervalSet;

/// Time ranges, `(start, end)`.
type Ranges = Vec<(i64, i64)>;
/// A collective of one worker: its host op and the time ranges it ran (the host op's, then its
/// kernels').
struct CommNode {
    op: SliceId,
    ranges: Vec<(i64, i64)>,
    step: Option<usize>,
}

/// Bytes of one element of an `Input type`, as the plugin counts them.
fn dtype_bytes(ty: &str) -> u64 {
    match ty {
        "long int" => 8,
        "float" | "int" => 4,
        "c10::Half" | "c10::BFloat16" => 2,
        "unsigned char" => 1,
        _ => 0,
    }
}

/// The input bytes of op `op`: Σ over inputs of Π `Input Dims` × the size of `Input type`.
fn input_bytes(t: &Timeline, op: SliceId) -> u64 {
    let dims: Vec<serde_json::Value> = t
        .arg_raw(op, OpArg::InputDims.key())
        .and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or_default();
    let types: Vec<serde_json::Value> = t
        .arg_raw(op, OpArg::InputType.key())
        .and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or_default();
    dims.iter()
        .zip(&types)
        .map(|(d, ty)| {
            let elements: u64 = d
                .as_array()
                .map_or(0, |a| a.iter().map(|v| v.as_u64().unwrap_or(0)).product());
            elements * dtype_bytes(ty.as_str().unwrap_or(""))
        })
        .sum()
}

/// The distributed view: per worker, its collectives matched by order with every other
/// worker's; empty unless every worker has the same number of them (the plugin's rule).
pub(super) fn distributed(t: &Timeline, links: &Links, steps: &PluginSteps) -> Vec<DistributedRow> {
    if t.sources.is_empty() {
        return Vec::new();
    }
    let mut workers: Vec<(u16, Vec<CommNode>)> = Vec::new();
    for (source, plugin_steps) in steps {
        let mut nodes: Vec<CommNode> = Vec::new();
        let mut index: FxHashMap<SliceId, usize> = FxHashMap::default();
        let (mut nccl, mut gloo) = (false, false);
        for track in t.tracks.iter().filter(|tr| tr.source == *source) {
            if track.kind != TrackKind::HostThread {
                continue;
            }
            for i in track.slices.clone() {
                let name = t.slice_name(i);
                if matches!(
                    t.slice_class(i),
                    CategoryClass::CpuOp | CategoryClass::UserAnnotation
                ) && is_comm_op(name)
                {
                    nccl |= name.starts_with("nccl:");
                    gloo |= name.starts_with("gloo:");
                    index.insert(i, nodes.len());
                    nodes.push(CommNode {
                        op: i,
                        ranges: vec![(t.slices.start[i as usize], t.slices.end(i))],
                        step: None,
                    });
                }
            }
        }
        if nccl && gloo {
            nodes.clear();
        }
        // The plugin adds kernels to NCCL collectives only (Gloo runs on the host).
        let by_id = if nccl && !gloo {
            comm_ops_by_external_id(t, *source)
        } else {
            FxHashMap::default()
        };
        for track in t.tracks.iter().filter(|tr| tr.source == *source) {
            if !track.kind.is_device() {
                continue;
            }
            for k in track.slices.clone() {
                if t.slice_class(k) != CategoryClass::Kernel {
                    continue;
                }
                let Some(runtime) = links.launcher(k) else {
                    if let Some(&n) = comm_op_by_id(t, &by_id, k).and_then(|op| index.get(&op)) {
                        nodes[n]
                            .ranges
                            .push((t.slices.start[k as usize], t.slices.end(k)));
                    }
                    continue;
                };
                let mut at = t.slices.parent[runtime as usize];
                while at != NO_PARENT {
                    if let Some(&n) = index.get(&at) {
                        nodes[n]
                            .ranges
                            .push((t.slices.start[k as usize], t.slices.end(k)));
                        break;
                    }
                    at = t.slices.parent[at as usize];
                }
            }
        }
        nodes.sort_by_key(|n| (t.slices.start[n.op as usize], -t.slices.end(n.op)));
        for n in &mut nodes {
            n.ranges.sort_by_key(|&(s, e)| (s, -e));
            let (s, e) = (t.slices.start[n.op as usize], t.slices.end(n.op));
            n.step = plugin_steps
                .iter()
                .position(|st| s >= st.start && e <= st.end);
        }
        workers.push((*source, nodes));
    }
    let count = workers.first().map_or(0, |w| w.1.len());
    if count == 0 || workers.iter().any(|w| w.1.len() != count) {
        return Vec::new();
    }
    // The data-transfer part of each range: the shortest that range took on any worker,
    // ending where it ended.
    let mut real: Vec<Vec<Vec<(i64, i64)>>> = workers
        .iter()
        .map(|w| w.1.iter().map(|_| Vec::new()).collect())
        .collect();
    for (i, first) in workers[0].1.iter().enumerate() {
        let ranges = first.ranges.len();
        if workers.iter().any(|w| w.1[i].ranges.len() != ranges) {
            return Vec::new();
        }
        for j in 0..ranges {
            let shortest = workers
                .iter()
                .map(|w| w.1[i].ranges[j].1 - w.1[i].ranges[j].0)
                .min()
                .unwrap_or(0);
            for (w, worker) in workers.iter().enumerate() {
                let end = worker.1[i].ranges[j].1;
                real[w][i].push((end - shortest, end));
            }
        }
    }
    let mut out = Vec::new();
    for (w, (source, nodes)) in workers.iter().enumerate() {
        let source = *source;
        let Some(plugin_steps) = steps.get(&source) else {
            continue;
        };
        let roles = role_ranges(t, links, source);
        let has_kernels = !roles[0].is_empty();
        let comp_role = if has_kernels { &roles[0] } else { &roles[6] };
        let comm_role = &roles[3];
        let both = comp_role.intersect(comm_role);
        let (mut comp, mut ovl, mut comm, mut other) = (0i64, 0i64, 0i64, 0i64);
        for &PluginStep {
            start: s, end: e, ..
        } in plugin_steps
        {
            let c = comp_role.covered(s, e);
            let m = comm_role.covered(s, e);
            let o = both.covered(s, e);
            comp += c - o;
            ovl += o;
            comm += m - o;
            other += (e - s) + o - c - m;
        }
        let n = plugin_steps.len().max(1) as i64;
        // Transfer and waiting, per step of the collectives (a collective in no step counts
        // under one more key).
        let mut by_step: BTreeMap<Option<usize>, (Ranges, Ranges)> = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let entry = by_step.entry(node.step).or_default();
            entry.0.extend(&node.ranges);
            entry.1.extend(&real[w][i]);
        }
        let (mut transfer, mut total) = (0i64, 0i64);
        for (all, moving) in by_step.values() {
            total += IntervalSet::from_ranges(all.clone()).total();
            transfer += IntervalSet::from_ranges(moving.clone()).total();
        }
        let keys = by_step.len().max(1) as i64;
        let mut ops: BTreeMap<String, (u64, u64, Ranges, Ranges)> = BTreeMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let entry = ops.entry(t.slice_name(node.op).to_owned()).or_default();
            entry.0 += 1;
            entry.1 += input_bytes(t, node.op);
            entry.2.extend(&node.ranges);
            entry.3.extend(&real[w][i]);
        }
        out.push(DistributedRow {
            rank: t.sources[source as usize].rank.unwrap_or(i64::from(source)),
            source,
            computation_ns: comp / n,
            overlap_ns: ovl / n,
            communication_ns: comm / n,
            other_ns: other / n,
            transfer_ns: transfer / keys,
            sync_ns: (total - transfer) / keys,
            comm_ops: ops
                .into_iter()
                .map(|(name, (calls, bytes, all, moving))| CommOpRow {
                    name,
                    calls,
                    bytes,
                    latency_ns: IntervalSet::from_ranges(all).total(),
                    transfer_ns: IntervalSet::from_ranges(moving).total(),
                })
                .collect(),
        });
    }
    out.sort_by_key(|r| (r.rank, r.source));
    out
}
