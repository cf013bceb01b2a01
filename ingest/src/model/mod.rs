//! The Timeline: one normalized, columnar, read-only model for every trace format.
//!
//! Everything an ingestor reads ends up here, and this is the only thing that crosses from
//! `ingest` to the rest of steplens. Time is `i64` nanoseconds on one clock. Slices are stored
//! as struct-of-arrays sorted by `(track, start)`, with nesting (depth, parent) resolved when the
//! Timeline is built. Names are interned; args stay in the source bytes and are decoded only when
//! someone asks ([`Timeline::args`], [`Timeline::arg_raw`]).
//!
//! Memory: a slice costs [`Slices::BYTES_PER_SLICE`] bytes (40) beyond its args, which stay in
//! the (memory-mapped) source.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

mod arg_keys;
mod columns;
mod gaudi;
mod launches;
mod source_data;
mod strings;

pub use arg_keys::{ArgKeys, OpArg};
pub use columns::{ArgsRef, Counters, Flow, Instants, Slices};
pub use gaudi::{MetricDump, NodeMetrics};
pub use launches::Launches;
pub(crate) use source_data::ReleaseBehind;
pub use source_data::SourceData;
pub use strings::{Categories, CategoryClass, StringTable};

/// Index of a track in [`Timeline::tracks`].
pub type TrackId = u32;
/// Index of a slice in [`Timeline::slices`].
pub type SliceId = u32;
/// Index of an interned string in [`Timeline::strings`].
pub type StrId = u32;
/// Index of an interned category in [`Timeline::categories`].
pub type CatId = u16;

/// Marker for "no parent" in [`Slices::parent`].
pub const NO_PARENT: SliceId = SliceId::MAX;

/// A process or thread id as written in the trace: an integer or a string (`"Spans"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LaneId {
    /// Numeric id.
    Int(i64),
    /// String id, interned in [`Timeline::strings`].
    Str(StrId),
}

/// Device engine classes. Gaudi engines keep their hardware names; CUDA/ROCm streams are
/// `compute-stream`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineClass {
    /// Gaudi matrix engine.
    Mme,
    /// Gaudi vector engine.
    Tpc,
    /// DMA engines (Gaudi EDMA/PDMA, MTIA DMA requests).
    Dma,
    /// Network interfaces.
    Nic,
    /// Gaudi rotator.
    Rotator,
    /// A CUDA/ROCm/MTIA stream running kernels (and possibly copies).
    ComputeStream,
    /// A stream that only copies or sets memory.
    Memcpy,
    /// A device-wide lane holding synchronization events only.
    Sync,
    /// A lane with only device-side annotations.
    Annotation,
    /// Any other engine, by name.
    Other(Box<str>),
}

impl EngineClass {
    /// The name used in reports (`MME`, `TPC`, `compute-stream`, …).
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Mme => "MME",
            Self::Tpc => "TPC",
            Self::Dma => "DMA",
            Self::Nic => "NIC",
            Self::Rotator => "ROTATOR",
            Self::ComputeStream => "compute-stream",
            Self::Memcpy => "memcpy",
            Self::Sync => "sync",
            Self::Annotation => "annotation",
            Self::Other(name) => name,
        }
    }

    /// Whether busy time on this engine class counts as device work.
    #[must_use]
    pub fn does_work(&self) -> bool {
        !matches!(self, Self::Sync | Self::Annotation)
    }
}

impl fmt::Display for EngineClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a track represents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrackKind {
    /// A host (CPU) thread.
    HostThread,
    /// A device engine or stream.
    DeviceEngine {
        /// Engine class.
        class: EngineClass,
        /// Device index (GPU ordinal, HPU module) when known.
        device: Option<i64>,
    },
    /// A counter series.
    Counter,
    /// An async or synthetic lane (profiler spans, global instants).
    Async,
}

impl TrackKind {
    /// Short name used in reports: `host`, `device`, `counter`, `async`.
    #[must_use]
    pub fn label(&self) -> &'static str {
        match self {
            Self::HostThread => "host",
            Self::DeviceEngine { .. } => "device",
            Self::Counter => "counter",
            Self::Async => "async",
        }
    }

    /// Whether this is a device engine track.
    #[must_use]
    pub fn is_device(&self) -> bool {
        matches!(self, Self::DeviceEngine { .. })
    }
}

/// One lane of the timeline.
#[derive(Debug, Clone)]
pub struct Track {
    /// Which input this track came from (index in [`Timeline::sources`]).
    pub source: u16,
    /// Process id as written.
    pub pid: LaneId,
    /// Thread id (or stream, engine index) as written.
    pub tid: LaneId,
    /// What the track represents.
    pub kind: TrackKind,
    /// Display name (thread name, stream name, engine name).
    pub name: String,
    /// Name of the owning process or device.
    pub process_name: String,
    /// Ordering key: process sort index, then thread sort index.
    pub sort_key: (i64, i64),
    /// The track's slices: a contiguous range of [`Timeline::slices`].
    pub slices: Range<SliceId>,
    /// Deepest nesting level on the track (0 when flat).
    pub max_depth: u16,
}

/// Accelerator family found in a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// NVIDIA CUDA.
    Cuda,
    /// AMD ROCm / HIP.
    Rocm,
    /// Meta MTIA.
    Mtia,
    /// Intel Gaudi.
    Hpu,
    /// No accelerator activity.
    #[default]
    Cpu,
}

impl DeviceKind {
    /// Lower-case name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cuda => "cuda",
            Self::Rocm => "rocm",
            Self::Mtia => "mtia",
            Self::Hpu => "hpu",
            Self::Cpu => "cpu",
        }
    }
}

/// The device the trace ran on.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceInfo {
    /// Accelerator family.
    pub kind: DeviceKind,
    /// Device model name (`NVIDIA A100-SXM4-40GB`) when the trace records it.
    pub name: Option<String>,
    /// Memory of one device (`deviceProperties[].totalGlobalMem`), bytes, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<i64>,
    /// CUDA compute capability (`8.0`) from `deviceProperties`, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// Number of devices with activity or properties in the trace.
    pub count: usize,
}

/// A training step: a `ProfilerStep#N` range (torch) or a graph-launch boundary (Gaudi lazy mode).
#[derive(Debug, Clone)]
pub struct Step {
    /// The step's name as written (`ProfilerStep#3`).
    pub name: String,
    /// Step number when the name carries one.
    pub number: Option<i64>,
    /// Start, ns.
    pub start: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Host thread the step annotation is on.
    pub track: TrackId,
    /// The step's slice.
    pub slice: SliceId,
    /// Input it came from.
    pub source: u16,
    /// Derived from the device timeline (a Synapse-only run has no `ProfilerStep#N`): the step
    /// is an iteration of the repeating graph launches, named `Iteration#N`.
    pub derived: bool,
}

impl Step {
    /// End, ns.
    #[must_use]
    pub fn end(&self) -> i64 {
        self.start.saturating_add(self.dur)
    }
}

/// The JSON text of an arg as an integer, also when written as a string of digits.
fn arg_as_i64(raw: &[u8]) -> Option<i64> {
    let text = raw
        .strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .unwrap_or(raw);
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// `c10::DeviceType` numbers (c10/core/DeviceType.h): `CPU = 0`, `CUDA = 1`, `HIP = 6`,
/// `XLA = 9`, `XPU = 12`, `MPS = 13`, `HPU = 15`, `MTIA = 19`, `PrivateUse1 = 20`.
const DEVICE_TYPE_CUDA: i64 = 1;
const DEVICE_TYPE_PRIVATE_USE1: i64 = 20;

/// A device as PyTorch prints it (`cuda:1`, `hpu:0`, `cpu`) from a `c10::DeviceType` number
/// and a device index, as `[memory]` events give them.
#[must_use]
pub fn torch_device_name(kind: i64, index: i64) -> String {
    let name = match kind {
        0 => return "cpu".to_owned(),
        DEVICE_TYPE_CUDA => "cuda",
        6 => "hip",
        9 => "xla",
        12 => "xpu",
        13 => "mps",
        15 => "hpu",
        19 => "mtia",
        DEVICE_TYPE_PRIVATE_USE1 => "privateuseone",
        _ => "device",
    };
    format!("{name}:{}", index.max(0))
}

/// The device of a `[memory]` event of an input whose trace describes a Gaudi (`on_hpu`, see
/// [`Timeline::memory_on_hpu`]): the Gaudi bridge writes `Device Type` 1 (CUDA) for the HPU's
/// memory (its `Memory Logs` hard-code it), and a backend registered as PrivateUse1 writes 20;
/// on such an input both are `hpu:N`. Elsewhere, and for every other type, as
/// [`torch_device_name`].
#[must_use]
pub fn memory_device_name(kind: i64, index: i64, on_hpu: bool) -> String {
    if on_hpu && matches!(kind, DEVICE_TYPE_CUDA | DEVICE_TYPE_PRIVATE_USE1) {
        format!("hpu:{}", index.max(0))
    } else {
        torch_device_name(kind, index)
    }
}

pub use crate::warning::{Warning, WarningCode};

/// One input file of the Timeline.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// Path as given (or `-` for stdin).
    pub path: String,
    /// Format id (`kineto-json`, …).
    pub format: crate::format::FormatId,
    /// Bytes read (after decompression).
    pub bytes: u64,
    /// Bytes of the file as stored (compressed size for `.gz`).
    pub stored_bytes: u64,
    /// Whether the input was gzip-compressed.
    pub compressed: bool,
    /// Trace events read (every element of the event array that was an object).
    pub events: u64,
    /// Events per phase letter (`X`, `M`, …).
    pub events_by_phase: Vec<(char, u64)>,
    /// Problems that did not stop the load.
    pub warnings: Vec<Warning>,
    /// Top-level keys other than the event array, as raw JSON text (`schemaVersion`,
    /// `deviceProperties`, `distributedInfo`, `displayTimeUnit`, …).
    pub top_level: Vec<(String, String)>,
    /// Rank from `distributedInfo` when present.
    pub rank: Option<i64>,
    /// World size from `distributedInfo` when present.
    pub world_size: Option<i64>,
}

/// Counts of what was dropped or repaired while building, for warnings and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Slices whose negative duration was clamped to zero.
    pub negative_durations: u64,
    /// Most negative duration met, ns.
    pub most_negative_ns: i64,
    /// Of `negative_durations`, those of 1 µs or more: an end before its start, not rounding.
    pub large_negative_durations: u64,
    /// Slices dropped for an impossible duration (longer than 7 days: CUPTI overflow).
    pub overlong: u64,
    /// Slices whose end would fall past the last representable nanosecond; their duration was
    /// cut so that they end there.
    pub clamped_ends: u64,
    /// Slices that started inside a sibling and ended after it (kept as siblings).
    pub partial_overlaps: u64,
    /// Largest such overlap, ns.
    pub max_overlap_ns: i64,
    /// `B` events closed at the end of their track for want of an `E`.
    pub unclosed_begins: u64,
    /// `E` events with no open `B`.
    pub unmatched_ends: u64,
    /// Flow ends that found no partner or no slice to bind to.
    pub unbound_flow_ends: u64,
    /// Events with a phase steplens does not model (`P`, `O`, …).
    pub unsupported_phase: u64,
    /// Events missing a field their phase needs (no `ts`, no `dur` on `X`).
    pub malformed: u64,
}

/// The normalized trace: everything the analyses and the viewer read.
#[derive(Debug, Default)]
pub struct Timeline {
    /// Inputs, in load order.
    pub sources: Vec<SourceInfo>,
    /// Interned names.
    pub strings: StringTable,
    /// Interned categories.
    pub categories: Categories,
    /// Tracks, in display order (host above its device, then by sort index).
    pub tracks: Vec<Track>,
    /// Slices, sorted by `(track, start)`.
    pub slices: Slices,
    /// Instant events.
    pub instants: Instants,
    /// Counter samples.
    pub counters: Counters,
    /// Flows bound to slices.
    pub flows: Vec<Flow>,
    /// Steps in time order.
    pub steps: Vec<Step>,
    /// The device.
    pub device: DeviceInfo,
    /// What was repaired or dropped.
    pub stats: BuildStats,
    /// Per-node metrics of Gaudi Trace Analyzer "Analyzed Nodes" tables, in file order, each
    /// bound to its own slice and to the HW-trace slices it describes.
    pub node_metrics: Vec<NodeMetrics>,
    /// Gaudi bridge metric dumps (`PT_HPU_METRICS_FILE`), in file order.
    pub metrics: Vec<MetricDump>,
    /// For each input, the input whose clock (and steps) it is on: itself, or the trace a
    /// device-only input was aligned to.
    pub clock_of: Vec<u16>,
    /// For each input, whether the accelerator memory of its `[memory]` events is a Gaudi's:
    /// the input describes an HPU (`deviceProperties` naming a Gaudi, HPU lanes or categories,
    /// Synapse calls) and no other accelerator. See [`memory_device_name`].
    pub memory_on_hpu: Vec<bool>,
    pub(crate) data: Vec<Arc<SourceData>>,
    /// The launch index, built on first use ([`Timeline::launches`]).
    launches: std::sync::OnceLock<Launches>,
    /// [`Timeline::time_range`], found on first use.
    time_range: std::sync::OnceLock<Option<(i64, i64)>>,
}

/// How many slices' args [`Timeline::touch_args`] is given at once, one batch ahead of the
/// slice being read.
pub const ARGS_AHEAD: usize = 16;

/// Which step times fall in, for lookups that come mostly in time order (slices track by
/// track): the one step lookup, [`Timeline::step_at`], with a memory of the last answer.
#[derive(Debug)]
pub struct StepCursor<'a> {
    timeline: &'a Timeline,
    last: Option<usize>,
}

impl StepCursor<'_> {
    /// The step (index into `steps`) whose range holds `ts` on input `source`'s clock.
    pub fn step_at(&mut self, source: u16, ts: i64) -> Option<usize> {
        let t = self.timeline;
        let clock = t.step_source(source);
        let holds = |k: usize| {
            t.steps
                .get(k)
                .is_some_and(|s| s.source == clock && s.start <= ts && ts < s.end())
        };
        let step = match self.last {
            Some(k) if holds(k) => Some(k),
            Some(k) if holds(k + 1) => Some(k + 1),
            _ => t.step_at(source, ts),
        };
        if step.is_some() {
            self.last = step;
        }
        step
    }
}

impl Timeline {
    /// Which host call launched which device work: the one launch index ([`Launches`]), built
    /// on first use. The trace must be fully built (its flows final) before the first call.
    pub fn launches(&self) -> &Launches {
        self.launches.get_or_init(|| Launches::new(self))
    }

    /// Name of slice `i`.
    #[must_use]
    pub fn slice_name(&self, i: SliceId) -> &str {
        self.slices
            .name
            .get(i as usize)
            .map_or("", |&n| self.strings.get(n))
    }

    /// Category class of slice `i`.
    #[must_use]
    pub fn slice_class(&self, i: SliceId) -> CategoryClass {
        self.slices
            .cat
            .get(i as usize)
            .map_or(CategoryClass::Other, |&c| self.categories.class(c))
    }

    /// The track of slice `i`.
    #[must_use]
    pub fn slice_track(&self, i: SliceId) -> Option<&Track> {
        self.slices
            .track
            .get(i as usize)
            .and_then(|&t| self.tracks.get(t as usize))
    }

    /// Raw JSON text of slice `i`'s args object, or `None` when it has none.
    #[must_use]
    pub fn args_raw(&self, i: SliceId) -> Option<&[u8]> {
        let args = *self.slices.args.get(i as usize)?;
        let track = self.slice_track(i)?;
        self.resolve_args(track.source, args)
    }

    /// Reads the cache lines that hold the first `bytes` of each of `slices`' args, so that a
    /// later read finds them in cache. In a large trace the args are cold and a page or more
    /// apart: a pass that reads them one at a time waits for memory once per slice, while
    /// touching the next [`ARGS_AHEAD`] together lets their fetches overlap.
    pub fn touch_args(&self, slices: impl IntoIterator<Item = SliceId>, bytes: usize) {
        for slice in slices {
            if let Some(raw) = self.args_raw(slice) {
                for at in (0..raw.len().min(bytes)).step_by(64) {
                    std::hint::black_box(raw[at]);
                }
            }
        }
    }

    /// Resolves an [`ArgsRef`] of a given source to its raw JSON bytes.
    #[must_use]
    pub fn resolve_args(&self, source: u16, args: ArgsRef) -> Option<&[u8]> {
        let range = args.range()?;
        self.data.get(source as usize)?.bytes().get(range)
    }

    /// Slice `i`'s args decoded into a JSON object (decoded now, not at load). An object with a
    /// trailing comma (`{"a": 1,}`, which Perfetto's reader accepts) decodes as without it.
    #[must_use]
    pub fn args(&self, i: SliceId) -> Option<serde_json::Map<String, serde_json::Value>> {
        let raw = self.args_raw(i)?;
        serde_json::from_slice(raw)
            .ok()
            .or_else(|| serde_json::from_slice(&crate::json::without_trailing_commas(raw)?).ok())
    }

    /// The raw JSON text of one key of slice `i`'s args, without decoding the rest.
    #[must_use]
    pub fn arg_raw(&self, i: SliceId, key: &str) -> Option<&[u8]> {
        crate::json::find_key(self.args_raw(i)?, key.as_bytes())
    }

    /// The raw JSON text of one key of instant `i`'s args.
    #[must_use]
    pub fn instant_arg_raw(&self, i: usize, key: &str) -> Option<&[u8]> {
        let track = self.tracks.get(*self.instants.track.get(i)? as usize)?;
        let args = self.resolve_args(track.source, *self.instants.args.get(i)?)?;
        crate::json::find_key(args, key.as_bytes())
    }

    /// One arg of instant `i` as an integer (also when written as a string of digits).
    #[must_use]
    pub fn instant_arg_i64(&self, i: usize, key: &str) -> Option<i64> {
        arg_as_i64(self.instant_arg_raw(i, key)?)
    }

    /// The device whose memory `[memory]` instant `i` reports (`cuda:0`, `hpu:0`, `cpu`), from
    /// its `Device Type` and `Device Id` and what its input says the device is
    /// ([`memory_device_name`]); `None` without a `Device Type`. The same name as the
    /// `memory allocated <device>` counter series of that input.
    #[must_use]
    pub fn memory_device(&self, i: usize) -> Option<String> {
        let kind = self.instant_arg_i64(i, "Device Type")?;
        let index = self.instant_arg_i64(i, "Device Id").unwrap_or(0);
        let source = self
            .tracks
            .get(*self.instants.track.get(i)? as usize)?
            .source;
        let on_hpu = self
            .memory_on_hpu
            .get(usize::from(source))
            .copied()
            .unwrap_or(false);
        Some(memory_device_name(kind, index, on_hpu))
    }

    /// The raw JSON values of several args of slice `i`, found in one pass over its args:
    /// `N` keys in, `N` values (or `None`) out.
    #[must_use]
    pub fn args_raw_of<const N: usize>(&self, i: SliceId, keys: [&str; N]) -> [Option<&[u8]>; N] {
        let mut out = [None; N];
        if let Some(raw) = self.args_raw(i) {
            crate::json::find_keys(raw, &keys, &mut out);
        }
        out
    }

    /// One arg of slice `i` as an integer (also when written as a string of digits).
    #[must_use]
    pub fn arg_i64(&self, i: SliceId, key: &str) -> Option<i64> {
        arg_as_i64(self.arg_raw(i, key)?)
    }

    /// One arg of slice `i` as a string (JSON strings unescaped; other values as raw text).
    #[must_use]
    pub fn arg_str(&self, i: SliceId, key: &str) -> Option<String> {
        let raw = self.arg_raw(i, key)?;
        if raw.first() == Some(&b'"') {
            serde_json::from_slice::<String>(raw).ok()
        } else {
            Some(String::from_utf8_lossy(raw).into_owned())
        }
    }

    /// Slices of `track` (empty for an unknown track).
    #[must_use]
    pub fn track_slices(&self, track: TrackId) -> Range<SliceId> {
        self.tracks
            .get(track as usize)
            .map_or(0..0, |t| t.slices.clone())
    }

    /// Slices of `track` that start inside `[from, to)`.
    #[must_use]
    pub fn track_slices_between(&self, track: &Track, from: i64, to: i64) -> Range<SliceId> {
        let starts = &self.slices.start[track.slices.start as usize..track.slices.end as usize];
        let a = starts.partition_point(|&s| s < from) as SliceId;
        let b = starts.partition_point(|&s| s < to) as SliceId;
        track.slices.start + a..track.slices.start + b
    }

    /// The deepest slice of `track` whose `[start, end]` contains `ts`.
    #[must_use]
    pub fn slice_at(&self, track: TrackId, ts: i64) -> Option<SliceId> {
        let range = self.track_slices(track);
        let starts = &self.slices.start[range.start as usize..range.end as usize];
        let after = starts.partition_point(|&s| s <= ts);
        if after == 0 {
            return None;
        }
        // The last slice starting at or before `ts` is the deepest candidate; if it ended
        // before `ts`, one of its ancestors may still contain it.
        let mut candidate = range.start + after as SliceId - 1;
        loop {
            if self.slices.end(candidate) >= ts {
                return Some(candidate);
            }
            let parent = self.slices.parent[candidate as usize];
            if parent != NO_PARENT {
                candidate = parent;
                continue;
            }
            return None;
        }
    }

    /// The input whose steps apply to `source` (itself unless it was clock-aligned to another).
    #[must_use]
    pub fn step_source(&self, source: u16) -> u16 {
        self.clock_of
            .get(source as usize)
            .copied()
            .unwrap_or(source)
    }

    /// The step (index into `steps`) whose range contains `ts` on the clock of input `source`.
    #[must_use]
    pub fn step_at(&self, source: u16, ts: i64) -> Option<usize> {
        let source = self.step_source(source);
        let after = self
            .steps
            .partition_point(|s| (s.source, s.start) <= (source, ts));
        let i = after.checked_sub(1)?;
        let s = &self.steps[i];
        (s.source == source && ts < s.end()).then_some(i)
    }

    /// The step (index into `steps`) of input `source` named `name`, the first of that name: how
    /// the memory series, which name their steps, find them again. Findings keep their step's
    /// index instead.
    #[must_use]
    pub fn step_named(&self, source: u16, name: &str) -> Option<usize> {
        self.steps
            .iter()
            .position(|s| s.source == source && s.name == name)
    }

    /// A [`Self::step_at`] for many lookups in track order: it tries the step of the previous
    /// lookup and the one after it before searching.
    #[must_use]
    pub fn step_cursor(&self) -> StepCursor<'_> {
        StepCursor {
            timeline: self,
            last: None,
        }
    }

    /// Total events read over all sources.
    #[must_use]
    pub fn event_count(&self) -> u64 {
        self.sources.iter().map(|s| s.events).sum()
    }

    /// Whether any device engine track exists.
    #[must_use]
    pub fn has_device(&self) -> bool {
        self.tracks.iter().any(|t| t.kind.is_device())
    }

    /// Heap bytes owned by the model (columns, strings, tracks), excluding the source bytes.
    #[must_use]
    pub fn model_heap_bytes(&self) -> usize {
        self.slices.heap_bytes()
            + self.strings.heap_bytes()
            + self.instants.ts.capacity() * 28
            + self.counters.ts.capacity() * 20
            + self.flows.capacity() * size_of::<Flow>()
            + self.tracks.capacity() * size_of::<Track>()
            + self.steps.capacity() * size_of::<Step>()
    }

    /// Bytes of source data kept for lazy args (a mapping is page cache, not heap).
    #[must_use]
    pub fn source_bytes(&self) -> Vec<(u64, bool)> {
        self.data
            .iter()
            .map(|d| (d.bytes().len() as u64, d.is_mapped()))
            .collect()
    }

    /// Time span covered by all slices, ns: `(first start, last end)`. Found once, on first
    /// use (the slices do not change after the build): the report, the engines and findings
    /// without a step each ask, and on a 10 M-event trace each scan read 160 MB.
    #[must_use]
    pub fn time_range(&self) -> Option<(i64, i64)> {
        *self.time_range.get_or_init(|| {
            let first = self.slices.start.iter().copied().min()?;
            let last = (0..self.slices.len() as SliceId)
                .map(|i| self.slices.end(i))
                .max()?;
            Some((first, last))
        })
    }
}
