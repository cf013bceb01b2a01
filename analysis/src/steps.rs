//! The step table: for each training step, how long it took and how that time splits between
//! host work, device work, device idle time and waiting for the data loader.
//!
//! Definitions (also in `docs/report-schema.md`):
//! - the step: device-inclusive ([`crate::step_windows`]), from its host start (or the previous
//!   step's end) to the end of the device work it launched, or its host end when that is later;
//!   every figure below is over that window;
//! - host busy: the union, over the step's host threads, of the outermost op / runtime / driver
//!   slices, clipped to the step;
//! - device busy: the union over all device engines of kernels, copies and memsets inside the
//!   step window; device idle is the rest of the step;
//! - engines: the same union per engine class;
//! - data loader: the union of `enumerate(DataLoader)#…` ranges inside the step's host range
//!   (the step's own data loading, wherever the device then was); graph compiles likewise;
//! - device launched: the union of the device work whose launch (the runtime call its launch
//!   flow leaves) started inside the step, wherever on the timeline it ran (the TensorBoard
//!   plugin's per-step kernel time); per engine class too.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::model::{Timeline, TrackKind};

use crate::busy::{Channels, channels};
use crate::step_windows::StepWindow;
use steplens_ingest::intervals::IntervalSet;

/// One row of the step table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepStats {
    /// Step name (`ProfilerStep#3`).
    pub name: String,
    /// Input the step belongs to (index into `sources`).
    pub source: u16,
    /// Rank of that input, when the trace or its file name says it
    /// ([`crate::ranks::known_ranks`]): `distributedInfo.rank`, else, with several inputs, the
    /// file name or `--rank-regex`; absent otherwise (never from input order alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// Start, ns: the host range's start, or the previous step's end when its device work ran
    /// past this step's host start ([`crate::step_windows`]).
    pub start_ns: i64,
    /// Duration, ns: device-inclusive, to the end of the device work the step's launches
    /// started when that is after its host range ends ([`crate::step_windows`]); the host
    /// range alone on a trace without launch links.
    pub dur_ns: i64,
    /// The `ProfilerStep` host range's start, ns (absent in reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_start_ns: Option<i64>,
    /// The host range's duration, ns: what the host spent between its step marks, which on a
    /// device-bound run is only its run-ahead (absent in reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_dur_ns: Option<i64>,
    /// Host busy time, ns.
    pub host_busy_ns: i64,
    /// Device busy time, ns (null when the trace has no device).
    pub device_busy_ns: Option<i64>,
    /// Device idle time, ns (null when the trace has no device).
    pub device_idle_ns: Option<i64>,
    /// Time inside the data loader's `__next__`, ns.
    pub dataloader_ns: i64,
    /// Host time inside graph compiles (torch.compile, `synGraphCompile`) on any thread of the
    /// step's input, ns; absent when none. A warm-up compile shows here though no `recompile`
    /// finding names it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compile_ns: i64,
    /// Busy time per engine class, ns.
    pub engines: BTreeMap<String, i64>,
    /// Busy time (union) of the device work the step's host work launched, wherever it ran,
    /// ns (null when the trace has no launch links).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_launched_ns: Option<i64>,
    /// The same per engine class, ns (absent when the trace has no launch links).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub engines_launched: BTreeMap<String, i64>,
    /// Highest allocated memory in the step on the trace's main memory device (an accelerator,
    /// else the CPU), bytes; absent without `[memory]` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<i64>,
    /// Self time in the step of the ops with the most self time over the run (the report's
    /// top [`crate::ops::OPS_PER_STEP`], keyed as the check names them: `aten::mm`, `sgemm
    /// [device]`), ns; every one of them in every step, 0 where it did not run. The check
    /// compares these per-step distributions. Absent without steps.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub op_self_ns: BTreeMap<String, i64>,
    /// The step's critical path: what bounds it, by kind of work, and the chain of events
    /// that does (absent when the step's thread has no ops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_path: Option<crate::critical_path::CriticalPath>,
    /// The step was derived from the device timeline (`Iteration#N` of a Synapse-only run),
    /// not annotated by the profiler. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub derived: bool,
    /// The step's time split by the TensorBoard plugin's rules, over the plugin's own range for
    /// the step (stretched to the end of the device work it launched): see `Report::overview`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<crate::tensorboard::Breakdown>,
}

/// The step table, in time order.
#[must_use]
pub fn step_breakdown(timeline: &Timeline) -> Vec<StepStats> {
    step_breakdown_with(
        timeline,
        &channels(timeline),
        &crate::step_windows::step_windows(timeline),
    )
}

/// The step table from already built interval sets and step windows (in `timeline.steps`
/// order).
#[must_use]
pub fn step_breakdown_with(
    timeline: &Timeline,
    channels: &FxHashMap<u16, Channels>,
    windows: &[StepWindow],
) -> Vec<StepStats> {
    if timeline.steps.is_empty() {
        return Vec::new();
    }
    let empty = Channels::default();
    let mut launched = launched_per_step(timeline);
    timeline
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let (device_launched_ns, engines_launched) =
                match launched.get_mut(index).and_then(Option::take) {
                    Some(l) => (
                        Some(IntervalSet::from_ranges(l.all).total()),
                        l.engines
                            .into_iter()
                            .map(|(k, v)| (k, IntervalSet::from_ranges(v).total()))
                            .collect(),
                    ),
                    None => (None, BTreeMap::new()),
                };
            let c = channels.get(&step.source).unwrap_or(&empty);
            let (from, to) = windows
                .get(index)
                .map_or((step.start, step.end()), |w| (w.start, w.end));
            let dur = to - from;
            let device_busy = c.has_device.then(|| c.device.covered(from, to));
            StepStats {
                name: step.name.clone(),
                source: step.source,
                rank: None,
                start_ns: from,
                dur_ns: dur,
                host_start_ns: Some(step.start),
                host_dur_ns: Some(step.dur),
                host_busy_ns: c.host.covered(from, to),
                device_busy_ns: device_busy,
                device_idle_ns: device_busy.map(|busy| dur - busy),
                // The step's own host phases, over its host range: on a device-bound run they
                // happen while the device still runs the step before.
                dataloader_ns: c.dataloader.covered(step.start, step.end()),
                compile_ns: c.compile.covered(step.start, step.end()),
                engines: c
                    .engines
                    .iter()
                    .map(|(name, set)| (name.clone(), set.covered(from, to)))
                    .collect(),
                device_launched_ns,
                engines_launched,
                memory_peak_bytes: None,
                op_self_ns: BTreeMap::new(),
                critical_path: None,
                derived: step.derived,
                breakdown: None,
            }
        })
        .collect()
}

/// Device work launched from inside one step.
#[derive(Default, Clone)]
struct Launched {
    all: Vec<(i64, i64)>,
    engines: BTreeMap<String, Vec<(i64, i64)>>,
}

/// Per step (index into `timeline.steps`): the device work whose launching host slice (the
/// launch index's any-tier link) started in it;
/// `None` for the steps of an input without any launch link.
fn launched_per_step(timeline: &Timeline) -> Vec<Option<Launched>> {
    let steps = &timeline.steps;
    let mut out: Vec<Option<Launched>> = vec![None; steps.len()];
    let mut linked_sources: Vec<u16> = Vec::new();
    let slices = &timeline.slices;
    for (device_slice, host_slice) in timeline.launches().host_links() {
        let (Some(host), Some(device)) = (
            timeline.slice_track(host_slice),
            timeline.slice_track(device_slice),
        ) else {
            continue;
        };
        let TrackKind::DeviceEngine { class, .. } = &device.kind else {
            continue;
        };
        let source = timeline.step_source(host.source);
        if !linked_sources.contains(&source) {
            linked_sources.push(source);
        }
        let Some(i) = timeline.step_at(host.source, slices.start[host_slice as usize]) else {
            continue;
        };
        let to = device_slice as usize;
        let range = (
            slices.start[to],
            slices.start[to].saturating_add(slices.dur[to]),
        );
        let entry = out[i].get_or_insert_with(Launched::default);
        entry.all.push(range);
        if class.does_work() {
            entry
                .engines
                .entry(class.as_str().to_owned())
                .or_default()
                .push(range);
        }
    }
    // Steps of a linked input that launched nothing launched zero, not an unknown amount.
    for (i, step) in steps.iter().enumerate() {
        if out[i].is_none() && linked_sources.contains(&step.source) {
            out[i] = Some(Launched::default());
        }
    }
    out
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(v: &i64) -> bool {
    *v == 0
}
