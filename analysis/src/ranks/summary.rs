//! One rank's summary (`steplens.rank-summary/1`): its collectives, per-step compute and
//! collective time, and op self time per step; the map side of `summarize`.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::model::{SliceId, Timeline, TrackKind};

use super::{CollectiveNames, Occurrence, collect};
use crate::stats::median;
use steplens_ingest::intervals::IntervalSet;

/// Schema name of a rank summary.
pub const SUMMARY_SCHEMA: &str = "steplens.rank-summary/1";

/// Why a document is not a summary this version reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// Not JSON of a summary's shape.
    #[error("line {line} column {column}: not a {SUMMARY_SCHEMA} document: {message}")]
    NotASummary {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the JSON reader said.
        message: String,
    },
    /// A summary of another schema version.
    #[error(
        "schema {found} is not supported: this steplens reads {SUMMARY_SCHEMA} (summarize the trace again with this version)"
    )]
    OtherSchema {
        /// The document's schema.
        found: String,
    },
    /// No `schema` field at all.
    #[error("no \"schema\" field: not a {SUMMARY_SCHEMA} document")]
    NoSchema,
}

impl From<serde_json::Error> for SummaryError {
    fn from(e: serde_json::Error) -> Self {
        Self::NotASummary {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        }
    }
}

/// Reads one summary: its schema tag first, so that another version is named as such.
///
/// # Errors
/// A document that is not JSON of a summary's shape, or of another schema version.
pub fn parse_summary(bytes: &[u8]) -> Result<RankSummary, SummaryError> {
    #[derive(Deserialize)]
    struct SchemaTag {
        schema: Option<String>,
    }
    let tag: SchemaTag = serde_json::from_slice(bytes)?;
    match tag.schema.as_deref() {
        Some(SUMMARY_SCHEMA) => Ok(serde_json::from_slice(bytes)?),
        Some(other) => Err(SummaryError::OtherSchema {
            found: other.to_owned(),
        }),
        None => Err(SummaryError::NoSchema),
    }
}

/// Reads many summaries on `threads` threads (a thousand ranks' worth is most of a reduce's
/// time), in input order.
///
/// # Errors
/// The first document that is not a summary this version reads, with its index.
pub fn parse_summaries(
    docs: &[Vec<u8>],
    threads: usize,
) -> Result<Vec<RankSummary>, (usize, SummaryError)> {
    let chunk = docs.len().div_ceil(threads.max(1)).max(1);
    let parts: Vec<Result<Vec<RankSummary>, (usize, SummaryError)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = docs
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                scope.spawn(move || {
                    part.iter()
                        .enumerate()
                        .map(|(k, bytes)| parse_summary(bytes).map_err(|e| (c * chunk + k, e)))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(c, h)| {
                h.join().unwrap_or_else(|_| {
                    Err((
                        c * chunk,
                        SummaryError::NotASummary {
                            line: 0,
                            column: 0,
                            message: "the reading thread failed".to_owned(),
                        },
                    ))
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(docs.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

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

/// One rank's summary from input `source` of `t`; `self_time` is [`crate::ops::SelfTime::new`]'s.
#[must_use]
pub fn rank_summary(t: &Timeline, source: u16, self_time: &crate::ops::SelfTime) -> RankSummary {
    rank_summary_with(
        t,
        source,
        self_time,
        &CollectiveNames::of_timeline(t),
        &crate::step_windows::step_windows(t),
    )
}

/// [`rank_summary`] with the timeline's collective names classified once for every input.
pub(crate) fn rank_summary_with(
    t: &Timeline,
    source: u16,
    self_time: &crate::ops::SelfTime,
    names: &CollectiveNames,
    windows: &[crate::step_windows::StepWindow],
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
    let split = step_split(t, source, &comm, &compute, windows);
    RankSummary {
        schema: SUMMARY_SCHEMA.to_owned(),
        path: info.path.clone(),
        rank: info.rank,
        rank_written: super::inputs::rank_written(info),
        host: top("host_name").map(|h| h.trim_matches('"').to_owned()),
        backend,
        steps: split.steps,
        step_p50_ns: split.step,
        compute_p50_ns: split.compute,
        collective_p50_ns: split.collective,
        exposed_comm_p50_ns: split.exposed,
        comm_overlap_pct: comm_overlap(&comm, &compute),
        self_ns_per_step: self_time_per_step(t, source, self_time, names),
        collectives,
    }
}

/// The share of `occ`'s time during which `source` computed elsewhere: outermost host ops on
/// threads that carry no collective, and device kernels that are not collectives.
pub(crate) fn comm_overlap(comm: &IntervalSet, compute: &IntervalSet) -> Option<f64> {
    let total = comm.total();
    if total == 0 {
        return None;
    }
    let hidden = comm.intersect(compute).total();
    Some((hidden as f64 * 1000.0 / total as f64).round() / 10.0)
}

/// Compute on rank `source`: outermost host work on threads that issue no collective, and
/// device work that is not a collective.
pub(crate) fn compute_intervals(
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
pub(crate) struct StepSplit {
    pub(crate) step: Option<i64>,
    pub(crate) compute: Option<i64>,
    pub(crate) collective: Option<i64>,
    /// Collective time not hidden behind compute.
    pub(crate) exposed: Option<i64>,
    pub(crate) steps: usize,
}

/// Per step of `source` (device-inclusive, `windows` in `t.steps` order): median step, time
/// outside and inside collectives, exposed comm.
pub(crate) fn step_split(
    t: &Timeline,
    source: u16,
    comm: &IntervalSet,
    compute: &IntervalSet,
    windows: &[crate::step_windows::StepWindow],
) -> StepSplit {
    let exposed_set = comm.minus(compute);
    let steps: Vec<(i64, i64)> = t
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.source == source)
        .map(|(i, s)| {
            windows
                .get(i)
                .map_or((s.start, s.end()), |w| (w.start, w.end))
        })
        .collect();
    let mut durs = Vec::new();
    let mut computes = Vec::new();
    let mut colls = Vec::new();
    let mut exposed = Vec::new();
    for &(start, end) in &steps {
        let c = comm.covered(start, end);
        let e = exposed_set.covered(start, end);
        durs.push(end - start);
        colls.push(c);
        // Collective time hidden behind compute is not time the rank lost to communication.
        computes.push(end - start - e);
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

/// Self time per step of every host op and device kernel of one input (collectives and
/// annotations left out; kernels as `name [device]`).
pub(crate) fn self_time_per_step(
    t: &Timeline,
    source: u16,
    self_time: &crate::ops::SelfTime,
    by_name: &CollectiveNames,
) -> BTreeMap<String, i64> {
    let is_collective = |i: SliceId| by_name.slice(t, i).is_some();
    let steps = t.steps.iter().filter(|s| s.source == source).count().max(1) as i64;
    // By interned name while walking (millions of slices, far fewer names): the names are
    // written once each at the end.
    let mut host: FxHashMap<u32, i64> = FxHashMap::default();
    let mut device_work: FxHashMap<u32, i64> = FxHashMap::default();
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
            let own = self_time.of(t, i as usize);
            let sums = if device { &mut device_work } else { &mut host };
            *sums.entry(t.slices.name[i as usize]).or_insert(0) += own;
        }
    }
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for (sums, kind) in [(host, "host"), (device_work, "device")] {
        for (name, own) in sums {
            // A host op named like a kernel's label adds to it, as one map did.
            *out.entry(crate::ops::op_label(t.strings.get(name), kind))
                .or_insert(0) += own;
        }
    }
    out.values_mut().for_each(|v| *v /= steps);
    out
}
