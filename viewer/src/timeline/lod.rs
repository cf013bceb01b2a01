//! Level of detail: turning the slices of the visible rows into a bounded list of rectangles.
//!
//! [`LaneIndex`] keeps, for each track and nesting depth (a *lane*), its slices in start order:
//! ids, and alongside them contiguous copies of their starts and ends (20 bytes a slice), a
//! coarse start every [`COARSE_EVERY`] slices, and merged [`Level`]s (a mipmap). It is built
//! once after loading, on the loading thread, in O(slices). Slices of one lane are siblings,
//! which never overlap (the Timeline's nesting guarantees it; the rare partial overlap it keeps
//! as a sibling only makes a run a little shorter or longer).
//!
//! [`build_frame`] draws each visible lane one of two ways:
//! - **zoomed out** (a pixel spans at least the resolution of one of the lane's levels): it
//!   walks the coarsest such level's entries in view. Each entry is a slice long enough to be
//!   seen or a run of shorter slices with gaps under the resolution, so the picture is the one
//!   the slice walk would draw, and a span holds at most `2 × span / res + 2` entries: at most
//!   `8 × width_px + 2` per lane, read from contiguous memory.
//! - **zoomed in**: it walks the slices **by pixel column, not by slice**: a slice at least
//!   [`MIN_SLICE_PX`] wide becomes its own rectangle; a narrower one starts a *density run* and
//!   the walk jumps (galloping over the coarse starts, then a binary search in one block) to the
//!   first slice starting after the current pixel column; consecutive columns with work merge
//!   into one run. Because siblings do not overlap, only the last slice skipped can reach past
//!   the column, so it is checked and drawn on its own when wide. Each step emits a rectangle
//!   at least one pixel wide or advances one column: at most `2 × width_px + 2` steps of
//!   O(log slices) per lane.
//!
//! **Per-frame bound**: O(visible lanes × width_px × log n) whatever the zoom and the number of
//! slices, and O(visible lanes × width_px) rectangles. Counters cost O(visible counter rows ×
//! width_px × [`MAX_COUNTER_SAMPLES_PER_PX`]); instants at most one per pixel column and track.
//! Labels are drawn only on rectangles wider than [`LABEL_MIN_PX`], so their number is bounded
//! by `width_px / LABEL_MIN_PX` per lane. A folded row
//! ([`RowKind::Folded`](super::layout::RowKind::Folded)) walks each lane folded into it, so it
//! counts as that many lanes (never more than the rows it replaces).
//! `examples/frame_bench.rs` measures it.
//!
//! This module holds the constants both halves share; the index and its layout (blocks, levels,
//! coarse starts) are in `index`, the frame and the walks that read the index in `frame`.

mod frame;
mod index;

pub use frame::{CounterStrip, Frame, FrameRect, RectKind, Viewport, build_frame, hit};
pub use index::{LaneIndex, LaneRef, Level};

/// Slices narrower than this (pixels) merge into density runs.
pub const MIN_SLICE_PX: f32 = 1.0;
/// Runs closer than this (pixels) merge into one.
pub const RUN_MERGE_GAP_PX: f32 = 1.0;
/// Rectangles narrower than this (pixels) get no label.
pub const LABEL_MIN_PX: f32 = 36.0;
/// At most this many counter samples are read per pixel column (evenly strided beyond).
pub const MAX_COUNTER_SAMPLES_PER_PX: usize = 64;
/// One coarse start is kept per this many slices of a lane (8 bytes per 32 slices).
pub const COARSE_EVERY: usize = 32;
/// Resolution of the finest merged level, ns; each next level is [`LEVEL_FACTOR`] × coarser.
pub const LEVEL0_NS: i64 = 256;
/// Resolution ratio between consecutive merged levels.
pub const LEVEL_FACTOR: i64 = 4;

#[cfg(test)]
mod tests;
