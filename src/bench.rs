//! `steplens bench`: generate a large realistic Kineto trace and measure ingest speed, the full
//! report's time and memory. Figures come from this command, never from timed tests.
//!
//! Memory is read from `/proc/self/status`: `VmHWM` (peak resident set, which counts the
//! mapped trace's page-cache pages) and `RssAnon` (private memory: the model and the heap),
//! sampled every few milliseconds for its peak.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use steplens_ingest::LoadOptions;
use steplens_ingest::model::Slices;

use steplens_output::text::{human_bytes, thousands};

#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Trace to measure (generated first with --generate).
    trace: Option<PathBuf>,
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
    detectors_pct_of_ingest: f64,
    report_s: f64,
    report_median_s: f64,
    peak_rss_bytes: u64,
    private_bytes: u64,
    peak_private_bytes: u64,
    private_ratio: f64,
    model_heap_bytes: usize,
    bytes_per_slice: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    perfetto: Option<PerfettoFigures>,
}

pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    let trace = match (&args.generate, &args.trace) {
        (Some(out), _) => {
            let started = Instant::now();
            let written = generate(out, args.size_mb * 1_000_000)
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

fn status_field(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Samples `RssAnon` in the background and keeps the peak.
struct PrivatePeak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl PrivatePeak {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (Arc::clone(&stop), Arc::clone(&peak));
        let handle = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    if let Some(v) = status_field("RssAnon:") {
                        p.fetch_max(v, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
            .ok();
        Self { stop, peak, handle }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

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
    let mut last = None;
    let mut private_after_load = 0;
    for _ in 0..runs {
        drop(last.take());
        let t0 = Instant::now();
        let timeline = steplens_ingest::load(trace, &options, None)?;
        let t1 = Instant::now();
        private_after_load = status_field("RssAnon:").unwrap_or(0);
        let report = steplens_analysis::build_report(&timeline);
        serde_json::to_writer(io::sink(), &report)?;
        let t2 = Instant::now();
        // The detectors alone (they also ran inside the report), against the 10% budget.
        let t3 = Instant::now();
        let channels = steplens_analysis::steps::channels(&timeline);
        let thresholds = steplens_analysis::Thresholds::default();
        let findings = steplens_analysis::detect::run_all(&steplens_analysis::detect::Context {
            timeline: &timeline,
            thresholds: &thresholds,
            channels: &channels,
        });
        detectors.push(t3.elapsed().as_secs_f64());
        drop(findings);
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
    Ok(Figures {
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
        report_s: best_total,
        report_median_s: median(&mut total),
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
        let stats = steplens_ingest::perfetto::write::write_timeline(&timeline, None, &mut w)?;
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
        "full report      {:.3} s best, {:.3} s median (ingest + analysis)",
        f.report_s, f.report_median_s
    )?;
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

/// Writes a Kineto-shaped CUDA training trace of at least `target` bytes: pretty-printed like
/// Kineto, ProfilerStep and DataLoader annotations, nested aten ops with shapes, runtime
/// launches with `ac2g` flows to kernels on two streams, a backward thread with `fwdbwd` flows,
/// copies, a `loss.item()` sync, and process/thread metadata.
fn generate(path: &Path, target: u64) -> io::Result<u64> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut w = Gen::new(BufWriter::with_capacity(1 << 20, File::create(path)?));
    w.raw(
        "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n      \"id\": 0, \"name\": \"NVIDIA A100-SXM4-80GB\", \"totalGlobalMem\": 85097971712,\n      \"computeMajor\": 8, \"computeMinor\": 0,\n      \"maxThreadsPerBlock\": 1024, \"numSms\": 108\n    }\n  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1},\n  \"record_shapes\": 1,\n  \"displayTimeUnit\": \"ms\",\n  \"traceEvents\": [\n",
    )?;
    w.metadata()?;
    let mut step = 0u64;
    while w.written < target {
        w.step(step)?;
        step += 1;
    }
    w.raw(
        "  {\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\",\n    \"ts\": ",
    )?;
    let end = w.host_ts + 10_000;
    w.raw(&format!(
        "{}\n  }}\n],\n  \"traceName\": \"{}\"\n}}\n",
        fmt_us(end),
        path.display()
    ))?;
    w.out.flush()?;
    Ok(w.written)
}

const PID: u64 = 2_847_291;
const BWD_TID: u64 = 2_847_512;

fn op_dur(k: u64) -> u64 {
    22_000 + (k % 13) * 1_700
}

fn fmt_us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

struct Gen<W: Write> {
    out: W,
    written: u64,
    host_ts: u64,
    gpu_ts: u64,
    external_id: u64,
    correlation: u64,
    flow_id: u64,
    ev_idx: u64,
    line: String,
}

impl<W: Write> Gen<W> {
    fn new(out: W) -> Self {
        Self {
            out,
            written: 0,
            host_ts: 4_203_669_603_069_091,
            gpu_ts: 4_203_669_603_069_091,
            external_id: 1,
            correlation: 1,
            flow_id: 1,
            ev_idx: 0,
            line: String::with_capacity(4096),
        }
    }

    fn raw(&mut self, s: &str) -> io::Result<()> {
        self.written += s.len() as u64;
        self.out.write_all(s.as_bytes())
    }

    fn flush_line(&mut self) -> io::Result<()> {
        let line = std::mem::take(&mut self.line);
        self.raw(&line)?;
        self.line = line;
        self.line.clear();
        Ok(())
    }

    fn metadata(&mut self) -> io::Result<()> {
        let meta = [
            (
                PID.to_string(),
                "0".to_owned(),
                "process_name",
                "\"name\": \"python3\"",
            ),
            (
                PID.to_string(),
                "0".to_owned(),
                "process_labels",
                "\"labels\": \"CPU\"",
            ),
            (
                "0".to_owned(),
                "0".to_owned(),
                "process_name",
                "\"name\": \"python3\"",
            ),
            (
                "0".to_owned(),
                "0".to_owned(),
                "process_labels",
                "\"labels\": \"GPU 0\"",
            ),
            (
                "0".to_owned(),
                "0".to_owned(),
                "process_sort_index",
                "\"sort_index\": 16777216",
            ),
            (
                PID.to_string(),
                PID.to_string(),
                "thread_name",
                "\"name\": \"thread 2847291 (python3)\"",
            ),
            (
                PID.to_string(),
                BWD_TID.to_string(),
                "thread_name",
                "\"name\": \"thread 2847512 (pt_autograd_0)\"",
            ),
            (
                "0".to_owned(),
                "7".to_owned(),
                "thread_name",
                "\"name\": \"stream 7 \"",
            ),
            (
                "0".to_owned(),
                "20".to_owned(),
                "thread_name",
                "\"name\": \"stream 20 \"",
            ),
        ];
        for (pid, tid, name, args) in meta {
            let ts = fmt_us(self.host_ts);
            let _ = write!(
                self.line,
                "  {{\n    \"name\": \"{name}\", \"ph\": \"M\", \"ts\": {ts}, \"pid\": {pid}, \"tid\": {tid},\n    \"args\": {{\n      {args}\n    }}\n  }},\n"
            );
            self.flush_line()?;
        }
        Ok(())
    }

    /// A host slice. Returns its external id.
    fn cpu(
        &mut self,
        tid: u64,
        cat: &str,
        name: &str,
        start: u64,
        dur: u64,
        shapes: &str,
    ) -> io::Result<u64> {
        let ext = self.external_id;
        self.external_id += 1;
        self.ev_idx += 1;
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{name}\", \"pid\": {PID}, \"tid\": {tid},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext},\"Record function id\": 0, \"Ev Idx\": {}{shapes}\n    }}\n  }},\n",
            fmt_us(start),
            fmt_us(dur),
            self.ev_idx
        );
        self.flush_line()?;
        Ok(ext)
    }

    /// A runtime launch on the host plus the device work it starts, linked by an `ac2g` flow.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &mut self,
        tid: u64,
        ext: u64,
        runtime: &str,
        cat: &str,
        kernel: &str,
        start: u64,
        gpu_dur: u64,
        stream: u64,
    ) -> io::Result<()> {
        let corr = self.correlation;
        self.correlation += 1;
        let dur = 4_000 + (corr % 7) * 350;
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"{runtime}\", \"pid\": {PID}, \"tid\": {tid},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext}, \"cbid\": 211, \"correlation\": {corr}\n    }}\n  }},\n",
            fmt_us(start),
            fmt_us(dur)
        );
        let gpu_start = self.gpu_ts.max(start + dur + 2_000);
        self.gpu_ts = gpu_start + gpu_dur + 1_500;
        let extra = if cat == "kernel" {
            ", \"registers per thread\": 128, \"shared memory\": 49152, \"blocks per SM\": 1.185185, \"warps per SM\": 9.481482, \"grid\": [128, 1, 1], \"block\": [256, 1, 1], \"est. achieved occupancy %\": 13"
        } else {
            ", \"bytes\": 3211264, \"memory bandwidth (GB/s)\": 412.518"
        };
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{kernel}\", \"pid\": 0, \"tid\": {stream},\n    \"ts\": {}, \"dur\": {},\n    \"args\": {{\n      \"External id\": {ext}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": {stream}, \"correlation\": {corr}{extra}\n    }}\n  }},\n",
            fmt_us(gpu_start),
            fmt_us(gpu_dur)
        );
        let _ = write!(
            self.line,
            "  {{\n    \"ph\": \"s\", \"id\": {corr}, \"pid\": {PID}, \"tid\": {tid}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }},\n  {{\n    \"ph\": \"f\", \"id\": {corr}, \"pid\": 0, \"tid\": {stream}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }},\n",
            fmt_us(start),
            fmt_us(gpu_start)
        );
        self.flush_line()
    }

    /// One op: outer aten op > inner op > launch of one kernel. Returns the time it ends.
    fn op(
        &mut self,
        tid: u64,
        at: u64,
        outer: &str,
        inner: &str,
        kernel: &str,
        k: u64,
    ) -> io::Result<u64> {
        let shapes = format!(
            ",\n      \"Input Dims\": [[64, {}], [{}, {}], []], \"Input type\": [\"float\", \"float\", \"Scalar\"],\n      \"Input Strides\": [[{}, 1], [{}, 1], []], \"Concrete Inputs\": [\"\", \"\", \"1\"]",
            256 + k % 8 * 128,
            512,
            256 + k % 8 * 128,
            256 + k % 8 * 128,
            256 + k % 8 * 128
        );
        let dur = op_dur(k);
        self.cpu(tid, "cpu_op", outer, at, dur, &shapes)?;
        let ext = self.cpu(tid, "cpu_op", inner, at + 3_000, dur - 6_000, &shapes)?;
        self.launch(
            tid,
            ext,
            "cudaLaunchKernel",
            "kernel",
            kernel,
            at + 6_000,
            30_000 + (k % 11) * 9_000,
            7,
        )?;
        Ok(at + dur + 1_000)
    }

    fn step(&mut self, n: u64) -> io::Result<()> {
        let tid = PID;
        let start = self.host_ts;
        let mut t = start + 1_000;
        // Data loading, then the batch's host-to-device copy.
        let dl_dur = 180_000 + (n % 5) * 10_000;
        self.cpu(
            tid,
            "user_annotation",
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            t,
            dl_dur,
            "",
        )?;
        self.cpu(tid, "cpu_op", "aten::stack", t + 20_000, 120_000, "")?;
        t += dl_dur + 2_000;
        let ext = self.cpu(tid, "cpu_op", "aten::to", t, 40_000, "")?;
        self.launch(
            tid,
            ext,
            "cudaMemcpyAsync",
            "gpu_memcpy",
            "Memcpy HtoD (Pageable -> Device)",
            t + 10_000,
            60_000,
            20,
        )?;
        t += 42_000;
        // Forward.
        let fwd_ops = [
            ("aten::linear", "aten::addmm", "ampere_sgemm_128x64_tn"),
            (
                "aten::relu",
                "aten::clamp_min",
                "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::clamp_min_scalar_kernel_impl>",
            ),
            (
                "aten::layer_norm",
                "aten::native_layer_norm",
                "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
            ),
            (
                "aten::dropout",
                "aten::native_dropout",
                "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>",
            ),
        ];
        for k in 0..160u64 {
            let (outer, inner, kernel) = fwd_ops[(k % 4) as usize];
            let fwd_at = t;
            t = self.op(tid, t, outer, inner, kernel, k)?;
            // fwd -> bwd flow from this op; its backward node runs later on the autograd thread.
            let _ = write!(
                self.line,
                "  {{\n    \"ph\": \"s\", \"id\": {}, \"pid\": {PID}, \"tid\": {tid}, \"ts\": {}, \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"\n  }},\n",
                self.flow_id + k,
                fmt_us(fwd_at)
            );
            self.flush_line()?;
        }
        // Backward on the autograd thread.
        let mut b = t + 5_000;
        for k in (0..160u64).rev() {
            let dur = op_dur(k) + 3_000;
            self.cpu(
                BWD_TID,
                "cpu_op",
                "autograd::engine::evaluate_function: AddmmBackward0",
                b,
                dur,
                "",
            )?;
            let _ = write!(
                self.line,
                "  {{\n    \"ph\": \"f\", \"id\": {}, \"pid\": {PID}, \"tid\": {BWD_TID}, \"ts\": {}, \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\", \"bp\": \"e\"\n  }},\n",
                self.flow_id + k,
                fmt_us(b)
            );
            self.flush_line()?;
            self.op(
                BWD_TID,
                b + 1_000,
                "AddmmBackward0",
                "aten::mm",
                "ampere_sgemm_64x64_nn",
                k,
            )?;
            b += dur + 1_000;
        }
        self.flow_id += 160;
        t = b + 3_000;
        // Optimizer and a loss.item() sync.
        let opt_start = t;
        for k in 0..12u64 {
            t = self.op(
                tid,
                t + 2_000,
                "aten::_foreach_add_",
                "aten::_foreach_add_",
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel",
                k,
            )?;
        }
        self.cpu(
            tid,
            "user_annotation",
            "Optimizer.step#SGD.step",
            opt_start,
            t - opt_start + 1_000,
            "",
        )?;
        t += 5_000;
        let ext = self.cpu(tid, "cpu_op", "aten::item", t, 90_000, "")?;
        self.launch(
            tid,
            ext,
            "cudaMemcpyAsync",
            "gpu_memcpy",
            "Memcpy DtoH (Device -> Pageable)",
            t + 5_000,
            3_000,
            7,
        )?;
        t += 95_000;
        let end = t.max(self.gpu_ts) + 5_000;
        self.cpu(
            tid,
            "user_annotation",
            &format!("ProfilerStep#{n}"),
            start,
            end - start,
            "",
        )?;
        self.host_ts = end + 1_000;
        Ok(())
    }
}
