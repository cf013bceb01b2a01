//! Stage: flows. Binds flow endpoints (`s`/`t`/`f`, flow v2, launch correlations) to the sorted
//! slices, within one input.

use super::{FlowPhase, FlowPoint, TimelineBuilder};
use crate::model::{Flow, SliceId, TrackId};

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
    use crate::builder::stage_test::build;

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
}
