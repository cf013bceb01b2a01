//! The op summary: per op name and track kind, how often it ran and how long it took (total,
//! self, mean, p50, p99).
//!
//! Ops are host ops (`cpu_op`), runtime and driver calls, and device kernels, copies, memsets
//! and sync events. Annotations (`ProfilerStep#N`, DataLoader and user ranges), Python frames
//! and the profiler's own spans are not ops and are left out. Self time is the duration minus
//! the time of the slice's direct children (of any kind), never below zero.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::model::{CategoryClass, NO_PARENT, StrId, Timeline};

use crate::nodes::NodeIndex;

/// One row of the op summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OpStats {
    /// Op name.
    pub name: String,
    /// `host` or `device`.
    pub track_kind: String,
    /// Category as written in the trace (`cpu_op`, `kernel`, …).
    pub category: String,
    /// Calls.
    pub count: u64,
    /// Total duration, ns.
    pub total_ns: i64,
    /// Total self time, ns.
    pub self_ns: i64,
    /// Mean duration, ns.
    pub mean_ns: i64,
    /// Median duration, ns.
    pub p50_ns: i64,
    /// 99th percentile duration, ns.
    pub p99_ns: i64,
    /// Gaudi device nodes: the sum of the node's slices over the engines that ran it, ns
    /// (`total_ns` is wall time). Absent for other ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_ns: Option<i64>,
    /// Gaudi device nodes: the most engines one occurrence ran on. Absent for other ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_engines: Option<u32>,
    /// CUDA/HIP graph launches (`cudaGraphLaunch`, `hipGraphLaunch`, …): the device work its
    /// calls ran, each graph one unit: the kernels (and copies) linked to the calls. Absent for
    /// other ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_kernels: Option<u64>,
    /// CUDA/HIP graph launches: the device time of their graphs, ns (per call, the union of its
    /// linked device work, summed over calls). Absent for other ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_device_ns: Option<i64>,
}

/// Whether a runtime call launches a CUDA/HIP graph (`cudaGraphLaunch`, `hipGraphLaunch`,
/// `cuGraphLaunch`, their `_ptsz` variants): one call, one correlation id, many kernels.
#[must_use]
pub fn is_graph_launch(name: &str) -> bool {
    name.contains("GraphLaunch")
}

/// Per graph-launch call: (device slices it launched, their union's length, ns).
fn graph_launches(timeline: &Timeline) -> FxHashMap<u32, (u64, i64)> {
    let graph_name: Vec<bool> = timeline
        .strings
        .iter()
        .map(|(_, name)| is_graph_launch(name))
        .collect();
    let is_graph = |slice: u32| {
        timeline
            .slices
            .name
            .get(slice as usize)
            .and_then(|&n| graph_name.get(n as usize))
            .copied()
            .unwrap_or(false)
            && timeline.slice_class(slice) == CategoryClass::Runtime
    };
    let mut ranges: FxHashMap<u32, Vec<(i64, i64)>> = FxHashMap::default();
    for &(call, d) in timeline.launches().runtime_links() {
        if is_graph(call) {
            ranges
                .entry(call)
                .or_default()
                .push((timeline.slices.start[d as usize], timeline.slices.end(d)));
        }
    }
    ranges
        .into_iter()
        .map(|(call, r)| {
            let n = r.len() as u64;
            (
                call,
                (
                    n,
                    steplens_ingest::intervals::IntervalSet::from_ranges(r).total(),
                ),
            )
        })
        .collect()
}

/// Whether slices of this class belong in the op summary.
#[must_use]
pub fn is_op(class: CategoryClass) -> bool {
    matches!(
        class,
        CategoryClass::CpuOp
            | CategoryClass::Kernel
            | CategoryClass::Memcpy
            | CategoryClass::Memset
            | CategoryClass::Runtime
            | CategoryClass::Driver
            | CategoryClass::DeviceSync
            | CategoryClass::ProfilerRange
            | CategoryClass::Other
    )
}

/// Every slice's self time: its duration less the summed durations of its direct children,
/// never negative. The one definition the op table, its per-step figures, the rank summaries and
/// the slice table read.
#[derive(Debug, Clone)]
pub struct SelfTime {
    /// Per slice, the summed duration of its direct children.
    child_ns: Vec<i64>,
}

impl SelfTime {
    /// The self times of `timeline`'s slices.
    #[must_use]
    pub fn new(timeline: &Timeline) -> Self {
        let slices = &timeline.slices;
        let mut child_ns = vec![0i64; slices.len()];
        for (i, &parent) in slices.parent.iter().enumerate() {
            if parent != NO_PARENT {
                child_ns[parent as usize] += slices.dur[i];
            }
        }
        Self { child_ns }
    }

    /// Slice `i`'s self time, ns.
    #[must_use]
    pub fn of(&self, timeline: &Timeline, i: usize) -> i64 {
        let dur = timeline.slices.dur.get(i).copied().unwrap_or(0);
        (dur - self.child_ns.get(i).copied().unwrap_or(0)).max(0)
    }
}

/// The op summary, by total time (longest first), then name. A Gaudi device node counts once
/// per occurrence with its wall time, however many engines ran it (`crate::nodes`).
#[must_use]
pub fn op_summary(timeline: &Timeline) -> Vec<OpStats> {
    op_summary_with(timeline, &crate::nodes::node_index(timeline))
}

/// [`op_summary`] with the node index already built.
#[must_use]
pub fn op_summary_with(timeline: &Timeline, nodes: &NodeIndex) -> Vec<OpStats> {
    op_summary_per_step(timeline, nodes, &SelfTime::new(timeline), 0).0
}

/// Ops whose self time is sampled per step in the report: the check compares their per-step
/// distributions (a budget's `top_ops` defaults to 10; the union over two runs needs more).
pub const OPS_PER_STEP: usize = 20;

/// [`op_summary_with`], plus per timeline step the self time of the `top` ops with the most
/// self time over the run, keyed by [`op_label`] (every one of them in every
/// step, 0 where it did not run). An op counts in the step whose range holds its start.
#[must_use]
pub fn op_summary_per_step(
    timeline: &Timeline,
    nodes: &NodeIndex,
    self_time: &SelfTime,
    top: usize,
) -> (Vec<OpStats>, Vec<BTreeMap<String, i64>>) {
    let slices = &timeline.slices;
    let n = slices.len();
    // Group key: (name, device?, category). Groups get dense ids so durations can be bucketed.
    let mut group_of: FxHashMap<(StrId, bool, u16), u32> = FxHashMap::default();
    let mut keys: Vec<(StrId, bool, u16)> = Vec::new();
    let mut member_group: Vec<u32> = Vec::with_capacity(n);
    let mut members: Vec<u32> = Vec::with_capacity(n);
    let device_track: Vec<bool> = timeline.tracks.iter().map(|t| t.kind.is_device()).collect();
    let has_nodes = !nodes.node_of.is_empty();
    // Most names have one (device, category): the group of a name's first key is looked up by
    // the name's id, the hash map only for the others.
    let mut first_group: Vec<u32> = vec![u32::MAX; timeline.strings.len()];
    for i in 0..n {
        let cat = slices.cat[i];
        if !is_op(timeline.categories.class(cat)) {
            continue;
        }
        // A node's other engine slices are folded into its first one.
        if has_nodes
            && let Some(&k) = nodes.node_of.get(&(i as u32))
            && nodes.nodes[k as usize].first != i as u32
        {
            continue;
        }
        let key = (slices.name[i], device_track[slices.track[i] as usize], cat);
        let cached = first_group.get(key.0 as usize).copied().unwrap_or(u32::MAX);
        let g = if cached != u32::MAX && keys[cached as usize] == key {
            cached
        } else {
            let next = keys.len() as u32;
            let g = *group_of.entry(key).or_insert_with(|| {
                keys.push(key);
                next
            });
            if let Some(slot) = first_group.get_mut(key.0 as usize)
                && *slot == u32::MAX
            {
                *slot = g;
            }
            g
        };
        member_group.push(g);
        members.push(i as u32);
    }
    let groups = keys.len();
    let mut offsets = vec![0usize; groups + 1];
    for &g in &member_group {
        offsets[g as usize + 1] += 1;
    }
    for g in 0..groups {
        offsets[g + 1] += offsets[g];
    }
    let mut fill = offsets.clone();
    let mut durs = vec![0i64; members.len()];
    let mut selfs = vec![0i64; groups];
    // Per group: engine time and widest occurrence, for node groups only.
    let mut node_figures: Vec<Option<(i64, u32)>> = vec![None; groups];
    // Per group: graph kernels and their device time, for graph-launch groups only.
    let launches = graph_launches(timeline);
    let mut graph_figures: Vec<Option<(u64, i64)>> = vec![None; groups];
    let node_of = |i: u32| {
        has_nodes
            .then(|| nodes.node_of.get(&i).map(|&k| &nodes.nodes[k as usize]))
            .flatten()
    };
    for (&g, &i) in member_group.iter().zip(&members) {
        let node = node_of(i);
        let i = i as usize;
        let dur = node.map_or(slices.dur[i], |n| n.wall_ns);
        durs[fill[g as usize]] = dur;
        fill[g as usize] += 1;
        selfs[g as usize] += node.map_or(self_time.of(timeline, i), |n| n.wall_ns);
        if let Some(n) = node {
            let f = node_figures[g as usize].get_or_insert((0, 0));
            f.0 += n.engine_ns;
            f.1 = f.1.max(n.engines);
        }
        if let Some(&(kernels, device_ns)) = launches.get(&(i as u32)) {
            let f = graph_figures[g as usize].get_or_insert((0, 0));
            f.0 += kernels;
            f.1 += device_ns;
        }
    }
    let per_step = self_time_per_step(
        timeline,
        &keys,
        &selfs,
        top,
        member_group.iter().zip(&members).map(|(&g, &i)| {
            let node = node_of(i);
            let i = i as usize;
            let own = node.map_or(self_time.of(timeline, i), |n| n.wall_ns);
            (g, i, own)
        }),
    );
    let mut rows: Vec<OpStats> = keys
        .iter()
        .enumerate()
        .map(|(g, &(name, device, cat))| {
            let part = &mut durs[offsets[g]..offsets[g + 1]];
            part.sort_unstable();
            let count = part.len() as u64;
            let total: i64 = part.iter().sum();
            OpStats {
                name: timeline.strings.get(name).to_owned(),
                track_kind: if device { "device" } else { "host" }.to_owned(),
                category: timeline.categories.name(cat).to_owned(),
                count,
                total_ns: total,
                self_ns: selfs[g],
                mean_ns: total / count.max(1) as i64,
                p50_ns: crate::stats::percentile(part, 0.5).unwrap_or(0),
                p99_ns: crate::stats::percentile(part, 0.99).unwrap_or(0),
                engine_ns: node_figures[g].map(|f| f.0),
                max_engines: node_figures[g].map(|f| f.1),
                graph_kernels: graph_figures[g].map(|f| f.0),
                graph_device_ns: graph_figures[g].map(|f| f.1),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.track_kind.cmp(&b.track_kind))
            .then_with(|| a.category.cmp(&b.category))
    });
    (rows, per_step)
}

/// Per step, the self time of the `top` op labels with the most self time; `members` yields
/// (group, slice, self time) for every op occurrence.
fn self_time_per_step(
    timeline: &Timeline,
    keys: &[(StrId, bool, u16)],
    group_self: &[i64],
    top: usize,
    members: impl Iterator<Item = (u32, usize, i64)>,
) -> Vec<BTreeMap<String, i64>> {
    if top == 0 || timeline.steps.is_empty() {
        return Vec::new();
    }
    let label = |&(name, device, _): &(StrId, bool, u16)| {
        let kind = if device { "device" } else { "host" };
        op_label(timeline.strings.get(name), kind)
    };
    // Groups of one label (several categories) add up, as in the check's per-step figures.
    let mut label_self: FxHashMap<String, i64> = FxHashMap::default();
    for (key, &ns) in keys.iter().zip(group_self) {
        *label_self.entry(label(key)).or_insert(0) += ns;
    }
    let mut ranked: Vec<(String, i64)> = label_self.into_iter().filter(|&(_, ns)| ns > 0).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(top);
    let column: FxHashMap<&str, usize> = ranked
        .iter()
        .enumerate()
        .map(|(c, (name, _))| (name.as_str(), c))
        .collect();
    let group_column: Vec<Option<usize>> = keys
        .iter()
        .map(|key| column.get(label(key).as_str()).copied())
        .collect();
    let mut table = vec![vec![0i64; ranked.len()]; timeline.steps.len()];
    let slices = &timeline.slices;
    let mut steps = timeline.step_cursor();
    for (g, i, own) in members {
        let Some(c) = group_column[g as usize] else {
            continue;
        };
        let source = timeline.tracks[slices.track[i] as usize].source;
        if let Some(step) = steps.step_at(source, slices.start[i]) {
            table[step][c] += own;
        }
    }
    table
        .into_iter()
        .map(|row| {
            ranked
                .iter()
                .zip(row)
                .map(|((name, _), ns)| (name.clone(), ns))
                .collect()
        })
        .collect()
}

/// An op's name as compared across runs: device ops are marked so a host op and the kernel of
/// the same name stay apart.
#[must_use]
pub fn op_label(name: &str, track_kind: &str) -> String {
    if track_kind == "device" {
        format!("{name} [device]")
    } else {
        name.to_owned()
    }
}
