//! The end of a read: BEGINs left open closed at the last time seen on their track, flows
//! bound to their slices, args resolved into the source's text, and the warnings and phase
//! counts the read reports.

use std::sync::Arc;

use super::args::{self, ArgsPipe};
use super::{Done, Reader};
use crate::error::IngestError;
use crate::model::{Warning, WarningCode};
use crate::reader::ReadSummary;
use crate::source::SourceData;

impl Reader<'_> {
    pub(super) fn finish(mut self, path: &str) -> Result<ReadSummary, IngestError> {
        // BEGINs left open: closed at the last time seen on their track.
        let mut open: Vec<u64> = self
            .stacks
            .iter()
            .filter(|(_, s)| !s.open.is_empty())
            .map(|(&id, _)| id)
            .collect();
        open.sort_unstable();
        for stack_id in open {
            if let Some(stack) = self.stacks.get_mut(&stack_id) {
                let end = stack.last_ts;
                while let Some(o) = stack.open.pop() {
                    self.unclosed += 1;
                    stack.done.push(Done {
                        start: o.start,
                        dur: end.max(o.start) - o.start,
                        name: o.name,
                        cat: o.cat,
                        args: o.args,
                        key: o.key,
                    });
                }
            }
            self.flush(stack_id);
        }
        for &(cat, id, from, to) in &self.flows {
            if let (Some(&a), Some(&b)) = (self.flow_slices.get(&from), self.flow_slices.get(&to)) {
                self.builder
                    .push_slice_flow(cat, id & ((1 << 48) - 1), a, b);
            }
        }
        let pipe = std::mem::replace(&mut self.args, ArgsPipe::new(false, 0));
        let (text, slots) = pipe.finish();
        self.builder
            .map_args_since(self.first_slice, self.first_instant, |placeholder| {
                args::resolve(placeholder, &slots)
            });
        if !text.is_empty() {
            self.builder
                .set_source_data(self.source, Arc::new(SourceData::Owned(text)));
        }
        let mut warnings = Vec::new();
        let mut warn = |code: WarningCode, offset: Option<u64>, message: String| {
            warnings.push(Warning {
                code,
                offset,
                message,
            });
        };
        let kept = self.events + self.packets;
        // A system trace (ftrace, process stats, Android) has nothing steplens models.
        if self.events == 0 && self.descriptors.is_empty() && self.skipped_packets > 0 {
            return Err(IngestError::Unsupported {
                path: path.to_owned(),
                format: "Perfetto traces without TrackEvent data (only ftrace, system or Android packets)",
            });
        }
        if let Some(d) = &self.damage {
            if self.events == 0 && self.descriptors.is_empty() {
                return Err(IngestError::Damaged {
                    path: path.to_owned(),
                    offset: d.offset,
                    reason: d.reason.clone(),
                });
            }
            warn(
                WarningCode::Damaged,
                Some(d.offset),
                format!(
                    "trace damaged at byte {} ({}): kept the {} packets before it, dropped the rest",
                    d.offset, d.reason, self.packets
                ),
            );
        }
        for d in &self.zlib_damage {
            warn(
                WarningCode::Damaged,
                Some(d.offset),
                format!(
                    "compressed packets at byte {} are damaged ({}): kept what inflated before it",
                    d.offset, d.reason
                ),
            );
        }
        if let Some((offset, reason)) = &self.first_bad_packet {
            warn(
                WarningCode::Damaged,
                Some(*offset),
                format!(
                    "skipped {} packets that do not decode (first at byte {offset}: {reason})",
                    self.bad_packets
                ),
            );
        }
        if self.needs_state_dropped > 0 {
            warn(
                WarningCode::DataLoss,
                None,
                format!(
                    "dropped {} packets that need incremental state their sequence never set up",
                    self.needs_state_dropped
                ),
            );
        }
        if self.packets_lost > 0 {
            warn(
                WarningCode::DataLoss,
                None,
                format!(
                    "the producer dropped packets before {} packets (previous_packet_dropped)",
                    self.packets_lost
                ),
            );
        }
        if self.skipped_packets > 0 {
            warn(
                WarningCode::SkippedPackets,
                None,
                format!(
                    "skipped {} packets that carry no TrackEvent data (ftrace, system and Android data …)",
                    self.skipped_packets
                ),
            );
        }
        if self.unmatched_ends > 0 {
            warn(
                WarningCode::UnmatchedEnd,
                None,
                format!(
                    "ignored {} SLICE_END events with no open slice on their track",
                    self.unmatched_ends
                ),
            );
        }
        if self.unclosed > 0 {
            warn(
                WarningCode::UnclosedBegin,
                None,
                format!(
                    "{} SLICE_BEGIN events had no END; closed at the last time seen on their track",
                    self.unclosed
                ),
            );
        }
        if self.unknown_tracks > 0 {
            warn(
                WarningCode::UnknownTrack,
                None,
                format!(
                    "{} tracks were used before (or without) their descriptor",
                    self.unknown_tracks
                ),
            );
        }
        if self.state_events > 0 {
            warn(
                WarningCode::UnsupportedPhase,
                None,
                format!(
                    "skipped {} track events of a type steplens does not model",
                    self.state_events
                ),
            );
        }
        if self.clocks.len() > 1 {
            warn(
                WarningCode::MixedClocks,
                None,
                format!(
                    "events use {} clocks (ids {:?}); their times are not converted between clocks",
                    self.clocks.len(),
                    self.clocks
                ),
            );
        }
        if kept == 0 {
            warn(WarningCode::Empty, None, "the trace has no packets".into());
        }
        let mut by_phase = Vec::new();
        for (ph, n) in [
            ('B', self.begins),
            ('E', self.ends),
            ('i', self.instants),
            ('C', self.counters),
        ] {
            if n > 0 {
                by_phase.push((ph, n));
            }
        }
        Ok(ReadSummary {
            events: self.events,
            by_phase,
            warnings,
            ..ReadSummary::default()
        })
    }
}
