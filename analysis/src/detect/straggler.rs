//! `straggler`: the rank whose compute the others wait for at their collectives, from the rank
//! matching of a multi-rank run ([`crate::ranks`], which the rank table reads too).

use super::registry::{Detector, Raises, Saves, Threshold};
use crate::finding::FindingKind;

const STRAGGLER_MIN_PCT: Threshold = Threshold::float(
    "straggler_min_pct",
    5.0,
    "the slowest rank's extra compute per step must reach this share of its step, percent.",
);

const STRAGGLER_MIN_COLLECTIVES: Threshold = Threshold::int(
    "straggler_min_collectives",
    3,
    "collectives matched across the ranks needed to name one, count.",
);

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "straggler",
    raises: &[Raises::new(FindingKind::Straggler, Saves::NotStepTime)],
    thresholds: &[STRAGGLER_MIN_PCT, STRAGGLER_MIN_COLLECTIVES],
    advice: "Even out the slow rank's work: its data shard, its input pipeline, or the other jobs on its host and device.",
    detect: |ctx, _| ctx.ranks().map(|a| a.straggler.clone()).unwrap_or_default(),
};
