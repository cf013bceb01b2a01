//! Reading a Perfetto TrackEvent trace into the [`TimelineBuilder`], one packet at a time from
//! the (mapped) bytes: the whole `Trace` message is never decoded at once.
//!
//! Per sequence (`trusted_packet_sequence_id`) the reader keeps the interned names, categories,
//! annotation names and strings, the packet defaults and the incremental clocks, and resets them
//! when a packet clears the incremental state. Slices are rebuilt from BEGIN/END pairs with one
//! stack per Perfetto track; debug annotations become the slice's args, re-encoded as JSON text
//! so the Timeline's lazy args API works as for JSON traces.

use std::io::Read as _;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use prost::Message;
use rustc_hash::FxHashMap;

use super::event::{self, Event, Field, Fields};
use super::proto::{self as pb, trace_packet, track_descriptor};
use super::{META_NOTE, META_TRACK, TRACK_NOTE, TraceNote, TrackNote};
use crate::builder::{TimelineBuilder, TrackDescription};
use crate::error::IngestError;
use crate::format::FormatId;
use crate::model::{ArgsRef, CatId, DeviceKind, LaneId, StrId, TrackId, Warning, WarningCode};
use crate::reader::{ReadInput, ReadSummary};
use crate::source::SourceData;

/// Largest inflated size of one `compressed_packets` field (a guard against zlib bombs).
const MAX_INFLATED: u64 = 1 << 30;
/// Nesting of `compressed_packets` inside `compressed_packets` that is followed.
const MAX_COMPRESSION_DEPTH: u32 = 2;
/// Default clock of `TracePacket.timestamp`: `BUILTIN_CLOCK_BOOTTIME`.
const BOOTTIME: u32 = 6;

/// The bytes of a source as the owner of a zero-copy [`Bytes`].
struct Owner(Arc<SourceData>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// Reads `data` (a whole `.pftrace`) into `builder` as input `source`.
pub(crate) fn read_perfetto(
    data: &Arc<SourceData>,
    path: &str,
    builder: &mut TimelineBuilder,
    source: u16,
) -> Result<ReadSummary, IngestError> {
    let bytes = Bytes::from_owner(Owner(Arc::clone(data)));
    let mut reader = Reader::new(builder, source);
    // Reserved capacity is address space until written: sized so that neither the args text
    // (never longer than the protobuf it comes from, give or take quoting) nor the slice
    // columns (a BEGIN/END pair takes at least ~24 bytes) need to grow and copy.
    reader.args.reserve(data.bytes().len());
    reader.builder.reserve_slices(data.bytes().len() / 24);
    let outcome = reader.packets(bytes, 0, 0);
    if let Err(damage) = outcome {
        reader.damage = Some(damage);
    }
    reader.finish(path)
}

/// Where and why the packet stream stopped being readable.
#[derive(Debug)]
struct Damage {
    offset: u64,
    reason: String,
}

/// The sequence fields of a packet.
#[derive(Debug, Default)]
struct Header {
    timestamp: Option<u64>,
    clock: Option<u32>,
    seq: u32,
    flags: u32,
    cleared: bool,
    dropped: bool,
    first_on_sequence: bool,
    interned: Option<std::ops::Range<usize>>,
    defaults: Option<std::ops::Range<usize>>,
}

/// A Perfetto track descriptor as far as steplens uses it.
#[derive(Debug, Default, Clone)]
struct Descriptor {
    parent: Option<u64>,
    name: Option<String>,
    pid: Option<i32>,
    process_name: Option<String>,
    tid: Option<i64>,
    thread_name: Option<String>,
    counter: bool,
    note: Option<TrackNote>,
}

/// The incremental state of one packet sequence.
#[derive(Debug, Default)]
struct Sequence {
    /// Whether incremental state was ever cleared (packets needing it are valid).
    valid: bool,
    names: FxHashMap<u64, StrId>,
    categories: FxHashMap<u64, String>,
    category_ids: FxHashMap<u64, CatId>,
    annotation_names: FxHashMap<u64, String>,
    strings: FxHashMap<u64, Bytes>,
    default_track: Option<u64>,
    default_clock: Option<u32>,
    /// Sequence-scoped incremental clocks: clock id → (last value, ns per unit).
    incremental: FxHashMap<u32, (i64, u64)>,
    /// The legacy per-sequence thread (`thread_descriptor` packets).
    thread: Option<(i32, i64)>,
    /// Last absolute time of a legacy `timestamp_absolute_us`/`delta_us` event, ns.
    legacy_us_base: Option<i64>,
}

impl Sequence {
    fn clear(&mut self) {
        let thread = self.thread;
        *self = Self {
            valid: true,
            thread,
            ..Self::default()
        };
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    start: i64,
    name: StrId,
    cat: CatId,
    args: ArgsRef,
    key: u64,
}

#[derive(Debug, Clone, Copy)]
struct Done {
    start: i64,
    dur: i64,
    name: StrId,
    cat: CatId,
    args: ArgsRef,
    key: u64,
}

/// One Perfetto track's open slices, and the finished ones waiting for the stack to empty.
#[derive(Debug)]
struct Stack {
    track: TrackId,
    open: Vec<Open>,
    /// Finished slices of the current top-level slice; pushed in BEGIN order when it closes,
    /// so slices with equal start and duration keep their file order.
    done: Vec<Done>,
    last_ts: i64,
}

struct Reader<'b> {
    builder: &'b mut TimelineBuilder,
    source: u16,
    sequences: FxHashMap<u32, Sequence>,
    descriptors: FxHashMap<u64, Descriptor>,
    lanes: FxHashMap<u64, (TrackId, bool)>,
    /// Builder tracks of exported Timeline tracks, by note id.
    noted: FxHashMap<u32, TrackId>,
    stacks: FxHashMap<u64, Stack>,
    args: Vec<u8>,
    next_key: u64,
    /// Flow ends met so far: id → (slice key, whether it is the arriving end).
    flow_ends: FxHashMap<u64, (u64, bool)>,
    /// Flows (category, id, from key, to key).
    flows: Vec<(CatId, u64, u64, u64)>,
    /// Push index of each slice a flow touches.
    flow_slices: FxHashMap<u64, usize>,
    flow_keys: rustc_hash::FxHashSet<u64>,
    note: Option<TraceNote>,
    time_offset: i64,
    flow_cats: Vec<CatId>,
    default_flow_cat: Option<CatId>,
    clocks: Vec<u32>,
    // Counts.
    packets: u64,
    events: u64,
    begins: u64,
    ends: u64,
    instants: u64,
    counters: u64,
    skipped_packets: u64,
    needs_state_dropped: u64,
    packets_lost: u64,
    unmatched_ends: u64,
    unclosed: u64,
    bad_packets: u64,
    first_bad_packet: Option<(u64, String)>,
    unknown_tracks: u64,
    state_events: u64,
    damage: Option<Damage>,
    zlib_damage: Vec<Damage>,
}

impl<'b> Reader<'b> {
    fn new(builder: &'b mut TimelineBuilder, source: u16) -> Self {
        Self {
            builder,
            source,
            sequences: FxHashMap::default(),
            descriptors: FxHashMap::default(),
            lanes: FxHashMap::default(),
            noted: FxHashMap::default(),
            stacks: FxHashMap::default(),
            args: Vec::new(),
            next_key: 0,
            flow_ends: FxHashMap::default(),
            flows: Vec::new(),
            flow_slices: FxHashMap::default(),
            flow_keys: rustc_hash::FxHashSet::default(),
            note: None,
            time_offset: 0,
            flow_cats: Vec::new(),
            default_flow_cat: None,
            clocks: Vec::new(),
            packets: 0,
            events: 0,
            begins: 0,
            ends: 0,
            instants: 0,
            counters: 0,
            skipped_packets: 0,
            needs_state_dropped: 0,
            packets_lost: 0,
            unmatched_ends: 0,
            unclosed: 0,
            bad_packets: 0,
            first_bad_packet: None,
            unknown_tracks: 0,
            state_events: 0,
            damage: None,
            zlib_damage: Vec::new(),
        }
    }

    /// Walks the `Trace.packet` framing of `buf`; `base` is its offset in the file (for an
    /// inflated buffer, the offset of the packet that carried it).
    fn packets(&mut self, mut buf: Bytes, base: u64, depth: u32) -> Result<(), Damage> {
        let total = buf.len();
        // Packets are addressed as ranges of `whole`; a `Bytes` (a reference count) is made
        // only for the few packets prost decodes.
        let whole = buf.clone();
        let inner = depth > 0;
        let at = |remaining: usize| {
            let offset = (total - remaining) as u64;
            if inner { base } else { base + offset }
        };
        let where_ = |offset: usize| {
            if inner {
                format!(" (byte {offset} of the inflated compressed_packets)")
            } else {
                String::new()
            }
        };
        while buf.has_remaining() {
            let offset = at(buf.remaining());
            let rel = total - buf.remaining();
            let key = prost::encoding::decode_varint(&mut buf).map_err(|_| Damage {
                offset,
                reason: format!("bad varint in a packet tag{}", where_(rel)),
            })?;
            if key != 0x0A {
                return Err(Damage {
                    offset,
                    reason: format!(
                        "expected a packet (tag 0x0a), found tag {key:#x}{}",
                        where_(rel)
                    ),
                });
            }
            let len = prost::encoding::decode_varint(&mut buf).map_err(|_| Damage {
                offset,
                reason: format!("bad varint in a packet length{}", where_(rel)),
            })?;
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len > buf.remaining() {
                return Err(Damage {
                    offset,
                    reason: format!(
                        "packet of {len} bytes runs past the end ({} bytes left){}",
                        buf.remaining(),
                        where_(rel)
                    ),
                });
            }
            let start = total - buf.remaining();
            buf.advance(len);
            match self.decode_packet(&whole, start..start + len, offset, depth) {
                Ok(()) => {}
                Err(e) => {
                    // The framing is intact: only this packet is lost.
                    self.bad_packets += 1;
                    if self.first_bad_packet.is_none() {
                        self.first_bad_packet = Some((offset, format!("{e}{}", where_(rel))));
                    }
                }
            }
        }
        Ok(())
    }

    /// Decodes one packet: those carrying a TrackEvent (or no data) from the wire directly,
    /// the others (descriptors, clock snapshots, compressed packets) with prost.
    fn decode_packet(
        &mut self,
        whole: &Bytes,
        packet: std::ops::Range<usize>,
        offset: u64,
        depth: u32,
    ) -> Result<(), String> {
        let body = whole.get(packet.clone()).ok_or("packet out of range")?;
        let mut h = Header::default();
        let mut event = None;
        let mut other_data = false;
        let mut fields = Fields::new(body);
        while let Some((number, field)) = fields.next_field().ok_or("malformed packet")? {
            match (number, field) {
                (8, Field::Varint(v)) => h.timestamp = Some(v),
                (58, Field::Varint(v)) => h.clock = u32::try_from(v).ok(),
                (10, Field::Varint(v)) => h.seq = u32::try_from(v).unwrap_or(u32::MAX),
                (13, Field::Varint(v)) => h.flags = u32::try_from(v).unwrap_or(0),
                (41, Field::Varint(v)) => h.cleared = v != 0,
                (42, Field::Varint(v)) => h.dropped = v != 0,
                (87, Field::Varint(v)) => h.first_on_sequence = v != 0,
                (12, Field::Len(r)) => h.interned = Some(r),
                (59, Field::Len(r)) => h.defaults = Some(r),
                (11, Field::Len(r)) => event = Some(r),
                (6 | 43 | 44 | 50 | 60, _) => other_data = true,
                _ => {}
            }
        }
        if other_data {
            let packet = pb::TracePacket::decode(whole.slice(packet)).map_err(|e| e.to_string())?;
            self.packet(packet, offset, depth);
            return Ok(());
        }
        let interned = match h.interned.take() {
            Some(r) => Some(
                pb::InternedData::decode(whole.slice(packet.start + r.start..packet.start + r.end))
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let defaults = match h.defaults.take() {
            Some(r) => Some(pb::TracePacketDefaults::decode(&body[r]).map_err(|e| e.to_string())?),
            None => None,
        };
        let has_state = interned.is_some() || defaults.is_some();
        self.packets += 1;
        let Some(seq_id) = self.header(&h, interned, defaults.as_ref()) else {
            return Ok(());
        };
        match event {
            Some(r) => {
                let event = body
                    .get(r)
                    .and_then(Event::parse)
                    .ok_or("malformed TrackEvent")?;
                let ts = self
                    .time(seq_id, h.timestamp, h.clock, &event)
                    .saturating_sub(self.time_offset);
                self.track_event(seq_id, ts, &event);
            }
            // ftrace, Android, system stats …: not TrackEvent data.
            None if !has_state => self.skipped_packets += 1,
            None => {}
        }
        Ok(())
    }

    /// Applies a packet's sequence fields: data-loss marks, state reset, interned data and
    /// defaults. `None` when the packet needs state its sequence does not have (dropped).
    fn header(
        &mut self,
        h: &Header,
        interned: Option<pb::InternedData>,
        defaults: Option<&pb::TracePacketDefaults>,
    ) -> Option<u32> {
        let seq_id = h.seq;
        let first_seen = !self.sequences.contains_key(&seq_id);
        if h.dropped && !h.first_on_sequence && !first_seen {
            self.packets_lost += 1;
        }
        let seq = self.sequences.entry(seq_id).or_default();
        if h.flags & (trace_packet::SequenceFlags::SeqIncrementalStateCleared as u32) != 0
            || h.cleared
        {
            seq.clear();
        }
        if h.flags & (trace_packet::SequenceFlags::SeqNeedsIncrementalState as u32) != 0
            && !seq.valid
        {
            self.needs_state_dropped += 1;
            return None;
        }
        if let Some(defaults) = defaults {
            seq.default_clock = defaults.timestamp_clock_id;
            seq.default_track = defaults
                .track_event_defaults
                .as_ref()
                .and_then(|d| d.track_uuid);
        }
        if let Some(interned) = interned {
            self.intern(seq_id, interned);
        }
        Some(seq_id)
    }

    /// A packet decoded by prost (one without a TrackEvent).
    fn packet(&mut self, packet: pb::TracePacket, offset: u64, depth: u32) {
        self.packets += 1;
        let h = Header {
            timestamp: packet.timestamp,
            clock: packet.timestamp_clock_id,
            seq: match packet.optional_trusted_packet_sequence_id {
                Some(trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(s)) => {
                    s
                }
                None => 0,
            },
            flags: packet.sequence_flags(),
            cleared: packet.incremental_state_cleared(),
            dropped: packet.previous_packet_dropped() != 0,
            first_on_sequence: packet.first_packet_on_sequence(),
            interned: None,
            defaults: None,
        };
        let defaults = packet.trace_packet_defaults;
        let Some(seq_id) = self.header(&h, packet.interned_data, defaults.as_ref()) else {
            return;
        };
        match packet.data {
            // Only when the packet also has another data field (the last one wins in prost):
            // malformed, skipped.
            Some(trace_packet::Data::TrackEvent(_)) => self.skipped_packets += 1,
            Some(trace_packet::Data::TrackDescriptor(d)) => self.descriptor(d),
            Some(trace_packet::Data::CompressedPackets(data)) => {
                self.compressed(&data, offset, depth);
            }
            Some(trace_packet::Data::ClockSnapshot(snapshot)) => {
                let seq = self.sequences.entry(seq_id).or_default();
                for c in snapshot.clocks {
                    let id = c.clock_id();
                    // Clock ids 64..=127 are scoped to the sequence; the SDK makes them
                    // incremental (each packet's timestamp is a delta).
                    if c.is_incremental() && (64..128).contains(&id) {
                        let value = i64::try_from(c.timestamp()).unwrap_or(i64::MAX);
                        seq.incremental
                            .insert(id, (value, c.unit_multiplier_ns.unwrap_or(1).max(1)));
                    }
                }
            }
            Some(trace_packet::Data::ThreadDescriptor(t)) => {
                let seq = self.sequences.entry(seq_id).or_default();
                seq.thread = Some((t.pid(), t.tid()));
                let (pid, tid) = (t.pid(), t.tid());
                if let Some(name) = t.thread_name {
                    self.thread_lane(pid, tid);
                    self.builder.thread_meta(
                        self.source,
                        LaneId::Int(i64::from(pid)),
                        LaneId::Int(tid),
                        Some(name),
                        None,
                    );
                }
            }
            Some(trace_packet::Data::ProcessDescriptor(p)) => {
                let pid = p.pid();
                if let Some(name) = p.process_name {
                    self.builder.process_meta(
                        self.source,
                        LaneId::Int(i64::from(pid)),
                        Some(name),
                        None,
                        None,
                    );
                }
            }
            None => self.skipped_packets += 1,
        }
    }

    fn compressed(&mut self, data: &Bytes, offset: u64, depth: u32) {
        if depth >= MAX_COMPRESSION_DEPTH {
            self.skipped_packets += 1;
            return;
        }
        let mut inflated = Vec::new();
        let decoder = flate2::read::ZlibDecoder::new(&data[..]);
        let result = decoder.take(MAX_INFLATED + 1).read_to_end(&mut inflated);
        let mut problem = match result {
            Err(e) => Some(format!("bad zlib data in compressed_packets: {e}")),
            Ok(_) if inflated.len() as u64 > MAX_INFLATED => {
                inflated.truncate(usize::try_from(MAX_INFLATED).unwrap_or(usize::MAX));
                Some(format!(
                    "compressed_packets inflate to more than {} MiB; the rest was dropped",
                    MAX_INFLATED >> 20
                ))
            }
            Ok(_) => None,
        };
        // Whatever inflated before the error is read as far as its framing holds.
        if let Err(d) = self.packets(Bytes::from(inflated), offset, depth + 1)
            && problem.is_none()
        {
            problem = Some(d.reason);
        }
        if let Some(reason) = problem {
            self.zlib_damage.push(Damage { offset, reason });
        }
    }

    fn intern(&mut self, seq_id: u32, interned: pb::InternedData) {
        let seq = self.sequences.entry(seq_id).or_default();
        for n in interned.event_names {
            let id = self.builder.intern(n.name());
            seq.names.insert(n.iid(), id);
        }
        for c in interned.event_categories {
            seq.category_ids.remove(&c.iid());
            seq.categories.insert(c.iid(), c.name.unwrap_or_default());
        }
        for n in interned.debug_annotation_names {
            seq.annotation_names
                .insert(n.iid(), n.name.unwrap_or_default());
        }
        for s in interned.debug_annotation_string_values {
            seq.strings.insert(s.iid(), s.str.unwrap_or_default());
        }
    }

    /// The event's time in ns: the packet timestamp on its clock (deltas of an incremental
    /// clock accumulated), or the legacy µs fields of the event.
    fn time(
        &mut self,
        seq_id: u32,
        timestamp: Option<u64>,
        clock: Option<u32>,
        event: &Event<'_>,
    ) -> i64 {
        let seq = self.sequences.entry(seq_id).or_default();
        let clock = clock.or(seq.default_clock).unwrap_or(BOOTTIME);
        if let Some(ts) = timestamp {
            let raw = i64::try_from(ts).unwrap_or(i64::MAX);
            if let Some((last, mult)) = seq.incremental.get_mut(&clock) {
                let mult = i64::try_from(*mult).unwrap_or(1);
                *last = last.saturating_add(raw.saturating_mul(mult));
                return *last;
            }
            if !self.clocks.contains(&clock) {
                self.clocks.push(clock);
            }
            return raw;
        }
        match (event.timestamp_absolute_us, event.timestamp_delta_us) {
            (Some(us), _) => {
                let ns = us.saturating_mul(1000);
                seq.legacy_us_base = Some(ns);
                ns
            }
            (None, Some(us)) => {
                let ns = seq
                    .legacy_us_base
                    .unwrap_or(0)
                    .saturating_add(us.saturating_mul(1000));
                seq.legacy_us_base = Some(ns);
                ns
            }
            (None, None) => 0,
        }
    }

    fn descriptor(&mut self, d: pb::TrackDescriptor) {
        let uuid = d.uuid();
        let name = match d.static_or_dynamic_name {
            Some(
                track_descriptor::StaticOrDynamicName::Name(n)
                | track_descriptor::StaticOrDynamicName::StaticName(n)
                | track_descriptor::StaticOrDynamicName::AtraceName(n),
            ) => Some(n),
            None => None,
        };
        let description = d.description.unwrap_or_default();
        if name.as_deref() == Some(META_TRACK)
            && let Some(json) = description.strip_prefix(META_NOTE)
            && let Ok(note) = serde_json::from_str::<TraceNote>(json)
        {
            self.apply_trace_note(note);
            return;
        }
        let note = description
            .strip_prefix(TRACK_NOTE)
            .and_then(|json| serde_json::from_str::<TrackNote>(json).ok());
        let mut desc = Descriptor {
            parent: d.parent_uuid,
            name,
            counter: d.counter.is_some(),
            note,
            ..Descriptor::default()
        };
        if let Some(p) = d.process {
            desc.pid = p.pid;
            desc.process_name = p.process_name;
        }
        if let Some(t) = d.thread {
            desc.pid = t.pid.or(desc.pid);
            desc.tid = t.tid;
            desc.thread_name = t.thread_name;
        }
        self.descriptors.insert(uuid, desc);
    }

    fn apply_trace_note(&mut self, note: TraceNote) {
        self.flow_cats = note
            .flow_categories
            .iter()
            .map(|c| self.builder.intern_cat(c))
            .collect();
        let hints = &mut self.builder.device;
        match note.device_kind.as_str() {
            k if k == DeviceKind::Hpu.as_str() => hints.saw_hpu = true,
            k if k == DeviceKind::Mtia.as_str() => hints.saw_mtia = true,
            k if k == DeviceKind::Rocm.as_str() => hints.saw_hip = true,
            k if k == DeviceKind::Cuda.as_str() => hints.saw_cuda = true,
            _ => {}
        }
        if let Some(name) = &note.device_name {
            hints.names.push(name.clone());
        }
        hints.memory_bytes = note.device_memory_bytes;
        hints.compute_capability = note.device_compute_capability.clone();
        self.time_offset = note.time_offset_ns;
        self.note = Some(note);
    }

    /// The process id of `uuid` or its nearest ancestor with one.
    fn ancestor_pid(&self, mut uuid: u64) -> Option<i32> {
        for _ in 0..64 {
            let d = self.descriptors.get(&uuid)?;
            if let Some(pid) = d.pid {
                return Some(pid);
            }
            uuid = d.parent?;
        }
        None
    }

    fn ancestor_process_name(&self, mut uuid: u64) -> Option<String> {
        for _ in 0..64 {
            let d = self.descriptors.get(&uuid)?;
            if let Some(name) = d.process_name.clone().or_else(|| {
                // A named custom track with children is the group (device) its children sit in.
                (d.pid.is_none() && d.tid.is_none())
                    .then(|| d.name.clone())
                    .flatten()
            }) && d.tid.is_none()
            {
                return Some(name);
            }
            uuid = d.parent?;
        }
        None
    }

    fn thread_lane(&mut self, pid: i32, tid: i64) -> TrackId {
        self.builder
            .track(self.source, LaneId::Int(i64::from(pid)), LaneId::Int(tid))
    }

    /// The builder track of Perfetto track `uuid` and whether it is a counter track.
    fn lane(&mut self, uuid: u64) -> (TrackId, bool) {
        if let Some(&lane) = self.lanes.get(&uuid) {
            return lane;
        }
        let lane = self.make_lane(uuid);
        self.lanes.insert(uuid, lane);
        lane
    }

    fn make_lane(&mut self, uuid: u64) -> (TrackId, bool) {
        let Some(desc) = self.descriptors.get(&uuid).cloned() else {
            self.unknown_tracks += 1;
            let pid = LaneId::Str(self.builder.intern("tracks"));
            let tid = LaneId::Str(self.builder.intern(&format!("track {uuid:#x}")));
            return (self.builder.track(self.source, pid, tid), false);
        };
        if let Some(note) = &desc.note {
            return self.noted_lane(note, desc.counter);
        }
        let pid = self.ancestor_pid(uuid);
        let pid_lane = match pid {
            Some(p) => LaneId::Int(i64::from(p)),
            None => {
                let group = self
                    .ancestor_process_name(desc.parent.unwrap_or(u64::MAX))
                    .or_else(|| desc.name.clone())
                    .unwrap_or_default();
                let lane = LaneId::Str(self.builder.intern(&group));
                // A named group of tracks plays the process: its name is also the label that
                // marks device lanes (`GPU 0`, `HPU 1`) and gives their device index.
                self.builder.process_meta(
                    self.source,
                    lane,
                    Some(group.clone()),
                    Some(group),
                    None,
                );
                lane
            }
        };
        let display = desc
            .thread_name
            .clone()
            .or_else(|| desc.name.clone())
            .unwrap_or_else(|| format!("track {uuid:#x}"));
        if desc.counter {
            let track = self.builder.counter_track(self.source, pid_lane, &display);
            return (track, true);
        }
        let process_name = pid.and_then(|_| self.ancestor_process_name(uuid));
        if let Some(name) = process_name {
            self.builder
                .process_meta(self.source, pid_lane, Some(name), None, None);
        }
        let tid = match desc.tid {
            Some(tid) => LaneId::Int(tid),
            // Custom and process-scoped tracks: one lane per Perfetto track.
            None => LaneId::Str(self.builder.intern(&format!("{display} #{uuid:x}"))),
        };
        let track = self.builder.track(self.source, pid_lane, tid);
        self.builder
            .thread_meta(self.source, pid_lane, tid, Some(display.clone()), None);
        if desc.tid.is_none() {
            self.builder.describe_track(
                track,
                TrackDescription {
                    name: Some(display),
                    ..TrackDescription::default()
                },
            );
        }
        (track, false)
    }

    fn noted_lane(&mut self, note: &TrackNote, counter: bool) -> (TrackId, bool) {
        if let Some(&track) = self.noted.get(&note.id) {
            return (track, counter);
        }
        let lane = |v: &serde_json::Value, builder: &mut TimelineBuilder| match v {
            serde_json::Value::Number(n) => LaneId::Int(n.as_i64().unwrap_or(0)),
            serde_json::Value::String(s) => LaneId::Str(builder.intern(s)),
            other => LaneId::Str(builder.intern(&other.to_string())),
        };
        let pid = lane(&note.pid, self.builder);
        let track = if counter {
            self.builder.counter_track(self.source, pid, &note.name)
        } else {
            let tid = lane(&note.tid, self.builder);
            let mut track = self.builder.track(self.source, pid, tid);
            // Lanes of several inputs exported together can share ids: keep them apart.
            if self.noted.values().any(|&t| t == track) {
                let tid = LaneId::Str(self.builder.intern(&format!("{} #{}", note.tid, note.id)));
                track = self.builder.track(self.source, pid, tid);
            }
            track
        };
        self.builder.describe_track(
            track,
            TrackDescription {
                kind: super::kind_from_note(note),
                name: Some(note.name.clone()),
                process_name: Some(note.process.clone()),
                sort_key: Some(note.sort),
                rank: u64::from(note.id) + 1,
            },
        );
        self.noted.insert(note.id, track);
        (track, counter)
    }

    fn event_track(&self, seq_id: u32, event: &Event<'_>) -> Option<u64> {
        let seq = self.sequences.get(&seq_id);
        event
            .track_uuid
            .or_else(|| seq.and_then(|s| s.default_track))
    }

    fn track_event(&mut self, seq_id: u32, ts: i64, event: &Event<'_>) {
        self.events += 1;
        let uuid = self.event_track(seq_id, event);
        let lane = match uuid {
            Some(uuid) => Some((uuid, self.lane(uuid))),
            None => match self.sequences.get(&seq_id).and_then(|s| s.thread) {
                // Legacy: events of a sequence with a thread descriptor are on that thread.
                Some((pid, tid)) => {
                    let track = self.thread_lane(pid, tid);
                    Some((u64::MAX - u64::from(seq_id), (track, false)))
                }
                None => None,
            },
        };
        let (stack_id, (track, is_counter)) = match lane {
            Some(l) => l,
            None => {
                let pid = LaneId::Str(self.builder.intern("tracks"));
                let tid = LaneId::Str(self.builder.intern("default"));
                let track = self.builder.track(self.source, pid, tid);
                (u64::MAX, (track, false))
            }
        };
        self.extra_counters(ts, event);
        match event.kind {
            event::SLICE_BEGIN => {
                self.begins += 1;
                let (name, cat) = self.name_and_cat(seq_id, event);
                let args = self.args(seq_id, event);
                let key = self.next_key;
                self.next_key += 1;
                self.flow_ends_of(key, event);
                let stack = self.stack(stack_id, track);
                stack.last_ts = stack.last_ts.max(ts);
                stack.open.push(Open {
                    start: ts,
                    name,
                    cat,
                    args,
                    key,
                });
            }
            event::SLICE_END => {
                self.ends += 1;
                let stack = self.stack(stack_id, track);
                stack.last_ts = stack.last_ts.max(ts);
                let Some(open) = stack.open.pop() else {
                    self.unmatched_ends += 1;
                    return;
                };
                stack.done.push(Done {
                    start: open.start,
                    dur: ts - open.start,
                    name: open.name,
                    cat: open.cat,
                    args: open.args,
                    key: open.key,
                });
                if stack.open.is_empty() {
                    self.flush(stack_id);
                }
            }
            event::INSTANT => {
                self.instants += 1;
                let (name, cat) = self.name_and_cat(seq_id, event);
                let args = self.args(seq_id, event);
                self.builder.push_instant(track, ts, name, cat, b't', args);
            }
            event::COUNTER => {
                self.counters += 1;
                let value = event.counter.unwrap_or(0.0);
                let track = if is_counter {
                    track
                } else {
                    // A counter event on a non-counter track: a series named after the track.
                    let name = format!("counter {stack_id:#x}");
                    self.builder
                        .counter_track(self.source, LaneId::Int(0), &name)
                };
                self.builder.push_counter_sample(track, ts, value);
            }
            _ => self.state_events += 1,
        }
    }

    fn extra_counters(&mut self, ts: i64, event: &Event<'_>) {
        if event.extra_counter_uuids.is_empty() && event.extra_double_uuids.is_empty() {
            return;
        }
        let ints = event
            .extra_counter_uuids
            .iter()
            .zip(event.extra_counter_values.iter().map(|v| v as i64 as f64));
        let doubles = event
            .extra_double_uuids
            .iter()
            .zip(event.extra_double_values.iter().map(f64::from_bits));
        let samples: Vec<(u64, f64)> = ints.chain(doubles).collect();
        for (uuid, value) in samples {
            let (track, is_counter) = self.lane(uuid);
            if is_counter {
                self.builder.push_counter_sample(track, ts, value);
            }
        }
    }

    fn stack(&mut self, stack_id: u64, track: TrackId) -> &mut Stack {
        self.stacks.entry(stack_id).or_insert_with(|| Stack {
            track,
            open: Vec::new(),
            done: Vec::new(),
            last_ts: i64::MIN,
        })
    }

    /// Pushes the finished slices of a Perfetto track in BEGIN order.
    fn flush(&mut self, stack_id: u64) {
        let Some(stack) = self.stacks.get_mut(&stack_id) else {
            return;
        };
        let track = stack.track;
        let mut done = std::mem::take(&mut stack.done);
        done.sort_unstable_by_key(|d| d.key);
        for d in &done {
            if self.flow_keys.contains(&d.key) {
                self.flow_slices.insert(d.key, self.builder.slice_count());
            }
            self.builder
                .push_slice(track, d.start, d.dur, d.name, d.cat, d.args);
        }
        done.clear();
        if let Some(stack) = self.stacks.get_mut(&stack_id) {
            stack.done = done;
        }
    }

    fn flow_ends_of(&mut self, key: u64, event: &Event<'_>) {
        if event.flow_ids.is_empty() && event.terminating_flow_ids.is_empty() {
            return;
        }
        self.flow_keys.insert(key);
        let leaving = event.flow_ids.iter().map(|id| (id, false));
        let arriving = event.terminating_flow_ids.iter().map(|id| (id, true));
        let ends: Vec<(u64, bool)> = leaving.chain(arriving).collect();
        for (id, terminating) in ends {
            match self.flow_ends.remove(&id) {
                // The other end came first: link them whichever order the file has them in.
                Some((other, other_terminating)) => {
                    let (from, to) = if other_terminating && !terminating {
                        (key, other)
                    } else {
                        (other, key)
                    };
                    let cat = self.flow_category(id);
                    self.flows.push((cat, id, from, to));
                    // A flow passing through (not terminated here) goes on from this slice.
                    if !terminating && !other_terminating {
                        self.flow_ends.insert(id, (key, false));
                    }
                }
                None => {
                    self.flow_ends.insert(id, (key, terminating));
                }
            }
        }
    }

    fn flow_category(&mut self, id: u64) -> CatId {
        if self.note.is_some() {
            let index = (id >> super::FLOW_CAT_SHIFT) as usize;
            if let Some(&cat) = self.flow_cats.get(index) {
                return cat;
            }
        }
        match self.default_flow_cat {
            Some(cat) => cat,
            None => {
                let cat = self.builder.intern_cat("flow");
                self.default_flow_cat = Some(cat);
                cat
            }
        }
    }

    fn name_and_cat(&mut self, seq_id: u32, event: &Event<'_>) -> (StrId, CatId) {
        let name = match (event.name_iid, event.name) {
            (Some(iid), _) => match self.sequences.get(&seq_id).and_then(|s| s.names.get(&iid)) {
                Some(&id) => id,
                None => self.builder.intern(""),
            },
            (None, Some(text)) => self.builder.intern(&String::from_utf8_lossy(text)),
            (None, None) => self.builder.intern(""),
        };
        let cat = match (event.category_iids.len(), event.categories.as_slice()) {
            (1, []) => {
                let iid = event.category_iids.get(0).unwrap_or(0);
                self.category_iid(seq_id, iid)
            }
            (0, [one]) => self.builder.intern_cat(&String::from_utf8_lossy(one)),
            _ => {
                let seq = self.sequences.get(&seq_id);
                let mut joined: Vec<String> = event
                    .category_iids
                    .iter()
                    .map(|iid| {
                        seq.and_then(|s| s.categories.get(&iid))
                            .cloned()
                            .unwrap_or_default()
                    })
                    .collect();
                joined.extend(
                    event
                        .categories
                        .iter()
                        .map(|c| String::from_utf8_lossy(c).into_owned()),
                );
                self.builder.intern_cat(&joined.join(","))
            }
        };
        (name, cat)
    }

    fn category_iid(&mut self, seq_id: u32, iid: u64) -> CatId {
        let seq = self.sequences.entry(seq_id).or_default();
        if let Some(&id) = seq.category_ids.get(&iid) {
            return id;
        }
        let name = seq.categories.get(&iid).cloned().unwrap_or_default();
        let id = self.builder.intern_cat(&name);
        if let Some(seq) = self.sequences.get_mut(&seq_id) {
            seq.category_ids.insert(iid, id);
        }
        id
    }

    /// Writes the annotations as a JSON object into the args buffer.
    /// Writes the event's annotations as a JSON object into the args buffer.
    fn args(&mut self, seq_id: u32, event: &Event<'_>) -> ArgsRef {
        if event.annotations == 0 {
            return ArgsRef::NONE;
        }
        let start = self.args.len();
        let seq = self.sequences.get(&seq_id);
        let mut out = std::mem::take(&mut self.args);
        out.push(b'{');
        let mut ok = true;
        for (i, a) in event.annotations().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            ok &= write_annotation(&mut out, a, seq, 0, true).is_some();
        }
        out.push(b'}');
        let range = start..out.len();
        if !ok {
            // A malformed annotation: no args rather than broken JSON.
            out.truncate(start);
        }
        self.args = out;
        if ok {
            ArgsRef::new(range).unwrap_or(ArgsRef::NONE)
        } else {
            ArgsRef::NONE
        }
    }

    fn finish(mut self, path: &str) -> Result<ReadSummary, IngestError> {
        // BEGINs left open: closed at the last time seen on their track.
        let mut open: Vec<u64> = self
            .stacks
            .iter()
            .filter(|(_, s)| !s.open.is_empty())
            .map(|(&id, _)| id)
            .collect();
        open.sort_unstable();
        for stack_id in open {
            if let Some(stack) = self.stacks.get_mut(&stack_id) {
                let end = stack.last_ts;
                while let Some(o) = stack.open.pop() {
                    self.unclosed += 1;
                    stack.done.push(Done {
                        start: o.start,
                        dur: end.max(o.start) - o.start,
                        name: o.name,
                        cat: o.cat,
                        args: o.args,
                        key: o.key,
                    });
                }
            }
            self.flush(stack_id);
        }
        for &(cat, id, from, to) in &self.flows {
            if let (Some(&a), Some(&b)) = (self.flow_slices.get(&from), self.flow_slices.get(&to)) {
                self.builder
                    .push_slice_flow(cat, id & ((1 << 48) - 1), a, b);
            }
        }
        if !self.args.is_empty() {
            let data = Arc::new(SourceData::Owned(std::mem::take(&mut self.args)));
            self.builder.set_source_data(self.source, data);
        }
        let mut warnings = Vec::new();
        let mut warn = |code: WarningCode, offset: Option<u64>, message: String| {
            warnings.push(Warning {
                code,
                offset,
                message,
            });
        };
        let kept = self.events + self.packets;
        // A system trace (ftrace, process stats, Android) has nothing steplens models.
        if self.events == 0 && self.descriptors.is_empty() && self.skipped_packets > 0 {
            return Err(IngestError::Unsupported {
                path: path.to_owned(),
                format: "Perfetto traces without TrackEvent data (only ftrace, system or Android packets)",
            });
        }
        if let Some(d) = &self.damage {
            if self.events == 0 && self.descriptors.is_empty() {
                return Err(IngestError::Damaged {
                    path: path.to_owned(),
                    offset: d.offset,
                    reason: d.reason.clone(),
                });
            }
            warn(
                WarningCode::Damaged,
                Some(d.offset),
                format!(
                    "trace damaged at byte {} ({}): kept the {} packets before it, dropped the rest",
                    d.offset, d.reason, self.packets
                ),
            );
        }
        for d in &self.zlib_damage {
            warn(
                WarningCode::Damaged,
                Some(d.offset),
                format!(
                    "compressed packets at byte {} are damaged ({}): kept what inflated before it",
                    d.offset, d.reason
                ),
            );
        }
        if let Some((offset, reason)) = &self.first_bad_packet {
            warn(
                WarningCode::Damaged,
                Some(*offset),
                format!(
                    "skipped {} packets that do not decode (first at byte {offset}: {reason})",
                    self.bad_packets
                ),
            );
        }
        if self.needs_state_dropped > 0 {
            warn(
                WarningCode::DataLoss,
                None,
                format!(
                    "dropped {} packets that need incremental state their sequence never set up",
                    self.needs_state_dropped
                ),
            );
        }
        if self.packets_lost > 0 {
            warn(
                WarningCode::DataLoss,
                None,
                format!(
                    "the producer dropped packets before {} packets (previous_packet_dropped)",
                    self.packets_lost
                ),
            );
        }
        if self.skipped_packets > 0 {
            warn(
                WarningCode::SkippedPackets,
                None,
                format!(
                    "skipped {} packets that carry no TrackEvent data (ftrace, system and Android data …)",
                    self.skipped_packets
                ),
            );
        }
        if self.unmatched_ends > 0 {
            warn(
                WarningCode::UnmatchedEnd,
                None,
                format!(
                    "ignored {} SLICE_END events with no open slice on their track",
                    self.unmatched_ends
                ),
            );
        }
        if self.unclosed > 0 {
            warn(
                WarningCode::UnclosedBegin,
                None,
                format!(
                    "{} SLICE_BEGIN events had no END; closed at the last time seen on their track",
                    self.unclosed
                ),
            );
        }
        if self.unknown_tracks > 0 {
            warn(
                WarningCode::UnknownTrack,
                None,
                format!(
                    "{} tracks were used before (or without) their descriptor",
                    self.unknown_tracks
                ),
            );
        }
        if self.state_events > 0 {
            warn(
                WarningCode::UnsupportedPhase,
                None,
                format!(
                    "skipped {} track events of a type steplens does not model",
                    self.state_events
                ),
            );
        }
        if self.clocks.len() > 1 {
            warn(
                WarningCode::MixedClocks,
                None,
                format!(
                    "events use {} clocks (ids {:?}); their times are not converted between clocks",
                    self.clocks.len(),
                    self.clocks
                ),
            );
        }
        if kept == 0 {
            warn(WarningCode::Empty, None, "the trace has no packets".into());
        }
        let mut by_phase = Vec::new();
        for (ph, n) in [
            ('B', self.begins),
            ('E', self.ends),
            ('i', self.instants),
            ('C', self.counters),
        ] {
            if n > 0 {
                by_phase.push((ph, n));
            }
        }
        Ok(ReadSummary {
            events: self.events,
            by_phase,
            warnings,
            ..ReadSummary::default()
        })
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Nested annotations deeper than this are written as `null` (a guard against hostile input).
const MAX_ANNOTATION_DEPTH: u32 = 64;

/// Writes one `DebugAnnotation` (its wire bytes) as JSON: `"name":value` when `named`, else
/// the value alone. `None` when the bytes are malformed.
fn write_annotation(
    out: &mut Vec<u8>,
    a: &[u8],
    seq: Option<&Sequence>,
    depth: u32,
    named: bool,
) -> Option<()> {
    // First pass: the name, a scalar value, and whether entries follow.
    let mut name: Option<Field> = None;
    let mut value: Option<(u32, Field)> = None;
    let (mut dict, mut array) = (false, false);
    let mut fields = Fields::new(a);
    while let Some((number, field)) = fields.next_field()? {
        match number {
            1 | 10 => name = Some(field),
            2..=7 | 9 | 17 => value = Some((number, field)),
            11 => dict = true,
            12 => array = true,
            _ => {}
        }
    }
    if named {
        match name {
            Some(Field::Varint(iid)) => match seq.and_then(|s| s.annotation_names.get(&iid)) {
                Some(n) => write_str(out, n),
                None => write_str(out, &format!("arg_{iid}")),
            },
            Some(Field::Len(r)) => write_str(out, &String::from_utf8_lossy(a.get(r)?)),
            _ => write_str(out, ""),
        }
        out.push(b':');
    }
    if depth > MAX_ANNOTATION_DEPTH {
        out.extend_from_slice(b"null");
        return Some(());
    }
    match value {
        Some((2, Field::Varint(v))) => {
            out.extend_from_slice(if v != 0 { b"true" } else { b"false" });
        }
        Some((3, Field::Varint(v))) => {
            let _ = serde_json::to_writer(&mut *out, &v);
        }
        Some((4, Field::Varint(v))) => {
            let _ = serde_json::to_writer(&mut *out, &(v as i64));
        }
        Some((5, Field::Fixed64(bits))) => {
            let v = f64::from_bits(bits);
            if v.is_finite() {
                let _ = serde_json::to_writer(&mut *out, &v);
            } else {
                write_str(out, &v.to_string());
            }
        }
        Some((6, Field::Len(r))) => write_str(out, &String::from_utf8_lossy(a.get(r)?)),
        Some((7, Field::Varint(p))) => write_str(out, &format!("{p:#x}")),
        Some((9, Field::Len(r))) => {
            let json = a.get(r)?;
            if serde_json::from_slice::<serde::de::IgnoredAny>(json).is_ok() {
                out.extend_from_slice(json);
            } else {
                write_str(out, &String::from_utf8_lossy(json));
            }
        }
        Some((17, Field::Varint(iid))) => {
            let s = seq.and_then(|s| s.strings.get(&iid));
            write_str(
                out,
                &s.map_or_else(String::new, |b| String::from_utf8_lossy(b).into_owned()),
            );
        }
        Some(_) => return None,
        None if dict || array => {
            let (field, open, close) = if dict {
                (11, b'{', b'}')
            } else {
                (12, b'[', b']')
            };
            out.push(open);
            let mut first = true;
            let mut fields = Fields::new(a);
            while let Some((number, f)) = fields.next_field()? {
                if let (true, Field::Len(r)) = (number == field, f) {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    write_annotation(out, a.get(r)?, seq, depth + 1, dict)?;
                }
            }
            out.push(close);
        }
        // No value and no entries (the writer sends empty objects and arrays as JSON text).
        None => out.extend_from_slice(b"null"),
    }
    Some(())
}

/// Perfetto protobuf traces.
pub(crate) struct PerfettoReader;

impl crate::reader::Reader for PerfettoReader {
    fn id(&self) -> FormatId {
        FormatId::PerfettoProto
    }

    fn sniff(&self, body: &[u8]) -> bool {
        looks_like_perfetto(body)
    }

    /// A trace whose first packet is cut short fails the content check; its name and first
    /// byte still say what it is.
    fn claims_by_name(&self, path: &str, body: &[u8]) -> bool {
        body.first() == Some(&0x0a)
            && [
                ".pftrace",
                ".perfetto-trace",
                ".pftrace.gz",
                ".perfetto-trace.gz",
            ]
            .iter()
            .any(|ext| path.ends_with(ext))
    }

    fn read(
        &self,
        input: ReadInput<'_, '_>,
        builder: &mut TimelineBuilder,
    ) -> Result<ReadSummary, IngestError> {
        read_perfetto(input.data, input.path, builder, input.source)
    }
}

/// Whether `bytes` start with a whole `Trace.packet` record (tag 0x0a, varint length, payload)
/// followed by the end of the input or the next packet's tag. The tag 0x0a is also ASCII
/// whitespace, so no JSON check sees it first.
fn looks_like_perfetto(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&0x0a) {
        return false;
    }
    let mut len: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().skip(1).take(10) {
        len |= u64::from(b & 0x7f) << (7 * (i - 1));
        if b & 0x80 == 0 {
            let Some(end) = usize::try_from(len)
                .ok()
                .and_then(|l| (i + 1).checked_add(l))
            else {
                return false;
            };
            return len > 0 && (end == bytes.len() || bytes.get(end) == Some(&0x0a));
        }
    }
    false
}
