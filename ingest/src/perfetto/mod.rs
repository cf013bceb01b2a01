//! Perfetto TrackEvent protobuf (`.pftrace`): the `perfetto-proto` reader ([`read`]), and the
//! format's shared vocabulary: the prost types ([`proto`]), the notes steplens writes into a
//! file and their names, the flow id layout and the overlay's categories. The reader here and
//! the writer that exports a Timeline (`steplens_analysis::export::perfetto::write`) both use
//! them, so a file written by one is read back exactly by the other.
//!
//! The prost types in `proto` are generated from `ingest/proto/perfetto_trackevent.proto`, a
//! trimmed copy of Perfetto's merged trace proto (same names and field numbers), and checked
//! in; `ingest/tests/it/perfetto_proto_fresh.rs` fails when they are stale.
//!
//! A file written by steplens carries, in each track descriptor's `description`, a small JSON
//! note (`steplens track {…}`) with the Timeline track it came from (kind, engine class, device,
//! lane ids, names, order), and one `steplens` root track whose description holds the trace's
//! flow categories and device. The reader uses them to rebuild the Timeline exactly; without
//! them (traces from other tools) it infers tracks the way it does for JSON traces.

mod event;
pub(crate) mod read;

#[rustfmt::skip]
#[allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    clippy::pedantic,
    clippy::doc_markdown,
    clippy::derive_partial_eq_without_eq
)]
/// The prost types of the TrackEvent messages steplens reads and writes.
pub mod proto;

use serde::{Deserialize, Serialize};

use crate::model::{EngineClass, LaneId, StringTable, TrackKind};

/// Category of the analysis overlay's slices (steps, findings) in a file steplens wrote: read
/// back, they are derived annotations ([`crate::model::CategoryClass::Derived`]), never ops or
/// steps, so a report on the export equals the report on the original.
pub const OVERLAY_CATEGORY: &str = "steplens_overlay";

/// Prefix of the JSON note in a track descriptor's `description`.
pub const TRACK_NOTE: &str = "steplens track ";
/// Name of the root track holding the trace-wide note.
pub const META_TRACK: &str = "steplens";
/// Prefix of the trace-wide note.
pub const META_NOTE: &str = "steplens trace ";
/// Version of the notes.
pub const NOTE_VERSION: u32 = 1;

/// The Timeline track a Perfetto track came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrackNote {
    /// Index of the track in the exported Timeline (several Perfetto tracks, the overlap
    /// layers of one lane, share it).
    pub id: u32,
    /// `host`, `device`, `counter` or `async`.
    pub kind: String,
    /// Engine class of a device track.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Device index of a device track.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<i64>,
    /// Process id as written in the original trace (number or string).
    pub pid: serde_json::Value,
    /// Thread id as written in the original trace (number or string).
    pub tid: serde_json::Value,
    /// Track name.
    pub name: String,
    /// Process or device name.
    pub process: String,
    /// The track's sort key.
    pub sort: (i64, i64),
}

/// Trace-wide facts of an exported Timeline.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TraceNote {
    /// [`NOTE_VERSION`].
    pub version: u32,
    /// Flow categories: a flow id's top 16 bits index this list.
    pub flow_categories: Vec<String>,
    /// Device kind (`cuda`, `hpu`, …).
    pub device_kind: String,
    /// Device model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// Memory of one device, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_memory_bytes: Option<i64>,
    /// CUDA compute capability of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_compute_capability: Option<String>,
    /// Added to every time on export (Perfetto times are unsigned); the reader subtracts it.
    #[serde(default)]
    pub time_offset_ns: i64,
}

/// Bits of an exported flow id below the category index.
pub const FLOW_CAT_SHIFT: u32 = 48;

/// Flow category of the critical path steplens overlays on its exports. Its arrows are drawn
/// for people; reading the file back leaves them out, so the Timeline (and every analysis of
/// it) is the one that was exported.
pub const CRITICAL_PATH_FLOW_CATEGORY: &str = "critical_path";

pub(crate) fn kind_from_note(note: &TrackNote) -> Option<TrackKind> {
    Some(match note.kind.as_str() {
        "host" => TrackKind::HostThread,
        "counter" => TrackKind::Counter,
        "async" => TrackKind::Async,
        "device" => TrackKind::DeviceEngine {
            class: engine_class(note.engine.as_deref().unwrap_or("")),
            device: note.device,
        },
        _ => return None,
    })
}

/// The engine class named by [`EngineClass::as_str`].
pub(crate) fn engine_class(name: &str) -> EngineClass {
    match name {
        "MME" => EngineClass::Mme,
        "TPC" => EngineClass::Tpc,
        "DMA" => EngineClass::Dma,
        "NIC" => EngineClass::Nic,
        "ROTATOR" => EngineClass::Rotator,
        "compute-stream" => EngineClass::ComputeStream,
        "memcpy" => EngineClass::Memcpy,
        "sync" => EngineClass::Sync,
        "annotation" => EngineClass::Annotation,
        other => EngineClass::Other(other.into()),
    }
}

/// A lane id (pid or tid) as a [`TrackNote`] writes it: the number, or the interned name's text.
pub fn lane_to_json(lane: LaneId, strings: &StringTable) -> serde_json::Value {
    match lane {
        LaneId::Int(v) => serde_json::Value::from(v),
        LaneId::Str(s) => serde_json::Value::from(strings.get(s)),
    }
}
