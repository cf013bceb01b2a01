//! Stage: nesting. Closes dangling `B` events, sorts each track's slices and links every slice
//! to its parent; sorts instants and counter samples.

use super::{OpenSlice, TimelineBuilder};
use crate::model::{
    ArgsRef, CatId, CategoryClass, Counters, Flow, Instants, NO_PARENT, SliceId, Slices, StrId,
    TrackId,
};

/// Slices from which sorting and gathering use a second thread.
const PARALLEL_MIN_SLICES: usize = 1 << 16;

impl TimelineBuilder {
    pub(super) fn close_open_slices(&mut self) {
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

    /// Sorts slices by (track, start, longer first, file order) and resolves nesting.
    pub(super) fn sort_and_nest(&mut self, order: &[TrackId]) {
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
        // Each track's slices by (start, longer first, file order); the tracks are split into
        // two halves of about equal slice count, sorted on two threads.
        let sort_tracks = |tracks: std::ops::Range<usize>, part: &mut [u32], offset: usize| {
            for t in tracks {
                let range = bounds[t] as usize - offset..bounds[t + 1] as usize - offset;
                let part = &mut part[range];
                let key = |&i: &u32| (raw.start[i as usize], -raw.dur[i as usize], i);
                // Stable (and adaptive: merges the runs it finds) rather than unstable: a
                // profiler writes most of a track in start order already, and a quicksort of
                // an almost sorted million-slice track took a fifth of a second on one core.
                // The key ends in the file position, so the order is the same either way.
                if !part.is_sorted_by_key(key) {
                    part.sort_by_key(key);
                }
            }
        };
        let parallel = n >= self.parallel_min_slices.unwrap_or(PARALLEL_MIN_SLICES);
        let middle = bounds
            .partition_point(|&b| (b as usize) < n / 2)
            .min(track_count);
        if parallel {
            let offset = bounds[middle] as usize;
            let spawned = {
                let (low, high) = perm.split_at_mut(offset);
                std::thread::scope(|scope| {
                    let spawned = std::thread::Builder::new()
                        .spawn_scoped(scope, move || {
                            sort_tracks(middle..track_count, high, offset);
                        })
                        .is_ok();
                    sort_tracks(0..middle, low, 0);
                    spawned
                })
            };
            if !spawned {
                // No second thread to be had: this one sorts the other half too.
                sort_tracks(middle..track_count, &mut perm[offset..], offset);
            }
        } else {
            sort_tracks(0..track_count, &mut perm, 0);
        }
        for t in 0..track_count {
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
        let times_of = || -> (Vec<i64>, Vec<i64>, Vec<TrackId>) {
            let track = perm
                .iter()
                .map(|&i| order[raw.track[i as usize] as usize])
                .collect();
            (gather_i64(&raw.start), gather_i64(&raw.dur), track)
        };
        let ids_of = || -> (Vec<StrId>, Vec<CatId>, Vec<ArgsRef>) {
            (
                perm.iter().map(|&i| raw.name[i as usize]).collect(),
                perm.iter().map(|&i| raw.cat[i as usize]).collect(),
                perm.iter().map(|&i| raw.args[i as usize]).collect(),
            )
        };
        // The columns are gathered on two threads on large inputs: each is independent.
        let ((start, dur, track), (name, cat, args)) = if parallel {
            std::thread::scope(|scope| {
                let times = std::thread::Builder::new().spawn_scoped(scope, times_of);
                let ids = ids_of();
                let times = match times.map(std::thread::ScopedJoinHandle::join) {
                    Ok(Ok(times)) => times,
                    Ok(Err(panic)) => std::panic::resume_unwind(panic),
                    // No second thread to be had: this one gathers them too.
                    Err(_) => times_of(),
                };
                (times, ids)
            })
        } else {
            (times_of(), ids_of())
        };
        let mut slices = Slices {
            start,
            dur,
            track,
            name,
            cat,
            depth: vec![0; n],
            parent: vec![NO_PARENT; n],
            args,
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

    pub(super) fn sort_instants_and_counters(&mut self, order: &[TrackId]) {
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
}

#[cfg(test)]
mod tests {
    use crate::builder::stage_test::build;
    use crate::model::NO_PARENT;

    #[test]
    fn slices_are_sorted_and_nested_whatever_the_file_order() {
        let t = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"cpu_op","name":"inner","pid":1,"tid":1,"ts":2,"dur":1},
            {"ph":"X","cat":"cpu_op","name":"outer","pid":1,"tid":1,"ts":1,"dur":5},
            {"ph":"B","cat":"cpu_op","name":"open","pid":1,"tid":1,"ts":10}]}"#,
        );
        let names: Vec<&str> = (0..t.slices.len() as u32)
            .map(|i| t.slice_name(i))
            .collect();
        assert_eq!(names, ["outer", "inner", "open"]);
        assert_eq!(t.slices.parent[0], NO_PARENT);
        assert_eq!(t.slices.parent[1], 0);
        // A `B` never ended is closed at the track's last time and counted.
        assert_eq!(t.stats.unclosed_begins, 1);
    }

    /// Sorting and gathering on two threads gives the one-thread result, on tracks of many
    /// sizes written out of order, with nesting and ties.
    #[test]
    fn two_thread_sort_equals_one_thread() {
        let mut events = Vec::new();
        for i in 0..3000u32 {
            // Tracks of very different sizes; starts out of order; some equal starts.
            let tid = [1, 1, 1, 2, 3, 3, 4, 5][(i % 8) as usize];
            let ts = (i * 7919) % 1000;
            let dur = 1 + (i * 31) % 50;
            events.push(format!(
                r#"{{"ph":"X","cat":"cpu_op","name":"op{}","pid":1,"tid":{tid},"ts":{ts},"dur":{dur}}}"#,
                i % 13
            ));
        }
        let json = format!(r#"{{"traceEvents":[{}]}}"#, events.join(","));
        let build_with = |min: usize| {
            let builder = crate::builder::TimelineBuilder {
                parallel_min_slices: Some(min),
                ..crate::builder::TimelineBuilder::default()
            };
            format!(
                "{:?}",
                crate::builder::stage_test::build_into(builder, &[&json])
            )
        };
        assert!(build_with(0) == build_with(usize::MAX));
    }
}
