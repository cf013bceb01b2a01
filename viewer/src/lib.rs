//! steplens viewer: the eframe desktop app — the timeline with the findings on it.
//!
//! This crate owns everything on screen. It loads traces through
//! [`steplens_ingest::load_many`] and analyses them with
//! [`steplens_analysis::report::build_report`] on a background thread ([`load`]); it never
//! parses a format itself.
//!
//! - [`state`]: the view state (visible range, selections, highlight) and navigation maths,
//!   free of painting so tests can drive it;
//! - [`timeline`]: the timeline widget; [`timeline::layout`] places groups, tracks and rows,
//!   [`timeline::lod`] turns the visible lanes into a bounded paint list (the per-frame bound
//!   is documented there);
//! - [`query`]: search, range aggregates and slice details, computed once per change;
//! - [`tables`]: the sortable step, engine, op and aggregate tables;
//! - [`finding`]: a finding in the Details tab (with a memory finding's memory curve);
//! - [`app`]: the window: loading, panels, findings.

pub mod app;
pub mod finding;
pub mod load;
pub mod query;
pub mod state;
pub mod tables;
pub mod timeline;

use std::path::PathBuf;

pub use app::{Session, ViewerApp};
pub use load::{LoadError, Loaded, load_now, load_with};

/// `n` and the noun for it: `1 slice`, `2 slices` (`many` for every count but 1).
#[must_use]
pub fn count<N: std::fmt::Display + PartialEq + From<u8> + Copy>(
    n: N,
    one: &str,
    many: &str,
) -> String {
    let noun = if n == N::from(1) { one } else { many };
    format!("{n} {noun}")
}

/// Opens the viewer window, starts loading `paths` (if any; directories stand for the traces in
/// them) in the background with `load` (the load options of every trace opened in the window),
/// and blocks until the window is closed.
///
/// # Errors
/// When the windowing system or the renderer cannot start.
pub fn run(paths: Vec<PathBuf>, load: steplens_ingest::LoadOptions) -> Result<(), eframe::Error> {
    let options = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_inner_size([1400.0, 850.0])
            .with_title("steplens")
            .with_drag_and_drop(true),
        ..eframe::NativeOptions::default()
    };
    eframe::run_native(
        "steplens",
        options,
        Box::new(move |cc| {
            let mut app = ViewerApp::with_options(load);
            if !paths.is_empty() {
                app.open(paths, &cc.egui_ctx);
            }
            Ok(Box::new(app))
        }),
    )
}
