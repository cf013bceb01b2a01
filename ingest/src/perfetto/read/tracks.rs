//! Perfetto tracks to Timeline lanes: track descriptors, steplens' own track notes, and the
//! process and thread a track belongs to.

use super::{Descriptor, Reader};
use crate::builder::{TimelineBuilder, TrackDescription};
use crate::model::{DeviceKind, LaneId, TrackId};
use crate::perfetto::event::Event;
use crate::perfetto::proto::{self as pb, track_descriptor};
use crate::perfetto::{META_NOTE, META_TRACK, TRACK_NOTE, TraceNote, TrackNote};

impl Reader<'_> {
    pub(super) fn descriptor(&mut self, d: pb::TrackDescriptor) {
        let uuid = d.uuid();
        // Every descriptor is a track the file may use: `--max-tracks` bounds them before any
        // event does (a file of a million descriptors and no events).
        let max = self.builder.limits().max_tracks.max(1);
        if self.descriptors.len() >= max && !self.descriptors.contains_key(&uuid) {
            self.builder.hit_limit(
                "the number of Perfetto track descriptors",
                format!("{max}"),
                "--max-tracks",
            );
            return;
        }
        let name = match d.static_or_dynamic_name {
            Some(
                track_descriptor::StaticOrDynamicName::Name(n)
                | track_descriptor::StaticOrDynamicName::StaticName(n)
                | track_descriptor::StaticOrDynamicName::AtraceName(n),
            ) => Some(n),
            None => None,
        };
        let mut bounded = |n: Option<String>| -> Option<String> {
            n.map(|n| {
                if n.len() > self.builder.limits().max_name_bytes {
                    self.builder.within_name_limit(&n).to_owned()
                } else {
                    n
                }
            })
        };
        let name = bounded(name);
        let process = d.process.map(|mut p| {
            p.process_name = bounded(p.process_name.take());
            p
        });
        let thread = d.thread.map(|mut t| {
            t.thread_name = bounded(t.thread_name.take());
            t
        });
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
            .and_then(|json| serde_json::from_str::<TrackNote>(json).ok())
            .map(Box::new);
        let mut desc = Descriptor {
            parent: d.parent_uuid,
            name,
            counter: d.counter.is_some(),
            note,
            ..Descriptor::default()
        };
        if let Some(p) = process {
            desc.pid = p.pid;
            desc.process_name = p.process_name;
        }
        if let Some(t) = thread {
            desc.pid = t.pid.or(desc.pid);
            desc.tid = t.tid;
            desc.thread_name = t.thread_name;
        }
        self.descriptors.insert(uuid, desc);
    }

    pub(super) fn apply_trace_note(&mut self, note: TraceNote) {
        self.skipped_flow_cat = note
            .flow_categories
            .iter()
            .position(|c| c == crate::perfetto::CRITICAL_PATH_FLOW_CATEGORY)
            .map(|i| i as u64);
        self.flow_cats = note
            .flow_categories
            .iter()
            .map(|c| self.builder.intern_cat(c))
            .collect();
        let hints = self.builder.device_hints(self.source);
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
    pub(super) fn ancestor_pid(&self, mut uuid: u64) -> Option<i32> {
        for _ in 0..64 {
            let d = self.descriptors.get(&uuid)?;
            if let Some(pid) = d.pid {
                return Some(pid);
            }
            uuid = d.parent?;
        }
        None
    }

    pub(super) fn ancestor_process_name(&self, mut uuid: u64) -> Option<String> {
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

    pub(super) fn thread_lane(&mut self, pid: i32, tid: i64) -> TrackId {
        self.builder
            .track(self.source, LaneId::Int(i64::from(pid)), LaneId::Int(tid))
    }

    /// The builder track of Perfetto track `uuid` and whether it is a counter track.
    pub(super) fn lane(&mut self, uuid: u64) -> (TrackId, bool) {
        if let Some(&lane) = self.lanes.get(&uuid) {
            return lane;
        }
        let lane = self.make_lane(uuid);
        self.lanes.insert(uuid, lane);
        lane
    }

    pub(super) fn make_lane(&mut self, uuid: u64) -> (TrackId, bool) {
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

    pub(super) fn noted_lane(&mut self, note: &TrackNote, counter: bool) -> (TrackId, bool) {
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
                kind: crate::perfetto::kind_from_note(note),
                name: Some(note.name.clone()),
                process_name: Some(note.process.clone()),
                sort_key: Some(note.sort),
                rank: u64::from(note.id) + 1,
            },
        );
        self.noted.insert(note.id, track);
        (track, counter)
    }

    pub(super) fn event_track(&self, seq_id: u32, event: &Event<'_>) -> Option<u64> {
        let seq = self.sequences.get(&seq_id);
        event
            .track_uuid
            .or_else(|| seq.and_then(|s| s.default_track))
    }
}
