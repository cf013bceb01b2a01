//! Launch links from correlation ids, for traces written before Kineto drew `ac2g` flows.
//!
//! PyTorch 1.8–1.10 traces carry no flow events between a runtime call and the device work it
//! launched; both sides name the CUPTI correlation id in their args instead (`correlation`).
//! HTA and the TensorBoard plugin join on it. This stage does the same for every input whose
//! device work has no launch flow at all, so analyses see one shape of launch link whatever
//! the trace's age.

use rustc_hash::FxHashMap;

use crate::model::{CategoryClass, SliceId, Timeline, TrackKind};

/// The arg both a runtime call and its device work carry.
const CORRELATION_KEY: &str = "correlation";

/// Launch links `(correlation id, runtime call, device work)` joined on the correlation id,
/// for the inputs whose device work has no launch flow of their own.
pub(crate) fn launch_links(t: &Timeline) -> Vec<(u64, SliceId, SliceId)> {
    let sources = t.sources.len();
    let mut has_launch_flow = vec![false; sources];
    for f in &t.flows {
        if t.slice_class(f.from).is_host_work()
            && t.slice_class(f.to).is_device_work()
            && let Some(track) = t.slice_track(f.to)
            && let Some(slot) = has_launch_flow.get_mut(track.source as usize)
        {
            *slot = true;
        }
    }
    let mut flows = Vec::new();
    for (source, _) in has_launch_flow.iter().enumerate().filter(|(_, has)| !**has) {
        let mut launches: FxHashMap<i64, SliceId> = FxHashMap::default();
        let mut device: Vec<SliceId> = Vec::new();
        for track in t.tracks.iter().filter(|tr| tr.source as usize == source) {
            for i in track.slices.clone() {
                let class = t.slice_class(i);
                if track.kind == TrackKind::HostThread
                    && matches!(class, CategoryClass::Runtime | CategoryClass::Driver)
                {
                    if let Some(id) = t.arg_i64(i, CORRELATION_KEY) {
                        // The first call of an id keeps it: a retry never relaunches.
                        launches.entry(id).or_insert(i);
                    }
                } else if class.is_device_work() {
                    device.push(i);
                }
            }
        }
        if launches.is_empty() {
            continue;
        }
        for to in device {
            let Some(id) = t.arg_i64(to, CORRELATION_KEY) else {
                continue;
            };
            if let Some(&from) = launches.get(&id) {
                flows.push((id as u64, from, to));
            }
        }
    }
    flows
}
