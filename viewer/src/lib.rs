//! steplens viewer: the eframe desktop app.
//!
//! This crate owns everything on screen. It receives a loaded
//! [`steplens_ingest::model::Timeline`] (and later the analysis report) and never parses
//! formats itself. The timeline, findings panel and tables land with the viewer issue; for now
//! the app shows the loaded trace's summary so the crate, its dependencies and the layering are
//! exercised by the build.

use std::sync::Arc;

use eframe::egui;
use steplens_ingest::model::Timeline;

/// The desktop application state.
pub struct ViewerApp {
    timelines: Vec<Arc<Timeline>>,
}

impl ViewerApp {
    /// An app showing the given, already loaded, timelines.
    #[must_use]
    pub fn new(timelines: Vec<Arc<Timeline>>) -> Self {
        Self { timelines }
    }
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        egui::CentralPanel::default().show(ui, |ui| {
            ui.heading("steplens");
            for timeline in &self.timelines {
                for source in &timeline.sources {
                    ui.label(format!(
                        "{} ({}): {} events, {} slices, {} tracks",
                        source.path,
                        source.format,
                        source.events,
                        timeline.slices.len(),
                        timeline.tracks.len()
                    ));
                }
            }
        });
    }
}

/// Opens the viewer window and blocks until it is closed.
///
/// # Errors
/// When the windowing system or the renderer cannot start.
pub fn run(timelines: Vec<Arc<Timeline>>) -> Result<(), eframe::Error> {
    let options = eframe::NativeOptions::default();
    eframe::run_native(
        "steplens",
        options,
        Box::new(move |_cc| Ok(Box::new(ViewerApp::new(timelines)))),
    )
}
