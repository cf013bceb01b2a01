//! Damage sweep: every sample cut at many offsets, and with bytes flipped, either loads (with a
//! warning when something was dropped) or fails with a typed error — never a panic — and a cut
//! trace never reports a step the full trace does not have.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;
use std::io::Read;
use steplens_ingest::{LoadOptions, Timeline, load};
use tempfile::TempDir;

/// Cuts and flips tried per sample.
const TRIALS: usize = 24;

fn samples() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["torch-cpu", "hta", "habana", "gaudi"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../samples")
            .join(dir);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".truth.json")
                && (name.ends_with(".json") || name.ends_with(".gz") || name.ends_with(".csv"))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The sample's bytes, inflated when gzip (the sweep damages the text itself).
fn text(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        MultiGzDecoder::new(&raw[..]).read_to_end(&mut out).unwrap();
        out
    } else {
        raw
    }
}

fn steps(t: &Timeline) -> Vec<(String, i64, i64)> {
    t.steps
        .iter()
        .map(|s| (s.name.clone(), s.start, s.dur))
        .collect()
}

fn try_load(dir: &TempDir, bytes: &[u8]) -> Result<Timeline, steplens_ingest::IngestError> {
    let path = dir.path().join("damaged");
    std::fs::write(&path, bytes).unwrap();
    load(&path, &LoadOptions::default(), None)
}

#[test]
fn cut_and_flipped_samples_never_panic_or_invent_steps() {
    let dir = TempDir::new().unwrap();
    for sample in samples() {
        let bytes = text(&sample);
        let full = try_load(&dir, &bytes).unwrap();
        let full_steps = steps(&full);
        for k in 1..TRIALS {
            let cut = bytes.len() * k / TRIALS;
            match try_load(&dir, &bytes[..cut]) {
                Ok(t) => {
                    // Something was dropped, so the source must say so — unless a CSV was
                    // cut exactly between rows, which leaves a shorter, valid file.
                    let csv_row_boundary = sample.extension().is_some_and(|e| e == "csv")
                        && bytes.get(cut.wrapping_sub(1)) == Some(&b'\n');
                    let warned = t.sources.iter().any(|s| !s.warnings.is_empty());
                    assert!(
                        warned || csv_row_boundary,
                        "{}: cut at {cut} loaded without a warning",
                        sample.display()
                    );
                    for (step, derived) in
                        steps(&t).into_iter().zip(t.steps.iter().map(|s| s.derived))
                    {
                        // Iterations derived from the device timeline are re-derived from what
                        // was read: a capture that ends early (a CSV cut between rows is a
                        // valid, shorter capture) loses the slices still open at the cut, which
                        // can split its last bursts differently. They must still lie inside the
                        // full capture's loop.
                        let known = if derived {
                            let first = full_steps.iter().map(|f| f.1).min().unwrap_or(i64::MAX);
                            let last = full_steps
                                .iter()
                                .map(|f| f.1 + f.2)
                                .max()
                                .unwrap_or(i64::MIN);
                            step.1 >= first && step.1 + step.2 <= last
                        } else {
                            full_steps.contains(&step)
                        };
                        assert!(
                            known,
                            "{}: cut at {cut} reports {step:?}, not in the full trace",
                            sample.display()
                        );
                    }
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
            // Flip one byte somewhere in the same region: any outcome but a panic is fine.
            let mut flipped = bytes.clone();
            let at = (cut * 7919) % flipped.len();
            flipped[at] ^= 0x5a;
            let _ = try_load(&dir, &flipped);
        }
    }
}
