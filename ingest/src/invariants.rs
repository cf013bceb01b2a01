//! The Timeline's structural invariants, checked by the tests on every sample and corpus trace
//! and by the fuzz targets on every input that loads: whatever the input, a Timeline that
//! breaks one is a bug in the builder.

use crate::model::{NO_PARENT, SliceId, Timeline, TrackKind};

impl Timeline {
    /// Checks the Timeline's invariants; the error lists every violation found (up to 20).
    ///
    /// - slices are sorted by `(track, start)` and each track's `slices` range holds exactly its
    ///   slices, the ranges tiling `0..slices.len()` in track order;
    /// - no negative duration;
    /// - a slice's parent comes before it, is on the same track, encloses it
    ///   (`start >= parent start`, `end <= parent end`) and is one level shallower; a slice without
    ///   parent has depth 0;
    /// - a track's `max_depth` is the deepest depth of its slices (0 when it has none);
    /// - every flow joins two valid, distinct slices;
    /// - steps are sorted by `(source, start)`, and each step is its slice: same name, start,
    ///   duration, track and source;
    /// - instants and counter samples are sorted by `(track, ts)` and sit on valid tracks; counter
    ///   samples sit on counter tracks.
    ///
    /// # Errors
    /// The violations found, one per line.
    pub fn check_invariants(&self) -> Result<(), String> {
        let t = self;
        let mut errors: Vec<String> = Vec::new();
        let mut fail = |msg: String| {
            if errors.len() < 20 {
                errors.push(msg);
            }
        };
        let s = &t.slices;
        let n = s.len();
        let columns = [
            s.dur.len(),
            s.track.len(),
            s.name.len(),
            s.cat.len(),
            s.depth.len(),
            s.parent.len(),
            s.args.len(),
        ];
        if columns.iter().any(|&len| len != n) {
            return Err(format!(
                "slice columns differ in length: {n} vs {columns:?}"
            ));
        }

        // Track ranges tile the slice array in track order and hold exactly the track's slices.
        let mut next: SliceId = 0;
        for (id, track) in t.tracks.iter().enumerate() {
            if track.slices.start != next || track.slices.end < track.slices.start {
                fail(format!(
                    "track {id} ({}) has range {:?}, expected it to start at {next}",
                    track.name, track.slices
                ));
            }
            next = track.slices.end.max(next);
            let mut deepest = 0u16;
            for i in track.slices.clone() {
                let i = i as usize;
                if i >= n {
                    fail(format!(
                        "track {id} range {:?} is past the end",
                        track.slices
                    ));
                    break;
                }
                if s.track[i] as usize != id {
                    fail(format!(
                        "slice {i} is in track {id}'s range but on track {}",
                        s.track[i]
                    ));
                }
                deepest = deepest.max(s.depth[i]);
            }
            if track.max_depth != deepest {
                fail(format!(
                    "track {id} ({}) max_depth {} but its deepest slice is at {deepest}",
                    track.name, track.max_depth
                ));
            }
        }
        if next as usize != n {
            fail(format!(
                "track ranges cover 0..{next}, but there are {n} slices"
            ));
        }

        for i in 0..n {
            let id = i as SliceId;
            if s.track[i] as usize >= t.tracks.len() {
                fail(format!("slice {i} on unknown track {}", s.track[i]));
                continue;
            }
            if s.dur[i] < 0 {
                fail(format!("slice {i} has negative duration {}", s.dur[i]));
            }
            if i > 0 && (s.track[i - 1], s.start[i - 1]) > (s.track[i], s.start[i]) {
                fail(format!(
                    "slices {} and {i} out of (track, start) order: {:?} > {:?}",
                    i - 1,
                    (s.track[i - 1], s.start[i - 1]),
                    (s.track[i], s.start[i])
                ));
            }
            let parent = s.parent[i];
            if parent == NO_PARENT {
                if s.depth[i] != 0 {
                    fail(format!("slice {i} has no parent but depth {}", s.depth[i]));
                }
                continue;
            }
            let p = parent as usize;
            if p >= i {
                fail(format!(
                    "slice {i} has parent {p}, which does not come before it"
                ));
                continue;
            }
            if s.track[p] != s.track[i] {
                fail(format!(
                    "slice {i} on track {} has parent {p} on track {}",
                    s.track[i], s.track[p]
                ));
            }
            if s.depth[i] != s.depth[p] + 1 {
                fail(format!(
                    "slice {i} depth {} under parent {p} of depth {}",
                    s.depth[i], s.depth[p]
                ));
            }
            if s.start[i] < s.start[p] || s.end(id) > s.end(parent) {
                fail(format!(
                    "slice {i} ({} [{}, {}]) is not inside its parent {p} ({} [{}, {}])",
                    t.slice_name(id),
                    s.start[i],
                    s.end(id),
                    t.slice_name(parent),
                    s.start[p],
                    s.end(parent)
                ));
            }
        }

        for (k, f) in t.flows.iter().enumerate() {
            if f.from as usize >= n || f.to as usize >= n || f.from == f.to {
                fail(format!(
                    "flow {k} (id {}) joins {} -> {} of {n} slices",
                    f.id, f.from, f.to
                ));
            }
        }

        for (k, step) in t.steps.iter().enumerate() {
            if k > 0 {
                let prev = &t.steps[k - 1];
                if (prev.source, prev.start) > (step.source, step.start) {
                    fail(format!(
                        "steps {} and {k} out of (source, start) order",
                        k - 1
                    ));
                }
            }
            let i = step.slice as usize;
            if i >= n {
                fail(format!("step {} points at missing slice {i}", step.name));
                continue;
            }
            let track_source = t.tracks.get(step.track as usize).map(|tr| tr.source);
            // A derived iteration points at the launch (or first node) that starts it.
            if step.derived {
                if s.start[i] != step.start
                    || s.track[i] != step.track
                    || track_source != Some(step.source)
                {
                    fail(format!(
                        "derived step {} ({}) does not start at its slice {i} ({} at {})",
                        step.name,
                        step.start,
                        t.slice_name(step.slice),
                        s.start[i]
                    ));
                }
                continue;
            }
            if t.slice_name(step.slice) != step.name
                || s.start[i] != step.start
                || s.dur[i] != step.dur
                || s.track[i] != step.track
                || track_source != Some(step.source)
            {
                fail(format!(
                    "step {} ({}, {}) does not match its slice {i} ({} at {}, {})",
                    step.name,
                    step.start,
                    step.dur,
                    t.slice_name(step.slice),
                    s.start[i],
                    s.dur[i]
                ));
            }
        }

        let inst = &t.instants;
        for i in 0..inst.len() {
            if inst.track[i] as usize >= t.tracks.len() {
                fail(format!("instant {i} on unknown track {}", inst.track[i]));
            }
            if i > 0 && (inst.track[i - 1], inst.ts[i - 1]) > (inst.track[i], inst.ts[i]) {
                fail(format!(
                    "instants {} and {i} out of (track, ts) order",
                    i - 1
                ));
            }
        }
        let c = &t.counters;
        if c.track.len() != c.ts.len() || c.value.len() != c.ts.len() {
            fail("counter columns differ in length".to_owned());
        } else {
            for i in 0..c.len() {
                match t.tracks.get(c.track[i] as usize) {
                    Some(track) if track.kind == TrackKind::Counter => {}
                    Some(track) => fail(format!(
                        "counter sample {i} on non-counter track {} ({:?})",
                        track.name, track.kind
                    )),
                    None => fail(format!(
                        "counter sample {i} on unknown track {}",
                        c.track[i]
                    )),
                }
                if i > 0 && (c.track[i - 1], c.ts[i - 1]) > (c.track[i], c.ts[i]) {
                    fail(format!(
                        "counter samples {} and {i} out of (track, ts) order",
                        i - 1
                    ));
                }
            }
        }

        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }
}
