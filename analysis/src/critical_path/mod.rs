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
//!
//! Built as is, that graph has two nodes per op. Only top-level ops (where threads hand over)
//! and runtime calls (launches, blocking calls) get nodes here: a nested op's start and end are
//! points of its thread's chain that no other edge touches, so the chain through them becomes
//! one edge between two nodes that keeps them as segments, and the path lists the segments. The
//! longest path is the same.
//!
//! The public types and entry points are here; `walk.rs` builds each window's graph
//! (`graph.rs`: nodes, edges, the longest path) from the host threads, launches and device work,
//! under the blocking and `cuda_sync` rules of `sync.rs`; `summary.rs` turns the path into
//! figures per bound and `stretches.rs` into the named stretches reports show.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use steplens_ingest::model::{Timeline, TrackKind};

mod graph;
mod stretches;
mod summary;
mod sync;
mod walk;

use sync::Shared;
use walk::Window;

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
    /// The event's name, or what the edge is (`launch → sgemm…`, `between ops`); one text
    /// shared by every slice that shows it.
    pub name: Arc<str>,
    /// Track of the event (of the edge's later end).
    pub track: Option<Arc<str>>,
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
    /// The path of step `step` (an index into `timeline.steps`), or of input `source`'s whole
    /// trace when the finding has no step.
    #[must_use]
    pub fn of(
        &self,
        timeline: &Timeline,
        source: u16,
        step: Option<usize>,
    ) -> Option<&CriticalPath> {
        match step {
            Some(i) => self.steps.get(i).and_then(Option::as_ref),
            None => {
                let clock = timeline.step_source(source);
                self.whole.iter().find(|(s, _)| *s == clock).map(|(_, p)| p)
            }
        }
    }
}

/// Most stretches a path lists in `slices`.
pub const MAX_PATH_SLICES: usize = 1000;

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
