//! Exporting a Timeline with its analysis as a Perfetto trace for ui.perfetto.dev: the
//! Timeline's own tracks (written by [`write`], the TrackEvent writer) plus annotation
//! tracks built from the [`Report`]: a `Steps` track with one slice per step, and one
//! `finding: KIND` track per finding kind with one slice per finding (title, lost time,
//! recommendation … as args) and flow arrows from each finding to its evidence slices; the
//! critical path of every step as flow arrows in the `critical_path` category.

use std::io::Write;

use steplens_ingest::model::{SliceId, Timeline};

use self::write::{Annotation, Overlay, OverlaySlice, OverlayTrack};
use crate::finding::{Evidence, FindingKind};
use crate::report::{Finding, Report};

pub mod write;

/// What [`write_perfetto`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Bytes written.
    pub bytes: u64,
    /// Perfetto tracks (groups and overlap layers included).
    pub tracks: u64,
    /// Timeline slices written.
    pub slices: u64,
    /// Step slices on the `Steps` track.
    pub steps: u64,
    /// Finding slices.
    pub findings: u64,
    /// Flow arrows (the Timeline's and those from findings to their evidence).
    pub flows: u64,
    /// Slices written without args that could not be converted.
    pub args_dropped: u64,
}

/// Why the export failed.
#[derive(Debug, thiserror::Error)]
pub enum PerfettoExportError {
    /// Writing the output failed.
    #[error("cannot write the Perfetto trace: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes `timeline` as a Perfetto TrackEvent trace (`.pftrace`) to `out`, with the steps and
/// findings of `report` (built from the same Timeline) as annotation tracks above it.
///
/// The file opens in ui.perfetto.dev; `steplens` reads it back as the same Timeline (the
/// annotation tracks then appear as extra lanes).
///
/// # Errors
/// When writing to `out` fails.
pub fn write_perfetto(
    timeline: &Timeline,
    report: &Report,
    out: &mut dyn Write,
) -> Result<ExportStats, PerfettoExportError> {
    let overlay = overlay(timeline, report);
    let steps = overlay
        .tracks
        .first()
        .filter(|t| t.name == STEPS_TRACK)
        .map_or(0, |t| t.slices.len() as u64);
    let written = write::write_timeline(timeline, Some(&overlay), out)?;
    Ok(ExportStats {
        bytes: written.bytes,
        tracks: written.tracks,
        slices: written.slices,
        steps,
        findings: written.overlay_slices - steps,
        flows: written.flows,
        args_dropped: written.args_dropped,
    })
}

const STEPS_TRACK: &str = "Steps";

/// The annotation tracks for `report`: steps first, then one track per finding kind in the
/// order kinds first appear in the (ranked) findings.
#[must_use]
pub fn overlay(timeline: &Timeline, report: &Report) -> Overlay {
    let mut tracks = Vec::new();
    if !report.steps.is_empty() {
        let slices = report
            .steps
            .iter()
            .map(|s| {
                let mut annotations = vec![
                    ("dur_ns".to_owned(), Annotation::Int(s.dur_ns)),
                    ("host_busy_ns".to_owned(), Annotation::Int(s.host_busy_ns)),
                    ("dataloader_ns".to_owned(), Annotation::Int(s.dataloader_ns)),
                ];
                if let Some(v) = s.host_dur_ns {
                    annotations.push(("host_dur_ns".to_owned(), Annotation::Int(v)));
                }
                if let Some(v) = s.device_busy_ns {
                    annotations.push(("device_busy_ns".to_owned(), Annotation::Int(v)));
                }
                if let Some(v) = s.device_idle_ns {
                    annotations.push(("device_idle_ns".to_owned(), Annotation::Int(v)));
                }
                for (engine, ns) in &s.engines {
                    annotations.push((format!("engine {engine} busy_ns"), Annotation::Int(*ns)));
                }
                OverlaySlice {
                    start: s.start_ns,
                    dur: s.dur_ns.max(0),
                    name: s.name.clone(),
                    annotations,
                    flows_to: Vec::new(),
                }
            })
            .collect();
        tracks.push(OverlayTrack {
            name: STEPS_TRACK.to_owned(),
            slices,
        });
    }
    let mut kinds: Vec<FindingKind> = Vec::new();
    for f in &report.findings {
        if !kinds.contains(&f.kind) {
            kinds.push(f.kind);
        }
    }
    for kind in kinds {
        let slices = report
            .findings
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| finding_slice(timeline, f))
            .collect();
        tracks.push(OverlayTrack {
            name: format!("finding: {kind}"),
            slices,
        });
    }
    Overlay {
        tracks,
        links: critical_path_links(timeline, report),
        links_category: CRITICAL_PATH_CATEGORY.to_owned(),
    }
}

/// Flow category of the critical path's arrows, as in HTA's overlaid trace.
pub use steplens_ingest::perfetto::CRITICAL_PATH_FLOW_CATEGORY as CRITICAL_PATH_CATEGORY;

/// The critical path of every step as arrows between the events on it: from each event to the
/// next one on the path that sits on another track (a launch to its kernel, a kernel to the
/// sync that waited for it, one thread to another).
fn critical_path_links(timeline: &Timeline, report: &Report) -> Vec<(SliceId, SliceId)> {
    let mut links = Vec::new();
    let paths = report
        .steps
        .iter()
        .filter_map(|s| s.critical_path.as_ref())
        .chain(report.critical_path.as_ref());
    let n = timeline.slices.len();
    for path in paths {
        let mut prev: Option<SliceId> = None;
        for s in &path.slices {
            let Some(slice) = s.slice.filter(|&i| (i as usize) < n) else {
                continue;
            };
            if let Some(p) = prev
                && p != slice
                && timeline.slices.track[p as usize] != timeline.slices.track[slice as usize]
            {
                links.push((p, slice));
            }
            prev = Some(slice);
        }
    }
    links.sort_unstable();
    links.dedup();
    links
}

fn finding_slice(timeline: &Timeline, f: &Finding) -> OverlaySlice {
    let text = |s: &str| Annotation::Str(s.to_owned());
    let mut annotations = vec![
        ("kind".to_owned(), text(f.kind.as_str())),
        ("severity".to_owned(), text(f.severity.as_str())),
        ("title".to_owned(), text(&f.title)),
        ("lost_ns".to_owned(), Annotation::Int(f.lost_ns)),
        ("saving_ns".to_owned(), Annotation::Int(f.saving_ns)),
        (
            "count".to_owned(),
            Annotation::Int(i64::try_from(f.count).unwrap_or(i64::MAX)),
        ),
        ("recommendation".to_owned(), text(&f.recommendation)),
    ];
    if let Some(step) = &f.step {
        annotations.push(("step".to_owned(), text(step)));
    }
    if let Some(track) = &f.track {
        annotations.push(("track".to_owned(), text(track)));
    }
    if let Some(site) = &f.call_site {
        annotations.push(("call_site".to_owned(), text(site)));
    }
    if !f.ops.is_empty() {
        annotations.push(("ops".to_owned(), text(&f.ops.join(", "))));
    }
    OverlaySlice {
        start: f.start_ns,
        dur: (f.end_ns - f.start_ns).max(0),
        name: f.title.clone(),
        annotations,
        flows_to: evidence_slices(timeline, f),
    }
}

/// The Timeline slices a finding's evidence names (`{"slice": id, "name": …}`), checked
/// against the Timeline so a stale report cannot point at the wrong slice.
fn evidence_slices(timeline: &Timeline, f: &Finding) -> Vec<SliceId> {
    let mut out: Vec<SliceId> = f
        .evidence
        .iter()
        .filter_map(|e| match e {
            Evidence::Slice { slice, name, .. } => ((*slice as usize) < timeline.slices.len()
                && name == timeline.slice_name(*slice))
            .then_some(*slice),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
