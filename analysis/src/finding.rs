//! What a finding is: its kind, severity, evidence and cost. Detectors build [`Finding`]s; the
//! report, the check, the viewer and the exports read them. The closed sets are enums whose
//! serde names are the strings reports, budget files and `docs/findings.md` use.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use steplens_ingest::model::Step;

/// Most evidence references a finding keeps (the JSON says how many there were).
pub const MAX_EVIDENCE: usize = 20;

/// A finding: something that slows the step, what it costs and what to change. Detectors fill
/// these in; the fields are fixed by the design contract.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// Stable kind (`sync_point`, `host_bound_gap`, …).
    pub kind: FindingKind,
    /// `info`, `warning` or `critical`.
    pub severity: Severity,
    /// One-line title.
    pub title: String,
    /// Step name, when the finding belongs to one step.
    pub step: Option<String>,
    /// Start of the affected range, ns.
    pub start_ns: i64,
    /// End of the affected range, ns.
    pub end_ns: i64,
    /// Track name.
    pub track: Option<String>,
    /// Ops involved.
    pub ops: Vec<String>,
    /// User call site (`file.py:line`), when the trace has Python frames.
    pub call_site: Option<String>,
    /// How many occurrences the finding groups.
    pub count: u64,
    /// Input the finding belongs to (index in the report's `sources`), when it belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<u16>,
    /// Rank of that input, in a multi-rank run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// Estimated time lost: the time this finding owns, ns.
    pub lost_ns: i64,
    /// How much shorter the step gets when this is fixed: the finding's time on the step's
    /// critical path that its fix removes (each kind's model is in `docs/findings.md`), ns.
    /// Over the finding's step, or the whole run for a finding without one.
    #[serde(default)]
    pub saving_ns: i64,
    /// Evidence: slice references the viewer can jump to, or the measurements behind it.
    pub evidence: Vec<Evidence>,
    /// What to change, in plain words.
    pub recommendation: String,
    /// Where the lost time sits on the clock (for the one-owner rule); not part of the JSON.
    #[serde(skip)]
    pub cost: Cost,
    /// Its step as an index into the Timeline's steps, which `step` names: how the report finds
    /// the step again (two steps may share a name). Not part of the JSON.
    #[serde(skip)]
    pub step_index: Option<usize>,
}

impl Finding {
    /// What fixing it saves and the time it owns (`saves 1.20 ms · owns 2.40 ms`), worded as
    /// [`FindingGroup::figures`] words a group's.
    #[must_use]
    pub fn figures(&self) -> String {
        time_figures(
            self.kind,
            self.saving_ns,
            self.lost_ns,
            self.cost.saving_unknown,
        )
    }
}

/// What a detector raises: a finding before the report has settled it. It has no field the
/// report sets (what fixing it saves, its input, its rank): [`Raised::settle`] is the one
/// constructor of a [`Finding`], and the report fills those in once every finding is in.
#[derive(Debug, Clone, PartialEq)]
pub struct Raised {
    /// Stable kind.
    pub kind: FindingKind,
    /// Severity as the detector judges it (the savings pass judges it again by the saving).
    pub severity: Severity,
    /// One-line title.
    pub title: String,
    /// The step it belongs to, when it belongs to one: an index into the Timeline's steps.
    pub step: Option<usize>,
    /// Start of the affected range, ns.
    pub start_ns: i64,
    /// End of the affected range, ns.
    pub end_ns: i64,
    /// Track name.
    pub track: Option<String>,
    /// Ops involved.
    pub ops: Vec<String>,
    /// User call site (`file.py:line`).
    pub call_site: Option<String>,
    /// How many occurrences it groups.
    pub count: u64,
    /// The time it owns as its detector measured it, ns.
    pub lost_ns: i64,
    /// Evidence.
    pub evidence: Vec<Evidence>,
    /// What to change.
    pub recommendation: String,
    /// Where the lost time sits on the clock.
    pub cost: Cost,
}

impl Raised {
    /// The finding, its step named from `steps` (the Timeline's, which `step` indexes).
    #[must_use]
    pub fn settle(self, steps: &[Step]) -> Finding {
        Finding {
            kind: self.kind,
            severity: self.severity,
            title: self.title,
            step: self.step.and_then(|i| steps.get(i)).map(|s| s.name.clone()),
            step_index: self.step.filter(|&i| i < steps.len()),
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            track: self.track,
            ops: self.ops,
            call_site: self.call_site,
            count: self.count,
            source: None,
            rank: None,
            lost_ns: self.lost_ns,
            // What fixing it saves is the savings pass's, unless the detector measured it
            // another way (a straggler's, from the rank matching).
            saving_ns: self.cost.measured_saving_ns.unwrap_or(0),
            evidence: self.evidence,
            recommendation: self.recommendation,
            cost: self.cost,
        }
    }
}

/// Where a finding's lost time sits on the clock. Detectors fill it in; `detect::run_all` uses
/// it so that no wall-clock nanosecond of a step is lost to two findings, and to apply the
/// materiality floor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cost {
    /// Input the finding belongs to.
    pub source: Option<u16>,
    /// The wall-clock intervals `lost_ns` covers (any order, may overlap). Empty when the cost
    /// is not a set of intervals (a metrics-file count); such a finding keeps its `lost_ns`.
    pub ranges: Vec<(i64, i64)>,
    /// A pattern finding: the code pattern is the problem and its cost is not measurable on this
    /// trace (a `.item()` in a CPU-only trace, a per-parameter `zero_`). Exempt from the
    /// materiality floor; its time still cannot be owned twice.
    pub pattern: bool,
    /// Of `ranges`, where fixing the finding removes device work the step waited for (a
    /// pageable copy with nothing else on the device), for kinds whose fix otherwise saves
    /// host-side time only.
    pub device_ranges: Vec<(i64, i64)>,
    /// No critical path covers the finding (a trace without host ops has none to build
    /// one from), so what fixing it saves cannot be measured: `saving_ns` stays 0 and the
    /// outputs say the saving is unknown rather than nothing.
    pub saving_unknown: bool,
    /// The most fixing the finding can save, when less than its cost on the path: a long
    /// blocking wait with the device idle saves at most the device work it waited for.
    pub saving_cap_ns: Option<i64>,
    /// What fixing it saves, for a kind whose saving is not step time on this input's critical
    /// path but measured by its detector (a straggler's: its extra time on every rank).
    pub measured_saving_ns: Option<i64>,
}

impl Cost {
    /// A measured cost over `ranges` of input `source`.
    #[must_use]
    pub fn measured(source: u16, ranges: Vec<(i64, i64)>) -> Self {
        Self {
            source: Some(source),
            ranges,
            pattern: false,
            device_ranges: Vec::new(),
            saving_unknown: false,
            saving_cap_ns: None,
            measured_saving_ns: None,
        }
    }

    /// A pattern finding's cost over `ranges` of input `source`.
    #[must_use]
    pub fn pattern(source: u16, ranges: Vec<(i64, i64)>) -> Self {
        Self {
            source: Some(source),
            ranges,
            pattern: true,
            device_ranges: Vec::new(),
            saving_unknown: false,
            saving_cap_ns: None,
            measured_saving_ns: None,
        }
    }
}

/// How much a finding matters, least first: `info` < `warning` < `critical`; by the share of its
/// step that fixing it saves (a measured cost), else by its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Under 5 % of the step.
    Info,
    /// 5–20 % of the step, or a cost this trace cannot measure.
    Warning,
    /// 20 % of the step or more.
    Critical,
}

impl Severity {
    /// Every severity, least first.
    pub const ALL: [Self; 3] = [Self::Info, Self::Warning, Self::Critical];

    /// The severity of losing `lost_ns` of a `step_ns` step (a warning without a step).
    #[must_use]
    pub fn of_share(lost_ns: i64, step_ns: i64) -> Self {
        if step_ns <= 0 {
            return Self::Warning;
        }
        let share = lost_ns as f64 / step_ns as f64;
        if share >= 0.2 {
            Self::Critical
        } else if share >= 0.05 {
            Self::Warning
        } else {
            Self::Info
        }
    }

    /// The name reports use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Declares [`FindingKind`] with its report names, in one list.
macro_rules! finding_kinds {
    ($($(#[$doc:meta])* $variant:ident => $name:literal, $title:literal,)+) => {
        /// Every kind of finding a detector raises. Serialized as its name (`sync_point`); ordered
        /// by name, as reports list kinds.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum FindingKind {
            $($(#[$doc])* $variant,)+
        }

        impl FindingKind {
            /// Every kind, in the order `docs/findings.md` introduces them.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// The name reports, budget files and the docs use.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }

            /// The human title prose uses (`MME idle behind TPC`); the kind id
            /// ([`Self::as_str`]) stays in JSON and budget files.
            #[must_use]
            pub fn title(self) -> &'static str {
                match self {
                    $(Self::$variant => $title,)+
                }
            }
        }
    };
}

finding_kinds! {
    /// A host-device synchronization (`.item()`, printing, `.cpu()`).
    SyncPoint => "sync_point", "sync point",
    /// The step waits for the data loader.
    DataloaderStall => "dataloader_stall", "data loader stall",
    /// A graph (re)compile inside the measured steps.
    Recompile => "recompile", "graph recompile",
    /// The device idles because the host launches too slowly.
    HostBoundGap => "host_bound_gap", "host-bound gap",
    /// Gaudi: the MME idles behind TPC work.
    MmeIdleBehindTpc => "mme_idle_behind_tpc", "MME idle behind TPC",
    /// Gaudi: ops that fall back to the CPU.
    CpuFallback => "cpu_fallback", "CPU fallback",
    /// A transpose that becomes a memory copy.
    NonLogicalTranspose => "non_logical_transpose", "copying transpose",
    /// `zero_grad` zeroing gradients one by one instead of setting them to None.
    SlowZeroGrad => "slow_zero_grad", "slow zero_grad",
    /// Anomaly detection, profiler-level debug APIs left on.
    DebugApiEnabled => "debug_api_enabled", "debug API left on",
    /// Allocated memory that grows step after step.
    MemoryGrowth => "memory_growth", "memory growth",
    /// Memory the allocator reserves and never uses.
    ReservedSlack => "reserved_slack", "reserved memory slack",
    /// One rank slower than the others.
    Straggler => "straggler", "straggler",
    /// An explicit pad op in front of a layer that pads itself.
    ExplicitPad => "explicit_pad", "explicit pad",
    /// A bias on a layer followed by batch norm.
    BiasBeforeBatchnorm => "bias_before_batchnorm", "bias before batch norm",
    /// A host-to-device copy from pageable memory.
    PageableCopy => "pageable_copy", "pageable-memory copy",
    /// A tensor made on the host and copied to the device.
    HostCreatedTensor => "host_created_tensor", "tensor made on the host",
    /// fp32 matrix work on hardware with faster reduced-precision units.
    NoMixedPrecision => "no_mixed_precision", "no mixed precision",
    /// `nn.DataParallel` instead of DistributedDataParallel.
    DataParallel => "data_parallel", "nn.DataParallel",
    /// Chains of elementwise ops that one fused kernel could do.
    UnfusedPointwise => "unfused_pointwise", "unfused pointwise ops",
    /// A per-parameter optimizer loop instead of a foreach or fused one.
    UnfusedOptimizer => "unfused_optimizer", "per-parameter optimizer",
    /// Many small all-reduces per step.
    FragmentedCollectives => "fragmented_collectives", "fragmented collectives",
    /// Collectives that run with no compute beside them: the step waits for the network.
    ExposedCommunication => "exposed_communication", "exposed communication",
    /// GEMMs far below the rate the trace's well-shaped GEMMs of their dtype reach.
    SlowGemm => "slow_gemm", "slow GEMM",
}

impl FindingKind {
    /// Who keeps a wall-clock nanosecond that several findings claim, first to last: a compile
    /// is the recompile's even inside a sync wait; waiting for data is the data loader's; device
    /// work that should not be there (transposes, pads, unfused chains and optimizer loops,
    /// DataParallel's replication), then the MME idling behind vector work, explain the part of
    /// a host's wait that they fill; the sync keeps the rest of its blocked time; a
    /// host-to-device copy keeps what is left of its copy and its own synchronizes (a host-made
    /// tensor's first: not making it on the host removes the copy); what is left of a
    /// device-idle gap is host-bound. fp32 matrix work comes last: removing a sync removes its
    /// wait whatever precision the kernels it waits for run in. Kinds not listed come after.
    pub const OWNER_ORDER: &'static [Self] = &[
        Self::Recompile,
        Self::DataloaderStall,
        Self::NonLogicalTranspose,
        Self::ExplicitPad,
        Self::UnfusedPointwise,
        Self::UnfusedOptimizer,
        Self::DataParallel,
        Self::SlowGemm,
        Self::FragmentedCollectives,
        Self::ExposedCommunication,
        Self::MmeIdleBehindTpc,
        Self::SyncPoint,
        Self::HostCreatedTensor,
        Self::PageableCopy,
        Self::HostBoundGap,
        Self::NoMixedPrecision,
        Self::SlowZeroGrad,
        Self::DebugApiEnabled,
    ];

    /// This kind's place in [`Self::OWNER_ORDER`] (kinds not listed: after all of them).
    #[must_use]
    pub fn owner_rank(self) -> usize {
        Self::OWNER_ORDER
            .iter()
            .position(|&k| k == self)
            .unwrap_or(Self::OWNER_ORDER.len())
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a finding kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown finding kind `{name}` (known: {})", known_kinds())]
pub struct UnknownKind {
    /// The name given.
    pub name: String,
}

fn known_kinds() -> String {
    FindingKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for FindingKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind { name: s.to_owned() })
    }
}

impl PartialEq<str> for FindingKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for FindingKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Severity {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Severity {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialOrd for FindingKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FindingKind {
    /// By name, so maps keyed by kind list kinds as the JSON always has.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Serialize for FindingKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FindingKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// What a finding points at. Serialized as a plain object whose fields say which it is (the
/// report's JSON contract).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Evidence {
    /// A slice of the Timeline the viewer can jump to.
    Slice {
        /// Its duration, ns.
        dur_ns: i64,
        /// Its name.
        name: String,
        /// Slice id in the Timeline the report was built from.
        slice: u32,
        /// Its start, ns.
        start_ns: i64,
        /// Its track's name.
        track: Option<String>,
    },
    /// A device-idle gap while the host was busy (`host_bound_gap`).
    HostGap {
        /// Gap end, ns.
        gap_end_ns: i64,
        /// Gap start, ns.
        gap_start_ns: i64,
        /// Part of the gap the host was busy, ns.
        host_bound_ns: i64,
    },
    /// A stretch of MME idle time with TPC work (`mme_idle_behind_tpc`).
    MmeIdle {
        /// Idle end, ns.
        mme_idle_end_ns: i64,
        /// Idle start, ns.
        mme_idle_start_ns: i64,
        /// TPC busy time inside it, ns.
        tpc_busy_ns: i64,
    },
    /// A metric dump of a Gaudi metrics file.
    Metric {
        /// Total count the metric reports.
        #[serde(rename = "TotalNumber")]
        total_number: f64,
        /// The dump's `generated_on` label.
        generated_on: String,
        /// Metric name.
        metric: String,
    },
    /// Evidence of a shape this version does not know (a report saved by a newer steplens),
    /// kept as it was read so the report still loads and writes back unchanged.
    Other(serde_json::Map<String, serde_json::Value>),
}

impl Evidence {
    /// The Timeline slice this evidence names, if it names one.
    #[must_use]
    pub fn slice(&self) -> Option<u32> {
        match self {
            Self::Slice { slice, .. } => Some(*slice),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_by_name_and_order_by_name() {
        for &kind in FindingKind::ALL {
            assert_eq!(kind.as_str().parse::<FindingKind>(), Ok(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        let err = "sync_pont".parse::<FindingKind>().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown finding kind `sync_pont`")
        );
        let mut kinds = FindingKind::ALL.to_vec();
        kinds.sort();
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }

    #[test]
    fn severities_are_ordered_and_named() {
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Critical);
        assert_eq!(Severity::of_share(25, 100), Severity::Critical);
        assert_eq!(Severity::of_share(5, 100), Severity::Warning);
        assert_eq!(Severity::of_share(1, 100), Severity::Info);
        assert_eq!(Severity::of_share(1, 0), Severity::Warning);
        assert_eq!(
            serde_json::to_string(&Severity::Critical).unwrap(),
            "\"critical\""
        );
    }

    #[test]
    fn evidence_keeps_its_json_shape() {
        let slice = Evidence::Slice {
            dur_ns: 5,
            name: "aten::mm".into(),
            slice: 7,
            start_ns: 100,
            track: None,
        };
        let json = serde_json::to_string(&slice).unwrap();
        assert_eq!(
            json,
            r#"{"dur_ns":5,"name":"aten::mm","slice":7,"start_ns":100,"track":null}"#
        );
        assert_eq!(serde_json::from_str::<Evidence>(&json).unwrap(), slice);
        let gap: Evidence =
            serde_json::from_str(r#"{"gap_end_ns":9,"gap_start_ns":1,"host_bound_ns":4}"#).unwrap();
        assert!(matches!(
            gap,
            Evidence::HostGap {
                host_bound_ns: 4,
                ..
            }
        ));
        assert_eq!(gap.slice(), None);
        let newer = r#"{"queue_depth":3,"stream":"7"}"#;
        let other: Evidence = serde_json::from_str(newer).unwrap();
        assert!(matches!(other, Evidence::Other(_)));
        assert_eq!(serde_json::to_string(&other).unwrap(), newer);
    }
}

/// The findings of one kind at one place (a call site, else the ops, else the track), over
/// every step and rank: what text, Markdown, HTML and the viewer list, so a per-step finding
/// shows once with its totals. The JSON keeps each member in `findings`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FindingGroup {
    /// The members' kind.
    pub kind: FindingKind,
    /// The highest member severity.
    pub severity: Severity,
    /// Where: the call site, else the ops, else the track, else the title.
    pub place: String,
    /// Indices of the members in the report's `findings`, the largest saving first.
    pub findings: Vec<usize>,
    /// Distinct steps the members belong to (0 for whole-run findings).
    pub steps: usize,
    /// Ranks the members are on, ascending (empty without ranks).
    pub ranks: Vec<i64>,
    /// Occurrences over all members.
    pub count: u64,
    /// Time the members own, ns.
    pub lost_ns: i64,
    /// What fixing it saves over all members' steps, ns.
    pub saving_ns: i64,
    /// No member's saving could be measured (no critical path covers them: a device-only
    /// trace); absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saving_unknown: bool,
}

/// What "owns" means, for a legend line (text) or a tooltip (HTML) wherever the figure is shown
/// beside the saving.
pub const OWNS_NOTE: &str = "saves: how much shorter the steps get once it is fixed (every \
     chart and ranking uses it); owns: the step time its events take, which overlaps other work, \
     so fixing it saves less";

/// A whole-run finding's saving (a straggler's), counted once per rank: its fix shortens the
/// step of every rank by `per_rank_ns`, and a per-rank finding's saving is already summed over
/// ranks, so every `saving_ns` (and the groups, the summary and the headline that add them up)
/// is step time summed over the ranks' steps. This is the one place that says so
/// (`docs/findings.md`, "The run's saving").
#[must_use]
pub fn run_saving_ns(per_rank_ns: i64, ranks: usize) -> i64 {
    per_rank_ns.saturating_mul(ranks as i64)
}

/// What a finding (or group) saves and owns, as every output writes it: `saves 1.20 ms · owns
/// 2.40 ms`, or, with no time on the trace's clock, what it is instead of "saves 0 ns".
fn time_figures(kind: FindingKind, saving_ns: i64, lost_ns: i64, saving_unknown: bool) -> String {
    if saving_unknown && saving_ns == 0 && lost_ns > 0 {
        return format!(
            "saving unknown (no host ops in the trace to measure it on) · owns {}",
            crate::units::human_ns(lost_ns)
        );
    }
    if saving_ns == 0 && lost_ns == 0 {
        match kind {
            FindingKind::MemoryGrowth | FindingKind::ReservedSlack => "memory, not time".into(),
            _ => "no time measured in this trace".into(),
        }
    } else {
        format!(
            "saves {} · owns {}",
            crate::units::human_ns(saving_ns),
            crate::units::human_ns(lost_ns)
        )
    }
}

impl FindingGroup {
    /// The figures every output shows beside the group: where it recurs, what fixing it saves
    /// and the time it owns (`in 3 steps on ranks 0–3 · saves 1.20 ms · owns 2.40 ms`). A group
    /// with no time on this trace's clock (memory, a count from a metrics file, a code pattern
    /// in a CPU-only trace) says so rather than "saves 0 ns".
    #[must_use]
    pub fn figures(&self) -> String {
        let time = time_figures(self.kind, self.saving_ns, self.lost_ns, self.saving_unknown);
        let spread = self.spread();
        if spread.is_empty() {
            time
        } else {
            format!("{spread} · {time}")
        }
    }

    /// `in 3 steps on ranks 0–3` (empty for a group of one finding).
    #[must_use]
    pub fn spread(&self) -> String {
        if self.findings.len() < 2 {
            return String::new();
        }
        let steps = match self.steps {
            0 | 1 => String::new(),
            n => format!("in {n} steps"),
        };
        let ranks = match self.ranks.as_slice() {
            [] => String::new(),
            [one] => format!("on rank {one}"),
            [first, .., last] if (last - first) as usize + 1 == self.ranks.len() => {
                format!("on ranks {first}–{last}")
            }
            many => format!(
                "on ranks {}",
                many.iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        match (steps.is_empty(), ranks.is_empty()) {
            (true, true) => format!("{} times", self.findings.len()),
            (false, true) => steps,
            (true, false) => ranks,
            (false, false) => format!("{steps} {ranks}"),
        }
    }
}

/// Groups ranked findings by kind and place, ranked by total saving, then total lost time;
/// members keep their rank order.
#[must_use]
pub fn group_findings(findings: &[Finding]) -> Vec<FindingGroup> {
    let place = |f: &Finding| -> String {
        if let Some(site) = &f.call_site {
            return site.clone();
        }
        if !f.ops.is_empty() {
            return f.ops.join(", ");
        }
        f.track.clone().unwrap_or_else(|| f.title.clone())
    };
    let mut groups: Vec<FindingGroup> = Vec::new();
    let mut index: std::collections::HashMap<(FindingKind, String), usize> =
        std::collections::HashMap::new();
    for (i, f) in findings.iter().enumerate() {
        let key = (f.kind, place(f));
        let at = *index.entry(key.clone()).or_insert_with(|| {
            groups.push(FindingGroup {
                kind: f.kind,
                severity: f.severity,
                place: key.1,
                findings: Vec::new(),
                steps: 0,
                ranks: Vec::new(),
                count: 0,
                lost_ns: 0,
                saving_ns: 0,
                saving_unknown: true,
            });
            groups.len() - 1
        });
        let g = &mut groups[at];
        g.findings.push(i);
        g.severity = g.severity.max(f.severity);
        g.count += f.count;
        g.lost_ns += f.lost_ns;
        g.saving_ns += f.saving_ns;
        g.saving_unknown &= f.cost.saving_unknown;
        if let Some(rank) = f.rank
            && !g.ranks.contains(&rank)
        {
            g.ranks.push(rank);
        }
    }
    for g in &mut groups {
        g.ranks.sort_unstable();
        let mut steps: Vec<(Option<u16>, &str)> = g
            .findings
            .iter()
            .filter_map(|&i| Some((findings[i].source, findings[i].step.as_deref()?)))
            .collect();
        steps.sort_unstable();
        steps.dedup();
        g.steps = steps.len();
    }
    groups.sort_by(|a, b| {
        b.saving_ns
            .cmp(&a.saving_ns)
            .then_with(|| b.lost_ns.cmp(&a.lost_ns))
            .then_with(|| a.findings[0].cmp(&b.findings[0]))
    });
    groups
}
