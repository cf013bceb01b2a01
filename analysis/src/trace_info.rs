//! What a trace holds, for `steplens info`: its inputs, device, engines, tracks by kind, counts
//! and steps. Computed here from the Timeline; `output::info` only renders it.

use serde::Serialize;
use steplens_ingest::Timeline;
use steplens_ingest::model::{DeviceInfo, TrackKind, Warning};

use crate::engines::{EngineStats, engine_utilization};

/// One input as `info` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct InputInfo {
    /// Its path.
    pub path: String,
    /// Its format id.
    pub format: steplens_ingest::FormatId,
    /// Whether it was gzip-compressed.
    pub compressed: bool,
    /// Bytes stored on disk.
    pub stored_bytes: u64,
    /// Bytes read (inflated).
    pub bytes: u64,
    /// Events read.
    pub events: u64,
    /// Events by trace-event phase (`X`, `B`, …), in the order read.
    #[serde(serialize_with = "phases_as_map")]
    pub events_by_phase: Vec<(char, u64)>,
    /// Its rank, when known.
    pub rank: Option<i64>,
    /// The run's world size, when the trace says.
    pub world_size: Option<i64>,
    /// What reading it warned about.
    pub warnings: Vec<Warning>,
}

fn phases_as_map<S: serde::Serializer>(phases: &[(char, u64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(phases.len()))?;
    for (ph, n) in phases {
        map.serialize_entry(&ph.to_string(), n)?;
    }
    map.end()
}

/// Tracks by kind.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct TrackCounts {
    /// Every track.
    pub total: usize,
    /// Host threads.
    pub host: usize,
    /// Device engine lanes.
    pub device: usize,
    /// Counter tracks.
    pub counter: usize,
    /// Async and other tracks.
    pub other: usize,
}

/// One track, for `info --tracks`.
#[derive(Debug, Clone, Serialize)]
pub struct TrackRow {
    /// `host`, `device`, `counter` or `async`.
    pub kind: String,
    /// A device lane's engine class (and device), else empty.
    pub engine: String,
    /// Its process's name.
    pub process: String,
    /// Its name.
    pub name: String,
    /// Its slices.
    pub slices: u32,
    /// Its deepest nesting.
    pub max_depth: u16,
}

/// What a trace holds.
#[derive(Debug, Clone, Serialize)]
pub struct TraceInfo {
    /// Every track, when asked for (`info --tracks`).
    pub track_list: Vec<TrackRow>,
    /// The inputs, in load order.
    pub sources: Vec<InputInfo>,
    /// The device.
    pub device: DeviceInfo,
    /// Busy time per engine class (text only).
    #[serde(skip)]
    pub engines: Vec<EngineStats>,
    /// Gaudi metric dumps: how many, and the metrics they name (text only).
    #[serde(skip)]
    pub metric_dumps: (usize, Vec<String>),
    /// Tracks by kind.
    pub tracks: TrackCounts,
    /// Slices.
    pub slices: usize,
    /// Flows.
    pub flows: usize,
    /// Instant events.
    pub instants: usize,
    /// Counter samples.
    pub counter_samples: usize,
    /// Step names, in order.
    pub steps: Vec<String>,
    /// From the first event's start to the last one's end, ns.
    pub time_span_ns: Option<i64>,
}

impl TraceInfo {
    /// What `timeline` holds; every track listed when `with_tracks`.
    #[must_use]
    pub fn of(timeline: &Timeline, with_tracks: bool) -> Self {
        let mut tracks = TrackCounts {
            total: timeline.tracks.len(),
            ..TrackCounts::default()
        };
        for t in &timeline.tracks {
            match t.kind {
                TrackKind::HostThread => tracks.host += 1,
                TrackKind::DeviceEngine { .. } => tracks.device += 1,
                TrackKind::Counter => tracks.counter += 1,
                TrackKind::Async => tracks.other += 1,
            }
        }
        let track_list = if with_tracks {
            timeline.tracks.iter().map(track_row).collect()
        } else {
            Vec::new()
        };
        let mut metric_names: Vec<String> =
            timeline.metrics.iter().map(|m| m.metric.clone()).collect();
        metric_names.sort_unstable();
        metric_names.dedup();
        Self {
            track_list,
            sources: timeline
                .sources
                .iter()
                .map(|s| InputInfo {
                    path: s.path.clone(),
                    format: s.format,
                    compressed: s.compressed,
                    stored_bytes: s.stored_bytes,
                    bytes: s.bytes,
                    events: s.events,
                    events_by_phase: s.events_by_phase.clone(),
                    rank: s.rank,
                    world_size: s.world_size,
                    warnings: s.warnings.clone(),
                })
                .collect(),
            device: timeline.device.clone(),
            engines: engine_utilization(timeline, &crate::busy::device_channels(timeline)).0,
            metric_dumps: (timeline.metrics.len(), metric_names),
            tracks,
            slices: timeline.slices.len(),
            flows: timeline.flows.len(),
            instants: timeline.instants.len(),
            counter_samples: timeline.counters.len(),
            steps: timeline.steps.iter().map(|s| s.name.clone()).collect(),
            time_span_ns: timeline.time_range().map(|(a, b)| b - a),
        }
    }
}

fn track_row(t: &steplens_ingest::model::Track) -> TrackRow {
    let (kind, engine) = match &t.kind {
        TrackKind::DeviceEngine { class, device } => (
            "device".to_owned(),
            match device {
                Some(d) => format!("{class} (device {d})"),
                None => class.to_string(),
            },
        ),
        other => (other.label().to_owned(), String::new()),
    };
    TrackRow {
        kind,
        engine,
        process: t.process_name.clone(),
        name: t.name.clone(),
        slices: t.slices.end - t.slices.start,
        max_depth: t.max_depth,
    }
}
