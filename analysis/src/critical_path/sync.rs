//! The sync rules and what every window reads: which runtime calls block until the device is
//! done, which device work each blocking call and `cudaStreamWaitEvent` waited for (Kineto's
//! `cuda_sync` events: Context, Stream and Event Sync), the per-name flags,
//! the ranks' waits at collectives and the graph compiles of each clock.

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, LaneId, SliceId, Timeline, TrackKind};

use super::graph::{Graph, Scratch};
use super::stretches::PathTexts;
use crate::op_names::{DATALOADER_PREFIX, NameFlags};
use steplens_ingest::intervals::IntervalSet;

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

/// What every window reads: blocking-call names, `cuda_sync` links.
pub(super) struct Shared {
    /// Per-slice node ids of the window being built, reused from window to window.
    pub(super) scratch: std::cell::RefCell<Scratch>,
    /// The window's graph, its arrays reused from window to window.
    pub(super) graph: std::cell::RefCell<Graph>,
    /// The path slices' names and tracks, shared by every window's path.
    pub(super) path_texts: std::cell::RefCell<PathTexts>,
    /// Per interned name: 1 blocking call, 2 compile span, 4 data loader range, 8 launch call.
    name_flags: NameFlags,
    /// Blocking runtime call → the device work its `cuda_sync` event says it waited for.
    pub(super) waits_for: FxHashMap<SliceId, Vec<SliceId>>,
    /// Device work → the device work a `cudaStreamWaitEvent` made it wait for.
    pub(super) stream_waits: FxHashMap<SliceId, SliceId>,
    /// Blocking calls whose `cuda_sync` event was read (they use it, not the fallback).
    pub(super) synced: rustc_hash::FxHashSet<SliceId>,
    /// Per clock (several ranks loaded): where that rank waited at a collective for the last
    /// rank to arrive, sorted.
    pub(super) rank_waits: FxHashMap<u16, Vec<(i64, i64)>>,
    /// Per clock: graph compiles on any host thread. A compile on another thread (Synapse
    /// compiling the graph a launch waits for) bounds the step as much as one on its own.
    pub(super) compiles: FxHashMap<u16, Vec<(i64, i64)>>,
}

pub(super) const BLOCKING_FLAG: u8 = 1;
pub(super) const COMPILE_FLAG: u8 = 2;
pub(super) const DATALOADER_FLAG: u8 = 4;
pub(super) const LAUNCH_FLAG: u8 = 8;

impl Shared {
    pub(super) fn new(t: &Timeline, rank_waits: &[Vec<(i64, i64)>]) -> Self {
        let name_flags = NameFlags::new(t, |name| {
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
        });
        let mut shared = Self {
            scratch: std::cell::RefCell::new(Scratch::default()),
            graph: std::cell::RefCell::new(Graph::default()),
            path_texts: std::cell::RefCell::new(PathTexts::default()),
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

    pub(super) fn flags(&self, t: &Timeline, slice: SliceId) -> u8 {
        self.name_flags.of(t, slice)
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
        for (work, launch) in t.launches().host_links() {
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
