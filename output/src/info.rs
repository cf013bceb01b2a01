//! `steplens info`: what a trace holds (inputs, events by phase, tracks by kind, steps), as
//! text or JSON, rendered from [`TraceInfo`] (computed in analysis).

use std::io::{self, Write};

use steplens_analysis::trace_info::TraceInfo;
use steplens_analysis::units::{human_bytes, human_ns};

use crate::escape;
use crate::table::{Style, Table};
use crate::text::thousands;

/// `steplens info` as text.
pub fn info_text(out: &mut dyn Write, info: &TraceInfo, color: bool) -> io::Result<()> {
    let style = Style { color };
    for source in &info.sources {
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
    let d = &info.device;
    let device = crate::text::device_text(d.kind.as_str(), d.name.as_deref(), d.count);
    writeln!(out, "  device     {}", escape::terminal(&device))?;
    if !info.engines.is_empty() {
        let list: Vec<String> = info
            .engines
            .iter()
            .map(|e| format!("{} {} ({:.1}% busy)", e.class, e.engines, e.busy_pct))
            .collect();
        writeln!(out, "  engines    {}", list.join(", "))?;
    }
    let (dumps, names) = &info.metric_dumps;
    if *dumps > 0 {
        writeln!(
            out,
            "  metrics    {} ({})",
            crate::count::plural(*dumps as u64, "dump"),
            escape::terminal(&names.join(", "))
        )?;
    }
    let c = &info.tracks;
    writeln!(
        out,
        "  tracks     {} (host {}, device {}, counter {}, other {})",
        c.total, c.host, c.device, c.counter, c.other
    )?;
    writeln!(
        out,
        "  slices     {}  flows {}  instants {}  counter samples {}",
        thousands(info.slices as u64),
        thousands(info.flows as u64),
        thousands(info.instants as u64),
        thousands(info.counter_samples as u64)
    )?;
    let steps = match (info.steps.first(), info.steps.last()) {
        (Some(first), Some(last)) if info.steps.len() > 1 => {
            format!("{} ({first} … {last})", info.steps.len())
        }
        (Some(first), _) => format!("1 ({first})"),
        _ => "0 (no ProfilerStep#N annotations)".into(),
    };
    writeln!(out, "  steps      {}", escape::terminal(&steps))?;
    if let Some(span) = info.time_span_ns {
        writeln!(out, "  time span  {}", human_ns(span))?;
    }
    for source in &info.sources {
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

/// `steplens info --tracks`: one line per track (`info` built with its track list).
pub fn tracks_text(out: &mut dyn Write, info: &TraceInfo) -> io::Result<()> {
    writeln!(out)?;
    let mut table = Table::new(&[
        ("kind", false),
        ("engine", false),
        ("process", false),
        ("track", false),
        ("slices", true),
        ("depth", true),
    ]);
    for t in &info.track_list {
        table.row(vec![
            t.kind.clone(),
            t.engine.clone(),
            t.process.clone(),
            t.name.clone(),
            thousands(u64::from(t.slices)),
            t.max_depth.to_string(),
        ]);
    }
    table.text(out, Style { color: false })
}

/// `steplens info --json`.
#[must_use]
pub fn info_json(info: &TraceInfo) -> serde_json::Value {
    serde_json::to_value(info).unwrap_or_default()
}
