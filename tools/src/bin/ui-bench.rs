//! `ui-bench`: the viewer's UI-thread work on a real trace, without a window (egui_kittest
//! drives the real app; no GPU, so rasterizing is left out): the time from opening a trace to
//! the first frame that shows it, then frame times while idle and panning, with a name search,
//! with each op-table sort, and the whole-trace range aggregate.
//!
//! ```text
//! cargo run --release -p steplens-tools --bin ui-bench -- TRACE [FRAMES]
//! ```

#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use eframe::egui::Key;
use egui_kittest::Harness;
use steplens_viewer::ViewerApp;
use steplens_viewer::app::Tab;

/// Longest wait for a load before giving up.
const LOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// The one percentile of the workspace (`steplens_analysis::stats`), 0 for no samples.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    steplens_analysis::stats::percentile_f64(sorted, q).unwrap_or(0.0)
}

/// Runs `frames` frames, doing `before` ahead of each, and returns (p50, p99, max) in ms.
fn frame_times(
    harness: &mut Harness<'_, ViewerApp>,
    frames: usize,
    mut before: impl FnMut(&mut Harness<'_, ViewerApp>),
) -> (f64, f64, f64) {
    let mut ms = Vec::with_capacity(frames);
    for _ in 0..frames {
        before(harness);
        let t = Instant::now();
        harness.step();
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    (
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms.last().copied().unwrap_or(0.0),
    )
}

fn row(what: &str, (p50, p99, max): (f64, f64, f64)) {
    println!("{what:<34} {p50:>9.2} ms {p99:>9.2} ms {max:>9.2} ms");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first().map(PathBuf::from) else {
        println!("usage: ui-bench TRACE [FRAMES]");
        return;
    };
    let frames: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let mut harness = Harness::builder()
        .with_size([1600.0, 1000.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), ViewerApp::new());
    harness.step();

    // Open as the path field does: the load runs on its own thread, frames go on meanwhile.
    let opened = Instant::now();
    let ctx = harness.ctx.clone();
    harness.state_mut().open(vec![path.clone()], &ctx);
    let mut waiting_frames = 0usize;
    while harness.state().session().is_none() {
        if let Some(e) = harness.state().error() {
            println!("{}: {e}", path.display());
            return;
        }
        if opened.elapsed() > LOAD_TIMEOUT {
            println!("{}: not loaded after {LOAD_TIMEOUT:?}", path.display());
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
        harness.step();
        waiting_frames += 1;
    }
    let loaded_s = opened.elapsed().as_secs_f64();
    let first = Instant::now();
    harness.step();
    let first_frame_ms = first.elapsed().as_secs_f64() * 1e3;
    let interactive_s = opened.elapsed().as_secs_f64();
    let Some(session) = harness.state().session() else {
        return;
    };
    let t = &session.data.timeline;
    let timings = session.data.timings;
    println!(
        "{}: {} slices on {} tracks, {} findings",
        path.display(),
        t.slices.len(),
        t.tracks.len(),
        session.data.report.findings.len()
    );
    println!(
        "open → interactive  {interactive_s:.2} s  (loaded after {loaded_s:.2} s: ingest {:.2} s, report {:.2} s beside lane index {:.2} s; first frame {first_frame_ms:.1} ms; {waiting_frames} frames drawn while loading)",
        timings.ingest_s, timings.report_s, timings.index_s
    );
    println!(
        "{:<34} {:>12} {:>12} {:>12}",
        "frames (UI thread)", "p50", "p99", "max"
    );
    row(
        "idle, whole trace",
        frame_times(&mut harness, frames, |_| {}),
    );
    row(
        "panning (D held)",
        frame_times(&mut harness, frames, |h| h.key_press(Key::D)),
    );
    row(
        "zooming in (W held)",
        frame_times(&mut harness, frames, |h| h.key_press(Key::W)),
    );

    // Search: the query runs once per change (on Enter); later frames highlight its matches.
    let search_ms = harness.state_mut().session_mut().map_or(0.0, |s| {
        s.search.query = "aten::mm".to_owned();
        let t = Instant::now();
        s.run_search();
        t.elapsed().as_secs_f64() * 1e3
    });
    println!("search `aten::mm` (once, on Enter)  {search_ms:>9.2} ms");
    row(
        "frames with the matches shown",
        frame_times(&mut harness, frames, |_| {}),
    );

    // Sorting the op table: one click per column, the frame that sorts and draws it.
    if let Some(s) = harness.state_mut().session_mut() {
        s.tab = Tab::Ops;
    }
    harness.step();
    let mut column = 0usize;
    row(
        "op table, a sort per frame",
        frame_times(&mut harness, frames, |h| {
            if let Some(s) = h.state_mut().session_mut() {
                s.tables.ops.click(column % 6);
            }
            column += 1;
        }),
    );

    // The range aggregate over the whole trace: computed once when a drag ends.
    if let Some(s) = harness.state().session()
        && let Some((a, b)) = s.data.timeline.time_range()
    {
        let t = Instant::now();
        let agg = steplens_viewer::query::aggregate(&s.data.timeline, a, b);
        println!(
            "range aggregate, whole trace       {:>9.2} ms ({} slices overlap it)",
            t.elapsed().as_secs_f64() * 1e3,
            agg.slices
        );
    }
}
