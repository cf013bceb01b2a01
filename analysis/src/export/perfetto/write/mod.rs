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
//! Ingest's `perfetto-proto` reader reads the file back; the two share the format's vocabulary
//! in `steplens_ingest::perfetto` (the prost types, the notes, the flow id layout).

use std::io::{self, Write};

use prost::Message;
use rustc_hash::FxHashMap;
use steplens_ingest::model::{CatId, LaneId, SliceId, StrId, Timeline};
use steplens_ingest::perfetto::proto::{self as pb, trace_packet, track_descriptor};
use steplens_ingest::perfetto::{FLOW_CAT_SHIFT, META_NOTE, META_TRACK, NOTE_VERSION, TraceNote};

mod args;
mod events;
mod tracks;

use args::{Annotator, Converted};

/// Extra tracks written above the Timeline's own (findings, steps).
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    /// The tracks, in display order.
    pub tracks: Vec<OverlayTrack>,
    /// Extra flow arrows between Timeline slices (from, to), in the flow category
    /// `links_category` (a critical path's edges).
    pub links: Vec<(SliceId, SliceId)>,
    /// The category of `links`.
    pub links_category: String,
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
    /// Slices written without their args, which could not be converted (not a well-formed
    /// JSON object, or nested too deep).
    pub args_dropped: u64,
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
    let threaded = timeline.slices.len() >= MIN_THREADED_SLICES && steplens_ingest::spare_core();
    write_timeline_with(timeline, overlay, out, threaded)
}

/// Smallest Timeline whose args are converted on a second thread.
const MIN_THREADED_SLICES: usize = 50_000;

/// [`write_timeline`], converting the args on a second thread when `threaded`.
fn write_timeline_with(
    timeline: &Timeline,
    overlay: Option<&Overlay>,
    out: &mut dyn Write,
    threaded: bool,
) -> io::Result<WriteStats> {
    let mut w = Writer::new(timeline, out);
    w.meta(overlay)?;
    let incoming = w.flow_ends(overlay);
    w.incoming = incoming;
    if let Some(overlay) = overlay {
        w.overlay(overlay)?;
    }
    let mut tracks = 0..timeline.tracks.len();
    if threaded {
        std::thread::scope(|scope| {
            let (batches, received) = std::sync::mpsc::sync_channel(args::IN_FLIGHT);
            // The converter carries on with the names the overlay interned.
            let annotator = std::mem::take(&mut w.annotator);
            scope.spawn(move || args::convert(timeline, annotator, &batches));
            w.converted = Some(Converted::new(received));
            let written = tracks.try_for_each(|id| w.track(id));
            // Hanging up stops a converter still sending (after a write error).
            w.converted = None;
            written
        })?;
    } else {
        tracks.try_for_each(|id| w.track(id))?;
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
    /// Scratch buffers of the hand-encoded slice packets: the TrackEvent and the packet.
    ev: Vec<u8>,
    pkt: Vec<u8>,
    stats: WriteStats,
    next_uuid: u64,
    names_sent: Vec<bool>,
    cats_sent: Vec<bool>,
    /// Overlay names: text → iid.
    extra_names: FxHashMap<String, u64>,
    /// Converts args (and interns annotation names) on this thread …
    annotator: Annotator,
    /// … or takes them from the converting thread.
    converted: Option<Converted>,
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
    /// Flow category index of the overlay's links.
    links_cat: u64,
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
            stats: WriteStats::default(),
            next_uuid: 1,
            names_sent: vec![false; t.strings.len()],
            cats_sent: vec![false; t.categories.len()],
            extra_names: FxHashMap::default(),
            annotator: Annotator::default(),
            converted: None,
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
            links_cat: 0,
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
    fn meta(&mut self, overlay: Option<&Overlay>) -> io::Result<()> {
        let mut categories: Vec<CatId> = self.t.flows.iter().map(|f| f.cat).collect();
        categories.sort_unstable();
        categories.dedup();
        for (i, &c) in categories.iter().enumerate() {
            self.flow_cat_index.insert(c, i as u64);
        }
        let mut flow_categories: Vec<String> = categories
            .iter()
            .map(|&c| self.t.categories.name(c).to_owned())
            .collect();
        // The overlay's links come after the Timeline's categories.
        self.links_cat = flow_categories.len() as u64;
        if let Some(o) = overlay.filter(|o| !o.links.is_empty()) {
            flow_categories.push(o.links_category.clone());
        }
        let note = TraceNote {
            version: NOTE_VERSION,
            flow_categories,
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
        for (j, &(from, to)) in overlay
            .map(|o| o.links.as_slice())
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            let id = (self.links_cat << FLOW_CAT_SHIFT) | (j as u64 + 1);
            self.outgoing.push((from, id));
            incoming.push((to, id));
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

    /// Adds annotation names interned first by the next packet's args to its interned data.
    fn pending_names(&mut self, names: Vec<pb::DebugAnnotationName>) {
        if !names.is_empty() {
            self.pending.debug_annotation_names.extend(names);
            self.has_pending = true;
        }
    }

    /// The next converted item; an error when the converting thread stopped short.
    fn take_converted(&mut self) -> io::Result<Option<args::Item>> {
        match &mut self.converted {
            None => Ok(None),
            Some(converted) => converted
                .take()
                .map(Some)
                .ok_or_else(|| io::Error::other("the args converting thread stopped")),
        }
    }
}

/// Protobuf wire encoding of the few field kinds the hand-encoded packets use.
mod wire {
    /// Most tags, ids and lengths take one byte.
    #[inline]
    fn varint(buf: &mut Vec<u8>, v: u64) {
        if v < 0x80 {
            buf.push(v as u8);
        } else {
            prost::encoding::encode_varint(v, buf);
        }
    }

    #[inline]
    pub(super) fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
        varint(buf, u64::from(field) << 3);
        varint(buf, v);
    }

    pub(super) fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
        varint(buf, (u64::from(field) << 3) | 1);
        buf.extend_from_slice(&v.to_le_bytes());
    }

    #[inline]
    pub(super) fn bytes(buf: &mut Vec<u8>, field: u32, data: &[u8]) {
        varint(buf, (u64::from(field) << 3) | 2);
        varint(buf, data.len() as u64);
        buf.extend_from_slice(data);
    }

    /// Starts a length-delimited field whose bytes are written next, in place; returns where
    /// [`close`] writes its length.
    #[inline]
    pub(super) fn open(buf: &mut Vec<u8>, field: u32) -> usize {
        varint(buf, (u64::from(field) << 3) | 2);
        buf.push(0);
        buf.len() - 1
    }

    /// Writes the length of the field [`open`] started; one that needs more than a byte
    /// moves its bytes up.
    #[inline]
    pub(super) fn close(buf: &mut Vec<u8>, at: usize) {
        let len = buf.len() - at - 1;
        if len < 0x80 {
            if let Some(slot) = buf.get_mut(at) {
                *slot = len as u8;
            }
        } else {
            let mut prefix = Vec::with_capacity(10);
            prost::encoding::encode_varint(len as u64, &mut prefix);
            buf.splice(at..at + 1, prefix);
        }
    }
}

/// Slices of one track spread over overlap layers, in each of which they nest strictly (a
/// Perfetto track must): every slice keeps a layer, however deep the track overlaps itself.
pub(crate) struct Layers {
    /// The slices (indices into the input) layer by layer, in input order within a layer.
    by_layer: Vec<u32>,
    /// Where each layer's slices start in `by_layer` (one more entry than layers).
    bounds: Vec<usize>,
}

impl Layers {
    /// Layers used (at least 1, so an empty track still gets its Perfetto track).
    pub(crate) fn count(&self) -> u32 {
        (self.bounds.len().saturating_sub(1)).max(1) as u32
    }

    /// The slices of `layer` (indices into the input), in input order.
    pub(crate) fn members(&self, layer: u32) -> &[u32] {
        let layer = layer as usize;
        match (self.bounds.get(layer), self.bounds.get(layer + 1)) {
            (Some(&a), Some(&b)) => &self.by_layer[a..b],
            _ => &[],
        }
    }
}

/// Spreads slices (sorted by start, longer first) over layers in which they nest strictly, in
/// O(n log n): a slice nests in layer 0 where it fits there, else in the layer the last slice
/// that did not fit layer 0 went to, else in the lowest free layer (a min-heap of free layers;
/// a layer is free once its outermost open slice has ended, found through a min-heap of those
/// ends), else in a new layer. 200,000 slices open at once on one track take 200,000 layers,
/// and every slice is kept.
fn layers(starts: &[i64], durs: &[i64]) -> Layers {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // Per layer, the ends of its open slices (outermost first).
    let mut stacks: Vec<Vec<i64>> = Vec::new();
    let mut in_free: Vec<bool> = Vec::new();
    // (end of a layer's outermost open slice, layer): the layer is free once that passes.
    let mut busy: BinaryHeap<Reverse<(i64, u32)>> = BinaryHeap::new();
    let mut free: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut of = Vec::with_capacity(starts.len());
    let mut last_other: Option<u32> = None;
    for (&start, &dur) in starts.iter().zip(durs) {
        let end = start.saturating_add(dur.max(0));
        while let Some(&Reverse((bottom, layer))) = busy.peek() {
            if bottom > start {
                break;
            }
            busy.pop();
            // Its outermost slice ended (an entry made stale by a later bottom is as true):
            // every slice of the layer ended by then.
            let l = layer as usize;
            if stacks[l].first().is_none_or(|&b| b <= start) {
                stacks[l].clear();
                if !in_free[l] {
                    in_free[l] = true;
                    free.push(Reverse(layer));
                }
            }
        }
        let fits = |stack: &mut Vec<i64>| {
            while stack.last().is_some_and(|&top| top <= start) {
                stack.pop();
            }
            stack.last().is_none_or(|&top| end <= top)
        };
        let mut placed = None;
        for candidate in std::iter::once(0).chain(last_other) {
            if let Some(stack) = stacks.get_mut(candidate as usize)
                && fits(stack)
            {
                placed = Some(candidate);
                break;
            }
        }
        let layer = match placed {
            Some(l) => l,
            None => {
                let mut reuse = None;
                while let Some(Reverse(l)) = free.pop() {
                    if in_free[l as usize] && stacks[l as usize].is_empty() {
                        reuse = Some(l);
                        break;
                    }
                }
                reuse.unwrap_or_else(|| {
                    stacks.push(Vec::new());
                    in_free.push(false);
                    (stacks.len() - 1) as u32
                })
            }
        };
        let stack = &mut stacks[layer as usize];
        if stack.is_empty() {
            busy.push(Reverse((end, layer)));
        }
        stack.push(end);
        in_free[layer as usize] = false;
        if layer != 0 {
            last_other = Some(layer);
        }
        of.push(layer);
    }
    // Group the slices by layer (a counting sort, input order kept within a layer).
    let mut bounds = vec![0usize; stacks.len() + 1];
    for &l in &of {
        bounds[l as usize + 1] += 1;
    }
    for i in 1..bounds.len() {
        bounds[i] += bounds[i - 1];
    }
    let mut next = bounds.clone();
    let mut by_layer = vec![0u32; of.len()];
    for (k, &l) in of.iter().enumerate() {
        by_layer[next[l as usize]] = k as u32;
        next[l as usize] += 1;
    }
    Layers { by_layer, bounds }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads of 10,000 slices each, some overlapping (extra layers), with args whose
    /// keys keep appearing (over a thousand names), and instants with args.
    fn busy_timeline() -> Timeline {
        let mut events = Vec::new();
        for tid in 1..=2 {
            for i in 0..10_000 {
                let (ts, dur) = if i % 7 == 3 {
                    (i * 10 + 5, 10)
                } else {
                    (i * 10, 8)
                };
                events.push(format!(
                    r#"{{"ph":"X","name":"op{n}","cat":"cpu_op","pid":1,"tid":{tid},"ts":{ts},"dur":{dur},"args":{{"k{k}":{i},"Input Dims":[[{d},3],[]],"nested":{{"a{a}":"s\"q","e":{{}}}},"f":1.5,"n":null,"b":true}}}}"#,
                    n = i % 13,
                    k = (i * 7) % 1009,
                    d = i % 5,
                    a = i % 3,
                ));
                if i % 1000 == 0 {
                    events.push(format!(
                        r#"{{"ph":"i","s":"t","name":"mark","pid":1,"tid":{tid},"ts":{ts},"args":{{"inst{m}":"x","deep":{{"z":[1]}}}}}}"#,
                        m = i % 4,
                    ));
                }
            }
        }
        let json = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
        let options = steplens_ingest::LoadOptions::default();
        steplens_ingest::load_bytes("busy.json", json.into_bytes(), &options)
            .unwrap_or_else(|e| panic!("inline trace: {e}"))
    }

    #[test]
    fn args_converted_on_a_second_thread_give_the_same_file() {
        let t = busy_timeline();
        let overlay = Overlay {
            tracks: vec![OverlayTrack {
                name: "findings".to_owned(),
                slices: vec![OverlaySlice {
                    start: 0,
                    dur: 100,
                    name: "finding".to_owned(),
                    annotations: vec![
                        ("k7".to_owned(), Annotation::Int(1)),
                        ("why".to_owned(), Annotation::Str("slow".to_owned())),
                    ],
                    flows_to: vec![3],
                }],
            }],
            ..Overlay::default()
        };
        for overlay in [None, Some(&overlay)] {
            let mut one = Vec::new();
            let mut two = Vec::new();
            let a = write_timeline_with(&t, overlay, &mut one, false).map_err(|e| e.to_string());
            let b = write_timeline_with(&t, overlay, &mut two, true).map_err(|e| e.to_string());
            assert_eq!(a, b);
            assert!(one.len() > 1 << 20, "{} bytes", one.len());
            assert!(one == two, "the files differ");
        }
    }

    #[test]
    fn a_large_file_reads_back_with_every_args_object() {
        let t = busy_timeline();
        let mut bytes = Vec::new();
        let written = write_timeline(&t, None, &mut bytes).map_err(|e| e.to_string());
        assert!(written.is_ok(), "{written:?}");
        // Over a MiB: the reader encodes args on its second thread (where there is a core).
        let back = steplens_ingest::load_bytes(
            "busy.pftrace",
            bytes,
            &steplens_ingest::LoadOptions::default(),
        );
        let back = back.map_err(|e| e.to_string());
        let Ok(back) = back else {
            panic!("{back:?}");
        };
        assert_eq!(back.slices.start, t.slices.start);
        for i in 0..t.slices.len() as SliceId {
            assert_eq!(back.args(i), t.args(i), "slice {i}");
        }
        assert_eq!(back.instants.ts.len(), t.instants.ts.len());
        for i in 0..t.instants.ts.len() {
            let track = t.instants.track[i];
            let args = |t: &Timeline| {
                let source = t.tracks[t.instants.track[i] as usize].source;
                t.resolve_args(source, t.instants.args[i])
                    .map(<[u8]>::to_vec)
            };
            let (ours, theirs) = (args(&back), args(&t));
            let parse = |a: Option<Vec<u8>>| {
                a.and_then(|a| serde_json::from_slice::<serde_json::Value>(&a).ok())
            };
            assert_eq!(parse(ours), parse(theirs), "instant {i} on track {track}");
        }
    }

    #[test]
    fn overlapping_slices_get_their_own_layer() {
        // [0,10] holds [2,4]; [5,15] overlaps [0,10] and moves to layer 1; [6,7] still fits
        // inside [0,10]; [9,12] crosses the end of [0,10] and nests in [5,15].
        let l = layers(&[0, 2, 5, 6, 9, 20], &[10, 2, 10, 1, 3, 1]);
        assert_eq!(l.count(), 2);
        assert_eq!(l.members(0), [0, 1, 3, 5]);
        assert_eq!(l.members(1), [2, 4]);
    }

    /// Every layer nests strictly, and every slice has one.
    fn assert_nests(starts: &[i64], durs: &[i64], l: &Layers) {
        let kept: usize = (0..l.count()).map(|layer| l.members(layer).len()).sum();
        assert_eq!(kept, starts.len());
        for layer in 0..l.count() {
            let mut stack: Vec<i64> = Vec::new();
            for &k in l.members(layer) {
                let (s, e) = (starts[k as usize], starts[k as usize] + durs[k as usize]);
                while stack.last().is_some_and(|&top| top <= s) {
                    stack.pop();
                }
                assert!(stack.last().is_none_or(|&top| e <= top), "layer {layer}");
                stack.push(e);
            }
        }
    }

    #[test]
    fn every_overlapping_slice_keeps_a_layer_in_n_log_n() {
        // 200,000 slices open at once: one layer each, in well under a second.
        let n = 200_000;
        let starts: Vec<i64> = (0..n).collect();
        let durs: Vec<i64> = vec![1_000_000; n as usize];
        let started = std::time::Instant::now();
        let l = layers(&starts, &durs);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(l.count(), n as u32);
        assert_nests(&starts, &durs, &l);
        // Staggered overlaps reuse freed layers: [i, i+3) for every i needs 3.
        let starts: Vec<i64> = (0..1000).collect();
        let durs = vec![3; 1000];
        let l = layers(&starts, &durs);
        assert_eq!(l.count(), 3);
        assert_nests(&starts, &durs, &l);
    }
}
