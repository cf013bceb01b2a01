//! Stage: tracks. Decides each raw lane's kind (host thread, device engine, counter, async),
//! its display name and its place in the display order.

use super::{ProcessMeta, RawTrack, ThreadMeta, TimelineBuilder};
use crate::model::{CategoryClass, EngineClass, LaneId, Track, TrackId, TrackKind};

impl TimelineBuilder {
    /// Decides each track's kind and returns `order[old id] = new id` for display order.
    pub(super) fn order_tracks(&mut self) -> Vec<TrackId> {
        let mut keyed: Vec<(SortKey, TrackId)> = Vec::with_capacity(self.tracks.len());
        for (i, raw) in self.tracks.iter().enumerate() {
            let process = self.processes.get(&(raw.key.source, raw.key.pid));
            let thread = self
                .threads
                .get(&(raw.key.source, raw.key.pid, raw.key.tid));
            let description = self.descriptions.get(&(i as TrackId));
            let kind = match description.and_then(|d| d.kind.clone()) {
                Some(kind) => kind,
                None => classify(raw, process, thread, &self.timeline.strings),
            };
            let group = match &kind {
                TrackKind::HostThread => 0,
                TrackKind::DeviceEngine { .. } => 1,
                TrackKind::Counter => 2,
                TrackKind::Async => 3,
            };
            let process_sort = process
                .and_then(|p| p.sort_index)
                .unwrap_or(match raw.key.pid {
                    LaneId::Int(pid) => pid,
                    LaneId::Str(_) => i64::MAX,
                });
            let thread_sort = thread
                .and_then(|t| t.sort_index)
                .unwrap_or(match raw.key.tid {
                    LaneId::Int(tid) => tid,
                    LaneId::Str(_) => i64::MAX,
                });
            let (process_sort, thread_sort) = description
                .and_then(|d| d.sort_key)
                .unwrap_or((process_sort, thread_sort));
            let key = SortKey {
                source: raw.key.source,
                rank: description.map_or(0, |d| d.rank),
                group,
                process_sort,
                pid: raw.key.pid,
                thread_sort,
                tid: raw.key.tid,
                counter: raw.key.counter,
            };
            keyed.push((key, i as TrackId));
            let (mut name, mut process_name) = self.track_names(raw, process, thread, &kind);
            if let Some(d) = description {
                name = d.name.clone().unwrap_or(name);
                process_name = d.process_name.clone().unwrap_or(process_name);
            }
            self.timeline.tracks.push(Track {
                source: raw.key.source,
                pid: raw.key.pid,
                tid: raw.key.tid,
                kind,
                name,
                process_name,
                sort_key: (process_sort, thread_sort),
                slices: 0..0,
                max_depth: 0,
            });
        }
        keyed.sort();
        let mut order = vec![0; keyed.len()];
        for (new, (_, old)) in keyed.iter().enumerate() {
            order[*old as usize] = new as TrackId;
        }
        order
    }

    pub(super) fn track_names(
        &self,
        raw: &RawTrack,
        process: Option<&ProcessMeta>,
        thread: Option<&ThreadMeta>,
        kind: &TrackKind,
    ) -> (String, String) {
        let strings = &self.timeline.strings;
        let lane = |id: LaneId| match id {
            LaneId::Int(v) => v.to_string(),
            LaneId::Str(s) => strings.get(s).to_owned(),
        };
        let process_name = match (process.and_then(|p| p.labels.clone()), kind) {
            // GPU lanes carry the Python process name in `process_name`; the label says "GPU 0".
            (Some(labels), TrackKind::DeviceEngine { .. }) => labels,
            _ => process
                .and_then(|p| p.name.clone())
                .unwrap_or_else(|| lane(raw.key.pid))
                .trim()
                .to_owned(),
        };
        let name = if let Some(series) = &raw.counter_name {
            series.clone()
        } else if let Some(name) = thread.and_then(|t| t.name.clone()) {
            name.trim().to_owned()
        } else {
            match (kind, raw.key.tid) {
                (TrackKind::DeviceEngine { .. }, tid) => format!("stream {}", lane(tid)),
                (TrackKind::Async, LaneId::Str(s)) if strings.get(s).is_empty() => "global".into(),
                (TrackKind::Async, tid) => lane(tid),
                (_, tid) => format!("thread {}", lane(tid)),
            }
        };
        (name, process_name)
    }

    pub(super) fn build_tracks(&mut self, order: &[TrackId]) {
        let mut tracks = std::mem::take(&mut self.timeline.tracks);
        let mut ordered: Vec<Option<Track>> = vec![None; tracks.len()];
        for (old, track) in tracks.drain(..).enumerate() {
            ordered[order[old] as usize] = Some(track);
        }
        self.timeline.tracks = ordered.into_iter().flatten().collect();
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SortKey {
    source: u16,
    rank: u64,
    group: u8,
    process_sort: i64,
    pid: LaneId,
    thread_sort: i64,
    tid: LaneId,
    counter: bool,
}

pub(super) fn classify(
    raw: &RawTrack,
    process: Option<&ProcessMeta>,
    thread: Option<&ThreadMeta>,
    strings: &crate::model::StringTable,
) -> TrackKind {
    if raw.key.counter {
        return TrackKind::Counter;
    }
    let labels = process.and_then(|p| p.labels.as_deref()).unwrap_or("");
    let process_name = process.and_then(|p| p.name.as_deref()).unwrap_or("");
    let device_label = ["GPU", "MTIA", "HPU", "NPU", "XPU"]
        .iter()
        .any(|l| labels.starts_with(l))
        || process_name.starts_with("/device:")
        // Synapse TEF: one process per engine type, named `*MME `, `**TPC `, `*EDMA ` ….
        || (process_name.starts_with('*') && process_name.trim_start_matches('*').trim() != "Host");
    let mask = raw.class_mask;
    let has = |c: CategoryClass| mask & c.bit() != 0;
    let device_work = [
        CategoryClass::Kernel,
        CategoryClass::Memcpy,
        CategoryClass::Memset,
        CategoryClass::DeviceSync,
        CategoryClass::DeviceAnnotation,
        CategoryClass::ProfilerRange,
    ]
    .iter()
    .any(|&c| has(c));
    if device_label || device_work {
        let thread_name = thread.and_then(|t| t.name.as_deref()).unwrap_or("");
        let class = if let Some(class) = crate::gaudi::engine_class(thread_name)
            .or_else(|| crate::gaudi::engine_class(process_name))
        {
            class
        } else if process_name.starts_with('*') {
            // Other Synapse engine types (`*PSOC`, `*ARC_FARM`, `*VIDEO_DECODER` …) keep their name.
            EngineClass::Other(process_name.trim_start_matches('*').trim().into())
        } else if thread_name.contains("DMA") {
            EngineClass::Dma
        } else if has(CategoryClass::Kernel) || has(CategoryClass::ProfilerRange) {
            EngineClass::ComputeStream
        } else if has(CategoryClass::Memcpy) || has(CategoryClass::Memset) {
            EngineClass::Memcpy
        } else if has(CategoryClass::DeviceSync) {
            EngineClass::Sync
        } else if has(CategoryClass::DeviceAnnotation) {
            EngineClass::Annotation
        } else {
            EngineClass::ComputeStream
        };
        // Synapse TEF pids are engine types, not devices: one trace is one device.
        let device = if process_name.starts_with('*') {
            Some(0)
        } else {
            device_index(labels, raw.key.pid)
        };
        return TrackKind::DeviceEngine { class, device };
    }
    match raw.key.pid {
        LaneId::Str(s)
            if strings.get(s).is_empty() || !strings.get(s).bytes().all(|c| c.is_ascii_digit()) =>
        {
            TrackKind::Async
        }
        _ => TrackKind::HostThread,
    }
}

/// The device ordinal: from a label like `GPU 3` / `MTIA 9`, else the numeric pid (Kineto
/// uses the device index as the pid of device lanes).
pub(super) fn device_index(labels: &str, pid: LaneId) -> Option<i64> {
    let from_label = labels
        .split(|c: char| !c.is_ascii_digit())
        .find(|part| !part.is_empty())
        .and_then(|d| d.parse().ok());
    from_label.or(match pid {
        LaneId::Int(p) => Some(p),
        LaneId::Str(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use crate::builder::stage_test::build;
    use crate::model::TrackKind;

    #[test]
    fn host_lanes_come_before_device_lanes_and_get_their_kinds() {
        let t = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":5,"dur":1},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":10,"ts":1,"dur":3},
            {"ph":"M","name":"thread_name","pid":10,"tid":10,"args":{"name":"main"}}]}"#,
        );
        let kinds: Vec<&str> = t.tracks.iter().map(|tr| tr.kind.label()).collect();
        assert_eq!(kinds, ["host", "device"]);
        assert!(matches!(t.tracks[1].kind, TrackKind::DeviceEngine { .. }));
        assert!(t.tracks[0].name.contains("main"), "{}", t.tracks[0].name);
    }
}
