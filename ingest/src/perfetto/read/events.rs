//! TrackEvents to slices, instants, counters and flows: interned names and categories per
//! sequence, incremental clocks, one BEGIN/END stack per track, debug annotations as args.

use super::{BOOTTIME, Done, Open, Reader, Stack};
use crate::model::{ArgsRef, CatId, LaneId, StrId, TrackId};
use crate::perfetto::event::{self, Event};
use crate::perfetto::proto::{self as pb};

impl Reader<'_> {
    pub(super) fn intern(&mut self, seq_id: u32, interned: pb::InternedData) {
        let seq = self.sequences.entry(seq_id).or_default();
        for n in interned.event_names {
            let id = self.builder.intern(n.name());
            seq.names.insert(n.iid(), id);
        }
        for c in interned.event_categories {
            seq.category_ids.remove(&c.iid());
            seq.categories.insert(c.iid(), c.name.unwrap_or_default());
        }
        let max = self.builder.limits().max_name_bytes;
        let names = interned
            .debug_annotation_names
            .into_iter()
            .map(|n| {
                let iid = n.iid();
                let name = n.name.unwrap_or_default();
                let name = if name.len() > max {
                    self.builder.within_name_limit(&name).to_owned()
                } else {
                    name
                };
                (iid, name)
            })
            .collect();
        self.args.names(seq_id, names);
        let strings = interned
            .debug_annotation_string_values
            .into_iter()
            .map(|s| (s.iid(), s.str.unwrap_or_default()))
            .collect();
        self.args.strings(seq_id, strings);
    }

    /// The event's time in ns: the packet timestamp on its clock (deltas of an incremental
    /// clock accumulated), or the legacy µs fields of the event.
    pub(super) fn time(
        &mut self,
        seq_id: u32,
        timestamp: Option<u64>,
        clock: Option<u32>,
        event: &Event<'_>,
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
        match (event.timestamp_absolute_us, event.timestamp_delta_us) {
            (Some(us), _) => {
                let ns = us.saturating_mul(1000);
                seq.legacy_us_base = Some(ns);
                ns
            }
            (None, Some(us)) => {
                let ns = seq
                    .legacy_us_base
                    .unwrap_or(0)
                    .saturating_add(us.saturating_mul(1000));
                seq.legacy_us_base = Some(ns);
                ns
            }
            (None, None) => 0,
        }
    }

    pub(super) fn track_event(&mut self, seq_id: u32, ts: i64, event: &Event<'_>, event_at: usize) {
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
        self.extra_counters(ts, event);
        match event.kind {
            event::SLICE_BEGIN => {
                self.begins += 1;
                let (name, cat) = self.name_and_cat(seq_id, event);
                let args = self.args(seq_id, event, event_at);
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
            event::SLICE_END => {
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
            event::INSTANT => {
                self.instants += 1;
                let (name, cat) = self.name_and_cat(seq_id, event);
                let args = self.args(seq_id, event, event_at);
                self.builder.push_instant(track, ts, name, cat, b't', args);
            }
            event::COUNTER => {
                self.counters += 1;
                let value = event.counter.unwrap_or(0.0);
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
            _ => self.state_events += 1,
        }
    }

    pub(super) fn extra_counters(&mut self, ts: i64, event: &Event<'_>) {
        if event.extra_counter_uuids.is_empty() && event.extra_double_uuids.is_empty() {
            return;
        }
        let ints = event
            .extra_counter_uuids
            .iter()
            .zip(event.extra_counter_values.iter().map(|v| v as i64 as f64));
        let doubles = event
            .extra_double_uuids
            .iter()
            .zip(event.extra_double_values.iter().map(f64::from_bits));
        let samples: Vec<(u64, f64)> = ints.chain(doubles).collect();
        for (uuid, value) in samples {
            let (track, is_counter) = self.lane(uuid);
            if is_counter {
                self.builder.push_counter_sample(track, ts, value);
            }
        }
    }

    pub(super) fn stack(&mut self, stack_id: u64, track: TrackId) -> &mut Stack {
        self.stacks.entry(stack_id).or_insert_with(|| Stack {
            track,
            open: Vec::new(),
            done: Vec::new(),
            last_ts: i64::MIN,
        })
    }

    /// Pushes the finished slices of a Perfetto track in BEGIN order.
    pub(super) fn flush(&mut self, stack_id: u64) {
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

    pub(super) fn flow_ends_of(&mut self, key: u64, event: &Event<'_>) {
        if event.flow_ids.is_empty() && event.terminating_flow_ids.is_empty() {
            return;
        }
        let skipped = self
            .note
            .as_ref()
            .and(self.skipped_flow_cat)
            .map(|cat| move |id: &u64| (id >> crate::perfetto::FLOW_CAT_SHIFT) == cat);
        let keep = |id: &u64| skipped.as_ref().is_none_or(|is_skipped| !is_skipped(id));
        let leaving = event.flow_ids.iter().filter(keep).map(|id| (id, false));
        let arriving = event
            .terminating_flow_ids
            .iter()
            .filter(keep)
            .map(|id| (id, true));
        let ends: Vec<(u64, bool)> = leaving.chain(arriving).collect();
        if ends.is_empty() {
            return;
        }
        self.flow_keys.insert(key);
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

    pub(super) fn flow_category(&mut self, id: u64) -> CatId {
        if self.note.is_some() {
            let index = (id >> crate::perfetto::FLOW_CAT_SHIFT) as usize;
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

    pub(super) fn name_and_cat(&mut self, seq_id: u32, event: &Event<'_>) -> (StrId, CatId) {
        let name = match (event.name_iid, event.name) {
            (Some(iid), _) => match self.sequences.get(&seq_id).and_then(|s| s.names.get(&iid)) {
                Some(&id) => id,
                None => self.builder.intern(""),
            },
            (None, Some(text)) => self.builder.intern(&String::from_utf8_lossy(text)),
            (None, None) => self.builder.intern(""),
        };
        let cat = match (event.category_iids.len(), event.categories.as_slice()) {
            (1, []) => {
                let iid = event.category_iids.get(0).unwrap_or(0);
                self.category_iid(seq_id, iid)
            }
            (0, [one]) => self.builder.intern_cat(&String::from_utf8_lossy(one)),
            _ => {
                let seq = self.sequences.get(&seq_id);
                let mut joined: Vec<String> = event
                    .category_iids
                    .iter()
                    .map(|iid| {
                        seq.and_then(|s| s.categories.get(&iid))
                            .cloned()
                            .unwrap_or_default()
                    })
                    .collect();
                joined.extend(
                    event
                        .categories
                        .iter()
                        .map(|c| String::from_utf8_lossy(c).into_owned()),
                );
                self.builder.intern_cat(&joined.join(","))
            }
        };
        (name, cat)
    }

    pub(super) fn category_iid(&mut self, seq_id: u32, iid: u64) -> CatId {
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

    /// Queues the event's annotations for the args encoder; `event_at` is where the event's
    /// bytes start in the buffer being read.
    pub(super) fn args(&mut self, seq_id: u32, event: &Event<'_>, event_at: usize) -> ArgsRef {
        if event.annotations == 0 {
            return ArgsRef::NONE;
        }
        self.args
            .event(seq_id, event_at..event_at + event.buf.len())
    }
}
