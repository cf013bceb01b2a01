//! Structural invariants every [`Timeline`] must satisfy, whatever the input.
//!
//! Shared by the ingest tests (edge cases, samples) and, through `#[path]`, by the root
//! package's corpus conformance test, so there is exactly one copy of the rules.

use steplens_ingest::Timeline;

/// Checks the Timeline's invariants ([`Timeline::check_invariants`]).
pub(crate) fn check_invariants(t: &Timeline) -> Result<(), String> {
    t.check_invariants()
}
