//! `steplens-bench scale`: how the full report grows with the number of events, on traces of
//! many small slices (the shape where a per-event constant shows most): 1 M, 3 M and 10 M
//! events by default. Each trace is written once to `bench-data/scale-<N>m.json` and kept.
//!
//! The events are what a CPU training loop's profile is mostly made of: `cpu_op` slices without
//! args, nested three deep on four threads, one `ProfilerStep#N` per 10,000 events, about 90
//! bytes each. Per size the bench prints the full report's wall and CPU time (load, analysis
//! and the JSON render), nanoseconds and bytes of private memory per event, so a constant
//! that grows shows as a line whose per-event figures rise.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use steplens_ingest::LoadOptions;
use steplens_output::text::human_bytes;

use crate::process::{PrivatePeak, cpu_seconds, status_field};

/// Events per `ProfilerStep#N`.
const EVENTS_PER_STEP: u64 = 10_000;
/// Host threads the ops are spread over.
const THREADS: u64 = 4;
const OPS: [&str; 8] = [
    "aten::add",
    "aten::mul",
    "aten::linear",
    "aten::addmm",
    "aten::relu",
    "aten::copy_",
    "aten::empty",
    "aten::view",
];

/// One size's figures.
#[derive(Debug, Serialize)]
struct ScaleLine {
    events: u64,
    file_bytes: u64,
    /// Best of the runs: load, analysis and the JSON render, s.
    report_s: f64,
    /// Of which the load, s (in the same run).
    ingest_s: f64,
    /// CPU time of that run, all threads, s.
    cpu_s: Option<f64>,
    ns_per_event: f64,
    /// Private memory at peak over the runs, bytes.
    peak_private_bytes: u64,
    private_bytes_per_event: f64,
}

/// Writes (once) and measures a trace of each size, millions of events.
///
/// # Errors
/// When a trace cannot be written or read.
pub fn run(sizes_m: &[u64], runs: usize, json: bool) -> Result<()> {
    let mut lines = Vec::new();
    for &m in sizes_m {
        let path = PathBuf::from(format!("bench-data/scale-{m}m.json"));
        let events = m * 1_000_000;
        if !path.exists() {
            std::fs::create_dir_all("bench-data")?;
            let started = Instant::now();
            write_trace(&path, events)
                .with_context(|| format!("cannot write {}", path.display()))?;
            writeln!(
                io::stderr().lock(),
                "generated {} ({} events) in {:.1} s",
                path.display(),
                events,
                started.elapsed().as_secs_f64()
            )?;
        }
        lines.push(measure(&path, runs.max(1))?);
    }
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &lines)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "scale            events      file   report  (ingest)   CPU s   ns/event   private peak  bytes/event"
    )?;
    for l in &lines {
        writeln!(
            out,
            "scale  {:>12} {:>9} {:>7.2} s {:>7.2} s {:>7} {:>8.0} {:>14} {:>12.0}",
            steplens_output::text::thousands(l.events),
            human_bytes(l.file_bytes),
            l.report_s,
            l.ingest_s,
            l.cpu_s
                .map_or_else(|| "-".to_owned(), |c| format!("{c:.2}")),
            l.ns_per_event,
            human_bytes(l.peak_private_bytes),
            l.private_bytes_per_event
        )?;
    }
    Ok(())
}

fn measure(path: &Path, runs: usize) -> Result<ScaleLine> {
    let file_bytes = std::fs::metadata(path)?.len();
    // Warm the page cache: every run reads from memory.
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let sampler = PrivatePeak::start();
    let mut best: Option<(f64, f64, Option<f64>)> = None;
    let mut events = 0;
    for _ in 0..runs {
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        let timeline = steplens_ingest::load(path, &LoadOptions::default(), None)?;
        let t1 = Instant::now();
        let report = steplens_analysis::report::build_report(&timeline);
        serde_json::to_writer(io::sink(), &report)?;
        let wall = t0.elapsed().as_secs_f64();
        let cpu = cpu0.zip(cpu_seconds()).map(|(a, b)| b - a);
        events = timeline.event_count();
        if best.is_none_or(|(w, _, _)| wall < w) {
            best = Some((wall, (t1 - t0).as_secs_f64(), cpu));
        }
        drop(report);
        drop(timeline);
    }
    let peak = sampler.finish().max(status_field("RssAnon:").unwrap_or(0));
    let (report_s, ingest_s, cpu_s) = best.unwrap_or((0.0, 0.0, None));
    Ok(ScaleLine {
        events,
        file_bytes,
        report_s,
        ingest_s,
        cpu_s,
        ns_per_event: report_s * 1e9 / events.max(1) as f64,
        peak_private_bytes: peak,
        private_bytes_per_event: peak as f64 / events.max(1) as f64,
    })
}

/// Writes `events` events: per thread, an outer op holding an op with a leaf inside and a
/// second op (4 events per group), back to back, and the steps on thread 0.
fn write_trace(path: &Path, events: u64) -> io::Result<()> {
    let mut w = Events {
        out: BufWriter::with_capacity(1 << 20, File::create(path)?),
        first: true,
    };
    w.out
        .write_all(b"{\"schemaVersion\": 1, \"traceEvents\": [\n")?;
    let steps = events.div_ceil(EVENTS_PER_STEP);
    let groups_per_step = ((events - steps) / 4).div_ceil(steps).max(1);
    // Each group lasts 10 µs on its thread; a step covers its groups on every thread.
    let group_us = 10;
    let step_us = groups_per_step.div_ceil(THREADS) * group_us;
    let mut written = 0u64;
    for s in 0..steps {
        let base = s * step_us;
        w.slice(
            "user_annotation",
            &format!("ProfilerStep#{s}"),
            1,
            base as f64,
            step_us as f64,
        )?;
        written += 1;
        for g in 0..groups_per_step {
            if written + 4 > events {
                break;
            }
            let tid = 1 + g % THREADS;
            let t = (base + (g / THREADS) * group_us) as f64;
            let op = |k: u64| OPS[((g * 3 + k) % OPS.len() as u64) as usize];
            w.slice("cpu_op", op(0), tid, t + 0.1, 9.8)?;
            w.slice("cpu_op", op(1), tid, t + 0.2, 4.5)?;
            w.slice("cpu_op", op(2), tid, t + 0.3, 4.0)?;
            w.slice("cpu_op", op(3), tid, t + 5.0, 4.7)?;
            written += 4;
        }
    }
    w.out.write_all(b"\n]}\n")?;
    w.out.flush()
}

/// The trace's event list being written.
struct Events {
    out: BufWriter<File>,
    first: bool,
}

impl Events {
    fn slice(&mut self, cat: &str, name: &str, tid: u64, ts: f64, dur: f64) -> io::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.out.write_all(b",\n")?;
        }
        write!(
            self.out,
            "{{\"ph\":\"X\",\"cat\":\"{cat}\",\"name\":\"{name}\",\"pid\":1,\"tid\":{tid},\"ts\":{ts:.3},\"dur\":{dur:.3}}}"
        )
    }
}
