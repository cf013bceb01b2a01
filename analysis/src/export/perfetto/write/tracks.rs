//! Track descriptors: groups per input and device, processes and threads, one named track per
//! lane, each with the `steplens track` note the reader uses to rebuild the Timeline.

use std::io;

use steplens_ingest::model::{LaneId, TrackKind};
use steplens_ingest::perfetto::proto::{self as pb, trace_packet, track_descriptor};
use steplens_ingest::perfetto::{TRACK_NOTE, TrackNote, lane_to_json};

use super::{Writer, layers};

impl Writer<'_, '_> {
    pub(super) fn describe(&mut self, descriptor: pb::TrackDescriptor) -> io::Result<()> {
        self.stats.tracks += 1;
        self.emit(pb::TracePacket {
            data: Some(trace_packet::Data::TrackDescriptor(descriptor)),
            ..Default::default()
        })
    }

    pub(super) fn named(name: &str) -> Option<track_descriptor::StaticOrDynamicName> {
        Some(track_descriptor::StaticOrDynamicName::Name(name.to_owned()))
    }

    /// A top-level group track (device, lane group), created on first use.
    pub(super) fn group(&mut self, source: u16, kind: u8, name: &str) -> io::Result<u64> {
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
    pub(super) fn process(
        &mut self,
        source: u16,
        pid: LaneId,
        name: &str,
    ) -> io::Result<(u64, i32)> {
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

    pub(super) fn note(&self, id: usize, name: &str) -> String {
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
            pid: lane_to_json(track.pid, &self.t.strings),
            tid: lane_to_json(track.tid, &self.t.strings),
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
    pub(super) fn track(&mut self, id: usize) -> io::Result<()> {
        let t = self.t;
        let track = &t.tracks[id];
        let range = track.slices.start as usize..track.slices.end as usize;
        let spread = layers(&t.slices.start[range.clone()], &t.slices.dur[range.clone()]);
        let layers = spread.count();
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
                for layer in 0..layers {
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
            self.slices(uuid, range.start, spread.members(layer as u32))?;
        }
        let main = uuids.first().copied().unwrap_or(0);
        self.instants(id as u32, main)?;
        self.counters(id as u32, main)
    }
}
