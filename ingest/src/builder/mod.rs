//! Building a [`Timeline`]: readers push events in file order through the format-free API
//! here (it knows no format; per-format facts come from [`crate::format::FormatId`]'s properties);
//! [`TimelineBuilder::finish`] then runs the stages, one module each: [`tracks`] (kinds, names,
//! order), [`nesting`] (sort, parents), [`flows`], [`clock`] (device-only inputs onto a host
//! clock), Gaudi node binding ([`crate::gaudi`]), [`steps`], [`device`], [`repairs`].

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::{
    ArgsRef, CatId, CategoryClass, Flow, LaneId, NodeMetrics, Slices, SourceInfo, StrId, Timeline,
    TrackId, TrackKind,
};
use crate::source::SourceData;

mod clock;
mod device;
mod flows;
mod nesting;
mod repairs;
mod steps;
mod tracks;

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

/// A negative duration or an overlap this large is not float rounding of µs timestamps.
pub(crate) const NOT_ROUNDING_NS: i64 = 1_000;

/// A `B` (with what its slice needs) or an `E`, waiting to be paired.
#[derive(Debug)]
struct BeginOrEnd {
    track: TrackId,
    ts: i64,
    begin: Option<OpenSlice>,
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

impl DeviceHints {
    /// Whether the accelerator memory of this input's `[memory]` events is a Gaudi's: the
    /// input describes an HPU (a `deviceProperties` entry naming a Gaudi, `/device:HPU` lanes,
    /// HPU categories, Synapse calls) and nothing of another accelerator (CUDA/HIP/MTIA calls,
    /// ROCm properties, a compute capability). The Gaudi bridge writes `Device Type` 1 for the
    /// HPU's memory; such a trace has no CUDA device.
    pub(crate) fn memory_on_hpu(&self) -> bool {
        self.saw_hpu
            && !self.saw_cuda
            && !self.saw_hip
            && !self.saw_mtia
            && !self.rocm_properties
            && self.compute_capability.is_none()
    }
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
    /// Names of the annotations that mark steps, when the user gave a pattern
    /// (`--step-marker`); else `ProfilerStep#N`, then the common inference markers.
    step_marker: Option<regex::Regex>,
    limit_hit: Option<crate::limits::LimitHit>,
    raw: Slices,
    tracks: Vec<RawTrack>,
    lane_index: FxHashMap<LaneKey, TrackId>,
    last_lane: Option<(LaneKey, TrackId)>,
    processes: FxHashMap<(u16, LaneId), ProcessMeta>,
    threads: FxHashMap<(u16, LaneId, LaneId), ThreadMeta>,
    open: FxHashMap<TrackId, Vec<OpenSlice>>,
    /// `B` and `E` events as they came; paired in time order per track when the build starts.
    begins_and_ends: Vec<BeginOrEnd>,
    flow_points: Vec<FlowPoint>,
    instant_order: Vec<(TrackId, i64, u32)>,
    counter_samples: Vec<(TrackId, i64, f64)>,
    descriptions: FxHashMap<TrackId, TrackDescription>,
    /// Flows between slices given by their push index (`slice_count()` before the push).
    raw_flows: Vec<(CatId, u64, u32, u32)>,
    /// `raw_flows`, bound to sorted slice ids once the slices are sorted.
    raw_flows_bound: Vec<Flow>,
    /// What each input's reader saw of the device, by input: one input's hints never decide
    /// another's format, and `finish` merges them for the Timeline's device.
    device_hints: Vec<DeviceHints>,
    /// Slices from which `finish` sorts and gathers on two threads; `None`: the default
    /// (tests set it to compare the two-thread stages with the one-thread ones).
    pub(crate) parallel_min_slices: Option<usize>,
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

    /// Sets the pattern of the annotations that mark steps (`--step-marker`).
    pub fn set_step_marker(&mut self, marker: Option<regex::Regex>) {
        self.step_marker = marker;
    }

    /// The first limit run into since the last call, if any.
    pub(crate) fn take_limit_hit(&mut self) -> Option<crate::limits::LimitHit> {
        self.limit_hit.take()
    }

    /// Whether a limit was run into since the last [`Self::take_limit_hit`]: a reader stops
    /// reading then, the load fails anyway.
    pub(crate) fn limit_was_hit(&self) -> bool {
        self.limit_hit.is_some()
    }

    /// Records the first limit run into (the load fails on it once the reader returns).
    pub(crate) fn hit_limit(&mut self, what: &'static str, limit: String, flag: &'static str) {
        if self.limit_hit.is_none() {
            self.limit_hit = Some(crate::limits::LimitHit { what, limit, flag });
        }
    }

    /// `s`, or its first `max_name_bytes` (on a char boundary) with the limit recorded.
    pub(crate) fn within_name_limit<'s>(&mut self, s: &'s str) -> &'s str {
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
            if dur <= -NOT_ROUNDING_NS {
                self.timeline.stats.large_negative_durations += 1;
            }
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

    /// Opens a `B` slice. `B`/`E` pairs are matched per track in time order (file order on
    /// ties), as Perfetto does, when the build starts: a file need not write them sorted.
    pub fn push_begin(&mut self, track: TrackId, ts: i64, name: StrId, cat: CatId, args: ArgsRef) {
        let class = self.cat_class(cat);
        self.touch(track, class, ts);
        self.begins_and_ends.push(BeginOrEnd {
            track,
            ts,
            begin: Some(OpenSlice {
                start: ts,
                name,
                cat,
                args,
            }),
        });
    }

    /// Closes the innermost `B` slice of the track open at `ts`.
    pub fn push_end(&mut self, track: TrackId, ts: i64) {
        self.begins_and_ends.push(BeginOrEnd {
            track,
            ts,
            begin: None,
        });
    }

    /// An `E` the reader already knows has no `B` (counted, nothing else).
    pub fn count_unmatched_end(&mut self) {
        self.timeline.stats.unmatched_ends += 1;
    }

    /// Pairs the queued `B`/`E` events of each track in time order; what stays open is closed
    /// by [`Self::close_open_slices`].
    fn pair_begins_and_ends(&mut self) {
        let mut queued = std::mem::take(&mut self.begins_and_ends);
        // Stable: file order decides between events at the same time.
        queued.sort_by_key(|e| (e.track, e.ts));
        for e in queued {
            match e.begin {
                Some(open) => self.open.entry(e.track).or_default().push(open),
                None => {
                    let Some(open) = self.open.get_mut(&e.track).and_then(Vec::pop) else {
                        self.timeline.stats.unmatched_ends += 1;
                        continue;
                    };
                    self.push_slice(
                        e.track,
                        open.start,
                        e.ts.saturating_sub(open.start),
                        open.name,
                        open.cat,
                        open.args,
                    );
                }
            }
        }
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

    /// Rewrites the args of the slices and instants pushed after the first `slices_from` and
    /// `instants_from` (a reader that learns where args are only after pushing them).
    pub(crate) fn map_args_since(
        &mut self,
        slices_from: usize,
        instants_from: usize,
        map: impl Fn(ArgsRef) -> ArgsRef,
    ) {
        for args in self.raw.args.iter_mut().skip(slices_from) {
            *args = map(*args);
        }
        let instants = &mut self.timeline.instants.args;
        for args in instants.iter_mut().skip(instants_from) {
            *args = map(*args);
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

    /// The device hints of input `source`.
    pub(crate) fn device_hints(&mut self, source: u16) -> &mut DeviceHints {
        let i = usize::from(source);
        if self.device_hints.len() <= i {
            self.device_hints.resize_with(i + 1, DeviceHints::default);
        }
        &mut self.device_hints[i]
    }

    /// Number of instants pushed so far.
    #[must_use]
    pub(crate) fn instant_count(&self) -> usize {
        self.timeline.instants.ts.len()
    }

    /// Number of slices pushed so far.
    #[must_use]
    pub fn slice_count(&self) -> usize {
        self.raw.len()
    }

    /// Builds the Timeline.
    #[must_use]
    pub fn finish(mut self) -> Timeline {
        self.pair_begins_and_ends();
        self.close_open_slices();
        let order = self.order_tracks();
        self.build_tracks(&order);
        self.sort_and_nest(&order);
        self.sort_instants_and_counters(&order);
        self.bind_flows(&order);
        self.link_launches_by_correlation();
        self.timeline.clock_of = (0..self.timeline.sources.len() as u16).collect();
        self.align_device_clocks();
        crate::gaudi::bind_node_metrics(&mut self.timeline);
        self.find_steps();
        self.derive_steps();
        self.find_device();
        self.report_repairs();
        self.timeline
    }
}

/// Builds a Timeline from inline JSON, for the stages' unit tests.
#[cfg(test)]
pub(crate) mod stage_test {
    use crate::model::Timeline;

    pub(crate) fn build(json: &str) -> Timeline {
        let loaded = crate::load_bytes(
            "stage.json",
            json.as_bytes().to_vec(),
            &crate::LoadOptions::default(),
        );
        match loaded {
            Ok(t) => t,
            Err(e) => panic!("inline trace: {e}"),
        }
    }

    /// Several inline inputs read into one builder, in order.
    pub(crate) fn build_many(inputs: &[&str]) -> Timeline {
        build_into(super::TimelineBuilder::default(), inputs)
    }

    /// Inline inputs read, in order, into `builder` (set up as a test needs it).
    pub(crate) fn build_into(mut builder: super::TimelineBuilder, inputs: &[&str]) -> Timeline {
        let options = crate::LoadOptions::default();
        for (i, json) in inputs.iter().enumerate() {
            let name = format!("input{i}.json");
            let data = crate::source::SourceData::Owned(json.as_bytes().to_vec());
            let read = crate::source::finish_input(data, &name, &options)
                .and_then(|input| crate::add_read_input(&mut builder, name, input, &options, None));
            if let Err(e) = read {
                panic!("inline trace: {e}");
            }
        }
        builder.finish()
    }
}
