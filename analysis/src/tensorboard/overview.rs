//! The Overview: each of the plugin's steps split by role in its priority order, and the mean
//! step of each input.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use steplens_ingest::Timeline;
use steplens_ingest::model::SliceId;

use super::steps_and_links::{PluginSteps, plugin_steps, role_ranges};
use super::{AverageStep, Breakdown, Links, MeanBreakdown, Overview, OverviewStep};
use steplens_ingest::intervals::IntervalSet;

/// The Overview of every input, its breakdown of each Timeline step (by index into `t.steps`;
/// none for a step the plugin does not draw) and the plugin's steps.
pub(super) fn overview(
    t: &Timeline,
    links: &Links,
) -> (Overview, Vec<Option<Breakdown>>, PluginSteps) {
    let step_of_slice: FxHashMap<SliceId, usize> = t
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.slice, i))
        .collect();
    let mut out_step_breakdowns = vec![None; t.steps.len()];
    let mut out = Overview::default();
    let mut all_steps = BTreeMap::new();
    for (source, info) in t.sources.iter().enumerate() {
        let source = source as u16;
        let steps = plugin_steps(t, links, source);
        if steps.is_empty() {
            continue;
        }
        let roles = role_ranges(t, links, source);
        let mut slots = IntervalSet::from_ranges(steps.iter().map(|s| (s.start, s.end)).collect());
        let mut costs: Vec<IntervalSet> = Vec::with_capacity(8);
        for role in &roles {
            let cost = role.intersect(&slots);
            slots = slots.minus(&cost);
            costs.push(cost);
        }
        costs.push(slots);
        let mut sum = MeanBreakdown::default();
        let mut total = 0i64;
        for step in &steps {
            let (start, end) = (step.start, step.end);
            let mut b = Breakdown::default();
            for (part, cost) in b.parts_mut().into_iter().zip(&costs) {
                *part = cost.covered(start, end);
            }
            for (acc, v) in sum.parts_mut().into_iter().zip(b.parts()) {
                *acc += v as f64;
            }
            total += end - start;
            if let Some(index) = step.slice.and_then(|s| step_of_slice.get(&s)) {
                out_step_breakdowns[*index] = Some(b);
            }
            out.steps.push(OverviewStep {
                name: step.number.clone(),
                source,
                rank: info.rank,
                start_ns: start,
                dur_ns: end - start,
                breakdown: b,
            });
        }
        let n = steps.len() as f64;
        for acc in sum.parts_mut() {
            *acc /= n;
        }
        out.average.push(AverageStep {
            source,
            rank: info.rank,
            dur_ns: total as f64 / n,
            breakdown: sum,
        });
        all_steps.insert(source, steps);
    }
    (out, out_step_breakdowns, all_steps)
}
