//! Stage: steps. Finds `ProfilerStep#N` ranges (or derives steps from repeated iterations)
//! and drops steps past a point of damage.

use rustc_hash::FxHashMap;

use super::TimelineBuilder;
use crate::model::{CategoryClass, Step, TrackId, TrackKind, Warning, WarningCode};

impl TimelineBuilder {
    pub(super) fn find_steps(&mut self) {
        let t = &self.timeline;
        let mut per_track: FxHashMap<TrackId, Vec<Step>> = FxHashMap::default();
        for (track_id, track) in t.tracks.iter().enumerate() {
            if track.kind != TrackKind::HostThread {
                continue;
            }
            for i in track.slices.clone() {
                let name = t.slice_name(i);
                let Some(number) = name.strip_prefix("ProfilerStep#") else {
                    continue;
                };
                if !matches!(
                    t.slice_class(i),
                    CategoryClass::UserAnnotation | CategoryClass::CpuOp
                ) {
                    continue;
                }
                per_track
                    .entry(track_id as TrackId)
                    .or_default()
                    .push(Step {
                        name: name.to_owned(),
                        number: number.trim().parse().ok(),
                        start: t.slices.start[i as usize],
                        dur: t.slices.dur[i as usize],
                        track: track_id as TrackId,
                        slice: i,
                        source: track.source,
                        derived: false,
                    });
            }
        }
        // One step sequence per source: the host thread with the most step annotations.
        let mut best: FxHashMap<u16, Vec<Step>> = FxHashMap::default();
        for (_, steps) in per_track {
            let Some(source) = steps.first().map(|s| s.source) else {
                continue;
            };
            let slot = best.entry(source).or_default();
            if steps.len() > slot.len()
                || (steps.len() == slot.len() && steps[0].track < slot[0].track)
            {
                *slot = steps;
            }
        }
        let mut steps: Vec<Step> = best.into_values().flatten().collect();
        steps.sort_by_key(|s| (s.source, s.start, s.slice));
        self.drop_steps_past_damage(&mut steps);
        self.timeline.steps = steps;
    }

    /// Inputs without step annotations get iterations from their device timeline
    /// ([`crate::derived_steps`]).
    pub(super) fn derive_steps(&mut self) {
        let derived = crate::derived_steps::derive(&self.timeline);
        if !derived.is_empty() {
            self.timeline.steps.extend(derived);
            self.timeline
                .steps
                .sort_by_key(|s| (s.source, s.start, s.slice));
        }
    }

    /// In a trace cut short, a step whose range runs past the last event that survived is
    /// missing part of its content; its figures would be made up, so it leaves the step table.
    pub(super) fn drop_steps_past_damage(&mut self, steps: &mut Vec<Step>) {
        let t = &self.timeline;
        let damaged: Vec<bool> = t
            .sources
            .iter()
            .map(|s| {
                s.warnings
                    .iter()
                    .any(|w| matches!(w.code, WarningCode::Damaged | WarningCode::DamagedGzip))
            })
            .collect();
        if !damaged.contains(&true) {
            return;
        }
        // Latest start of any non-step slice per damaged source: how far the data reaches.
        let mut horizon = vec![i64::MIN; t.sources.len()];
        for track in &t.tracks {
            if !damaged.get(track.source as usize).copied().unwrap_or(false) {
                continue;
            }
            for i in track.slices.clone() {
                if !t.slice_name(i).starts_with("ProfilerStep#") {
                    let h = &mut horizon[track.source as usize];
                    *h = (*h).max(t.slices.start[i as usize]);
                }
            }
        }
        let mut dropped: Vec<(u16, String)> = Vec::new();
        steps.retain(|s| {
            let cut = damaged.get(s.source as usize).copied().unwrap_or(false)
                && s.end() > horizon[s.source as usize];
            if cut {
                dropped.push((s.source, s.name.clone()));
            }
            !cut
        });
        for (source, name) in dropped {
            if let Some(info) = self.timeline.sources.get_mut(source as usize) {
                info.warnings.push(Warning {
                    code: WarningCode::IncompleteStep,
                    offset: None,
                    message: format!(
                        "{name} runs past the point where the trace was cut; left out of the step table"
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::stage_test::build;

    #[test]
    fn profiler_steps_become_steps_in_time_order() {
        let t = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#4","pid":1,"tid":1,"ts":20,"dur":10},
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#3","pid":1,"tid":1,"ts":5,"dur":10},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":6,"dur":2}]}"#,
        );
        let steps: Vec<(&str, Option<i64>, i64)> = t
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.number, s.dur))
            .collect();
        assert_eq!(
            steps,
            [
                ("ProfilerStep#3", Some(3), 10_000),
                ("ProfilerStep#4", Some(4), 10_000)
            ]
        );
    }
}
