//! `steplens-bench whatif`: on each fix pair (a training loop with a problem and the same loop
//! with the finding's fix, recorded interleaved), the saving the report of the problem trace
//! estimates for the pair's finding kind, against what the fix saved: the committed pair's
//! median steps, and the pooled runs the generator recorded (its `<pair>.truth.json`, read from
//! the traces by the generator itself), with their bootstrap intervals.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use steplens_analysis::FindingKind;
use steplens_analysis::compare::whatif::{
    agrees, estimated_saving_per_step, realized_saving, statistic_for, step_durations,
};
use steplens_ingest::LoadOptions;
use steplens_output::text::human_ns;

/// One pair's row.
#[derive(Debug, Serialize)]
struct PairRow {
    pair: String,
    kind: String,
    estimated_ns: f64,
    /// This pair's committed traces: median problem step − median fixed step.
    realized_ns: f64,
    realized_low_ns: f64,
    realized_high_ns: f64,
    /// The generator's pooled runs (every profiled step in its truth file, read from its
    /// traces), when it recorded them; the mean for one-off costs (recompiles).
    pooled_ns: Option<f64>,
    pooled_low_ns: Option<f64>,
    pooled_high_ns: Option<f64>,
    /// What the fix saved without the profiler (truth file).
    unprofiled_ns: Option<f64>,
    profiler_dominates: bool,
    /// estimated ÷ pooled realized (the committed pair's without a truth).
    ratio: Option<f64>,
    within_30_pct_or_interval: bool,
}

fn number(v: &serde_json::Value) -> Option<f64> {
    v.as_f64()
}

/// Runs the comparison over every `<pair>.truth.json` in `dir` and prints the table.
///
/// # Errors
/// When the folder or a pair cannot be read.
pub fn run(dir: &Path, json: bool) -> Result<()> {
    let mut truths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".truth.json"))
        .collect();
    truths.sort();
    if truths.is_empty() {
        bail!("{}: no <pair>.truth.json here", dir.display());
    }
    let options = LoadOptions::default();
    let mut rows = Vec::new();
    for truth_path in truths {
        let text = std::fs::read_to_string(&truth_path)
            .with_context(|| format!("cannot read {}", truth_path.display()))?;
        let truth: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not JSON", truth_path.display()))?;
        let pair = truth["pair"].as_str().unwrap_or_default().to_owned();
        let Some(kind) = truth["finding_kind"].as_str() else {
            continue;
        };
        let kind: FindingKind = kind
            .parse()
            .with_context(|| format!("{}: finding_kind", truth_path.display()))?;
        let load = |name: &str| -> Result<steplens_analysis::Report> {
            let path = dir.join(name);
            let t = steplens_ingest::load(&path, &options, None)
                .with_context(|| format!("cannot load {}", path.display()))?;
            Ok(steplens_analysis::build_report(&t))
        };
        let problem = load(&format!("{pair}.problem.json.gz"))?;
        let fixed = load(&format!("{pair}.fixed.json.gz"))?;
        let estimated = estimated_saving_per_step(&problem, kind).unwrap_or(0.0);
        let statistic = statistic_for(kind);
        let Some(realized) = realized_saving(
            &step_durations(&problem),
            &step_durations(&fixed),
            statistic,
        ) else {
            bail!("{pair}: a trace of the pair has no steps");
        };
        // The generator's pooled runs: every profiled step it read from its traces.
        let pooled = |variant: &str| -> Vec<i64> {
            truth["profiled"]["runs"][variant]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|run| run["step_ns"].as_array().into_iter().flatten())
                .filter_map(serde_json::Value::as_i64)
                .collect()
        };
        let pooled_shift = realized_saving(&pooled("problem"), &pooled("fixed"), statistic);
        let pooled_ns = pooled_shift.map(|s| s.point);
        let pooled_low_ns = pooled_shift.map(|s| s.low);
        let pooled_high_ns = pooled_shift.map(|s| s.high);
        let reference = pooled_shift.unwrap_or(realized);
        rows.push(PairRow {
            pair,
            kind: kind.as_str().to_owned(),
            estimated_ns: estimated,
            realized_ns: realized.point,
            realized_low_ns: realized.low,
            realized_high_ns: realized.high,
            pooled_ns,
            pooled_low_ns,
            pooled_high_ns,
            unprofiled_ns: if statistic == steplens_analysis::stats::Statistic::Mean {
                number(&truth["unprofiled"]["mean_problem_ns"])
                    .zip(number(&truth["unprofiled"]["mean_fixed_ns"]))
                    .map(|(p, f)| p - f)
            } else {
                number(&truth["unprofiled"]["saving_ns"])
            },
            profiler_dominates: truth["profiler_dominates"].as_bool().unwrap_or(false),
            ratio: (reference.point.abs() > 0.0).then(|| estimated / reference.point),
            within_30_pct_or_interval: agrees(estimated, &reference, 0.3),
        });
    }
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    let ns = |v: f64| human_ns(v.round() as i64);
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), ns);
    writeln!(
        out,
        "{:<20} {:<22} {:>10} {:>10} {:>23} {:>10} {:>23} {:>10} {:>6} {:>5} {:>8}",
        "pair",
        "finding",
        "estimated",
        "realized",
        "interval (this pair)",
        "pooled",
        "interval (pooled)",
        "no prof.",
        "ratio",
        "ok",
        "prof.dom"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<20} {:<22} {:>10} {:>10} {:>23} {:>10} {:>23} {:>10} {:>6} {:>5} {:>8}",
            r.pair,
            r.kind,
            ns(r.estimated_ns),
            ns(r.realized_ns),
            format!("{} … {}", ns(r.realized_low_ns), ns(r.realized_high_ns)),
            opt(r.pooled_ns),
            format!("{} … {}", opt(r.pooled_low_ns), opt(r.pooled_high_ns)),
            opt(r.unprofiled_ns),
            r.ratio
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}")),
            if r.within_30_pct_or_interval {
                "yes"
            } else {
                "no"
            },
            if r.profiler_dominates { "yes" } else { "no" }
        )?;
    }
    Ok(())
}
