//! The step table: for each training step, how long it took and how that time splits between
//! host work, device work, device idle time and waiting for the data loader.
//!
//! Definitions (also in `docs/report-schema.md`):
//! - host busy: the union, over the step's host threads, of the outermost op / runtime / driver
//!   slices, clipped to the step;
//! - device busy: the union over all device engines of kernels, copies and memsets inside the
//!   step window; device idle is the rest of the step;
//! - engines: the same union per engine class;
//! - data loader: the union of `enumerate(DataLoader)#…` ranges inside the step.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use steplens_ingest::model::{NO_PARENT, Timeline, TrackKind};

use crate::intervals::IntervalSet;

/// Name prefix of the PyTorch DataLoader's `__next__` annotation.
pub const DATALOADER_PREFIX: &str = "enumerate(DataLoader)#";

/// One row of the step table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepStats {
    /// Step name (`ProfilerStep#3`).
    pub name: String,
    /// Input the step belongs to (index into `sources`).
    pub source: u16,
    /// Start, ns.
    pub start_ns: i64,
    /// Duration, ns.
    pub dur_ns: i64,
    /// Host busy time, ns.
    pub host_busy_ns: i64,
    /// Device busy time, ns (null when the trace has no device).
    pub device_busy_ns: Option<i64>,
    /// Device idle time, ns (null when the trace has no device).
    pub device_idle_ns: Option<i64>,
    /// Time inside the data loader's `__next__`, ns.
    pub dataloader_ns: i64,
    /// Busy time per engine class, ns.
    pub engines: BTreeMap<String, i64>,
    /// The step was derived from the device timeline (`Iteration#N` of a Synapse-only run),
    /// not annotated by the profiler. Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub derived: bool,
}

/// Interval sets of one input, built once and cut per step.
#[derive(Debug, Default)]
pub struct Channels {
    /// Outermost host work.
    pub host: IntervalSet,
    /// Data loader waits.
    pub dataloader: IntervalSet,
    /// Device work, all engines.
    pub device: IntervalSet,
    /// Device work per engine class.
    pub engines: BTreeMap<String, IntervalSet>,
    /// Whether the input has device engine tracks.
    pub has_device: bool,
}

/// Builds the interval sets of every input.
#[must_use]
pub fn channels(timeline: &Timeline) -> FxHashMap<u16, Channels> {
    #[derive(Default)]
    struct Raw {
        host: Vec<(i64, i64)>,
        dataloader: Vec<(i64, i64)>,
        device: Vec<(i64, i64)>,
        engines: BTreeMap<String, Vec<(i64, i64)>>,
        has_device: bool,
    }
    let slices = &timeline.slices;
    let mut raw: FxHashMap<u16, Raw> = FxHashMap::default();
    let dataloader_names: Vec<bool> = (0..timeline.strings.len() as u32)
        .map(|id| timeline.strings.get(id).starts_with(DATALOADER_PREFIX))
        .collect();
    for track in &timeline.tracks {
        let r = raw.entry(track.source).or_default();
        match &track.kind {
            TrackKind::HostThread => {
                for i in track.slices.clone() {
                    let idx = i as usize;
                    let range = (slices.start[idx], slices.start[idx] + slices.dur[idx]);
                    let class = timeline.slice_class(i);
                    if class.is_host_work() {
                        let parent = slices.parent[idx];
                        if parent == NO_PARENT || !timeline.slice_class(parent).is_host_work() {
                            r.host.push(range);
                        }
                    } else if dataloader_names.get(slices.name[idx] as usize) == Some(&true) {
                        r.dataloader.push(range);
                    }
                }
            }
            TrackKind::DeviceEngine { class: engine, .. } => {
                r.has_device = true;
                if !engine.does_work() {
                    continue;
                }
                let per_engine = r.engines.entry(engine.as_str().to_owned()).or_default();
                for i in track.slices.clone() {
                    if timeline.slice_class(i).is_device_work() {
                        let idx = i as usize;
                        let range = (slices.start[idx], slices.start[idx] + slices.dur[idx]);
                        r.device.push(range);
                        per_engine.push(range);
                    }
                }
            }
            TrackKind::Counter | TrackKind::Async => {}
        }
    }
    raw.into_iter()
        .map(|(source, r)| {
            (
                source,
                Channels {
                    host: IntervalSet::from_ranges(r.host),
                    dataloader: IntervalSet::from_ranges(r.dataloader),
                    device: IntervalSet::from_ranges(r.device),
                    engines: r
                        .engines
                        .into_iter()
                        .map(|(k, v)| (k, IntervalSet::from_ranges(v)))
                        .collect(),
                    has_device: r.has_device,
                },
            )
        })
        .collect()
}

/// The step table, in time order.
#[must_use]
pub fn step_breakdown(timeline: &Timeline) -> Vec<StepStats> {
    step_breakdown_with(timeline, &channels(timeline))
}

/// The step table from already built interval sets.
#[must_use]
pub fn step_breakdown_with(
    timeline: &Timeline,
    channels: &FxHashMap<u16, Channels>,
) -> Vec<StepStats> {
    if timeline.steps.is_empty() {
        return Vec::new();
    }
    let empty = Channels::default();
    timeline
        .steps
        .iter()
        .map(|step| {
            let c = channels.get(&step.source).unwrap_or(&empty);
            let (from, to) = (step.start, step.end());
            let device_busy = c.has_device.then(|| c.device.covered(from, to));
            StepStats {
                name: step.name.clone(),
                source: step.source,
                start_ns: step.start,
                dur_ns: step.dur,
                host_busy_ns: c.host.covered(from, to),
                device_busy_ns: device_busy,
                device_idle_ns: device_busy.map(|busy| step.dur - busy),
                dataloader_ns: c.dataloader.covered(from, to),
                engines: c
                    .engines
                    .iter()
                    .map(|(name, set)| (name.clone(), set.covered(from, to)))
                    .collect(),
                derived: step.derived,
            }
        })
        .collect()
}
