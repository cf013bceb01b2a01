//! Reading a Perfetto TrackEvent trace into the [`TimelineBuilder`], one packet at a time from
//! the (mapped) bytes: the whole `Trace` message is never decoded at once.
//!
//! Per sequence (`trusted_packet_sequence_id`) the reader keeps the interned names, categories,
//! annotation names and strings, the packet defaults and the incremental clocks, and resets them
//! when a packet clears the incremental state. Slices are rebuilt from BEGIN/END pairs with one
//! stack per Perfetto track; debug annotations become the slice's args, re-encoded as JSON text
//! (on a second thread for large inputs, see [`args`]) so the Timeline's lazy args API works
//! as for JSON traces.

use std::io::Read as _;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use prost::Message;
use rustc_hash::FxHashMap;

use self::args::ArgsPipe;
use super::event::{Event, Field, Fields};
use super::proto::{self as pb, trace_packet};
use super::{TraceNote, TrackNote};
use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::format::FormatId;
use crate::model::{ArgsRef, CatId, LaneId, StrId, TrackId};
use crate::reader::{ReadInput, ReadSummary};
use crate::source::SourceData;

mod args;
mod events;
mod finish;
mod tracks;

/// Largest inflated size of one `compressed_packets` field (a guard against zlib bombs).
const MAX_INFLATED: u64 = 1 << 30;
/// Nesting of `compressed_packets` inside `compressed_packets` that is followed.
const MAX_COMPRESSION_DEPTH: u32 = 2;
/// Default clock of `TracePacket.timestamp`: `BUILTIN_CLOCK_BOOTTIME`.
const BOOTTIME: u32 = 6;
/// Smallest input whose args are encoded on a second thread.
const MIN_THREADED_ARGS: usize = 1 << 20;

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
    let threaded = data.bytes().len() >= MIN_THREADED_ARGS && crate::spare_core();
    let bytes = Bytes::from_owner(Owner(Arc::clone(data)));
    // Sized so that neither the args text nor the slice columns (a BEGIN/END pair takes at
    // least ~24 bytes) need to grow and copy: the JSON text spells out the names the protobuf
    // interns (1.07x the file on a torch CPU trace). Reserved capacity is address space until
    // written.
    let args = ArgsPipe::new(threaded, bytes.len().saturating_mul(2));
    let mut reader = Reader::new(builder, source, args);
    reader.builder.reserve_slices(bytes.len() / 24);
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
    /// Boxed: a file may hold a million descriptors, few with a note.
    note: Option<Box<TrackNote>>,
}

/// The incremental state of one packet sequence.
#[derive(Debug, Default)]
struct Sequence {
    /// Whether incremental state was ever cleared (packets needing it are valid).
    valid: bool,
    names: FxHashMap<u64, StrId>,
    categories: FxHashMap<u64, String>,
    category_ids: FxHashMap<u64, CatId>,
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
    args: ArgsPipe,
    /// Slices and instants the builder held before this input: the ones after it carry
    /// args placeholders until the encoder is done.
    first_slice: usize,
    first_instant: usize,
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
    /// Index of the critical-path category in the note's flow categories (its flows are
    /// skipped).
    skipped_flow_cat: Option<u64>,
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
    fn new(builder: &'b mut TimelineBuilder, source: u16, args: ArgsPipe) -> Self {
        let (first_slice, first_instant) = (builder.slice_count(), builder.instant_count());
        Self {
            builder,
            source,
            sequences: FxHashMap::default(),
            descriptors: FxHashMap::default(),
            lanes: FxHashMap::default(),
            noted: FxHashMap::default(),
            stacks: FxHashMap::default(),
            args,
            first_slice,
            first_instant,
            next_key: 0,
            flow_ends: FxHashMap::default(),
            flows: Vec::new(),
            flow_slices: FxHashMap::default(),
            flow_keys: rustc_hash::FxHashSet::default(),
            note: None,
            time_offset: 0,
            flow_cats: Vec::new(),
            skipped_flow_cat: None,
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
            // Past a limit the load fails: reading on would only grow what it holds.
            if self.builder.limit_was_hit() {
                return Ok(());
            }
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
            self.args.use_bytes(&whole);
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
                let event_at = packet.start + r.start;
                let event = body
                    .get(r)
                    .and_then(Event::parse)
                    .ok_or("malformed TrackEvent")?;
                let ts = self
                    .time(seq_id, h.timestamp, h.clock, &event)
                    .saturating_sub(self.time_offset);
                self.track_event(seq_id, ts, &event, event_at);
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
            self.args.clear(seq_id);
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
