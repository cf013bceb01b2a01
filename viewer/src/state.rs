//! The view state: which time range is visible, what is selected and highlighted.
//!
//! Nothing here paints or reads input devices; the timeline widget turns input into calls on
//! [`ViewState`], and tests drive the same calls. Times are nanoseconds **relative to the
//! trace's first slice** ([`ViewState::origin`]) in `f64`: absolute Kineto times (~1.7e18 ns)
//! would lose ~256 ns of precision in an `f64`, relative ones keep sub-ns precision over days.

use steplens_ingest::model::{SliceId, StrId};

/// Narrowest visible span, ns: below this, zooming in stops.
pub const MIN_SPAN_NS: f64 = 50.0;
/// Zoom speed of W/S held down: the span shrinks (grows) by this factor per second.
pub const KEY_ZOOM_PER_SECOND: f64 = 8.0;
/// Pan speed of A/D held down: this share of the visible span per second.
pub const KEY_PAN_PER_SECOND: f64 = 1.5;
/// One press of W (S) shrinks (grows) the span by this factor, however short the press
/// (Perfetto's tap); holding the key goes on at [`KEY_ZOOM_PER_SECOND`].
pub const KEY_ZOOM_STEP: f64 = 0.8;
/// One press of A/D pans by this share of the visible span; holding the key goes on at
/// [`KEY_PAN_PER_SECOND`].
pub const KEY_PAN_STEP: f64 = 0.1;

/// A time range, ns relative to [`ViewState::origin`], `start <= end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeRange {
    /// Start, ns.
    pub start: f64,
    /// End, ns.
    pub end: f64,
}

impl TimeRange {
    /// A range from two points in any order.
    #[must_use]
    pub fn new(a: f64, b: f64) -> Self {
        Self {
            start: a.min(b),
            end: a.max(b),
        }
    }

    /// Length, ns.
    #[must_use]
    pub fn span(&self) -> f64 {
        self.end - self.start
    }

    /// Whether `[start, end]` lies inside this range.
    #[must_use]
    pub fn contains_range(&self, start: f64, end: f64) -> bool {
        start >= self.start && end <= self.end
    }
}

/// What a highlight marks on the timeline (outlined slices).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Highlight {
    /// Nothing.
    #[default]
    None,
    /// The evidence slices of a finding, sorted (looked up by binary search per painted slice).
    Slices(Vec<SliceId>),
    /// Every slice with this name (an op clicked in the op table).
    Name(StrId),
}

impl Highlight {
    /// Highlights `ids` (sorted here).
    #[must_use]
    pub fn slices(mut ids: Vec<SliceId>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        Self::Slices(ids)
    }

    /// Whether slice `id` with name `name` is highlighted.
    #[must_use]
    pub fn contains(&self, id: SliceId, name: StrId) -> bool {
        match self {
            Self::None => false,
            Self::Slices(ids) => ids.binary_search(&id).is_ok(),
            Self::Name(n) => *n == name,
        }
    }
}

/// Keys held and pressed this frame, already filtered (no text field has focus).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyInput {
    /// W held: zoom in.
    pub zoom_in: bool,
    /// S held: zoom out.
    pub zoom_out: bool,
    /// A held: pan left (earlier).
    pub pan_left: bool,
    /// D held: pan right (later).
    pub pan_right: bool,
    /// Presses of W this frame (key repeats excluded): one [`KEY_ZOOM_STEP`] each.
    pub zoom_in_presses: u32,
    /// Presses of S this frame.
    pub zoom_out_presses: u32,
    /// Presses of A this frame: one [`KEY_PAN_STEP`] each.
    pub pan_left_presses: u32,
    /// Presses of D this frame.
    pub pan_right_presses: u32,
    /// Seconds since the previous frame.
    pub dt: f64,
    /// Where the zoom centres (pointer time over the timeline), relative ns; `None` = middle.
    pub anchor: Option<f64>,
}

/// Everything about the view that is not the data: visible range, selections, highlight.
#[derive(Debug, Clone)]
pub struct ViewState {
    /// Absolute ns of relative time 0 (the trace's first slice start).
    pub origin: i64,
    /// The whole trace, relative ns.
    pub bounds: TimeRange,
    /// The visible range.
    pub visible: TimeRange,
    /// The selected slice.
    pub selected: Option<SliceId>,
    /// The selected time range (drag on the ruler or shift-drag).
    pub range: Option<TimeRange>,
    /// Outlined slices.
    pub highlight: Highlight,
    /// The search's matches, sorted by id (outlined on the timeline).
    pub matches: Vec<SliceId>,
    /// Vertical scroll of the track area, points from the top.
    pub scroll_y: f32,
}

impl ViewState {
    /// A view of the trace spanning `[first, last]` absolute ns, fully zoomed out.
    #[must_use]
    pub fn new(first: i64, last: i64) -> Self {
        let span = ((last - first) as f64).max(MIN_SPAN_NS);
        let bounds = TimeRange::new(0.0, span);
        Self {
            origin: first,
            bounds,
            visible: bounds,
            selected: None,
            range: None,
            highlight: Highlight::None,
            matches: Vec::new(),
            scroll_y: 0.0,
        }
    }

    /// Relative ns of an absolute time.
    #[must_use]
    pub fn rel(&self, abs_ns: i64) -> f64 {
        (abs_ns - self.origin) as f64
    }

    /// Absolute ns of a relative time (rounded down).
    #[must_use]
    pub fn abs(&self, rel_ns: f64) -> i64 {
        self.origin.saturating_add(rel_ns.floor() as i64)
    }

    /// Shows `range`, clamped to sensible limits (at least [`MIN_SPAN_NS`], at most a little
    /// beyond the trace on each side).
    pub fn set_visible(&mut self, range: TimeRange) {
        let slack = self.bounds.span() * 0.1;
        let max_span = self.bounds.span() + 2.0 * slack;
        let mut span = range.span().clamp(MIN_SPAN_NS, max_span);
        if !span.is_finite() {
            span = max_span;
        }
        let mid = (range.start + range.end) / 2.0;
        let mut start = mid - span / 2.0;
        start = start.clamp(self.bounds.start - slack, self.bounds.end + slack - span);
        self.visible = TimeRange {
            start,
            end: start + span,
        };
    }

    /// Zooms by `factor` (< 1 zooms in) keeping `anchor` (relative ns) at the same place on
    /// screen; `None` zooms around the middle.
    pub fn zoom(&mut self, factor: f64, anchor: Option<f64>) {
        let v = self.visible;
        let anchor = anchor.unwrap_or((v.start + v.end) / 2.0);
        let new_span = (v.span() * factor).max(MIN_SPAN_NS);
        let share = if v.span() > 0.0 {
            (anchor - v.start) / v.span()
        } else {
            0.5
        };
        let start = anchor - share * new_span;
        // Clamping at the trace's edges may move the anchor a little; nothing to undo there.
        self.set_visible(TimeRange::new(start, start + new_span));
    }

    /// Pans by `share` of the visible span (positive = later).
    pub fn pan(&mut self, share: f64) {
        let d = self.visible.span() * share;
        self.set_visible(TimeRange::new(self.visible.start + d, self.visible.end + d));
    }

    /// Pans by `ns` relative nanoseconds.
    pub fn pan_ns(&mut self, ns: f64) {
        self.set_visible(TimeRange::new(
            self.visible.start + ns,
            self.visible.end + ns,
        ));
    }

    /// Whether slice `id` is a search match.
    #[must_use]
    pub fn is_match(&self, id: SliceId) -> bool {
        self.matches.binary_search(&id).is_ok()
    }

    /// Applies the presses of W/S/A/D (one step each) and the keys held down for `keys.dt`
    /// seconds; in the frame of a press only its step, so a tap moves by exactly one step
    /// whatever the frame rate. Returns whether the view changed.
    pub fn apply_keys(&mut self, keys: &KeyInput) -> bool {
        let dt = keys.dt.clamp(0.0, 0.25);
        let mut changed = false;
        let zoom_pressed = keys.zoom_in_presses + keys.zoom_out_presses > 0;
        let pan_pressed = keys.pan_left_presses + keys.pan_right_presses > 0;
        if zoom_pressed {
            let steps = i32::try_from(keys.zoom_in_presses).unwrap_or(i32::MAX)
                - i32::try_from(keys.zoom_out_presses).unwrap_or(i32::MAX);
            self.zoom(KEY_ZOOM_STEP.powi(steps), keys.anchor);
            changed = true;
        }
        if pan_pressed {
            let steps = f64::from(keys.pan_right_presses) - f64::from(keys.pan_left_presses);
            self.pan(KEY_PAN_STEP * steps);
            changed = true;
        }
        if !zoom_pressed && keys.zoom_in != keys.zoom_out {
            let factor = KEY_ZOOM_PER_SECOND.powf(dt);
            let factor = if keys.zoom_in { 1.0 / factor } else { factor };
            self.zoom(factor, keys.anchor);
            changed = true;
        }
        if !pan_pressed && keys.pan_left != keys.pan_right {
            let share = KEY_PAN_PER_SECOND * dt;
            self.pan(if keys.pan_right { share } else { -share });
            changed = true;
        }
        changed
    }

    /// Shows `[start, end]` (relative ns) with a margin of 10 % on each side.
    pub fn fit(&mut self, start: f64, end: f64) {
        let span = (end - start).max(MIN_SPAN_NS);
        let margin = span * 0.1;
        self.set_visible(TimeRange::new(start - margin, end + margin));
    }

    /// Shows the whole trace.
    pub fn fit_all(&mut self) {
        self.set_visible(self.bounds);
    }

    /// Escape: clears the range selection first, then the slice selection and highlight.
    pub fn clear(&mut self) {
        if self.range.is_some() {
            self.range = None;
        } else {
            self.selected = None;
            self.highlight = Highlight::None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> ViewState {
        ViewState::new(1_000_000, 1_000_000 + 10_000_000)
    }

    #[test]
    fn starts_fully_zoomed_out() {
        let v = view();
        assert_eq!(v.visible, TimeRange::new(0.0, 10_000_000.0));
        assert_eq!(v.rel(1_000_500), 500.0);
        assert_eq!(v.abs(500.0), 1_000_500);
    }

    #[test]
    fn zoom_keeps_the_anchor_in_place() {
        let mut v = view();
        v.zoom(0.5, Some(2_000_000.0));
        let share = (2_000_000.0 - v.visible.start) / v.visible.span();
        assert!((v.visible.span() - 5_000_000.0).abs() < 1e-6);
        assert!((share - 0.2).abs() < 1e-9);
    }

    #[test]
    fn zoom_stops_at_the_minimum_span() {
        let mut v = view();
        for _ in 0..100 {
            v.zoom(0.1, None);
        }
        assert!((v.visible.span() - MIN_SPAN_NS).abs() < 1e-6);
    }

    #[test]
    fn zoom_out_is_limited_to_the_trace_and_margin() {
        let mut v = view();
        v.zoom(100.0, None);
        assert!(v.visible.span() <= 12_000_000.0 + 1e-6);
        assert!(v.visible.start >= -1_000_000.0 - 1e-6);
    }

    #[test]
    fn keys_zoom_and_pan() {
        let mut v = view();
        v.zoom(0.1, None);
        let before = v.visible;
        let held = |f: fn(&mut KeyInput)| {
            let mut k = KeyInput {
                dt: 0.1,
                ..KeyInput::default()
            };
            f(&mut k);
            k
        };
        assert!(v.apply_keys(&held(|k| k.zoom_in = true)));
        assert!(v.visible.span() < before.span());
        let zoomed = v.visible;
        assert!(v.apply_keys(&held(|k| k.zoom_out = true)));
        assert!(v.visible.span() > zoomed.span());
        let mid = v.visible.start;
        assert!(v.apply_keys(&held(|k| k.pan_right = true)));
        assert!(v.visible.start > mid);
        let right = v.visible.start;
        assert!(v.apply_keys(&held(|k| k.pan_left = true)));
        assert!(v.visible.start < right);
        assert!(!v.apply_keys(&KeyInput::default()));
    }

    #[test]
    fn a_press_steps_even_when_released_in_the_same_frame() {
        let mut v = view();
        let span = v.visible.span();
        // Down in the frame of its press too: the press's step only.
        let press = KeyInput {
            zoom_in: true,
            zoom_in_presses: 1,
            dt: 0.25,
            ..KeyInput::default()
        };
        assert!(v.apply_keys(&press));
        assert!((v.visible.span() - span * KEY_ZOOM_STEP).abs() < 1e-6);
        let out = KeyInput {
            zoom_out_presses: 1,
            ..KeyInput::default()
        };
        assert!(v.apply_keys(&out));
        assert!((v.visible.span() - span).abs() < 1e-3);
        v.zoom(0.1, None);
        let start = v.visible.start;
        let right = KeyInput {
            pan_right_presses: 1,
            ..KeyInput::default()
        };
        assert!(v.apply_keys(&right));
        assert!((v.visible.start - start - v.visible.span() * KEY_PAN_STEP).abs() < 1e-3);
    }

    #[test]
    fn fit_adds_a_margin_and_escape_clears_in_order() {
        let mut v = view();
        v.fit(1_000_000.0, 2_000_000.0);
        assert!(v.visible.contains_range(1_000_000.0, 2_000_000.0));
        assert!(v.visible.span() < 1_300_000.0);
        v.selected = Some(3);
        v.range = Some(TimeRange::new(0.0, 1.0));
        v.clear();
        assert_eq!(v.range, None);
        assert_eq!(v.selected, Some(3));
        v.clear();
        assert_eq!(v.selected, None);
    }
}
