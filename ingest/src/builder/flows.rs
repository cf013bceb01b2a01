//! Stage: flows. Binds flow endpoints (`s`/`t`/`f`, flow v2, launch correlations) to the sorted
//! slices, within one input.

use super::{FlowPhase, FlowPoint, TimelineBuilder};
use crate::model::{Flow, SliceId, TrackId};

/// `points` in the order of (input, category, id, time, starts first), ties in their order.
///
/// Sorted as packed 32-byte keys with the point's index last (an unstable sort of unique keys
/// is the stable order), then gathered: a CUDA trace has two flow points per kernel launch, and
/// a stable sort comparing the points' fields through the track table took 90 ms for the
/// generated 496 MiB trace's 760 k points (60 ms this way).
fn sorted_points(points: &[FlowPoint], source_of: impl Fn(&FlowPoint) -> u16) -> Vec<FlowPoint> {
    const INDEX: u64 = u64::MAX >> 1;
    let mut keys: Vec<(u128, u128)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let group = u128::from(source_of(p)) << 80 | u128::from(p.cat) << 64 | u128::from(p.id);
            // `ts ^ i64::MIN` as unsigned orders like the signed time.
            let time = u128::from((p.ts ^ i64::MIN) as u64) << 64
                | u128::from(p.phase != FlowPhase::Start) << 63
                | u128::from(i as u64 & INDEX);
            (group, time)
        })
        .collect();
    keys.sort_unstable();
    keys.iter()
        .filter_map(|&(_, time)| points.get((time as u64 & INDEX) as usize).copied())
        .collect()
}

impl TimelineBuilder {
    pub(super) fn bind_flows(&mut self, order: &[TrackId]) {
        let mut points = std::mem::take(&mut self.flow_points);
        for p in &mut points {
            p.track = order[p.track as usize];
        }
        // Group endpoints of one flow (input + category + id) together, in time order: flow
        // ids are numbered per trace, so two ranks' flow 10 are different flows.
        let tracks = &self.timeline.tracks;
        let source_of = |p: &FlowPoint| tracks.get(p.track as usize).map_or(0, |t| t.source);
        let points = sorted_points(&points, source_of);
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
            // `from` is the bound slice of the flow currently open in this group; `fanned` the
            // start of the flow a finish just closed: a CUDA/HIP graph launch is one start (the
            // `cudaGraphLaunch`, its correlation id) and a finish on every kernel of the graph,
            // so further finishes without a new start fan out from it.
            let mut open = false;
            let mut from: Option<SliceId> = None;
            let mut fanned: Option<SliceId> = None;
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
                    fanned = None;
                    continue;
                }
                if !open {
                    match (fanned, bound) {
                        (Some(a), Some(b)) if a != b && p.phase == FlowPhase::Finish => {
                            flows.push(Flow {
                                id: p.id,
                                cat: p.cat,
                                from: a,
                                to: b,
                            });
                        }
                        _ => unbound += 1,
                    }
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
                    fanned = from;
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
    pub(super) fn link_launches_by_correlation(&mut self) {
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

    pub(super) fn bind_point(&self, p: &FlowPoint) -> Option<SliceId> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::stage_test::build;
    use crate::model::CatId;

    #[test]
    fn a_launch_flow_binds_the_runtime_call_to_its_kernel() {
        let t = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1,"dur":2},
            {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":5,"dur":1},
            {"ph":"s","cat":"ac2g","name":"ac2g","id":9,"pid":1,"tid":1,"ts":1},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":9,"pid":0,"tid":7,"ts":5,"bp":"e"}]}"#,
        );
        assert_eq!(t.flows.len(), 1, "{:?}", t.flows);
        let f = &t.flows[0];
        assert_eq!(t.slice_name(f.from), "cudaLaunchKernel");
        assert_eq!(t.slice_name(f.to), "k");
    }

    /// A graph launch as the profiler writes it: one `cudaGraphLaunch` (its correlation id the
    /// flow's) and a finish on every kernel of the graph. Each kernel is linked to the launch.
    #[test]
    fn a_graph_launch_links_every_kernel_of_its_graph() {
        let t = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"cuda_runtime","name":"hipGraphLaunch","pid":1,"tid":1,"ts":1,"dur":2,"args":{"correlation":9}},
            {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":5,"dur":1,"args":{"correlation":9}},
            {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":7,"dur":1,"args":{"correlation":9}},
            {"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":9,"dur":1,"args":{"correlation":9}},
            {"ph":"s","cat":"ac2g","name":"ac2g","id":9,"pid":1,"tid":1,"ts":1},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":9,"pid":0,"tid":7,"ts":5,"bp":"e"},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":9,"pid":0,"tid":7,"ts":7,"bp":"e"},
            {"ph":"f","cat":"ac2g","name":"ac2g","id":9,"pid":0,"tid":7,"ts":9,"bp":"e"}]}"#,
        );
        let linked: Vec<(&str, &str)> = t
            .flows
            .iter()
            .map(|f| (t.slice_name(f.from), t.slice_name(f.to)))
            .collect();
        assert_eq!(
            linked,
            [
                ("hipGraphLaunch", "k1"),
                ("hipGraphLaunch", "k2"),
                ("hipGraphLaunch", "k3")
            ]
        );
        assert_eq!(t.stats.unbound_flow_ends, 0);
    }

    /// The packed-key sort gives the order the field-by-field stable sort gives, ties included.
    #[test]
    fn packed_sort_is_the_stable_field_sort() {
        let mut seed = 11u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let phases = [FlowPhase::Start, FlowPhase::Step, FlowPhase::Finish];
        let points: Vec<FlowPoint> = (0..5_000)
            .map(|_| FlowPoint {
                cat: next(3) as CatId,
                id: next(50) * (u64::MAX / 60),
                phase: phases[next(3) as usize],
                track: next(4) as TrackId,
                ts: if next(9) == 0 {
                    i64::MIN + next(3) as i64
                } else {
                    next(40) as i64 - 20
                },
                enclosing: next(2) == 0,
            })
            .collect();
        let source_of = |p: &FlowPoint| (p.track / 2) as u16;
        let mut expected = points.clone();
        expected.sort_by_key(|p| (source_of(p), p.cat, p.id, p.ts, p.phase != FlowPhase::Start));
        let fields =
            |v: &[FlowPoint]| -> Vec<String> { v.iter().map(|p| format!("{p:?}")).collect() };
        assert_eq!(
            fields(&sorted_points(&points, source_of)),
            fields(&expected)
        );
    }
}
