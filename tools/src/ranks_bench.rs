//! `steplens-bench ranks`: the reduce of a thousand ranks' summaries, as the Python
//! `steplens.reduce` and `steplens report --summaries` run it (read every
//! `steplens.rank-summary/1` document, match the collectives, align the clocks, find the
//! straggler), timed and its peak memory sampled; its figures checked against the straggler and
//! the clock offsets the generator planted.
//!
//! The ranks are small Kineto traces from `bench/make_rank_traces.py` (run here when the folder
//! holds none): N ranks, 8 to a host, each host's clock off by a planted offset, one rank
//! computing 35 % longer. The map (`summarize` of each trace) is timed too, but it runs where the
//! traces are in a real job; the reduce is what runs in one place.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use steplens_analysis::finding::FindingKind;
use steplens_analysis::ranks::{rank_summary, ranks_of};
use steplens_ingest::LoadOptions;

/// What the generator planted (`truth.json`).
#[derive(Debug, serde::Deserialize)]
struct Truth {
    ranks: usize,
    straggler: i64,
    clock_offset_ns: Vec<i64>,
}

/// The figures of one `ranks` run.
#[derive(Debug, Serialize)]
struct RankFigures {
    dir: String,
    ranks: usize,
    trace_bytes: u64,
    summary_bytes: u64,
    summary_bytes_mean: u64,
    collectives_per_rank: usize,
    map_s: f64,
    runs: usize,
    reduce_s: f64,
    reduce_median_s: f64,
    /// Peak private memory (`RssAnon`) while reducing, with the summaries' bytes held.
    reduce_peak_private_bytes: u64,
    /// Peak resident set of the whole process (map included).
    peak_rss_bytes: u64,
    threads: usize,
    straggler_found: Option<i64>,
    straggler_planted: i64,
    offsets_match: bool,
}

/// Runs `make_rank_traces.py` into `dir` unless it holds a `truth.json` for `ranks` ranks.
fn ensure_traces(dir: &Path, ranks: usize) -> Result<Truth> {
    let truth_path = dir.join("truth.json");
    let read = || -> Result<Truth> {
        let text = std::fs::read_to_string(&truth_path)
            .with_context(|| format!("cannot read {}", truth_path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}", truth_path.display()))
    };
    if let Ok(truth) = read()
        && truth.ranks == ranks
    {
        return Ok(truth);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/make_rank_traces.py");
    let started = Instant::now();
    let status = std::process::Command::new("python3")
        .arg(&script)
        .arg(ranks.to_string())
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("cannot run python3 {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    writeln!(
        io::stderr().lock(),
        "generated {ranks} rank traces in {} ({:.1} s)",
        dir.display(),
        started.elapsed().as_secs_f64()
    )?;
    read()
}

/// `steplens-bench ranks`: generate (or reuse) `ranks` rank traces in `dir`, summarize each,
/// then time the reduce of the summaries `runs` times.
///
/// # Errors
/// When the traces cannot be made or read, or the reduce finds no ranks.
pub fn run(dir: Option<&Path>, ranks: usize, runs: usize, json: bool) -> Result<()> {
    let dir: PathBuf = dir.map_or_else(
        || std::env::temp_dir().join(format!("steplens-ranks-{ranks}")),
        Path::to_path_buf,
    );
    let truth = ensure_traces(&dir, ranks)?;
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rank") && n.ends_with(".json"))
        })
        .collect();
    traces.sort();
    if traces.len() != truth.ranks {
        bail!(
            "{}: {} rank traces, truth.json says {}",
            dir.display(),
            traces.len(),
            truth.ranks
        );
    }
    // The map: one summary per trace, kept as the bytes a worker would send.
    let options = LoadOptions {
        map_fresh_files: true,
        ..LoadOptions::default()
    };
    let started = Instant::now();
    let mut docs = Vec::with_capacity(traces.len());
    let mut trace_bytes = 0u64;
    for path in &traces {
        let timeline = steplens_ingest::load(path, &options, None)?;
        trace_bytes += timeline.sources.iter().map(|s| s.bytes).sum::<u64>();
        let self_time = steplens_analysis::ops::SelfTime::new(&timeline);
        docs.push(serde_json::to_vec(&rank_summary(&timeline, 0, &self_time))?);
    }
    let map_s = started.elapsed().as_secs_f64();
    let summary_bytes: u64 = docs.iter().map(|d| d.len() as u64).sum();
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    // The reduce, timed.
    let sampler = crate::process::PrivatePeak::start();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
        drop(last.take());
        let t0 = Instant::now();
        // On every core, as `steplens.reduce` reads them.
        let summaries = steplens_analysis::ranks::parse_summaries(&docs, threads)
            .map_err(|(i, e)| anyhow::anyhow!("summary {i}: {e}"))?;
        let reduced = ranks_of(&summaries);
        times.push(t0.elapsed().as_secs_f64());
        last = Some((summaries, reduced));
    }
    let reduce_peak_private_bytes = sampler.finish();
    let Some((summaries, Some((report, findings)))) = last else {
        bail!("the reduce found no ranks with collectives");
    };
    let straggler_found = findings
        .iter()
        .find(|f| f.kind == FindingKind::Straggler)
        .and_then(|f| f.cost.source)
        .and_then(|s| report.ranks.iter().find(|r| r.source == s))
        .map(|r| r.rank);
    let offsets: Vec<i64> = report.ranks.iter().map(|r| r.clock_offset_ns).collect();
    let mut sorted = times.clone();
    let figures = RankFigures {
        dir: dir.display().to_string(),
        ranks: report.world_size,
        trace_bytes,
        summary_bytes,
        summary_bytes_mean: summary_bytes / docs.len().max(1) as u64,
        collectives_per_rank: summaries.first().map_or(0, |s| s.collectives.len()),
        map_s,
        runs: times.len(),
        reduce_s: times.iter().copied().fold(f64::INFINITY, f64::min),
        reduce_median_s: crate::process::median(&mut sorted),
        reduce_peak_private_bytes,
        peak_rss_bytes: crate::process::status_field("VmHWM:").unwrap_or(0),
        threads,
        straggler_found,
        straggler_planted: truth.straggler,
        offsets_match: offsets == truth.clock_offset_ns,
    };
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &figures)?;
        writeln!(out)?;
    } else {
        print_figures(&mut out, &figures)?;
    }
    if figures.straggler_found != Some(truth.straggler) || !figures.offsets_match {
        bail!(
            "the reduce's figures differ from the planted ones (straggler {:?}, planted {}; \
             offsets match: {})",
            figures.straggler_found,
            truth.straggler,
            figures.offsets_match
        );
    }
    Ok(())
}

fn print_figures(out: &mut dyn Write, f: &RankFigures) -> io::Result<()> {
    use steplens_output::text::human_bytes;
    writeln!(out, "ranks      {} ({})", f.ranks, f.dir)?;
    writeln!(
        out,
        "map        {:.2} s for {} traces ({}), summaries {} ({} each, {} collectives per rank)",
        f.map_s,
        f.ranks,
        human_bytes(f.trace_bytes),
        human_bytes(f.summary_bytes),
        human_bytes(f.summary_bytes_mean),
        f.collectives_per_rank
    )?;
    writeln!(
        out,
        "reduce     {:.3} s best, {:.3} s median of {} on {} threads; peak private {} \
         (process peak RSS {})",
        f.reduce_s,
        f.reduce_median_s,
        f.runs,
        f.threads,
        human_bytes(f.reduce_peak_private_bytes),
        human_bytes(f.peak_rss_bytes)
    )?;
    writeln!(
        out,
        "truth      straggler rank {} (found {}), clock offsets {}",
        f.straggler_planted,
        f.straggler_found
            .map_or_else(|| "none".to_owned(), |r| r.to_string()),
        if f.offsets_match { "match" } else { "DIFFER" }
    )
}
