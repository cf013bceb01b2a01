//! Writing a [`Timeline`] as a Perfetto TrackEvent trace (`.pftrace`) that ui.perfetto.dev
//! opens, with optional [`Overlay`] tracks (analysis annotations) drawn above it.
//!
//! Layout: host threads are thread tracks under their process; device engines are named
//! tracks under one group per device, in Timeline order (`child_ordering = EXPLICIT` and
//! `sibling_order_rank`); counters are counter tracks; other lanes are named tracks under a
//! group. Slices are BEGIN/END pairs. A Perfetto track must nest strictly, so a lane whose
//! slices overlap without nesting (overlapping kernels) is split over extra tracks
//! (`NAME (overlap N)`), which the reader merges back. Names, categories and annotation
//! names are interned on one packet sequence. Every track carries a `steplens track {…}` note
//! in its description so that reading the file back rebuilds the Timeline exactly.
//!
//! Packets are encoded one at a time into a reused buffer: memory does not grow with the file.

use std::io::{self, Write};

use prost::Message;
use rustc_hash::FxHashMap;

use super::proto::{self as pb, debug_annotation, trace_packet, track_descriptor, track_event};
use super::{
    FLOW_CAT_SHIFT, META_NOTE, META_TRACK, NOTE_VERSION, TRACK_NOTE, TraceNote, TrackNote,
};
use crate::json::Cursor;
use crate::model::{CatId, LaneId, SliceId, StrId, Timeline, TrackKind};

/// Extra tracks written above the Timeline's own (findings, steps).
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    /// The tracks, in display order.
    pub tracks: Vec<OverlayTrack>,
}

/// One annotation track.
#[derive(Debug, Clone, Default)]
pub struct OverlayTrack {
    /// Track name.
    pub name: String,
    /// Its slices (any order; overlapping slices are spread over extra tracks).
    pub slices: Vec<OverlaySlice>,
}

/// One annotation slice.
#[derive(Debug, Clone, Default)]
pub struct OverlaySlice {
    /// Start, ns (Timeline clock).
    pub start: i64,
    /// Duration, ns.
    pub dur: i64,
    /// Name shown on the slice.
    pub name: String,
    /// Shown as the slice's args.
    pub annotations: Vec<(String, Annotation)>,
    /// Timeline slices this slice points at (drawn as flow arrows).
    pub flows_to: Vec<SliceId>,
}

/// An annotation value.
#[derive(Debug, Clone, PartialEq)]
pub enum Annotation {
    /// Text.
    Str(String),
    /// Integer.
    Int(i64),
    /// Float.
    Double(f64),
    /// Boolean.
    Bool(bool),
}

/// What [`write_timeline`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Bytes written.
    pub bytes: u64,
    /// Trace packets written.
    pub packets: u64,
    /// Perfetto tracks described (groups and overlap layers included).
    pub tracks: u64,
    /// Timeline slices written.
    pub slices: u64,
    /// Overlay slices written.
    pub overlay_slices: u64,
    /// Flow arrows written (Timeline flows and overlay flows).
    pub flows: u64,
    /// Instants written.
    pub instants: u64,
    /// Counter samples written.
    pub counter_samples: u64,
}

/// The one packet sequence of the file.
const SEQUENCE: u32 = 1;
const SEQ_CLEARED: u32 = trace_packet::SequenceFlags::SeqIncrementalStateCleared as u32;
const SEQ_NEEDS: u32 = trace_packet::SequenceFlags::SeqNeedsIncrementalState as u32;
/// Flow category index of overlay flows (no Timeline category).
const OVERLAY_FLOW_CAT: u64 = 0xFFFF;

/// Writes `timeline` (and `overlay`, when given) to `out` as a Perfetto trace.
///
/// # Errors
/// When writing to `out` fails.
pub fn write_timeline(
    timeline: &Timeline,
    overlay: Option<&Overlay>,
    out: &mut dyn Write,
) -> io::Result<WriteStats> {
    let mut w = Writer::new(timeline, out);
    w.meta()?;
    let incoming = w.flow_ends(overlay);
    w.incoming = incoming;
    if let Some(overlay) = overlay {
        w.overlay(overlay)?;
    }
    for id in 0..timeline.tracks.len() {
        w.track(id)?;
    }
    w.out.flush()?;
    w.stats.bytes = w.out.written;
    Ok(w.stats)
}

struct Counting<'o> {
    inner: &'o mut dyn Write,
    written: u64,
}

impl Counting<'_> {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.written += buf.len() as u64;
        self.inner.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

struct Writer<'t, 'o> {
    t: &'t Timeline,
    out: Counting<'o>,
    buf: Vec<u8>,
    /// Scratch buffers of the hand-encoded slice packets: the TrackEvent, the packet, and
    /// one per nesting level of annotations.
    ev: Vec<u8>,
    pkt: Vec<u8>,
    pool: Vec<Vec<u8>>,
    stats: WriteStats,
    next_uuid: u64,
    names_sent: Vec<bool>,
    cats_sent: Vec<bool>,
    /// Overlay names and annotation names: text → iid.
    extra_names: FxHashMap<String, u64>,
    annotation_names: FxHashMap<String, u64>,
    /// Interned data waiting for the next packet.
    pending: pb::InternedData,
    has_pending: bool,
    /// Flow ids leaving each slice: (slice, id), sorted.
    outgoing: Vec<(SliceId, u64)>,
    /// Flow ids arriving at each slice: (slice, id), sorted.
    incoming: Vec<(SliceId, u64)>,
    /// Process track uuids by (source, pid).
    processes: FxHashMap<(u16, LaneId), (u64, i32)>,
    /// Group track uuids by (source, kind group, process name).
    groups: FxHashMap<(u16, u8, String), u64>,
    /// Next `sibling_order_rank` under each parent.
    ranks: FxHashMap<u64, i32>,
    /// Thread ids already used per pid (Perfetto merges tracks of the same thread).
    threads: rustc_hash::FxHashSet<(i32, i64)>,
    next_pid: i32,
    next_tid: i64,
    flow_cat_index: FxHashMap<CatId, u64>,
    time_offset: i64,
}

impl<'t, 'o> Writer<'t, 'o> {
    fn new(t: &'t Timeline, out: &'o mut dyn Write) -> Self {
        let min_time = t
            .slices
            .start
            .iter()
            .chain(&t.instants.ts)
            .chain(&t.counters.ts)
            .copied()
            .min()
            .unwrap_or(0);
        Self {
            t,
            out: Counting {
                inner: out,
                written: 0,
            },
            buf: Vec::with_capacity(256),
            ev: Vec::with_capacity(256),
            pkt: Vec::with_capacity(256),
            pool: Vec::new(),
            stats: WriteStats::default(),
            next_uuid: 1,
            names_sent: vec![false; t.strings.len()],
            cats_sent: vec![false; t.categories.len()],
            extra_names: FxHashMap::default(),
            annotation_names: FxHashMap::default(),
            pending: pb::InternedData::default(),
            has_pending: false,
            outgoing: Vec::new(),
            incoming: Vec::new(),
            processes: FxHashMap::default(),
            groups: FxHashMap::default(),
            ranks: FxHashMap::default(),
            threads: rustc_hash::FxHashSet::default(),
            next_pid: 0x4000_0000,
            next_tid: 0x4000_0000,
            flow_cat_index: FxHashMap::default(),
            // Perfetto timestamps are unsigned: a Timeline reaching below 0 is shifted.
            time_offset: (-min_time).max(0),
        }
    }

    fn uuid(&mut self) -> u64 {
        let id = self.next_uuid;
        self.next_uuid += 1;
        id
    }

    fn rank_under(&mut self, parent: u64) -> i32 {
        let slot = self.ranks.entry(parent).or_insert(0);
        *slot += 1;
        *slot
    }

    fn emit(&mut self, mut packet: pb::TracePacket) -> io::Result<()> {
        packet.optional_trusted_packet_sequence_id =
            Some(trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(SEQUENCE));
        if self.has_pending {
            packet.interned_data = Some(std::mem::take(&mut self.pending));
            self.has_pending = false;
        }
        if packet.sequence_flags.is_none() {
            packet.sequence_flags = Some(SEQ_NEEDS);
        }
        self.buf.clear();
        self.buf.push(0x0A);
        prost::encoding::encode_varint(packet.encoded_len() as u64, &mut self.buf);
        // Encoding into a Vec only fails for lack of capacity, which a Vec grows.
        packet
            .encode(&mut self.buf)
            .map_err(|e| io::Error::other(e.to_string()))?;
        self.stats.packets += 1;
        self.out.write_all(&self.buf)
    }

    fn ts(&self, ns: i64) -> u64 {
        u64::try_from(ns.saturating_add(self.time_offset)).unwrap_or(0)
    }

    /// First packet: clears the sequence's state and describes the trace (flow categories,
    /// device) for steplens' reader.
    fn meta(&mut self) -> io::Result<()> {
        let mut categories: Vec<CatId> = self.t.flows.iter().map(|f| f.cat).collect();
        categories.sort_unstable();
        categories.dedup();
        for (i, &c) in categories.iter().enumerate() {
            self.flow_cat_index.insert(c, i as u64);
        }
        let note = TraceNote {
            version: NOTE_VERSION,
            flow_categories: categories
                .iter()
                .map(|&c| self.t.categories.name(c).to_owned())
                .collect(),
            device_kind: self.t.device.kind.as_str().to_owned(),
            device_name: self.t.device.name.clone(),
            device_memory_bytes: self.t.device.memory_bytes,
            device_compute_capability: self.t.device.compute_capability.clone(),
            time_offset_ns: self.time_offset,
        };
        let uuid = self.uuid();
        let descriptor = pb::TrackDescriptor {
            uuid: Some(uuid),
            static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name(
                META_TRACK.to_owned(),
            )),
            description: Some(format!(
                "{META_NOTE}{}",
                serde_json::to_string(&note).unwrap_or_default()
            )),
            ..Default::default()
        };
        self.stats.tracks += 1;
        self.emit(pb::TracePacket {
            sequence_flags: Some(SEQ_CLEARED | SEQ_NEEDS),
            // An empty interned table marks the start of the sequence's state.
            interned_data: Some(pb::InternedData::default()),
            trace_packet_defaults: Some(pb::TracePacketDefaults::default()),
            data: Some(trace_packet::Data::TrackDescriptor(descriptor)),
            ..Default::default()
        })
    }

    /// Assigns flow ids; returns the arriving ends (Timeline and overlay flows).
    fn flow_ends(&mut self, overlay: Option<&Overlay>) -> Vec<(SliceId, u64)> {
        let mut incoming = Vec::with_capacity(self.t.flows.len());
        self.outgoing.reserve(self.t.flows.len());
        for (k, f) in self.t.flows.iter().enumerate() {
            let cat = self.flow_cat_index.get(&f.cat).copied().unwrap_or(0);
            let id = (cat << FLOW_CAT_SHIFT) | (k as u64 + 1);
            self.outgoing.push((f.from, id));
            incoming.push((f.to, id));
        }
        let mut k = 0u64;
        for track in overlay.map(|o| o.tracks.as_slice()).unwrap_or(&[]) {
            for slice in &track.slices {
                for &to in &slice.flows_to {
                    k += 1;
                    incoming.push((to, (OVERLAY_FLOW_CAT << FLOW_CAT_SHIFT) | k));
                }
            }
        }
        self.outgoing.sort_unstable();
        incoming.sort_unstable();
        incoming
    }

    fn name_iid(&mut self, id: StrId) -> u64 {
        if let Some(sent) = self.names_sent.get_mut(id as usize)
            && !*sent
        {
            *sent = true;
            self.pending.event_names.push(pb::EventName {
                iid: Some(u64::from(id) + 1),
                name: Some(self.t.strings.get(id).to_owned()),
            });
            self.has_pending = true;
        }
        u64::from(id) + 1
    }

    fn extra_name_iid(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.extra_names.get(name) {
            return iid;
        }
        let iid = self.t.strings.len() as u64 + 1 + self.extra_names.len() as u64;
        self.extra_names.insert(name.to_owned(), iid);
        self.pending.event_names.push(pb::EventName {
            iid: Some(iid),
            name: Some(name.to_owned()),
        });
        self.has_pending = true;
        iid
    }

    fn cat_iid(&mut self, id: CatId) -> u64 {
        if let Some(sent) = self.cats_sent.get_mut(id as usize)
            && !*sent
        {
            *sent = true;
            self.pending.event_categories.push(pb::EventCategory {
                iid: Some(u64::from(id) + 1),
                name: Some(self.t.categories.name(id).to_owned()),
            });
            self.has_pending = true;
        }
        u64::from(id) + 1
    }

    fn annotation_name_iid(&mut self, name: &str) -> u64 {
        if let Some(&iid) = self.annotation_names.get(name) {
            return iid;
        }
        let iid = self.annotation_names.len() as u64 + 1;
        self.annotation_names.insert(name.to_owned(), iid);
        self.pending
            .debug_annotation_names
            .push(pb::DebugAnnotationName {
                iid: Some(iid),
                name: Some(name.to_owned()),
            });
        self.has_pending = true;
        iid
    }

    fn describe(&mut self, descriptor: pb::TrackDescriptor) -> io::Result<()> {
        self.stats.tracks += 1;
        self.emit(pb::TracePacket {
            data: Some(trace_packet::Data::TrackDescriptor(descriptor)),
            ..Default::default()
        })
    }

    fn named(name: &str) -> Option<track_descriptor::StaticOrDynamicName> {
        Some(track_descriptor::StaticOrDynamicName::Name(name.to_owned()))
    }

    /// A top-level group track (device, lane group), created on first use.
    fn group(&mut self, source: u16, kind: u8, name: &str) -> io::Result<u64> {
        let key = (source, kind, name.to_owned());
        if let Some(&uuid) = self.groups.get(&key) {
            return Ok(uuid);
        }
        let uuid = self.uuid();
        let rank = self.rank_under(0);
        self.describe(pb::TrackDescriptor {
            uuid: Some(uuid),
            static_or_dynamic_name: Self::named(name),
            child_ordering: Some(track_descriptor::ChildTracksOrdering::Explicit as i32),
            sibling_order_rank: Some(rank),
            ..Default::default()
        })?;
        self.groups.insert(key, uuid);
        Ok(uuid)
    }

    /// The process track of a host lane, created on first use.
    fn process(&mut self, source: u16, pid: LaneId, name: &str) -> io::Result<(u64, i32)> {
        if let Some(&p) = self.processes.get(&(source, pid)) {
            return Ok(p);
        }
        let taken = |p: i32, w: &Self| w.processes.values().any(|&(_, q)| q == p);
        let number = match pid {
            LaneId::Int(v) => i32::try_from(v).ok().filter(|&p| !taken(p, self)),
            LaneId::Str(_) => None,
        };
        let number = match number {
            Some(p) => p,
            None => {
                self.next_pid += 1;
                self.next_pid
            }
        };
        let uuid = self.uuid();
        let rank = self.rank_under(0);
        self.describe(pb::TrackDescriptor {
            uuid: Some(uuid),
            process: Some(pb::ProcessDescriptor {
                pid: Some(number),
                process_name: Some(name.to_owned()),
                ..Default::default()
            }),
            child_ordering: Some(track_descriptor::ChildTracksOrdering::Explicit as i32),
            sibling_order_rank: Some(rank),
            ..Default::default()
        })?;
        self.processes.insert((source, pid), (uuid, number));
        Ok((uuid, number))
    }

    fn note(&self, id: usize, name: &str) -> String {
        let track = &self.t.tracks[id];
        let (engine, device) = match &track.kind {
            TrackKind::DeviceEngine { class, device } => (Some(class.as_str().to_owned()), *device),
            _ => (None, None),
        };
        let note = TrackNote {
            id: id as u32,
            kind: track.kind.label().to_owned(),
            engine,
            device,
            pid: super::lane_to_json(track.pid, &self.t.strings),
            tid: super::lane_to_json(track.tid, &self.t.strings),
            name: name.to_owned(),
            process: track.process_name.clone(),
            sort: track.sort_key,
        };
        format!(
            "{TRACK_NOTE}{}",
            serde_json::to_string(&note).unwrap_or_default()
        )
    }

    /// Describes the Perfetto tracks of Timeline track `id` (one per overlap layer) and writes
    /// its slices, instants and counter samples.
    fn track(&mut self, id: usize) -> io::Result<()> {
        let t = self.t;
        let track = &t.tracks[id];
        let range = track.slices.start as usize..track.slices.end as usize;
        let (layer_of, layers) =
            layers(&t.slices.start[range.clone()], &t.slices.dur[range.clone()]);
        let note = self.note(id, &track.name);
        let mut uuids = Vec::with_capacity(layers as usize);
        match &track.kind {
            TrackKind::HostThread => {
                let (process, pid) = self.process(track.source, track.pid, &track.process_name)?;
                let mut tid = match track.tid {
                    LaneId::Int(v) => v,
                    LaneId::Str(_) => {
                        self.next_tid += 1;
                        self.next_tid
                    }
                };
                while !self.threads.insert((pid, tid)) {
                    self.next_tid += 1;
                    tid = self.next_tid;
                }
                let uuid = self.uuid();
                let rank = self.rank_under(process);
                self.describe(pb::TrackDescriptor {
                    uuid: Some(uuid),
                    parent_uuid: Some(process),
                    thread: Some(pb::ThreadDescriptor {
                        pid: Some(pid),
                        tid: Some(tid),
                        thread_name: Some(track.name.clone()),
                    }),
                    description: Some(note.clone()),
                    child_ordering: Some(track_descriptor::ChildTracksOrdering::Explicit as i32),
                    sibling_order_rank: Some(rank),
                    ..Default::default()
                })?;
                uuids.push(uuid);
                // Overlap layers of a thread nest under it.
                for layer in 1..layers {
                    let child = self.uuid();
                    let rank = self.rank_under(uuid);
                    self.describe(pb::TrackDescriptor {
                        uuid: Some(child),
                        parent_uuid: Some(uuid),
                        static_or_dynamic_name: Self::named(&format!(
                            "{} (overlap {layer})",
                            track.name
                        )),
                        description: Some(note.clone()),
                        sibling_order_rank: Some(rank),
                        ..Default::default()
                    })?;
                    uuids.push(child);
                }
            }
            kind => {
                let group_kind = match kind {
                    TrackKind::DeviceEngine { .. } => 1,
                    TrackKind::Counter => 2,
                    _ => 3,
                };
                let parent = match (kind, self.processes.get(&(track.source, track.pid))) {
                    // Counters of a process sit with its threads.
                    (TrackKind::Counter, Some(&(uuid, _))) => uuid,
                    _ => self.group(track.source, group_kind, &track.process_name)?,
                };
                for layer in 0..layers.max(1) {
                    let uuid = self.uuid();
                    let rank = self.rank_under(parent);
                    let name = if layer == 0 {
                        track.name.clone()
                    } else {
                        format!("{} (overlap {layer})", track.name)
                    };
                    self.describe(pb::TrackDescriptor {
                        uuid: Some(uuid),
                        parent_uuid: Some(parent),
                        static_or_dynamic_name: Self::named(&name),
                        description: Some(note.clone()),
                        counter: (*kind == TrackKind::Counter).then(pb::CounterDescriptor::default),
                        sibling_order_rank: Some(rank),
                        ..Default::default()
                    })?;
                    uuids.push(uuid);
                }
            }
        }
        for (layer, &uuid) in uuids.iter().enumerate() {
            self.slices(uuid, range.clone(), &layer_of, layer as u32)?;
        }
        let main = uuids.first().copied().unwrap_or(0);
        self.instants(id as u32, main)?;
        self.counters(id as u32, main)
    }

    /// BEGIN/END pairs of the slices of one layer.
    fn slices(
        &mut self,
        uuid: u64,
        range: std::ops::Range<usize>,
        layer_of: &[u32],
        layer: u32,
    ) -> io::Result<()> {
        let t = self.t;
        let mut stack: Vec<i64> = Vec::new();
        for (k, i) in range.enumerate() {
            if layer_of[k] != layer {
                continue;
            }
            let start = t.slices.start[i];
            let end = start + t.slices.dur[i];
            while let Some(&top) = stack.last()
                && top <= start
            {
                stack.pop();
                self.end(uuid, top)?;
            }
            self.begin(uuid, i as SliceId)?;
            stack.push(end);
        }
        while let Some(top) = stack.pop() {
            self.end(uuid, top)?;
        }
        Ok(())
    }

    /// The BEGIN packet of slice `i`, encoded by hand: this is the bulk of a file, and
    /// building prost messages (and parsing args into JSON values) for it costs 3x the time.
    fn begin(&mut self, uuid: u64, i: SliceId) -> io::Result<()> {
        let t = self.t;
        let idx = i as usize;
        let name = self.name_iid(t.slices.name[idx]);
        let cat = self.cat_iid(t.slices.cat[idx]);
        let mut ev = std::mem::take(&mut self.ev);
        ev.clear();
        wire::uint(&mut ev, 9, track_event::Type::SliceBegin as u64);
        wire::uint(&mut ev, 11, uuid);
        wire::uint(&mut ev, 10, name);
        wire::uint(&mut ev, 3, cat);
        if let Some(raw) = t.args_raw(i) {
            let mark = ev.len();
            // Args that are not a well-formed JSON object are left out, as `Timeline::args`
            // would not decode them either.
            if self.json_annotations(raw, &mut ev).is_none() {
                ev.truncate(mark);
            }
        }
        for list in [0, 1] {
            let (ends, field) = if list == 0 {
                (&self.outgoing, 47)
            } else {
                (&self.incoming, 48)
            };
            let from = ends.partition_point(|&(s, _)| s < i);
            for &(_, id) in ends[from..].iter().take_while(|&&(s, _)| s == i) {
                wire::fixed64(&mut ev, field, id);
                if list == 0 {
                    self.stats.flows += 1;
                }
            }
        }
        self.stats.slices += 1;
        let ts = self.ts(t.slices.start[idx]);
        let result = self.event_packet(ts, &ev);
        self.ev = ev;
        result
    }

    /// Frames a TrackEvent (already encoded) in a packet on the sequence, with any pending
    /// interned data, and writes it.
    fn event_packet(&mut self, ts: u64, event: &[u8]) -> io::Result<()> {
        let mut pkt = std::mem::take(&mut self.pkt);
        pkt.clear();
        wire::uint(&mut pkt, 8, ts);
        wire::uint(&mut pkt, 10, u64::from(SEQUENCE));
        wire::uint(&mut pkt, 13, u64::from(SEQ_NEEDS));
        if self.has_pending {
            let interned = std::mem::take(&mut self.pending).encode_to_vec();
            self.has_pending = false;
            wire::bytes(&mut pkt, 12, &interned);
        }
        wire::bytes(&mut pkt, 11, event);
        self.buf.clear();
        wire::bytes(&mut self.buf, 1, &pkt);
        self.pkt = pkt;
        self.stats.packets += 1;
        self.out.write_all(&self.buf)
    }

    /// Appends the members of the JSON object `raw` to `ev` as `debug_annotations`; `None`
    /// when `raw` is not a well-formed object.
    fn json_annotations(&mut self, raw: &[u8], ev: &mut Vec<u8>) -> Option<()> {
        let mut cur = Cursor::new(raw);
        cur.expect(b'{', "{").ok()?;
        if cur.peek() == Some(b'}') {
            return Some(());
        }
        loop {
            let key = cur.string().ok()?;
            cur.expect(b':', ":").ok()?;
            let mut entry = self.pool.pop().unwrap_or_default();
            entry.clear();
            wire::uint(&mut entry, 1, self.annotation_name_iid(&key));
            let ok = self.json_value(&mut cur, &mut entry, 0);
            if ok.is_some() {
                wire::bytes(ev, 4, &entry);
            }
            self.pool.push(entry);
            ok?;
            if !cur.next_member(b'}', ", or }").ok()? {
                return Some(());
            }
        }
    }

    /// Writes one JSON value as the value fields of a DebugAnnotation.
    fn json_value(&mut self, cur: &mut Cursor<'_>, out: &mut Vec<u8>, depth: u32) -> Option<()> {
        if depth > 64 {
            return None;
        }
        match cur.peek()? {
            b'"' => {
                let s = cur.string().ok()?;
                wire::bytes(out, 6, s.as_bytes());
            }
            b'{' => {
                cur.expect(b'{', "{").ok()?;
                if cur.peek() == Some(b'}') {
                    cur.expect(b'}', "}").ok()?;
                    // Empty containers have no entries to tell them apart: sent as JSON text.
                    wire::bytes(out, 9, b"{}");
                    return Some(());
                }
                loop {
                    let key = cur.string().ok()?;
                    cur.expect(b':', ":").ok()?;
                    let mut entry = self.pool.pop().unwrap_or_default();
                    entry.clear();
                    wire::uint(&mut entry, 1, self.annotation_name_iid(&key));
                    let ok = self.json_value(cur, &mut entry, depth + 1);
                    wire::bytes(out, 11, &entry);
                    self.pool.push(entry);
                    ok?;
                    if !cur.next_member(b'}', ", or }").ok()? {
                        break;
                    }
                }
            }
            b'[' => {
                cur.expect(b'[', "[").ok()?;
                if cur.peek() == Some(b']') {
                    cur.expect(b']', "]").ok()?;
                    wire::bytes(out, 9, b"[]");
                    return Some(());
                }
                loop {
                    let mut entry = self.pool.pop().unwrap_or_default();
                    entry.clear();
                    let ok = self.json_value(cur, &mut entry, depth + 1);
                    wire::bytes(out, 12, &entry);
                    self.pool.push(entry);
                    ok?;
                    if !cur.next_member(b']', ", or ]").ok()? {
                        break;
                    }
                }
            }
            _ => {
                let text = cur.scalar_text().ok()?;
                match text {
                    b"true" => wire::uint(out, 2, 1),
                    b"false" => wire::uint(out, 2, 0),
                    b"null" => wire::bytes(out, 9, b"null"),
                    _ => number(text, out)?,
                }
            }
        }
        Some(())
    }

    fn end(&mut self, uuid: u64, at: i64) -> io::Result<()> {
        let mut ev = std::mem::take(&mut self.ev);
        ev.clear();
        wire::uint(&mut ev, 9, track_event::Type::SliceEnd as u64);
        wire::uint(&mut ev, 11, uuid);
        let result = self.event_packet(self.ts(at), &ev);
        self.ev = ev;
        result
    }

    fn instants(&mut self, track: u32, uuid: u64) -> io::Result<()> {
        let t = self.t;
        let list = &t.instants.track;
        let from = list.partition_point(|&x| x < track);
        let to = list.partition_point(|&x| x <= track);
        for i in from..to {
            let name = self.name_iid(t.instants.name[i]);
            let cat = self.cat_iid(t.instants.cat[i]);
            let debug_annotations = match t
                .resolve_args(t.tracks[track as usize].source, t.instants.args[i])
                .and_then(|raw| serde_json::from_slice(raw).ok())
            {
                Some(map) => self.annotations(&map),
                None => Vec::new(),
            };
            self.stats.instants += 1;
            let event = pb::TrackEvent {
                r#type: Some(track_event::Type::Instant as i32),
                track_uuid: Some(uuid),
                name_field: Some(track_event::NameField::NameIid(name)),
                category_iids: vec![cat],
                debug_annotations,
                ..Default::default()
            };
            self.emit(pb::TracePacket {
                timestamp: Some(self.ts(t.instants.ts[i])),
                data: Some(trace_packet::Data::TrackEvent(event)),
                ..Default::default()
            })?;
        }
        Ok(())
    }

    fn counters(&mut self, track: u32, uuid: u64) -> io::Result<()> {
        let t = self.t;
        let list = &t.counters.track;
        let from = list.partition_point(|&x| x < track);
        let to = list.partition_point(|&x| x <= track);
        for i in from..to {
            self.stats.counter_samples += 1;
            let event = pb::TrackEvent {
                r#type: Some(track_event::Type::Counter as i32),
                track_uuid: Some(uuid),
                counter_value_field: Some(track_event::CounterValueField::DoubleCounterValue(
                    t.counters.value[i],
                )),
                ..Default::default()
            };
            self.emit(pb::TracePacket {
                timestamp: Some(self.ts(t.counters.ts[i])),
                data: Some(trace_packet::Data::TrackEvent(event)),
                ..Default::default()
            })?;
        }
        Ok(())
    }

    fn annotations(
        &mut self,
        map: &serde_json::Map<String, serde_json::Value>,
    ) -> Vec<pb::DebugAnnotation> {
        map.iter()
            .map(|(k, v)| {
                let mut a = self.annotation(v);
                a.name_field = Some(debug_annotation::NameField::NameIid(
                    self.annotation_name_iid(k),
                ));
                a
            })
            .collect()
    }

    fn annotation(&mut self, v: &serde_json::Value) -> pb::DebugAnnotation {
        use serde_json::Value;
        let mut a = pb::DebugAnnotation::default();
        let legacy = |text: &str| Some(debug_annotation::Value::LegacyJsonValue(text.to_owned()));
        match v {
            Value::Null => a.value = legacy("null"),
            Value::Bool(b) => a.value = Some(debug_annotation::Value::BoolValue(*b)),
            Value::Number(n) => {
                a.value = if let Some(i) = n.as_i64() {
                    Some(debug_annotation::Value::IntValue(i))
                } else if let Some(u) = n.as_u64() {
                    Some(debug_annotation::Value::UintValue(u))
                } else {
                    Some(debug_annotation::Value::DoubleValue(
                        n.as_f64().unwrap_or(0.0),
                    ))
                };
            }
            Value::String(s) => a.value = Some(debug_annotation::Value::StringValue(s.clone())),
            // Empty containers have no entries to tell them apart: sent as JSON text.
            Value::Array(items) if items.is_empty() => a.value = legacy("[]"),
            Value::Object(map) if map.is_empty() => a.value = legacy("{}"),
            Value::Array(items) => {
                a.array_values = items.iter().map(|item| self.annotation(item)).collect();
            }
            Value::Object(map) => a.dict_entries = self.annotations(map),
        }
        a
    }

    fn overlay_annotation(&mut self, name: &str, value: &Annotation) -> pb::DebugAnnotation {
        pb::DebugAnnotation {
            name_field: Some(debug_annotation::NameField::NameIid(
                self.annotation_name_iid(name),
            )),
            value: Some(match value {
                Annotation::Str(s) => debug_annotation::Value::StringValue(s.clone()),
                Annotation::Int(i) => debug_annotation::Value::IntValue(*i),
                Annotation::Double(d) => debug_annotation::Value::DoubleValue(*d),
                Annotation::Bool(b) => debug_annotation::Value::BoolValue(*b),
            }),
            ..Default::default()
        }
    }

    /// The overlay tracks, under one `steplens analysis` group at the top.
    fn overlay(&mut self, overlay: &Overlay) -> io::Result<()> {
        if overlay.tracks.is_empty() {
            return Ok(());
        }
        let group = self.uuid();
        let rank = self.rank_under(0);
        self.describe(pb::TrackDescriptor {
            uuid: Some(group),
            static_or_dynamic_name: Self::named("steplens analysis"),
            child_ordering: Some(track_descriptor::ChildTracksOrdering::Explicit as i32),
            sibling_order_rank: Some(rank),
            ..Default::default()
        })?;
        let mut flow = 0u64;
        for track in &overlay.tracks {
            let mut order: Vec<usize> = (0..track.slices.len()).collect();
            order.sort_by_key(|&i| (track.slices[i].start, -track.slices[i].dur.max(0), i));
            let starts: Vec<i64> = order.iter().map(|&i| track.slices[i].start).collect();
            let durs: Vec<i64> = order.iter().map(|&i| track.slices[i].dur.max(0)).collect();
            let (layer_of, layers) = layers(&starts, &durs);
            // Flow ids follow the order `flow_ends` numbered them: slices in their given order.
            let mut flows_before = Vec::with_capacity(track.slices.len());
            let mut running = flow;
            for s in &track.slices {
                flows_before.push(running);
                running += s.flows_to.len() as u64;
            }
            for layer in 0..layers.max(1) {
                let uuid = self.uuid();
                let rank = self.rank_under(group);
                let name = if layer == 0 {
                    track.name.clone()
                } else {
                    format!("{} (overlap {layer})", track.name)
                };
                self.describe(pb::TrackDescriptor {
                    uuid: Some(uuid),
                    parent_uuid: Some(group),
                    static_or_dynamic_name: Self::named(&name),
                    sibling_order_rank: Some(rank),
                    ..Default::default()
                })?;
                let mut stack: Vec<i64> = Vec::new();
                for (k, &i) in order.iter().enumerate() {
                    if layer_of[k] != layer {
                        continue;
                    }
                    let s = &track.slices[i];
                    while let Some(&top) = stack.last()
                        && top <= starts[k]
                    {
                        stack.pop();
                        self.end(uuid, top)?;
                    }
                    let flow_ids: Vec<u64> = (0..s.flows_to.len() as u64)
                        .map(|j| (OVERLAY_FLOW_CAT << FLOW_CAT_SHIFT) | (flows_before[i] + j + 1))
                        .collect();
                    self.stats.flows += flow_ids.len() as u64;
                    self.stats.overlay_slices += 1;
                    let name = self.extra_name_iid(&s.name);
                    let debug_annotations = s
                        .annotations
                        .iter()
                        .map(|(k, v)| self.overlay_annotation(k, v))
                        .collect();
                    let event = pb::TrackEvent {
                        r#type: Some(track_event::Type::SliceBegin as i32),
                        track_uuid: Some(uuid),
                        name_field: Some(track_event::NameField::NameIid(name)),
                        categories: vec![super::OVERLAY_CATEGORY.to_owned()],
                        debug_annotations,
                        flow_ids,
                        ..Default::default()
                    };
                    self.emit(pb::TracePacket {
                        timestamp: Some(self.ts(s.start)),
                        data: Some(trace_packet::Data::TrackEvent(event)),
                        ..Default::default()
                    })?;
                    stack.push(s.start + s.dur.max(0));
                }
                while let Some(top) = stack.pop() {
                    self.end(uuid, top)?;
                }
            }
            flow = running;
        }
        Ok(())
    }
}

/// A JSON number as `int_value`, `uint_value` or `double_value`, as serde_json reads it.
fn number(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let integral = !text.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
    let s = std::str::from_utf8(text).ok()?;
    if integral {
        if let Ok(v) = s.parse::<i64>() {
            // int64 is a varint of the two's complement.
            wire::uint(out, 4, v as u64);
            return Some(());
        }
        if let Ok(v) = s.parse::<u64>() {
            wire::uint(out, 3, v);
            return Some(());
        }
    }
    // serde_json's own float parser, so values read back equal what `Timeline::args` gives.
    let v: f64 = serde_json::from_slice(text).ok()?;
    wire::fixed64(out, 5, v.to_bits());
    Some(())
}

/// Protobuf wire encoding of the few field kinds the hand-encoded packets use.
mod wire {
    pub(super) fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
        prost::encoding::encode_varint(u64::from(field) << 3, buf);
        prost::encoding::encode_varint(v, buf);
    }

    pub(super) fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
        prost::encoding::encode_varint((u64::from(field) << 3) | 1, buf);
        buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn bytes(buf: &mut Vec<u8>, field: u32, data: &[u8]) {
        prost::encoding::encode_varint((u64::from(field) << 3) | 2, buf);
        prost::encoding::encode_varint(data.len() as u64, buf);
        buf.extend_from_slice(data);
    }
}

/// Spreads slices (sorted by start, longer first) over layers in which they nest strictly:
/// returns each slice's layer and the number of layers.
fn layers(starts: &[i64], durs: &[i64]) -> (Vec<u32>, u32) {
    let mut stacks: Vec<Vec<i64>> = Vec::new();
    let mut out = Vec::with_capacity(starts.len());
    for (&start, &dur) in starts.iter().zip(durs) {
        let end = start + dur;
        let mut placed = None;
        for (layer, stack) in stacks.iter_mut().enumerate() {
            while stack.last().is_some_and(|&top| top <= start) {
                stack.pop();
            }
            if stack.last().is_none_or(|&top| end <= top) {
                stack.push(end);
                placed = Some(layer as u32);
                break;
            }
        }
        let layer = match placed {
            Some(l) => l,
            None => {
                stacks.push(vec![end]);
                (stacks.len() - 1) as u32
            }
        };
        out.push(layer);
    }
    let count = stacks.len().max(1) as u32;
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::layers;

    #[test]
    fn overlapping_slices_get_their_own_layer() {
        // [0,10] holds [2,4]; [5,15] overlaps [0,10] and moves to layer 1; [6,7] still fits
        // inside [0,10]; [9,12] crosses the end of [0,10] and nests in [5,15].
        let (of, n) = layers(&[0, 2, 5, 6, 9, 20], &[10, 2, 10, 1, 3, 1]);
        assert_eq!(of, [0, 0, 1, 0, 1, 0]);
        assert_eq!(n, 2);
    }
}
