//! The path as text: what each stretch of it is and the name it is shown by, and the coarse
//! list of [`PathSlice`]s that reports and the viewer read.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use steplens_ingest::model::{SliceId, Timeline};

use super::{Bound, MAX_PATH_SLICES, PathSlice};

/// What a stretch of the path is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum What {
    /// An event's own time.
    Event(SliceId),
    /// Events of one name (for `top`).
    Name(u32),
    /// The main thread between top-level ops.
    BetweenOps,
    /// From a launch call to the work it launched.
    LaunchOf(SliceId),
    /// The device idle before this work.
    GapBefore(SliceId),
    /// Waiting at a collective for the last rank to arrive.
    LastRank,
}

impl What {
    /// `(self, bound)` in one word: 3 bits of kind, 3 of bound, the id above them.
    pub(super) fn pack(self, bound: Bound) -> u64 {
        let (kind, id) = match self {
            Self::Event(s) => (0, s),
            Self::Name(n) => (1, n),
            Self::BetweenOps => (2, 0),
            Self::LaunchOf(k) => (3, k),
            Self::GapBefore(k) => (4, k),
            Self::LastRank => (5, 0),
        };
        (u64::from(id) << 6) | ((bound as u64) << 3) | kind
    }

    /// The inverse of [`Self::pack`].
    pub(super) fn unpack(key: u64) -> (Self, Bound) {
        let id = (key >> 6) as u32;
        let bound = Bound::ALL[((key >> 3) & 7) as usize];
        let what = match key & 7 {
            0 => Self::Event(id),
            1 => Self::Name(id),
            2 => Self::BetweenOps,
            3 => Self::LaunchOf(id),
            4 => Self::GapBefore(id),
            _ => Self::LastRank,
        };
        (what, bound)
    }

    /// One key per distinct [`Self::text`]: events and edges by their slices' names.
    fn text_key(self, t: &Timeline) -> u64 {
        let name = |s: SliceId| t.slices.name.get(s as usize).copied().unwrap_or(u32::MAX);
        let by_name = match self {
            Self::Event(s) => Self::Name(name(s)),
            Self::LaunchOf(k) => Self::LaunchOf(name(k)),
            Self::GapBefore(k) => Self::GapBefore(name(k)),
            other => other,
        };
        by_name.pack(Bound::HostCompute)
    }

    pub(super) fn text(self, t: &Timeline) -> String {
        match self {
            Self::Event(s) => t.slice_name(s).to_owned(),
            Self::Name(n) => t.strings.get(n).to_owned(),
            Self::BetweenOps => "between ops".to_owned(),
            Self::LaunchOf(k) => format!("launch → {}", t.slice_name(k)),
            Self::GapBefore(k) => format!("gap before {}", t.slice_name(k)),
            Self::LastRank => "waiting for the last rank at a collective".to_owned(),
        }
    }
}

/// The texts path slices show, made once per name and track and shared by every step's path:
/// most of a long path's stretches name one of a few hundred ops and kernels.
#[derive(Default)]
pub(super) struct PathTexts {
    names: FxHashMap<u64, Arc<str>>,
    tracks: FxHashMap<u32, Option<Arc<str>>>,
}

impl PathTexts {
    fn name(&mut self, t: &Timeline, what: What) -> Arc<str> {
        Arc::clone(
            self.names
                .entry(what.text_key(t))
                .or_insert_with(|| what.text(t).into()),
        )
    }

    fn track(&mut self, t: &Timeline, track: u32) -> Option<Arc<str>> {
        self.tracks
            .entry(track)
            .or_insert_with(|| {
                t.tracks
                    .get(track as usize)
                    .map(|tr| tr.name.as_str().into())
            })
            .clone()
    }
}

/// One edge's stretch of the path.
#[derive(Clone, Copy)]
pub(super) struct Stretch {
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) track: u32,
    pub(super) what: What,
    pub(super) bound: Bound,
}

/// The path as people and tools read it: host stretches inside one top-level op on one thread
/// merge into that op (named by it, bounded by what holds most of its time), device work and
/// the edges between events stay as they are. A path of more than [`MAX_PATH_SLICES`] keeps
/// its longest stretches, in time order, and says how many it had.
pub(super) fn coarse_slices(
    t: &Timeline,
    fine: &[Stretch],
    texts: &mut PathTexts,
) -> (Vec<PathSlice>, Option<u64>) {
    // The outermost host op holding `slice` on its thread.
    let top_level = |slice: SliceId| -> SliceId {
        let mut top = slice;
        let mut p = t.slices.parent[slice as usize];
        while p != steplens_ingest::model::NO_PARENT && t.slice_class(p).is_host_work() {
            top = p;
            p = t.slices.parent[p as usize];
        }
        top
    };
    struct Coarse {
        start: i64,
        end: i64,
        track: u32,
        what: What,
        /// The bound of its longest part, once the stretch is complete.
        bound: Bound,
    }
    /// The bound holding the most of a stretch's time (the last of equals, as `max_by_key`).
    fn longest(parts: &[(Bound, i64)]) -> Bound {
        parts
            .iter()
            .max_by_key(|(_, ns)| *ns)
            .map_or(Bound::HostCompute, |(b, _)| *b)
    }
    let mut out: Vec<Coarse> = Vec::new();
    // The time per bound of the stretch being extended (the last of `out`): only its longest
    // is kept, so one list serves every stretch, not one allocation each.
    let mut parts: Vec<(Bound, i64)> = Vec::new();
    // The last top-level op found: top-level ops on a thread do not overlap, so a slice on its
    // thread inside its range is under it.
    let mut last_top: Option<(SliceId, u32, i64, i64)> = None;
    for s in fine {
        let what = match s.what {
            What::Event(slice)
                if s.bound != Bound::SyncWait
                    && t.slice_track(slice).is_some_and(|tr| !tr.kind.is_device()) =>
            {
                let (start, end) = (t.slices.start[slice as usize], t.slices.end(slice));
                let track = t.slices.track[slice as usize];
                let top = match last_top {
                    Some((top, tr, a, b)) if tr == track && a <= start && end <= b => top,
                    _ => {
                        let top = top_level(slice);
                        last_top =
                            Some((top, track, t.slices.start[top as usize], t.slices.end(top)));
                        top
                    }
                };
                What::Event(top)
            }
            other => other,
        };
        let len = s.end - s.start;
        match out.last_mut() {
            Some(c) if c.what == what && c.track == s.track && c.end == s.start => {
                c.end = s.end;
                match parts.iter_mut().find(|(b, _)| *b == s.bound) {
                    Some(part) => part.1 += len,
                    None => parts.push((s.bound, len)),
                }
            }
            last => {
                if let Some(done) = last {
                    done.bound = longest(&parts);
                }
                parts.clear();
                parts.push((s.bound, len));
                out.push(Coarse {
                    start: s.start,
                    end: s.end,
                    track: s.track,
                    what,
                    bound: s.bound,
                });
            }
        }
    }
    if let Some(done) = out.last_mut() {
        done.bound = longest(&parts);
    }
    let total = out.len();
    if total > MAX_PATH_SLICES {
        let mut order: Vec<usize> = (0..total).collect();
        order.select_nth_unstable_by_key(MAX_PATH_SLICES - 1, |&i| {
            (std::cmp::Reverse(out[i].end - out[i].start), i)
        });
        let mut keep = vec![false; total];
        for &i in &order[..MAX_PATH_SLICES] {
            keep[i] = true;
        }
        let mut k = keep.iter();
        out.retain(|_| k.next().copied().unwrap_or(false));
    }
    let slices = out
        .into_iter()
        .map(|c| PathSlice {
            name: texts.name(t, c.what),
            track: texts.track(t, c.track),
            start_ns: c.start,
            dur_ns: c.end - c.start,
            bound: c.bound,
            slice: match c.what {
                What::Event(s) => Some(s),
                _ => None,
            },
        })
        .collect();
    (slices, (total > MAX_PATH_SLICES).then_some(total as u64))
}
