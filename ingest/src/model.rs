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

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::source::SourceData;

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

/// Interned strings: each distinct name is stored once and referred to by a [`StrId`].
#[derive(Debug, Default, Clone)]
pub struct StringTable {
    strings: Vec<Arc<str>>,
    index: FxHashMap<Arc<str>, StrId>,
}

impl StringTable {
    /// The id of `s`, adding it when it is new.
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = StrId::try_from(self.strings.len()).unwrap_or(StrId::MAX);
        let arc: Arc<str> = Arc::from(s);
        self.strings.push(Arc::clone(&arc));
        self.index.insert(arc, id);
        id
    }

    /// The id of `s` if it was interned.
    #[must_use]
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.index.get(s).copied()
    }

    /// The string behind `id` (empty for an unknown id).
    #[must_use]
    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id as usize).map_or("", |s| s)
    }

    /// Number of distinct strings.
    #[must_use]
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Whether no string was interned.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    /// Iterates over `(id, string)`.
    pub fn iter(&self) -> impl Iterator<Item = (StrId, &str)> {
        self.strings
            .iter()
            .enumerate()
            .map(|(i, s)| (i as StrId, &**s))
    }

    fn heap_bytes(&self) -> usize {
        let text: usize = self.strings.iter().map(|s| s.len() + 16).sum();
        text + self.strings.capacity() * 16 + self.index.capacity() * 24
    }
}

/// What an event category means, so analyses never compare category strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CategoryClass {
    /// ATen ops, autograd nodes, compiled-region runtime spans (`cpu_op`).
    CpuOp,
    /// `record_function` ranges (`user_annotation`): steps, data loader, optimizer.
    UserAnnotation,
    /// Python frames (`python_function`).
    PythonFunction,
    /// Device kernels (`kernel`, Gaudi `Kernel`, MTIA `mtia_ccp_events`).
    Kernel,
    /// Device copies (`gpu_memcpy`, `Memcpy`).
    Memcpy,
    /// Device memsets (`gpu_memset`, `Memset`).
    Memset,
    /// Host runtime calls that launch device work (`cuda_runtime`, `privateuse1_runtime`, …).
    Runtime,
    /// Driver calls (`cuda_driver`).
    Driver,
    /// Synchronization activity on device lanes (`cuda_sync`).
    DeviceSync,
    /// Device-side mirror of annotations (`gpu_user_annotation`).
    DeviceAnnotation,
    /// CUPTI range-profiler ranges (`cuda_profiler_range`).
    ProfilerRange,
    /// The profiler's own span (`Trace`).
    TraceSpan,
    /// Flow categories (`ac2g`, `fwdbwd`, `async_cpu_to_gpu`).
    Flow,
    /// Ranges derived by a tool, not executed work (Gaudi Trace Analyzer nodes, the steps and
    /// findings steplens draws into its own Perfetto exports).
    Derived,
    /// Anything else.
    Other,
}

impl CategoryClass {
    /// Classifies a category string as written in Kineto and Gaudi bridge traces, in any
    /// case and in every spelling PyTorch has used since 1.8 (`Operator` and `cpu_op`,
    /// `Runtime` and `cuda_runtime`, `Kernel` and `kernel`, `Memcpy` and `gpu_memcpy`, …;
    /// `docs/kineto-compat.md` has the history).
    #[must_use]
    pub fn of(cat: &str) -> Self {
        // Category strings are short; a lowercase copy on the stack keeps this allocation-free.
        let mut buf = [0u8; 32];
        let Some(lower) = buf.get_mut(..cat.len()) else {
            return Self::Other;
        };
        lower.copy_from_slice(cat.as_bytes());
        lower.make_ascii_lowercase();
        match &*lower {
            b"cpu_op" | b"operator" | b"hpu_op" => Self::CpuOp,
            b"user_annotation" => Self::UserAnnotation,
            b"python_function" => Self::PythonFunction,
            b"kernel" | b"mtia_ccp_events" => Self::Kernel,
            b"gpu_memcpy" | b"memcpy" => Self::Memcpy,
            b"gpu_memset" | b"memset" => Self::Memset,
            b"cuda_runtime" | b"runtime" | b"privateuse1_runtime" | b"mtia_runtime" => {
                Self::Runtime
            }
            b"cuda_driver" | b"privateuse1_driver" => Self::Driver,
            b"cuda_sync" => Self::DeviceSync,
            b"gpu_user_annotation" => Self::DeviceAnnotation,
            b"cuda_profiler_range" => Self::ProfilerRange,
            b"trace" => Self::TraceSpan,
            b"ac2g" | b"fwdbwd" | b"async_cpu_to_gpu" => Self::Flow,
            b"analyzed_node" | b"steplens_overlay" => Self::Derived,
            _ => Self::Other,
        }
    }

    /// Whether a slice of this class occupies a device engine (counts as device busy time).
    #[must_use]
    pub fn is_device_work(self) -> bool {
        matches!(
            self,
            Self::Kernel | Self::Memcpy | Self::Memset | Self::ProfilerRange
        )
    }

    /// Whether this class only ever appears on device lanes.
    #[must_use]
    pub fn is_device_only(self) -> bool {
        self.is_device_work() || matches!(self, Self::DeviceSync | Self::DeviceAnnotation)
    }

    /// Whether a slice of this class is host work (an op, a runtime or driver call).
    #[must_use]
    pub fn is_host_work(self) -> bool {
        matches!(self, Self::CpuOp | Self::Runtime | Self::Driver)
    }

    pub(crate) fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// Interned categories with their classes.
#[derive(Debug, Default, Clone)]
pub struct Categories {
    names: Vec<Box<str>>,
    classes: Vec<CategoryClass>,
    index: FxHashMap<Box<str>, CatId>,
}

impl Categories {
    /// The id of `cat`, adding it when new. Beyond 65,535 distinct categories every new one maps
    /// to the last id (a trace with that many categories is not a real profiler trace).
    pub fn intern(&mut self, cat: &str) -> CatId {
        if let Some(&id) = self.index.get(cat) {
            return id;
        }
        let Ok(id) = CatId::try_from(self.names.len()) else {
            return CatId::MAX;
        };
        self.names.push(cat.into());
        self.classes.push(CategoryClass::of(cat));
        self.index.insert(cat.into(), id);
        id
    }

    /// The category string.
    #[must_use]
    pub fn name(&self, id: CatId) -> &str {
        self.names.get(id as usize).map_or("", |s| s)
    }

    /// The category class.
    #[must_use]
    pub fn class(&self, id: CatId) -> CategoryClass {
        self.classes
            .get(id as usize)
            .copied()
            .unwrap_or(CategoryClass::Other)
    }

    /// The id of `cat` if present.
    #[must_use]
    pub fn lookup(&self, cat: &str) -> Option<CatId> {
        self.index.get(cat).copied()
    }

    /// Number of categories.
    #[must_use]
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

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

/// Reference to a slice's args in its source: byte offset and length packed in a `u64`
/// (40 bits of offset, 24 of length). Zero means "no args".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArgsRef(u64);

impl ArgsRef {
    /// No args.
    pub const NONE: Self = Self(0);
    const LEN_BITS: u32 = 24;
    const MAX_LEN: usize = (1 << Self::LEN_BITS) - 1;
    const MAX_OFFSET: usize = (1 << (64 - Self::LEN_BITS)) - 1;

    /// A reference to `range` of the source bytes, or `None` when it cannot be packed
    /// (args longer than 16 MiB or beyond the first TiB of the source).
    #[must_use]
    pub fn new(range: Range<usize>) -> Option<Self> {
        let len = range.end.checked_sub(range.start)?;
        if len == 0 || len > Self::MAX_LEN || range.start > Self::MAX_OFFSET {
            return None;
        }
        Some(Self(((range.start as u64) << Self::LEN_BITS) | len as u64))
    }

    /// The byte range, or `None` for [`ArgsRef::NONE`].
    #[must_use]
    pub fn range(self) -> Option<Range<usize>> {
        if self.0 == 0 {
            return None;
        }
        let start = (self.0 >> Self::LEN_BITS) as usize;
        let len = (self.0 & Self::MAX_LEN as u64) as usize;
        Some(start..start + len)
    }
}

/// All slices, struct-of-arrays, sorted by `(track, start, longer first)`.
#[derive(Debug, Default, Clone)]
pub struct Slices {
    /// Start, ns.
    pub start: Vec<i64>,
    /// Duration, ns (never negative).
    pub dur: Vec<i64>,
    /// Owning track.
    pub track: Vec<TrackId>,
    /// Interned name.
    pub name: Vec<StrId>,
    /// Interned category.
    pub cat: Vec<CatId>,
    /// Nesting depth on its track (0 = top level).
    pub depth: Vec<u16>,
    /// Enclosing slice, or [`NO_PARENT`].
    pub parent: Vec<SliceId>,
    /// Where the args are in the source.
    pub args: Vec<ArgsRef>,
}

impl Slices {
    /// Bytes one slice occupies in the columns (args excluded: they stay in the source).
    pub const BYTES_PER_SLICE: usize = size_of::<i64>() * 2
        + size_of::<TrackId>()
        + size_of::<StrId>()
        + size_of::<CatId>()
        + size_of::<u16>()
        + size_of::<SliceId>()
        + size_of::<ArgsRef>();

    /// Number of slices.
    #[must_use]
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// End (start + dur) of slice `i`.
    #[must_use]
    pub fn end(&self, i: SliceId) -> i64 {
        let i = i as usize;
        // The builder clamps every duration so that this cannot overflow; saturate anyway.
        self.start[i].saturating_add(self.dur[i])
    }

    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            start: Vec::with_capacity(n),
            dur: Vec::with_capacity(n),
            track: Vec::with_capacity(n),
            name: Vec::with_capacity(n),
            cat: Vec::with_capacity(n),
            depth: Vec::with_capacity(n),
            parent: Vec::with_capacity(n),
            args: Vec::with_capacity(n),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.start.capacity() * 8
            + self.dur.capacity() * 8
            + self.track.capacity() * 4
            + self.name.capacity() * 4
            + self.cat.capacity() * 2
            + self.depth.capacity() * 2
            + self.parent.capacity() * 4
            + self.args.capacity() * 8
    }
}

/// Instant events (`i`/`I`), struct-of-arrays sorted by `(track, ts)`.
#[derive(Debug, Default, Clone)]
pub struct Instants {
    /// Time, ns.
    pub ts: Vec<i64>,
    /// Track.
    pub track: Vec<TrackId>,
    /// Name.
    pub name: Vec<StrId>,
    /// Category.
    pub cat: Vec<CatId>,
    /// Scope as written (`t`, `p`, `g`), `t` when absent.
    pub scope: Vec<u8>,
    /// Args.
    pub args: Vec<ArgsRef>,
}

impl Instants {
    /// Number of instants.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// Counter samples (`C`), sorted by `(track, ts)`; each counter series is its own track.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// Counter track.
    pub track: Vec<TrackId>,
    /// Time, ns.
    pub ts: Vec<i64>,
    /// Value.
    pub value: Vec<f64>,
}

impl Counters {
    /// Number of samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// A flow arrow between two slices (host launch → device work, forward → backward).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Flow id as written (the correlation id for `ac2g`).
    pub id: u64,
    /// Flow category (`ac2g`, `fwdbwd`, …).
    pub cat: CatId,
    /// Slice the flow leaves.
    pub from: SliceId,
    /// Slice the flow arrives at.
    pub to: SliceId,
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

/// A device as PyTorch prints it (`cuda:1`, `hpu:0`, `cpu`) from a `c10::DeviceType` number
/// and a device index, as `[memory]` events give them.
#[must_use]
pub fn torch_device_name(kind: i64, index: i64) -> String {
    let name = match kind {
        0 => return "cpu".to_owned(),
        1 => "cuda",
        6 => "hip",
        9 => "xla",
        12 => "xpu",
        13 => "mps",
        15 => "hpu",
        19 => "mtia",
        20 => "privateuseone",
        _ => "device",
    };
    format!("{name}:{}", index.max(0))
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

/// One row of a Gaudi Trace Analyzer "Analyzed Nodes" table (`habana-analyzed-nodes`): a graph
/// node's execution with the analyzer's metrics. Missing cells (`nan`, `[]`, `[Error]`, empty)
/// are `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeMetrics {
    /// Input it came from.
    pub source: u16,
    /// `Node Name` as written (repeated executions carry ` iter N`).
    pub name: String,
    /// `Unit` (`MME`, `TPC`).
    pub unit: String,
    /// `Op Type` (TPC kernel GUID or op type).
    pub op_type: Option<String>,
    /// `Start time of node`, ns.
    pub start_ns: i64,
    /// `End time of node`, ns.
    pub end_ns: i64,
    /// `Duration (us)`.
    pub duration_us: Option<f64>,
    /// `Active (us)`.
    pub active_us: Option<f64>,
    /// `Num activations`: engine activations (HW-trace slices) of the node.
    pub num_activations: Option<u64>,
    /// `MME Compute Utilization (%)`.
    pub mme_utilization_pct: Option<f64>,
    /// `Exposed tpc (us)`.
    pub exposed_tpc_us: Option<f64>,
    /// `Unexposed tpc (us)`.
    pub unexposed_tpc_us: Option<f64>,
    /// `Exposed mme (us)`.
    pub exposed_mme_us: Option<f64>,
    /// `Unexposed mme (us)`.
    pub unexposed_mme_us: Option<f64>,
    /// `Exposed dma (us)`.
    pub exposed_dma_us: Option<f64>,
    /// `Input shapes` as written.
    pub input_shapes: Option<String>,
    /// `Input Datatype` as written.
    pub input_dtypes: Option<String>,
    /// `Output shapes` as written.
    pub output_shapes: Option<String>,
    /// `Output Datatype` as written.
    pub output_dtypes: Option<String>,
    /// The node's own slice on the analyzed-nodes lane.
    pub slice: Option<SliceId>,
    /// HW-trace slices (`habana-hw-csv`, loaded in the same Timeline) of the same node name
    /// (without the ` iter N` suffix) that overlap the node's time range, in slice order.
    pub hw_slices: Vec<SliceId>,
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
    pub(crate) data: Vec<Arc<SourceData>>,
}

/// One dump of a Gaudi bridge metric (`graph_compilation`, `cpu_fallback`, `recipe_cache`,
/// `memory_defragmentation`), as written to `PT_HPU_METRICS_FILE`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDump {
    /// Input it came from.
    pub source: u16,
    /// Metric name.
    pub metric: String,
    /// What triggered the dump: `process_exit`, `mark_step`, `metric_change`, `user`.
    pub triggered_by: String,
    /// When it was written, as given.
    pub generated_on: String,
    /// The statistics object, as written (counts, µs/ms times, per-op or per-recipe maps).
    pub statistics: serde_json::Value,
}

impl MetricDump {
    /// Reads one dump; `None` when it has no `metric_name` or no `statistics` object.
    #[must_use]
    pub fn from_json(value: &serde_json::Value) -> Option<Self> {
        let text = |key: &str| match value.get(key) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let metric = value.get("metric_name")?.as_str()?.to_owned();
        let statistics = value.get("statistics").filter(|s| s.is_object())?.clone();
        Some(Self {
            source: 0,
            metric,
            triggered_by: text("triggered_by"),
            generated_on: text("generated_on"),
            statistics,
        })
    }

    /// A statistic as a number (also when written as a numeric string).
    #[must_use]
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.statistics.get(key)? {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

impl Timeline {
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

    /// Resolves an [`ArgsRef`] of a given source to its raw JSON bytes.
    #[must_use]
    pub fn resolve_args(&self, source: u16, args: ArgsRef) -> Option<&[u8]> {
        let range = args.range()?;
        self.data.get(source as usize)?.bytes().get(range)
    }

    /// Slice `i`'s args decoded into a JSON object (decoded now, not at load).
    #[must_use]
    pub fn args(&self, i: SliceId) -> Option<serde_json::Map<String, serde_json::Value>> {
        serde_json::from_slice(self.args_raw(i)?).ok()
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

    /// Time span covered by all slices, ns: `(first start, last end)`.
    #[must_use]
    pub fn time_range(&self) -> Option<(i64, i64)> {
        let first = self.slices.start.iter().copied().min()?;
        let last = (0..self.slices.len() as SliceId)
            .map(|i| self.slices.end(i))
            .max()?;
        Some((first, last))
    }
}
