//! Gaudi device nodes: one graph node is one unit of device work however many engines ran it.
//!
//! A Gaudi graph compiler splits a TPC node over many TPC engines (the real Gaudi 3 HW CSV shows
//! one node on 32 TPC lanes at once) and an MME node over several MME engines; every profiler
//! format writes one slice per engine. Counting slices would count one node dozens of times and
//! sum parallel engine time as if it were wall time. This module groups the slices back into
//! node occurrences: slices of the same name on sibling engines of one class of one input that
//! overlap in time, each engine at most once (an engine runs one node at a time, so a second
//! slice on an engine already in the group is the next occurrence). The graph compiler spreads a
//! node's work evenly over the dies (`[HD0]`…`[HD7]` on Gaudi 3), so a moment when none of the
//! node's slices runs ends the occurrence only once it holds a multiple of the dies' count:
//! gaps inside one launch (while the next wave of engines starts; at most [`WAVE_GAP_NS`]) do not
//! split it. This reproduces the Gaudi profiler's own `analyzed_nodes.csv` iterations on the real
//! Gaudi 3 HW trace of the corpus (`docs/research/gaudi-node-iterations.md`; the vendor does
//! not publish its rule). The name is the node name in
//! the Synapse TEF and HW CSV (`g_0_gelu_fwd_1`), the kernel (guid) in the bridge's HPU lanes
//! (`gelu_fwd_bf16`); both group the same way.
//!
//! An occurrence's wall time is the union of its slices, its engine time their sum.

use rustc_hash::FxHashMap;
use steplens_ingest::model::{EngineClass, SliceId, StrId, Timeline, TrackKind};

/// Whether an engine class runs graph nodes split across sibling engines (Gaudi).
#[must_use]
pub fn is_node_engine(class: &EngineClass) -> bool {
    matches!(
        class,
        EngineClass::Mme | EngineClass::Tpc | EngineClass::Dma | EngineClass::Rotator
    )
}

/// One occurrence of a device node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNode {
    /// Input the node ran in.
    pub source: u16,
    /// Node (or kernel) name.
    pub name: StrId,
    /// Category of its first slice.
    pub cat: u16,
    /// The earliest-starting slice, for evidence.
    pub first: SliceId,
    /// Start of the earliest slice, ns.
    pub start: i64,
    /// End of the latest slice, ns.
    pub end: i64,
    /// Union of its slices, ns.
    pub wall_ns: i64,
    /// Sum of its slices over engines, ns.
    pub engine_ns: i64,
    /// Engines that ran a part of it.
    pub engines: u32,
    /// Shortest and longest time one engine spent on it, ns.
    pub engine_min_ns: i64,
    /// See `engine_min_ns`.
    pub engine_max_ns: i64,
}

/// One node occurrence as the report lists it, in the columns of the Gaudi profiler's
/// `analyzed_nodes.csv`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeRow {
    /// Node name.
    pub name: String,
    /// Input.
    pub source: u16,
    /// Start of its first slice, ns.
    pub start_ns: i64,
    /// `Duration`: end of its last slice − start of its first, ns.
    pub duration_ns: i64,
    /// `Active`: time at least one engine ran it (union), ns.
    pub active_ns: i64,
    /// Sum over engines, ns.
    pub engine_ns: i64,
    /// `Min single engine`, ns.
    pub engine_min_ns: i64,
    /// `Max single engine`, ns.
    pub engine_max_ns: i64,
    /// `Avg single engine`, ns.
    pub engine_avg_ns: f64,
    /// `Num activations`: engine runs.
    pub activations: u32,
    /// `Parallel Engines`.
    pub parallel_engines: u32,
}

impl NodeRow {
    /// The row of node `n`.
    #[must_use]
    pub fn of(t: &Timeline, n: &DeviceNode) -> Self {
        Self {
            name: t.strings.get(n.name).to_owned(),
            source: n.source,
            start_ns: n.start,
            duration_ns: n.end - n.start,
            active_ns: n.wall_ns,
            engine_ns: n.engine_ns,
            engine_min_ns: n.engine_min_ns,
            engine_max_ns: n.engine_max_ns,
            engine_avg_ns: n.engine_ns as f64 / f64::from(n.engines.max(1)),
            activations: n.engines,
            parallel_engines: n.engines,
        }
    }
}

/// The Gaudi device nodes of a Timeline and which slices make them up.
#[derive(Debug, Default)]
pub struct NodeIndex {
    /// Every occurrence, sorted by start.
    pub nodes: Vec<DeviceNode>,
    /// Slice → index into `nodes`, for every slice that is part of a node.
    pub node_of: FxHashMap<SliceId, u32>,
}

/// Every Gaudi device node occurrence of the Timeline, sorted by start. Slices on other engine
/// kinds (CUDA streams, copies) are not nodes and are left out.
#[must_use]
pub fn device_nodes(t: &Timeline) -> Vec<DeviceNode> {
    node_index(t).nodes
}

/// Longest moment without any of a node's slices that still continues it (when it does not
/// yet hold a multiple of the dies' count). Waves of one launch on the real Gaudi 3 capture
/// follow each other after 0.001 to 1.4 µs; launches of one kernel in different steps are
/// milliseconds apart.
const WAVE_GAP_NS: i64 = 10_000;

/// The die an engine is on, from its name's prefix (`[HD3] TPC 5` → `[HD3]`).
fn die_of(track_name: &str) -> Option<&str> {
    let end = track_name.find(']')?;
    track_name.starts_with('[').then(|| &track_name[..=end])
}

/// The node occurrences and the slice → node map.
#[must_use]
pub fn node_index(t: &Timeline) -> NodeIndex {
    // Engine class per track, as a small id, for the grouping key.
    let mut class_ids: Vec<Option<u8>> = Vec::with_capacity(t.tracks.len());
    let mut classes: Vec<&EngineClass> = Vec::new();
    for track in &t.tracks {
        let id = match &track.kind {
            TrackKind::DeviceEngine { class, .. } if is_node_engine(class) => {
                let pos = classes.iter().position(|c| *c == class).unwrap_or_else(|| {
                    classes.push(class);
                    classes.len() - 1
                });
                u8::try_from(pos).ok()
            }
            _ => None,
        };
        class_ids.push(id);
    }
    // Dies per (input, class): the distinct `[HDn]`/`[Dn]` prefixes of its engines' names.
    let mut dies: FxHashMap<(u16, u8), Vec<&str>> = FxHashMap::default();
    for (track_id, track) in t.tracks.iter().enumerate() {
        if let Some(class) = class_ids[track_id] {
            let die = die_of(&track.name).unwrap_or("");
            let known = dies.entry((track.source, class)).or_default();
            if !known.contains(&die) {
                known.push(die);
            }
        }
    }
    let die_count =
        |source: u16, class: u8| dies.get(&(source, class)).map_or(1, |d| d.len().max(1));
    // (source, class, name, start, end, track, slice)
    let mut parts: Vec<(u16, u8, StrId, i64, i64, u32, SliceId)> = Vec::new();
    for (track_id, track) in t.tracks.iter().enumerate() {
        let Some(class) = class_ids[track_id] else {
            continue;
        };
        for i in track.slices.clone() {
            if !t.slice_class(i).is_device_work() {
                continue;
            }
            parts.push((
                track.source,
                class,
                t.slices.name[i as usize],
                t.slices.start[i as usize],
                t.slices.end(i),
                track_id as u32,
                i,
            ));
        }
    }
    parts.sort_unstable_by_key(|p| (p.0, p.1, p.2, p.3, p.5));
    let mut nodes: Vec<DeviceNode> = Vec::new();
    let mut member: Vec<(SliceId, u32)> = Vec::with_capacity(parts.len());
    // The open occurrence: its class, the engines in it, and the end of its covered union.
    let mut open: Option<(u8, Vec<u32>, i64)> = None;
    for &(source, class, name, start, end, track, slice) in &parts {
        if let (Some((open_class, tracks, union_end)), Some(node)) =
            (open.as_mut(), nodes.last_mut())
            && node.source == source
            && *open_class == class
            && node.name == name
            && (start < node.end
                || (tracks.len() % die_count(source, class) != 0
                    && start - *union_end <= WAVE_GAP_NS))
            && !tracks.contains(&track)
        {
            // Union of sorted-by-start intervals: only the part past the covered end adds.
            node.wall_ns += (end - start.max(*union_end)).max(0);
            *union_end = (*union_end).max(end);
            node.end = node.end.max(end);
            node.engine_ns += end - start;
            node.engines += 1;
            node.engine_min_ns = node.engine_min_ns.min(end - start);
            node.engine_max_ns = node.engine_max_ns.max(end - start);
            tracks.push(track);
            member.push((slice, (nodes.len() - 1) as u32));
            continue;
        }
        nodes.push(DeviceNode {
            source,
            name,
            cat: t.slices.cat[slice as usize],
            first: slice,
            start,
            end,
            wall_ns: end - start,
            engine_ns: end - start,
            engines: 1,
            engine_min_ns: end - start,
            engine_max_ns: end - start,
        });
        member.push((slice, (nodes.len() - 1) as u32));
        open = Some((class, vec![track], end));
    }
    // Sort by start and renumber the members.
    let mut order: Vec<u32> = (0..nodes.len() as u32).collect();
    order.sort_by_key(|&k| {
        let n = &nodes[k as usize];
        (n.start, n.source, n.first)
    });
    let mut rank = vec![0u32; nodes.len()];
    for (new, &old) in order.iter().enumerate() {
        rank[old as usize] = new as u32;
    }
    let node_of = member
        .into_iter()
        .map(|(slice, k)| (slice, rank[k as usize]))
        .collect();
    let nodes = order.iter().map(|&k| nodes[k as usize].clone()).collect();
    NodeIndex { nodes, node_of }
}

/// What kernel (TPC guid or MME op) a node slice runs: the `op` arg of the Synapse TEF, the
/// `operation` arg of the bridge and the Kineto plugin, the `Operation` the HW CSV lists per
/// node name, else the slice name (the bridge names device
/// slices after the kernel).
#[derive(Debug, Default)]
pub struct NodeKernels {
    /// The HW CSV's node → `Operation` table per input (its `nodes` top-level entry).
    csv: FxHashMap<u16, FxHashMap<String, String>>,
}

impl NodeKernels {
    /// Reads the per-input node tables once.
    #[must_use]
    pub fn new(t: &Timeline) -> Self {
        let mut csv = FxHashMap::default();
        for (source, s) in t.sources.iter().enumerate() {
            let Some((_, text)) = s.top_level.iter().find(|(k, _)| k == "nodes") else {
                continue;
            };
            let Ok(serde_json::Value::Object(map)) = serde_json::from_str(text) else {
                continue;
            };
            let ops: FxHashMap<String, String> = map
                .into_iter()
                .filter_map(|(node, v)| Some((node, v.get("Operation")?.as_str()?.to_owned())))
                .filter(|(_, op)| !op.is_empty())
                .collect();
            csv.insert(source as u16, ops);
        }
        Self { csv }
    }

    /// The kernel of `slice`.
    #[must_use]
    pub fn of(&self, t: &Timeline, slice: SliceId) -> String {
        // The TEF writes the kernel as `op`, the bridge and Kineto plugin as `operation`.
        if let Some(op) = ["op", "operation"]
            .iter()
            .find_map(|key| t.arg_str(slice, key).filter(|s| !s.is_empty()))
        {
            return op;
        }
        let name = t.slice_name(slice);
        t.slice_track(slice)
            .and_then(|track| self.csv.get(&track.source)?.get(name).cloned())
            .unwrap_or_else(|| name.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use steplens_ingest::{LoadOptions, load_bytes};

    use super::device_nodes;

    /// A TEF-shaped trace: one TPC node on three engines, then the same kernel again.
    const TEF: &str = r#"{"traceEvents":[
{"name":"process_name","ph":"M","pid":4,"args":{"name":"*TPC "}},
{"name":"thread_name","ph":"M","pid":4,"tid":1,"args":{"name":"[HD0] TPC 0"}},
{"name":"thread_name","ph":"M","pid":4,"tid":2,"args":{"name":"[HD0] TPC 1"}},
{"name":"thread_name","ph":"M","pid":4,"tid":3,"args":{"name":"[HD0] TPC 2"}},
{"name":"process_name","ph":"M","pid":9,"args":{"name":"***Host"}},
{"name":"add_fwd","cat":"HW","ph":"X","ts":10,"dur":10,"pid":4,"tid":1},
{"name":"add_fwd","cat":"HW","ph":"X","ts":11,"dur":10,"pid":4,"tid":2},
{"name":"add_fwd","cat":"HW","ph":"X","ts":12,"dur":10,"pid":4,"tid":3},
{"name":"add_fwd","cat":"HW","ph":"X","ts":20.5,"dur":5,"pid":4,"tid":1},
{"name":"add_fwd","cat":"HW","ph":"X","ts":21.5,"dur":5,"pid":4,"tid":2}
]}"#;

    #[test]
    fn a_node_on_many_engines_is_one_occurrence() {
        let t = load_bytes("tef.json", TEF.as_bytes().to_vec(), &LoadOptions::default())
            .map_err(|e| e.to_string());
        assert!(t.is_ok(), "{t:?}");
        let nodes = t.map(|t| device_nodes(&t)).unwrap_or_default();
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        assert_eq!(nodes[0].engines, 3);
        assert_eq!(nodes[0].wall_ns, 12_000);
        assert_eq!(nodes[0].engine_ns, 30_000);
        // Engine 0 starts the next occurrence while engine 2 still runs the first.
        assert_eq!(nodes[1].engines, 2);
        assert_eq!(nodes[1].wall_ns, 6_000);
    }
}
