//! Savings checked against fixed runs (`samples/whatif/`): each pair is a training loop with a
//! problem and the same loop with the finding's fix, recorded interleaved; the generator read
//! the realized saving (median problem step − median fixed step over three runs each) and its
//! bootstrap interval from the traces itself (`<pair>.truth.json`).
//!
//! The realized saving compares median steps, except for recompiles, whose cost falls in the
//! few steps where shapes change: there the mean step.
//!
//! Rule: where the profiler's own cost does not dominate the difference (`profiler_dominates`
//! false), the saving the problem trace's report estimates for the pair's finding kind is
//! within ±30 % of the realized saving or inside its interval; and the fixed twin has no finding
//! whose saving is above 2 % of its step.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::Path;

use crate::support::{read_json, repo, report, truth_files};
use steplens_analysis::FindingKind;
use steplens_analysis::compare::whatif::{
    agrees, estimated_saving_per_step, realized_saving, statistic_for,
};
use steplens_analysis::stats::Shift;

struct Pair {
    name: String,
    kind: FindingKind,
    realized: Shift,
    profiler_dominates: bool,
}

fn pairs() -> Vec<Pair> {
    pairs_in("samples/whatif")
}

fn pairs_in(rel: &str) -> Vec<Pair> {
    let dir = repo().join(rel);
    truth_files(&dir)
        .iter()
        .map(|p| {
            let t = read_json(p);
            let kind: FindingKind = t["finding_kind"].as_str().unwrap().parse().unwrap();
            // Every profiled step the generator read from its three runs of each variant.
            let steps = |variant: &str| -> Vec<i64> {
                t["profiled"]["runs"][variant]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|run| run["step_ns"].as_array().unwrap())
                    .map(|v| v.as_i64().unwrap())
                    .collect()
            };
            let realized =
                realized_saving(&steps("problem"), &steps("fixed"), statistic_for(kind)).unwrap();
            // The generator's own median difference, read independently of steplens.
            if statistic_for(kind) == steplens_analysis::stats::Statistic::Median {
                let theirs = t["profiled"]["saving_ns"].as_f64().unwrap();
                assert!(
                    (realized.point - theirs).abs() < 1.0,
                    "{p:?}: {realized:?} vs {theirs}"
                );
            }
            Pair {
                name: t["pair"].as_str().unwrap().to_owned(),
                kind,
                realized,
                profiler_dominates: t["profiler_dominates"].as_bool().unwrap(),
            }
        })
        .collect()
}

fn trace(pair: &str, variant: &str) -> std::path::PathBuf {
    trace_in("samples/whatif", pair, variant)
}

fn trace_in(rel: &str, pair: &str, variant: &str) -> std::path::PathBuf {
    Path::new(&repo().join(rel)).join(format!("{pair}.{variant}.json.gz"))
}

/// The GPU fix pairs recorded on an H100 (`samples/whatif-cuda/`), by the same rule, but for
/// `fp32_matmul`: its run is device-bound, so the host's `ProfilerStep` ranges (~2 ms) are not
/// its steps (16.6 ms on the GPU) and the generator's profiled saving, read from them, is not
/// what the fix saved (its synchronized timing is: `fp32_matmul_is_held_to_its_synced_runs`).
/// `item_sync` is a pair whose fix saved nothing (the loop is host-bound): its estimate must be
/// at most 2 % of a step.
#[test]
fn gpu_fix_pairs_agree_with_their_fixed_runs() {
    let dir = "samples/whatif-cuda";
    let pairs = pairs_in(dir);
    assert_eq!(pairs.len(), 5, "the five GPU fix pairs");
    let mut bad = Vec::new();
    let mut checked = 0;
    for p in pairs
        .iter()
        .filter(|p| p.name != "fp32_matmul" && !p.profiler_dominates)
    {
        let r = report(&trace_in(dir, &p.name, "problem"));
        let estimated = estimated_saving_per_step(&r, p.kind).unwrap_or(0.0);
        checked += 1;
        // A fix that saved nothing (its whole interval at or below zero) must be priced at no
        // more than 2 % of the step.
        let step = r.summary.p50_step_ns.unwrap_or(0) as f64;
        let saved_nothing = p.realized.high <= 0.0;
        if saved_nothing && estimated <= 0.02 * step {
            continue;
        }
        if saved_nothing || !agrees(estimated, &p.realized, 0.3) {
            bad.push(format!(
                "{}: {} estimated {:.0} ns per step, realized {:.0} ns [{:.0}, {:.0}]",
                p.name, p.kind, estimated, p.realized.point, p.realized.low, p.realized.high
            ));
        }
    }
    assert!(checked >= 3, "{checked}");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `fp32_matmul` is device-bound: the generator timed its unprofiled runs between two
/// `torch.cuda.synchronize()` calls (`unprofiled.synced_mean_step_ns`, the device-inclusive step)
/// and the fix's saving the same way (`synced_saving_ns`). The report's median step (device-
/// inclusive) is within 5 % of the problem's synced step, and what it says bf16 saves per step is
/// within ±30 % of the synced saving. The host's `ProfilerStep` ranges (~2 ms) are kept as
/// `host_dur_ns`.
#[test]
fn fp32_matmul_is_held_to_its_synced_runs() {
    let dir = repo().join("samples/whatif-cuda");
    let truth = read_json(&dir.join("fp32_matmul.truth.json"));
    let synced_step = support::fp32_matmul_synced_step_ns();
    let synced_saving = truth["unprofiled"]["synced_saving_ns"].as_f64().unwrap();
    let r = report(&trace_in("samples/whatif-cuda", "fp32_matmul", "problem"));
    let median = r.summary.p50_step_ns.unwrap() as f64;
    assert!(
        (median - synced_step).abs() <= 0.05 * synced_step,
        "median step {median} ns vs synced {synced_step} ns"
    );
    // The host ranges are still there, and far shorter.
    let host: Vec<i64> = r.steps.iter().filter_map(|s| s.host_dur_ns).collect();
    assert_eq!(host.len(), r.steps.len());
    let committed = truth["committed_run"]["problem"]["step_ns"]
        .as_array()
        .unwrap();
    for (h, t) in host.iter().zip(committed) {
        assert_eq!(
            *h,
            t.as_i64().unwrap(),
            "host_dur_ns is the ProfilerStep range"
        );
    }
    let estimated = estimated_saving_per_step(&r, FindingKind::NoMixedPrecision).unwrap();
    assert!(
        (estimated - synced_saving).abs() <= 0.3 * synced_saving,
        "no_mixed_precision saves {estimated} ns per step, the synced runs {synced_saving} ns"
    );
    // The fixed twin (bf16) raises no fp32 finding.
    let fixed = report(&trace_in("samples/whatif-cuda", "fp32_matmul", "fixed"));
    assert!(
        fixed
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::NoMixedPrecision)
    );
}

#[test]
fn estimated_savings_agree_with_the_fixed_runs() {
    let pairs = pairs();
    assert!(pairs.len() >= 8, "the eight CPU fix pairs");
    let mut bad = Vec::new();
    for p in pairs.iter().filter(|p| !p.profiler_dominates) {
        let r = report(&trace(&p.name, "problem"));
        let estimated = estimated_saving_per_step(&r, p.kind).unwrap();
        if !agrees(estimated, &p.realized, 0.3) {
            bad.push(format!(
                "{}: {} estimated {:.0} ns per step, realized {:.0} ns [{:.0}, {:.0}]",
                p.name, p.kind, estimated, p.realized.point, p.realized.low, p.realized.high
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn problem_traces_raise_their_finding() {
    for p in pairs() {
        let r = report(&trace(&p.name, "problem"));
        assert!(
            r.findings.iter().any(|f| f.kind == p.kind),
            "{}: no {} finding",
            p.name,
            p.kind
        );
    }
}

#[test]
fn fixed_twins_have_no_finding_worth_two_percent_of_a_step() {
    for p in pairs() {
        let r = report(&trace(&p.name, "fixed"));
        for f in &r.findings {
            let step = r
                .steps
                .iter()
                .find(|s| f.step.as_deref() == Some(s.name.as_str()))
                .map_or(r.summary.p50_step_ns.unwrap_or(0), |s| s.dur_ns);
            assert!(
                f.saving_ns * 50 <= step,
                "{} fixed: {} saves {} of a {} ns step: {}",
                p.name,
                f.kind,
                f.saving_ns,
                step,
                f.title
            );
        }
    }
}

/// The performance model on the H100 pair: the fp32 GEMMs of the problem run read as
/// compute-bound at most of the fp32 peak and a few % of the bf16 peak (989 TFLOP/s); the bf16
/// GEMMs of the fixed twin (launched by cuBLASLt through the driver API) reach several times
/// that rate, against their own dtype's peak. FLOPs per call from the shapes: 2·2048·4096·4096.
#[test]
fn fp32_matmul_gemms_read_against_their_own_dtypes_peak() {
    let gemms = |variant: &str| {
        let r = report(&trace_in("samples/whatif-cuda", "fp32_matmul", variant));
        r.op_perf
            .into_iter()
            .filter(|o| {
                o.name == "aten::mm" && o.input_shape.starts_with("[[2048, 4096], [4096, 4096]]")
            })
            .collect::<Vec<_>>()
    };
    let fp32 = gemms("problem");
    assert_eq!(fp32.len(), 1, "{fp32:?}");
    let f = &fp32[0];
    assert_eq!(f.dtype, "float");
    assert_eq!(f.flops_per_call, Some(2.0 * 2048.0 * 4096.0 * 4096.0));
    let g = f.gemm.unwrap();
    assert_eq!((g.m, g.n, g.k, g.b, g.bias), (2048, 4096, 4096, 1, false));
    assert_eq!(f.bound.as_deref(), Some("compute"));
    let pct = f.pct_of_peak_compute.unwrap();
    assert!(
        (50.0..100.0).contains(&pct),
        "fp32 at {pct}% of the fp32 peak"
    );
    let fp32_rate = f.tflops_per_s.unwrap();
    assert!(fp32_rate / 989.4 < 0.1, "{fp32_rate} TFLOP/s");
    let bf16 = gemms("fixed");
    assert_eq!(bf16.len(), 1, "{bf16:?}");
    assert_eq!(bf16[0].dtype, "c10::BFloat16");
    assert!(
        bf16[0].tflops_per_s.unwrap() > 5.0 * fp32_rate,
        "{:?}",
        bf16[0]
    );
}

/// `--view roofline` prints the model: the fp32 GEMMs first, against the H100's peaks, and the
/// per-family summary with GEMMs the most of the kernel time.
#[test]
fn the_roofline_view_prints_the_model() {
    let path = trace_in("samples/whatif-cuda", "fp32_matmul", "problem");
    let text = support::ok(&[
        "report",
        "--view",
        "roofline",
        "--top",
        "3",
        path.to_str().unwrap(),
    ]);
    assert!(
        text.contains("H100 SXM: dense peak 67 TFLOP/s fp32"),
        "{text}"
    );
    let first_row = text.lines().nth(2).unwrap_or_default();
    assert!(
        first_row.contains("aten::")
            && first_row.contains("float")
            && first_row.ends_with("compute"),
        "{text}"
    );
    let family = text
        .lines()
        .skip_while(|l| !l.starts_with("Roofline: by family"))
        .nth(2)
        .unwrap_or_default();
    assert!(family.trim_start().starts_with("gemm"), "{text}");
}

/// `dataloader_stall` on the GPU workers pair: what fixing the wait saves leaves the main
/// process's per-batch share once workers load the data (issue 47, item 8): per step at most the
/// wait less 50 µs of hand-off per batch and the batch's collate copies (`aten::stack`, read here
/// from the trace's own events), and no less than that bound on this device-idle wait. The
/// estimate lands within 3 % of the realized saving (it was 4.6 % above it without the share).
#[test]
fn a_data_loader_saving_leaves_the_main_process_its_per_batch_share() {
    use std::io::Read;
    let dir = "samples/whatif-cuda";
    let path = trace_in(dir, "dataloader_workers", "problem");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ns = |e: &serde_json::Value, key: &str| (e[key].as_f64().unwrap() * 1000.0).round() as i64;
    // Outermost aten::stack events (collate) as (start, end) ns.
    let stacks: Vec<(i64, i64)> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "aten::stack")
        .map(|e| (ns(e, "ts"), ns(e, "ts") + ns(e, "dur")))
        .collect();
    let r = report(&path);
    let mut checked = 0;
    for f in r
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::DataloaderStall)
    {
        let collate: i64 = stacks
            .iter()
            .filter(|s| s.0 >= f.start_ns && s.1 <= f.end_ns)
            .map(|s| s.1 - s.0)
            .sum();
        let bound = f.lost_ns - 50_000 * f.count as i64 - collate;
        assert!(collate > 0, "{}: no collate copy read", f.title);
        assert!(
            f.saving_ns <= bound && f.saving_ns as f64 >= 0.99 * bound as f64,
            "{}: saving {} ns, bound {bound} ns (wait {}, collate {collate})",
            f.title,
            f.saving_ns,
            f.lost_ns
        );
        checked += 1;
    }
    assert!(checked >= 5, "{checked} findings");
    let pair = pairs_in(dir)
        .into_iter()
        .find(|p| p.name == "dataloader_workers")
        .unwrap();
    let estimated = estimated_saving_per_step(&r, FindingKind::DataloaderStall).unwrap();
    let off = estimated / pair.realized.point - 1.0;
    assert!(
        off.abs() < 0.03,
        "estimated {estimated:.0} ns, realized {:.0} ns ({:+.1} %)",
        pair.realized.point,
        off * 100.0
    );
}
