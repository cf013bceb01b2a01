//! Stage: steps. Finds `ProfilerStep#N` ranges (or derives steps from repeated iterations)
//! and drops steps past a point of damage.
//!
//! Inference servers mark their steps otherwise: a `user_annotation` per engine step. Where an
//! input has no `ProfilerStep#N`, the common markers are its steps ([`INFERENCE_MARKERS`]):
//! SGLang's and vLLM's profiler step ranges (`step[DECODE bs=32]`, `step[PREFILL …]`) and vLLM's
//! model runner (`execute_model`). `--step-marker REGEX` names them instead, for every input.
//! Marker steps are numbered in time order (`execute_model#3`), so their names stay unique.

use rustc_hash::FxHashMap;

use super::TimelineBuilder;
use crate::model::{CategoryClass, Step, TrackId, TrackKind, Warning, WarningCode};

/// Annotation names that mark an inference engine's steps when a trace has no `ProfilerStep#N`:
/// a name starting with `step[` (SGLang, vLLM profiler step ranges), or `execute_model` (vLLM's
/// model runner, alone or as `…execute_model`).
pub(crate) const INFERENCE_MARKERS: &str = r"^(step\[.*\]|(\w+[.:]\s*)?execute_model)$";

/// How an input's steps are marked.
enum Marker<'a> {
    /// `ProfilerStep#N`.
    Profiler,
    /// Annotations whose names match the pattern.
    Named(&'a regex::Regex),
}

impl TimelineBuilder {
    pub(super) fn find_steps(&mut self) {
        let default_inference = regex::Regex::new(INFERENCE_MARKERS).ok();
        let mut steps = match (&self.step_marker, &default_inference) {
            (Some(marker), _) => self.steps_marked(&Marker::Named(marker), |_| true),
            (None, inference) => {
                let mut steps = self.steps_marked(&Marker::Profiler, |_| true);
                if let Some(inference) = inference {
                    let mut with_steps: Vec<u16> = steps.iter().map(|s| s.source).collect();
                    with_steps.sort_unstable();
                    with_steps.dedup();
                    steps.extend(self.steps_marked(&Marker::Named(inference), |source| {
                        with_steps.binary_search(&source).is_err()
                    }));
                }
                steps
            }
        };
        steps.sort_by_key(|s| (s.source, s.start, s.slice));
        self.drop_steps_past_damage(&mut steps);
        self.timeline.steps = steps;
    }

    /// The steps `marker` marks on the inputs `wanted` accepts: per input, the host thread with
    /// the most of them.
    fn steps_marked(&self, marker: &Marker<'_>, wanted: impl Fn(u16) -> bool) -> Vec<Step> {
        let t = &self.timeline;
        let mut per_track: FxHashMap<TrackId, Vec<Step>> = FxHashMap::default();
        // Per interned name: whether it marks a step (names repeat; test each once).
        let mut marks: FxHashMap<u32, bool> = FxHashMap::default();
        for (track_id, track) in t.tracks.iter().enumerate() {
            if track.kind != TrackKind::HostThread || !wanted(track.source) {
                continue;
            }
            for i in track.slices.clone() {
                if !matches!(
                    t.slice_class(i),
                    CategoryClass::UserAnnotation | CategoryClass::CpuOp
                ) {
                    continue;
                }
                let name = t.slice_name(i);
                let number = match marker {
                    Marker::Profiler => match name.strip_prefix("ProfilerStep#") {
                        Some(number) => number.trim().parse().ok(),
                        None => continue,
                    },
                    Marker::Named(pattern) => {
                        let id = t.slices.name[i as usize];
                        if !*marks.entry(id).or_insert_with(|| pattern.is_match(name)) {
                            continue;
                        }
                        // The outermost marker: one nested in another is part of that step.
                        let mut at = t.slices.parent[i as usize];
                        let mut nested = false;
                        while at != crate::model::NO_PARENT {
                            if marks.get(&t.slices.name[at as usize]) == Some(&true) {
                                nested = true;
                                break;
                            }
                            at = t.slices.parent[at as usize];
                        }
                        if nested {
                            continue;
                        }
                        None
                    }
                };
                per_track
                    .entry(track_id as TrackId)
                    .or_default()
                    .push(Step {
                        name: name.to_owned(),
                        number,
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
        if let Marker::Named(_) = marker {
            // Markers repeat their name every step: number them in time order, per input.
            let mut n = 0;
            let mut source = None;
            for s in &mut steps {
                if source != Some(s.source) {
                    source = Some(s.source);
                    n = 0;
                }
                n += 1;
                if !s.name.starts_with("ProfilerStep#") {
                    s.number = Some(n);
                    s.name = format!("{}#{n}", s.name);
                } else {
                    s.number = s.name["ProfilerStep#".len()..].trim().parse().ok();
                }
            }
        }
        steps
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

    /// vLLM writes a `user_annotation` per engine step and none of `ProfilerStep#N`; SGLang
    /// wraps its own `step[DECODE bs=32]` range around the model runner's. The outermost marker
    /// of each step is the step, numbered in time order.
    #[test]
    fn inference_annotations_are_steps_without_profiler_steps() {
        let vllm = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"user_annotation","name":"execute_model","pid":1,"tid":1,"ts":0,"dur":10},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":2},
            {"ph":"X","cat":"user_annotation","name":"execute_model","pid":1,"tid":1,"ts":20,"dur":12}]}"#,
        );
        let names: Vec<(&str, Option<i64>)> = vllm
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.number))
            .collect();
        assert_eq!(
            names,
            [("execute_model#1", Some(1)), ("execute_model#2", Some(2))]
        );
        let sglang = build(
            r#"{"traceEvents":[
            {"ph":"X","cat":"user_annotation","name":"step[DECODE bs=32]","pid":1,"tid":1,"ts":0,"dur":10},
            {"ph":"X","cat":"user_annotation","name":"execute_model","pid":1,"tid":1,"ts":1,"dur":8},
            {"ph":"X","cat":"user_annotation","name":"step[PREFILL bs=4]","pid":1,"tid":1,"ts":20,"dur":10}]}"#,
        );
        let names: Vec<&str> = sglang.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["step[DECODE bs=32]#1", "step[PREFILL bs=4]#2"]);
    }

    /// `ProfilerStep#N` wins over the inference markers; `--step-marker` names others instead.
    #[test]
    fn profiler_steps_win_and_a_step_marker_overrides_them() {
        let json = r#"{"traceEvents":[
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#7","pid":1,"tid":1,"ts":0,"dur":30},
            {"ph":"X","cat":"user_annotation","name":"execute_model","pid":1,"tid":1,"ts":1,"dur":8},
            {"ph":"X","cat":"user_annotation","name":"execute_model","pid":1,"tid":1,"ts":12,"dur":8}]}"#;
        let t = build(json);
        let names: Vec<&str> = t.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ProfilerStep#7"]);
        let options = crate::LoadOptions {
            step_marker: regex::Regex::new("^execute_model$").ok(),
            ..crate::LoadOptions::default()
        };
        let marked = crate::load_bytes("marked.json", json.as_bytes().to_vec(), &options)
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = marked.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["execute_model#1", "execute_model#2"]);
    }
}
