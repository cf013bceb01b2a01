//! Device idle time per stream, split the way Holistic Trace Analysis splits it, so numbers can
//! be compared with HTA's idle-time breakdown:
//! - **host wait**: the gap before a kernel whose launch (the runtime call that launched it, by
//!   the launch index; else the driver call) started after the previous kernel on the stream
//!   had finished: the device waited for the host to enqueue work;
//! - **kernel wait**: any other gap shorter than `kernel_wait_max_ns`: back-to-back launch
//!   overhead;
//! - **other**: the remaining gaps (waiting on another stream, an event, a collective).
//!
//! Gaps are measured between consecutive kernels, copies and memsets of a stream, over the
//! whole trace, at nanosecond precision. HTA truncates timestamps to whole microseconds, so on
//! traces with fractional timestamps its figures differ by up to 1 µs per gap.

use serde::{Deserialize, Serialize};
use steplens_ingest::model::{EngineClass, SliceId, Timeline, TrackKind};

/// Idle time of one device stream.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StreamIdle {
    /// Input the stream belongs to.
    pub source: u16,
    /// Device index.
    pub device: Option<i64>,
    /// Stream (track) name.
    pub stream: String,
    /// Kernels, copies and memsets on the stream.
    pub kernels: u64,
    /// Sum of the gaps between them, ns.
    pub idle_ns: i64,
    /// Gaps where the device waited for the host to launch, ns.
    pub host_wait_ns: i64,
    /// Short gaps between back-to-back launches, ns.
    pub kernel_wait_ns: i64,
    /// Other gaps, ns.
    pub other_ns: i64,
}

/// The idle breakdown of every device stream that ran work, in track order.
#[must_use]
pub fn idle_breakdown(timeline: &Timeline, kernel_wait_max_ns: i64) -> Vec<StreamIdle> {
    idle_breakdown_with(timeline, timeline.launches(), kernel_wait_max_ns)
}

/// [`idle_breakdown`] with the analysis' launch index: a device slice was launched when the
/// runtime call that launched it (else the driver call) started.
pub(crate) fn idle_breakdown_with(
    timeline: &Timeline,
    launches: &steplens_ingest::model::Launches,
    kernel_wait_max_ns: i64,
) -> Vec<StreamIdle> {
    let mut out = Vec::new();
    for track in &timeline.tracks {
        let TrackKind::DeviceEngine { class, device } = &track.kind else {
            continue;
        };
        // The split is defined for launch queues (CUDA/ROCm/MTIA streams); a Gaudi engine
        // runs a graph's nodes, not individually launched kernels.
        if !matches!(class, EngineClass::ComputeStream | EngineClass::Memcpy) {
            continue;
        }
        let work: Vec<SliceId> = track
            .slices
            .clone()
            .filter(|&i| timeline.slice_class(i).is_device_work())
            .collect();
        if work.is_empty() {
            continue;
        }
        let mut row = StreamIdle {
            source: track.source,
            device: *device,
            stream: track.name.clone(),
            kernels: work.len() as u64,
            idle_ns: 0,
            host_wait_ns: 0,
            kernel_wait_ns: 0,
            other_ns: 0,
        };
        for pair in work.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let prev_end = timeline.slices.end(prev);
            let gap = timeline.slices.start[next as usize] - prev_end;
            row.idle_ns += gap;
            if launches
                .launched_at(timeline, next)
                .is_some_and(|launch| launch > prev_end)
            {
                row.host_wait_ns += gap;
            } else if gap < kernel_wait_max_ns {
                row.kernel_wait_ns += gap;
            } else {
                row.other_ns += gap;
            }
        }
        out.push(row);
    }
    out
}
