//! The application: loading (path field, drag and drop, background thread with progress), and
//! the panels around the timeline — findings, details, range aggregate, tables and search.
//!
//! About 1250 lines: each panel is one method on the [`Session`] it reads; they share its view
//! state, so they stay together (the widgets with their own state live in `timeline/` and
//! `tables.rs`, a finding's details in `finding.rs`). The window also owns the fonts
//! ([`viewer_fonts`]) and the shortcuts overlay (`?`, listing [`KEYS`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use eframe::egui::{self, Color32, RichText};
use steplens_analysis::finding::{FindingGroup, group_findings};
use steplens_analysis::units::human_ns;
use steplens_analysis::{FindingKind, Severity};
use steplens_ingest::model::{SliceId, TrackId};

use crate::finding::{self, MemoryCurve, finding_memory, memory_tracks};
use crate::load::{LoadError, Loaded, Loader, Phase};

/// Ops listed in a report exported from the viewer (the CLI's `--top` default).
const REPORT_TOP_OPS: usize = 20;
/// Smallest height of the bottom panel (tabs and tables), points.
const BOTTOM_MIN_H: f32 = 120.0;
use crate::query::{self, RangeAggregate, SliceDetails};
use crate::state::{Highlight, TimeRange, ViewState};
use crate::tables::{self, TableState};
use crate::timeline::{self, KEYS, Mark, TimelineInput, TimelineWidget};

/// Tabs of the bottom panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// The selected slice.
    Details,
    /// The selected time range's aggregate.
    Range,
    /// The step table.
    Steps,
    /// Per-engine utilization.
    Engines,
    /// The op summary.
    Ops,
}

/// Search box state.
#[derive(Debug, Clone, Default)]
pub struct SearchState {
    /// Text typed.
    pub query: String,
    /// Whether the query is a regular expression.
    pub regex: bool,
    /// Matching slices in time order.
    pub matches: Vec<SliceId>,
    /// Index of the current match.
    pub current: Option<usize>,
    /// Why the query is invalid.
    pub error: Option<String>,
}

/// A loaded trace on screen: the data and everything about how it is shown.
pub struct Session {
    /// The data.
    pub data: Arc<Loaded>,
    /// Visible range, selection, highlight.
    pub view: ViewState,
    /// The timeline widget (layout and paint list).
    pub timeline: TimelineWidget,
    /// Findings drawn on tracks.
    pub marks: Vec<Mark>,
    /// Shown finding kinds (`None` = all).
    pub finding_filter: Option<FindingKind>,
    /// The finding last clicked (an index into the report's `findings`).
    pub active_finding: Option<usize>,
    /// Groups of the findings panel (indices into [`Self::groups`]) whose members are listed.
    pub expanded_groups: HashSet<usize>,
    /// Bottom panel tab.
    pub tab: Tab,
    /// Search.
    pub search: SearchState,
    /// Table sorting.
    pub tables: TableState,
    details: Option<SliceDetails>,
    /// The performance model's row of the selected op (or of the op that launched the
    /// selected kernel).
    perf: Option<steplens_analysis::op_perf::OpPerf>,
    aggregate: Option<RangeAggregate>,
    flows: Vec<(SliceId, bool)>,
    /// Whether the critical path of the step in view is drawn.
    pub show_critical_path: bool,
    /// Height of the track area in the last frame (to scroll rows into view).
    track_height: f32,
    /// The memory curve of the active memory finding (built when it is selected).
    memory_curve: Option<MemoryCurve>,
    /// The report's finding groups, as the findings panel lists them.
    groups: Vec<FindingGroup>,
}

/// One line of the findings panel (a title wraps; the other lines are one row high).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FindingLine {
    /// A group's title (the whole entry for a group of one finding).
    Title(usize),
    /// A group of several findings: its figures and the toggle that lists its members.
    Lead(usize),
    /// A member of an expanded group (an index into the report's `findings`).
    Member(usize),
}

impl Session {
    /// A session showing `data` fully zoomed out.
    #[must_use]
    pub fn new(data: Arc<Loaded>) -> Self {
        let (first, last) = data.timeline.time_range().unwrap_or((0, 1));
        let view = ViewState::new(first, last);
        let mut marks = timeline::finding_marks(&data.timeline, &data.report.findings);
        // Memory findings name no track: they are marked on their device's memory counters.
        for (i, f) in data.report.findings.iter().enumerate() {
            if let Some(m) = finding_memory(&data.report.memory, f) {
                for track in memory_tracks(&data.timeline, &m.device, f.source.or(f.cost.source)) {
                    marks.push(Mark {
                        track,
                        start: f.start_ns,
                        end: f.end_ns.max(f.start_ns),
                        finding: i,
                    });
                }
            }
        }
        let widget = TimelineWidget::new(&data.timeline);
        // A report changed after it was built (or saved before groups existed) gets its groups
        // again, so every finding is in exactly one.
        let mut groups = data.report.groups().into_owned();
        let members: usize = groups.iter().map(|g| g.findings.len()).sum();
        if members != data.report.findings.len() {
            groups = group_findings(&data.report.findings);
        }
        Self {
            data,
            view,
            timeline: widget,
            marks,
            finding_filter: None,
            active_finding: None,
            expanded_groups: HashSet::new(),
            tab: Tab::Details,
            search: SearchState::default(),
            tables: TableState::default(),
            details: None,
            perf: None,
            aggregate: None,
            flows: Vec::new(),
            show_critical_path: false,
            track_height: 400.0,
            memory_curve: None,
            groups,
        }
    }

    /// The finding groups the findings panel lists, ranked as the report ranks them (by total
    /// saving); each holds indices into the report's `findings`, its largest saving first.
    #[must_use]
    pub fn groups(&self) -> &[FindingGroup] {
        &self.groups
    }

    /// Selects group `g`'s largest member (its first) as [`Self::select_finding`] does.
    pub fn select_group(&mut self, g: usize) {
        if let Some(&i) = self.groups.get(g).and_then(|g| g.findings.first()) {
            self.select_finding(i);
        }
    }

    /// The group holding finding `i`.
    #[must_use]
    pub fn group_of(&self, i: usize) -> Option<usize> {
        self.groups.iter().position(|g| g.findings.contains(&i))
    }

    /// The report as the CLI writes it with `--format md`.
    #[must_use]
    pub fn report_markdown(&self) -> String {
        let mut out = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = steplens_output::text::markdown(&mut out, &self.data.report, REPORT_TOP_OPS);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The report as the CLI's self-contained HTML page (`steplens report --format html`),
    /// written next to the first input as `<input>.report.html`; returns its path.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save_html_report(&self) -> std::io::Result<PathBuf> {
        let first = self.data.paths.first().cloned().unwrap_or_default();
        let mut name = first.into_os_string();
        name.push(".report.html");
        let path = PathBuf::from(name);
        // Written as it renders, never held whole (issue 45).
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        steplens_output::html::write_report_page(&mut out, &self.data.report, &self.data.timeline)?;
        std::io::Write::flush(&mut out)?;
        Ok(path)
    }

    /// The details of the selected slice (decoded when it was selected).
    #[must_use]
    pub fn details(&self) -> Option<&SliceDetails> {
        self.details.as_ref()
    }

    /// The performance model's row of the selected op, or of the op that launched the selected
    /// kernel (`op_perf[]`).
    #[must_use]
    pub fn perf(&self) -> Option<&steplens_analysis::op_perf::OpPerf> {
        self.perf.as_ref()
    }

    /// The memory curve of the selected memory finding, when the trace has its counters.
    #[must_use]
    pub fn memory_curve(&self) -> Option<&MemoryCurve> {
        self.memory_curve.as_ref()
    }

    /// The aggregate of the selected time range.
    #[must_use]
    pub fn aggregate(&self) -> Option<&RangeAggregate> {
        self.aggregate.as_ref()
    }

    /// Selects finding `i` of the report: zooms to it and its evidence, highlights the evidence,
    /// selects the first evidence slice and scrolls its track into view.
    ///
    /// A finding without a time range (a memory finding: `start_ns == end_ns`, 0 when it has
    /// no time at all) keeps the zoom: the view pans to its instant (a memory peak) when it has
    /// one inside the trace and stays put otherwise; the slice selection is cleared so the
    /// Details tab shows the finding itself, and its memory counter track is scrolled into
    /// view when the trace has one.
    pub fn select_finding(&mut self, i: usize) {
        let data = Arc::clone(&self.data);
        let Some(f) = data.report.findings.get(i) else {
            return;
        };
        let t = &data.timeline;
        let evidence = timeline::evidence_slices(f);
        let mut start = f.start_ns;
        let mut end = f.end_ns.max(f.start_ns);
        for &id in &evidence {
            if let Some(&s) = t.slices.start.get(id as usize) {
                start = start.min(s);
                end = end.max(t.slices.end(id));
            }
        }
        if end > start {
            self.view.fit(self.view.rel(start), self.view.rel(end));
        } else if start != 0 {
            // An instant: centred at the current zoom, if it lies in the trace.
            let at = self.view.rel(start);
            let b = self.view.bounds;
            if at >= b.start && at <= b.end {
                let half = self.view.visible.span() / 2.0;
                self.view.set_visible(TimeRange::new(at - half, at + half));
            }
        }
        self.active_finding = Some(i);
        self.memory_curve = finding_memory(&data.report.memory, f).and_then(|m| {
            let track = |what: &str| {
                let name = format!("memory {what} {}", m.device);
                memory_tracks(t, &m.device, f.source.or(f.cost.source))
                    .into_iter()
                    .find(|&k| t.tracks.get(k as usize).is_some_and(|tr| tr.name == name))
            };
            MemoryCurve::new(t, track("allocated"), track("reserved"))
        });
        self.view.highlight = Highlight::slices(evidence.clone());
        self.view.range = None;
        if let Some(&first) = evidence.first() {
            self.select_slice(Some(first));
            // Every evidence row gets its own row (unfolded) and, when they fit, the screen.
            let lanes: Vec<(TrackId, u16)> = evidence
                .iter()
                .filter_map(|&id| {
                    Some((
                        *t.slices.track.get(id as usize)?,
                        *t.slices.depth.get(id as usize)?,
                    ))
                })
                .collect();
            self.timeline
                .reveal_rows(t, &mut self.view, &lanes, self.track_height);
        } else {
            self.select_slice(None);
            let track = f
                .track
                .as_ref()
                .and_then(|name| t.tracks.iter().position(|tr| &tr.name == name))
                .map(|p| p as TrackId)
                .or_else(|| {
                    finding_memory(&data.report.memory, f).and_then(|m| {
                        memory_tracks(t, &m.device, f.source.or(f.cost.source))
                            .into_iter()
                            .next()
                    })
                });
            if let Some(track) = track {
                self.timeline
                    .reveal_row(t, &mut self.view, track, 0, self.track_height);
            }
        }
        self.tab = Tab::Details;
    }

    /// What the selected slice links to: the other ends of its flows, and the same collective
    /// on the other ranks.
    #[must_use]
    pub fn linked(&self) -> &[(SliceId, bool)] {
        &self.flows
    }

    /// Selects a slice (or clears the selection) and decodes its details.
    pub fn select_slice(&mut self, id: Option<SliceId>) {
        self.view.selected = id;
        self.refresh_selection();
    }

    /// Scrolls the slice's track into view and zooms to it unless it is already visible and at
    /// least a few pixels wide.
    pub fn go_to(&mut self, id: SliceId) {
        let t = &self.data.timeline;
        let Some(&s) = t.slices.start.get(id as usize) else {
            return;
        };
        let (a, b) = (self.view.rel(s), self.view.rel(t.slices.end(id)));
        let v = self.view.visible;
        if !v.contains_range(a, b) || (b - a) < v.span() / 2000.0 {
            if (b - a) < v.span() / 2000.0 || (b - a) > v.span() {
                self.view.fit(a, b);
            } else {
                self.view.set_visible(TimeRange::new(
                    (a + b) / 2.0 - v.span() / 2.0,
                    (a + b) / 2.0 + v.span() / 2.0,
                ));
            }
        }
        self.select_slice(Some(id));
        self.reveal(id);
        self.tab = Tab::Details;
    }

    fn reveal(&mut self, id: SliceId) {
        let data = Arc::clone(&self.data);
        let t = &data.timeline;
        if let (Some(&track), Some(&depth)) = (
            t.slices.track.get(id as usize),
            t.slices.depth.get(id as usize),
        ) {
            self.timeline
                .reveal_row(t, &mut self.view, track, depth, self.track_height);
        }
    }

    fn refresh_selection(&mut self) {
        let t = &self.data.timeline;
        self.details = self.view.selected.and_then(|id| query::details(t, id));
        self.perf = self.view.selected.and_then(|id| {
            steplens_analysis::op_perf::row_of(&self.data.report.op_perf, t, id).cloned()
        });
        self.flows = self
            .details
            .as_ref()
            .map(|d| d.flows.iter().map(|f| (f.other, f.outgoing)).collect())
            .unwrap_or_default();
        // A collective links to the same collective on the other ranks.
        if let Some(id) = self.view.selected {
            self.flows.extend(
                self.data
                    .collectives
                    .of(id)
                    .iter()
                    .filter(|&&(_, other)| other != id)
                    .map(|&(_, other)| (other, true)),
            );
        }
    }

    /// Runs the search box's query.
    pub fn run_search(&mut self) {
        let t = &self.data.timeline;
        match query::search(t, &self.search.query, self.search.regex) {
            Ok(m) => {
                self.search.matches = m;
                self.search.error = None;
            }
            Err(e) => {
                self.search.matches.clear();
                self.search.error = Some(e.to_string());
            }
        }
        self.search.current = None;
        self.outline_matches();
    }

    /// Outlines the search matches on the timeline.
    fn outline_matches(&mut self) {
        let mut ids = self.search.matches.clone();
        ids.sort_unstable();
        self.view.matches = ids;
    }

    /// Goes to the next (or previous) search match.
    pub fn next_match(&mut self, forward: bool) {
        let n = self.search.matches.len();
        if n == 0 {
            return;
        }
        let i = match (self.search.current, forward) {
            (None, true) => 0,
            (None, false) => n - 1,
            (Some(c), true) => (c + 1) % n,
            (Some(c), false) => (c + n - 1) % n,
        };
        self.search.current = Some(i);
        if let Some(&id) = self.search.matches.get(i) {
            self.go_to(id);
        }
    }

    /// Highlights every slice of op `name` and makes them the search matches.
    pub fn highlight_op(&mut self, name: &str) {
        let t = &self.data.timeline;
        let Some(id) = t.strings.lookup(name) else {
            return;
        };
        self.view.highlight = Highlight::Name(id);
        self.search.query = regex::escape(name);
        self.search.regex = true;
        self.search.matches = query::slices_named(t, |n| n == id);
        self.search.current = None;
        self.search.error = None;
        self.outline_matches();
        self.next_match(true);
    }

    /// The step whose critical path the toggle draws: the one holding the selected slice, else
    /// the one under the middle of the view (the whole trace's path without steps).
    #[must_use]
    pub fn critical_path_step(&self) -> Option<usize> {
        let t = &self.data.timeline;
        let at = match self.view.selected {
            Some(id) if (id as usize) < t.slices.len() => {
                let source = t.slice_track(id).map_or(0, |tr| tr.source);
                (source, t.slices.start[id as usize])
            }
            _ => {
                let mid = self
                    .view
                    .abs((self.view.visible.start + self.view.visible.end) / 2.0);
                (t.steps.first().map_or(0, |s| s.source), mid)
            }
        };
        t.step_at(at.0, at.1).or_else(|| {
            // Between steps: the nearest one.
            t.steps
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| (s.start - at.1).abs().min((s.end() - at.1).abs()))
                .map(|(i, _)| i)
        })
    }

    /// The critical path the toggle draws (see [`Self::critical_path_step`]).
    #[must_use]
    pub fn critical_path_in_view(&self) -> Option<&steplens_analysis::critical_path::CriticalPath> {
        path_of_step(&self.data.report, self.critical_path_step())
    }

    /// Draws the whole session (panels and timeline).
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        egui::Panel::right("findings")
            .default_size(340.0)
            .show(ui, |ui| self.findings_ui(ui));
        // A third of the window to start with; resizable; its size is kept across tabs because
        // every tab fills it (a panel shrinks to what its contents use).
        let height = ui.available_height();
        egui::Panel::bottom("tables")
            .resizable(true)
            .default_size((height / 3.0).max(BOTTOM_MIN_H))
            .size_range(BOTTOM_MIN_H..=(height * 0.8).max(BOTTOM_MIN_H))
            .show(ui, |ui| {
                ui.set_min_height(ui.available_height());
                self.bottom_ui(ui);
            });
        egui::CentralPanel::default().show(ui, |ui| {
            let before = self.view.selected;
            self.track_height = (ui.available_height() - timeline::RULER_H).max(60.0);
            let data = Arc::clone(&self.data);
            let path_step = self.show_critical_path.then(|| self.critical_path_step());
            let input = TimelineInput {
                timeline: &data.timeline,
                index: &data.index,
                marks: &self.marks,
                flows: &self.flows,
                active_finding: self.active_finding,
                critical_path: path_step.and_then(|step| path_of_step(&data.report, step)),
            };
            self.timeline.ui(ui, &input, &mut self.view);
            if self.view.selected != before {
                self.refresh_selection();
                if self.view.selected.is_some() {
                    self.tab = Tab::Details;
                }
            }
            // The aggregate costs O(slices in the range): computed once the drag that draws
            // the range ends, not on every frame of it.
            let current = self.aggregate.as_ref().map(|a| (a.start, a.end));
            let wanted = self
                .view
                .range
                .map(|r| (self.view.abs(r.start), self.view.abs(r.end)));
            if !self.timeline.is_dragging() && current != wanted {
                self.aggregate = wanted.map(|(a, b)| query::aggregate(&data.timeline, a, b));
                if wanted.is_some() {
                    self.tab = Tab::Range;
                }
            }
        });
    }

    /// The search box, in the top bar.
    pub fn search_ui(&mut self, ui: &mut egui::Ui) {
        // Enter keeps the focus (no `return_key`), so each Enter steps to the next match and
        // Shift+Enter to the previous one.
        let edit = ui.add(
            egui::TextEdit::singleline(&mut self.search.query)
                .hint_text("search names (Enter: next)")
                .desired_width(180.0)
                .return_key(None),
        );
        let enter = edit.has_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let backwards = enter && ui.input(|i| i.modifiers.shift);
        let mut rerun = edit.changed();
        if ui.checkbox(&mut self.search.regex, "regex").changed() {
            rerun = true;
        }
        if rerun {
            self.run_search();
        }
        if ui
            .button("Prev")
            .on_hover_text("previous match (Shift+Enter)")
            .clicked()
            || backwards
        {
            self.next_match(false);
        }
        if ui
            .button("Next")
            .on_hover_text("next match (Enter)")
            .clicked()
            || (enter && !backwards)
        {
            self.next_match(true);
        }
        if let Some(e) = &self.search.error {
            ui.colored_label(Color32::LIGHT_RED, first_line(e));
        } else if !self.search.query.is_empty() {
            let n = self.search.matches.len();
            match self.search.current {
                Some(c) => ui.label(format!("{}/{n}", c + 1)),
                None => ui.label(crate::count(n, "match", "matches")),
            };
        }
    }

    fn findings_ui(&mut self, ui: &mut egui::Ui) {
        let data = Arc::clone(&self.data);
        let findings = &data.report.findings;
        let groups = std::mem::take(&mut self.groups);
        ui.heading(format!(
            "Findings ({})",
            steplens_output::text::finding_count(&data.report)
        ));
        let mut kinds: Vec<FindingKind> = groups.iter().map(|g| g.kind).collect();
        kinds.sort_unstable();
        kinds.dedup();
        egui::ComboBox::from_label("kind")
            .selected_text(self.finding_filter.map_or("all", FindingKind::title))
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut self.finding_filter, None, "all");
                for k in kinds {
                    ui.selectable_value(&mut self.finding_filter, Some(k), k.title());
                }
            });
        ui.separator();
        if findings.is_empty() {
            ui.label("No findings: nothing in this trace crossed a detector threshold.");
        }
        // One entry per group, ranked as the report ranks groups (by total saving): its title,
        // and for a group of several findings its figures line and, expanded, its members.
        let mut lines = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            if self.finding_filter.is_some_and(|k| k != g.kind) {
                continue;
            }
            lines.push(FindingLine::Title(gi));
            if g.findings.len() > 1 {
                lines.push(FindingLine::Lead(gi));
                if self.expanded_groups.contains(&gi) {
                    lines.extend(g.findings.iter().map(|&i| FindingLine::Member(i)));
                }
            }
        }
        let mut clicked = None;
        let mut clicked_group = None;
        let mut toggled = None;
        // Titles wrap, so rows differ in height: every line is laid out (groups are few; an
        // expanded group's members are one row each). With a finding selected the list keeps
        // the top half and the finding's card follows it: above the list, the card's height
        // (which changes with the finding) would move the entries under the pointer, and a
        // second click on the selected one would land on another.
        let active = self.active_finding.and_then(|i| findings.get(i));
        let list_h = if active.is_some() {
            ui.available_height() * 0.5
        } else {
            ui.available_height()
        };
        egui::ScrollArea::vertical()
            .id_salt("findings-list")
            .max_height(list_h)
            .auto_shrink([false, true])
            .show(ui, |ui| {
                for &line in &lines {
                    match line {
                        FindingLine::Title(gi) => {
                            let g = &groups[gi];
                            let Some(f) = g.findings.first().and_then(|&i| findings.get(i)) else {
                                continue;
                            };
                            let color = severity_color(ui, g.severity);
                            // A group of one reads as the finding itself did.
                            let text = if g.findings.len() > 1 {
                                format!("{}. {}", gi + 1, f.title)
                            } else {
                                format!("{}. {} - {}", gi + 1, f.title, f.figures())
                            };
                            let selected =
                                self.active_finding.is_some_and(|a| g.findings.contains(&a));
                            let button = egui::Button::selectable(
                                selected,
                                RichText::new(text).color(color),
                            )
                            .wrap();
                            let r = ui.add(button).on_hover_text(format!(
                                "{}\n{} ({}){}\n{}",
                                f.title,
                                g.kind.title(),
                                g.severity,
                                f.step
                                    .as_ref()
                                    .filter(|_| g.findings.len() == 1)
                                    .map(|s| format!(", {s}"))
                                    .unwrap_or_default(),
                                f.recommendation
                            ));
                            if r.clicked() {
                                clicked_group = Some(gi);
                            }
                        }
                        FindingLine::Lead(gi) => {
                            let g = &groups[gi];
                            let open = self.expanded_groups.contains(&gi);
                            ui.horizontal(|ui| {
                                ui.add_space(ui.spacing().indent);
                                let arrow = if open { "▾" } else { "▸" };
                                let hover = if open {
                                    "hide its findings"
                                } else {
                                    "list its findings"
                                };
                                let text = format!("{arrow} {}", g.figures());
                                let toggle = egui::Button::new(RichText::new(text).weak())
                                    .frame(false)
                                    .truncate();
                                if ui.add(toggle).on_hover_text(hover).clicked() {
                                    toggled = Some(gi);
                                }
                            });
                        }
                        FindingLine::Member(i) => {
                            let Some(f) = findings.get(i) else {
                                continue;
                            };
                            ui.horizontal(|ui| {
                                ui.add_space(ui.spacing().indent * 2.0);
                                let selected = self.active_finding == Some(i);
                                let button =
                                    egui::Button::selectable(selected, finding::member_label(f))
                                        .truncate();
                                if ui.add(button).on_hover_text(&f.title).clicked() {
                                    clicked = Some(i);
                                }
                            });
                        }
                    }
                }
            });
        if let Some(f) = active {
            // The clicked finding in full; the list above stays one entry per group.
            ui.separator();
            egui::ScrollArea::vertical()
                .id_salt("finding-card")
                .auto_shrink([false, false])
                .show(ui, |ui| {
                    ui.label(RichText::new(&f.title).strong());
                    ui.label(format!(
                        "{} · {} · {}{}",
                        f.kind.title(),
                        f.severity,
                        f.figures(),
                        f.step
                            .as_ref()
                            .map(|s| format!(" · {s}"))
                            .unwrap_or_default()
                    ));
                    ui.label(&f.recommendation);
                    if let Some(site) = &f.call_site {
                        ui.label(RichText::new(format!("at {site}")).monospace());
                    }
                });
        }
        self.groups = groups;
        if let Some(gi) = toggled
            && !self.expanded_groups.remove(&gi)
        {
            self.expanded_groups.insert(gi);
        }
        if let Some(gi) = clicked_group {
            self.select_group(gi);
        }
        if let Some(i) = clicked {
            self.select_finding(i);
        }
    }

    fn bottom_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            for (tab, name) in [
                (Tab::Details, "Details"),
                (Tab::Range, "Range"),
                (Tab::Steps, "Steps"),
                (Tab::Engines, "Engines"),
                (Tab::Ops, "Ops"),
            ] {
                ui.selectable_value(&mut self.tab, tab, name);
            }
        });
        ui.separator();
        let data = Arc::clone(&self.data);
        match self.tab {
            Tab::Details => self.details_ui(ui),
            Tab::Range => match &self.aggregate {
                Some(agg) => tables::aggregate_ui(ui, agg),
                None => {
                    ui.label("Drag on the ruler (or shift-drag on the tracks) to select a range.");
                }
            },
            Tab::Steps => tables::steps_ui(ui, &data.report.steps, &mut self.tables),
            Tab::Engines => tables::engines_ui(ui, &data.report.engines, &mut self.tables),
            Tab::Ops => {
                if let Some(name) = tables::ops_ui(ui, &data.report.ops, &mut self.tables) {
                    self.highlight_op(&name);
                }
            }
        }
    }

    /// The Details tab for a finding with no slice selected ([`finding::details_ui`]); its
    /// links go to a slice or show a time.
    fn finding_details_ui(&mut self, ui: &mut egui::Ui, i: usize) {
        let data = Arc::clone(&self.data);
        let Some(f) = data.report.findings.get(i) else {
            return;
        };
        let link = finding::details_ui(
            ui,
            f,
            &data.report.memory,
            self.memory_curve.as_ref(),
            &self.view,
        );
        match link {
            Some(finding::Link::Slice(id)) => self.go_to(id),
            Some(finding::Link::Time(a, b)) if b > a => {
                self.view.fit(self.view.rel(a), self.view.rel(b));
            }
            Some(finding::Link::Time(a, _)) => {
                let mid = self.view.rel(a);
                let half = self.view.visible.span() / 2.0;
                self.view
                    .set_visible(TimeRange::new(mid - half, mid + half));
            }
            None => {}
        }
    }

    fn details_ui(&mut self, ui: &mut egui::Ui) {
        let Some(d) = self.details.clone() else {
            if let Some(i) = self.active_finding {
                self.finding_details_ui(ui, i);
            } else {
                ui.label("Click a slice or a finding to see its details.");
            }
            return;
        };
        let t = &self.data.timeline;
        let mut go = None;
        egui::ScrollArea::vertical()
            .id_salt("details")
            .auto_shrink([false, false])
            .show(ui, |ui| {
                ui.label(RichText::new(&d.name).strong());
                egui::Grid::new("details-grid")
                    .num_columns(2)
                    .show(ui, |ui| {
                        let rows = [
                            ("category", d.category.clone()),
                            ("track", d.track.clone()),
                            ("start", human_ns(d.start - self.view.origin)),
                            ("duration", human_ns(d.dur)),
                            ("self time", human_ns(d.self_ns)),
                        ];
                        for (k, v) in rows {
                            ui.label(k);
                            ui.label(v);
                            ui.end_row();
                        }
                    });
                if let Some(p) = &self.perf {
                    perf_ui(ui, p);
                }
                if !d.parents.is_empty() {
                    ui.label(RichText::new("parents").strong());
                    for &p in &d.parents {
                        if ui.link(t.slice_name(p)).clicked() {
                            go = Some(p);
                        }
                    }
                }
                if !d.flows.is_empty() {
                    ui.label(RichText::new("flows").strong());
                    for f in &d.flows {
                        let arrow = if f.outgoing { "to" } else { "from" };
                        let other = t.slice_name(f.other);
                        let track = t.slice_track(f.other).map_or("", |tr| tr.name.as_str());
                        if ui
                            .link(format!("{arrow} {other} ({track}, {})", f.cat))
                            .clicked()
                        {
                            go = Some(f.other);
                        }
                    }
                }
                let peers = self.data.collectives.of(d.id);
                if !peers.is_empty() {
                    // Start of each rank's copy against the latest: the others wait for it.
                    let latest = peers
                        .iter()
                        .map(|&(_, s)| t.slices.start[s as usize])
                        .max()
                        .unwrap_or(0);
                    ui.label(RichText::new("same collective on each rank").strong());
                    for &(rank, other) in peers {
                        let start = t.slices.start[other as usize];
                        let label = if start == latest {
                            format!(
                                "rank {rank}: arrives last, {}",
                                human_ns(t.slices.dur[other as usize])
                            )
                        } else {
                            format!("rank {rank}: waits {}", human_ns(latest - start))
                        };
                        if other == d.id {
                            ui.label(format!("{label} (this one)"));
                        } else if ui.link(label).clicked() {
                            go = Some(other);
                        }
                    }
                }
                if !d.args.is_empty() {
                    ui.label(RichText::new("args").strong());
                    egui::Grid::new("args-grid").num_columns(2).show(ui, |ui| {
                        for (k, v) in &d.args {
                            ui.label(k);
                            ui.label(truncate(v, 300));
                            ui.end_row();
                        }
                    });
                }
            });
        if let Some(id) = go {
            self.go_to(id);
        }
    }
}

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
    /// The outcome of the last report export, shown in the top bar.
    notice: Option<String>,
    path: String,
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
        match Loader::start(paths, move || ctx.request_repaint()) {
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
                    .hint_text("trace path(s), space separated")
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

fn first_line(s: &str) -> &str {
    s.lines().last().unwrap_or(s)
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// The colour of a finding of `severity` in the findings list.
fn severity_color(ui: &egui::Ui, severity: Severity) -> Color32 {
    match severity {
        Severity::Critical => Color32::from_rgb(240, 90, 90),
        Severity::Warning => Color32::from_rgb(240, 180, 80),
        Severity::Info => ui.visuals().text_color(),
    }
}

/// The critical path of step `step` of `report`, or the whole trace's without a step.
fn path_of_step(
    report: &steplens_analysis::Report,
    step: Option<usize>,
) -> Option<&steplens_analysis::critical_path::CriticalPath> {
    match step {
        Some(i) => report.steps.get(i).and_then(|s| s.critical_path.as_ref()),
        None => report.critical_path.as_ref(),
    }
}

/// The performance model's figures for the selected op's signature (`op_perf[]`).
fn perf_ui(ui: &mut egui::Ui, p: &steplens_analysis::op_perf::OpPerf) {
    let opt = |v: Option<f64>, unit: &str, digits: usize| {
        v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$} {unit}"))
    };
    ui.label(
        RichText::new(format!(
            "performance ({}, {} of this signature)",
            p.family.as_str(),
            crate::count(p.calls, "call", "calls")
        ))
        .strong(),
    );
    egui::Grid::new("perf-grid").num_columns(2).show(ui, |ui| {
        let rows = [
            (
                "FLOPs per call",
                opt(p.flops_per_call.map(|f| f / 1e9), "GFLOP", 3),
            ),
            (
                "bytes per call",
                opt(p.bytes_per_call.map(|b| b / 1e6), "MB", 2),
            ),
            ("intensity", opt(p.flops_per_byte, "FLOP/B", 1)),
            ("achieved", opt(p.tflops_per_s, "TFLOP/s", 2)),
            ("bandwidth", opt(p.tbytes_per_s(), "TB/s", 3)),
            ("of peak compute", opt(p.pct_of_peak_compute, "%", 1)),
            ("of peak bandwidth", opt(p.pct_of_peak_bandwidth, "%", 1)),
            ("bound", p.bound.clone().unwrap_or_else(|| "-".to_owned())),
            ("kernel time", human_ns(p.kernel_ns)),
        ];
        for (k, v) in rows {
            ui.label(k);
            ui.label(v);
            ui.end_row();
        }
    });
}
