//! The session's panels: the findings list, the bottom tabs (details, range aggregate, tables,
//! memory), a finding's and a slice's details, search, and the timeline between them.

use std::sync::Arc;

use eframe::egui::{self, Color32, RichText};
use steplens_analysis::units::human_ns;
use steplens_analysis::{FindingKind, Severity};

use super::{Session, Tab, path_of_step};
use crate::state::TimeRange;
use crate::timeline::{self, TimelineInput};
use crate::{finding, query, tables};

/// Smallest height of the bottom panel (tabs and tables), points.
const BOTTOM_MIN_H: f32 = 120.0;

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
