//! Many ranks as one run: which input is which rank, the collectives matched across ranks
//! (comm latency, each rank's wait, skew, bus bandwidth when the size is known), per-rank compute
//! and collective time per step, and the `straggler` finding.
//!
//! A rank comes from `distributedInfo.rank`, else from the file name (`rank3`, `rank-3`, `_r3`),
//! else from the input order (said in a note). A collective is recognised by name: NCCL/RCCL
//! kernels (`ncclKernel_AllReduce…`, `ncclDevKernel_…`), backend ranges (`nccl:all_reduce`,
//! `gloo:all_reduce`), HCCL calls, `c10d::<op>_` ops and `record_param_comms`; the most specific
//! kind present in a rank is used (device kernels, then backend ranges, then ops). The same
//! collective is matched across ranks by process group and sequence number when the trace gives
//! them (`record_param_comms`' `Seq`), else by its ordinal among collectives of the same name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use steplens_ingest::model::{SliceId, Timeline, TrackKind};

use crate::compare::median;
use crate::finding::{Cost, Finding, FindingKind, Severity};
use crate::intervals::IntervalSet;

/// One rank of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankStats {
    /// The rank.
    pub rank: i64,
    /// Input it came from (index into `sources`).
    pub source: u16,
    /// How the rank was known: `distributedInfo`, `file name` or `input order`.
    pub rank_from: String,
    /// Steps of this rank.
    pub steps: usize,
    /// Median step, ns.
    pub step_p50_ns: Option<i64>,
    /// Median per step of the time not lost to communication (step − exposed comm: collective
    /// time with no compute beside it), ns.
    pub compute_p50_ns: Option<i64>,
    /// Median per step of the time in collectives (union), ns.
    pub collective_p50_ns: Option<i64>,
    /// Median per step of the collective time not hidden behind compute (exposed comm), ns.
    #[serde(default)]
    pub exposed_comm_p50_ns: Option<i64>,
    /// Collectives matched on every rank.
    pub collectives: usize,
    /// How often this rank started a matched collective last.
    pub last_arrivals: usize,
    /// Σ over matched collectives of this rank's wait (latest start − its start), ns.
    pub wait_ns: i64,
    /// Clock offset applied to this rank to align it with rank 0's clock, ns (0 on one host).
    pub clock_offset_ns: i64,
    /// Share of the time in collectives during which compute ran elsewhere on the rank (ops on
    /// other host threads, non-collective kernels), percent: communication hidden behind compute.
    pub comm_overlap_pct: Option<f64>,
}

/// Collectives of one name over the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CollectiveStats {
    /// Collective (`all_reduce`, `all_gather`, …).
    pub name: String,
    /// Matched occurrences (present on every rank).
    pub count: usize,
    /// Median comm latency: the shortest duration across ranks, ns.
    pub latency_p50_ns: i64,
    /// Median across occurrences of the mean wait per rank, ns.
    pub wait_p50_ns: i64,
    /// Largest start skew (latest − earliest start), ns.
    pub max_start_skew_ns: i64,
    /// Largest end skew, ns.
    pub max_end_skew_ns: i64,
    /// Message size, bytes, when the trace records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// Bus bandwidth at the median latency, GB/s, when the size is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_gbps: Option<f64>,
}

/// The run as a set of ranks; absent for a single input.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RanksReport {
    /// Ranks present.
    pub world_size: usize,
    /// Backend from `distributedInfo` (`nccl`, `gloo`, `hccl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// How the clocks were aligned.
    pub clock: String,
    /// One row per rank, by rank.
    pub ranks: Vec<RankStats>,
    /// Per collective name.
    pub collectives: Vec<CollectiveStats>,
}

/// Schema name of a rank summary.
pub const SUMMARY_SCHEMA: &str = "steplens.rank-summary/1";

/// What the rank analysis needs from one rank's trace (`steplens summarize` writes it next to
/// each trace): thousands of ranks then merge without their traces (`report --summaries`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankSummary {
    /// [`SUMMARY_SCHEMA`].
    pub schema: String,
    /// The trace's path as given.
    pub path: String,
    /// Rank, when the trace (`distributedInfo`) or its path (`--rank-regex`) says it.
    pub rank: Option<i64>,
    /// Whether the rank is written in the trace (`distributedInfo`).
    pub rank_written: bool,
    /// `host_name` of the trace.
    pub host: Option<String>,
    /// Backend from `distributedInfo`.
    pub backend: Option<String>,
    /// Collectives in time order, at the most specific level the trace records.
    pub collectives: Vec<Occurrence>,
    /// Steps of the rank.
    pub steps: usize,
    /// Median step, ns.
    pub step_p50_ns: Option<i64>,
    /// Median per step of the time not lost to communication (step − exposed comm), ns.
    pub compute_p50_ns: Option<i64>,
    /// Median per step of the time in collectives, ns.
    pub collective_p50_ns: Option<i64>,
    /// Median per step of the collective time not hidden behind compute, ns.
    pub exposed_comm_p50_ns: Option<i64>,
    /// Share of collective time with compute beside it, percent.
    pub comm_overlap_pct: Option<f64>,
    /// Self time per step of each host op (collectives left out), ns.
    pub self_ns_per_step: BTreeMap<String, i64>,
}

/// One rank's summary from input `source` of `t`; `children` is [`crate::ops::child_time`].
#[must_use]
pub fn rank_summary(t: &Timeline, source: u16, children: &[i64]) -> RankSummary {
    rank_summary_with(t, source, children, &CollectiveNames::of_timeline(t))
}

/// [`rank_summary`] with the timeline's collective names classified once for every input.
fn rank_summary_with(
    t: &Timeline,
    source: u16,
    children: &[i64],
    names: &CollectiveNames,
) -> RankSummary {
    let info = &t.sources[source as usize];
    let top = |key: &str| {
        info.top_level
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let backend = top("distributedInfo").and_then(|v| {
        let parsed: serde_json::Value = serde_json::from_str(&v).ok()?;
        parsed.get("backend")?.as_str().map(str::to_owned)
    });
    let collectives = collect(t, source, names);
    let comm = IntervalSet::from_ranges(collectives.iter().map(|o| (o.start, o.end)).collect());
    let compute = compute_intervals(t, source, &collectives, names);
    let split = step_split(t, source, &comm, &compute);
    RankSummary {
        schema: SUMMARY_SCHEMA.to_owned(),
        path: info.path.clone(),
        rank: info.rank,
        rank_written: top("distributedInfo").is_some(),
        host: top("host_name").map(|h| h.trim_matches('"').to_owned()),
        backend,
        steps: split.steps,
        step_p50_ns: split.step,
        compute_p50_ns: split.compute,
        collective_p50_ns: split.collective,
        exposed_comm_p50_ns: split.exposed,
        comm_overlap_pct: comm_overlap(&comm, &compute),
        self_ns_per_step: self_time_per_step(t, source, children, names),
        collectives,
    }
}

/// One collective on one rank.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Occurrence {
    /// Collective (`all_reduce`, …).
    pub(crate) name: String,
    /// Index of the track it ran on (in its own Timeline; not kept in summaries).
    #[serde(skip)]
    track: usize,
    /// Its slice (in its own Timeline; not kept in summaries).
    #[serde(skip)]
    slice: SliceId,
    /// What matches it across ranks: (process group and how, sequence number or ordinal).
    key: (String, i64),
    /// Start, ns.
    pub(crate) start: i64,
    /// End, ns.
    pub(crate) end: i64,
    /// Message size, when recorded.
    pub(crate) bytes: Option<i64>,
}

/// One collective matched on every rank.
struct Matched {
    /// Shortest duration across ranks.
    latency: i64,
    /// Mean over ranks of latest start − its start.
    mean_wait: i64,
    start_skew: i64,
    end_skew: i64,
    bytes: Option<i64>,
}

/// How specific a collective slice is: device kernels are the transfer itself.
fn collective_of(name: &str) -> Option<(u8, String)> {
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

/// The rank in a file name: `rank3`, `rank-3`, `rank_3`, `_r3`.
fn rank_from_name(path: &str) -> Option<i64> {
    let name = path
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(path)
        .to_ascii_lowercase();
    let digits_after = |at: usize| -> Option<i64> {
        let rest = name.get(at..)?.trim_start_matches(['-', '_']);
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        rest.get(..end).filter(|d| !d.is_empty())?.parse().ok()
    };
    if let Some(at) = name.find("rank") {
        return digits_after(at + 4);
    }
    let bytes = name.as_bytes();
    (0..bytes.len().saturating_sub(2)).find_map(|i| {
        (matches!(bytes[i], b'_' | b'-' | b'.') && bytes[i + 1] == b'r')
            .then(|| digits_after(i + 2))
            .flatten()
    })
}

/// The ranks of a multi-input run, with the `straggler` findings; `None` for one input or
/// inputs without collectives.
#[must_use]
pub fn ranks(t: &Timeline) -> Option<(RanksReport, Vec<Finding>)> {
    if t.sources.len() < 2 {
        return None;
    }
    let children = crate::ops::child_time(t);
    let names = CollectiveNames::of_timeline(t);
    let summaries: Vec<RankSummary> = (0..t.sources.len())
        .map(|source| rank_summary_with(t, source as u16, &children, &names))
        .collect();
    ranks_of(&summaries)
}

/// The same collective on several ranks, for the viewer's links between them.
#[derive(Debug, Clone, Default)]
pub struct CollectiveLinks {
    /// Per slice of a matched collective, its group in `groups`.
    group_of: rustc_hash::FxHashMap<SliceId, usize>,
    /// Each matched collective: (rank, slice) on every rank it was found on, by rank.
    groups: Vec<Vec<(i64, SliceId)>>,
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

/// Which rank each input is, and how that was known, from (rank the input states, whether
/// `distributedInfo` wrote it, path) in input order: the stated rank, else one in the file
/// name, else the input's position; when two inputs claim one rank, every input falls back to
/// its position.
fn assign_ranks<'a>(
    inputs: impl Iterator<Item = (Option<i64>, bool, &'a str)>,
) -> Vec<(i64, &'static str)> {
    let mut rank_of: Vec<(i64, &'static str)> = inputs
        .enumerate()
        .map(|(i, (rank, written, path))| {
            rank.map(|r| {
                (
                    r,
                    if written {
                        "distributedInfo"
                    } else {
                        "file name"
                    },
                )
            })
            .or_else(|| rank_from_name(path).map(|r| (r, "file name")))
            .unwrap_or((i as i64, "input order"))
        })
        .collect();
    let mut distinct: Vec<i64> = rank_of.iter().map(|r| r.0).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() != rank_of.len() {
        for (i, r) in rank_of.iter_mut().enumerate() {
            *r = (i as i64, "input order");
        }
    }
    rank_of
}

/// The rank of each input of `t` as the rank analysis reads it, with how it was known
/// (`distributedInfo`, `file name`, `input order`).
#[must_use]
pub fn input_ranks(t: &Timeline) -> Vec<(i64, &'static str)> {
    assign_ranks(t.sources.iter().map(|info| {
        let written = info.top_level.iter().any(|(k, _)| k == "distributedInfo");
        (info.rank, written, info.path.as_str())
    }))
}

/// The rank analysis over rank summaries (one per input, in input order): what [`ranks`] does
/// from a Timeline, and `report --summaries` from summary files.
#[must_use]
pub fn ranks_of(summaries: &[RankSummary]) -> Option<(RanksReport, Vec<Finding>)> {
    if summaries.len() < 2 {
        return None;
    }
    let rank_of = assign_ranks(
        summaries
            .iter()
            .map(|s| (s.rank, s.rank_written, s.path.as_str())),
    );
    let occurrences: Vec<&Vec<Occurrence>> = summaries.iter().map(|s| &s.collectives).collect();
    if occurrences.iter().any(|o| o.is_empty()) {
        return None;
    }
    // Match across ranks.
    let mut by_key: BTreeMap<(String, i64), Vec<Option<usize>>> = BTreeMap::new();
    for (r, occ) in occurrences.iter().enumerate() {
        for (k, o) in occ.iter().enumerate() {
            by_key
                .entry(o.key.clone())
                .or_insert_with(|| vec![None; occurrences.len()])[r] = Some(k);
        }
    }
    let matched: Vec<Vec<usize>> = by_key
        .into_values()
        .filter_map(|slots| slots.into_iter().collect::<Option<Vec<usize>>>())
        .collect();
    // Clock offsets: the median over matched collectives of (end on the reference rank − end on
    // rank r).
    // The lowest rank is the reference, whatever order the inputs came in.
    let reference = (0..rank_of.len())
        .min_by_key(|&i| rank_of[i].0)
        .unwrap_or(0);
    let offsets: Vec<i64> = (0..occurrences.len())
        .map(|r| {
            median(
                matched
                    .iter()
                    .map(|m| occurrences[reference][m[reference]].end - occurrences[r][m[r]].end)
                    .collect(),
            )
            .unwrap_or(0)
        })
        .collect();
    let same_host = summaries.windows(2).all(|w| w[0].host == w[1].host);
    let applied: Vec<i64> = if same_host {
        vec![0; offsets.len()]
    } else {
        offsets.clone()
    };
    let clock = if same_host {
        format!(
            "one host: timestamps agree (collective ends differ by a median of at most {})",
            crate::units::human_ns(offsets.iter().map(|o| o.abs()).max().unwrap_or(0))
        )
    } else {
        format!(
            "aligned to rank {} by the median end of {} matched collectives",
            rank_of[reference].0,
            matched.len()
        )
    };
    let n = occurrences.len();
    let mut last_arrivals = vec![0usize; n];
    let mut wait = vec![0i64; n];
    let mut caused = vec![0i64; n];
    let mut per_name: BTreeMap<String, Vec<Matched>> = BTreeMap::new();
    for m in &matched {
        let starts: Vec<i64> = (0..n)
            .map(|r| occurrences[r][m[r]].start + applied[r])
            .collect();
        let ends: Vec<i64> = (0..n)
            .map(|r| occurrences[r][m[r]].end + applied[r])
            .collect();
        let latest = starts.iter().copied().max().unwrap_or(0);
        let earliest = starts.iter().copied().min().unwrap_or(0);
        let last = starts.iter().position(|&s| s == latest).unwrap_or(0);
        last_arrivals[last] += 1;
        let mut waits = 0;
        for r in 0..n {
            wait[r] += latest - starts[r];
            waits += latest - starts[r];
        }
        caused[last] += waits;
        let latency = (0..n).map(|r| ends[r] - starts[r]).min().unwrap_or(0);
        let end_skew = ends.iter().max().unwrap_or(&0) - ends.iter().min().unwrap_or(&0);
        let o = &occurrences[0][m[0]];
        per_name.entry(o.name.clone()).or_default().push(Matched {
            latency,
            mean_wait: waits / n as i64,
            start_skew: latest - earliest,
            end_skew,
            bytes: o.bytes,
        });
    }
    let collectives = per_name
        .into_iter()
        .map(|(name, rows)| {
            let p50 = |v: Vec<i64>| median(v).unwrap_or(0);
            let latency = p50(rows.iter().map(|r| r.latency).collect());
            let bytes = rows.iter().find_map(|r| r.bytes);
            let bus_gbps = bytes.filter(|_| latency > 0).map(|b| {
                let world = n as f64;
                let factor = match name.as_str() {
                    "all_reduce" => 2.0 * (world - 1.0) / world,
                    "all_gather" | "reduce_scatter" | "all_to_all" => (world - 1.0) / world,
                    _ => 1.0,
                };
                (b as f64 * factor / latency as f64 * 100.0).round() / 100.0
            });
            CollectiveStats {
                count: rows.len(),
                latency_p50_ns: latency,
                wait_p50_ns: p50(rows.iter().map(|r| r.mean_wait).collect()),
                max_start_skew_ns: rows.iter().map(|r| r.start_skew).max().unwrap_or(0),
                max_end_skew_ns: rows.iter().map(|r| r.end_skew).max().unwrap_or(0),
                bytes,
                bus_gbps,
                name,
            }
        })
        .collect();
    let mut rows: Vec<RankStats> = summaries
        .iter()
        .enumerate()
        .map(|(r, s)| RankStats {
            rank: rank_of[r].0,
            source: u16::try_from(r).unwrap_or(u16::MAX),
            rank_from: rank_of[r].1.to_owned(),
            steps: s.steps,
            step_p50_ns: s.step_p50_ns,
            compute_p50_ns: s.compute_p50_ns,
            collective_p50_ns: s.collective_p50_ns,
            exposed_comm_p50_ns: s.exposed_comm_p50_ns,
            collectives: matched.len(),
            last_arrivals: last_arrivals[r],
            wait_ns: wait[r],
            clock_offset_ns: applied[r],
            comm_overlap_pct: s.comm_overlap_pct,
        })
        .collect();
    let findings = straggler(summaries, &rows, &caused, matched.len());
    rows.sort_by_key(|r| r.rank);
    let backend = summaries.iter().find_map(|s| s.backend.clone());
    Some((
        RanksReport {
            world_size: n,
            backend,
            clock,
            ranks: rows,
            collectives,
        },
        findings,
    ))
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
    fn slice(&self, t: &Timeline, i: SliceId) -> Option<&(u8, String)> {
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

fn dtype_bytes(dtype: &str) -> i64 {
    match dtype.to_ascii_lowercase().as_str() {
        "double" | "long" | "int64" | "float64" | "complexfloat" => 8,
        "half" | "bfloat16" | "short" | "float16" | "int16" => 2,
        "byte" | "char" | "bool" | "int8" | "uint8" => 1,
        _ => 4,
    }
}

/// The share of `occ`'s time during which `source` computed elsewhere: outermost host ops on
/// threads that carry no collective, and device kernels that are not collectives.
fn comm_overlap(comm: &IntervalSet, compute: &IntervalSet) -> Option<f64> {
    let total = comm.total();
    if total == 0 {
        return None;
    }
    let hidden = comm.intersect(compute).total();
    Some((hidden as f64 * 1000.0 / total as f64).round() / 10.0)
}

/// Compute on rank `source`: outermost host work on threads that issue no collective, and
/// device work that is not a collective.
fn compute_intervals(
    t: &Timeline,
    source: u16,
    occ: &[Occurrence],
    by_name: &CollectiveNames,
) -> IntervalSet {
    let is_collective = |i: SliceId| by_name.slice(t, i).is_some();
    // On a rank with a device, compute is its device work: the host thread launches and then
    // blocks (in a synchronize, say) while the device computes, and blocking is not computing.
    let has_device_work = t.tracks.iter().any(|tr| {
        tr.source == source
            && tr.kind.is_device()
            && tr.slices.clone().any(|i| t.slice_class(i).is_device_work())
    });
    let mut compute = Vec::new();
    for (track_index, track) in t
        .tracks
        .iter()
        .enumerate()
        .filter(|(_, tr)| tr.source == source)
    {
        let carries_comm = has_device_work || occ.iter().any(|o| o.track == track_index);
        for i in track.slices.clone() {
            let class = t.slice_class(i);
            let idx = i as usize;
            let outermost = t.slices.parent[idx] == steplens_ingest::model::NO_PARENT
                || !t.slice_class(t.slices.parent[idx]).is_host_work();
            let counts = match track.kind {
                TrackKind::HostThread => !carries_comm && class.is_host_work() && outermost,
                TrackKind::DeviceEngine { .. } => class.is_device_work() && !is_collective(i),
                _ => false,
            };
            if counts {
                compute.push((t.slices.start[idx], t.slices.end(i)));
            }
        }
    }
    IntervalSet::from_ranges(compute)
}

/// Medians over the steps of one rank.
struct StepSplit {
    step: Option<i64>,
    compute: Option<i64>,
    collective: Option<i64>,
    /// Collective time not hidden behind compute.
    exposed: Option<i64>,
    steps: usize,
}

/// Per step of `source`: median step, time outside and inside collectives, exposed comm.
fn step_split(t: &Timeline, source: u16, comm: &IntervalSet, compute: &IntervalSet) -> StepSplit {
    let exposed_set = comm.minus(compute);
    let steps: Vec<_> = t.steps.iter().filter(|s| s.source == source).collect();
    let mut durs = Vec::new();
    let mut computes = Vec::new();
    let mut colls = Vec::new();
    let mut exposed = Vec::new();
    for s in &steps {
        let c = comm.covered(s.start, s.end());
        let e = exposed_set.covered(s.start, s.end());
        durs.push(s.dur);
        colls.push(c);
        // Collective time hidden behind compute is not time the rank lost to communication.
        computes.push(s.dur - e);
        exposed.push(e);
    }
    StepSplit {
        step: median(durs),
        compute: median(computes),
        collective: median(colls),
        exposed: median(exposed),
        steps: steps.len(),
    }
}

const STRAGGLER_ADVICE: &str = "One rank reaches the collectives late and every other rank \
    waits for it. Compare its step with the others: uneven data (bucket or pad batches to equal \
    cost), a slower data loader or host on that rank (more workers, pinned memory), a slower or \
    throttled device, or extra work only that rank does (logging, checkpointing, evaluation on \
    rank 0) moved out of the step.";

/// A rank that arrives last at most collectives (≥ 3 and more than its fair share) and computes
/// longer per step than the others' median.
fn straggler(
    summaries: &[RankSummary],
    rows: &[RankStats],
    caused: &[i64],
    matched: usize,
) -> Vec<Finding> {
    let n = rows.len();
    if matched < 3 || n < 2 {
        return Vec::new();
    }
    let Some((worst, row)) = rows
        .iter()
        .enumerate()
        .max_by_key(|(_, r)| (r.last_arrivals, std::cmp::Reverse(r.rank)))
    else {
        return Vec::new();
    };
    // Arriving last half the time with 2 ranks is chance; ask for clearly more than 1/n and
    // for a majority.
    if row.last_arrivals * 2 <= matched || row.last_arrivals * n <= matched * 2 {
        return Vec::new();
    }
    let others = rows
        .iter()
        .filter(|r| r.rank != row.rank)
        .filter_map(|r| r.compute_p50_ns)
        .collect();
    let Some(others_p50) = median(others) else {
        return Vec::new();
    };
    let extra = row.compute_p50_ns.unwrap_or(0) - others_p50;
    let step = row.step_p50_ns.unwrap_or(0).max(1);
    // Below 5 % of the step the others' wait is noise, not a straggler.
    if extra * 20 < step {
        return Vec::new();
    }
    let per_step_cost = caused[worst] / (row.steps.max(1) as i64);
    let grew = grown_ops(summaries, row.source as usize);
    vec![Finding {
        kind: FindingKind::Straggler,
        severity: if extra * 5 >= step {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "rank {} arrives last at {} of {} collectives and computes {} longer per step than \
             the others' median{}; the other ranks wait {} per step for it",
            row.rank,
            row.last_arrivals,
            matched,
            crate::units::human_ns(extra),
            if grew.is_empty() {
                String::new()
            } else {
                format!(" (grew most: {})", grew.join(", "))
            },
            crate::units::human_ns(per_step_cost)
        ),
        step: None,
        start_ns: 0,
        end_ns: 0,
        track: None,
        ops: Vec::new(),
        call_site: None,
        count: row.last_arrivals as u64,
        lost_ns: caused[worst],
        evidence: Vec::new(),
        cost: Cost::pattern(row.source, Vec::new()),
        recommendation: STRAGGLER_ADVICE.into(),
    }]
}

/// The ops whose self time per step on input `mine` most exceeds the other ranks' median.
fn grown_ops(summaries: &[RankSummary], mine: usize) -> Vec<String> {
    let per_rank: Vec<&BTreeMap<String, i64>> =
        summaries.iter().map(|s| &s.self_ns_per_step).collect();
    if mine >= per_rank.len() {
        return Vec::new();
    }
    let mut grown: Vec<(String, i64)> = per_rank[mine]
        .iter()
        .map(|(op, &ns)| {
            let others = per_rank
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != mine)
                .map(|(_, m)| m.get(op).copied().unwrap_or(0))
                .collect();
            (op.clone(), ns - median(others).unwrap_or(0))
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    grown.sort_by_key(|g| std::cmp::Reverse(g.1));
    grown
        .into_iter()
        .take(3)
        .map(|(op, d)| format!("{op} +{}", crate::units::human_ns(d)))
        .collect()
}

/// Self time per step of every host op and device kernel of one input (collectives and
/// annotations left out; kernels as `name [device]`).
fn self_time_per_step(
    t: &Timeline,
    source: u16,
    children: &[i64],
    by_name: &CollectiveNames,
) -> BTreeMap<String, i64> {
    let is_collective = |i: SliceId| by_name.slice(t, i).is_some();
    let steps = t.steps.iter().filter(|s| s.source == source).count().max(1) as i64;
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for track in t.tracks.iter().filter(|tr| tr.source == source) {
        // Device work too, so a slower GPU names the kernels that grew (as `check` names them).
        let device = match track.kind {
            TrackKind::HostThread => false,
            TrackKind::DeviceEngine { .. } => true,
            _ => continue,
        };
        for i in track.slices.clone() {
            let class = t.slice_class(i);
            let work = if device {
                class.is_device_work()
            } else {
                class.is_host_work()
            };
            if !work || is_collective(i) {
                continue;
            }
            let below = children.get(i as usize).copied().unwrap_or(0);
            let own = (t.slices.dur[i as usize] - below).max(0);
            let name = t.slice_name(i);
            if device {
                *out.entry(crate::ops::op_label(name, "device")).or_insert(0) += own;
            } else if let Some(v) = out.get_mut(name) {
                *v += own;
            } else {
                out.insert(name.to_owned(), own);
            }
        }
    }
    out.values_mut().for_each(|v| *v /= steps);
    out
}

#[cfg(test)]
mod tests {
    use super::{collective_of, rank_from_name};

    #[test]
    fn ranks_from_file_names() {
        assert_eq!(rank_from_name("run/rank3.json"), Some(3));
        assert_eq!(rank_from_name("trace_rank-12.pt.trace.json"), Some(12));
        assert_eq!(rank_from_name("job_r7.json.gz"), Some(7));
        assert_eq!(rank_from_name("ranked.json"), None);
        assert_eq!(rank_from_name("train.json"), None);
    }

    #[test]
    fn collectives_by_name() {
        assert_eq!(
            collective_of("gloo:all_reduce"),
            Some((2, "all_reduce".into()))
        );
        assert_eq!(
            collective_of("c10d::allreduce_"),
            Some((1, "all_reduce".into()))
        );
        assert_eq!(
            collective_of(
                "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
            ),
            Some((3, "all_gather".into()))
        );
        assert_eq!(
            collective_of("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"),
            Some((3, "all_reduce".into()))
        );
        assert_eq!(collective_of("aten::add"), None);
        assert_eq!(collective_of("c10d::rank"), None);
    }
}
