//! The path's figures from its edges: each stretch classified by what bounds it (host work,
//! launch, device work, gap, sync wait, data loading, compile), the ranks' waits for the last
//! arrival relabelled, the time per bound, the top contributors and the runs the savings read.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::model::{CategoryClass, SliceId, Timeline, TrackKind};

use super::graph::EdgeKind;
use super::stretches::{Stretch, What, coarse_slices};
use super::sync::{BLOCKING_FLAG, COMPILE_FLAG, DATALOADER_FLAG, Shared};
use super::walk::Window;
use super::{Bound, Contributor, CriticalPath, TOP_CONTRIBUTORS};
use steplens_ingest::intervals::IntervalSet;

impl Window {
    /// The path's figures from its edges in order: (from, to, track of the later end, kind).
    pub(super) fn summarize(
        &self,
        t: &Timeline,
        shared: &Shared,
        main_track: u32,
        edges: impl Iterator<Item = (i64, i64, u32, EdgeKind)>,
    ) -> CriticalPath {
        // Data loader and compile ranges of the main thread classify host stretches: those in
        // the window, and the ones around its first slice that began before it; compiles on
        // any host thread of the clock count too.
        let mut loading = Vec::new();
        let mut compiling = Vec::new();
        let tr = &t.tracks[main_track as usize];
        let inside = t.track_slices_between(tr, self.start, self.end);
        let around = inside
            .clone()
            .next()
            .or_else(|| t.slice_at(main_track, self.start))
            .map(|first| {
                std::iter::successors(Some(first), |&c| {
                    let p = t.slices.parent[c as usize];
                    (p != steplens_ingest::model::NO_PARENT).then_some(p)
                })
                .filter(|&a| t.slices.start[a as usize] < self.start)
                .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        for i in inside.chain(around) {
            let flags = shared.flags(t, i);
            let range = (t.slices.start[i as usize], t.slices.end(i));
            if flags & DATALOADER_FLAG != 0 {
                loading.push(range);
            }
            if flags & COMPILE_FLAG != 0 {
                compiling.push(range);
            }
        }
        compiling.extend(
            shared
                .compiles
                .get(&self.clock)
                .into_iter()
                .flatten()
                .filter(|&&(a, b)| a < self.end && b > self.start),
        );
        let mut loading = Cursor::new(loading);
        let mut compiling = Cursor::new(compiling);
        // Stretches come in time order: the cursors only move forward.
        let mut host_bound = |a: i64, b: i64, default: Bound| -> Bound {
            let mid = a + (b - a) / 2;
            if compiling.covers(mid) {
                Bound::Compile
            } else if loading.covers(mid) {
                Bound::DataLoading
            } else {
                default
            }
        };
        let device_bound = |slice: SliceId| -> Bound {
            let comm = crate::ranks::collective_of(t.slice_name(slice)).is_some()
                || t.slice_track(slice).is_some_and(|tr| {
                    matches!(
                        tr.kind,
                        TrackKind::DeviceEngine {
                            class: steplens_ingest::model::EngineClass::Nic,
                            ..
                        }
                    )
                });
            if comm {
                Bound::Communication
            } else {
                Bound::DeviceCompute
            }
        };
        // The fine stretches, one per path edge (no text yet).
        let mut fine: Vec<Stretch> = Vec::with_capacity(edges.size_hint().0);
        for (a, b, track, kind) in edges {
            if b <= a {
                continue;
            }
            let (what, bound) = match kind {
                EdgeKind::Span(slice) => {
                    let on_device = t.slice_track(slice).is_some_and(|tr| tr.kind.is_device());
                    let flags = shared.flags(t, slice);
                    let bound = if on_device {
                        device_bound(slice)
                    } else if flags & BLOCKING_FLAG != 0 {
                        Bound::SyncWait
                    } else if flags & COMPILE_FLAG != 0 {
                        Bound::Compile
                    } else if t.slice_class(slice) == CategoryClass::CpuOp {
                        host_bound(a, b, Bound::HostCompute)
                    } else {
                        host_bound(a, b, Bound::LaunchOverhead)
                    };
                    (What::Event(slice), bound)
                }
                EdgeKind::HostGap => (What::BetweenOps, host_bound(a, b, Bound::HostCompute)),
                // A launch that waits for its graph to compile waits for the compile.
                EdgeKind::Launch(k) => (What::LaunchOf(k), host_bound(a, b, Bound::LaunchOverhead)),
                EdgeKind::KernelGap(k) | EdgeKind::StreamWait(k) => {
                    (What::GapBefore(k), Bound::KernelGap)
                }
                EdgeKind::SyncWake(call) => (What::Event(call), Bound::SyncWait),
            };
            match fine.last_mut() {
                Some(prev) if prev.what == what && prev.bound == bound && prev.end == a => {
                    prev.end = b;
                }
                _ => fine.push(Stretch {
                    start: a,
                    end: b,
                    track,
                    what,
                    bound,
                }),
            }
        }
        if let Some(waits) = shared.rank_waits.get(&self.clock) {
            fine = waiting_for_last_rank(fine, waits);
        }
        let total_ns = fine.iter().map(|s| s.end - s.start).sum();
        let mut per_bound = [0i64; Bound::ALL.len()];
        // Per (what, bound), packed in one word: events of one name count together.
        let mut by_name: FxHashMap<u64, (i64, u64)> = FxHashMap::default();
        let mut bound_runs: Vec<(i64, i64, Bound)> = Vec::new();
        for s in &fine {
            let len = s.end - s.start;
            per_bound[s.bound as usize] += len;
            let key = match s.what {
                What::Event(slice) => What::Name(t.slices.name[slice as usize]),
                other => other,
            };
            let entry = by_name.entry(key.pack(s.bound)).or_insert((0, 0));
            entry.0 += len;
            entry.1 += 1;
            match bound_runs.last_mut() {
                Some(run) if run.2 == s.bound && run.1 == s.start => run.1 = s.end,
                _ => bound_runs.push((s.start, s.end, s.bound)),
            }
        }
        let by_bound: BTreeMap<Bound, i64> = Bound::ALL
            .iter()
            .filter(|&&b| per_bound[b as usize] > 0)
            .map(|&b| (b, per_bound[b as usize]))
            .collect();
        let by_name = by_name
            .into_iter()
            .map(|(key, figures)| (What::unpack(key), figures));
        let mut top: Vec<((What, Bound), (i64, u64))> = by_name.collect();
        top.sort_by(|a, b| b.1.0.cmp(&a.1.0).then_with(|| a.0.cmp(&b.0)));
        top.truncate(TOP_CONTRIBUTORS);
        let top = top
            .into_iter()
            .map(|((what, bound), (ns, count))| Contributor {
                name: what.text(t),
                bound,
                ns,
                count,
            })
            .collect();
        let (slices, slices_total) = coarse_slices(t, &fine, &mut shared.path_texts.borrow_mut());
        CriticalPath {
            total_ns,
            by_bound,
            top,
            slices,
            slices_total,
            bound_runs,
        }
    }
}

/// Whether times given in increasing order fall in a set of intervals, in one pass.
struct Cursor {
    ranges: Vec<(i64, i64)>,
    next: usize,
}

impl Cursor {
    fn new(ranges: Vec<(i64, i64)>) -> Self {
        let ranges = IntervalSet::from_ranges(ranges).iter().collect();
        Self { ranges, next: 0 }
    }

    fn covers(&mut self, at: i64) -> bool {
        while self.ranges.get(self.next).is_some_and(|r| r.1 <= at) {
            self.next += 1;
        }
        self.ranges.get(self.next).is_some_and(|r| r.0 <= at)
    }
}

/// The stretches with the time this rank waited at a collective for the last rank (`waits`,
/// sorted, disjoint) relabelled as a sync wait: the collective could not start sooner. Device
/// compute keeps its label (another stream's work runs on).
fn waiting_for_last_rank(fine: Vec<Stretch>, waits: &[(i64, i64)]) -> Vec<Stretch> {
    let mut out = Vec::with_capacity(fine.len());
    let mut next = 0;
    for s in fine {
        if s.bound == Bound::DeviceCompute {
            out.push(s);
            continue;
        }
        while waits.get(next).is_some_and(|w| w.1 <= s.start) {
            next += 1;
        }
        let mut at = s.start;
        let mut k = next;
        while let Some(&(a, b)) = waits.get(k).filter(|w| w.0 < s.end) {
            if a > at {
                out.push(Stretch {
                    start: at,
                    end: a,
                    ..s
                });
            }
            let (from, to) = (a.max(at), b.min(s.end));
            if to > from {
                out.push(Stretch {
                    start: from,
                    end: to,
                    what: What::LastRank,
                    bound: Bound::SyncWait,
                    ..s
                });
            }
            at = to.max(at);
            if b > s.end {
                break;
            }
            k += 1;
        }
        if s.end > at {
            out.push(Stretch { start: at, ..s });
        }
    }
    out
}
