//! The critical path of every step (of each input's whole trace when it has no steps): the
//! chain of host work, launches, device work and waits that bounds how long the step takes,
//! and a breakdown of the step by what bounds it.
//!
//! The dependency graph follows Holistic Trace Analysis' model (its `critical_path_analysis`):
//! every host op and runtime call and every kernel, copy and memset gets a start and an end node;
//! - host ops nest: parent start → child start → child end → next child … → parent end, each
//!   edge weighing the time between its nodes; a blocking call's own span weighs 0, so a path
//!   through a wait is only as long as the work waited on;
//! - a runtime launch's start → the device work it launched (the launch delay), when the stream
//!   was idle at the launch; otherwise the previous work on the stream → this work (the
//!   kernel-to-kernel gap);
//! - device work that a blocking call waited for → the call's end (weight 0): Kineto's
//!   `cuda_sync` events say which (`Context Sync`: every stream, `Stream Sync`: one stream,
//!   `Event Sync`: the work before the waited `cudaEventRecord`); without them (older traces,
//!   Gaudi's `syn*Synchronize`), the device work that finished last while the call waited;
//! - `cudaStreamWaitEvent`: the work before the waited record → the next work launched on the
//!   waiting stream (weight 0);
//! - several ranks loaded: a collective cannot start before its last rank arrives, so the time
//!   a rank waited there for the last arrival is a sync wait on its path.
//!
//! One deliberate difference from HTA: on the step's own thread, the time between top-level ops
//! weighs what it lasts (HTA gives 0), so Python time between ops, data loading and compiles
//! bound the step as they do in the run. Where a sync waited, both models pick the same path.
//! Ties are broken towards the path with more op and kernel time, so an idle host thread never
//! hides the work that kept it waiting.
//!
//! The path is the longest one from the step's start to its end on the step's thread. Its edges
//! cover the step without overlap, so `by_bound` adds up to the step (within a step no
//! nanosecond is owned twice).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::model::{CategoryClass, LaneId, SliceId, Timeline, TrackKind};

use crate::intervals::IntervalSet;
use crate::op_names::DATALOADER_PREFIX;

/// What bounds a stretch of the critical path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Host ops and the Python time between them.
    HostCompute,
    /// Runtime launch calls and the delay from a launch to its device work.
    LaunchOverhead,
    /// Device kernels, copies and memsets.
    DeviceCompute,
    /// Collective kernels (NCCL, gloo, HCCL) and NIC engines.
    Communication,
    /// The device idle between two pieces of work on one stream.
    KernelGap,
    /// A blocking call's own time and its wake-up after the device finished.
    SyncWait,
    /// Host time inside the data loader's `__next__`.
    DataLoading,
    /// Host time and launch delays while a graph compiles (torch.compile, `synGraphCompile`),
    /// on the step's thread or another host thread of its run.
    Compile,
}

impl Bound {
    /// Every bound, in the order tables list them.
    pub const ALL: [Self; 8] = [
        Self::HostCompute,
        Self::LaunchOverhead,
        Self::DeviceCompute,
        Self::Communication,
        Self::KernelGap,
        Self::SyncWait,
        Self::DataLoading,
        Self::Compile,
    ];

    /// The name reports use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HostCompute => "host_compute",
            Self::LaunchOverhead => "launch_overhead",
            Self::DeviceCompute => "device_compute",
            Self::Communication => "communication",
            Self::KernelGap => "kernel_gap",
            Self::SyncWait => "sync_wait",
            Self::DataLoading => "data_loading",
            Self::Compile => "compile",
        }
    }

    /// Whether the device was working during a stretch of this bound.
    #[must_use]
    pub fn is_device_work(self) -> bool {
        matches!(self, Self::DeviceCompute | Self::Communication)
    }
}

/// One stretch of the path: an event on it, or the edge between two.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PathSlice {
    /// The event's name, or what the edge is (`launch → sgemm…`, `between ops`).
    pub name: String,
    /// Track of the event (of the edge's later end).
    pub track: Option<String>,
    /// Start, ns.
    pub start_ns: i64,
    /// Duration, ns.
    pub dur_ns: i64,
    /// What bounds this stretch.
    pub bound: Bound,
    /// The Timeline slice, when the stretch is one event's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<u32>,
}

/// A name with the most time on the path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Contributor {
    /// Event or edge name.
    pub name: String,
    /// What bounds it.
    pub bound: Bound,
    /// Time on the path, ns.
    pub ns: i64,
    /// Stretches of the path it covers.
    pub count: u64,
}

/// The critical path of one step (or of an input without steps).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CriticalPath {
    /// Length of the path: the step's duration (its span, without steps), ns.
    pub total_ns: i64,
    /// The path's time per bound, ns; adds up to `total_ns`.
    pub by_bound: BTreeMap<Bound, i64>,
    /// The names with the most time on the path, most first.
    pub top: Vec<Contributor>,
    /// The path in time order: host time inside one top-level op on one thread as that op,
    /// device work and the edges between events as they are; at most [`MAX_PATH_SLICES`]
    /// (then the longest, and `slices_total` says how many there were).
    pub slices: Vec<PathSlice>,
    /// How many stretches the path has, when `slices` holds only the longest of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices_total: Option<u64>,
    /// The path as runs of one bound, in time order (what the savings read); not in the JSON.
    #[serde(skip)]
    pub bound_runs: Vec<(i64, i64, Bound)>,
}

impl CriticalPath {
    /// Where the path runs on bounds that `keep` accepts, as intervals.
    #[must_use]
    pub fn runs_of(&self, keep: impl Fn(Bound) -> bool) -> Vec<(i64, i64)> {
        self.bound_runs
            .iter()
            .filter(|r| keep(r.2))
            .map(|r| (r.0, r.1))
            .collect()
    }

    /// The path's span: its first stretch's start to its last stretch's end.
    #[must_use]
    pub fn span(&self) -> Option<(i64, i64)> {
        Some((self.bound_runs.first()?.0, self.bound_runs.last()?.1))
    }
}

/// How many contributors `top` lists.
pub const TOP_CONTRIBUTORS: usize = 10;

/// Critical paths of a Timeline: one per step, or one per input (clock) without steps.
#[derive(Debug, Default)]
pub struct CriticalPaths {
    /// Per step, in `timeline.steps` order (`None` when the step's thread has no work).
    pub steps: Vec<Option<CriticalPath>>,
    /// Per clock source without steps.
    pub whole: Vec<(u16, CriticalPath)>,
}

impl CriticalPaths {
    /// The path of the step named `step` on input `source`'s clock, or of its whole trace.
    #[must_use]
    pub fn of(
        &self,
        timeline: &Timeline,
        source: u16,
        step: Option<&str>,
    ) -> Option<&CriticalPath> {
        let clock = timeline.step_source(source);
        match step {
            Some(name) => timeline
                .steps
                .iter()
                .position(|s| s.source == clock && s.name == name)
                .and_then(|i| self.steps.get(i))
                .and_then(Option::as_ref),
            None => self.whole.iter().find(|(s, _)| *s == clock).map(|(_, p)| p),
        }
    }
}

/// Runtime calls the host blocks in until the device is done (HTA's list, with HIP and Gaudi's).
const BLOCKING: &[&str] = &[
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaEventQuery",
    "cudaMemcpy",
    "cudaMemcpyAsync",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
    "synStreamSynchronize",
    "synEventSynchronize",
    "synDeviceSynchronize",
];

/// Computes the critical path of every step, and of every input without steps.
#[must_use]
pub fn critical_paths(timeline: &Timeline) -> CriticalPaths {
    let waits = crate::ranks::rank_analysis(timeline).map_or_else(Vec::new, |a| a.waits);
    critical_paths_with(
        timeline,
        &waits,
        &crate::step_windows::step_windows(timeline),
    )
}

/// [`critical_paths`] with the ranks' collective waits already matched
/// ([`crate::ranks::RankAnalysis::waits`]; empty for one input) and the steps' device-inclusive
/// windows ([`crate::step_windows`], in `timeline.steps` order): a step's path runs over its
/// window, from the host into the device work that ends it.
#[must_use]
pub fn critical_paths_with(
    timeline: &Timeline,
    rank_waits: &[Vec<(i64, i64)>],
    windows: &[crate::step_windows::StepWindow],
) -> CriticalPaths {
    let shared = Shared::new(timeline, rank_waits);
    let steps = timeline
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let clock = timeline.step_source(step.source);
            let (start, end) = windows
                .get(index)
                .map_or((step.start, step.end()), |w| (w.start, w.end));
            Window {
                clock,
                start,
                end,
                host_end: step.end(),
                main: Some(step.track),
            }
            .path(timeline, &shared)
        })
        .collect();
    let mut whole = Vec::new();
    let mut clocks: Vec<u16> = (0..timeline.sources.len() as u16)
        .map(|s| timeline.step_source(s))
        .collect();
    clocks.sort_unstable();
    clocks.dedup();
    for clock in clocks {
        if timeline.steps.iter().any(|s| s.source == clock) {
            continue;
        }
        let mut range: Option<(i64, i64)> = None;
        for track in timeline.tracks.iter() {
            if timeline.step_source(track.source) != clock || track.slices.is_empty() {
                continue;
            }
            if !matches!(
                track.kind,
                TrackKind::HostThread | TrackKind::DeviceEngine { .. }
            ) {
                continue;
            }
            for i in track.slices.clone() {
                let (a, b) = (timeline.slices.start[i as usize], timeline.slices.end(i));
                range = Some(range.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
            }
        }
        let Some((start, end)) = range else { continue };
        let window = Window {
            clock,
            start,
            end,
            host_end: end,
            main: None,
        };
        if let Some(path) = window.path(timeline, &shared) {
            whole.push((clock, path));
        }
    }
    CriticalPaths { steps, whole }
}

/// What every window reads: launch links, blocking-call names, `cuda_sync` links.
struct Shared {
    /// Per slice: the runtime call that launched it (device work), or [`NO_SLICE`]; empty
    /// without launch links.
    launch_of: Vec<SliceId>,
    /// Per-slice node ids of the window being built, reused from window to window.
    scratch: std::cell::RefCell<Scratch>,
    /// Per interned name: 1 blocking call, 2 compile span, 4 data loader range, 8 launch call.
    name_flags: Vec<u8>,
    /// Blocking runtime call → the device work its `cuda_sync` event says it waited for.
    waits_for: FxHashMap<SliceId, Vec<SliceId>>,
    /// Device work → the device work a `cudaStreamWaitEvent` made it wait for.
    stream_waits: FxHashMap<SliceId, SliceId>,
    /// Blocking calls whose `cuda_sync` event was read (they use it, not the fallback).
    synced: rustc_hash::FxHashSet<SliceId>,
    /// Per clock (several ranks loaded): where that rank waited at a collective for the last
    /// rank to arrive, sorted.
    rank_waits: FxHashMap<u16, Vec<(i64, i64)>>,
    /// Per clock: graph compiles on any host thread. A compile on another thread (Synapse
    /// compiling the graph a launch waits for) bounds the step as much as one on its own.
    compiles: FxHashMap<u16, Vec<(i64, i64)>>,
}

const BLOCKING_FLAG: u8 = 1;
const COMPILE_FLAG: u8 = 2;
const DATALOADER_FLAG: u8 = 4;
const LAUNCH_FLAG: u8 = 8;

impl Shared {
    fn new(t: &Timeline, rank_waits: &[Vec<(i64, i64)>]) -> Self {
        let name_flags: Vec<u8> = t
            .strings
            .iter()
            .map(|(_, name)| {
                let mut f = 0;
                if BLOCKING.contains(&name) {
                    f |= BLOCKING_FLAG;
                }
                // `Torch-Compiled Region` is the compiled graph running, not compiling.
                if crate::op_names::is_graph_compile(name) {
                    f |= COMPILE_FLAG;
                }
                if name.starts_with(DATALOADER_PREFIX) {
                    f |= DATALOADER_FLAG;
                }
                if name.contains("Launch") {
                    f |= LAUNCH_FLAG;
                }
                f
            })
            .collect();
        let mut launch_of: Vec<SliceId> = Vec::new();
        for flow in &t.flows {
            if t.slice_class(flow.from).is_host_work() && t.slice_class(flow.to).is_device_work() {
                if launch_of.is_empty() {
                    launch_of = vec![NO_SLICE; t.slices.len()];
                }
                if let Some(l) = launch_of.get_mut(flow.to as usize)
                    && *l == NO_SLICE
                {
                    *l = flow.from;
                }
            }
        }
        let mut shared = Self {
            launch_of,
            scratch: std::cell::RefCell::new(Scratch::default()),
            name_flags,
            waits_for: FxHashMap::default(),
            stream_waits: FxHashMap::default(),
            synced: rustc_hash::FxHashSet::default(),
            rank_waits: FxHashMap::default(),
            compiles: FxHashMap::default(),
        };
        for track in t
            .tracks
            .iter()
            .filter(|tr| tr.kind == TrackKind::HostThread)
        {
            for i in track.slices.clone() {
                if shared.flags(t, i) & COMPILE_FLAG != 0 {
                    shared
                        .compiles
                        .entry(t.step_source(track.source))
                        .or_default()
                        .push((t.slices.start[i as usize], t.slices.end(i)));
                }
            }
        }
        shared.read_cuda_sync(t);
        for (source, waits) in rank_waits.iter().enumerate() {
            if !waits.is_empty() {
                let set = IntervalSet::from_ranges(waits.clone());
                shared
                    .rank_waits
                    .insert(t.step_source(source as u16), set.iter().collect());
            }
        }
        shared
    }

    /// The runtime call that launched device work `slice`, when the trace links it.
    fn launch_of(&self, slice: SliceId) -> Option<SliceId> {
        self.launch_of
            .get(slice as usize)
            .copied()
            .filter(|&l| l != NO_SLICE)
    }

    fn flags(&self, t: &Timeline, slice: SliceId) -> u8 {
        t.slices
            .name
            .get(slice as usize)
            .and_then(|&n| self.name_flags.get(n as usize))
            .copied()
            .unwrap_or(0)
    }

    /// Reads Kineto's `cuda_sync` events (PyTorch 2.1+): which device work each blocking call
    /// and each `cudaStreamWaitEvent` waited for, as HTA does.
    fn read_cuda_sync(&mut self, t: &Timeline) {
        let syncs: Vec<SliceId> = t
            .tracks
            .iter()
            .filter(|tr| tr.kind.is_device())
            .flat_map(|tr| tr.slices.clone())
            .filter(|&i| t.slice_class(i) == CategoryClass::DeviceSync)
            .collect();
        if syncs.is_empty() {
            return;
        }
        // Runtime calls by (source, correlation): the sync's own call and the waited records.
        let mut runtime_by_corr: FxHashMap<(u16, i64), SliceId> = FxHashMap::default();
        for track in &t.tracks {
            if track.kind != TrackKind::HostThread {
                continue;
            }
            for i in track.slices.clone() {
                if t.slice_class(i) != CategoryClass::Runtime {
                    continue;
                }
                let name = t.slice_name(i);
                let wanted = self.flags(t, i) & BLOCKING_FLAG != 0
                    || name == "cudaEventRecord"
                    || name == "cudaStreamWaitEvent"
                    || name == "hipEventRecord"
                    || name == "hipStreamWaitEvent";
                if wanted && let Some(c) = t.arg_i64(i, "correlation") {
                    runtime_by_corr.insert((track.source, c), i);
                }
            }
        }
        // Per (source, stream): the device work in launch order, (launch start, work).
        let mut launched: FxHashMap<(u16, i64), Vec<(i64, SliceId)>> = FxHashMap::default();
        for (work, &launch) in self.launch_of.iter().enumerate() {
            if launch == NO_SLICE {
                continue;
            }
            let work = work as SliceId;
            let Some(track) = t.slice_track(work) else {
                continue;
            };
            let LaneId::Int(stream) = track.tid else {
                continue;
            };
            launched
                .entry((track.source, stream))
                .or_default()
                .push((t.slices.start[launch as usize], work));
        }
        for list in launched.values_mut() {
            list.sort_unstable();
        }
        // Last work per stream, by start, for Context/Stream Sync.
        let last_started_before = |source: u16, stream: Option<i64>, ts: i64| -> Vec<SliceId> {
            let mut out = Vec::new();
            for track in &t.tracks {
                if track.source != source || !track.kind.is_device() {
                    continue;
                }
                if let Some(s) = stream
                    && track.tid != LaneId::Int(s)
                {
                    continue;
                }
                let range = t.track_slices_between(track, i64::MIN, ts.saturating_add(1));
                if let Some(last) = range.rev().find(|&i| t.slice_class(i).is_device_work()) {
                    out.push(last);
                }
            }
            out
        };
        // The work launched on `stream` last before `ts` (the work a record at `ts` follows).
        let work_before = |source: u16, stream: i64, ts: i64| -> Option<SliceId> {
            let list = launched.get(&(source, stream))?;
            let n = list.partition_point(|&(s, _)| s < ts);
            n.checked_sub(1).map(|i| list[i].1)
        };
        for s in syncs {
            let Some(track) = t.slice_track(s) else {
                continue;
            };
            let source = track.source;
            let Some(corr) = t.arg_i64(s, "correlation") else {
                continue;
            };
            let Some(&call) = runtime_by_corr.get(&(source, corr)) else {
                continue;
            };
            let call_end = t.slices.end(call);
            let kind = t
                .arg_str(s, "cuda_sync_kind")
                .unwrap_or_else(|| t.slice_name(s).to_owned());
            let record = t
                .arg_i64(s, "wait_on_cuda_event_record_corr_id")
                .filter(|&c| c >= 0)
                .and_then(|c| runtime_by_corr.get(&(source, c)).copied());
            let wait_stream = t.arg_i64(s, "wait_on_stream").filter(|&w| w >= 0);
            match kind.as_str() {
                "Context Sync" => {
                    self.synced.insert(call);
                    self.waits_for
                        .insert(call, last_started_before(source, None, call_end));
                }
                "Stream Sync" => {
                    self.synced.insert(call);
                    let stream = t.arg_i64(s, "stream").filter(|&w| w >= 0);
                    if stream.is_some() {
                        self.waits_for
                            .insert(call, last_started_before(source, stream, call_end));
                    }
                }
                "Event Sync" => {
                    self.synced.insert(call);
                    if let (Some(record), Some(stream)) = (record, wait_stream)
                        && let Some(src) =
                            work_before(source, stream, t.slices.start[record as usize])
                    {
                        self.waits_for.insert(call, vec![src]);
                    }
                }
                "Stream Wait Event" => {
                    let (Some(record), Some(from_stream), Some(to_stream)) = (
                        record,
                        wait_stream,
                        t.arg_i64(s, "stream").filter(|&w| w >= 0),
                    ) else {
                        continue;
                    };
                    let Some(src) =
                        work_before(source, from_stream, t.slices.start[record as usize])
                    else {
                        continue;
                    };
                    // The next work launched on the waiting stream after the wait call.
                    let after = t.slices.start[call as usize];
                    if let Some(list) = launched.get(&(source, to_stream)) {
                        let n = list.partition_point(|&(ts, _)| ts <= after);
                        if let Some(&(_, dest)) = list.get(n) {
                            self.stream_waits.insert(dest, src);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// No slice (a device slice without a launch link).
const NO_SLICE: SliceId = SliceId::MAX;
/// No node (a slice outside the window's graph).
const NO_NODE: u32 = u32::MAX;

/// Per-slice node ids of one window's graph, in arrays over the Timeline's slices made once and
/// cleared after each window (the slices a window set are few next to all of them).
#[derive(Default)]
struct Scratch {
    start: Vec<u32>,
    device: Vec<(u32, u32)>,
    touched: Vec<SliceId>,
}

impl Scratch {
    fn reset(&mut self, slices: usize) {
        if self.start.len() != slices {
            self.start = vec![NO_NODE; slices];
            self.device = vec![(NO_NODE, NO_NODE); slices];
            self.touched.clear();
        }
        for &i in &self.touched {
            self.start[i as usize] = NO_NODE;
            self.device[i as usize] = (NO_NODE, NO_NODE);
        }
        self.touched.clear();
    }

    fn set_start(&mut self, slice: SliceId, node: u32) {
        if let Some(n) = self.start.get_mut(slice as usize) {
            *n = node;
            self.touched.push(slice);
        }
    }

    fn start_of(&self, slice: SliceId) -> Option<u32> {
        self.start
            .get(slice as usize)
            .copied()
            .filter(|&n| n != NO_NODE)
    }

    fn set_device(&mut self, slice: SliceId, start: u32, end: u32) {
        if let Some(n) = self.device.get_mut(slice as usize) {
            *n = (start, end);
            self.touched.push(slice);
        }
    }

    fn device_of(&self, slice: SliceId) -> Option<(u32, u32)> {
        self.device
            .get(slice as usize)
            .copied()
            .filter(|&(s, _)| s != NO_NODE)
    }
}

/// A time window of one clock: a step, or a whole input.
struct Window {
    clock: u16,
    start: i64,
    end: i64,
    /// Where the step's host range ends: past it, the window holds the device work the step
    /// launched, and the path may end in it.
    host_end: i64,
    /// The step's thread; `None` for a whole input (the thread with the most host work leads).
    main: Option<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum EdgeKind {
    /// An event's own span (or the span between nested nodes of it).
    Span(SliceId),
    /// Between top-level ops on the main thread, or a hand-over between threads.
    HostGap,
    /// Launch call start → device work start.
    Launch(SliceId),
    /// Previous device work → this device work on one stream.
    KernelGap(SliceId),
    /// Device work → the end of the blocking call that waited for it.
    SyncWake(SliceId),
    /// Device work on another stream → the work that waited for it.
    StreamWait(SliceId),
}

struct Edge {
    from: u32,
    to: u32,
    weight: i64,
    kind: EdgeKind,
}

struct Graph {
    ts: Vec<i64>,
    track: Vec<u32>,
    edges: Vec<Edge>,
    /// Whether each node has an edge out of it yet.
    has_out: Vec<bool>,
    /// No edge went into a node after an edge left it: the edges are in a topological order
    /// as appended (a window of one host thread), and the longest path needs one pass.
    in_order: bool,
}

impl Default for Graph {
    fn default() -> Self {
        Self {
            ts: Vec::new(),
            track: Vec::new(),
            edges: Vec::new(),
            has_out: Vec::new(),
            in_order: true,
        }
    }
}

impl Graph {
    fn node(&mut self, ts: i64, track: u32) -> u32 {
        self.ts.push(ts);
        self.track.push(track);
        self.has_out.push(false);
        (self.ts.len() - 1) as u32
    }

    fn edge(&mut self, from: u32, to: u32, weight: i64, kind: EdgeKind) {
        self.push(Edge {
            from,
            to,
            weight: weight.max(0),
            kind,
        });
    }

    fn push(&mut self, e: Edge) {
        if self.has_out[e.to as usize] {
            self.in_order = false;
        }
        self.has_out[e.from as usize] = true;
        self.edges.push(e);
    }
}

/// One host thread's chain in a window.
struct HostChain {
    track: u32,
    /// Where the thread's top-level gaps open (`true`: a top-level op ended) and close
    /// (`false`: one starts), as (time, node, opens), in time order.
    gap_points: Vec<(i64, u32, bool)>,
    /// Node ids of the runtime and driver calls (launches, blocking calls): (slice, start
    /// node, end node).
    nodes: Vec<(SliceId, u32, u32)>,
    /// Start and end nodes of the top-level ones.
    top: Vec<(u32, u32)>,
    first: Option<u32>,
    last: Option<u32>,
}

impl Window {
    fn path(&self, t: &Timeline, shared: &Shared) -> Option<CriticalPath> {
        let mut g = Graph::default();
        let host_tracks: Vec<u32> = t
            .tracks
            .iter()
            .enumerate()
            .filter(|(_, tr)| {
                tr.kind == TrackKind::HostThread && t.step_source(tr.source) == self.clock
            })
            .map(|(i, _)| i as u32)
            .collect();
        // Without a step, the thread with the most host work in the window leads.
        let main_track = match self.main {
            Some(m) => m,
            None => *host_tracks.iter().max_by_key(|&&tr| {
                let range = t.track_slices_between(&t.tracks[tr as usize], self.start, self.end);
                range
                    .filter(|&i| t.slice_class(i).is_host_work())
                    .map(|i| t.slices.dur[i as usize])
                    .sum::<i64>()
            })?,
        };
        if self.main.is_some() && !self.has_other_work(t, main_track) {
            return Some(self.single_thread_path(t, shared, main_track));
        }
        // The window's start on the main thread: its chain starts from it.
        let source = g.node(self.start, main_track);
        let mut chains: Vec<HostChain> = host_tracks
            .iter()
            .map(|&tr| {
                let from = (tr == main_track).then_some(source);
                self.host_chain(t, shared, &mut g, tr, from)
            })
            .collect();
        let main = chains.iter().position(|c| c.track == main_track)?;
        if self.main.is_none() && chains[main].first.is_none() {
            return None;
        }
        // … and its end.
        let sink = g.node(self.end, main_track);
        {
            let chain = &mut chains[main];
            match chain.last {
                Some(last) => {
                    let l_ts = g.ts[last as usize];
                    g.edge(last, sink, self.end - l_ts, EdgeKind::HostGap);
                }
                None => g.edge(source, sink, self.end - self.start, EdgeKind::HostGap),
            }
            chain.gap_points.insert(0, (self.start, source, true));
            chain.gap_points.push((self.end, sink, false));
        }
        // Other threads hand over to and back from the main thread where it is between ops.
        let main_gaps = chains[main].gap_points.clone();
        for (ci, chain) in chains.iter().enumerate() {
            if ci == main {
                continue;
            }
            for &(s_node, e_node) in &chain.top {
                let (s_ts, e_ts) = (g.ts[s_node as usize], g.ts[e_node as usize]);
                // Only from inside a main-thread gap: while the main thread runs an op, that op
                // is what the step is doing.
                let before = main_gaps.partition_point(|&(ts, _, _)| ts <= s_ts);
                if let Some(&(ts, node, true)) =
                    before.checked_sub(1).and_then(|i| main_gaps.get(i))
                {
                    g.edge(node, s_node, s_ts - ts, EdgeKind::HostGap);
                }
                let after = main_gaps.partition_point(|&(ts, _, _)| ts < e_ts);
                if let Some(&(ts, node, false)) = main_gaps.get(after) {
                    g.edge(e_node, node, ts - e_ts, EdgeKind::HostGap);
                }
            }
        }
        // Start nodes of the host slices, for launch edges; blocking calls' end nodes. The
        // per-slice tables are the last window's: clear what it set.
        let mut scratch = shared.scratch.borrow_mut();
        let sc = &mut *scratch;
        sc.reset(t.slices.len());
        let mut blocking: Vec<(SliceId, u32)> = Vec::new();
        let mut launches: Vec<(i64, u32)> = Vec::new();
        for chain in &chains {
            for &(slice, s, e) in &chain.nodes {
                sc.set_start(slice, s);
                let flags = shared.flags(t, slice);
                if flags & BLOCKING_FLAG != 0 {
                    blocking.push((slice, e));
                }
                if flags & LAUNCH_FLAG != 0 && t.slice_class(slice) == CategoryClass::Runtime {
                    launches.push((g.ts[s as usize], s));
                }
            }
        }
        launches.sort_unstable();
        // Device work.
        let mut device_ends: Vec<(i64, u32, SliceId)> = Vec::new();
        for (ti, track) in t.tracks.iter().enumerate() {
            let TrackKind::DeviceEngine { class, .. } = &track.kind else {
                continue;
            };
            if !class.does_work() || t.step_source(track.source) != self.clock {
                continue;
            }
            // Work that starts in the window, and work already running at its start.
            let range = t.track_slices_between(track, i64::MIN, self.end);
            let first_in = t.track_slices_between(track, self.start, self.end).start;
            let mut lo = first_in;
            while lo > range.start && t.slices.end(lo - 1) > self.start {
                lo -= 1;
            }
            let mut prev: Option<(u32, i64)> = None;
            for i in lo..range.end {
                if !t.slice_class(i).is_device_work() {
                    continue;
                }
                let (a, b) = (t.slices.start[i as usize], t.slices.end(i));
                if b <= self.start && a < self.start {
                    continue;
                }
                let (a, b) = (a.max(self.start), b.min(self.end));
                let s = g.node(a, ti as u32);
                let e = g.node(b.max(a), ti as u32);
                g.edge(s, e, b - a, EdgeKind::Span(i));
                sc.set_device(i, s, e);
                device_ends.push((b.max(a), e, i));
                let linked = shared.launch_of(i);
                let launch =
                    linked.and_then(|r| sc.start_of(r).map(|n| (n, t.slices.start[r as usize], r)));
                let launch = launch.or_else(|| {
                    // No launch link (Gaudi graph nodes, older traces): the latest launch call
                    // before the work, when the trace has no link for it at all.
                    if linked.is_some() {
                        return None;
                    }
                    let n = launches.partition_point(|&(ts, _)| ts <= a);
                    n.checked_sub(1).map(|k| {
                        let (ts, node) = launches[k];
                        (node, ts, SliceId::MAX)
                    })
                });
                match (prev, launch) {
                    // Queued behind work that was still running when the launch began.
                    (Some((p_end, p_ts)), Some((_, r_ts, _))) if p_ts >= r_ts => {
                        g.edge(p_end, s, a - p_ts, EdgeKind::KernelGap(i));
                    }
                    (_, Some((r_node, r_ts, _))) => {
                        g.edge(r_node, s, a - r_ts, EdgeKind::Launch(i));
                    }
                    (Some((p_end, p_ts)), None) => {
                        g.edge(p_end, s, a - p_ts, EdgeKind::KernelGap(i));
                    }
                    (None, None) => {
                        g.edge(source, s, a - self.start, EdgeKind::KernelGap(i));
                    }
                }
                prev = Some((e, b.max(a)));
            }
        }
        // Cross-stream waits.
        for (&dest, &src) in &shared.stream_waits {
            if let (Some((d_s, _)), Some((_, s_e))) = (sc.device_of(dest), sc.device_of(src))
                && g.ts[s_e as usize] <= g.ts[d_s as usize]
            {
                g.push(Edge {
                    from: s_e,
                    to: d_s,
                    weight: 0,
                    kind: EdgeKind::StreamWait(dest),
                });
            }
        }
        // Blocking calls wait for device work.
        device_ends.sort_unstable();
        for (call, end_node) in blocking {
            let call_end = g.ts[end_node as usize];
            let call_start = t.slices.start[call as usize];
            let waited: Vec<SliceId> = if shared.synced.contains(&call) {
                shared.waits_for.get(&call).cloned().unwrap_or_default()
            } else {
                // The device work that finished last while the call waited.
                let n = device_ends.partition_point(|&(ts, _, _)| ts <= call_end);
                n.checked_sub(1)
                    .map(|k| device_ends[k])
                    .filter(|&(ts, _, _)| ts >= call_start)
                    .map(|(_, _, slice)| vec![slice])
                    .unwrap_or_default()
            };
            for w in waited {
                if let Some((_, e)) = sc.device_of(w)
                    && g.ts[e as usize] <= call_end
                {
                    g.push(Edge {
                        from: e,
                        to: end_node,
                        weight: 0,
                        kind: EdgeKind::SyncWake(call),
                    });
                }
            }
        }
        // Without steps, and in a step that lasts until its device work is done, the path may
        // end in device work still running after the host is done.
        if self.main.is_none() || self.end > self.host_end {
            let host_done = chains[main].last.map_or(self.start, |n| g.ts[n as usize]);
            for &(ts, node, slice) in device_ends.iter().filter(|(ts, _, _)| *ts > host_done) {
                g.edge(node, sink, self.end - ts, EdgeKind::KernelGap(slice));
            }
        }
        let path = longest_path(&g, source, sink)?;
        let edges = path.iter().map(|&ei| {
            let e = &g.edges[ei];
            (
                g.ts[e.from as usize],
                g.ts[e.to as usize],
                g.track[e.to as usize],
                e.kind,
            )
        });
        Some(self.summarize(t, shared, main_track, edges))
    }

    /// The path of a window with one host thread at work and no device work: that thread's
    /// chain itself (the graph is that one chain), read in one sweep over its ops.
    fn single_thread_path(&self, t: &Timeline, shared: &Shared, track: u32) -> CriticalPath {
        let tr = &t.tracks[track as usize];
        let mut edges: Vec<(i64, i64, u32, EdgeKind)> = Vec::new();
        let mut at = self.start;
        // Open ops: (slice, end).
        let mut stack: Vec<(SliceId, i64)> = Vec::new();
        let mut emit = |to: i64, stack: &[(SliceId, i64)], at: &mut i64| {
            let kind = stack
                .last()
                .map_or(EdgeKind::HostGap, |&(open, _)| EdgeKind::Span(open));
            edges.push((*at, to, track, kind));
            *at = to;
        };
        for i in t.track_slices_between(tr, self.start, self.end) {
            if t.slices.dur[i as usize] <= 0 || !t.slice_class(i).is_host_work() {
                continue;
            }
            let start = t.slices.start[i as usize];
            while let Some(&(_, end)) = stack.last() {
                if end > start {
                    break;
                }
                emit(end, &stack, &mut at);
                stack.pop();
            }
            emit(start, &stack, &mut at);
            let end = t.slices.end(i).min(self.end);
            let end = stack.last().map_or(end, |p| end.min(p.1));
            stack.push((i, end.max(start)));
        }
        while let Some(&(_, end)) = stack.last() {
            emit(end, &stack, &mut at);
            stack.pop();
        }
        emit(self.end, &stack, &mut at);
        self.summarize(t, shared, track, edges.into_iter())
    }

    /// Whether the window has work on any host thread but `main`, or on the device.
    fn has_other_work(&self, t: &Timeline, main: u32) -> bool {
        t.tracks.iter().enumerate().any(|(i, tr)| {
            if i as u32 == main || t.step_source(tr.source) != self.clock {
                return false;
            }
            let wanted = |c: CategoryClass| match tr.kind {
                TrackKind::HostThread => c.is_host_work(),
                TrackKind::DeviceEngine { .. } => c.is_device_work(),
                _ => false,
            };
            if !matches!(
                tr.kind,
                TrackKind::HostThread | TrackKind::DeviceEngine { .. }
            ) {
                return false;
            }
            // Work that starts in the window, or device work running at its start.
            t.track_slices_between(tr, self.start, self.end)
                .any(|j| wanted(t.slice_class(j)))
                || (tr.kind.is_device()
                    && t.track_slices_between(tr, i64::MIN, self.start)
                        .rev()
                        .take(64)
                        .any(|j| wanted(t.slice_class(j)) && t.slices.end(j) > self.start))
        })
    }

    /// Builds the nodes and nesting edges of one host thread's ops in the window.
    fn host_chain(
        &self,
        t: &Timeline,
        shared: &Shared,
        g: &mut Graph,
        track: u32,
        source: Option<u32>,
    ) -> HostChain {
        // The main thread's chain starts at the window's start (`source`).
        let is_main = source.is_some();
        let tr = &t.tracks[track as usize];
        let mut chain = HostChain {
            track,
            gap_points: Vec::new(),
            nodes: Vec::new(),
            top: Vec::new(),
            first: None,
            last: None,
        };
        // Open slices: (slice, end, start node).
        let mut stack: Vec<(SliceId, i64, u32)> = Vec::new();
        let mut last: Option<u32> = source;
        let close = |g: &mut Graph,
                     chain: &mut HostChain,
                     last: &mut Option<u32>,
                     (slice, end, s_node): (SliceId, i64, u32),
                     top_level: bool| {
            let e_node = g.node(end, track);
            let from = last.unwrap_or(s_node);
            let blocking = shared.flags(t, slice) & BLOCKING_FLAG != 0;
            let w = if blocking {
                0
            } else {
                end - g.ts[from as usize]
            };
            g.edge(from, e_node, w, EdgeKind::Span(slice));
            if t.slice_class(slice) != CategoryClass::CpuOp {
                chain.nodes.push((slice, s_node, e_node));
            }
            if top_level {
                chain.gap_points.push((end, e_node, true));
                chain.top.push((s_node, e_node));
            }
            *last = Some(e_node);
        };
        for i in t.track_slices_between(tr, self.start, self.end) {
            let dur = t.slices.dur[i as usize];
            if dur <= 0 || !t.slice_class(i).is_host_work() {
                continue;
            }
            let start = t.slices.start[i as usize];
            let end = t.slices.end(i).min(self.end);
            while let Some(&top) = stack.last() {
                if top.1 > start {
                    break;
                }
                stack.pop();
                close(g, &mut chain, &mut last, top, stack.is_empty());
            }
            let s_node = g.node(start, track);
            match last {
                Some(prev) if !stack.is_empty() => {
                    let w = start - g.ts[prev as usize];
                    let parent = stack.last().map_or(i, |p| p.0);
                    g.edge(prev, s_node, w, EdgeKind::Span(parent));
                }
                Some(prev) => {
                    // Between top-level ops: the main thread's time counts (Python, data
                    // loading); another thread's idle time is no work of the step's.
                    let w = if is_main {
                        start - g.ts[prev as usize]
                    } else {
                        0
                    };
                    g.edge(prev, s_node, w, EdgeKind::HostGap);
                }
                None => {}
            }
            if stack.is_empty() {
                chain.gap_points.push((start, s_node, false));
            }
            if chain.first.is_none() {
                chain.first = Some(s_node);
            }
            last = Some(s_node);
            // A child that outlives its parent (clock rounding) is closed with it.
            let end = stack.last().map_or(end, |p| end.min(p.1));
            stack.push((i, end.max(start), s_node));
        }
        while let Some(top) = stack.pop() {
            close(g, &mut chain, &mut last, top, stack.is_empty());
        }
        chain.last = last;
        // gap_points must be in time order for the hand-over search.
        chain.gap_points.sort_by_key(|&(ts, n, _)| (ts, n));
        chain
    }

    /// The path's figures from its edges in order: (from, to, track of the later end, kind).
    fn summarize(
        &self,
        t: &Timeline,
        shared: &Shared,
        main_track: u32,
        edges: impl Iterator<Item = (i64, i64, u32, EdgeKind)>,
    ) -> CriticalPath {
        // Data loader and compile ranges of the main thread classify host stretches: those in
        // the window, and the ones around its first slice that began before it; compiles on
        // any host thread of the clock count too.
        let mut loading = Vec::new();
        let mut compiling = Vec::new();
        let tr = &t.tracks[main_track as usize];
        let inside = t.track_slices_between(tr, self.start, self.end);
        let around = inside
            .clone()
            .next()
            .or_else(|| t.slice_at(main_track, self.start))
            .map(|first| {
                std::iter::successors(Some(first), |&c| {
                    let p = t.slices.parent[c as usize];
                    (p != steplens_ingest::model::NO_PARENT).then_some(p)
                })
                .filter(|&a| t.slices.start[a as usize] < self.start)
                .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for i in inside.chain(around) {
            let flags = shared.flags(t, i);
            let range = (t.slices.start[i as usize], t.slices.end(i));
            if flags & DATALOADER_FLAG != 0 {
                loading.push(range);
            }
            if flags & COMPILE_FLAG != 0 {
                compiling.push(range);
            }
        }
        compiling.extend(
            shared
                .compiles
                .get(&self.clock)
                .into_iter()
                .flatten()
                .filter(|&&(a, b)| a < self.end && b > self.start),
        );
        let mut loading = Cursor::new(loading);
        let mut compiling = Cursor::new(compiling);
        // Stretches come in time order: the cursors only move forward.
        let mut host_bound = |a: i64, b: i64, default: Bound| -> Bound {
            let mid = a + (b - a) / 2;
            if compiling.covers(mid) {
                Bound::Compile
            } else if loading.covers(mid) {
                Bound::DataLoading
            } else {
                default
            }
        };
        let device_bound = |slice: SliceId| -> Bound {
            let comm = crate::ranks::collective_of(t.slice_name(slice)).is_some()
                || t.slice_track(slice).is_some_and(|tr| {
                    matches!(
                        tr.kind,
                        TrackKind::DeviceEngine {
                            class: steplens_ingest::model::EngineClass::Nic,
                            ..
                        }
                    )
                });
            if comm {
                Bound::Communication
            } else {
                Bound::DeviceCompute
            }
        };
        // The fine stretches, one per path edge (no text yet).
        let mut fine: Vec<Stretch> = Vec::new();
        for (a, b, track, kind) in edges {
            if b <= a {
                continue;
            }
            let (what, bound) = match kind {
                EdgeKind::Span(slice) => {
                    let on_device = t.slice_track(slice).is_some_and(|tr| tr.kind.is_device());
                    let flags = shared.flags(t, slice);
                    let bound = if on_device {
                        device_bound(slice)
                    } else if flags & BLOCKING_FLAG != 0 {
                        Bound::SyncWait
                    } else if flags & COMPILE_FLAG != 0 {
                        Bound::Compile
                    } else if t.slice_class(slice) == CategoryClass::CpuOp {
                        host_bound(a, b, Bound::HostCompute)
                    } else {
                        host_bound(a, b, Bound::LaunchOverhead)
                    };
                    (What::Event(slice), bound)
                }
                EdgeKind::HostGap => (What::BetweenOps, host_bound(a, b, Bound::HostCompute)),
                // A launch that waits for its graph to compile waits for the compile.
                EdgeKind::Launch(k) => (What::LaunchOf(k), host_bound(a, b, Bound::LaunchOverhead)),
                EdgeKind::KernelGap(k) | EdgeKind::StreamWait(k) => {
                    (What::GapBefore(k), Bound::KernelGap)
                }
                EdgeKind::SyncWake(call) => (What::Event(call), Bound::SyncWait),
            };
            match fine.last_mut() {
                Some(prev) if prev.what == what && prev.bound == bound && prev.end == a => {
                    prev.end = b;
                }
                _ => fine.push(Stretch {
                    start: a,
                    end: b,
                    track,
                    what,
                    bound,
                }),
            }
        }
        if let Some(waits) = shared.rank_waits.get(&self.clock) {
            fine = waiting_for_last_rank(fine, waits);
        }
        let total_ns = fine.iter().map(|s| s.end - s.start).sum();
        let mut per_bound = [0i64; Bound::ALL.len()];
        // Per (what, bound), packed in one word: events of one name count together.
        let mut by_name: FxHashMap<u64, (i64, u64)> = FxHashMap::default();
        let mut bound_runs: Vec<(i64, i64, Bound)> = Vec::new();
        for s in &fine {
            let len = s.end - s.start;
            per_bound[s.bound as usize] += len;
            let key = match s.what {
                What::Event(slice) => What::Name(t.slices.name[slice as usize]),
                other => other,
            };
            let entry = by_name.entry(key.pack(s.bound)).or_insert((0, 0));
            entry.0 += len;
            entry.1 += 1;
            match bound_runs.last_mut() {
                Some(run) if run.2 == s.bound && run.1 == s.start => run.1 = s.end,
                _ => bound_runs.push((s.start, s.end, s.bound)),
            }
        }
        let by_bound: BTreeMap<Bound, i64> = Bound::ALL
            .iter()
            .filter(|&&b| per_bound[b as usize] > 0)
            .map(|&b| (b, per_bound[b as usize]))
            .collect();
        let by_name = by_name
            .into_iter()
            .map(|(key, figures)| (What::unpack(key), figures));
        let mut top: Vec<((What, Bound), (i64, u64))> = by_name.collect();
        top.sort_by(|a, b| b.1.0.cmp(&a.1.0).then_with(|| a.0.cmp(&b.0)));
        top.truncate(TOP_CONTRIBUTORS);
        let top = top
            .into_iter()
            .map(|((what, bound), (ns, count))| Contributor {
                name: what.text(t),
                bound,
                ns,
                count,
            })
            .collect();
        let (slices, slices_total) = coarse_slices(t, &fine);
        CriticalPath {
            total_ns,
            by_bound,
            top,
            slices,
            slices_total,
            bound_runs,
        }
    }
}

/// Whether times given in increasing order fall in a set of intervals, in one pass.
struct Cursor {
    ranges: Vec<(i64, i64)>,
    next: usize,
}

impl Cursor {
    fn new(ranges: Vec<(i64, i64)>) -> Self {
        let ranges = IntervalSet::from_ranges(ranges).iter().collect();
        Self { ranges, next: 0 }
    }

    fn covers(&mut self, at: i64) -> bool {
        while self.ranges.get(self.next).is_some_and(|r| r.1 <= at) {
            self.next += 1;
        }
        self.ranges.get(self.next).is_some_and(|r| r.0 <= at)
    }
}

/// What a stretch of the path is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum What {
    /// An event's own time.
    Event(SliceId),
    /// Events of one name (for `top`).
    Name(u32),
    /// The main thread between top-level ops.
    BetweenOps,
    /// From a launch call to the work it launched.
    LaunchOf(SliceId),
    /// The device idle before this work.
    GapBefore(SliceId),
    /// Waiting at a collective for the last rank to arrive.
    LastRank,
}

impl What {
    /// `(self, bound)` in one word: 3 bits of kind, 3 of bound, the id above them.
    fn pack(self, bound: Bound) -> u64 {
        let (kind, id) = match self {
            Self::Event(s) => (0, s),
            Self::Name(n) => (1, n),
            Self::BetweenOps => (2, 0),
            Self::LaunchOf(k) => (3, k),
            Self::GapBefore(k) => (4, k),
            Self::LastRank => (5, 0),
        };
        (u64::from(id) << 6) | ((bound as u64) << 3) | kind
    }

    /// The inverse of [`Self::pack`].
    fn unpack(key: u64) -> (Self, Bound) {
        let id = (key >> 6) as u32;
        let bound = Bound::ALL[((key >> 3) & 7) as usize];
        let what = match key & 7 {
            0 => Self::Event(id),
            1 => Self::Name(id),
            2 => Self::BetweenOps,
            3 => Self::LaunchOf(id),
            4 => Self::GapBefore(id),
            _ => Self::LastRank,
        };
        (what, bound)
    }

    fn text(self, t: &Timeline) -> String {
        match self {
            Self::Event(s) => t.slice_name(s).to_owned(),
            Self::Name(n) => t.strings.get(n).to_owned(),
            Self::BetweenOps => "between ops".to_owned(),
            Self::LaunchOf(k) => format!("launch → {}", t.slice_name(k)),
            Self::GapBefore(k) => format!("gap before {}", t.slice_name(k)),
            Self::LastRank => "waiting for the last rank at a collective".to_owned(),
        }
    }
}

/// One edge's stretch of the path.
#[derive(Clone, Copy)]
struct Stretch {
    start: i64,
    end: i64,
    track: u32,
    what: What,
    bound: Bound,
}

/// The stretches with the time this rank waited at a collective for the last rank (`waits`,
/// sorted, disjoint) relabelled as a sync wait: the collective could not start sooner. Device
/// compute keeps its label (another stream's work runs on).
fn waiting_for_last_rank(fine: Vec<Stretch>, waits: &[(i64, i64)]) -> Vec<Stretch> {
    let mut out = Vec::with_capacity(fine.len());
    let mut next = 0;
    for s in fine {
        if s.bound == Bound::DeviceCompute {
            out.push(s);
            continue;
        }
        while waits.get(next).is_some_and(|w| w.1 <= s.start) {
            next += 1;
        }
        let mut at = s.start;
        let mut k = next;
        while let Some(&(a, b)) = waits.get(k).filter(|w| w.0 < s.end) {
            if a > at {
                out.push(Stretch {
                    start: at,
                    end: a,
                    ..s
                });
            }
            let (from, to) = (a.max(at), b.min(s.end));
            if to > from {
                out.push(Stretch {
                    start: from,
                    end: to,
                    what: What::LastRank,
                    bound: Bound::SyncWait,
                    ..s
                });
            }
            at = to.max(at);
            if b > s.end {
                break;
            }
            k += 1;
        }
        if s.end > at {
            out.push(Stretch { start: at, ..s });
        }
    }
    out
}

/// Most stretches a path lists in `slices`.
pub const MAX_PATH_SLICES: usize = 1000;

/// The path as people and tools read it: host stretches inside one top-level op on one thread
/// merge into that op (named by it, bounded by what holds most of its time), device work and
/// the edges between events stay as they are. A path of more than [`MAX_PATH_SLICES`] keeps
/// its longest stretches, in time order, and says how many it had.
fn coarse_slices(t: &Timeline, fine: &[Stretch]) -> (Vec<PathSlice>, Option<u64>) {
    // The outermost host op holding `slice` on its thread.
    let top_level = |slice: SliceId| -> SliceId {
        let mut top = slice;
        let mut p = t.slices.parent[slice as usize];
        while p != steplens_ingest::model::NO_PARENT && t.slice_class(p).is_host_work() {
            top = p;
            p = t.slices.parent[p as usize];
        }
        top
    };
    struct Coarse {
        start: i64,
        end: i64,
        track: u32,
        what: What,
        parts: Vec<(Bound, i64)>,
    }
    let mut out: Vec<Coarse> = Vec::new();
    // The last top-level op found: top-level ops on a thread do not overlap, so a slice on its
    // thread inside its range is under it.
    let mut last_top: Option<(SliceId, u32, i64, i64)> = None;
    for s in fine {
        let what = match s.what {
            What::Event(slice)
                if s.bound != Bound::SyncWait
                    && t.slice_track(slice).is_some_and(|tr| !tr.kind.is_device()) =>
            {
                let (start, end) = (t.slices.start[slice as usize], t.slices.end(slice));
                let track = t.slices.track[slice as usize];
                let top = match last_top {
                    Some((top, tr, a, b)) if tr == track && a <= start && end <= b => top,
                    _ => {
                        let top = top_level(slice);
                        last_top =
                            Some((top, track, t.slices.start[top as usize], t.slices.end(top)));
                        top
                    }
                };
                What::Event(top)
            }
            other => other,
        };
        let len = s.end - s.start;
        match out.last_mut() {
            Some(c) if c.what == what && c.track == s.track && c.end == s.start => {
                c.end = s.end;
                match c.parts.iter_mut().find(|(b, _)| *b == s.bound) {
                    Some(part) => part.1 += len,
                    None => c.parts.push((s.bound, len)),
                }
            }
            _ => out.push(Coarse {
                start: s.start,
                end: s.end,
                track: s.track,
                what,
                parts: vec![(s.bound, len)],
            }),
        }
    }
    let total = out.len();
    if total > MAX_PATH_SLICES {
        let mut order: Vec<usize> = (0..total).collect();
        order.select_nth_unstable_by_key(MAX_PATH_SLICES - 1, |&i| {
            (std::cmp::Reverse(out[i].end - out[i].start), i)
        });
        let mut keep = vec![false; total];
        for &i in &order[..MAX_PATH_SLICES] {
            keep[i] = true;
        }
        let mut k = keep.iter();
        out.retain(|_| k.next().copied().unwrap_or(false));
    }
    let slices = out
        .into_iter()
        .map(|c| PathSlice {
            name: c.what.text(t),
            track: t.tracks.get(c.track as usize).map(|tr| tr.name.clone()),
            start_ns: c.start,
            dur_ns: c.end - c.start,
            bound: c
                .parts
                .iter()
                .max_by_key(|(_, ns)| *ns)
                .map_or(Bound::HostCompute, |(b, _)| *b),
            slice: match c.what {
                What::Event(s) => Some(s),
                _ => None,
            },
        })
        .collect();
    (slices, (total > MAX_PATH_SLICES).then_some(total as u64))
}

/// The longest path from `source` to `sink`, as edge indexes in path order; ties go to the path
/// with more time in events (ops, kernels) than in gaps.
fn longest_path(g: &Graph, source: u32, sink: u32) -> Option<Vec<usize>> {
    let n = g.ts.len();
    // (length, time in events); unreachable nodes stay at None.
    let mut best: Vec<Option<(i64, i64)>> = vec![None; n];
    let mut pred: Vec<u32> = vec![u32::MAX; n];
    best[source as usize] = Some((0, 0));
    let mut relax = |ei: usize, e: &Edge, best: &mut Vec<Option<(i64, i64)>>| {
        if let Some((len, busy)) = best[e.from as usize] {
            let work = match e.kind {
                EdgeKind::Span(_) => e.weight,
                _ => 0,
            };
            let cand = (len + e.weight, busy + work);
            if best[e.to as usize].is_none_or(|cur| cand > cur) {
                best[e.to as usize] = Some(cand);
                pred[e.to as usize] = ei as u32;
            }
        }
    };
    if g.in_order {
        // Every edge into a node came before the edges out of it: one pass in that order.
        for (ei, e) in g.edges.iter().enumerate() {
            relax(ei, e, &mut best);
        }
    } else {
        for ei in topological_edges(g) {
            relax(ei as usize, &g.edges[ei as usize], &mut best);
        }
    }
    best[sink as usize]?;
    let mut path = Vec::new();
    let mut v = sink as usize;
    while v != source as usize {
        let ei = pred[v];
        if ei == u32::MAX {
            return None;
        }
        path.push(ei as usize);
        v = g.edges[ei as usize].from as usize;
    }
    path.reverse();
    Some(path)
}

/// The edges in an order where every edge into a node comes before the edges out of it
/// (Kahn's order of their sources). The graph is acyclic by construction (edges never go back
/// in time, and same-time edges follow creation); a cycle would only leave its edges out.
fn topological_edges(g: &Graph) -> Vec<u32> {
    let n = g.ts.len();
    let mut indegree = vec![0u32; n];
    let mut out_start = vec![0u32; n + 1];
    for e in &g.edges {
        indegree[e.to as usize] += 1;
        out_start[e.from as usize + 1] += 1;
    }
    for i in 0..n {
        out_start[i + 1] += out_start[i];
    }
    let mut fill = out_start.clone();
    let mut out = vec![0u32; g.edges.len()];
    for (ei, e) in g.edges.iter().enumerate() {
        out[fill[e.from as usize] as usize] = ei as u32;
        fill[e.from as usize] += 1;
    }
    let mut order = Vec::with_capacity(g.edges.len());
    let mut queue: Vec<u32> = (0..n as u32)
        .filter(|&v| indegree[v as usize] == 0)
        .collect();
    let mut head = 0;
    while head < queue.len() {
        let v = queue[head] as usize;
        head += 1;
        for &ei in &out[out_start[v] as usize..out_start[v + 1] as usize] {
            order.push(ei);
            let to = g.edges[ei as usize].to as usize;
            indegree[to] -= 1;
            if indegree[to] == 0 {
                queue.push(to as u32);
            }
        }
    }
    order
}
