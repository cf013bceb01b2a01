//! Busy time per input: outermost host work, data-loader waits, graph compiles, and device work
//! over all engines and per engine class. The one definition of "busy" that the step table, the
//! engine table, the utilization chart and the summary cut from, built once per report.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::intervals::IntervalSet;
use steplens_ingest::model::{NO_PARENT, Timeline, TrackKind};

use crate::op_names::DATALOADER_PREFIX;

/// Engines of one class on one input that ran device work, and the sum of each one's own busy
/// time (for the mean per-engine utilization).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EngineBusy {
    /// Engines (tracks) of the class that ran device work.
    pub engines: usize,
    /// Σ over those engines of each engine's own busy time, ns.
    pub own_busy_ns: i64,
}

/// Interval sets of one input, built once and cut per step.
#[derive(Debug, Default)]
pub struct Channels {
    /// Outermost host work.
    pub host: IntervalSet,
    /// Data loader waits.
    pub dataloader: IntervalSet,
    /// Graph compiles on host threads ([`crate::op_names::is_graph_compile`]).
    pub compile: IntervalSet,
    /// Device work, all engines.
    pub device: IntervalSet,
    /// Device work per engine class (a class whose engines ran nothing has an empty set).
    pub engines: BTreeMap<String, IntervalSet>,
    /// Per engine class: its engines that ran work and their own busy times.
    pub engine_busy: BTreeMap<String, EngineBusy>,
    /// Whether the input has device engine tracks.
    pub has_device: bool,
}

/// Builds the interval sets of every input.
#[must_use]
pub fn channels(timeline: &Timeline) -> FxHashMap<u16, Channels> {
    channels_of(timeline, true)
}

/// The device sets of every input only (`device`, `engines`, `engine_busy`, `has_device`; the
/// host ones left empty): what the engine table needs, without a pass over the host threads.
#[must_use]
pub fn device_channels(timeline: &Timeline) -> FxHashMap<u16, Channels> {
    channels_of(timeline, false)
}

fn channels_of(timeline: &Timeline, host: bool) -> FxHashMap<u16, Channels> {
    #[derive(Default)]
    struct Raw {
        host: Vec<(i64, i64)>,
        dataloader: Vec<(i64, i64)>,
        compile: Vec<(i64, i64)>,
        device: Vec<(i64, i64)>,
        engines: BTreeMap<String, Vec<(i64, i64)>>,
        engine_busy: BTreeMap<String, EngineBusy>,
        has_device: bool,
    }
    let slices = &timeline.slices;
    let mut raw: FxHashMap<u16, Raw> = FxHashMap::default();
    let names = |test: &dyn Fn(&str) -> bool| -> Vec<bool> {
        if !host {
            return Vec::new();
        }
        (0..timeline.strings.len() as u32)
            .map(|id| test(timeline.strings.get(id)))
            .collect()
    };
    let dataloader_names = names(&|name| name.starts_with(DATALOADER_PREFIX));
    let compile_names = names(&crate::op_names::is_graph_compile);
    for track in &timeline.tracks {
        let r = raw.entry(track.source).or_default();
        match &track.kind {
            TrackKind::HostThread if !host => {}
            TrackKind::HostThread => {
                for i in track.slices.clone() {
                    let idx = i as usize;
                    let range = (slices.start[idx], slices.start[idx] + slices.dur[idx]);
                    let class = timeline.slice_class(i);
                    if compile_names.get(slices.name[idx] as usize) == Some(&true) {
                        r.compile.push(range);
                    }
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
                let per_class = r.engines.entry(engine.as_str().to_owned()).or_default();
                let first = per_class.len();
                for i in track.slices.clone() {
                    if timeline.slice_class(i).is_device_work() {
                        let idx = i as usize;
                        let range = (slices.start[idx], slices.start[idx] + slices.dur[idx]);
                        r.device.push(range);
                        per_class.push(range);
                    }
                }
                if per_class.len() > first {
                    let own = IntervalSet::from_ranges(per_class[first..].to_vec()).total();
                    let busy = r.engine_busy.entry(engine.as_str().to_owned()).or_default();
                    busy.engines += 1;
                    busy.own_busy_ns += own;
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
                    compile: IntervalSet::from_ranges(r.compile),
                    device: IntervalSet::from_ranges(r.device),
                    engines: r
                        .engines
                        .into_iter()
                        .map(|(k, v)| (k, IntervalSet::from_ranges(v)))
                        .collect(),
                    engine_busy: r.engine_busy,
                    has_device: r.has_device,
                },
            )
        })
        .collect()
}
