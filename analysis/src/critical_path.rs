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
//!   waiting stream (weight 0).
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
use crate::steps::DATALOADER_PREFIX;

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
    /// Host time inside graph compiles (torch.compile, `synGraphCompile`).
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
    /// The path, in time order.
    pub slices: Vec<PathSlice>,
}

impl CriticalPath {
    /// Time on the path of the bounds `keep` accepts inside `ranges` (sorted, disjoint), ns.
    #[must_use]
    pub fn time_in(&self, ranges: &IntervalSet, keep: impl Fn(Bound) -> bool) -> i64 {
        self.slices
            .iter()
            .filter(|s| keep(s.bound))
            .map(|s| ranges.covered(s.start_ns, s.start_ns + s.dur_ns))
            .sum()
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
    let shared = Shared::new(timeline);
    let steps = timeline
        .steps
        .iter()
        .map(|step| {
            let clock = timeline.step_source(step.source);
            Window {
                clock,
                start: step.start,
                end: step.end(),
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
    /// Device slice → the runtime call that launched it.
    launch_of: FxHashMap<SliceId, SliceId>,
    /// Per interned name: 1 blocking call, 2 compile span, 4 data loader range, 8 launch call.
    name_flags: Vec<u8>,
    /// Blocking runtime call → the device work its `cuda_sync` event says it waited for.
    waits_for: FxHashMap<SliceId, Vec<SliceId>>,
    /// Device work → the device work a `cudaStreamWaitEvent` made it wait for.
    stream_waits: FxHashMap<SliceId, SliceId>,
    /// Blocking calls whose `cuda_sync` event was read (they use it, not the fallback).
    synced: rustc_hash::FxHashSet<SliceId>,
}

const BLOCKING_FLAG: u8 = 1;
const COMPILE_FLAG: u8 = 2;
const DATALOADER_FLAG: u8 = 4;
const LAUNCH_FLAG: u8 = 8;

impl Shared {
    fn new(t: &Timeline) -> Self {
        let name_flags: Vec<u8> = t
            .strings
            .iter()
            .map(|(_, name)| {
                let mut f = 0;
                if BLOCKING.contains(&name) {
                    f |= BLOCKING_FLAG;
                }
                if name == "synGraphCompile"
                    || crate::detect::is_compile_span(name)
                    || name.starts_with("Torch-Compiled Region")
                {
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
        let mut launch_of = FxHashMap::default();
        for flow in &t.flows {
            if t.slice_class(flow.from).is_host_work() && t.slice_class(flow.to).is_device_work() {
                launch_of.entry(flow.to).or_insert(flow.from);
            }
        }
        let mut shared = Self {
            launch_of,
            name_flags,
            waits_for: FxHashMap::default(),
            stream_waits: FxHashMap::default(),
            synced: rustc_hash::FxHashSet::default(),
        };
        shared.read_cuda_sync(t);
        shared
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
        let syncs: Vec<SliceId> = (0..t.slices.len() as SliceId)
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
        for (&work, &launch) in &self.launch_of {
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

/// A time window of one clock: a step, or a whole input.
struct Window {
    clock: u16,
    start: i64,
    end: i64,
    /// The step's thread; `None` for a whole input (the thread with the most host work leads).
    main: Option<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
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

#[derive(Default)]
struct Graph {
    ts: Vec<i64>,
    track: Vec<u32>,
    edges: Vec<Edge>,
}

impl Graph {
    fn node(&mut self, ts: i64, track: u32) -> u32 {
        self.ts.push(ts);
        self.track.push(track);
        (self.ts.len() - 1) as u32
    }

    fn edge(&mut self, from: u32, to: u32, weight: i64, kind: EdgeKind) {
        self.edges.push(Edge {
            from,
            to,
            weight: weight.max(0),
            kind,
        });
    }
}

/// One host thread's chain in a window.
struct HostChain {
    track: u32,
    /// Where the thread's top-level gaps open (`true`: a top-level op ended) and close
    /// (`false`: one starts), as (time, node, opens), in time order.
    gap_points: Vec<(i64, u32, bool)>,
    /// Node ids of each included slice: (slice, start node, end node).
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
        let mut chains: Vec<HostChain> = host_tracks
            .iter()
            .map(|&tr| self.host_chain(t, shared, &mut g, tr, tr == main_track))
            .collect();
        let main = chains.iter().position(|c| c.track == main_track)?;
        if self.main.is_none() && chains[main].first.is_none() {
            return None;
        }
        // The window's ends on the main thread.
        let source = g.node(self.start, chains[main].track);
        let sink = g.node(self.end, chains[main].track);
        {
            let chain = &mut chains[main];
            match (chain.first, chain.last) {
                (Some(first), Some(last)) => {
                    let (f_ts, l_ts) = (g.ts[first as usize], g.ts[last as usize]);
                    g.edge(source, first, f_ts - self.start, EdgeKind::HostGap);
                    g.edge(last, sink, self.end - l_ts, EdgeKind::HostGap);
                }
                _ => g.edge(source, sink, self.end - self.start, EdgeKind::HostGap),
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
        // Start nodes of the host slices, for launch edges; blocking calls' end nodes.
        let mut start_node: FxHashMap<SliceId, u32> = FxHashMap::default();
        let mut blocking: Vec<(SliceId, u32)> = Vec::new();
        let mut launches: Vec<(i64, u32)> = Vec::new();
        for chain in &chains {
            for &(slice, s, e) in &chain.nodes {
                start_node.insert(slice, s);
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
        let mut device_nodes: FxHashMap<SliceId, (u32, u32)> = FxHashMap::default();
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
                device_nodes.insert(i, (s, e));
                device_ends.push((b.max(a), e, i));
                let launch = shared.launch_of.get(&i).and_then(|r| {
                    start_node
                        .get(r)
                        .map(|&n| (n, t.slices.start[*r as usize], *r))
                });
                let launch = launch.or_else(|| {
                    // No launch link (Gaudi graph nodes, older traces): the latest launch call
                    // before the work, when the trace has no link for it at all.
                    if shared.launch_of.contains_key(&i) {
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
            if let (Some(&(d_s, _)), Some(&(_, s_e))) =
                (device_nodes.get(&dest), device_nodes.get(&src))
                && g.ts[s_e as usize] <= g.ts[d_s as usize]
            {
                g.edges.push(Edge {
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
                if let Some(&(_, e)) = device_nodes.get(&w)
                    && g.ts[e as usize] <= call_end
                {
                    g.edges.push(Edge {
                        from: e,
                        to: end_node,
                        weight: 0,
                        kind: EdgeKind::SyncWake(call),
                    });
                }
            }
        }
        // Without steps the path may end in device work still running after the host is done.
        if self.main.is_none() {
            let host_done = chains[main].last.map_or(self.start, |n| g.ts[n as usize]);
            for &(ts, node, slice) in device_ends.iter().filter(|(ts, _, _)| *ts > host_done) {
                g.edge(node, sink, self.end - ts, EdgeKind::KernelGap(slice));
            }
        }
        let path = longest_path(&g, source, sink)?;
        Some(self.summarize(t, shared, &g, &path, &chains[main]))
    }

    /// Builds the nodes and nesting edges of one host thread's ops in the window.
    fn host_chain(
        &self,
        t: &Timeline,
        shared: &Shared,
        g: &mut Graph,
        track: u32,
        is_main: bool,
    ) -> HostChain {
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
        let mut last: Option<u32> = None;
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
            chain.nodes.push((slice, s_node, e_node));
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

    fn summarize(
        &self,
        t: &Timeline,
        shared: &Shared,
        g: &Graph,
        path: &[usize],
        main: &HostChain,
    ) -> CriticalPath {
        // Data loader and compile ranges of the main thread classify host stretches.
        let mut loading = Vec::new();
        let mut compiling = Vec::new();
        let tr = &t.tracks[main.track as usize];
        for i in t.track_slices_between(tr, i64::MIN, self.end) {
            let flags = shared.flags(t, i);
            let range = (t.slices.start[i as usize], t.slices.end(i));
            if range.1 <= self.start {
                continue;
            }
            if flags & DATALOADER_FLAG != 0 {
                loading.push(range);
            }
            if flags & COMPILE_FLAG != 0 {
                compiling.push(range);
            }
        }
        let loading = IntervalSet::from_ranges(loading);
        let compiling = IntervalSet::from_ranges(compiling);
        let host_bound = |a: i64, b: i64, default: Bound| -> Bound {
            let mid = a + (b - a) / 2;
            if compiling.covered(mid, mid + 1) > 0 {
                Bound::Compile
            } else if loading.covered(mid, mid + 1) > 0 {
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
        let track_name = |track: u32| t.tracks.get(track as usize).map(|tr| tr.name.clone());
        let mut slices: Vec<PathSlice> = Vec::new();
        for &ei in path {
            let e = &g.edges[ei];
            let (a, b) = (g.ts[e.from as usize], g.ts[e.to as usize]);
            if b <= a {
                continue;
            }
            let (name, bound, slice, track) = match e.kind {
                EdgeKind::Span(s) => {
                    let on_device = t.slice_track(s).is_some_and(|tr| tr.kind.is_device());
                    let bound = if on_device {
                        device_bound(s)
                    } else if shared.flags(t, s) & BLOCKING_FLAG != 0 {
                        Bound::SyncWait
                    } else if shared.flags(t, s) & COMPILE_FLAG != 0 {
                        Bound::Compile
                    } else if t.slice_class(s) == CategoryClass::CpuOp {
                        host_bound(a, b, Bound::HostCompute)
                    } else {
                        host_bound(a, b, Bound::LaunchOverhead)
                    };
                    (
                        t.slice_name(s).to_owned(),
                        bound,
                        Some(s),
                        g.track[e.to as usize],
                    )
                }
                EdgeKind::HostGap => (
                    "between ops".to_owned(),
                    host_bound(a, b, Bound::HostCompute),
                    None,
                    g.track[e.to as usize],
                ),
                EdgeKind::Launch(k) => (
                    format!("launch → {}", t.slice_name(k)),
                    Bound::LaunchOverhead,
                    None,
                    g.track[e.to as usize],
                ),
                EdgeKind::KernelGap(k) | EdgeKind::StreamWait(k) => (
                    format!("gap before {}", t.slice_name(k)),
                    Bound::KernelGap,
                    None,
                    g.track[e.to as usize],
                ),
                EdgeKind::SyncWake(call) => (
                    t.slice_name(call).to_owned(),
                    Bound::SyncWait,
                    Some(call),
                    g.track[e.to as usize],
                ),
            };
            // Consecutive stretches of one event merge.
            if let Some(prev) = slices.last_mut()
                && prev.slice == slice
                && prev.bound == bound
                && prev.name == name
                && prev.start_ns + prev.dur_ns == a
            {
                prev.dur_ns += b - a;
                continue;
            }
            slices.push(PathSlice {
                name,
                track: track_name(track),
                start_ns: a,
                dur_ns: b - a,
                bound,
                slice,
            });
        }
        let total_ns = slices.iter().map(|s| s.dur_ns).sum();
        let mut by_bound: BTreeMap<Bound, i64> = BTreeMap::new();
        let mut by_name: FxHashMap<(&str, Bound), (i64, u64)> = FxHashMap::default();
        for s in &slices {
            *by_bound.entry(s.bound).or_insert(0) += s.dur_ns;
            let entry = by_name.entry((s.name.as_str(), s.bound)).or_insert((0, 0));
            entry.0 += s.dur_ns;
            entry.1 += 1;
        }
        let mut top: Vec<Contributor> = by_name
            .into_iter()
            .map(|((name, bound), (ns, count))| Contributor {
                name: name.to_owned(),
                bound,
                ns,
                count,
            })
            .collect();
        top.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
        top.truncate(TOP_CONTRIBUTORS);
        CriticalPath {
            total_ns,
            by_bound,
            top,
            slices,
        }
    }
}

/// The longest path from `source` to `sink`, as edge indexes in path order; ties go to the path
/// with more time in events (ops, kernels) than in gaps.
fn longest_path(g: &Graph, source: u32, sink: u32) -> Option<Vec<usize>> {
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
    // (length, time in events); unreachable nodes stay at None.
    let mut best: Vec<Option<(i64, i64)>> = vec![None; n];
    let mut pred: Vec<u32> = vec![u32::MAX; n];
    best[source as usize] = Some((0, 0));
    // Kahn's order; the graph is acyclic by construction (edges never go back in time, and
    // same-time edges follow creation), but a cycle would only leave its nodes unvisited.
    let mut queue: Vec<u32> = (0..n as u32)
        .filter(|&v| indegree[v as usize] == 0)
        .collect();
    let mut head = 0;
    while head < queue.len() {
        let v = queue[head] as usize;
        head += 1;
        for &ei in &out[out_start[v] as usize..out_start[v + 1] as usize] {
            let e = &g.edges[ei as usize];
            let to = e.to as usize;
            if let Some((len, busy)) = best[v] {
                let work = match e.kind {
                    EdgeKind::Span(_) => e.weight,
                    _ => 0,
                };
                let cand = (len + e.weight, busy + work);
                if best[to].is_none_or(|cur| cand > cur) {
                    best[to] = Some(cand);
                    pred[to] = ei;
                }
            }
            indegree[to] -= 1;
            if indegree[to] == 0 {
                queue.push(to as u32);
            }
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
