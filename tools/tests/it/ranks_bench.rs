//! `steplens-bench ranks` at a small N: the reduce of the generated ranks' summaries finds the
//! planted straggler and the planted clock offsets (`ranks_bench::run` fails when it does not).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn the_reduce_finds_the_planted_straggler_and_offsets() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no python3 to run bench/make_rank_traces.py");
        return;
    }
    let dir = std::env::temp_dir().join(format!("steplens-ranks-test-{}", std::process::id()));
    let result = steplens_tools::ranks_bench::run(Some(&dir), 24, 1, true);
    let _ = std::fs::remove_dir_all(&dir);
    result.unwrap();
}
