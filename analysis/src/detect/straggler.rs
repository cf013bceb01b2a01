//! `straggler`: the rank whose compute the others wait for at their collectives, from the rank
//! matching of a multi-rank run ([`crate::ranks`], which the rank table reads too).

use super::registry::{Detector, Raises, Saves};
use crate::finding::FindingKind;

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "straggler",
    raises: &[Raises::new(FindingKind::Straggler, Saves::NotStepTime)],
    thresholds: &["straggler_min_pct", "straggler_min_collectives"],
    advice: "Even out the slow rank's work: its data shard, its input pipeline, or the other jobs on its host and device.",
    detect: |ctx, _| ctx.ranks().map(|a| a.straggler.clone()).unwrap_or_default(),
};
