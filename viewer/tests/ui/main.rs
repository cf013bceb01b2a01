//! Headless UI tests of the viewer with egui_kittest: navigation, selection, findings, search,
//! loading and errors drive the real app; two PNG snapshots (rendered by wgpu on Mesa lavapipe
//! in CI) pin down the main view. Nothing here depends on time.
//!
//! The tests are in three modules (`navigation`, `panels`, `ranks`); the helpers they share are
//! here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use eframe::egui::{
    Event, Key, Modifiers, MouseWheelSource, MouseWheelUnit, PointerButton, Pos2, TouchPhase, vec2,
};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use steplens_viewer::state::Highlight;
use steplens_viewer::timeline::evidence_slices;
use steplens_viewer::timeline::layout::RowKind;
use steplens_viewer::timeline::lod::RectKind;
use steplens_viewer::{ViewerApp, load_now};

mod navigation;
mod panels;
mod ranks;

/// Samples, relative to the crate (tests run in `viewer/`), so snapshots show the same path
/// on every machine.
const TORCH_SYNC: &str = "../samples/torch-cpu/train_sync.json.gz";
const GAUDI: &str = "../samples/gaudi/train_hpu.bridge.json.gz";
const CUDA: &str = "../samples/hta/cuda_event_sync.json.gz";

fn app(path: &str) -> ViewerApp {
    ViewerApp::with_loaded(load_now(&[PathBuf::from(path)], None).expect("sample loads"))
}

/// Why no snapshot can be rendered here (no GL or Vulkan adapter), probed once; `None` when
/// one can.
fn no_adapter() -> Option<&'static str> {
    static PROBE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            // egui_kittest panics when it finds no adapter: keep that panic's message quiet.
            let hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {}));
            let probe = std::panic::catch_unwind(egui_kittest::wgpu::WgpuTestRenderer::new);
            std::panic::set_hook(hook);
            probe.err().map(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "no adapter".into())
            })
        })
        .as_deref()
}

/// Compares the harness's image with `tests/snapshots/<name>.png`. Without a GL or Vulkan
/// adapter (a bare machine) the comparison is skipped in one line that names the package to
/// install, except under `CI=true`, where it fails.
fn snapshot(harness: &mut Harness<'static, ViewerApp>, name: &str) {
    if let Some(err) = no_adapter() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "snapshot {name}: cannot render: {err}");
        // Straight to stderr, past the test harness's capture, so a passing run shows it.
        let _ = writeln!(
            std::io::stderr(),
            "skipping snapshot {name}: no GL/Vulkan adapter ({}); install Mesa's software \
             Vulkan driver (Debian/Ubuntu: apt install mesa-vulkan-drivers) to run it",
            err.lines().next().unwrap_or(err)
        );
        return;
    }
    harness.snapshot(name);
}

fn harness(app: ViewerApp, w: f32, h: f32) -> Harness<'static, ViewerApp> {
    let mut harness = Harness::builder()
        .with_size([w, h])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui(ui), app);
    harness.run_steps(2);
    harness
}

fn click_at(harness: &mut Harness<'_, ViewerApp>, pos: Pos2) {
    harness.hover_at(pos);
    harness.step();
    for pressed in [true, false] {
        harness.event(Event::PointerButton {
            pos,
            button: PointerButton::Primary,
            pressed,
            modifiers: Modifiers::NONE,
        });
    }
    harness.run_steps(2);
    harness.remove_cursor();
    harness.step();
}

fn visible(harness: &Harness<'_, ViewerApp>) -> (f64, f64) {
    let v = harness.state().session().expect("loaded").view.visible;
    (v.start, v.end)
}

const POINTWISE: &str = "../samples/advice/cpu_pointwise.json.gz";
const RANKS: [&str; 4] = [
    "../samples/ci-aa/straggler_rank0.json.gz",
    "../samples/ci-aa/straggler_rank1.json.gz",
    "../samples/ci-aa/straggler_rank2.json.gz",
    "../samples/ci-aa/straggler_rank3.json.gz",
];
/// A CUDA trace recorded with Python stacks: a host thread 21 deep above one GPU stream.
const STACKS: &str = "../samples/whatif-cuda/ddp_nccl_1rank.json.gz";

fn ranks_app() -> ViewerApp {
    let paths: Vec<PathBuf> = RANKS.iter().map(PathBuf::from).collect();
    ViewerApp::with_loaded(load_now(&paths, None).expect("ranks load"))
}

fn wheel(harness: &mut Harness<'_, ViewerApp>, pos: Pos2, dy: f32) {
    harness.hover_at(pos);
    harness.step();
    harness.event(Event::MouseWheel {
        unit: MouseWheelUnit::Point,
        delta: vec2(0.0, dy),
        phase: TouchPhase::Move,
        source: MouseWheelSource::Wheel,
        modifiers: Modifiers::NONE,
    });
    harness.run_steps(8);
}
