//! The window: the path field, drag and drop, the background load with its progress, the error
//! line, the fonts and the shortcuts overlay, around one [`Session`] at a time.

use std::path::PathBuf;
use std::sync::Arc;

use eframe::egui::{self, Color32, RichText};
use steplens_analysis::units::human_ns;

use super::Session;
use crate::load::{LoadError, Loaded, Loader, Phase};
use crate::timeline::KEYS;

/// The viewer's fonts: egui's defaults with its bundled monospace font (Hack) as a fallback of
/// the proportional one, whose Ubuntu-Light lacks the arrows (`→`, `↔`), triangles (`▸`, `▾`)
/// and other symbols that finding titles and the viewer use. Nothing new is bundled.
#[must_use]
pub fn viewer_fonts() -> egui::FontDefinitions {
    let mut fonts = egui::FontDefinitions::default();
    if let Some(list) = fonts.families.get_mut(&egui::FontFamily::Proportional)
        && !list.iter().any(|f| f == "Hack")
    {
        let at = list
            .iter()
            .position(|f| f == "Ubuntu-Light")
            .map_or(list.len(), |p| p + 1);
        list.insert(at, "Hack".to_owned());
    }
    fonts
}

/// What the app shows.
enum Screen {
    /// Nothing loaded yet.
    Empty,
    /// A load in progress (the previous session stays until it finishes).
    Loading(Loader),
}

/// The desktop application state.
pub struct ViewerApp {
    session: Option<Session>,
    screen: Screen,
    error: Option<String>,
    /// A line in the top bar: the last report export's outcome, or the files a directory held
    /// that were not loaded.
    notice: Option<String>,
    path: String,
    /// How traces are loaded (the command line's load options).
    options: steplens_ingest::LoadOptions,
    fonts_installed: bool,
    /// Whether the shortcuts overlay (`?`) is open.
    pub show_keys: bool,
}

impl Default for ViewerApp {
    fn default() -> Self {
        Self {
            session: None,
            screen: Screen::Empty,
            error: None,
            notice: None,
            path: String::new(),
            options: steplens_ingest::LoadOptions::default(),
            fonts_installed: false,
            show_keys: false,
        }
    }
}

impl ViewerApp {
    /// An app with nothing loaded.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An app that loads traces with `options` (the command line's `--rank-regex`, limits, …).
    #[must_use]
    pub fn with_options(options: steplens_ingest::LoadOptions) -> Self {
        Self {
            options,
            ..Self::default()
        }
    }

    /// An app showing an already loaded trace.
    #[must_use]
    pub fn with_loaded(data: Loaded) -> Self {
        let path = paths_text(&data.paths);
        Self {
            session: Some(Session::new(Arc::new(data))),
            path,
            ..Self::default()
        }
    }

    /// Starts loading `paths` in the background; `ctx` is woken on progress.
    pub fn open(&mut self, paths: Vec<PathBuf>, ctx: &egui::Context) {
        if paths.is_empty() {
            self.error = Some(LoadError::NoInput.to_string());
            return;
        }
        self.path = paths_text(&paths);
        let ctx = ctx.clone();
        match Loader::start(paths, self.options.clone(), move || ctx.request_repaint()) {
            Ok(loader) => {
                self.error = None;
                self.screen = Screen::Loading(loader);
            }
            Err(e) => self.error = Some(e.to_string()),
        }
    }

    /// The session on screen.
    #[must_use]
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// The session on screen, mutable (for tests and embedding).
    pub fn session_mut(&mut self) -> Option<&mut Session> {
        self.session.as_mut()
    }

    /// The error shown in the window, if any.
    #[must_use]
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Whether a load is running.
    #[must_use]
    pub fn is_loading(&self) -> bool {
        matches!(self.screen, Screen::Loading(_))
    }

    /// Draws the app into `ui` (the eframe entry point and kittest tests both call this).
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        if !self.fonts_installed {
            // Takes effect from the next frame.
            ui.ctx().set_fonts(viewer_fonts());
            ui.ctx().request_repaint();
            self.fonts_installed = true;
        }
        self.keys_overlay(ui);
        self.poll_loader();
        let dropped: Vec<PathBuf> = ui.input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        });
        if !dropped.is_empty() {
            self.open(dropped, ui.ctx());
        }
        egui::Panel::top("top").show(ui, |ui| self.top_ui(ui));
        let loading = self.is_loading();
        match &mut self.session {
            Some(session) => session.ui(ui),
            // While a trace loads, the top bar's progress is all the window shows.
            None if loading => {
                egui::CentralPanel::default().show(ui, |_| {});
            }
            None => {
                egui::CentralPanel::default().show(ui, |ui| {
                    ui.vertical_centered(|ui| {
                        ui.add_space(60.0);
                        ui.heading("steplens");
                        ui.label(
                            "Open a trace: type its path above and press Open, drop files on \
                             this window, or run `steplens view TRACE…`.",
                        );
                        ui.label(
                            "PyTorch profiler (Kineto) JSON, .json.gz, Gaudi bridge / TEF \
                             traces, HW-trace CSV, .hltv archives.",
                        );
                    });
                });
            }
        }
    }

    /// `?` (outside a text field) shows or hides the list of keys; Escape hides it.
    fn keys_overlay(&mut self, ui: &mut egui::Ui) {
        if !ui.ctx().text_edit_focused() {
            let question = ui.input(|i| {
                i.events.iter().any(|e| match e {
                    egui::Event::Key {
                        key: egui::Key::Questionmark,
                        pressed: true,
                        repeat: false,
                        ..
                    } => true,
                    egui::Event::Text(t) => t == "?",
                    _ => false,
                })
            });
            if question {
                self.show_keys = !self.show_keys;
            }
        }
        if self.show_keys
            && ui.input_mut(|i| i.consume_key(egui::Modifiers::NONE, egui::Key::Escape))
        {
            self.show_keys = false;
        }
        let mut open = self.show_keys;
        egui::Window::new("Keys and mouse")
            .open(&mut open)
            .collapsible(false)
            .resizable(false)
            .anchor(egui::Align2::CENTER_CENTER, egui::Vec2::ZERO)
            .show(ui.ctx(), |ui| {
                egui::Grid::new("keys-grid")
                    .num_columns(2)
                    .striped(true)
                    .show(ui, |ui| {
                        for (keys, what) in KEYS {
                            ui.label(RichText::new(*keys).strong());
                            ui.label(*what);
                            ui.end_row();
                        }
                    });
                ui.label(RichText::new("? or Escape closes this list.").weak());
            });
        self.show_keys = open;
    }

    fn poll_loader(&mut self) {
        let Screen::Loading(loader) = &self.screen else {
            return;
        };
        let Some(result) = loader.poll() else {
            return;
        };
        let paths = loader.paths.clone();
        self.screen = Screen::Empty;
        match result {
            Ok(data) => {
                self.notice.clone_from(&data.skipped);
                self.session = Some(Session::new(Arc::new(data)));
                self.error = None;
            }
            Err(e) => self.error = Some(format!("{}: {e}", paths_text(&paths))),
        }
    }

    fn top_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.strong("steplens");
            if ui
                .small_button("?")
                .on_hover_text("keys and mouse (?)")
                .clicked()
            {
                self.show_keys = !self.show_keys;
            }
            ui.separator();
            let edit = ui.add(
                egui::TextEdit::singleline(&mut self.path)
                    .hint_text("traces or directories, space separated")
                    .desired_width(260.0),
            );
            let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            if (ui.button("Open").clicked() || enter) && !self.is_loading() {
                let paths = self
                    .path
                    .split_whitespace()
                    .map(PathBuf::from)
                    .collect::<Vec<_>>();
                self.open(paths, ui.ctx());
            }
            if let Screen::Loading(loader) = &self.screen {
                let (share, phase) = loader.progress();
                let text = match phase {
                    Phase::Reading => format!("reading {:.0} %", share * 100.0),
                    Phase::Analysing => "analysing…".to_owned(),
                };
                ui.add(
                    egui::ProgressBar::new(share)
                        .desired_width(160.0)
                        .text(text),
                );
                ui.ctx()
                    .request_repaint_after(std::time::Duration::from_millis(100));
            }
            if let Some(session) = &mut self.session {
                ui.separator();
                session.search_ui(ui);
                ui.separator();
                if ui.button("Fit all").clicked() {
                    session.view.fit_all();
                }
                ui.checkbox(&mut session.show_critical_path, "Critical path")
                    .on_hover_text(
                        "Draw the critical path of the step in view (or of the selected slice's \
                         step): what bounds it, coloured by host, launch, device, gap and wait",
                    );
                if session.show_critical_path
                    && let Some(path) = session.critical_path_in_view()
                {
                    let total = path.total_ns.max(1) as f64;
                    let parts: Vec<String> = path
                        .by_bound
                        .iter()
                        .filter(|(_, v)| **v * 100 >= path.total_ns)
                        .map(|(b, v)| format!("{} {:.0}%", b.as_str(), *v as f64 * 100.0 / total))
                        .collect();
                    ui.label(parts.join(" · ")).on_hover_text(
                        path.by_bound
                            .iter()
                            // What the path never was is no entry of its legend.
                            .filter(|(_, v)| **v > 0)
                            .map(|(b, v)| format!("{}: {}", b.as_str(), human_ns(*v)))
                            .collect::<Vec<_>>()
                            .join("\n"),
                    );
                }
                let mut note = None;
                ui.menu_button("Report", |ui| {
                    if ui.button("Copy as Markdown").clicked() {
                        ui.ctx().copy_text(session.report_markdown());
                        note = Some("report copied as Markdown".to_owned());
                        ui.close();
                    }
                    if ui.button("Save HTML report").clicked() {
                        note = Some(match session.save_html_report() {
                            Ok(path) => format!("saved {}", path.display()),
                            Err(e) => format!("error: cannot save the HTML report: {e}"),
                        });
                        ui.close();
                    }
                });
                if let Some(note) = note {
                    self.notice = Some(note);
                }
                let t = &session.data.timeline;
                ui.label(format!(
                    "{} · {} · {}",
                    crate::count(t.slices.len(), "slice", "slices"),
                    crate::count(t.tracks.len(), "track", "tracks"),
                    steplens_output::step_count(&session.data.report)
                ));
            }
        });
        if let Some(note) = self.notice.clone() {
            ui.horizontal(|ui| {
                ui.label(note);
                if ui.small_button("ok").clicked() {
                    self.notice = None;
                }
            });
        }
        if let Some(e) = self.error.clone() {
            ui.horizontal(|ui| {
                ui.colored_label(Color32::LIGHT_RED, format!("error: {e}"));
                if ui.small_button("dismiss").clicked() {
                    self.error = None;
                }
            });
        }
    }
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        ViewerApp::ui(self, ui);
    }
}

fn paths_text(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}
