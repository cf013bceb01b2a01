//! Collectives: recognised by name, collected per rank, matched across ranks, and linked for
//! the viewer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use steplens_ingest::model::{NO_PARENT, OpArg, SliceId, Timeline, TrackKind};

use super::input_ranks;

/// How communication backends name their own annotation of a collective (`nccl:all_reduce`).
const BACKEND_PREFIXES: [&str; 4] = ["nccl:", "gloo:", "rccl:", "hccl:"];

/// One collective on one rank.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Occurrence {
    /// Collective (`all_reduce`, …).
    pub(crate) name: String,
    /// Index of the track it ran on (in its own Timeline; not kept in summaries).
    #[serde(skip)]
    pub(crate) track: usize,
    /// Its slice (in its own Timeline; not kept in summaries).
    #[serde(skip)]
    pub(crate) slice: SliceId,
    /// What matches it across ranks: (process group and how, sequence number or ordinal).
    pub(crate) key: (String, i64),
    /// Start, ns.
    pub(crate) start: i64,
    /// End, ns.
    pub(crate) end: i64,
    /// Message size, when recorded.
    pub(crate) bytes: Option<i64>,
    /// Ranks in its process group: `Group size` where written, else the trace's
    /// `distributedInfo.world_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) group_size: Option<i64>,
}

/// One collective matched on every rank.
pub(crate) struct Matched {
    /// Shortest duration across ranks.
    pub(crate) latency: i64,
    /// Mean over ranks of latest start − its start.
    pub(crate) mean_wait: i64,
    pub(crate) start_skew: i64,
    pub(crate) end_skew: i64,
    pub(crate) bytes: Option<i64>,
    pub(crate) group_size: Option<i64>,
}

/// How specific a collective slice is: device kernels are the transfer itself.
pub(crate) fn collective_of(name: &str) -> Option<(u8, String)> {
    let lower = name.to_ascii_lowercase();
    // One name per collective, however the layer spells it: `_allgather_base`,
    // `all_gather_into_tensor_coalesced` and `ncclDevKernel_AllGather` are all `all_gather`.
    let normalize = |op: &str| {
        let mut op = op.trim_matches('_');
        while let Some(shorter) = ["_base", "_coalesced", "_into_tensor", "_tensor"]
            .iter()
            .find_map(|suffix| op.strip_suffix(suffix))
        {
            op = shorter.trim_end_matches('_');
        }
        let op = op
            .replace("allreduce", "all_reduce")
            .replace("allgather", "all_gather")
            .replace("reducescatter", "reduce_scatter")
            .replace("alltoall", "all_to_all");
        // `all_to_all_single` with splits is written `all_to_allv`: the same collective.
        match op.strip_suffix('v') {
            Some("all_to_all") => "all_to_all".to_owned(),
            _ => op,
        }
    };
    if let Some(rest) = lower
        .strip_prefix("nccldevkernel_")
        .or_else(|| lower.strip_prefix("ncclkernel_"))
    {
        let op = rest.split(['_', '(']).next().unwrap_or(rest);
        return Some((KERNEL_LEVEL, normalize(op)));
    }
    for prefix in BACKEND_PREFIXES {
        if let Some(op) = lower.strip_prefix(prefix) {
            return Some((2, normalize(op)));
        }
    }
    if let Some(op) = lower.strip_prefix("c10d::") {
        let op = op.trim_end_matches('_');
        if matches!(
            op,
            "allreduce"
                | "allreduce_coalesced"
                | "broadcast"
                | "allgather"
                | "_allgather_base"
                | "allgather_into_tensor_coalesced"
                | "reduce_scatter"
                | "_reduce_scatter_base"
                | "reduce_scatter_tensor_coalesced"
                | "alltoall"
                | "alltoall_base"
                | "all_to_all"
                | "all_to_allv"
                | "allgather_coalesced"
                | "barrier"
                | "reduce"
                | "gather"
                | "scatter"
        ) {
            return Some((1, normalize(op)));
        }
    }
    None
}

/// The same collective on several ranks, for the viewer's links between them.
#[derive(Debug, Clone, Default)]
pub struct CollectiveLinks {
    /// Per slice of a matched collective, its group in `groups`.
    pub(crate) group_of: rustc_hash::FxHashMap<SliceId, usize>,
    /// Each matched collective: (rank, slice) on every rank it was found on, by rank.
    pub(crate) groups: Vec<Vec<(i64, SliceId)>>,
}

impl CollectiveLinks {
    /// The occurrences of the collective `slice` belongs to (itself included), by rank; empty
    /// when it is not a collective matched on another rank.
    #[must_use]
    pub fn of(&self, slice: SliceId) -> &[(i64, SliceId)] {
        self.group_of
            .get(&slice)
            .and_then(|&g| self.groups.get(g))
            .map_or(&[], Vec::as_slice)
    }

    /// Matched collectives.
    #[must_use]
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether no collective is matched across ranks.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// Collectives matched across the inputs of `t` (by process group and sequence number, else
/// ordinal, as the rank analysis matches them); ranks as [`input_ranks`] reads them.
#[must_use]
pub fn collective_links(t: &Timeline) -> CollectiveLinks {
    if t.sources.len() < 2 {
        return CollectiveLinks::default();
    }
    let names = CollectiveNames::of_timeline(t);
    let mut by_key: BTreeMap<(String, i64), Vec<(i64, SliceId)>> = BTreeMap::new();
    for (source, (rank, _)) in input_ranks(t).into_iter().enumerate() {
        for occ in collect(t, source as u16, &names) {
            by_key.entry(occ.key).or_default().push((rank, occ.slice));
        }
    }
    let mut links = CollectiveLinks::default();
    for (_, mut members) in by_key {
        members.sort_unstable();
        if members.windows(2).any(|w| w[0].0 != w[1].0) {
            for &(_, slice) in &members {
                links.group_of.insert(slice, links.groups.len());
            }
            links.groups.push(members);
        }
    }
    links
}

/// [`collective_of`] for every interned name, by name id: names repeat across slices, so each
/// is classified once.
pub(crate) struct CollectiveNames(Vec<Option<(u8, String)>>);

impl CollectiveNames {
    pub(crate) fn of_timeline(t: &Timeline) -> Self {
        Self(
            t.strings
                .iter()
                .map(|(_, name)| collective_of(name))
                .collect(),
        )
    }

    /// The collective slice `i` is, by its name.
    pub(crate) fn slice(&self, t: &Timeline, i: SliceId) -> Option<&(u8, String)> {
        self.0.get(t.slices.name[i as usize] as usize)?.as_ref()
    }
}

/// The collectives of one input, of the most specific kind it has, in time order.
/// `by_name` classifies the names of `t`.
pub(crate) fn collect(t: &Timeline, source: u16, by_name: &CollectiveNames) -> Vec<Occurrence> {
    let mut found: Vec<(u8, SliceId, String, usize)> = Vec::new();
    for (track_index, track) in t
        .tracks
        .iter()
        .enumerate()
        .filter(|(_, tr)| tr.source == source)
    {
        if !matches!(
            track.kind,
            TrackKind::HostThread | TrackKind::DeviceEngine { .. }
        ) {
            continue;
        }
        for i in track.slices.clone() {
            let name = t.slice_name(i);
            let hit = if name == "record_param_comms" {
                t.arg_str(i, "Collective name")
                    .and_then(|c| collective_of(&format!("c10d::{c}")))
                    .map(|(_, op)| (0, op))
            } else {
                by_name.slice(t, i).cloned()
            };
            if let Some((level, op)) = hit {
                found.push((level, i, op, track_index));
            }
        }
    }
    let Some(best) = found.iter().map(|f| f.0).max() else {
        return Vec::new();
    };
    found.retain(|f| f.0 == best);
    found.sort_by_key(|f| t.slices.start[f.1 as usize]);
    // A kernel's name can hide the collective (an all-to-all runs as NCCL's `SendRecv`): the
    // host op that launched it names it, and may carry the size the kernel lacks.
    let launches = t.launches();
    let world_size = t
        .sources
        .get(usize::from(source))
        .and_then(|s| s.world_size);
    let mut ordinal: BTreeMap<String, i64> = BTreeMap::new();
    let mut repeats: BTreeMap<(String, i64), i64> = BTreeMap::new();
    found
        .into_iter()
        .map(|(_, i, op, track)| {
            let host = (best == KERNEL_LEVEL)
                .then(|| launches.host_of(i))
                .flatten()
                .map(|launch| host_collective(t, launch, by_name))
                .unwrap_or_default();
            let op = host.name.unwrap_or(op);
            // The slice's own sequence number and group, else the launching op's.
            let seq = sequence_number(t, i).or(host.seq);
            let group = t
                .arg_str(i, "Process Group Name")
                .or(host.group)
                .unwrap_or_else(|| "default".to_owned());
            let key = match seq {
                // Kernels launched by one op share its number: the k-th of them is told apart.
                Some(s) => {
                    let k = repeats.entry((group.clone(), s)).or_insert(0);
                    let tag = if *k == 0 {
                        format!("{group}/seq")
                    } else {
                        format!("{group}/seq#{k}")
                    };
                    *k += 1;
                    (tag, s)
                }
                None => {
                    let n = ordinal.entry(op.clone()).or_insert(0);
                    let key = (format!("{group}/{op}"), *n);
                    *n += 1;
                    key
                }
            };
            let bytes = message_bytes(t, i).or(host.bytes);
            let group_size = t
                .arg_i64(i, "Group size")
                .or(host.group_size)
                .or(world_size)
                .filter(|&g| g > 1);
            Occurrence {
                name: op,
                track,
                slice: i,
                key,
                start: t.slices.start[i as usize],
                end: t.slices.end(i),
                bytes,
                group_size,
            }
        })
        .collect()
}

/// [`collective_of`]'s level of a device kernel (`ncclDevKernel_…`).
const KERNEL_LEVEL: u8 = 3;

/// What the host ops around a kernel's launch say about its collective.
#[derive(Default)]
struct HostCollective {
    /// The innermost collective op's name (`all_to_all` for `nccl:all_to_all`).
    name: Option<String>,
    /// The first message size found going outwards.
    bytes: Option<i64>,
    /// The first `Group size` found going outwards.
    group_size: Option<i64>,
    /// The first sequence number found going outwards.
    seq: Option<i64>,
    /// The first `Process Group Name` found going outwards.
    group: Option<String>,
}

/// What matches one collective across ranks where the trace records it: its sequence number in
/// its process group (`Seq` from `record_param_comms`, `Collective sequence number` or `seq`
/// in newer NCCL metadata).
fn sequence_number(t: &Timeline, slice: SliceId) -> Option<i64> {
    ["Seq", "Collective sequence number", "seq"]
        .into_iter()
        .find_map(|key| t.arg_i64(slice, key))
}

fn host_collective(t: &Timeline, launch: SliceId, by_name: &CollectiveNames) -> HostCollective {
    let mut found = HostCollective::default();
    let mut at = launch;
    // Parents nest a few levels deep; the bound only guards a malformed parent chain.
    for _ in 0..64 {
        let name = t.slice_name(at);
        let op = if name == "record_param_comms" {
            t.arg_str(at, "Collective name")
                .and_then(|c| collective_of(&format!("c10d::{c}")))
        } else {
            by_name.slice(t, at).cloned()
        };
        if let Some((_, op)) = op {
            found.name.get_or_insert(op);
            if found.bytes.is_none() {
                found.bytes = message_bytes(t, at);
            }
            if found.group_size.is_none() {
                found.group_size = t.arg_i64(at, "Group size");
            }
            if found.seq.is_none() {
                found.seq = sequence_number(t, at);
            }
            if found.group.is_none() {
                found.group = t.arg_str(at, "Process Group Name");
            }
        }
        if found.name.is_some() && found.bytes.is_some() && found.seq.is_some() {
            break;
        }
        match t.slices.parent.get(at as usize) {
            Some(&p) if p != NO_PARENT => at = p,
            _ => break,
        }
    }
    found
}

/// A collective slice's message size: `In msg nelems` × `dtype` where the profiler wrote them
/// (torch ≥ 2.1), else, on a backend's own annotation (`nccl:all_reduce`, `gloo:broadcast`),
/// its first input's `Input Dims` × `Input type`, as 2022–2023 traces record it.
fn message_bytes(t: &Timeline, slice: SliceId) -> Option<i64> {
    if let Some(elements) = t.arg_i64(slice, "In msg nelems") {
        let size = t
            .arg_str(slice, "dtype")
            .and_then(|d| crate::op_names::dtype_size(&d))
            .unwrap_or(4);
        // A count from the trace: a hostile one must not overflow or read as negative.
        return elements.checked_mul(size).filter(|&b| b > 0);
    }
    if !BACKEND_PREFIXES
        .iter()
        .any(|p| t.slice_name(slice).starts_with(p))
    {
        return None;
    }
    let dims: Vec<Vec<i64>> = t
        .arg_raw(slice, OpArg::InputDims.key())
        .and_then(|raw| serde_json::from_slice(raw).ok())?;
    let types: Vec<String> = t
        .arg_raw(slice, OpArg::InputType.key())
        .and_then(|raw| serde_json::from_slice(raw).ok())?;
    let shape = dims.first().filter(|d| !d.is_empty())?;
    let size = crate::op_names::dtype_size(types.first()?)?;
    shape
        .iter()
        .try_fold(
            size,
            |acc, &d| {
                if d < 0 { None } else { acc.checked_mul(d) }
            },
        )
        .filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::message_bytes;

    #[test]
    fn message_sizes_refuse_hostile_counts() {
        let t = steplens_ingest::load_bytes(
            "sizes.json",
            br#"{"traceEvents":[
              {"ph":"X","name":"nccl:all_reduce","cat":"user_annotation","pid":1,"tid":1,"ts":0,"dur":1,"args":{"In msg nelems":9223372036854775807,"dtype":"Float"}},
              {"ph":"X","name":"nccl:all_reduce","cat":"user_annotation","pid":1,"tid":1,"ts":2,"dur":1,"args":{"In msg nelems":-5,"dtype":"Float"}},
              {"ph":"X","name":"nccl:all_reduce","cat":"user_annotation","pid":1,"tid":1,"ts":4,"dur":1,"args":{"Input Dims":[[-2,-3]],"Input type":["float"]}},
              {"ph":"X","name":"nccl:all_reduce","cat":"user_annotation","pid":1,"tid":1,"ts":6,"dur":1,"args":{"Input Dims":[[1024,4]],"Input type":["c10::BFloat16"]}},
              {"ph":"X","name":"aten::add","cat":"cpu_op","pid":1,"tid":1,"ts":8,"dur":1,"args":{"Input Dims":[[1024,4]],"Input type":["float"]}}
            ]}"#
            .to_vec(),
            &steplens_ingest::LoadOptions::default(),
        )
        .expect("trace");
        let sizes: Vec<Option<i64>> = (0..t.slices.len() as u32)
            .map(|i| message_bytes(&t, i))
            .collect();
        // Overflowing and negative counts, negative dims: no size; a backend annotation's
        // Input Dims x Input type: 1024 x 4 x 2 bytes; an op that is no collective: none.
        assert_eq!(sizes, vec![None, None, None, Some(8192), None]);
    }
}
