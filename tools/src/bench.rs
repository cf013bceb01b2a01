//! `steplens-bench`: generate a large realistic Kineto trace ([`crate::workload`]) and measure ingest
//! speed, the full report's time and memory. Figures come from this command, never from timed
//! tests.
//!
//! Memory is read from `/proc/self/status`: `VmHWM` (peak resident set, which counts the
//! mapped trace's page-cache pages) and `RssAnon` (private memory: the model and the heap),
//! sampled every few milliseconds for its peak.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use steplens_ingest::LoadOptions;
use steplens_ingest::model::Slices;

use steplens_output::text::{human_bytes, thousands};

use crate::process::{PrivatePeak, cpu_seconds, median, status_field};

/// What to measure, and how.
#[derive(Debug, clap::Parser)]
#[command(
    name = "steplens-bench",
    version,
    about = "Measure steplens ingest and report speed and memory on a (generated) large trace"
)]
pub struct BenchArgs {
    /// Trace to measure (generated first with --generate); `whatif` compares the estimated
    /// savings with the realized ones on the fix pairs of `--pairs`; `ranks` times the reduce of
    /// `--ranks` rank summaries (`steplens.reduce`, `report --summaries`); `scale` times the full
    /// report on traces of `--scale-sizes` million small events (written once to
    /// `bench-data/scale-<N>m.json`).
    trace: Option<PathBuf>,
    /// `whatif`: the folder of fix pairs (`<pair>.problem.json.gz`, `<pair>.fixed.json.gz`,
    /// `<pair>.truth.json`).
    #[arg(long, default_value = "samples/whatif")]
    pairs: PathBuf,
    /// `ranks`: how many simulated ranks.
    #[arg(long, default_value_t = 1024)]
    ranks: usize,
    /// `ranks`: the folder of rank traces from `bench/make_rank_traces.py` (made there when it
    /// holds none for `--ranks`; default: a folder in the temporary directory).
    #[arg(long, value_name = "DIR")]
    rank_traces: Option<PathBuf>,
    /// `scale`: the sizes, millions of events.
    #[arg(long, value_delimiter = ',', default_value = "1,3,10")]
    scale_sizes: Vec<u64>,
    /// Write a generated Kineto trace to this path, then measure it.
    #[arg(long, value_name = "OUT")]
    generate: Option<PathBuf>,
    /// Size of the generated trace, MB (10^6 bytes).
    #[arg(long, default_value_t = 520)]
    size_mb: u64,
    /// Timed runs; the best and the median are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// `text` or `json`.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
    /// Also export the loaded trace as a Perfetto `.pftrace` next to it (`TRACE.pftrace`) and
    /// measure the export and the decode of that file.
    #[arg(long)]
    perfetto: bool,
}

/// Figures of `--perfetto`: writing the Timeline as `.pftrace` and reading that file back.
#[derive(Debug, Serialize)]
struct PerfettoFigures {
    file: String,
    pftrace_bytes: u64,
    slices: usize,
    export_s: f64,
    export_mb_s: f64,
    decode_s: f64,
    decode_median_s: f64,
    decode_mb_s: f64,
    decode_private_bytes: u64,
    decode_peak_private_bytes: u64,
    round_trip_slices_equal: bool,
}

#[derive(Debug, Serialize)]
struct Figures {
    trace: String,
    file_bytes: u64,
    json_bytes: u64,
    events: u64,
    slices: usize,
    runs: usize,
    ingest_s: f64,
    ingest_median_s: f64,
    ingest_mb_s: f64,
    events_per_s: f64,
    analysis_s: f64,
    detectors_s: f64,
    /// The critical paths of every step alone (they also ran inside the report), s.
    critical_path_s: f64,
    /// … as a share of the full report's time (load + analysis), percent.
    critical_path_pct_of_report: f64,
    /// The per-op performance model (`op_perf[]`) alone, best of the runs.
    op_perf_s: f64,
    /// … as a share of the full report.
    op_perf_pct_of_report: f64,
    /// The model's own passes inside the fastest full report (its signatures, rows and the
    /// `slow_gemm` detector past them; the op args it reads are found once for the operators
    /// view too, under `op args`), CPU s, from the phase ledger.
    op_perf_in_report_cpu_s: f64,
    /// … as a share of that report's CPU time, percent.
    op_perf_in_report_pct_of_cpu: f64,
    /// Their wall time, on the detectors' thread beside the other passes, s.
    op_perf_in_report_wall_s: f64,
    detectors_pct_of_ingest: f64,
    report_s: f64,
    report_median_s: f64,
    /// CPU time (user + system, all threads) of one full report, the median over the runs;
    /// absent where `/proc/self/stat` is not there to read.
    report_cpu_median_s: Option<f64>,
    peak_rss_bytes: u64,
    private_bytes: u64,
    peak_private_bytes: u64,
    private_ratio: f64,
    model_heap_bytes: usize,
    bytes_per_slice: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    perfetto: Option<PerfettoFigures>,
    /// One line per phase of the fastest full report: ingest, each analysis pass, each render.
    ledger: Vec<LedgerLine>,
}

/// One phase of the phase ledger.
#[derive(Debug, Serialize)]
struct LedgerLine {
    phase: String,
    /// Wall time, s.
    wall_s: f64,
    /// … as a share of the full report (load + analysis); passes that ran side by side on two
    /// cores each count their own wall time.
    pct_of_report: f64,
    /// CPU time of the thread that ran it (ingest and renders: the whole process), s.
    cpu_s: Option<f64>,
}

/// Generates the trace when asked, measures it and prints the figures.
///
/// # Errors
/// When the trace cannot be written or read.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.generate.is_none() && args.trace.as_deref() == Some(Path::new("whatif")) {
        return crate::whatif::run(&args.pairs, args.format == "json");
    }
    if args.generate.is_none() && args.trace.as_deref() == Some(Path::new("ranks")) {
        return crate::ranks_bench::run(
            args.rank_traces.as_deref(),
            args.ranks,
            args.runs,
            args.format == "json",
        );
    }
    if args.generate.is_none() && args.trace.as_deref() == Some(Path::new("scale")) {
        return crate::scale::run(&args.scale_sizes, args.runs, args.format == "json");
    }
    let trace = match (&args.generate, &args.trace) {
        (Some(out), _) => {
            let started = Instant::now();
            let written = crate::workload::generate(out, args.size_mb * 1_000_000)
                .with_context(|| format!("cannot write {}", out.display()))?;
            let mut err = io::stderr().lock();
            writeln!(
                err,
                "generated {} ({}) in {:.1} s",
                out.display(),
                human_bytes(written),
                started.elapsed().as_secs_f64()
            )?;
            out.clone()
        }
        (None, Some(trace)) => trace.clone(),
        (None, None) => bail!("give a TRACE to measure, or --generate OUT to make one"),
    };
    let mut figures = measure(&trace, args.runs.max(1))?;
    if args.perfetto {
        figures.perfetto = Some(measure_perfetto(&trace, args.runs.max(1))?);
    }
    let mut out = io::stdout().lock();
    if args.format == "json" {
        serde_json::to_writer_pretty(&mut out, &figures)?;
        writeln!(out)?;
    } else {
        print_figures(&mut out, &figures)?;
    }
    Ok(())
}

/// CPU time this process has used so far, user and system, all its threads (Linux: utime and
/// stime of `/proc/self/stat`, in USER_HZ ticks, 100 a second on every Linux architecture).
/// Less swayed than wall time by a busy machine's scheduling, so A/B runs compare better.
fn measure(trace: &Path, runs: usize) -> Result<Figures> {
    // Warm the page cache so every run (and every peer tool) reads from memory.
    let mut file = File::open(trace).with_context(|| format!("cannot read {}", trace.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut file_bytes = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        file_bytes += n as u64;
    }
    drop(buf);
    // The input may have just been generated: map it anyway, as a settled file would be.
    let options = LoadOptions {
        map_fresh_files: true,
        ..LoadOptions::default()
    };
    let sampler = PrivatePeak::start();
    let mut ingest = Vec::new();
    let mut total = Vec::new();
    let mut analysis = Vec::new();
    let mut detectors = Vec::new();
    let mut critical = Vec::new();
    let mut op_perf = Vec::new();
    // The fastest full report's time, its phases and its CPU time.
    let mut best_ledger: Option<(f64, Vec<steplens_analysis::ledger::Phase>, f64)> = None;
    let mut cpu = Vec::new();
    let mut last = None;
    let mut private_after_load = 0;
    for _ in 0..runs {
        drop(last.take());
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        let timeline = steplens_ingest::load(trace, &options, None)?;
        let t1 = Instant::now();
        private_after_load = status_field("RssAnon:").unwrap_or(0);
        let ingest_cpu = cpu0.zip(cpu_seconds()).map(|(a, b)| b - a);
        let ledger = steplens_analysis::ledger::Ledger::new();
        ledger.record(steplens_analysis::ledger::Phase {
            name: "ingest (read, parse, build)".into(),
            wall_s: (t1 - t0).as_secs_f64(),
            cpu_s: ingest_cpu,
        });
        let thresholds = steplens_analysis::Thresholds::default();
        let report =
            steplens_analysis::report::build_report_ledgered(&timeline, &thresholds, Some(&ledger));
        timed_render(&ledger, "render json", || {
            serde_json::to_writer(io::sink(), &report).map_err(io::Error::other)
        })?;
        let t2 = Instant::now();
        let run_cpu = cpu0
            .zip(cpu_seconds())
            .map(|(before, after)| after - before);
        cpu.extend(run_cpu);
        // The other formats, outside the full report's time.
        timed_render(&ledger, "render text", || {
            steplens_output::text::text(&mut io::sink(), &report, 20, false)
        })?;
        timed_render(&ledger, "render markdown", || {
            steplens_output::text::markdown(&mut io::sink(), &report, 20)
        })?;
        timed_render(&ledger, "render html", || {
            io::sink().write_all(steplens_output::html::report_page(&report).as_bytes())
        })?;
        let total_s = (t2 - t0).as_secs_f64();
        if best_ledger
            .as_ref()
            .is_none_or(|(best, _, _)| total_s < *best)
        {
            best_ledger = Some((total_s, ledger.phases(), run_cpu.unwrap_or(0.0)));
        }
        // The detectors alone (they also ran inside the report), against the 10% budget.
        let t3 = Instant::now();
        let channels = steplens_analysis::busy::channels(&timeline);
        let findings = steplens_analysis::detect::run_all(
            &steplens_analysis::context::Context::new(&timeline, &thresholds, &channels),
        );
        detectors.push(t3.elapsed().as_secs_f64());
        drop(findings);
        let t4 = Instant::now();
        let paths = steplens_analysis::critical_path::critical_paths(&timeline);
        critical.push(t4.elapsed().as_secs_f64());
        drop(paths);
        // The performance model alone: its launch links and signatures, then the rows.
        let t5 = Instant::now();
        let rows =
            steplens_analysis::context::Context::new(&timeline, &thresholds, &channels).op_perf();
        op_perf.push(t5.elapsed().as_secs_f64());
        drop(rows);
        ingest.push((t1 - t0).as_secs_f64());
        analysis.push((t2 - t1).as_secs_f64());
        total.push((t2 - t0).as_secs_f64());
        last = Some(timeline);
    }
    let peak_private = sampler.finish();
    let Some(timeline) = last else {
        bail!("no run completed");
    };
    let json_bytes = timeline.sources.iter().map(|s| s.bytes).sum::<u64>();
    let events = timeline.event_count();
    let best_ingest = ingest.iter().copied().fold(f64::INFINITY, f64::min);
    let best_total = total.iter().copied().fold(f64::INFINITY, f64::min);
    let best_analysis = analysis.iter().copied().fold(f64::INFINITY, f64::min);
    let best_detectors = detectors.iter().copied().fold(f64::INFINITY, f64::min);
    let best_critical = critical.iter().copied().fold(f64::INFINITY, f64::min);
    let best_op_perf = op_perf.iter().copied().fold(f64::INFINITY, f64::min);
    // The model's own passes in that report: the signatures, the rows and what `slow_gemm`
    // does past the signatures it reads (its line includes them).
    let phase = |name: &str| {
        best_ledger
            .as_ref()
            .and_then(|(_, phases, _)| phases.iter().find(|p| p.name == name))
            .map_or((0.0, 0.0), |p| (p.wall_s, p.cpu_s.unwrap_or(0.0)))
    };
    let (sig_wall, sig_cpu) = phase("op perf: signatures");
    let (rows_wall, rows_cpu) = phase("op perf: rows");
    let (gemm_wall, gemm_cpu) = phase("detector slow_gemm");
    let model_wall = rows_wall + gemm_wall.max(sig_wall);
    let model_cpu = rows_cpu + gemm_cpu.max(sig_cpu);
    let best_cpu = best_ledger.as_ref().map_or(0.0, |l| l.2);
    let ledger = best_ledger
        .map(|(total, phases, _)| {
            phases
                .into_iter()
                .map(|p| LedgerLine {
                    pct_of_report: p.wall_s * 100.0 / total.max(1e-9),
                    phase: p.name,
                    wall_s: p.wall_s,
                    cpu_s: p.cpu_s,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Figures {
        ledger,
        trace: trace.display().to_string(),
        file_bytes,
        json_bytes,
        events,
        slices: timeline.slices.len(),
        runs,
        ingest_s: best_ingest,
        ingest_median_s: median(&mut ingest),
        ingest_mb_s: json_bytes as f64 / 1e6 / best_ingest,
        events_per_s: events as f64 / best_ingest,
        analysis_s: best_analysis,
        detectors_s: best_detectors,
        detectors_pct_of_ingest: best_detectors * 100.0 / best_ingest,
        critical_path_s: best_critical,
        critical_path_pct_of_report: best_critical * 100.0 / best_total,
        op_perf_s: best_op_perf,
        op_perf_pct_of_report: best_op_perf * 100.0 / best_total,
        op_perf_in_report_cpu_s: model_cpu,
        op_perf_in_report_pct_of_cpu: model_cpu * 100.0 / best_cpu.max(1e-9),
        op_perf_in_report_wall_s: model_wall,
        report_s: best_total,
        report_median_s: median(&mut total),
        report_cpu_median_s: (!cpu.is_empty()).then(|| median(&mut cpu)),
        peak_rss_bytes: status_field("VmHWM:").unwrap_or(0),
        private_bytes: private_after_load,
        peak_private_bytes: peak_private.max(private_after_load),
        private_ratio: peak_private.max(private_after_load) as f64 / json_bytes.max(1) as f64,
        model_heap_bytes: timeline.model_heap_bytes(),
        bytes_per_slice: Slices::BYTES_PER_SLICE,
        perfetto: None,
    })
}

/// Exports `trace` as `TRACE.pftrace` (best of `runs`), then loads that file `runs` times.
fn measure_perfetto(trace: &Path, runs: usize) -> Result<PerfettoFigures> {
    let options = LoadOptions::default();
    let timeline = steplens_ingest::load(trace, &options, None)?;
    let mut name = trace.file_name().unwrap_or_default().to_os_string();
    name.push(".pftrace");
    let out = trace.with_file_name(name);
    let mut export = Vec::new();
    let mut written = 0;
    for _ in 0..runs {
        let t0 = Instant::now();
        let file = File::create(&out).with_context(|| format!("cannot write {}", out.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let stats =
            steplens_analysis::export::perfetto::write::write_timeline(&timeline, None, &mut w)?;
        w.flush()?;
        export.push(t0.elapsed().as_secs_f64());
        written = stats.bytes;
    }
    let slices = timeline.slices.len();
    let starts = timeline.slices.start.clone();
    drop(timeline);
    let sampler = PrivatePeak::start();
    let mut decode = Vec::new();
    let mut last = None;
    let mut private_after_load = 0;
    for _ in 0..runs {
        drop(last.take());
        let t0 = Instant::now();
        let back = steplens_ingest::load(&out, &options, None)?;
        decode.push(t0.elapsed().as_secs_f64());
        private_after_load = status_field("RssAnon:").unwrap_or(0);
        last = Some(back);
    }
    let peak = sampler.finish();
    let round_trip_slices_equal = last.as_ref().is_some_and(|b| b.slices.start == starts);
    let best_export = export.iter().copied().fold(f64::INFINITY, f64::min);
    let best_decode = decode.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(PerfettoFigures {
        file: out.display().to_string(),
        pftrace_bytes: written,
        slices,
        export_s: best_export,
        export_mb_s: written as f64 / 1e6 / best_export,
        decode_s: best_decode,
        decode_median_s: median(&mut decode),
        decode_mb_s: written as f64 / 1e6 / best_decode,
        decode_private_bytes: private_after_load,
        decode_peak_private_bytes: peak.max(private_after_load),
        round_trip_slices_equal,
    })
}

/// Runs one render under `name` in `ledger`, with the process's CPU time.
fn timed_render(
    ledger: &steplens_analysis::ledger::Ledger,
    name: &str,
    render: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    render()?;
    ledger.record(steplens_analysis::ledger::Phase {
        name: name.to_owned(),
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: cpu0.zip(cpu_seconds()).map(|(a, b)| b - a),
    });
    Ok(())
}

fn print_figures(out: &mut dyn Write, f: &Figures) -> io::Result<()> {
    writeln!(
        out,
        "trace            {} ({} JSON)",
        f.trace,
        human_bytes(f.json_bytes)
    )?;
    writeln!(
        out,
        "events           {} ({} slices)",
        thousands(f.events),
        thousands(f.slices as u64)
    )?;
    writeln!(
        out,
        "ingest           {:.3} s best, {:.3} s median of {}  ->  {:.0} MB/s, {:.2} M events/s",
        f.ingest_s,
        f.ingest_median_s,
        f.runs,
        f.ingest_mb_s,
        f.events_per_s / 1e6
    )?;
    writeln!(
        out,
        "analysis         {:.3} s (steps, op summary, findings, JSON)",
        f.analysis_s
    )?;
    writeln!(
        out,
        "detectors        {:.3} s ({:.1}% of ingest; budget 10%)",
        f.detectors_s, f.detectors_pct_of_ingest
    )?;
    writeln!(
        out,
        "critical path    {:.3} s ({:.1}% of the full report; budget 10%)",
        f.critical_path_s, f.critical_path_pct_of_report
    )?;
    writeln!(
        out,
        "op perf model    {:.3} CPU s in the report ({:.1}% of its CPU; budget 5%), {:.3} s wall beside the other passes; {:.3} s alone ({:.1}%: its own launch index and arg reads)",
        f.op_perf_in_report_cpu_s,
        f.op_perf_in_report_pct_of_cpu,
        f.op_perf_in_report_wall_s,
        f.op_perf_s,
        f.op_perf_pct_of_report
    )?;
    writeln!(
        out,
        "full report      {:.3} s best, {:.3} s median (ingest + analysis)",
        f.report_s, f.report_median_s
    )?;
    if let Some(cpu) = f.report_cpu_median_s {
        writeln!(
            out,
            "cpu time         {cpu:.2} s per full report, median (user + system, all threads; {:.2} cores busy)",
            cpu / f.report_median_s.max(1e-9)
        )?;
    }
    writeln!(
        out,
        "private memory   {} after load, {} peak ({:.2} x the JSON size)",
        human_bytes(f.private_bytes),
        human_bytes(f.peak_private_bytes),
        f.private_ratio
    )?;
    writeln!(
        out,
        "peak RSS         {} (includes the mapped trace's page-cache pages)",
        human_bytes(f.peak_rss_bytes)
    )?;
    writeln!(
        out,
        "model            {} heap, {} bytes per slice",
        human_bytes(f.model_heap_bytes as u64),
        f.bytes_per_slice
    )?;
    if !f.ledger.is_empty() {
        writeln!(
            out,
            "phase ledger     the fastest full report: wall s, % of it (side-by-side passes each \
             count their own), CPU s; renders after the report"
        )?;
        for line in &f.ledger {
            writeln!(
                out,
                "  {:<34} {:>7.3} s {:>6.1} % {:>9}",
                line.phase,
                line.wall_s,
                line.pct_of_report,
                line.cpu_s
                    .map_or_else(|| "-".to_owned(), |c| format!("{c:.3} cpu"))
            )?;
        }
    }
    if let Some(p) = &f.perfetto {
        writeln!(
            out,
            "perfetto file    {} ({}, {} slices; round trip {})",
            p.file,
            human_bytes(p.pftrace_bytes),
            thousands(p.slices as u64),
            if p.round_trip_slices_equal {
                "equal"
            } else {
                "DIFFERS"
            }
        )?;
        writeln!(
            out,
            "perfetto export  {:.3} s best  ->  {:.0} MB/s of .pftrace written",
            p.export_s, p.export_mb_s
        )?;
        writeln!(
            out,
            "perfetto decode  {:.3} s best, {:.3} s median  ->  {:.0} MB/s of .pftrace",
            p.decode_s, p.decode_median_s, p.decode_mb_s
        )?;
        writeln!(
            out,
            "decode memory    {} private after load, {} peak ({:.2} x the .pftrace)",
            human_bytes(p.decode_private_bytes),
            human_bytes(p.decode_peak_private_bytes),
            p.decode_peak_private_bytes as f64 / p.pftrace_bytes.max(1) as f64
        )?;
    }
    Ok(())
}
