//! Stage: repairs. Turns the build's counts of repaired and dropped events into warnings.

use super::TimelineBuilder;
use crate::model::{Warning, WarningCode};

impl TimelineBuilder {
    pub(super) fn report_repairs(&mut self) {
        let stats = self.timeline.stats.clone();
        let mut warnings = Vec::new();
        let mut warn = |code: WarningCode, message: String| {
            warnings.push(Warning {
                code,
                offset: None,
                message,
            });
        };
        let rounding = stats.negative_durations - stats.large_negative_durations;
        if stats.large_negative_durations > 0 {
            warn(
                WarningCode::NegativeDuration,
                format!(
                    "{} slices end before they start by 1 µs or more (down to {} ns): not rounding, the trace is wrong there; clamped to 0",
                    stats.large_negative_durations, stats.most_negative_ns
                ),
            );
        }
        if rounding > 0 {
            warn(
                WarningCode::NegativeDuration,
                if stats.large_negative_durations == 0 {
                    format!(
                        "{rounding} slices had a negative duration (down to {} ns, float rounding); clamped to 0",
                        stats.most_negative_ns
                    )
                } else {
                    format!(
                        "{rounding} slices had a negative duration under 1 µs (float rounding); clamped to 0"
                    )
                },
            );
        }
        if stats.clamped_ends > 0 {
            warn(
                WarningCode::TimeClamped,
                format!(
                    "{} slices would end past the largest representable time (2^63 ns); cut to end there",
                    stats.clamped_ends
                ),
            );
        }
        if stats.overlong > 0 {
            warn(
                WarningCode::OverlongSlice,
                format!(
                    "dropped {} slices longer than 7 days (profiler overflow)",
                    stats.overlong
                ),
            );
        }
        if stats.partial_overlaps > 0 {
            warn(
                WarningCode::Overlap,
                format!(
                    "{} slices start inside another slice of the same track and end after it (by up to {} ns); kept as siblings",
                    stats.partial_overlaps, stats.max_overlap_ns
                ),
            );
        }
        if stats.unclosed_begins > 0 {
            warn(
                WarningCode::UnclosedBegin,
                format!(
                    "{} B events had no matching E; closed at the last time seen on their track",
                    stats.unclosed_begins
                ),
            );
        }
        if stats.unmatched_ends > 0 {
            warn(
                WarningCode::UnmatchedEnd,
                format!("ignored {} E events with no open B", stats.unmatched_ends),
            );
        }
        if stats.unsupported_phase > 0 {
            warn(
                WarningCode::UnsupportedPhase,
                format!(
                    "skipped {} events of phases steplens does not model",
                    stats.unsupported_phase
                ),
            );
        }
        if stats.malformed > 0 {
            warn(
                WarningCode::MalformedEvent,
                format!(
                    "skipped {} events that are not objects or miss a field their phase needs (ts, dur, flow id)",
                    stats.malformed
                ),
            );
        }
        // Build-time repairs are not tied to one source when several were loaded together;
        // attach them to the first.
        if let Some(first) = self.timeline.sources.first_mut() {
            first.warnings.extend(warnings);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::stage_test::build;
    use crate::model::WarningCode;

    #[test]
    fn repaired_events_become_one_warning_each_kind() {
        let t = build(
            r#"[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":-5},
            {"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":2,"dur":-1},
            {"ph":"X","cat":"cpu_op","name":"c","pid":1,"tid":1,"ts":3,"dur":1}]"#,
        );
        let negative: Vec<_> = t.sources[0]
            .warnings
            .iter()
            .filter(|w| w.code == WarningCode::NegativeDuration)
            .collect();
        assert_eq!(negative.len(), 1, "{:?}", t.sources[0].warnings);
        assert!(negative[0].message.contains('2'), "{}", negative[0].message);
    }
}
