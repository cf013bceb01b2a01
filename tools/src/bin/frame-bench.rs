//! Frame-build benchmark of the timeline: synthesizes a Timeline with millions of slices
//! (default 10 M) from the same training-step generator `steplens-bench` writes as JSON
//! (`steplens_tools::workload::synthesize`), then times, at several zoom levels, the part of a
//! frame the viewer controls: culling and level of detail (`lod::build_frame`) and turning the
//! paint list into one mesh. No window and no GPU: rasterizing the mesh is egui's work.
//!
//! ```text
//! cargo run --release -p steplens-tools --bin frame-bench [-- SLICES_MILLIONS [FRAMES]]
//! cargo run --release -p steplens-tools --bin frame-bench -- --trace FILE [FRAMES]
//! ```
//!
//! With `--trace`, the frames are built on a real trace loaded the way the viewer loads it
//! (ingest, report and lane index, timed).

#![allow(clippy::print_stdout)]

use std::time::Instant;

use eframe::egui::{Color32, Mesh, Pos2, Rect};
use steplens_tools::workload::synthesize;
use steplens_viewer::timeline::layout::Layout;
use steplens_viewer::timeline::lod::{Frame, LaneIndex, build_frame};
use steplens_viewer::timeline::{name_color, viewport};

const WIDTH_PX: f32 = 1920.0;
const HEIGHT_PX: f32 = 1000.0;

/// The one percentile of the workspace (`steplens_analysis::stats`), 0 for no samples.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    steplens_analysis::stats::percentile_f64(sorted, q).unwrap_or(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (timeline, index, frames) = if args.first().map(String::as_str) == Some("--trace") {
        let Some(path) = args.get(1) else {
            println!("usage: frame_bench --trace FILE [FRAMES]");
            return;
        };
        let frames = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
        let t = Instant::now();
        let loaded = match steplens_viewer::load_now(&[path.into()], None) {
            Ok(l) => l,
            Err(e) => {
                println!("{path}: {e}");
                return;
            }
        };
        let tm = loaded.timings;
        println!(
            "loaded {path}: {} slices on {} tracks, {} findings, in {:.2} s (ingest {:.2} s, then report {:.2} s beside lane index + links {:.2} s: {:.2} s)",
            loaded.timeline.slices.len(),
            loaded.timeline.tracks.len(),
            loaded.report.findings.len(),
            t.elapsed().as_secs_f64(),
            tm.ingest_s,
            tm.report_s,
            tm.index_s,
            tm.analysis_s
        );
        (loaded.timeline, loaded.index, frames)
    } else {
        let millions: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(10.0);
        let frames = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
        let t = Instant::now();
        let timeline = synthesize((millions * 1e6) as usize);
        println!(
            "synthesized {} slices on {} tracks in {:.2} s",
            timeline.slices.len(),
            timeline.tracks.len(),
            t.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        let index = LaneIndex::new(&timeline);
        println!(
            "lane index: {:.0} ms, {:.0} MiB",
            t.elapsed().as_secs_f64() * 1e3,
            index.heap_bytes() as f64 / f64::from(1 << 20)
        );
        (timeline, index, frames)
    };
    let layout = Layout::new(&timeline);
    let rows = layout.rows_in(0.0, HEIGHT_PX);
    let (first, last) = timeline.time_range().unwrap_or((0, 1));
    let mut view = steplens_viewer::state::ViewState::new(first, last);
    let tracks = Rect::from_min_size(Pos2::new(190.0, 26.0), [WIDTH_PX, HEIGHT_PX].into());
    let mut frame = Frame::default();
    println!(
        "{} rows visible of {}, {} px wide, {frames} frames per zoom level (panned across the trace)",
        rows.len(),
        layout.rows.len(),
        WIDTH_PX
    );
    println!(
        "{:>12} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11}",
        "visible", "rects", "steps", "build p50", "build p99", "+mesh p50", "+mesh p99"
    );
    let full = view.bounds.span();
    for zoom in [1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5] {
        let span = full * zoom;
        let mut build = Vec::with_capacity(frames);
        let mut total = Vec::with_capacity(frames);
        let (mut rects, mut steps) = (0, 0);
        for f in 0..frames {
            // Pan across the whole trace so no frame reuses the previous one's cache lines.
            let start = (full - span) * (f as f64 / frames.max(1) as f64);
            view.visible = steplens_viewer::state::TimeRange::new(start, start + span);
            let vp = viewport(&view, tracks);
            let t0 = Instant::now();
            build_frame(&timeline, &index, &layout, rows.clone(), &vp, &mut frame);
            let t1 = Instant::now();
            let mut mesh = Mesh::default();
            for r in &frame.rects {
                let row = &layout.rows[r.row as usize];
                let rect = Rect::from_min_max(
                    Pos2::new(r.x0, tracks.top() + row.y + 1.0),
                    Pos2::new(r.x1, tracks.top() + row.y + row.h - 1.0),
                );
                mesh.add_colored_rect(rect, name_color(r.row));
            }
            for c in &frame.counters {
                for (x, col) in c.columns.iter().enumerate() {
                    if let Some((_, hi)) = col {
                        let x = tracks.left() + x as f32;
                        mesh.add_colored_rect(
                            Rect::from_min_max(
                                Pos2::new(x, 100.0 - hi * 30.0),
                                Pos2::new(x + 1.0, 100.0),
                            ),
                            Color32::LIGHT_BLUE,
                        );
                    }
                }
            }
            let t2 = Instant::now();
            std::hint::black_box(&mesh);
            build.push((t1 - t0).as_secs_f64() * 1e3);
            total.push((t2 - t0).as_secs_f64() * 1e3);
            rects = rects.max(frame.rects.len());
            steps = steps.max(frame.steps);
        }
        build.sort_by(f64::total_cmp);
        total.sort_by(f64::total_cmp);
        println!(
            "{:>12} {:>9} {:>9} {:>8.2} ms {:>8.2} ms {:>8.2} ms {:>8.2} ms",
            steplens_analysis::units::human_ns(span as i64),
            rects,
            steps,
            percentile(&build, 0.5),
            percentile(&build, 0.99),
            percentile(&total, 0.5),
            percentile(&total, 0.99),
        );
    }
}
