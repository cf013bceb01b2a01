//! Replays the fuzz seeds (`fuzz/seeds/<target>/`) and every input the fuzzers ever crashed on
//! (`fuzz/regressions/<target>/`) through what the fuzz targets run, on the stable toolchain:
//! load the bytes as a trace, build and serialize the report; or parse a budget file. Nothing
//! may panic; regressions must load or fail with a typed error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use crate::support::repo;
use steplens_ingest::{Limits, LoadOptions, load_bytes};

/// The options the fuzz targets use (fuzz/src/lib.rs).
fn fuzz_options() -> LoadOptions {
    LoadOptions {
        max_inflated_bytes: 64 << 20,
        limits: Limits {
            max_tracks: 10_000,
            ..Limits::default()
        },
        ..LoadOptions::default()
    }
}

fn replay(target: &str, path: &Path) -> Result<(), String> {
    let data = std::fs::read(path).unwrap();
    if target == "budget" {
        let text = String::from_utf8_lossy(&data);
        return steplens_analysis::compare::budget::parse_budget(&text)
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    let timeline = load_bytes("fuzz-input", data, &fuzz_options()).map_err(|e| e.to_string())?;
    // What the fuzz targets assert: a Timeline that loads keeps the structural invariants.
    if let Err(broken) = timeline.check_invariants() {
        panic!("{}: Timeline invariant broken:\n{broken}", path.display());
    }
    let report = steplens_analysis::build_report(&timeline);
    serde_json::to_vec(&report).unwrap();
    Ok(())
}

/// Every file under `fuzz/<dir>/<target>/`, with its target.
fn inputs(dir: &str) -> Vec<(String, std::path::PathBuf)> {
    let root = repo().join("fuzz").join(dir);
    let Ok(targets) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for target in targets {
        let target = target.unwrap().path();
        let name = target.file_name().unwrap().to_string_lossy().into_owned();
        for file in std::fs::read_dir(&target).unwrap() {
            out.push((name.clone(), file.unwrap().path()));
        }
    }
    out.sort();
    out
}

#[test]
fn every_seed_loads() {
    let seeds = inputs("seeds");
    assert!(
        seeds.len() >= 10,
        "fuzz seeds missing: run python3 fuzz/make_seeds.py"
    );
    for (target, path) in seeds {
        if let Err(e) = replay(&target, &path) {
            panic!("seed {} ({target}) does not load: {e}", path.display());
        }
    }
}

#[test]
fn crashes_found_by_fuzzing_stay_fixed() {
    let regressions = inputs("regressions");
    assert!(
        regressions.len() >= 3,
        "fuzz/regressions missing: {regressions:?}"
    );
    for (target, path) in regressions {
        // Loading may fail with a typed error; it must not panic.
        let _ = replay(&target, &path);
    }
}
