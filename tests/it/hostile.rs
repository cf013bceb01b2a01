//! Hostile and broken inputs and outputs, end to end: bombs inside archives, endless streams,
//! one bad field, overlapping slices, a mapping that breaks, a full disk, stale table
//! partitions, budgets and baselines with impossible values. Each fails with one line and
//! exit 2, or loads what is readable with a warning that says what was dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{fails, json, repo, stderr, stdout, steplens, temp_file};
use flate2::Compression;
use flate2::write::GzEncoder;
use tempfile::TempDir;

mod files;
mod names;
mod ranks_and_limits;

const CLEAN: &str = "samples/torch-cpu/train_clean.json";

/// Runs `steplens ARGS` in the repository root with `NO_COLOR=1`, stdin from `stdin` (else
/// nothing).
fn run_with(args: &[&std::ffi::OsStr], stdin: Option<&std::path::Path>) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_steplens"));
    command
        .args(args)
        .current_dir(repo())
        .env("NO_COLOR", "1")
        .env_remove("CI");
    command.stdin(match stdin {
        Some(path) => Stdio::from(std::fs::File::open(path).unwrap()),
        None => Stdio::null(),
    });
    command.output().unwrap()
}
