//! The application: loading (path field, drag and drop, background thread with progress), and
//! the panels around the timeline — findings, details, range aggregate, tables and search.
//!
//! This module owns the [`Session`] (one loaded run and its view state) and what it does: select
//! findings, slices and matches, search, export the report. Its panels are one method each on
//! the session, in `panels` (the widgets with their own state live in `timeline/` and
//! `tables.rs`, a finding's details in `finding.rs`); the window around it ([`ViewerApp`]: path
//! field, drag and drop, loading, the fonts ([`viewer_fonts`]) and the shortcuts overlay (`?`,
//! listing [`timeline::KEYS`])) is in `window`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use steplens_analysis::FindingKind;
use steplens_analysis::finding::{FindingGroup, group_findings};
use steplens_ingest::model::{SliceId, TrackId};

use crate::finding::{MemoryCurve, finding_memory, memory_tracks};
use crate::load::Loaded;

/// Ops listed in a report exported from the viewer (the CLI's `--top` default).
const REPORT_TOP_OPS: usize = 20;
use crate::query::{self, RangeAggregate, SliceDetails};
use crate::state::{Highlight, TimeRange, ViewState};
use crate::tables::TableState;
use crate::timeline::{self, Mark, TimelineWidget};

mod panels;
mod window;

pub use window::{ViewerApp, viewer_fonts};

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
    /// written next to the first input as `<input>.report.html` (a directory's beside it, not
    /// in it); returns its path.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save_html_report(&self) -> std::io::Result<PathBuf> {
        // Components drop a trailing separator: `runs/` names `runs.report.html`.
        let first: PathBuf = self
            .data
            .paths
            .first()
            .map(|p| p.components().collect())
            .unwrap_or_default();
        let mut name = first.into_os_string();
        name.push(".report.html");
        let path = PathBuf::from(name);
        // Written as it renders, never held whole (issue 45).
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
        steplens_output::html::write_report_page(&mut out, &self.data.report)?;
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
