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

use super::proto::{self as pb, debug_annotation, trace_packet, track_descriptor, track_event};
use super::{META_NOTE, META_TRACK, TRACK_NOTE, TraceNote, TrackNote};
use crate::builder::{TimelineBuilder, TrackDescription};
use crate::error::IngestError;
use crate::model::{ArgsRef, CatId, DeviceKind, LaneId, StrId, TrackId, Warning};
use crate::source::SourceData;

/// Largest inflated size of one `compressed_packets` field (a guard against zlib bombs).
const MAX_INFLATED: u64 = 1 << 30;
/// Nesting of `compressed_packets` inside `compressed_packets` that is followed.
const MAX_COMPRESSION_DEPTH: u32 = 2;
/// Default clock of `TracePacket.timestamp`: `BUILTIN_CLOCK_BOOTTIME`.
const BOOTTIME: u32 = 6;

/// What the reader found, for the source's [`crate::model::SourceInfo`].
pub(crate) struct Summary {
    pub(crate) events: u64,
    pub(crate) by_phase: Vec<(char, u64)>,
    pub(crate) warnings: Vec<Warning>,
}

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
) -> Result<Summary, IngestError> {
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
            let body = buf.split_to(len);
            match pb::TracePacket::decode(body) {
                Ok(packet) => self.packet(packet, offset, depth),
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

    fn packet(&mut self, packet: pb::TracePacket, offset: u64, depth: u32) {
        self.packets += 1;
        let seq_id = match packet.optional_trusted_packet_sequence_id {
            Some(trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(s)) => s,
            None => 0,
        };
        let flags = packet.sequence_flags();
        let first_seen = !self.sequences.contains_key(&seq_id);
        if packet.previous_packet_dropped() != 0
            && !packet.first_packet_on_sequence()
            && !first_seen
        {
            self.packets_lost += 1;
        }
        let seq = self.sequences.entry(seq_id).or_default();
        if flags & (trace_packet::SequenceFlags::SeqIncrementalStateCleared as u32) != 0
            || packet.incremental_state_cleared()
        {
            seq.clear();
        }
        if flags & (trace_packet::SequenceFlags::SeqNeedsIncrementalState as u32) != 0 && !seq.valid
        {
            self.needs_state_dropped += 1;
            return;
        }
        if let Some(defaults) = &packet.trace_packet_defaults {
            seq.default_clock = defaults.timestamp_clock_id;
            seq.default_track = defaults
                .track_event_defaults
                .as_ref()
                .and_then(|d| d.track_uuid);
        }
        if let Some(interned) = packet.interned_data {
            self.intern(seq_id, interned);
        }
        let timestamp = packet.timestamp;
        let clock = packet.timestamp_clock_id;
        match packet.data {
            Some(trace_packet::Data::TrackEvent(event)) => {
                let ts = self
                    .time(seq_id, timestamp, clock, &event)
                    .saturating_sub(self.time_offset);
                self.track_event(seq_id, ts, &event);
            }
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
            None => {
                // ftrace, Android, system stats …: not TrackEvent data.
                self.skipped_packets += 1;
            }
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
        event: &pb::TrackEvent,
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
        match event.timestamp {
            Some(track_event::Timestamp::TimestampAbsoluteUs(us)) => {
                let ns = us.saturating_mul(1000);
                seq.legacy_us_base = Some(ns);
                ns
            }
            Some(track_event::Timestamp::TimestampDeltaUs(us)) => {
                let ns = seq
                    .legacy_us_base
                    .unwrap_or(0)
                    .saturating_add(us.saturating_mul(1000));
                seq.legacy_us_base = Some(ns);
                ns
            }
            None => 0,
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

    fn event_track(&self, seq_id: u32, event: &pb::TrackEvent) -> Option<u64> {
        let seq = self.sequences.get(&seq_id);
        event
            .track_uuid
            .or_else(|| seq.and_then(|s| s.default_track))
    }

    fn track_event(&mut self, seq_id: u32, ts: i64, event: &pb::TrackEvent) {
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
        self.extra_counters(seq_id, ts, event);
        match event.r#type() {
            track_event::Type::SliceBegin => {
                self.begins += 1;
                let (name, cat) = self.name_and_cat(seq_id, event);
                let args = self.args(seq_id, &event.debug_annotations);
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
            track_event::Type::SliceEnd => {
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
            track_event::Type::Instant => {
                self.instants += 1;
                let (name, cat) = self.name_and_cat(seq_id, event);
                let args = self.args(seq_id, &event.debug_annotations);
                self.builder.push_instant(track, ts, name, cat, b't', args);
            }
            track_event::Type::Counter => {
                self.counters += 1;
                let value = match event.counter_value_field {
                    Some(track_event::CounterValueField::CounterValue(v)) => v as f64,
                    Some(track_event::CounterValueField::DoubleCounterValue(v)) => v,
                    None => 0.0,
                };
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
            track_event::Type::Unspecified => self.state_events += 1,
        }
    }

    fn extra_counters(&mut self, seq_id: u32, ts: i64, event: &pb::TrackEvent) {
        let ints = event
            .extra_counter_track_uuids
            .iter()
            .copied()
            .zip(event.extra_counter_values.iter().map(|&v| v as f64));
        let doubles = event
            .extra_double_counter_track_uuids
            .iter()
            .copied()
            .zip(event.extra_double_counter_values.iter().copied());
        let samples: Vec<(u64, f64)> = ints.chain(doubles).collect();
        if samples.is_empty() {
            return;
        }
        let _ = seq_id;
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

    fn flow_ends_of(&mut self, key: u64, event: &pb::TrackEvent) {
        let leaving = event.flow_ids.iter().chain(&event.flow_ids_old);
        let arriving = event
            .terminating_flow_ids
            .iter()
            .chain(&event.terminating_flow_ids_old);
        let ends: Vec<(u64, bool)> = leaving
            .map(|&id| (id, false))
            .chain(arriving.map(|&id| (id, true)))
            .collect();
        if !ends.is_empty() {
            self.flow_keys.insert(key);
        }
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

    fn name_and_cat(&mut self, seq_id: u32, event: &pb::TrackEvent) -> (StrId, CatId) {
        let name = match &event.name_field {
            Some(track_event::NameField::Name(n)) => self.builder.intern(n),
            Some(track_event::NameField::NameIid(iid)) => {
                match self.sequences.get(&seq_id).and_then(|s| s.names.get(iid)) {
                    Some(&id) => id,
                    None => self.builder.intern(""),
                }
            }
            None => self.builder.intern(""),
        };
        let cat = match (event.category_iids.as_slice(), event.categories.as_slice()) {
            ([iid], []) => self.category_iid(seq_id, *iid),
            ([], [one]) => self.builder.intern_cat(one),
            (iids, names) => {
                let seq = self.sequences.get(&seq_id);
                let mut joined: Vec<String> = iids
                    .iter()
                    .map(|iid| {
                        seq.and_then(|s| s.categories.get(iid))
                            .cloned()
                            .unwrap_or_default()
                    })
                    .collect();
                joined.extend(names.iter().cloned());
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
    fn args(&mut self, seq_id: u32, annotations: &[pb::DebugAnnotation]) -> ArgsRef {
        if annotations.is_empty() {
            return ArgsRef::NONE;
        }
        let start = self.args.len();
        let seq = self.sequences.get(&seq_id);
        let mut out = std::mem::take(&mut self.args);
        write_dict(&mut out, annotations, seq);
        let range = start..out.len();
        self.args = out;
        ArgsRef::new(range).unwrap_or(ArgsRef::NONE)
    }

    fn finish(mut self, path: &str) -> Result<Summary, IngestError> {
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
        let mut warn = |code: &'static str, offset: Option<u64>, message: String| {
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
                "damaged",
                Some(d.offset),
                format!(
                    "trace damaged at byte {} ({}): kept the {} packets before it, dropped the rest",
                    d.offset, d.reason, self.packets
                ),
            );
        }
        for d in &self.zlib_damage {
            warn(
                "damaged",
                Some(d.offset),
                format!(
                    "compressed packets at byte {} are damaged ({}): kept what inflated before it",
                    d.offset, d.reason
                ),
            );
        }
        if let Some((offset, reason)) = &self.first_bad_packet {
            warn(
                "damaged",
                Some(*offset),
                format!(
                    "skipped {} packets that do not decode (first at byte {offset}: {reason})",
                    self.bad_packets
                ),
            );
        }
        if self.needs_state_dropped > 0 {
            warn(
                "data_loss",
                None,
                format!(
                    "dropped {} packets that need incremental state their sequence never set up",
                    self.needs_state_dropped
                ),
            );
        }
        if self.packets_lost > 0 {
            warn(
                "data_loss",
                None,
                format!(
                    "the producer dropped packets before {} packets (previous_packet_dropped)",
                    self.packets_lost
                ),
            );
        }
        if self.skipped_packets > 0 {
            warn(
                "skipped_packets",
                None,
                format!(
                    "skipped {} packets that carry no TrackEvent data (ftrace, system and Android data …)",
                    self.skipped_packets
                ),
            );
        }
        if self.unmatched_ends > 0 {
            warn(
                "unmatched_end",
                None,
                format!(
                    "ignored {} SLICE_END events with no open slice on their track",
                    self.unmatched_ends
                ),
            );
        }
        if self.unclosed > 0 {
            warn(
                "unclosed_begin",
                None,
                format!(
                    "{} SLICE_BEGIN events had no END; closed at the last time seen on their track",
                    self.unclosed
                ),
            );
        }
        if self.unknown_tracks > 0 {
            warn(
                "unknown_track",
                None,
                format!(
                    "{} tracks were used before (or without) their descriptor",
                    self.unknown_tracks
                ),
            );
        }
        if self.state_events > 0 {
            warn(
                "unsupported_phase",
                None,
                format!(
                    "skipped {} track events of a type steplens does not model",
                    self.state_events
                ),
            );
        }
        if self.clocks.len() > 1 {
            warn(
                "mixed_clocks",
                None,
                format!(
                    "events use {} clocks (ids {:?}); their times are not converted between clocks",
                    self.clocks.len(),
                    self.clocks
                ),
            );
        }
        if kept == 0 {
            warn("empty", None, "the trace has no packets".into());
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
        Ok(Summary {
            events: self.events,
            by_phase,
            warnings,
        })
    }
}

fn write_name(out: &mut Vec<u8>, a: &pb::DebugAnnotation, seq: Option<&Sequence>) {
    match &a.name_field {
        Some(debug_annotation::NameField::Name(n)) => write_str(out, n),
        Some(debug_annotation::NameField::NameIid(iid)) => {
            match seq.and_then(|s| s.annotation_names.get(iid)) {
                Some(name) => write_str(out, name),
                None => write_str(out, &format!("arg_{iid}")),
            }
        }
        None => write_str(out, ""),
    }
}

fn write_dict(out: &mut Vec<u8>, entries: &[pb::DebugAnnotation], seq: Option<&Sequence>) {
    out.push(b'{');
    for (i, a) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_name(out, a, seq);
        out.push(b':');
        write_value(out, a, seq, 0);
    }
    out.push(b'}');
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Nested annotations deeper than this are written as `null` (a guard against hostile input).
const MAX_ANNOTATION_DEPTH: u32 = 64;

fn write_value(out: &mut Vec<u8>, a: &pb::DebugAnnotation, seq: Option<&Sequence>, depth: u32) {
    if depth > MAX_ANNOTATION_DEPTH {
        out.extend_from_slice(b"null");
        return;
    }
    match &a.value {
        Some(debug_annotation::Value::BoolValue(b)) => {
            out.extend_from_slice(if *b { b"true" } else { b"false" });
        }
        Some(debug_annotation::Value::UintValue(v)) => {
            let _ = serde_json::to_writer(&mut *out, v);
        }
        Some(debug_annotation::Value::IntValue(v)) => {
            let _ = serde_json::to_writer(&mut *out, v);
        }
        Some(debug_annotation::Value::DoubleValue(v)) => {
            if v.is_finite() {
                let _ = serde_json::to_writer(&mut *out, v);
            } else {
                write_str(out, &v.to_string());
            }
        }
        Some(debug_annotation::Value::StringValue(s)) => write_str(out, s),
        Some(debug_annotation::Value::PointerValue(p)) => write_str(out, &format!("{p:#x}")),
        Some(debug_annotation::Value::LegacyJsonValue(json)) => {
            if serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok() {
                out.extend_from_slice(json.as_bytes());
            } else {
                write_str(out, json);
            }
        }
        Some(debug_annotation::Value::StringValueIid(iid)) => {
            let s = seq.and_then(|s| s.strings.get(iid));
            write_str(
                out,
                &s.map_or_else(String::new, |b| String::from_utf8_lossy(b).into_owned()),
            );
        }
        None if !a.dict_entries.is_empty() => {
            out.push(b'{');
            for (i, e) in a.dict_entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_name(out, e, seq);
                out.push(b':');
                write_value(out, e, seq, depth + 1);
            }
            out.push(b'}');
        }
        None if !a.array_values.is_empty() => {
            out.push(b'[');
            for (i, e) in a.array_values.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, e, seq, depth + 1);
            }
            out.push(b']');
        }
        // No value and no entries (the writer sends empty objects and arrays as JSON text).
        None => out.extend_from_slice(b"null"),
    }
}
