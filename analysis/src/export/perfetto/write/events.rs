//! Track events: BEGIN/END pairs with their args as debug annotations, instants, counter
//! samples, and the overlay tracks of findings.

use std::io;

use prost::Message;
use steplens_ingest::model::SliceId;
use steplens_ingest::perfetto::proto::{self as pb, trace_packet, track_descriptor, track_event};
use steplens_ingest::perfetto::{FLOW_CAT_SHIFT, OVERLAY_CATEGORY};

use super::args::instants_of;
use super::wire;
use super::{OVERLAY_FLOW_CAT, Overlay, SEQ_NEEDS, SEQUENCE, Writer, layers};

impl Writer<'_, '_> {
    /// BEGIN/END pairs of the slices of one layer: `members` are offsets from slice `first`.
    pub(super) fn slices(&mut self, uuid: u64, first: usize, members: &[u32]) -> io::Result<()> {
        let t = self.t;
        let mut stack: Vec<i64> = Vec::new();
        for &k in members {
            let i = first + k as usize;
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
    pub(super) fn begin(&mut self, uuid: u64, i: SliceId) -> io::Result<()> {
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
            let names = match self.take_converted()? {
                Some(item) => {
                    match (item.fragment, &self.converted) {
                        (Some(range), Some(converted)) => {
                            ev.extend_from_slice(converted.fragment(range));
                        }
                        _ => self.stats.args_dropped += 1,
                    }
                    item.names
                }
                None => {
                    if !self.annotator.slice_args(raw, &mut ev) {
                        self.stats.args_dropped += 1;
                    }
                    self.annotator.take_new_names()
                }
            };
            self.pending_names(names);
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
    pub(super) fn event_packet(&mut self, ts: u64, event: &[u8]) -> io::Result<()> {
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

    pub(super) fn end(&mut self, uuid: u64, at: i64) -> io::Result<()> {
        let mut ev = std::mem::take(&mut self.ev);
        ev.clear();
        wire::uint(&mut ev, 9, track_event::Type::SliceEnd as u64);
        wire::uint(&mut ev, 11, uuid);
        let result = self.event_packet(self.ts(at), &ev);
        self.ev = ev;
        result
    }

    pub(super) fn instants(&mut self, track: u32, uuid: u64) -> io::Result<()> {
        let t = self.t;
        for i in instants_of(t, track) {
            let name = self.name_iid(t.instants.name[i]);
            let cat = self.cat_iid(t.instants.cat[i]);
            let (debug_annotations, names) = match self.take_converted()? {
                Some(item) => (item.instant, item.names),
                None => {
                    let annotations = self.annotator.instant_args(t, track, i);
                    (annotations, self.annotator.take_new_names())
                }
            };
            self.pending_names(names);
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

    pub(super) fn counters(&mut self, track: u32, uuid: u64) -> io::Result<()> {
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

    /// The overlay tracks, under one `steplens analysis` group at the top.
    pub(super) fn overlay(&mut self, overlay: &Overlay) -> io::Result<()> {
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
            let spread = layers(&starts, &durs);
            // Flow ids follow the order `flow_ends` numbered them: slices in their given order.
            let mut flows_before = Vec::with_capacity(track.slices.len());
            let mut running = flow;
            for s in &track.slices {
                flows_before.push(running);
                running += s.flows_to.len() as u64;
            }
            for layer in 0..spread.count() {
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
                for &k in spread.members(layer) {
                    let k = k as usize;
                    let i = order[k];
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
                        .map(|(k, v)| self.annotator.overlay_annotation(k, v))
                        .collect();
                    let names = self.annotator.take_new_names();
                    self.pending_names(names);
                    let event = pb::TrackEvent {
                        r#type: Some(track_event::Type::SliceBegin as i32),
                        track_uuid: Some(uuid),
                        name_field: Some(track_event::NameField::NameIid(name)),
                        categories: vec![OVERLAY_CATEGORY.to_owned()],
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
