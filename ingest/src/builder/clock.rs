//! Stage: clock alignment. Puts device-only inputs on the clock of an input with host threads
//! (shared kernel names, else device activity), with a warning saying how.

use rustc_hash::FxHashMap;

use super::TimelineBuilder;
use crate::intervals::IntervalSet;
use crate::model::{StrId, Timeline, TrackKind, Warning, WarningCode};

impl TimelineBuilder {
    /// Puts device-only inputs (a Synapse TEF trace, a HW-trace CSV) loaded next to a trace with
    /// host threads on that trace's clock. The anchor is the first run of each kernel name on
    /// the device lanes of both: when most shared names agree on one offset (within 1 µs), every
    /// time of the device-only input moves by it. Without an agreeing anchor the input keeps its
    /// own clock, and a warning says so.
    pub(super) fn align_device_clocks(&mut self) {
        const AGREE_NS: i64 = 1_000;
        let t = &self.timeline;
        if t.sources.len() < 2 {
            return;
        }
        let has_host: Vec<bool> = (0..t.sources.len())
            .map(|s| {
                t.tracks.iter().any(|tr| {
                    tr.source as usize == s
                        && tr.kind == TrackKind::HostThread
                        && tr.slices.end > tr.slices.start
                })
            })
            .collect();
        // Synapse's own host lane runs on the device clock: a TEF trace is never the reference.
        let synapse = |s: usize| t.sources[s].format.host_on_device_clock();
        let Some(reference) = (0..t.sources.len()).find(|&s| has_host[s] && !synapse(s)) else {
            return;
        };
        // First start of each device-work name, per input.
        let mut first: FxHashMap<(u16, StrId), i64> = FxHashMap::default();
        for track in &t.tracks {
            if !track.kind.is_device() {
                continue;
            }
            for i in track.slices.clone() {
                if !t.slice_class(i).is_device_work() {
                    continue;
                }
                let key = (track.source, t.slices.name[i as usize]);
                let start = t.slices.start[i as usize];
                first
                    .entry(key)
                    .and_modify(|v| *v = (*v).min(start))
                    .or_insert(start);
            }
        }
        let mut shifts: Vec<(u16, i64, String)> = Vec::new();
        let mut unaligned: Vec<u16> = Vec::new();
        for (source, &host) in has_host.iter().enumerate() {
            let device_only = (!host || synapse(source))
                && t.tracks
                    .iter()
                    .any(|tr| tr.source as usize == source && tr.kind.is_device());
            if source == reference || !device_only {
                continue;
            }
            let (source, reference) = (source as u16, reference as u16);
            let mut offsets: Vec<i64> = first
                .iter()
                .filter(|((s, _), _)| *s == source)
                .filter_map(|(&(_, name), &start)| {
                    first.get(&(reference, name)).map(|&r| start - r)
                })
                .collect();
            offsets.sort_unstable();
            let by_names = offsets.get(offsets.len() / 2).copied().and_then(|median| {
                let agreeing = offsets
                    .iter()
                    .filter(|&&o| (o - median).abs() <= AGREE_NS)
                    .count();
                (agreeing * 2 > offsets.len())
                    .then(|| (median, format!("{agreeing} shared kernel names")))
            });
            match by_names.or_else(|| activity_offset(t, source, reference)) {
                Some((offset, how)) => shifts.push((source, offset, how)),
                None => unaligned.push(source),
            }
        }
        let reference_path = t.sources[reference].path.clone();
        let reference = reference as u16;
        for (source, offset, how) in shifts {
            self.shift_source(source, offset);
            if let Some(slot) = self.timeline.clock_of.get_mut(source as usize) {
                *slot = reference;
            }
            if let Some(info) = self.timeline.sources.get_mut(source as usize) {
                info.warnings.push(Warning {
                    code: WarningCode::ClockAligned,
                    offset: None,
                    message: format!(
                        "clock aligned to {reference_path} by {how} (moved by {} ns)",
                        -offset
                    ),
                });
            }
        }
        for source in unaligned {
            if let Some(info) = self.timeline.sources.get_mut(source as usize) {
                info.warnings.push(Warning {
                    code: WarningCode::ClockNotAligned,
                    offset: None,
                    message: format!(
                        "no shared anchor with {reference_path} (no kernel names or device activity agree on one clock offset): its times stay on their own clock"
                    ),
                });
            }
        }
    }

    /// Moves every time of one input by `-offset` ns.
    pub(super) fn shift_source(&mut self, source: u16, offset: i64) {
        let t = &mut self.timeline;
        let own: Vec<bool> = t.tracks.iter().map(|tr| tr.source == source).collect();
        for track in t.tracks.iter().filter(|tr| tr.source == source) {
            for i in track.slices.clone() {
                t.slices.start[i as usize] -= offset;
            }
        }
        for (ts, &track) in t.instants.ts.iter_mut().zip(&t.instants.track) {
            if own.get(track as usize).copied().unwrap_or(false) {
                *ts -= offset;
            }
        }
        for (ts, &track) in t.counters.ts.iter_mut().zip(&t.counters.track) {
            if own.get(track as usize).copied().unwrap_or(false) {
                *ts -= offset;
            }
        }
    }
}

/// Device activity as intervals per input (union of every engine's device work).
pub(super) fn device_activity(t: &Timeline, source: u16) -> IntervalSet {
    let mut ranges = Vec::new();
    for track in t
        .tracks
        .iter()
        .filter(|tr| tr.source == source && tr.kind.is_device())
    {
        for i in track.slices.clone() {
            if t.slice_class(i).is_device_work() {
                ranges.push((t.slices.start[i as usize], t.slices.end(i)));
            }
        }
    }
    IntervalSet::from_ranges(ranges)
}

/// When no names are shared (a HW-trace CSV names nodes, the torch trace names ops): the clock
/// offset under which the device-only input's busy time best lands on the reference's busy
/// time. Candidates put the input's first work on each busy interval of the reference; one is
/// accepted when at least 90 % of the input's busy time then falls on busy time of the
/// reference, and no other well-placed candidate more than 1 ms away comes within 5 points.
pub(super) fn activity_offset(t: &Timeline, source: u16, reference: u16) -> Option<(i64, String)> {
    const MAX_CANDIDATES: usize = 20_000;
    const SAMPLED_INTERVALS: usize = 64;
    const FULLY_SCORED: usize = 32;
    const MIN_SCORE: f64 = 0.9;
    const DISTINCT_NS: i64 = 1_000_000;
    let mine = device_activity(t, source);
    let theirs = device_activity(t, reference);
    let first = mine.iter().next()?.0;
    if mine.total() <= 0 || theirs.is_empty() {
        return None;
    }
    let score = |intervals: &[(i64, i64)], offset: i64| -> f64 {
        let length: i64 = intervals.iter().map(|(a, e)| e - a).sum();
        let hit: i64 = intervals
            .iter()
            .map(|&(a, e)| theirs.covered(a - offset, e - offset))
            .sum();
        hit as f64 / length.max(1) as f64
    };
    // Candidates: the input's first work starts where some busy interval of the reference
    // starts (capped). Each is scored first on an even sample of the input's intervals; only
    // the best few are scored on all of them, so the cost stays bounded on large inputs.
    let all: Vec<(i64, i64)> = mine.iter().collect();
    let step = (all.len() / SAMPLED_INTERVALS).max(1);
    let sample: Vec<(i64, i64)> = all.iter().copied().step_by(step).collect();
    let mut prescored: Vec<(f64, i64)> = theirs
        .iter()
        .take(MAX_CANDIDATES)
        .map(|(b, _)| {
            let offset = first - b;
            (score(&sample, offset), offset)
        })
        .collect();
    prescored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    let mut scored: Vec<(f64, i64)> = prescored
        .iter()
        .take(FULLY_SCORED)
        .map(|&(_, offset)| (score(&all, offset), offset))
        .collect();
    scored.sort_by(|x, y| y.0.total_cmp(&x.0));
    let (best, offset) = *scored.first()?;
    // The best other explanation: a candidate at least 1 ms away from the winner.
    let runner_up = scored
        .iter()
        .find(|s| (s.1 - offset).abs() > DISTINCT_NS)
        .map_or(0.0, |s| s.0);
    (best >= MIN_SCORE && best - runner_up >= 0.05).then(|| {
        (
            offset,
            format!(
                "matching device activity ({:.0}% of its busy time)",
                best * 100.0
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::builder::stage_test::{build, build_many};
    use crate::model::WarningCode;

    #[test]
    fn a_device_only_input_moves_onto_the_host_trace_clock_by_shared_kernel_names() {
        let host = r#"[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":90,"dur":200},
            {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":100,"dur":10},
            {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":200,"dur":10}]"#;
        let device = r#"[{"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":1100,"dur":10},
            {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":1200,"dur":10}]"#;
        let t = build_many(&[host, device]);
        assert_eq!(t.clock_of, [0, 0]);
        let starts: Vec<i64> = t
            .tracks
            .iter()
            .filter(|tr| tr.source == 1)
            .flat_map(|tr| tr.slices.clone())
            .map(|i| t.slices.start[i as usize])
            .collect();
        assert_eq!(starts, [100_000, 200_000]);
        assert!(
            t.sources[1]
                .warnings
                .iter()
                .any(|w| w.code == WarningCode::ClockAligned && w.message.contains("2 shared")),
            "{:?}",
            t.sources[1].warnings
        );
    }

    #[test]
    fn a_single_input_keeps_its_own_clock() {
        let t = build(r#"[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":5,"dur":1}]"#);
        assert_eq!(t.clock_of, [0]);
        assert_eq!(t.slices.start[0], 5_000);
    }
}
