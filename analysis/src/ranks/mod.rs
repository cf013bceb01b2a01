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
use steplens_ingest::model::Timeline;

use crate::finding::{Finding, Raised};
use crate::stats::{median, median_f64};

mod collectives;
mod inputs;
mod straggler;
mod summary;

pub use collectives::{CollectiveLinks, collective_links};
pub(crate) use collectives::{CollectiveNames, Matched, Occurrence, collect, collective_of};
pub use inputs::{INPUT_ORDER, input_ranks, known_ranks};
use inputs::{duplicate_ranks, stated_ranks};
use straggler::{late_arrival_evidence, straggler};
pub(crate) use summary::compute_intervals;
pub(crate) use summary::rank_summary_with;
pub use summary::{
    RankSummary, SUMMARY_SCHEMA, SummaryError, parse_summaries, parse_summary, rank_summary,
};

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
    /// Median message size (one rank's input), bytes, when the trace records it: `In msg
    /// nelems` × `dtype`, else the backend annotation's `Input Dims` × `Input type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// Median over the calls of each one's bus bandwidth (bytes × the collective's factor /
    /// latency, as nccl-tests defines it), GB/s, when sizes are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_gbps: Option<f64>,
}

/// nccl-tests' bus-bandwidth factor of a collective over `n` ranks, for a size counted as the
/// profiler counts it: one rank's input (an all-gather's input is 1/n of what it moves).
pub(crate) fn bus_factor(name: &str, n: usize) -> f64 {
    let world = n as f64;
    match name {
        "all_reduce" => 2.0 * (world - 1.0) / world,
        "all_gather" => world - 1.0,
        "reduce_scatter" | "all_to_all" => (world - 1.0) / world,
        _ => 1.0,
    }
}

/// The run as a set of ranks (one rank's trace is a run of one); absent without collectives.
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
    /// The TensorBoard plugin's distributed view, per worker (absent when the workers'
    /// collectives do not match one to one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distributed: Vec<crate::tensorboard::DistributedRow>,
    /// What makes the cross-rank figures doubtful or absent: two inputs claiming one rank
    /// (`duplicate_rank`; then `ranks` is empty), ranks that ran different numbers of a
    /// collective (`collective_counts_differ`), clocks of one host past the tolerance
    /// (`clocks_disagree`), clocks no shift aligns (`clocks_not_aligned`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<RankWarning>,
}

impl RanksReport {
    /// Whether the rank analysis was refused (two inputs claim one rank): no rank rows.
    #[must_use]
    pub fn refused(&self) -> bool {
        self.ranks.is_empty()
    }

    /// Why the rank analysis was refused, in one line (`None` when it was not): the first
    /// warning, else the clock line.
    #[must_use]
    pub fn refusal(&self) -> Option<String> {
        self.refused().then(|| {
            self.warnings
                .first()
                .map_or_else(|| self.clock.clone(), |w| w.message.clone())
        })
    }
}

/// Something the rank analysis warns about.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RankWarning {
    /// `duplicate_rank`, `collective_counts_differ`, `clocks_disagree`, `clocks_not_aligned`.
    pub code: String,
    /// One line for humans, naming the ranks or files.
    pub message: String,
    /// The inputs it is about (indices into `sources`), first the one it is reported on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<u16>,
}

/// How far apart the ends of one collective may lie on ranks whose clocks agree (the median
/// over the matched collectives): a collective ends on every rank within a transfer of each
/// other (µs for NCCL kernels, a few ms for gloo on a loaded CPU). Ranks of one host past it
/// are aligned by their collectives with a `clocks_disagree` warning; ranks that no shift
/// brings within it get no cross-rank figures (`clocks_not_aligned`).
pub const CLOCK_TOLERANCE_NS: i64 = 10_000_000;

/// The ranks of a run (one input or several), with the `straggler` findings; `None` for
/// inputs without collectives.
#[must_use]
pub fn ranks(t: &Timeline) -> Option<(RanksReport, Vec<Finding>)> {
    rank_analysis(t).map(|a| {
        (
            a.report,
            a.straggler
                .into_iter()
                .map(|r| r.settle(&t.steps))
                .collect(),
        )
    })
}

/// Everything the rank matching of a multi-input run gives: the rank table, the `straggler`
/// findings, and where each input waited at a collective for the last rank to arrive.
#[derive(Debug, Clone)]
pub struct RankAnalysis {
    /// The rank and collective tables.
    pub report: RanksReport,
    /// The `straggler` findings, as raised.
    pub straggler: Vec<Raised>,
    /// Per input (in input order), the intervals from its own arrival at a matched collective
    /// to the last arrival (within the collective), on its own clock.
    pub waits: Vec<Vec<(i64, i64)>>,
}

/// The rank analysis of a run of one or more inputs; `None` when an input has no collectives.
#[must_use]
pub fn rank_analysis(t: &Timeline) -> Option<RankAnalysis> {
    rank_analysis_with(
        t,
        &crate::thresholds::Thresholds::default(),
        &crate::step_windows::step_windows(t),
        &crate::ops::SelfTime::new(t),
    )
}

/// [`rank_analysis`] with the straggler thresholds of `thresholds`.
#[must_use]
pub fn rank_analysis_with(
    t: &Timeline,
    thresholds: &crate::thresholds::Thresholds,
    windows: &[crate::step_windows::StepWindow],
    self_time: &crate::ops::SelfTime,
) -> Option<RankAnalysis> {
    if t.sources.is_empty() {
        return None;
    }
    let names = CollectiveNames::of_timeline(t);
    let summaries: Vec<RankSummary> = (0..t.sources.len())
        .map(|source| rank_summary_with(t, source as u16, self_time, &names, windows))
        .collect();
    ranks_and_waits(&summaries, thresholds).map(|(report, mut straggler, waits, late)| {
        for f in &mut straggler {
            late_arrival_evidence(t, &summaries, &late, f);
        }
        RankAnalysis {
            report,
            straggler,
            waits,
        }
    })
}

/// The rank analysis over rank summaries (one per input, in input order): what [`ranks`] does
/// from a Timeline, and `report --summaries` from summary files.
#[must_use]
pub fn ranks_of(summaries: &[RankSummary]) -> Option<(RanksReport, Vec<Finding>)> {
    ranks_and_waits(summaries, &crate::thresholds::Thresholds::default())
        // A straggler belongs to the run, not to a step: no steps to name.
        .map(|(report, findings, _, _)| {
            (
                report,
                findings.into_iter().map(|r| r.settle(&[])).collect(),
            )
        })
}

/// Per input, the intervals it waited for the last rank at matched collectives.
type RankWaits = Vec<Vec<(i64, i64)>>;

/// Per input, the collectives it arrived last at (its occurrence index) and the wait it made
/// the other ranks take there.
type LateArrivals = Vec<Vec<(usize, i64)>>;

fn ranks_and_waits(
    summaries: &[RankSummary],
    thresholds: &crate::thresholds::Thresholds,
) -> Option<(RanksReport, Vec<Raised>, RankWaits, LateArrivals)> {
    // One rank's trace is a run of one: its collectives, bandwidths and exposed communication
    // are still worth a table (no clocks to align, no one to wait for).
    if summaries.is_empty() {
        return None;
    }
    let n = summaries.len();
    let backend = summaries.iter().find_map(|s| s.backend.clone());
    let stated = stated_ranks(
        summaries
            .iter()
            .map(|s| (s.rank, s.rank_written, s.path.as_str())),
    );
    // Two inputs that claim one rank: which is which cannot be guessed, so no rank figure is
    // made up from the input order.
    let duplicates = duplicate_ranks(&stated);
    if !duplicates.is_empty() {
        let warnings = duplicates
            .iter()
            .map(|(rank, inputs)| duplicate_warning(summaries, &stated, *rank, inputs))
            .collect();
        return Some((
            RanksReport {
                world_size: n,
                backend,
                clock: "not compared: two inputs claim one rank".to_owned(),
                ranks: Vec::new(),
                collectives: Vec::new(),
                distributed: Vec::new(),
                warnings,
            },
            Vec::new(),
            vec![Vec::new(); n],
            vec![Vec::new(); n],
        ));
    }
    let rank_of = stated;
    let occurrences: Vec<&Vec<Occurrence>> = summaries.iter().map(|s| &s.collectives).collect();
    if occurrences.iter().any(|o| o.is_empty()) {
        return None;
    }
    let mut warnings = Vec::new();
    // Ranks that ran different numbers of a collective: matched by sequence number where the
    // trace numbers them; by order they would pair different calls, so those are left out.
    let unordered = count_mismatches(&occurrences, &rank_of, &mut warnings);
    // Match across ranks.
    let mut by_key: BTreeMap<(String, i64), Vec<Option<usize>>> = BTreeMap::new();
    for (r, occ) in occurrences.iter().enumerate() {
        for (k, o) in occ.iter().enumerate() {
            if !is_sequenced(o) && unordered.contains(&o.name) {
                continue;
            }
            by_key
                .entry(o.key.clone())
                .or_insert_with(|| vec![None; occurrences.len()])[r] = Some(k);
        }
    }
    let mut matched: Vec<Vec<usize>> = by_key
        .into_values()
        .filter_map(|slots| slots.into_iter().collect::<Option<Vec<usize>>>())
        .collect();
    // Clock offsets: the median over matched collectives of (end on the reference rank − end on
    // rank r): a collective ends on every rank at nearly the same moment.
    // The lowest rank is the reference, whatever order the inputs came in.
    let reference = (0..rank_of.len())
        .min_by_key(|&i| rank_of[i].0)
        .unwrap_or(0);
    let end_gaps = |r: usize| -> Vec<i64> {
        matched
            .iter()
            .map(|m| occurrences[reference][m[reference]].end - occurrences[r][m[r]].end)
            .collect()
    };
    let offsets: Vec<i64> = (0..n).map(|r| median(end_gaps(r)).unwrap_or(0)).collect();
    let (worst, measured) = offsets
        .iter()
        .enumerate()
        .map(|(r, o)| (r, o.saturating_abs()))
        .max_by_key(|&(r, o)| (o, std::cmp::Reverse(r)))
        .unwrap_or((reference, 0));
    let same_host = summaries.windows(2).all(|w| w[0].host == w[1].host);
    let disagree = same_host && measured > CLOCK_TOLERANCE_NS;
    let applied: Vec<i64> = if same_host && !disagree {
        vec![0; n]
    } else {
        offsets.clone()
    };
    // What is left once each rank is shifted: the median distance of its collectives' ends
    // from the reference's; past the tolerance no one shift lines the ranks up, so a shift
    // cannot be trusted (on one host whose clocks agree nothing is shifted: point-to-point
    // collectives such as NCCL's SendRecv end apart without any clock being off).
    let residual = (0..n)
        .map(|r| {
            median(
                end_gaps(r)
                    .into_iter()
                    .map(|gap| gap.saturating_sub(applied[r]).saturating_abs())
                    .collect(),
            )
            .unwrap_or(0)
        })
        .max()
        .unwrap_or(0);
    let tolerance = crate::units::human_ns(CLOCK_TOLERANCE_NS);
    let reference_rank = rank_of[reference].0;
    let clock =
        if n == 1 {
            "one rank: no clocks to align".to_owned()
        } else if matched.is_empty() {
            "not compared: no collective matched on every rank".to_owned()
        } else if (disagree || !same_host) && residual > CLOCK_TOLERANCE_NS {
            warnings.push(RankWarning {
                code: "clocks_not_aligned".to_owned(),
                message: format!(
                    "the ranks' clocks cannot be aligned: shifted by the median end of {} matched \
                 collectives, their ends still differ by a median of {} (tolerance {tolerance}); \
                 cross-rank figures (waits, skew, last arrivals, stragglers) are left out",
                    matched.len(),
                    crate::units::human_ns(residual),
                ),
                sources: Vec::new(),
            });
            matched.clear();
            format!(
                "not aligned: collective ends differ by a median of {} after the best shift, past \
             the tolerance of {tolerance}; cross-rank figures left out",
                crate::units::human_ns(residual)
            )
        } else if disagree {
            warnings.push(RankWarning {
            code: "clocks_disagree".to_owned(),
            message: format!(
                "the ranks' clocks disagree on one host: rank {} is {} {} rank {reference_rank} \
                 (median over {} matched collectives' ends; tolerance {tolerance}); aligned by \
                 the matched collectives",
                rank_of[worst].0,
                crate::units::human_ns(measured),
                if offsets[worst] > 0 { "behind" } else { "ahead of" },
                matched.len(),
            ),
            sources: vec![u16::try_from(worst).unwrap_or(u16::MAX)],
        });
            format!(
                "aligned to rank {reference_rank} by the median end of {} matched collectives: on \
             one host the clocks differ by up to {}, past the tolerance of {tolerance}",
                matched.len(),
                crate::units::human_ns(measured)
            )
        } else if same_host {
            format!(
                "one host, clocks agree: the median gap between a rank's and rank \
             {reference_rank}'s ends of {} matched collectives is at most {} (tolerance \
             {tolerance})",
                matched.len(),
                crate::units::human_ns(measured)
            )
        } else {
            format!(
                "aligned to rank {reference_rank} by the median end of {} matched collectives \
             (clocks up to {} apart; ends then differ by a median of at most {}, tolerance \
             {tolerance})",
                matched.len(),
                crate::units::human_ns(measured),
                crate::units::human_ns(residual)
            )
        };
    let mut last_arrivals = vec![0usize; n];
    let mut wait = vec![0i64; n];
    let mut caused = vec![0i64; n];
    let mut per_name: BTreeMap<String, Vec<Matched>> = BTreeMap::new();
    let mut waits: RankWaits = vec![Vec::new(); n];
    // Per rank, the collectives it arrived last at (its occurrence index) and the wait it made
    // the others take there.
    let mut late: LateArrivals = vec![Vec::new(); n];
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
        let mut waits_here = 0;
        for r in 0..n {
            wait[r] += latest - starts[r];
            waits_here += latest - starts[r];
            // On rank r's own clock, within its collective.
            let o = &occurrences[r][m[r]];
            let until = (latest - applied[r]).min(o.end);
            if until > o.start {
                waits[r].push((o.start, until));
            }
        }
        caused[last] += waits_here;
        late[last].push((m[last], waits_here));
        let latency = (0..n).map(|r| ends[r] - starts[r]).min().unwrap_or(0);
        let end_skew = ends.iter().max().unwrap_or(&0) - ends.iter().min().unwrap_or(&0);
        let o = &occurrences[0][m[0]];
        per_name.entry(o.name.clone()).or_default().push(Matched {
            latency,
            mean_wait: waits_here / n as i64,
            start_skew: latest - earliest,
            end_skew,
            bytes: o.bytes,
            group_size: o.group_size,
        });
    }
    let collectives = per_name
        .into_iter()
        .map(|(name, rows)| {
            let p50 = |v: Vec<i64>| median(v).unwrap_or(0);
            let latency = p50(rows.iter().map(|r| r.latency).collect());
            // Sizes can differ call by call: the median size, and the median of each call's
            // bus bandwidth (nccl-tests' definition: bytes × the collective's factor / time).
            let sized: Vec<&Matched> = rows.iter().filter(|r| r.bytes.is_some()).collect();
            let bytes = median(sized.iter().filter_map(|r| r.bytes).collect());
            let bus_gbps = median_f64(
                sized
                    .iter()
                    .filter(|r| r.latency > 0)
                    .map(|r| {
                        // The group the collective ran in, not only the ranks loaded.
                        let group = r.group_size.map_or(n, |g| usize::try_from(g).unwrap_or(n));
                        r.bytes.unwrap_or(0) as f64 * bus_factor(&name, group) / r.latency as f64
                    })
                    .collect(),
            )
            .map(|gbps| (gbps * 100.0).round() / 100.0);
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
    let findings = straggler(summaries, &rows, &caused, &late, matched.len(), thresholds);
    rows.sort_by_key(|r| r.rank);
    Some((
        RanksReport {
            world_size: n,
            backend,
            clock,
            ranks: rows,
            collectives,
            distributed: Vec::new(),
            warnings,
        },
        findings,
        waits,
        late,
    ))
}

/// Whether `o` is matched across ranks by its sequence number.
fn is_sequenced(o: &Occurrence) -> bool {
    o.key.0.contains("/seq")
}

/// The warning for inputs `inputs` that all claim `rank`.
fn duplicate_warning(
    summaries: &[RankSummary],
    stated: &[(i64, &'static str)],
    rank: i64,
    inputs: &[usize],
) -> RankWarning {
    let paths: Vec<&str> = inputs
        .iter()
        .filter_map(|&i| summaries.get(i).map(|s| s.path.as_str()))
        .collect();
    let how = inputs.first().map_or("", |&i| stated[i].1);
    let who = match paths.as_slice() {
        [a, b] => format!("{a} and {b} both claim"),
        [rest @ .., last] => format!("{} and {last} all claim", rest.join(", ")),
        [] => "inputs claim".to_owned(),
    };
    RankWarning {
        code: "duplicate_rank".to_owned(),
        message: format!(
            "{who} rank {rank} ({how}); no rank analysis: give --rank-regex to read each \
             input's rank from its path"
        ),
        sources: inputs
            .iter()
            .map(|&i| u16::try_from(i).unwrap_or(u16::MAX))
            .collect(),
    }
}

/// Warns (one warning per collective name) where the ranks ran different numbers of a
/// collective, naming the ranks per count; returns the names that carry no sequence number
/// there, which matching by order would pair wrongly.
fn count_mismatches(
    occurrences: &[&Vec<Occurrence>],
    rank_of: &[(i64, &'static str)],
    warnings: &mut Vec<RankWarning>,
) -> std::collections::BTreeSet<String> {
    let mut counts: BTreeMap<&str, Vec<(usize, bool)>> = BTreeMap::new();
    for (r, occ) in occurrences.iter().enumerate() {
        for o in occ.iter() {
            let row = counts
                .entry(o.name.as_str())
                .or_insert_with(|| vec![(0, true); occurrences.len()]);
            row[r].0 += 1;
            row[r].1 &= is_sequenced(o);
        }
    }
    let mut unordered = std::collections::BTreeSet::new();
    for (name, per_rank) in counts {
        if per_rank.windows(2).all(|w| w[0].0 == w[1].0) {
            continue;
        }
        let sequenced = per_rank.iter().all(|c| c.1);
        let mut by_count: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
        for (r, c) in per_rank.iter().enumerate() {
            by_count.entry(c.0).or_default().push(rank_of[r].0);
        }
        // The most common count first (on a tie, the one of the lowest rank): the others are
        // the odd ones out.
        let mut groups: Vec<(usize, Vec<i64>)> = by_count.into_iter().collect();
        groups.sort_by_key(|(_, ranks)| {
            (
                std::cmp::Reverse(ranks.len()),
                ranks.iter().min().copied().unwrap_or(0),
            )
        });
        let listed: Vec<String> = groups
            .iter()
            .take(6)
            .map(|(count, ranks)| format!("{count} on {}", rank_list(ranks)))
            .collect();
        let more = if groups.len() > 6 {
            format!(" and {} more counts", groups.len() - 6)
        } else {
            String::new()
        };
        let odd: Vec<u16> = groups
            .iter()
            .skip(1)
            .flat_map(|(_, ranks)| ranks)
            .filter_map(|rank| rank_of.iter().position(|r| r.0 == *rank))
            .map(|i| u16::try_from(i).unwrap_or(u16::MAX))
            .collect();
        warnings.push(RankWarning {
            code: "collective_counts_differ".to_owned(),
            message: format!(
                "the ranks ran different numbers of {name}: {}{more}; {}",
                listed.join(", "),
                if sequenced {
                    "matched by process group and sequence number".to_owned()
                } else {
                    unordered.insert(name.to_owned());
                    format!(
                        "the trace gives them no sequence number, so {name} is left out of the \
                         cross-rank figures (matching by order would pair different calls)"
                    )
                }
            ),
            sources: odd,
        });
    }
    unordered
}

/// `rank 3`, `ranks 0–3, 5, 7–9`.
fn rank_list(ranks: &[i64]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for r in sorted {
        match runs.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(r) => last.1 = r,
            _ => runs.push((r, r)),
        }
    }
    let shown: Vec<String> = runs
        .iter()
        .take(8)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}–{b}")
            }
        })
        .collect();
    let more = if runs.len() > 8 { ", …" } else { "" };
    format!(
        "{} {}{more}",
        if ranks.len() == 1 { "rank" } else { "ranks" },
        shown.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::collectives::collective_of;
    use super::inputs::rank_from_name;

    #[test]
    fn ranks_from_file_names() {
        assert_eq!(rank_from_name("run/rank3.json"), Some(3));
        assert_eq!(rank_from_name("trace_rank-12.pt.trace.json"), Some(12));
        assert_eq!(rank_from_name("job_r7.json.gz"), Some(7));
        assert_eq!(rank_from_name("ranked.json"), None);
        assert_eq!(rank_from_name("train.json"), None);
    }

    #[test]
    fn bus_factors_follow_nccl_tests() {
        for (name, factor) in [
            ("all_reduce", 1.5),
            ("all_gather", 3.0),
            ("reduce_scatter", 0.75),
            ("all_to_all", 0.75),
            ("broadcast", 1.0),
        ] {
            assert!(
                (super::bus_factor(name, 4) - factor).abs() < 1e-12,
                "{name}"
            );
        }
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
        // One name however a layer spells it.
        for spelt in [
            "nccl:_all_gather_base",
            "c10d::_allgather_base_",
            "c10d::allgather_into_tensor_coalesced_",
        ] {
            assert_eq!(
                collective_of(spelt).map(|c| c.1),
                Some("all_gather".into()),
                "{spelt}"
            );
        }
        for spelt in [
            "nccl:all_to_all",
            "c10d::alltoall_base_",
            "c10d::all_to_allv",
        ] {
            assert_eq!(
                collective_of(spelt).map(|c| c.1),
                Some("all_to_all".into()),
                "{spelt}"
            );
        }
        assert_eq!(
            collective_of("c10d::reduce_scatter_tensor_coalesced_").map(|c| c.1),
            Some("reduce_scatter".into())
        );
        assert_eq!(collective_of("aten::add"), None);
        assert_eq!(collective_of("c10d::rank"), None);
    }
}
