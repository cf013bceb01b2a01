//! Loading traces off the UI thread: ingest, the report and the viewer's indexes are built on a
//! background thread that reports progress through atomics; the UI polls it each frame and never
//! blocks.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, channel};

use steplens_analysis::ranks::{CollectiveLinks, collective_links};
use steplens_analysis::report::{Report, build_report};
use steplens_ingest::{IngestError, LoadOptions, Timeline};

use crate::timeline::lod::LaneIndex;

/// Why a load failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No file was given.
    #[error("no trace file given")]
    NoInput,
    /// Ingest failed (unreadable file, not a trace, damaged before the first event).
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// The loading thread could not start or stopped without an answer.
    #[error("the loading thread failed: {0}")]
    Thread(String),
}

/// A loaded trace with everything the viewer derives from it once.
#[derive(Debug)]
pub struct Loaded {
    /// The files, as given (a directory as it was named).
    pub paths: Vec<PathBuf>,
    /// Files in a named directory that were not loaded (not traces), in one line.
    pub skipped: Option<String>,
    /// The Timeline.
    pub timeline: Timeline,
    /// The analysis report (steps, findings, ops, engines).
    pub report: Report,
    /// Slice ids per lane for level of detail.
    pub index: LaneIndex,
    /// The same collective on each rank, for the links drawn between them.
    pub collectives: CollectiveLinks,
    /// How long each part of the load took.
    pub timings: LoadTimings,
}

/// Wall time of each part of a load, seconds. The report is built beside the lane index and
/// the collective links, so `analysis_s` is the longer of the two, not their sum.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimings {
    /// Reading and building the Timeline.
    pub ingest_s: f64,
    /// The report (steps, findings, tables).
    pub report_s: f64,
    /// The lane index and the collective links (what the timeline needs to draw).
    pub index_s: f64,
    /// Everything after ingest, wall time.
    pub analysis_s: f64,
}

/// Loads, analyses and indexes `paths` on the calling thread with the default load options;
/// `progress` gets `(bytes done, bytes total)` while ingesting.
///
/// # Errors
/// [`LoadError`] when no path is given or ingest fails.
pub fn load_now(
    paths: &[PathBuf],
    progress: Option<&mut dyn FnMut(u64, u64)>,
) -> Result<Loaded, LoadError> {
    load_with(paths, &LoadOptions::default(), progress)
}

/// [`load_now`] with `options` (the command line's `--rank-regex`, `--step-marker`, limits).
/// A directory stands for the traces in it, as on the command line
/// ([`steplens_ingest::open::expand_inputs`]).
///
/// # Errors
/// [`LoadError`] when no path is given, a directory holds no trace, or ingest fails.
pub fn load_with(
    paths: &[PathBuf],
    options: &LoadOptions,
    progress: Option<&mut dyn FnMut(u64, u64)>,
) -> Result<Loaded, LoadError> {
    if paths.is_empty() {
        return Err(LoadError::NoInput);
    }
    let inputs = steplens_ingest::open::expand_inputs(paths)?;
    let refs: Vec<&std::path::Path> = inputs.paths.iter().map(PathBuf::as_path).collect();
    let started = std::time::Instant::now();
    let timeline = steplens_ingest::load_many(&refs, options, progress)?;
    let ingest_s = started.elapsed().as_secs_f64();
    // The report uses both cores for part of its run; the lane index and the collective links
    // need nothing from it, so they are built meanwhile instead of after it.
    let after_ingest = std::time::Instant::now();
    let ((report, report_s), (index, collectives, index_s)) = std::thread::scope(|scope| {
        let report = scope.spawn(|| {
            let t = std::time::Instant::now();
            let report = build_report(&timeline);
            (report, t.elapsed().as_secs_f64())
        });
        let t = std::time::Instant::now();
        let index = LaneIndex::new(&timeline);
        let collectives = collective_links(&timeline);
        let drawn = (index, collectives, t.elapsed().as_secs_f64());
        let report = report
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (report, drawn)
    });
    Ok(Loaded {
        paths: paths.to_vec(),
        skipped: inputs.skipped_line(),
        timeline,
        report,
        index,
        collectives,
        timings: LoadTimings {
            ingest_s,
            report_s,
            index_s,
            analysis_s: after_ingest.elapsed().as_secs_f64(),
        },
    })
}

/// What the loading thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading and parsing.
    Reading,
    /// Building the report and indexes.
    Analysing,
}

/// A load running on a background thread.
#[derive(Debug)]
pub struct Loader {
    /// What is being loaded.
    pub paths: Vec<PathBuf>,
    done: Arc<AtomicU64>,
    total: Arc<AtomicU64>,
    rx: Receiver<Result<Loaded, LoadError>>,
}

impl Loader {
    /// Starts loading `paths` with `options`; `wake` is called on progress and when done (to
    /// repaint).
    ///
    /// # Errors
    /// [`LoadError::Thread`] when the thread cannot be spawned.
    pub fn start(
        paths: Vec<PathBuf>,
        options: LoadOptions,
        wake: impl Fn() + Send + 'static,
    ) -> Result<Self, LoadError> {
        let done = Arc::new(AtomicU64::new(0));
        let total = Arc::new(AtomicU64::new(0));
        let (tx, rx) = channel();
        let (d, t, p) = (Arc::clone(&done), Arc::clone(&total), paths.clone());
        std::thread::Builder::new()
            .name("steplens-load".into())
            .spawn(move || {
                let mut last_wake = 0u64;
                let mut progress = |a: u64, b: u64| {
                    d.store(a, Ordering::Relaxed);
                    t.store(b.max(1), Ordering::Relaxed);
                    // Wake the UI about every 1 % so the bar moves without flooding repaints.
                    if b == 0 || a.saturating_sub(last_wake) > b / 100 {
                        last_wake = a;
                        wake();
                    }
                };
                let result = load_with(&p, &options, Some(&mut progress));
                // The receiver may be gone (a newer load replaced this one): nothing to do.
                let _ = tx.send(result);
                wake();
            })
            .map_err(|e| LoadError::Thread(e.to_string()))?;
        Ok(Self {
            paths,
            done,
            total,
            rx,
        })
    }

    /// Share read so far (0..=1) and the phase.
    #[must_use]
    pub fn progress(&self) -> (f32, Phase) {
        let done = self.done.load(Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed);
        if total == 0 {
            return (0.0, Phase::Reading);
        }
        let share = (done as f64 / total as f64).clamp(0.0, 1.0) as f32;
        let phase = if done >= total {
            Phase::Analysing
        } else {
            Phase::Reading
        };
        (share, phase)
    }

    /// The result once the thread is done.
    #[must_use]
    pub fn poll(&self) -> Option<Result<Loaded, LoadError>> {
        match self.rx.try_recv() {
            Ok(result) => Some(result),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Err(LoadError::Thread(
                "stopped without a result".to_owned(),
            ))),
        }
    }
}
