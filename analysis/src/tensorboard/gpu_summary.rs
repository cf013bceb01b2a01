//! The GPU summary: per device, utilization over the plugin's steps, SM efficiency, achieved
//! occupancy and the Tensor Core share of the kernels ops launched.

use std::collections::BTreeMap;

use steplens_ingest::Timeline;
use steplens_ingest::model::SliceId;

use super::kernel_facts::KernelFacts;
use super::steps_and_links::{PluginSteps, enclosing_op};
use super::{GpuSummary, Links};
use steplens_ingest::intervals::IntervalSet;

pub(super) fn gpu_summary(
    t: &Timeline,
    links: &Links,
    steps: &PluginSteps,
    facts: &[KernelFacts],
) -> Vec<GpuSummary> {
    let mut out = Vec::new();
    for (&source, steps) in steps {
        let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
            continue;
        };
        let (from, to) = (first.start, last.end);
        let span = (to - from) as f64;
        if span <= 0.0 {
            continue;
        }
        let mut by_device: BTreeMap<i64, Vec<&KernelFacts>> = BTreeMap::new();
        for f in facts.iter().filter(|f| f.source == source) {
            by_device.entry(f.device).or_default().push(f);
        }
        for (device, kernels) in by_device {
            let range = |k: SliceId| (t.slices.start[k as usize], t.slices.end(k));
            let busy = IntervalSet::from_ranges(kernels.iter().map(|f| range(f.slice)).collect());
            let utilization = busy.covered(from, to) as f64 / span;
            // SM efficiency: a sweep over kernel ends, each moment worth min(Σ blocks/SM, 1).
            let mut edges: Vec<(i64, f64)> = Vec::new();
            for f in &kernels {
                if let Some(b) = f.blocks_per_sm.filter(|b| *b > 0.0) {
                    let (s, e) = range(f.slice);
                    edges.push((s, b));
                    edges.push((e, -b));
                }
            }
            let sm_efficiency = (!edges.is_empty()).then(|| {
                edges.sort_by_key(|e| e.0);
                let (mut level, mut acc, mut at) = (0.0f64, 0.0f64, i64::MIN);
                for (x, delta) in edges {
                    if at != i64::MIN && x > at {
                        let (a, b) = (at.max(from), x.min(to));
                        if b > a {
                            acc += level.min(1.0) * (b - a) as f64;
                        }
                    }
                    level += delta;
                    if level < 1e-9 {
                        level = 0.0;
                    }
                    at = x;
                }
                acc / span * 100.0
            });
            let (mut weighted, mut weight) = (0.0, 0.0);
            for f in &kernels {
                if let Some(o) = f.occupancy.filter(|o| *o >= 0.0) {
                    let (s, e) = range(f.slice);
                    let w = (e.min(to) - s.max(from)).max(0) as f64;
                    weighted += o * w;
                    weight += w;
                }
            }
            // Tensor Core time among the kernels ops launched (not clipped to the steps).
            let (mut tc, mut all) = (0i64, 0i64);
            for f in &kernels {
                let launched_by_op = links
                    .launcher(f.slice)
                    .is_some_and(|r| enclosing_op(t, r).is_some());
                if launched_by_op {
                    let dur = t.slices.dur[f.slice as usize];
                    all += dur;
                    if f.tensor_cores {
                        tc += dur;
                    }
                }
            }
            out.push(GpuSummary {
                source,
                device,
                name: t.device.name.clone().filter(|n| !n.is_empty()),
                utilization_pct: utilization * 100.0,
                sm_efficiency_pct: sm_efficiency,
                achieved_occupancy_pct: (weight > 0.0).then(|| weighted / weight),
                tensor_core_pct: (all > 0).then(|| tc as f64 * 100.0 / all as f64),
            });
        }
    }
    out
}
