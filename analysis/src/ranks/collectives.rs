//! Collectives: recognised by name, collected per rank, matched across ranks, and linked for
//! the viewer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use steplens_ingest::model::{SliceId, Timeline, TrackKind};

use super::input_ranks;

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
}

/// How specific a collective slice is: device kernels are the transfer itself.
pub(crate) fn collective_of(name: &str) -> Option<(u8, String)> {
    let lower = name.to_ascii_lowercase();
    let normalize = |op: &str| {
        let op = op.trim_end_matches('_').replace("allreduce", "all_reduce");
        op.replace("allgather", "all_gather")
            .replace("reducescatter", "reduce_scatter")
            .replace("reduce_scatter_tensor", "reduce_scatter")
            .replace("alltoall", "all_to_all")
    };
    if let Some(rest) = lower
        .strip_prefix("nccldevkernel_")
        .or_else(|| lower.strip_prefix("ncclkernel_"))
    {
        let op = rest.split(['_', '(']).next().unwrap_or(rest);
        return Some((3, normalize(op)));
    }
    for prefix in ["nccl:", "gloo:", "rccl:", "hccl:"] {
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
                | "barrier"
                | "reduce"
                | "gather"
                | "scatter"
        ) {
            return Some((1, normalize(op.trim_start_matches('_'))));
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
    let mut ordinal: BTreeMap<String, i64> = BTreeMap::new();
    found
        .into_iter()
        .map(|(_, i, op, track)| {
            let seq = t.arg_i64(i, "Seq");
            let group = t
                .arg_str(i, "Process Group Name")
                .unwrap_or_else(|| "default".to_owned());
            let n = ordinal.entry(op.clone()).or_insert(0);
            let key = match seq {
                Some(s) => (format!("{group}/seq"), s),
                None => (format!("{group}/{op}"), *n),
            };
            *n += 1;
            let bytes = t
                .arg_i64(i, "In msg nelems")
                .map(|e| e * t.arg_str(i, "dtype").map_or(4, |d| dtype_bytes(&d)));
            Occurrence {
                name: op,
                track,
                slice: i,
                key,
                start: t.slices.start[i as usize],
                end: t.slices.end(i),
                bytes,
            }
        })
        .collect()
}

pub(crate) fn dtype_bytes(dtype: &str) -> i64 {
    match dtype.to_ascii_lowercase().as_str() {
        "double" | "long" | "int64" | "float64" | "complexfloat" => 8,
        "half" | "bfloat16" | "short" | "float16" | "int16" => 2,
        "byte" | "char" | "bool" | "int8" | "uint8" => 1,
        _ => 4,
    }
}
