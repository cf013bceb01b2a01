//! Building a [`Timeline`]: ingestors push events in file order; [`TimelineBuilder::finish`]
//! orders the tracks, sorts and nests the slices, binds flows to slices, finds the steps and the
//! device, and turns repairs into warnings.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::intervals::IntervalSet;
use crate::model::{
    ArgsRef, CatId, CategoryClass, Counters, DeviceInfo, DeviceKind, EngineClass, Flow, Instants,
    LaneId, NO_PARENT, NodeMetrics, SliceId, Slices, SourceInfo, Step, StrId, Timeline, Track,
    TrackId, TrackKind, Warning, WarningCode,
};
use crate::source::SourceData;

/// CUPTI sometimes writes absurd durations on buffer overflow; like HTA, drop anything longer.
const MAX_SLICE_NS: i64 = 7 * 24 * 3600 * 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LaneKey {
    source: u16,
    pid: LaneId,
    tid: LaneId,
    counter: bool,
}

#[derive(Debug)]
struct RawTrack {
    key: LaneKey,
    /// Union of the category classes of the slices on the track.
    class_mask: u16,
    /// Latest time seen on the track, to close dangling `B` events.
    last_ts: i64,
    /// For counter tracks: the series name.
    counter_name: Option<String>,
}

#[derive(Debug, Default)]
struct ProcessMeta {
    name: Option<String>,
    labels: Option<String>,
    sort_index: Option<i64>,
}

#[derive(Debug, Default)]
struct ThreadMeta {
    name: Option<String>,
    sort_index: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
struct OpenSlice {
    start: i64,
    name: StrId,
    cat: CatId,
    args: ArgsRef,
}

/// Phase of a flow endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlowPhase {
    /// `s`
    Start,
    /// `t`
    Step,
    /// `f`
    Finish,
}

#[derive(Debug, Clone, Copy)]
struct FlowPoint {
    cat: CatId,
    id: u64,
    phase: FlowPhase,
    track: TrackId,
    ts: i64,
    /// `bp:"e"`: bind to the enclosing slice rather than the next one.
    enclosing: bool,
}

/// Hints about the device gathered while reading.
#[derive(Debug, Default)]
pub(crate) struct DeviceHints {
    pub(crate) saw_hip: bool,
    pub(crate) saw_cuda: bool,
    pub(crate) saw_mtia: bool,
    pub(crate) saw_hpu: bool,
    pub(crate) names: Vec<String>,
    pub(crate) property_count: usize,
    pub(crate) rocm_properties: bool,
    /// Memory of the first device in `deviceProperties` (`totalGlobalMem`), bytes.
    pub(crate) memory_bytes: Option<i64>,
    /// Compute capability of the first device in `deviceProperties` (`computeMajor.Minor`).
    pub(crate) compute_capability: Option<String>,
}

/// What a reader knows for certain about a track (a Perfetto trace written by steplens names
/// each track's kind and place): [`TimelineBuilder::finish`] uses it instead of inferring the
/// kind from metadata and categories, the names from lane metadata, and the order from sort
/// indexes.
#[derive(Debug, Clone, Default)]
pub struct TrackDescription {
    /// The track's kind.
    pub kind: Option<TrackKind>,
    /// Display name.
    pub name: Option<String>,
    /// Name of the owning process or device.
    pub process_name: Option<String>,
    /// [`Track::sort_key`].
    pub sort_key: Option<(i64, i64)>,
    /// Display rank among the tracks of the same input: it orders tracks before anything else
    /// does (undescribed tracks have rank 0).
    pub rank: u64,
}

/// Accumulates events, then builds the [`Timeline`].
#[derive(Debug, Default)]
pub struct TimelineBuilder {
    timeline: Timeline,
    limits: crate::limits::Limits,
    limit_hit: Option<crate::limits::LimitHit>,
    raw: Slices,
    tracks: Vec<RawTrack>,
    lane_index: FxHashMap<LaneKey, TrackId>,
    last_lane: Option<(LaneKey, TrackId)>,
    processes: FxHashMap<(u16, LaneId), ProcessMeta>,
    threads: FxHashMap<(u16, LaneId, LaneId), ThreadMeta>,
    open: FxHashMap<TrackId, Vec<OpenSlice>>,
    flow_points: Vec<FlowPoint>,
    instant_order: Vec<(TrackId, i64, u32)>,
    counter_samples: Vec<(TrackId, i64, f64)>,
    descriptions: FxHashMap<TrackId, TrackDescription>,
    /// Flows between slices given by their push index (`slice_count()` before the push).
    raw_flows: Vec<(CatId, u64, u32, u32)>,
    /// `raw_flows`, bound to sorted slice ids once the slices are sorted.
    raw_flows_bound: Vec<Flow>,
    pub(crate) device: DeviceHints,
}

impl TimelineBuilder {
    /// A builder expecting about `slices` slices.
    #[must_use]
    pub fn with_capacity(slices: usize) -> Self {
        Self {
            raw: Slices::with_capacity(slices),
            ..Self::default()
        }
    }

    /// Reserves room for `additional` more slices. Capacity that is never written costs
    /// address space only, so a generous estimate avoids the copies of growing the columns.
    pub(crate) fn reserve_slices(&mut self, additional: usize) {
        let raw = &mut self.raw;
        raw.start.reserve(additional);
        raw.dur.reserve(additional);
        raw.track.reserve(additional);
        raw.name.reserve(additional);
        raw.cat.reserve(additional);
        raw.args.reserve(additional);
    }

    /// Registers an input and its bytes; returns its source index.
    pub(crate) fn add_source(&mut self, info: SourceInfo, data: Arc<SourceData>) -> u16 {
        let id = u16::try_from(self.timeline.sources.len()).unwrap_or(u16::MAX);
        self.timeline.sources.push(info);
        self.timeline.data.push(data);
        id
    }

    /// Number of inputs registered so far.
    pub(crate) fn source_count(&self) -> usize {
        self.timeline.sources.len()
    }

    pub(crate) fn source_mut(&mut self, source: u16) -> Option<&mut SourceInfo> {
        self.timeline.sources.get_mut(source as usize)
    }

    /// Interns a name.
    pub fn intern(&mut self, s: &str) -> StrId {
        let s = self.within_name_limit(s);
        self.timeline.strings.intern(s)
    }

    /// The text of an interned name.
    pub(crate) fn string(&self, id: StrId) -> &str {
        self.timeline.strings.get(id)
    }

    /// The limits this builder enforces.
    #[must_use]
    pub fn limits(&self) -> crate::limits::Limits {
        self.limits
    }

    /// Sets the limits for what is read next.
    pub fn set_limits(&mut self, limits: crate::limits::Limits) {
        self.limits = limits;
    }

    /// The first limit run into since the last call, if any.
    pub(crate) fn take_limit_hit(&mut self) -> Option<crate::limits::LimitHit> {
        self.limit_hit.take()
    }

    fn hit_limit(&mut self, what: &'static str, limit: String, flag: &'static str) {
        if self.limit_hit.is_none() {
            self.limit_hit = Some(crate::limits::LimitHit { what, limit, flag });
        }
    }

    /// `s`, or its first `max_name_bytes` (on a char boundary) with the limit recorded.
    fn within_name_limit<'s>(&mut self, s: &'s str) -> &'s str {
        let max = self.limits.max_name_bytes;
        if s.len() <= max {
            return s;
        }
        self.hit_limit(
            "a name",
            format!("{max} bytes (one is {} bytes)", s.len()),
            "--max-name-bytes",
        );
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        &s[..end]
    }

    /// Interns a category.
    pub fn intern_cat(&mut self, cat: &str) -> CatId {
        let cat = self.within_name_limit(cat);
        self.timeline.categories.intern(cat)
    }

    /// Class of an interned category.
    pub(crate) fn cat_class(&self, cat: CatId) -> CategoryClass {
        self.timeline.categories.class(cat)
    }

    /// The track for `(pid, tid)` of `source`, created on first use.
    #[inline]
    pub fn track(&mut self, source: u16, pid: LaneId, tid: LaneId) -> TrackId {
        self.lane(
            LaneKey {
                source,
                pid,
                tid,
                counter: false,
            },
            None,
        )
    }

    #[inline]
    fn lane(&mut self, key: LaneKey, counter_name: Option<&str>) -> TrackId {
        if let Some((last, id)) = self.last_lane
            && last == key
        {
            return id;
        }
        let id = match self.lane_index.get(&key) {
            Some(&id) => id,
            // Past the cap, events land on the last track; the load then fails on the hit.
            None if self.tracks.len() >= self.limits.max_tracks.max(1) => {
                let max = self.limits.max_tracks;
                self.hit_limit("the number of tracks", format!("{max}"), "--max-tracks");
                return TrackId::try_from(self.tracks.len() - 1).unwrap_or(TrackId::MAX);
            }
            None => {
                let id = TrackId::try_from(self.tracks.len()).unwrap_or(TrackId::MAX);
                self.tracks.push(RawTrack {
                    key,
                    class_mask: 0,
                    last_ts: i64::MIN,
                    counter_name: counter_name.map(str::to_owned),
                });
                self.lane_index.insert(key, id);
                id
            }
        };
        self.last_lane = Some((key, id));
        id
    }

    #[inline]
    fn touch(&mut self, track: TrackId, class: CategoryClass, ts: i64) {
        if let Some(t) = self.tracks.get_mut(track as usize) {
            t.class_mask |= class.bit();
            t.last_ts = t.last_ts.max(ts);
        }
    }

    /// Adds a complete slice. Negative durations (rounding) are clamped to zero and counted;
    /// impossible ones (over 7 days) are dropped and counted.
    #[inline]
    pub fn push_slice(
        &mut self,
        track: TrackId,
        start: i64,
        mut dur: i64,
        name: StrId,
        cat: CatId,
        args: ArgsRef,
    ) {
        if dur < 0 {
            self.timeline.stats.negative_durations += 1;
            self.timeline.stats.most_negative_ns = self.timeline.stats.most_negative_ns.min(dur);
            dur = 0;
        }
        if dur > MAX_SLICE_NS {
            self.timeline.stats.overlong += 1;
            return;
        }
        // Every later `start + dur` relies on this: no slice ends past i64::MAX.
        if start.checked_add(dur).is_none() {
            self.timeline.stats.clamped_ends += 1;
            dur = i64::MAX - start;
        }
        let class = self.cat_class(cat);
        self.touch(track, class, start + dur);
        self.raw.start.push(start);
        self.raw.dur.push(dur);
        self.raw.track.push(track);
        self.raw.name.push(name);
        self.raw.cat.push(cat);
        self.raw.args.push(args);
    }

    /// Opens a `B` slice.
    pub fn push_begin(&mut self, track: TrackId, ts: i64, name: StrId, cat: CatId, args: ArgsRef) {
        let class = self.cat_class(cat);
        self.touch(track, class, ts);
        self.open.entry(track).or_default().push(OpenSlice {
            start: ts,
            name,
            cat,
            args,
        });
    }

    /// Closes the innermost open `B` slice of the track.
    pub fn push_end(&mut self, track: TrackId, ts: i64) {
        let Some(open) = self.open.get_mut(&track).and_then(Vec::pop) else {
            self.timeline.stats.unmatched_ends += 1;
            return;
        };
        self.push_slice(
            track,
            open.start,
            ts.saturating_sub(open.start),
            open.name,
            open.cat,
            open.args,
        );
    }

    /// Adds an instant event.
    pub fn push_instant(
        &mut self,
        track: TrackId,
        ts: i64,
        name: StrId,
        cat: CatId,
        scope: u8,
        args: ArgsRef,
    ) {
        let order = u32::try_from(self.timeline.instants.ts.len()).unwrap_or(u32::MAX);
        self.instant_order.push((track, ts, order));
        let instants = &mut self.timeline.instants;
        instants.ts.push(ts);
        instants.track.push(track);
        instants.name.push(name);
        instants.cat.push(cat);
        instants.scope.push(scope);
        instants.args.push(args);
    }

    /// Adds a counter sample to the series `series` of process `pid`; returns the series' track.
    pub fn push_counter(
        &mut self,
        source: u16,
        pid: LaneId,
        series: &str,
        ts: i64,
        value: f64,
    ) -> TrackId {
        let series_id = self.intern(series);
        let key = LaneKey {
            source,
            pid,
            tid: LaneId::Str(series_id),
            counter: true,
        };
        let track = self.lane(key, Some(series));
        self.counter_samples.push((track, ts, value));
        track
    }

    /// The counter track of series `series` of process `pid`, created on first use.
    pub fn counter_track(&mut self, source: u16, pid: LaneId, series: &str) -> TrackId {
        let series_id = self.intern(series);
        let key = LaneKey {
            source,
            pid,
            tid: LaneId::Str(series_id),
            counter: true,
        };
        self.lane(key, Some(series))
    }

    /// Adds a sample to a counter track made by [`TimelineBuilder::counter_track`].
    pub fn push_counter_sample(&mut self, track: TrackId, ts: i64, value: f64) {
        self.counter_samples.push((track, ts, value));
    }

    /// Fixes what is known about `track` (see [`TrackDescription`]).
    pub fn describe_track(&mut self, track: TrackId, description: TrackDescription) {
        self.descriptions.insert(track, description);
    }

    /// Adds a flow between two slices given by their push index (the value of
    /// [`TimelineBuilder::slice_count`] just before each was pushed), for formats that say
    /// exactly which slices a flow joins.
    pub fn push_slice_flow(&mut self, cat: CatId, id: u64, from: usize, to: usize) {
        if let (Ok(from), Ok(to)) = (u32::try_from(from), u32::try_from(to)) {
            self.raw_flows.push((cat, id, from, to));
        }
    }

    /// Replaces the bytes slice args refer to (a reader that re-encodes args as JSON text).
    pub(crate) fn set_source_data(&mut self, source: u16, data: Arc<SourceData>) {
        if let Some(slot) = self.timeline.data.get_mut(source as usize) {
            *slot = data;
        }
    }

    /// Adds a flow endpoint (`s`, `t`, `f`).
    pub(crate) fn push_flow(
        &mut self,
        cat: CatId,
        id: u64,
        phase: FlowPhase,
        track: TrackId,
        ts: i64,
        enclosing: bool,
    ) {
        self.flow_points.push(FlowPoint {
            cat,
            id,
            phase,
            track,
            ts,
            enclosing,
        });
    }

    /// Records `process_name`, `process_labels` or `process_sort_index` metadata.
    pub fn process_meta(
        &mut self,
        source: u16,
        pid: LaneId,
        name: Option<String>,
        labels: Option<String>,
        sort_index: Option<i64>,
    ) {
        let meta = self.processes.entry((source, pid)).or_default();
        // Later metadata wins: Kineto repeats lane metadata and the last is the most specific.
        if name.is_some() {
            meta.name = name;
        }
        if labels.is_some() {
            meta.labels = labels;
        }
        if sort_index.is_some() {
            meta.sort_index = sort_index;
        }
    }

    /// Records `thread_name` or `thread_sort_index` metadata.
    pub fn thread_meta(
        &mut self,
        source: u16,
        pid: LaneId,
        tid: LaneId,
        name: Option<String>,
        sort_index: Option<i64>,
    ) {
        let meta = self.threads.entry((source, pid, tid)).or_default();
        if name.is_some() {
            meta.name = name;
        }
        if sort_index.is_some() {
            meta.sort_index = sort_index;
        }
    }

    /// Adds a Gaudi Analyzed Nodes row; [`TimelineBuilder::finish`] binds it to its slice
    /// (same source, name and start) and to the HW-trace slices it describes.
    pub fn push_node_metrics(&mut self, metrics: NodeMetrics) {
        self.timeline.node_metrics.push(metrics);
    }

    /// Adds a Gaudi bridge metric dump.
    pub fn push_metric(&mut self, dump: crate::model::MetricDump) {
        self.timeline.metrics.push(dump);
    }

    /// Counts an event with a phase that is not modelled.
    pub(crate) fn count_unsupported(&mut self) {
        self.timeline.stats.unsupported_phase += 1;
    }

    /// Counts a flow end that binds to no partner.
    pub(crate) fn count_unbound_flow_end(&mut self) {
        self.timeline.stats.unbound_flow_ends += 1;
    }

    /// Counts an event missing a field it needs.
    pub(crate) fn count_malformed(&mut self) {
        self.timeline.stats.malformed += 1;
    }

    /// Number of slices pushed so far.
    #[must_use]
    pub fn slice_count(&self) -> usize {
        self.raw.len()
    }

    /// Builds the Timeline.
    #[must_use]
    pub fn finish(mut self) -> Timeline {
        self.close_open_slices();
        let order = self.order_tracks();
        self.build_tracks(&order);
        self.sort_and_nest(&order);
        self.sort_instants_and_counters(&order);
        self.bind_flows(&order);
        self.link_launches_by_correlation();
        self.timeline.clock_of = (0..self.timeline.sources.len() as u16).collect();
        self.align_device_clocks();
        self.attach_node_metrics();
        self.find_steps();
        self.derive_steps();
        self.find_device();
        self.report_repairs();
        self.timeline
    }

    /// Puts device-only inputs (a Synapse TEF trace, a HW-trace CSV) loaded next to a trace with
    /// host threads on that trace's clock. The anchor is the first run of each kernel name on
    /// the device lanes of both: when most shared names agree on one offset (within 1 µs), every
    /// time of the device-only input moves by it. Without an agreeing anchor the input keeps its
    /// own clock, and a warning says so.
    fn align_device_clocks(&mut self) {
        const AGREE_NS: i64 = 1_000;
        let t = &self.timeline;
        if t.sources.len() < 2 {
            return;
        }
        let has_host: Vec<bool> = (0..t.sources.len())
            .map(|s| {
                t.tracks.iter().any(|tr| {
                    tr.source as usize == s
                        && tr.kind == TrackKind::HostThread
                        && tr.slices.end > tr.slices.start
                })
            })
            .collect();
        // Synapse's own host lane runs on the device clock: a TEF trace is never the reference.
        let synapse = |s: usize| t.sources[s].format.host_on_device_clock();
        let Some(reference) = (0..t.sources.len()).find(|&s| has_host[s] && !synapse(s)) else {
            return;
        };
        // First start of each device-work name, per input.
        let mut first: FxHashMap<(u16, StrId), i64> = FxHashMap::default();
        for track in &t.tracks {
            if !track.kind.is_device() {
                continue;
            }
            for i in track.slices.clone() {
                if !t.slice_class(i).is_device_work() {
                    continue;
                }
                let key = (track.source, t.slices.name[i as usize]);
                let start = t.slices.start[i as usize];
                first
                    .entry(key)
                    .and_modify(|v| *v = (*v).min(start))
                    .or_insert(start);
            }
        }
        let mut shifts: Vec<(u16, i64, String)> = Vec::new();
        let mut unaligned: Vec<u16> = Vec::new();
        for (source, &host) in has_host.iter().enumerate() {
            let device_only = (!host || synapse(source))
                && t.tracks
                    .iter()
                    .any(|tr| tr.source as usize == source && tr.kind.is_device());
            if source == reference || !device_only {
                continue;
            }
            let (source, reference) = (source as u16, reference as u16);
            let mut offsets: Vec<i64> = first
                .iter()
                .filter(|((s, _), _)| *s == source)
                .filter_map(|(&(_, name), &start)| {
                    first.get(&(reference, name)).map(|&r| start - r)
                })
                .collect();
            offsets.sort_unstable();
            let by_names = offsets.get(offsets.len() / 2).copied().and_then(|median| {
                let agreeing = offsets
                    .iter()
                    .filter(|&&o| (o - median).abs() <= AGREE_NS)
                    .count();
                (agreeing * 2 > offsets.len())
                    .then(|| (median, format!("{agreeing} shared kernel names")))
            });
            match by_names.or_else(|| activity_offset(t, source, reference)) {
                Some((offset, how)) => shifts.push((source, offset, how)),
                None => unaligned.push(source),
            }
        }
        let reference_path = t.sources[reference].path.clone();
        let reference = reference as u16;
        for (source, offset, how) in shifts {
            self.shift_source(source, offset);
            if let Some(slot) = self.timeline.clock_of.get_mut(source as usize) {
                *slot = reference;
            }
            if let Some(info) = self.timeline.sources.get_mut(source as usize) {
                info.warnings.push(Warning {
                    code: WarningCode::ClockAligned,
                    offset: None,
                    message: format!(
                        "clock aligned to {reference_path} by {how} (moved by {} ns)",
                        -offset
                    ),
                });
            }
        }
        for source in unaligned {
            if let Some(info) = self.timeline.sources.get_mut(source as usize) {
                info.warnings.push(Warning {
                    code: WarningCode::ClockNotAligned,
                    offset: None,
                    message: format!(
                        "no shared anchor with {reference_path} (no kernel names or device activity agree on one clock offset): its times stay on their own clock"
                    ),
                });
            }
        }
    }

    /// Moves every time of one input by `-offset` ns.
    fn shift_source(&mut self, source: u16, offset: i64) {
        let t = &mut self.timeline;
        let own: Vec<bool> = t.tracks.iter().map(|tr| tr.source == source).collect();
        for track in t.tracks.iter().filter(|tr| tr.source == source) {
            for i in track.slices.clone() {
                t.slices.start[i as usize] -= offset;
            }
        }
        for (ts, &track) in t.instants.ts.iter_mut().zip(&t.instants.track) {
            if own.get(track as usize).copied().unwrap_or(false) {
                *ts -= offset;
            }
        }
        for (ts, &track) in t.counters.ts.iter_mut().zip(&t.counters.track) {
            if own.get(track as usize).copied().unwrap_or(false) {
                *ts -= offset;
            }
        }
    }

    fn close_open_slices(&mut self) {
        let mut open: Vec<(TrackId, Vec<OpenSlice>)> = self.open.drain().collect();
        open.sort_by_key(|(t, _)| *t);
        for (track, stack) in open {
            let end = self
                .tracks
                .get(track as usize)
                .map_or(i64::MIN, |t| t.last_ts);
            for slice in stack.into_iter().rev() {
                self.timeline.stats.unclosed_begins += 1;
                let dur = end.max(slice.start).saturating_sub(slice.start);
                self.push_slice(track, slice.start, dur, slice.name, slice.cat, slice.args);
            }
        }
    }

    /// Decides each track's kind and returns `order[old id] = new id` for display order.
    fn order_tracks(&mut self) -> Vec<TrackId> {
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

    fn track_names(
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

    fn build_tracks(&mut self, order: &[TrackId]) {
        let mut tracks = std::mem::take(&mut self.timeline.tracks);
        let mut ordered: Vec<Option<Track>> = vec![None; tracks.len()];
        for (old, track) in tracks.drain(..).enumerate() {
            ordered[order[old] as usize] = Some(track);
        }
        self.timeline.tracks = ordered.into_iter().flatten().collect();
    }

    /// Sorts slices by (track, start, longer first, file order) and resolves nesting.
    fn sort_and_nest(&mut self, order: &[TrackId]) {
        let raw = std::mem::take(&mut self.raw);
        let n = raw.len();
        let track_count = self.timeline.tracks.len();
        // Counting sort by (new) track, keeping file order inside a track.
        let mut counts = vec![0u32; track_count + 1];
        for &t in &raw.track {
            counts[order[t as usize] as usize + 1] += 1;
        }
        for i in 0..track_count {
            counts[i + 1] += counts[i];
        }
        let bounds = counts.clone();
        let mut perm = vec![0u32; n];
        for (i, &t) in raw.track.iter().enumerate() {
            let slot = &mut counts[order[t as usize] as usize];
            perm[*slot as usize] = i as u32;
            *slot += 1;
        }
        for t in 0..track_count {
            let range = bounds[t] as usize..bounds[t + 1] as usize;
            let part = &mut perm[range];
            let key = |&i: &u32| (raw.start[i as usize], -raw.dur[i as usize], i);
            if !part.is_sorted_by_key(key) {
                part.sort_unstable_by_key(key);
            }
            self.timeline.tracks[t].slices = bounds[t]..bounds[t + 1];
        }
        if !self.raw_flows.is_empty() {
            let mut position = vec![NO_PARENT; n];
            for (new, &old) in perm.iter().enumerate() {
                position[old as usize] = new as SliceId;
            }
            let at = |raw: u32| {
                position
                    .get(raw as usize)
                    .copied()
                    .filter(|&p| p != NO_PARENT)
            };
            for (cat, id, from, to) in std::mem::take(&mut self.raw_flows) {
                match (at(from), at(to)) {
                    (Some(from), Some(to)) if from != to => {
                        self.raw_flows_bound.push(Flow { id, cat, from, to });
                    }
                    _ => self.timeline.stats.unbound_flow_ends += 1,
                }
            }
        }
        let gather_i64 = |col: &[i64]| perm.iter().map(|&i| col[i as usize]).collect::<Vec<_>>();
        let mut slices = Slices {
            start: gather_i64(&raw.start),
            dur: gather_i64(&raw.dur),
            track: perm
                .iter()
                .map(|&i| order[raw.track[i as usize] as usize])
                .collect(),
            name: perm.iter().map(|&i| raw.name[i as usize]).collect(),
            cat: perm.iter().map(|&i| raw.cat[i as usize]).collect(),
            depth: vec![0; n],
            parent: vec![NO_PARENT; n],
            args: perm.iter().map(|&i| raw.args[i as usize]).collect(),
        };
        drop(raw);
        drop(perm);
        let mut stack: Vec<SliceId> = Vec::new();
        for track in &mut self.timeline.tracks {
            stack.clear();
            let mut max_depth = 0u16;
            for i in track.slices.clone() {
                let start = slices.start[i as usize];
                let end = start + slices.dur[i as usize];
                // Counted once per slice, however many open slices it runs out of.
                let mut overlapped = false;
                while let Some(&top) = stack.last() {
                    let top_start = slices.start[top as usize];
                    let top_end = top_start + slices.dur[top as usize];
                    if end <= top_end && (start < top_end || start == top_start) {
                        break;
                    }
                    let python = |s: SliceId| {
                        self.timeline.categories.class(slices.cat[s as usize])
                            == CategoryClass::PythonFunction
                    };
                    // Starts inside `top` but ends after it: out of spec (rounding or
                    // overlapping kernels). Kept whole, as a sibling, never dropped. Python
                    // frames straddling a record_function range are normal (the range opens
                    // inside `__enter__`), so they are not reported.
                    if start < top_end && !python(top) && !python(i) {
                        let stats = &mut self.timeline.stats;
                        stats.partial_overlaps += u64::from(!overlapped);
                        stats.max_overlap_ns = stats.max_overlap_ns.max(top_end - start);
                        overlapped = true;
                    }
                    stack.pop();
                }
                let depth = u16::try_from(stack.len()).unwrap_or(u16::MAX);
                slices.depth[i as usize] = depth;
                slices.parent[i as usize] = stack.last().copied().unwrap_or(NO_PARENT);
                max_depth = max_depth.max(depth);
                stack.push(i);
            }
            track.max_depth = max_depth;
        }
        self.timeline.slices = slices;
    }

    fn sort_instants_and_counters(&mut self, order: &[TrackId]) {
        let mut keys = std::mem::take(&mut self.instant_order);
        for k in &mut keys {
            k.0 = order[k.0 as usize];
        }
        keys.sort_unstable();
        let old = std::mem::take(&mut self.timeline.instants);
        let pick = |k: &(TrackId, i64, u32)| k.2 as usize;
        self.timeline.instants = Instants {
            ts: keys.iter().map(|k| old.ts[pick(k)]).collect(),
            track: keys.iter().map(|k| k.0).collect(),
            name: keys.iter().map(|k| old.name[pick(k)]).collect(),
            cat: keys.iter().map(|k| old.cat[pick(k)]).collect(),
            scope: keys.iter().map(|k| old.scope[pick(k)]).collect(),
            args: keys.iter().map(|k| old.args[pick(k)]).collect(),
        };
        let mut samples = std::mem::take(&mut self.counter_samples);
        for s in &mut samples {
            s.0 = order[s.0 as usize];
        }
        samples.sort_by_key(|a| (a.0, a.1));
        self.timeline.counters = Counters {
            track: samples.iter().map(|s| s.0).collect(),
            ts: samples.iter().map(|s| s.1).collect(),
            value: samples.iter().map(|s| s.2).collect(),
        };
    }

    fn bind_flows(&mut self, order: &[TrackId]) {
        let mut points = std::mem::take(&mut self.flow_points);
        for p in &mut points {
            p.track = order[p.track as usize];
        }
        // Group endpoints of one flow (input + category + id) together, in time order: flow
        // ids are numbered per trace, so two ranks' flow 10 are different flows.
        let tracks = &self.timeline.tracks;
        let source_of = |p: &FlowPoint| tracks.get(p.track as usize).map_or(0, |t| t.source);
        points.sort_by_key(|p| (source_of(p), p.cat, p.id, p.ts, p.phase != FlowPhase::Start));
        let same_flow = |a: &FlowPoint, b: &FlowPoint| {
            a.cat == b.cat && a.id == b.id && source_of(a) == source_of(b)
        };
        let mut flows = Vec::new();
        let mut unbound = 0u64;
        let mut i = 0;
        while i < points.len() {
            let mut j = i + 1;
            while j < points.len() && same_flow(&points[j], &points[i]) {
                j += 1;
            }
            let group = &points[i..j];
            // `from` is the bound slice of the flow currently open in this group.
            let mut open = false;
            let mut from: Option<SliceId> = None;
            for p in group {
                let bound = self.bind_point(p);
                if p.phase == FlowPhase::Start {
                    if open {
                        unbound += 1;
                    }
                    if bound.is_none() {
                        unbound += 1;
                    }
                    open = true;
                    from = bound;
                    continue;
                }
                if !open {
                    unbound += 1;
                    continue;
                }
                match (from, bound) {
                    (Some(a), Some(b)) if a != b => {
                        flows.push(Flow {
                            id: p.id,
                            cat: p.cat,
                            from: a,
                            to: b,
                        });
                    }
                    (Some(_), None) => unbound += 1,
                    _ => {}
                }
                if p.phase == FlowPhase::Finish {
                    open = false;
                    from = None;
                } else {
                    from = bound.or(from);
                }
            }
            if open {
                unbound += 1;
            }
            i = j;
        }
        flows.append(&mut self.raw_flows_bound);
        flows.sort_by_key(|f| (f.from, f.to));
        self.timeline.flows = flows;
        self.timeline.stats.unbound_flow_ends += unbound;
    }

    /// Inputs without launch flows (PyTorch before 1.11) get them from correlation ids
    /// ([`crate::correlation`]).
    fn link_launches_by_correlation(&mut self) {
        let links = crate::correlation::launch_links(&self.timeline);
        if links.is_empty() {
            return;
        }
        let cat = self.intern_cat("ac2g");
        self.timeline
            .flows
            .extend(
                links
                    .into_iter()
                    .map(|(id, from, to)| Flow { id, cat, from, to }),
            );
        self.timeline.flows.sort_by_key(|f| (f.from, f.to));
    }

    fn bind_point(&self, p: &FlowPoint) -> Option<SliceId> {
        // Flow v1 as Perfetto and chrome://tracing bind it: `s` and `t` to the enclosing slice
        // on their thread, `f` too with `bp: "e"`; a step outside every slice binds nowhere.
        if p.enclosing || p.phase != FlowPhase::Finish {
            return self.timeline.slice_at(p.track, p.ts);
        }
        // Flow v1 default binding: the next slice that starts at or after the point.
        let range = self.timeline.track_slices(p.track);
        let starts = &self.timeline.slices.start[range.start as usize..range.end as usize];
        let at = starts.partition_point(|&s| s < p.ts);
        (at < starts.len()).then(|| range.start + at as SliceId)
    }

    /// Binds each Analyzed Nodes row to its own slice (same source, name, start, category
    /// `analyzed_node`) and to the device-work slices of `habana-hw-csv` sources with the same
    /// node name, ` iter N` suffix removed, that overlap `[start, end)`.
    fn attach_node_metrics(&mut self) {
        if self.timeline.node_metrics.is_empty() {
            return;
        }
        let t = &self.timeline;
        let node_cat = t.categories.lookup(crate::habana_nodes::CATEGORY);
        let hw_source: Vec<bool> = t
            .sources
            .iter()
            .map(|s| s.format == crate::FormatId::HabanaHwCsv)
            .collect();
        let mut own: FxHashMap<(u16, StrId, i64), SliceId> = FxHashMap::default();
        let mut hw: FxHashMap<StrId, Vec<SliceId>> = FxHashMap::default();
        for track in &t.tracks {
            let is_hw = hw_source
                .get(track.source as usize)
                .copied()
                .unwrap_or(false);
            for i in track.slices.clone() {
                let idx = i as usize;
                if Some(t.slices.cat[idx]) == node_cat {
                    own.entry((track.source, t.slices.name[idx], t.slices.start[idx]))
                        .or_insert(i);
                } else if is_hw && t.slice_class(i).is_device_work() {
                    hw.entry(t.slices.name[idx]).or_default().push(i);
                }
            }
        }
        let mut nodes = std::mem::take(&mut self.timeline.node_metrics);
        let t = &self.timeline;
        for node in &mut nodes {
            node.slice = t
                .strings
                .lookup(&node.name)
                .and_then(|name| own.get(&(node.source, name, node.start_ns)).copied());
            let base = crate::habana_nodes::base_node_name(&node.name);
            let Some(candidates) = t.strings.lookup(base).and_then(|name| hw.get(&name)) else {
                continue;
            };
            node.hw_slices = candidates
                .iter()
                .copied()
                .filter(|&i| {
                    t.slices.start[i as usize] < node.end_ns && t.slices.end(i) > node.start_ns
                })
                .collect();
            node.hw_slices.sort_unstable();
        }
        self.timeline.node_metrics = nodes;
    }

    fn find_steps(&mut self) {
        let t = &self.timeline;
        let mut per_track: FxHashMap<TrackId, Vec<Step>> = FxHashMap::default();
        for (track_id, track) in t.tracks.iter().enumerate() {
            if track.kind != TrackKind::HostThread {
                continue;
            }
            for i in track.slices.clone() {
                let name = t.slice_name(i);
                let Some(number) = name.strip_prefix("ProfilerStep#") else {
                    continue;
                };
                if !matches!(
                    t.slice_class(i),
                    CategoryClass::UserAnnotation | CategoryClass::CpuOp
                ) {
                    continue;
                }
                per_track
                    .entry(track_id as TrackId)
                    .or_default()
                    .push(Step {
                        name: name.to_owned(),
                        number: number.trim().parse().ok(),
                        start: t.slices.start[i as usize],
                        dur: t.slices.dur[i as usize],
                        track: track_id as TrackId,
                        slice: i,
                        source: track.source,
                        derived: false,
                    });
            }
        }
        // One step sequence per source: the host thread with the most step annotations.
        let mut best: FxHashMap<u16, Vec<Step>> = FxHashMap::default();
        for (_, steps) in per_track {
            let Some(source) = steps.first().map(|s| s.source) else {
                continue;
            };
            let slot = best.entry(source).or_default();
            if steps.len() > slot.len()
                || (steps.len() == slot.len() && steps[0].track < slot[0].track)
            {
                *slot = steps;
            }
        }
        let mut steps: Vec<Step> = best.into_values().flatten().collect();
        steps.sort_by_key(|s| (s.source, s.start, s.slice));
        self.drop_steps_past_damage(&mut steps);
        self.timeline.steps = steps;
    }

    /// Inputs without step annotations get iterations from their device timeline
    /// ([`crate::derived_steps`]).
    fn derive_steps(&mut self) {
        let derived = crate::derived_steps::derive(&self.timeline);
        if !derived.is_empty() {
            self.timeline.steps.extend(derived);
            self.timeline
                .steps
                .sort_by_key(|s| (s.source, s.start, s.slice));
        }
    }

    /// In a trace cut short, a step whose range runs past the last event that survived is
    /// missing part of its content; its figures would be made up, so it leaves the step table.
    fn drop_steps_past_damage(&mut self, steps: &mut Vec<Step>) {
        let t = &self.timeline;
        let damaged: Vec<bool> = t
            .sources
            .iter()
            .map(|s| {
                s.warnings
                    .iter()
                    .any(|w| matches!(w.code, WarningCode::Damaged | WarningCode::DamagedGzip))
            })
            .collect();
        if !damaged.contains(&true) {
            return;
        }
        // Latest start of any non-step slice per damaged source: how far the data reaches.
        let mut horizon = vec![i64::MIN; t.sources.len()];
        for track in &t.tracks {
            if !damaged.get(track.source as usize).copied().unwrap_or(false) {
                continue;
            }
            for i in track.slices.clone() {
                if !t.slice_name(i).starts_with("ProfilerStep#") {
                    let h = &mut horizon[track.source as usize];
                    *h = (*h).max(t.slices.start[i as usize]);
                }
            }
        }
        let mut dropped: Vec<(u16, String)> = Vec::new();
        steps.retain(|s| {
            let cut = damaged.get(s.source as usize).copied().unwrap_or(false)
                && s.end() > horizon[s.source as usize];
            if cut {
                dropped.push((s.source, s.name.clone()));
            }
            !cut
        });
        for (source, name) in dropped {
            if let Some(info) = self.timeline.sources.get_mut(source as usize) {
                info.warnings.push(Warning {
                    code: WarningCode::IncompleteStep,
                    offset: None,
                    message: format!(
                        "{name} runs past the point where the trace was cut; left out of the step table"
                    ),
                });
            }
        }
    }

    fn find_device(&mut self) {
        let hints = &self.device;
        let device_tracks: Vec<&Track> = self
            .timeline
            .tracks
            .iter()
            .filter(|t| t.kind.is_device())
            .collect();
        let hpu_lanes = device_tracks
            .iter()
            .any(|t| t.process_name.starts_with("HPU") || t.process_name.contains("/device:HPU"));
        let kind = if hints.saw_hpu || hpu_lanes {
            DeviceKind::Hpu
        } else if hints.saw_mtia {
            DeviceKind::Mtia
        } else if hints.saw_hip || hints.rocm_properties {
            DeviceKind::Rocm
        } else if hints.saw_cuda || hints.property_count > 0 || !device_tracks.is_empty() {
            DeviceKind::Cuda
        } else {
            DeviceKind::Cpu
        };
        let mut devices: Vec<(u16, Option<i64>)> = device_tracks
            .iter()
            .filter_map(|t| match &t.kind {
                TrackKind::DeviceEngine { device, .. } => Some((t.source, *device)),
                _ => None,
            })
            .collect();
        devices.sort_unstable();
        devices.dedup();
        let active = devices.len();
        let mut names = hints.names.clone();
        names.dedup();
        self.timeline.device = DeviceInfo {
            kind,
            name: names.into_iter().next(),
            memory_bytes: hints.memory_bytes,
            compute_capability: hints.compute_capability.clone(),
            count: if kind == DeviceKind::Cpu {
                0
            } else {
                active.max(usize::from(active == 0))
            },
        };
    }

    fn report_repairs(&mut self) {
        let stats = self.timeline.stats.clone();
        let mut warnings = Vec::new();
        let mut warn = |code: WarningCode, message: String| {
            warnings.push(Warning {
                code,
                offset: None,
                message,
            });
        };
        if stats.negative_durations > 0 {
            warn(
                WarningCode::NegativeDuration,
                format!(
                    "{} slices had a negative duration (down to {} ns, float rounding); clamped to 0",
                    stats.negative_durations, stats.most_negative_ns
                ),
            );
        }
        if stats.clamped_ends > 0 {
            warn(
                WarningCode::TimeClamped,
                format!(
                    "{} slices would end past the largest representable time (2^63 ns); cut to end there",
                    stats.clamped_ends
                ),
            );
        }
        if stats.overlong > 0 {
            warn(
                WarningCode::OverlongSlice,
                format!(
                    "dropped {} slices longer than 7 days (profiler overflow)",
                    stats.overlong
                ),
            );
        }
        if stats.partial_overlaps > 0 {
            warn(
                WarningCode::Overlap,
                format!(
                    "{} slices start inside another slice of the same track and end after it (by up to {} ns); kept as siblings",
                    stats.partial_overlaps, stats.max_overlap_ns
                ),
            );
        }
        if stats.unclosed_begins > 0 {
            warn(
                WarningCode::UnclosedBegin,
                format!(
                    "{} B events had no matching E; closed at the last time seen on their track",
                    stats.unclosed_begins
                ),
            );
        }
        if stats.unmatched_ends > 0 {
            warn(
                WarningCode::UnmatchedEnd,
                format!("ignored {} E events with no open B", stats.unmatched_ends),
            );
        }
        if stats.unsupported_phase > 0 {
            warn(
                WarningCode::UnsupportedPhase,
                format!(
                    "skipped {} events of phases steplens does not model",
                    stats.unsupported_phase
                ),
            );
        }
        if stats.malformed > 0 {
            warn(
                WarningCode::MalformedEvent,
                format!(
                    "skipped {} events that are not objects or miss a field their phase needs (ts, dur, flow id)",
                    stats.malformed
                ),
            );
        }
        // Build-time repairs are not tied to one source when several were loaded together;
        // attach them to the first.
        if let Some(first) = self.timeline.sources.first_mut() {
            first.warnings.extend(warnings);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    source: u16,
    rank: u64,
    group: u8,
    process_sort: i64,
    pid: LaneId,
    thread_sort: i64,
    tid: LaneId,
    counter: bool,
}

fn classify(
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
        let class = if let Some(class) =
            gaudi_engine_class(thread_name).or_else(|| gaudi_engine_class(process_name))
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

/// Device activity as intervals per input (union of every engine's device work).
fn device_activity(t: &Timeline, source: u16) -> IntervalSet {
    let mut ranges = Vec::new();
    for track in t
        .tracks
        .iter()
        .filter(|tr| tr.source == source && tr.kind.is_device())
    {
        for i in track.slices.clone() {
            if t.slice_class(i).is_device_work() {
                ranges.push((t.slices.start[i as usize], t.slices.end(i)));
            }
        }
    }
    IntervalSet::from_ranges(ranges)
}

/// When no names are shared (a HW-trace CSV names nodes, the torch trace names ops): the clock
/// offset under which the device-only input's busy time best lands on the reference's busy
/// time. Candidates put the input's first work on each busy interval of the reference; one is
/// accepted when at least 90 % of the input's busy time then falls on busy time of the
/// reference, and no other well-placed candidate more than 1 ms away comes within 5 points.
fn activity_offset(t: &Timeline, source: u16, reference: u16) -> Option<(i64, String)> {
    const MAX_CANDIDATES: usize = 20_000;
    const SAMPLED_INTERVALS: usize = 64;
    const FULLY_SCORED: usize = 32;
    const MIN_SCORE: f64 = 0.9;
    const DISTINCT_NS: i64 = 1_000_000;
    let mine = device_activity(t, source);
    let theirs = device_activity(t, reference);
    let first = mine.iter().next()?.0;
    if mine.total() <= 0 || theirs.is_empty() {
        return None;
    }
    let score = |intervals: &[(i64, i64)], offset: i64| -> f64 {
        let length: i64 = intervals.iter().map(|(a, e)| e - a).sum();
        let hit: i64 = intervals
            .iter()
            .map(|&(a, e)| theirs.covered(a - offset, e - offset))
            .sum();
        hit as f64 / length.max(1) as f64
    };
    // Candidates: the input's first work starts where some busy interval of the reference
    // starts (capped). Each is scored first on an even sample of the input's intervals; only
    // the best few are scored on all of them, so the cost stays bounded on large inputs.
    let all: Vec<(i64, i64)> = mine.iter().collect();
    let step = (all.len() / SAMPLED_INTERVALS).max(1);
    let sample: Vec<(i64, i64)> = all.iter().copied().step_by(step).collect();
    let mut prescored: Vec<(f64, i64)> = theirs
        .iter()
        .take(MAX_CANDIDATES)
        .map(|(b, _)| {
            let offset = first - b;
            (score(&sample, offset), offset)
        })
        .collect();
    prescored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    let mut scored: Vec<(f64, i64)> = prescored
        .iter()
        .take(FULLY_SCORED)
        .map(|&(_, offset)| (score(&all, offset), offset))
        .collect();
    scored.sort_by(|x, y| y.0.total_cmp(&x.0));
    let (best, offset) = *scored.first()?;
    // The best other explanation: a candidate at least 1 ms away from the winner.
    let runner_up = scored
        .iter()
        .find(|s| (s.1 - offset).abs() > DISTINCT_NS)
        .map_or(0.0, |s| s.0);
    (best >= MIN_SCORE && best - runner_up >= 0.05).then(|| {
        (
            offset,
            format!(
                "matching device activity ({:.0}% of its busy time)",
                best * 100.0
            ),
        )
    })
}

/// The engine class named in a Gaudi engine lane's name: `[HD3] TPC 5`, `*MME `, `**DMA `,
/// `*EDMA `, `*NIC Internal `, `*ROTATOR`, `MME 0` …. `None` for other names (CUDA streams).
#[must_use]
pub fn gaudi_engine_class(name: &str) -> Option<EngineClass> {
    let name = name.trim().trim_start_matches('*').trim();
    // Drop a die prefix such as `[HD3] ` / `[D0] `.
    let name = match name.strip_prefix('[').and_then(|rest| rest.split_once(']')) {
        Some((_, rest)) => rest.trim(),
        None => name,
    };
    let word = name
        .split(|c: char| c == ' ' || c == '_' || c.is_ascii_digit())
        .next()?;
    Some(match word.to_ascii_uppercase().as_str() {
        "MME" => EngineClass::Mme,
        "TPC" => EngineClass::Tpc,
        "DMA" | "EDMA" | "PDMA" | "KDMA" => EngineClass::Dma,
        "NIC" => EngineClass::Nic,
        "ROTATOR" => EngineClass::Rotator,
        _ => return None,
    })
}

/// The device ordinal: from a label like `GPU 3` / `MTIA 9`, else the numeric pid (Kineto
/// uses the device index as the pid of device lanes).
fn device_index(labels: &str, pid: LaneId) -> Option<i64> {
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
    use super::gaudi_engine_class;
    use crate::model::EngineClass;

    #[test]
    fn gaudi_engine_names() {
        assert_eq!(gaudi_engine_class("[HD3] TPC 5"), Some(EngineClass::Tpc));
        assert_eq!(gaudi_engine_class("[HD0] MME"), Some(EngineClass::Mme));
        assert_eq!(gaudi_engine_class("**MME "), Some(EngineClass::Mme));
        assert_eq!(gaudi_engine_class("*EDMA "), Some(EngineClass::Dma));
        assert_eq!(gaudi_engine_class("*NIC Internal "), Some(EngineClass::Nic));
        assert_eq!(gaudi_engine_class("*ROTATOR"), Some(EngineClass::Rotator));
        assert_eq!(gaudi_engine_class("TPC_3"), Some(EngineClass::Tpc));
        assert_eq!(gaudi_engine_class("[D0] Cache Slice"), None);
        assert_eq!(gaudi_engine_class("stream 7"), None);
        assert_eq!(gaudi_engine_class("***Host"), None);
    }
}
