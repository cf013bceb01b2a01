//! `memory_growth` and `reserved_slack`: the allocator's figures per device over the steps
//! ([`crate::memory`], the report's memory table, reads the same per-device series).

use super::registry::{Detector, Raises, Saves};
use crate::finding::FindingKind;

/// This detector's entry in the registry.
pub(super) const DETECTOR: Detector = Detector {
    name: "memory",
    raises: &[
        Raises::new(FindingKind::MemoryGrowth, Saves::NotStepTime),
        Raises::new(FindingKind::ReservedSlack, Saves::NotStepTime),
    ],
    thresholds: &[
        "memory_growth_min_bytes",
        "reserved_slack_min_bytes",
        "reserved_slack_min_pct",
    ],
    advice: "Free what each step keeps alive (detach logged tensors, clear caches of outputs), and cap the allocator's cache (PYTORCH_CUDA_ALLOC_CONF) where reserved memory sits unused.",
    detect: |ctx| crate::memory::findings(ctx, ctx.memory()),
};
