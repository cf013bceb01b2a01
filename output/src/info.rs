//! `steplens info`: what a trace holds (inputs, events by phase, tracks by kind, steps), as
//! text or JSON.

use std::io::{self, Write};

use serde_json::json;
use steplens_ingest::Timeline;
use steplens_ingest::model::TrackKind;

use crate::escape;
use crate::table::{Style, Table};
use crate::text::thousands;
use steplens_analysis::units::{human_bytes, human_ns};

struct TrackCounts {
    host: usize,
    device: usize,
    counter: usize,
    other: usize,
}

fn track_counts(timeline: &Timeline) -> TrackCounts {
    let mut c = TrackCounts {
        host: 0,
        device: 0,
        counter: 0,
        other: 0,
    };
    for t in &timeline.tracks {
        match t.kind {
            TrackKind::HostThread => c.host += 1,
            TrackKind::DeviceEngine { .. } => c.device += 1,
            TrackKind::Counter => c.counter += 1,
            TrackKind::Async => c.other += 1,
        }
    }
    c
}

/// `steplens info` as text.
pub fn info_text(out: &mut dyn Write, timeline: &Timeline, color: bool) -> io::Result<()> {
    let style = Style { color };
    for source in &timeline.sources {
        writeln!(out, "{}", style.bold(&source.path))?;
        let stored = if source.compressed {
            format!(
                "gzip, {} stored, {} inflated",
                human_bytes(source.stored_bytes),
                human_bytes(source.bytes)
            )
        } else {
            human_bytes(source.bytes)
        };
        writeln!(out, "  format     {} ({stored})", source.format)?;
        let phases: Vec<String> = source
            .events_by_phase
            .iter()
            .map(|(ph, n)| format!("{ph} {}", thousands(*n)))
            .collect();
        if phases.is_empty() {
            writeln!(out, "  events     {}", thousands(source.events))?;
        } else {
            writeln!(
                out,
                "  events     {}  ({})",
                thousands(source.events),
                phases.join(", ")
            )?;
        }
        if let Some(rank) = source.rank {
            let world = source
                .world_size
                .map_or_else(String::new, |w| format!(" of {w}"));
            writeln!(out, "  rank       {rank}{world}")?;
        }
    }
    let d = &timeline.device;
    let device = crate::text::device_text(d.kind.as_str(), d.name.as_deref(), d.count);
    writeln!(out, "  device     {}", escape::terminal(&device))?;
    let (engines, _) = steplens_analysis::engines::engine_utilization(timeline);
    if !engines.is_empty() {
        let list: Vec<String> = engines
            .iter()
            .map(|e| format!("{} {} ({:.1}% busy)", e.class, e.engines, e.busy_pct))
            .collect();
        writeln!(out, "  engines    {}", list.join(", "))?;
    }
    if !timeline.metrics.is_empty() {
        let mut names: Vec<&str> = timeline.metrics.iter().map(|m| m.metric.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        writeln!(
            out,
            "  metrics    {} ({})",
            crate::count::plural(timeline.metrics.len() as u64, "dump"),
            escape::terminal(&names.join(", "))
        )?;
    }
    let c = track_counts(timeline);
    writeln!(
        out,
        "  tracks     {} (host {}, device {}, counter {}, other {})",
        timeline.tracks.len(),
        c.host,
        c.device,
        c.counter,
        c.other
    )?;
    writeln!(
        out,
        "  slices     {}  flows {}  instants {}  counter samples {}",
        thousands(timeline.slices.len() as u64),
        thousands(timeline.flows.len() as u64),
        thousands(timeline.instants.len() as u64),
        thousands(timeline.counters.len() as u64)
    )?;
    let steps = match (timeline.steps.first(), timeline.steps.last()) {
        (Some(first), Some(last)) if timeline.steps.len() > 1 => {
            format!("{} ({} … {})", timeline.steps.len(), first.name, last.name)
        }
        (Some(first), _) => format!("1 ({})", first.name),
        _ => "0 (no ProfilerStep#N annotations)".into(),
    };
    writeln!(out, "  steps      {}", escape::terminal(&steps))?;
    if let Some((a, b)) = timeline.time_range() {
        writeln!(out, "  time span  {}", human_ns(b - a))?;
    }
    for source in &timeline.sources {
        for w in &source.warnings {
            writeln!(
                out,
                "  {} {}",
                style.yellow("warning:"),
                escape::terminal(&w.message)
            )?;
        }
    }
    Ok(())
}

fn track_rows(timeline: &Timeline) -> Vec<[String; 6]> {
    timeline
        .tracks
        .iter()
        .map(|t| {
            let (kind, class) = match &t.kind {
                TrackKind::DeviceEngine { class, device } => (
                    "device".to_owned(),
                    match device {
                        Some(d) => format!("{class} (device {d})"),
                        None => class.to_string(),
                    },
                ),
                other => (other.label().to_owned(), String::new()),
            };
            [
                kind,
                class,
                t.process_name.clone(),
                t.name.clone(),
                thousands(u64::from(t.slices.end - t.slices.start)),
                t.max_depth.to_string(),
            ]
        })
        .collect()
}

/// `steplens info --tracks`: one line per track.
pub fn tracks_text(out: &mut dyn Write, timeline: &Timeline) -> io::Result<()> {
    writeln!(out)?;
    let mut table = Table::new(&[
        ("kind", false),
        ("engine", false),
        ("process", false),
        ("track", false),
        ("slices", true),
        ("depth", true),
    ]);
    for row in track_rows(timeline) {
        table.row(row.to_vec());
    }
    table.text(out, Style { color: false })
}

/// `steplens info --json`.
pub fn info_json(timeline: &Timeline, with_tracks: bool) -> serde_json::Value {
    let c = track_counts(timeline);
    let tracks: Vec<serde_json::Value> = if with_tracks {
        track_rows(timeline)
            .into_iter()
            .zip(&timeline.tracks)
            .map(|(row, t)| {
                json!({ "kind": row[0], "engine": row[1], "process": row[2], "name": row[3],
                        "slices": t.slices.end - t.slices.start, "max_depth": t.max_depth })
            })
            .collect()
    } else {
        Vec::new()
    };
    json!({
        "track_list": tracks,
        "sources": timeline.sources.iter().map(|s| json!({
            "path": s.path,
            "format": s.format,
            "compressed": s.compressed,
            "stored_bytes": s.stored_bytes,
            "bytes": s.bytes,
            "events": s.events,
            "events_by_phase": s.events_by_phase.iter()
                .map(|(ph, n)| (ph.to_string(), json!(n)))
                .collect::<serde_json::Map<_, _>>(),
            "rank": s.rank,
            "world_size": s.world_size,
            "warnings": s.warnings,
        })).collect::<Vec<_>>(),
        "device": timeline.device,
        "tracks": { "total": timeline.tracks.len(), "host": c.host, "device": c.device,
                    "counter": c.counter, "other": c.other },
        "slices": timeline.slices.len(),
        "flows": timeline.flows.len(),
        "instants": timeline.instants.len(),
        "counter_samples": timeline.counters.len(),
        "steps": timeline.steps.iter().map(|s| &s.name).collect::<Vec<_>>(),
        "time_span_ns": timeline.time_range().map(|(a, b)| b - a),
    })
}
