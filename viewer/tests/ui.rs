//! Headless UI tests of the viewer with egui_kittest: navigation, selection, findings, search,
//! loading and errors drive the real app; two PNG snapshots (rendered by wgpu on Mesa lavapipe
//! in CI) pin down the main view. Nothing here depends on time.

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

#[test]
fn clicking_the_worst_finding_zooms_to_its_evidence_and_selects_it() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    let (start0, end0) = visible(&harness);
    // The findings panel lists the report's findings ranked by lost time; the first is the worst.
    harness.get_by_label_contains("1. ").click();
    harness.run_steps(2);
    let session = harness.state().session().unwrap();
    assert_eq!(session.active_finding, Some(0));
    let finding = &session.data.report.findings[0];
    let evidence = evidence_slices(finding);
    assert!(!evidence.is_empty());
    let t = &session.data.timeline;
    let v = session.view.visible;
    for &id in &evidence {
        let (a, b) = (
            session.view.rel(t.slices.start[id as usize]),
            session.view.rel(t.slices.end(id)),
        );
        assert!(
            v.contains_range(a, b),
            "evidence {id} [{a}, {b}] outside {v:?}"
        );
    }
    assert!(v.span() < end0 - start0, "the view zoomed in");
    assert_eq!(session.view.highlight, Highlight::slices(evidence.clone()));
    assert_eq!(session.view.selected, Some(evidence[0]));
    let details = session
        .details()
        .expect("details of the first evidence slice");
    assert_eq!(details.name, t.slice_name(evidence[0]));
}

#[test]
fn wasd_zoom_and_pan_the_visible_range() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    let held = |harness: &mut Harness<'_, ViewerApp>, key: Key| {
        harness.key_down(key);
        harness.step();
        harness.key_up(key);
        harness.step();
    };
    let (s0, e0) = visible(&harness);
    held(&mut harness, Key::W);
    let (s1, e1) = visible(&harness);
    assert!(e1 - s1 < e0 - s0, "W zooms in");
    held(&mut harness, Key::D);
    let (s2, _) = visible(&harness);
    assert!(s2 > s1, "D pans later");
    held(&mut harness, Key::A);
    let (s3, _) = visible(&harness);
    assert!(s3 < s2, "A pans earlier");
    held(&mut harness, Key::S);
    let (s4, e4) = visible(&harness);
    assert!(e4 - s4 > e1 - s1, "S zooms out");
}

#[test]
fn clicking_a_slice_fills_the_details_and_escape_clears_it() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    // Pick a wide slice from the last paint list and click its middle.
    let (pos, id) = {
        let session = harness.state().session().unwrap();
        let widget = &session.timeline;
        let rect = widget
            .last_frame()
            .rects
            .iter()
            .filter(|r| matches!(r.kind, RectKind::Slice(_)) && r.x1 - r.x0 > 20.0)
            .find(|r| {
                matches!(
                    widget.layout.rows[r.row as usize].kind,
                    RowKind::Lane { depth: 1.., .. }
                )
            })
            .copied()
            .expect("a wide nested slice on screen");
        let row = widget.layout.rows[rect.row as usize];
        let tracks = widget.tracks_rect;
        let y = tracks.top() + row.y - session.view.scroll_y + row.h / 2.0;
        let RectKind::Slice(id) = rect.kind else {
            unreachable!()
        };
        (Pos2::new((rect.x0 + rect.x1) / 2.0, y), id)
    };
    click_at(&mut harness, pos);
    let session = harness.state().session().unwrap();
    assert_eq!(session.view.selected, Some(id));
    let d = session.details().expect("details");
    assert_eq!(d.id, id);
    assert!(!d.parents.is_empty(), "a nested slice has a parent chain");
    assert!(d.self_ns <= d.dur);
    harness.get_by_label(&d.name.clone());
    harness.key_press(Key::Escape);
    harness.run_steps(2);
    assert_eq!(harness.state().session().unwrap().view.selected, None);
}

#[test]
fn dragging_on_the_ruler_selects_a_range_with_its_aggregate_and_f_fits_it() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    let tracks = harness.state().session().unwrap().timeline.tracks_rect;
    let y = tracks.top() - 10.0;
    let (a, b) = (
        Pos2::new(tracks.left() + 100.0, y),
        Pos2::new(tracks.left() + 300.0, y),
    );
    harness.hover_at(a);
    harness.step();
    harness.drag_at(a);
    harness.step();
    for x in [150.0, 220.0, 300.0] {
        harness.hover_at(Pos2::new(tracks.left() + x, y));
        harness.step();
    }
    harness.drop_at(b);
    harness.run_steps(2);
    let session = harness.state().session().unwrap();
    let range = session.view.range.expect("a range is selected");
    assert!(range.span() > 0.0);
    let agg = session.aggregate().expect("its aggregate");
    assert!(!agg.rows.is_empty());
    assert!(agg.rows.windows(2).all(|w| w[0].total_ns >= w[1].total_ns));
    harness.key_press(Key::F);
    harness.run_steps(2);
    let v = harness.state().session().unwrap().view.visible;
    assert!(v.contains_range(range.start, range.end));
    assert!(v.span() < range.span() * 1.5);
}

#[test]
fn search_steps_through_matches_and_ops_highlight_their_slices() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    let session = harness.state_mut().session_mut().unwrap();
    session.search.query = "aten::item".to_owned();
    session.run_search();
    let n = session.search.matches.len();
    assert!(n > 1);
    session.next_match(true);
    let first = session.search.matches[0];
    assert_eq!(session.view.selected, Some(first));
    session.next_match(false);
    assert_eq!(session.search.current, Some(n - 1));
    session.search.regex = true;
    session.search.query = "(".to_owned();
    session.run_search();
    assert!(session.search.error.is_some());
    let op = session.data.report.ops[0].name.clone();
    session.highlight_op(&op);
    let id = session.data.timeline.strings.lookup(&op).unwrap();
    assert_eq!(session.view.highlight, Highlight::Name(id));
    assert!(!session.search.matches.is_empty());
    harness.run_steps(2);
}

#[test]
fn a_trace_loads_in_the_background_and_errors_show_in_the_window() {
    let mut harness = harness(ViewerApp::new(), 1000.0, 600.0);
    let ctx = harness.ctx.clone();
    harness
        .state_mut()
        .open(vec![PathBuf::from("../samples/does-not-exist.json")], &ctx);
    wait_loaded(&mut harness);
    assert!(harness.state().session().is_none());
    assert!(
        harness
            .state()
            .error()
            .is_some_and(|e| e.contains("does-not-exist"))
    );
    harness.get_by_label_contains("error:");

    harness.state_mut().open(vec![PathBuf::from(GAUDI)], &ctx);
    harness.step();
    if harness.state().is_loading() {
        // While it loads the window shows the progress, not the "Open a trace" hint.
        assert!(harness.query_by_label_contains("Open a trace").is_none());
    }
    wait_loaded(&mut harness);
    assert!(harness.state().error().is_none());
    let session = harness.state().session().expect("loaded");
    assert!(!session.data.report.findings.is_empty());
}

fn wait_loaded(harness: &mut Harness<'_, ViewerApp>) {
    for _ in 0..600 {
        harness.step();
        if !harness.state().is_loading() {
            harness.step();
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the load did not finish");
}

#[test]
fn collapsing_a_group_hides_its_tracks() {
    let mut harness = harness(app(GAUDI), 1200.0, 800.0);
    let (pos, rows_before) = {
        let s = harness.state().session().unwrap();
        let tracks = s.timeline.tracks_rect;
        let header = s.timeline.layout.rows[0];
        (
            Pos2::new(
                tracks.left() - 100.0,
                tracks.top() + header.y + header.h / 2.0,
            ),
            s.timeline.layout.rows.len(),
        )
    };
    click_at(&mut harness, pos);
    let s = harness.state().session().unwrap();
    assert!(s.timeline.layout.groups[0].collapsed);
    assert!(s.timeline.layout.rows.len() < rows_before);
}

/// The main view on the Gaudi sample with the worst finding clicked and the three bridge log
/// groups (Synapse Logger, Bridge Logs, Memory Logs) collapsed, so the HPU's engines show below
/// the host (docs/viewer-gaudi.png).
#[test]
fn snapshot_gaudi_main_view() {
    let mut harness = harness(app(GAUDI), 1400.0, 850.0);
    harness.get_by_label_contains("1. ").click();
    harness.run_steps(2);
    {
        let s = harness.state_mut().session_mut().unwrap();
        for name in ["Synapse Logger", "Bridge Logs", "Memory Logs"] {
            let g = s
                .timeline
                .layout
                .groups
                .iter()
                .position(|g| g.name == name)
                .unwrap();
            s.timeline.layout.toggle(g, &s.data.timeline);
        }
    }
    harness.run_steps(2);
    harness.remove_cursor();
    harness.run_steps(2);
    snapshot(&mut harness, "gaudi_main_view");
}

/// The torch sample zoomed out with the op table open.
#[test]
fn snapshot_torch_ops_table() {
    let mut harness = harness(app(TORCH_SYNC), 1000.0, 640.0);
    harness.state_mut().session_mut().unwrap().tab = steplens_viewer::app::Tab::Ops;
    harness.run_steps(2);
    snapshot(&mut harness, "torch_ops_table");
}

/// The CUDA sample with the critical path toggle on: the step's path drawn over its events
/// (host ops, the launch to the spin kernel, the kernel, the event sync that waited for it),
/// and its split by bound in the toolbar.
#[test]
fn snapshot_cuda_critical_path() {
    let mut harness = harness(app(CUDA), 1400.0, 700.0);
    {
        let session = harness.state_mut().session_mut().unwrap();
        session.show_critical_path = true;
        assert!(session.critical_path_in_view().is_some());
    }
    harness.run_steps(2);
    harness.get_by_label_contains("device_compute 1%");
    snapshot(&mut harness, "cuda_critical_path");
}

#[test]
fn the_app_draws_without_a_trace() {
    let mut harness = harness(ViewerApp::new(), 800.0, 400.0);
    harness.get_by_label("Open");
    harness.run_steps(1);
}

#[test]
fn ctrl_wheel_zooms_around_the_pointer_and_the_wheel_scrolls_tracks() {
    let mut harness = harness(app(GAUDI), 1200.0, 700.0);
    let tracks = harness.state().session().unwrap().timeline.tracks_rect;
    let pos = Pos2::new(tracks.left() + tracks.width() * 0.25, tracks.top() + 40.0);
    let (s0, e0) = visible(&harness);
    let t_at = |s: f64, e: f64| s + (e - s) * 0.25;
    harness.hover_at(pos);
    harness.step();
    // What eframe makes of ctrl+wheel (and of a pinch).
    harness.event(Event::Zoom(2.0));
    harness.step();
    let (s1, e1) = visible(&harness);
    assert!((e1 - s1) < (e0 - s0) * 0.6, "zoomed in");
    assert!(
        (t_at(s1, e1) - t_at(s0, e0)).abs() < (e1 - s1) * 0.01,
        "around the pointer"
    );
    harness.event(Event::MouseWheel {
        unit: MouseWheelUnit::Point,
        delta: vec2(0.0, -200.0),
        phase: TouchPhase::Move,
        source: MouseWheelSource::Wheel,
        modifiers: Modifiers::NONE,
    });
    harness.run_steps(8);
    assert!(
        harness.state().session().unwrap().view.scroll_y > 0.0,
        "scrolled down"
    );
}

#[test]
fn double_clicking_a_slice_zooms_to_it() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    let (pos, id) = {
        let session = harness.state().session().unwrap();
        let w = &session.timeline;
        let r = *w
            .last_frame()
            .rects
            .iter()
            .find(|r| {
                matches!(r.kind, RectKind::Slice(_))
                    && r.x1 - r.x0 > 40.0
                    && matches!(w.layout.rows[r.row as usize].kind, RowKind::Lane { .. })
            })
            .unwrap();
        let row = w.layout.rows[r.row as usize];
        let RectKind::Slice(id) = r.kind else {
            unreachable!()
        };
        let y = w.tracks_rect.top() + row.y - session.view.scroll_y + row.h / 2.0;
        (Pos2::new((r.x0 + r.x1) / 2.0, y), id)
    };
    // Each event is a frame of the harness's 0.25 s: two clicks take longer than egui's
    // double-click delay.
    harness
        .ctx
        .options_mut(|o| o.input_options.max_double_click_delay = 5.0);
    harness.hover_at(pos);
    harness.step();
    for _ in 0..2 {
        for pressed in [true, false] {
            harness.event(Event::PointerButton {
                pos,
                button: PointerButton::Primary,
                pressed,
                modifiers: Modifiers::NONE,
            });
        }
        harness.step();
    }
    harness.run_steps(2);
    let s = harness.state().session().unwrap();
    let t = &s.data.timeline;
    let (a, b) = (
        s.view.rel(t.slices.start[id as usize]),
        s.view.rel(t.slices.end(id)),
    );
    assert_eq!(s.view.selected, Some(id));
    assert!(s.view.visible.contains_range(a, b));
    assert!(
        s.view.visible.span() <= (b - a) * 1.3,
        "fitted with a 10 % margin"
    );
}

#[test]
fn a_launch_shows_its_flow_to_the_device_work() {
    let mut harness = harness(app(CUDA), 1200.0, 700.0);
    let session = harness.state_mut().session_mut().unwrap();
    let t = &session.data.timeline;
    let flow = *t
        .flows
        .iter()
        .find(|f| t.slice_track(f.to).is_some_and(|tr| tr.kind.is_device()))
        .expect("a host to device flow");
    session.go_to(flow.from);
    let d = session.details().unwrap();
    assert!(d.flows.iter().any(|f| f.outgoing && f.other == flow.to));
    // Following the flow selects the kernel on its stream.
    session.go_to(flow.to);
    assert_eq!(session.view.selected, Some(flow.to));
    assert!(
        session
            .details()
            .unwrap()
            .flows
            .iter()
            .any(|f| !f.outgoing && f.other == flow.from)
    );
    harness.run_steps(2);
}

/// A selected kernel shows the performance model of the op that launched it: its FLOPs, the
/// rate its signature achieved and the share of the device's peak.
#[test]
fn a_kernel_shows_its_ops_flops_rate_and_share_of_peak() {
    let mut harness = harness(
        app("../samples/whatif-cuda/fp32_matmul.problem.json.gz"),
        1200.0,
        800.0,
    );
    let session = harness.state_mut().session_mut().unwrap();
    let t = &session.data.timeline;
    let gemm = t
        .flows
        .iter()
        .map(|f| f.to)
        .find(|&k| t.slice_name(k).contains("gemm"))
        .expect("a GEMM kernel with its launch");
    session.go_to(gemm);
    let p = session.perf().expect("the launching op's row").clone();
    assert_eq!(p.family.as_str(), "gemm");
    assert!(p.flops_per_call.is_some_and(|f| f > 1e9), "{p:?}");
    let pct = p.pct_of_peak_compute.expect("an H100 has an fp32 peak");
    harness.run_steps(3);
    harness.get_by_label(&format!("{:.2} TFLOP/s", p.tflops_per_s.unwrap()));
    harness.get_by_label(&format!("{pct:.1} %"));
}

/// Several ranks: groups in rank order whatever the argument order, and a selected collective
/// links to the same collective on every other rank, with each rank's wait in the details.
#[test]
fn ranks_are_groups_in_rank_order_and_a_collective_links_across_them() {
    let paths: Vec<PathBuf> = [2, 0, 3, 1]
        .iter()
        .map(|r| {
            PathBuf::from(format!(
                "../samples/ranks/nccl_straggler/nccl_straggler_rank{r}.json.gz"
            ))
        })
        .collect();
    let mut harness = harness(
        ViewerApp::with_loaded(load_now(&paths, None).expect("ranks load")),
        1200.0,
        800.0,
    );
    let (first_nccl, names) = {
        let session = harness.state().session().unwrap();
        let names: Vec<String> = session
            .timeline
            .layout
            .groups
            .iter()
            .map(|g| g.name.clone())
            .collect();
        let t = &session.data.timeline;
        let rank0 = t.sources.iter().position(|s| s.rank == Some(0)).unwrap();
        let first_nccl = (0..t.slices.len() as u32)
            .filter(|&i| {
                t.slice_name(i).starts_with("ncclDevKernel_AllReduce")
                    && t.slice_track(i).unwrap().source as usize == rank0
            })
            .min_by_key(|&i| t.slices.start[i as usize])
            .unwrap();
        (first_nccl, names)
    };
    let ranks: Vec<&str> = names.iter().map(|n| &n[..6]).collect();
    assert!(
        ranks.windows(2).all(|w| w[0] <= w[1]) && ranks[0] == "rank 0",
        "{names:?}"
    );
    harness
        .state_mut()
        .session_mut()
        .unwrap()
        .select_slice(Some(first_nccl));
    harness.run_steps(2);
    let session = harness.state().session().unwrap();
    let t = &session.data.timeline;
    // Its own launch flow stays on rank 0; every link to another rank is the same collective.
    let mut linked_ranks: Vec<i64> = session
        .linked()
        .iter()
        .map(|&(id, _)| {
            (
                id,
                t.sources[t.slice_track(id).unwrap().source as usize].rank,
            )
        })
        .filter(|&(_, rank)| rank != Some(0))
        .map(|(id, rank)| {
            assert!(t.slice_name(id).starts_with("ncclDevKernel_AllReduce"));
            rank.unwrap()
        })
        .collect();
    linked_ranks.sort_unstable();
    assert_eq!(linked_ranks, [1, 2, 3]);
    harness.get_by_label("same collective on each rank");
}

/// The report menu shares the CLI's renderers: the Markdown it copies is `report --format md`.
#[test]
fn the_report_menu_copies_the_cli_markdown_report() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 700.0);
    harness.get_by_label("Report").click();
    harness.run_steps(2);
    harness.get_by_label("Copy as Markdown").click();
    harness.run_steps(2);
    let session = harness.state().session().unwrap();
    let markdown = session.report_markdown();
    let mut cli = Vec::new();
    steplens_output::text::markdown(&mut cli, &session.data.report, 20).unwrap();
    assert_eq!(markdown.as_bytes(), cli.as_slice());
    assert!(markdown.contains("sync point"), "{markdown}");
    harness.get_by_label("report copied as Markdown");
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

/// Item 1: finding titles use `→` (and `↔`, `×`, `µ`…): every character of every finding's
/// title and recommendation has a glyph in the fonts the viewer draws with, and the finding
/// card's recommendation is body text, not the 9 px small style.
#[test]
fn finding_text_has_a_glyph_for_every_character_and_body_sized_advice() {
    let mut harness = harness(app(POINTWISE), 1400.0, 850.0);
    let ctx = harness.ctx.clone();
    let body = ctx.global_style().text_styles[&eframe::egui::TextStyle::Body].clone();
    assert!(ctx.fonts_mut(|f| f.has_glyphs(&body, "→ ↔ ▸ ▾ ▴ × µ …")));
    let findings = harness
        .state()
        .session()
        .unwrap()
        .data
        .report
        .findings
        .clone();
    assert!(findings.iter().any(|f| f.title.contains('→')));
    for f in &findings {
        for text in [&f.title, &f.recommendation] {
            let missing: Vec<char> = text
                .chars()
                .filter(|&c| !ctx.fonts_mut(|fonts| fonts.has_glyph(&body, c)))
                .collect();
            assert!(missing.is_empty(), "{missing:?} in {text}");
        }
    }
    harness.get_by_label_contains("1. ").click();
    harness.run_steps(2);
    let recommendation = findings[0].recommendation.clone();
    let node = harness.get_by_label(&recommendation);
    let rect = node.rect();
    let laid_out = ctx.fonts_mut(|f| {
        f.layout(
            recommendation.clone(),
            body.clone(),
            eframe::egui::Color32::WHITE,
            rect.width() + 1.0,
        )
    });
    assert!(
        (laid_out.size().y - rect.height()).abs() < 2.0,
        "the recommendation is laid out at the body size: {} vs {}",
        laid_out.size().y,
        rect.height()
    );
}

/// Item 2: the Details tab starts at a third of the window, scrolls with the wheel, keeps its
/// size across tab switches and can be resized by dragging its edge.
#[test]
fn the_details_panel_is_a_third_of_the_window_scrolls_and_keeps_its_size() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    // The deepest slice: a long parent chain and args, more than the panel holds.
    let deepest = {
        let t = &harness.state().session().unwrap().data.timeline;
        (0..t.slices.len() as u32)
            .max_by_key(|&i| t.slices.depth[i as usize])
            .unwrap()
    };
    harness
        .state_mut()
        .session_mut()
        .unwrap()
        .select_slice(Some(deepest));
    harness.run_steps(3);
    let panel_top = |h: &Harness<'_, ViewerApp>| h.get_by_label("Details").rect().top();
    let top0 = panel_top(&harness);
    let height = 800.0 - top0;
    assert!(
        (800.0 / 3.0 - 40.0..800.0 / 3.0 + 40.0).contains(&height),
        "about a third of the window: {height}"
    );
    let before = harness.get_by_label("category").rect().top();
    wheel(&mut harness, Pos2::new(300.0, 800.0 - 40.0), -120.0);
    let after = harness.get_by_label("category").rect().top();
    assert!(after < before - 20.0, "scrolled: {before} -> {after}");
    for tab in ["Range", "Steps", "Ops", "Details"] {
        harness.get_by_label(tab).click();
        harness.run_steps(2);
        assert!(
            (panel_top(&harness) - top0).abs() < 1.0,
            "{tab} keeps the panel's size"
        );
    }
    // Dragging the panel's top edge up makes it taller, and the size stays.
    let edge = Pos2::new(300.0, top0 - 6.0);
    harness.hover_at(edge);
    harness.step();
    harness.drag_at(edge);
    harness.step();
    for dy in [20.0, 60.0, 100.0] {
        harness.hover_at(Pos2::new(300.0, edge.y - dy));
        harness.step();
    }
    harness.drop_at(Pos2::new(300.0, edge.y - 100.0));
    harness.run_steps(2);
    let top1 = panel_top(&harness);
    assert!(top1 < top0 - 50.0, "resized: {top0} -> {top1}");
    harness.get_by_label("Range").click();
    harness.run_steps(2);
    assert!((panel_top(&harness) - top1).abs() < 1.0);
}

/// Item 3: a finding without a time range keeps the view, clears the slice selection and
/// shows the finding in Details; a memory finding with a peak pans to it (same zoom) and
/// shows the device's memory and its curve.
#[test]
fn a_finding_without_a_time_range_keeps_the_view_and_shows_itself_in_details() {
    let mut data = load_now(&[PathBuf::from(GAUDI)], None).unwrap();
    // The HPU's reserved memory is the bridge's pool, so the sample raises no reserved_slack:
    // one is planted at the HPU's allocated peak, as the analysis would write it.
    let hpu = data
        .report
        .memory
        .iter()
        .find(|m| m.device == "hpu:0")
        .expect("hpu:0 memory");
    let mut planted = data.report.findings[0].clone();
    planted.kind = steplens_analysis::FindingKind::ReservedSlack;
    planted.title = format!("{}: reserved far above allocated", hpu.device);
    (planted.start_ns, planted.end_ns) = (hpu.peak_allocated_ns, hpu.peak_allocated_ns);
    (planted.step, planted.track, planted.call_site) = (None, None, None);
    planted.evidence.clear();
    planted.ops.clear();
    data.report.findings.push(planted);
    let slack = data.report.findings.len() - 1;
    let peak = data.report.findings[slack].start_ns;
    assert!(peak != 0 && peak == data.report.findings[slack].end_ns);
    // The same finding once more with no time at all.
    let mut timeless = data.report.findings[slack].clone();
    timeless.start_ns = 0;
    timeless.end_ns = 0;
    data.report.findings.push(timeless);
    let n = data.report.findings.len();
    let mut harness = harness(ViewerApp::with_loaded(data), 1400.0, 850.0);

    // A slice selected and zoomed in first.
    harness.state_mut().session_mut().unwrap().select_finding(0);
    harness.run_steps(2);
    assert!(harness.state().session().unwrap().view.selected.is_some());
    let (s0, e0) = visible(&harness);

    harness
        .state_mut()
        .session_mut()
        .unwrap()
        .select_finding(n - 1);
    harness.run_steps(2);
    let s = harness.state().session().unwrap();
    assert_eq!(visible(&harness), (s0, e0), "no time: the view stays");
    assert_eq!(s.view.selected, None);
    assert!(s.details().is_none());
    harness.get_by_label("recommendation");
    harness.get_by_label("memory of hpu:0");

    harness
        .state_mut()
        .session_mut()
        .unwrap()
        .select_finding(slack);
    harness.run_steps(2);
    let s = harness.state().session().unwrap();
    let (s1, e1) = visible(&harness);
    assert!(
        ((e1 - s1) - (e0 - s0)).abs() < 1.0,
        "the zoom is kept, not 50 ns"
    );
    let at = s.view.rel(peak);
    assert!(
        ((s1 + e1) / 2.0 - at).abs() < (e1 - s1) * 0.01,
        "centred on the peak"
    );
    assert!(s.memory_curve().is_some_and(|c| c.max > 0.0));
    // The memory counter track is on screen.
    let t = &s.data.timeline;
    let track = t
        .tracks
        .iter()
        .position(|tr| tr.name == "memory allocated hpu:0")
        .unwrap();
    let row = s.timeline.layout.track_rows(track as u32).start;
    let y = s.timeline.layout.rows[row].y - s.view.scroll_y;
    assert!(y >= 0.0 && y < s.timeline.tracks_rect.height(), "{y}");
    harness.get_by_label_contains("peak allocated");
    harness.get_by_label_contains("held at the peak");
}

/// Item 4: Enter in the search box steps to the next match and keeps the focus, so the next
/// Enter steps again; Shift+Enter steps back; the other matches are outlined.
#[test]
fn enter_in_the_search_box_steps_through_matches_and_keeps_focus() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    let search = |h: &Harness<'_, ViewerApp>| {
        h.get_all_by_role(eframe::egui::accesskit::Role::TextInput)
            .find(|n| !n.value().is_some_and(|v| v.contains("samples")))
            .expect("the search box")
            .rect()
            .center()
    };
    let at = search(&harness);
    click_at(&mut harness, at);
    for c in "aten::item".chars() {
        harness.event(Event::Text(c.to_string()));
    }
    harness.run_steps(2);
    let n = harness.state().session().unwrap().search.matches.len();
    assert!(n > 2);
    let current = |h: &Harness<'_, ViewerApp>| h.state().session().unwrap().search.current;
    for expected in [0, 1, 2] {
        harness.key_press(Key::Enter);
        harness.run_steps(2);
        assert_eq!(current(&harness), Some(expected));
    }
    harness.key_press_modifiers(Modifiers::SHIFT, Key::Enter);
    harness.run_steps(2);
    assert_eq!(current(&harness), Some(1));
    assert!(
        harness.ctx.text_edit_focused(),
        "the search box keeps focus"
    );
    let s = harness.state().session().unwrap();
    assert_eq!(s.view.selected, Some(s.search.matches[1]));
    assert_eq!(s.view.matches.len(), n);
    assert!(s.view.is_match(s.search.matches[0]));
}

/// Item 5: `?` lists every key the viewer handles and Escape closes the list; one press of W
/// (down and up in the same frame) zooms one step, S one step back.
#[test]
fn question_mark_lists_the_keys_and_a_press_of_w_zooms_one_step() {
    let mut harness = harness(app(TORCH_SYNC), 1200.0, 800.0);
    harness.key_press(Key::Questionmark);
    harness.run_steps(2);
    assert!(harness.state().show_keys);
    harness.get_by_label("Keys and mouse");
    for (keys, what) in steplens_viewer::timeline::KEYS {
        // `?` is also the top bar's button.
        assert!(harness.query_all_by_label(keys).next().is_some(), "{keys}");
        harness.get_by_label(what);
    }
    harness.key_press(Key::Escape);
    harness.run_steps(2);
    assert!(!harness.state().show_keys);
    assert!(harness.query_by_label("Keys and mouse").is_none());

    let (s0, e0) = visible(&harness);
    harness.key_press(Key::W);
    harness.run_steps(2);
    let (s1, e1) = visible(&harness);
    let step = steplens_viewer::state::KEY_ZOOM_STEP;
    assert!(
        ((e1 - s1) - (e0 - s0) * step).abs() < (e0 - s0) * 0.01,
        "one step: {} of {}",
        e1 - s1,
        e0 - s0
    );
    harness.key_press(Key::S);
    harness.run_steps(2);
    let (s2, e2) = visible(&harness);
    assert!(((e2 - s2) - (e0 - s0)).abs() < (e0 - s0) * 0.01);
}

/// Item 5: `steplens view --help` lists the same keys as the overlay.
#[test]
fn the_view_help_lists_every_key() {
    let main = std::fs::read_to_string("../src/main.rs").unwrap();
    // The `long_about` on the `View` variant: the last one before it.
    let view = main
        .split_once("\n    View {")
        .and_then(|(head, _)| head.rsplit_once("long_about"))
        .map(|(_, help)| help)
        .expect("a long_about on `steplens view`");
    for (keys, _) in steplens_viewer::timeline::KEYS {
        assert!(
            view.contains(keys),
            "`{keys}` missing from the view help:\n{view}"
        );
    }
}

/// Item 6: a host thread recorded with Python stacks is folded to a few rows, so the GPU
/// stream below it is on screen; a click on its name unfolds it and another folds it back;
/// the folded row shows (and hits) the deeper slices.
#[test]
fn deep_python_stacks_are_folded_and_the_device_stays_in_view() {
    let mut harness = harness(app(STACKS), 1400.0, 850.0);
    let (stream, host, folded) = {
        let s = harness.state().session().unwrap();
        let t = &s.data.timeline;
        let l = &s.timeline.layout;
        let stream = t.tracks.iter().position(|tr| tr.kind.is_device()).unwrap() as u32;
        let host = (0..t.tracks.len() as u32)
            .max_by_key(|&k| t.tracks[k as usize].max_depth)
            .unwrap();
        assert!(
            t.tracks[host as usize].max_depth >= 15,
            "a deep Python stack"
        );
        assert!(l.is_folded(host));
        // The deep frames' row (the outer frames', if any, comes first).
        let folded = l
            .track_rows(host)
            .find(|&r| matches!(l.rows[r].kind, RowKind::Folded { from: 1.., .. }))
            .expect("a folded row");
        (stream, host, folded)
    };
    let on_screen = |h: &Harness<'_, ViewerApp>, track: u32| {
        let s = h.state().session().unwrap();
        let row = s.timeline.layout.rows[s.timeline.layout.track_rows(track).start];
        row.y + row.h - s.view.scroll_y <= s.timeline.tracks_rect.height()
    };
    assert!(on_screen(&harness, stream), "the GPU stream is in view");
    // The folded row draws the deeper slices, and a click there selects the deepest one.
    let (pos, depth) = {
        let s = harness.state().session().unwrap();
        let w = &s.timeline;
        let r = *w
            .last_frame()
            .rects
            .iter()
            .find(|r| r.row as usize == folded && matches!(r.kind, RectKind::Slice(_)))
            .expect("slices in the folded row");
        let RectKind::Slice(id) = r.kind else {
            unreachable!()
        };
        let row = w.layout.rows[folded];
        let y = w.tracks_rect.top() + row.y - s.view.scroll_y + row.h / 2.0;
        (
            Pos2::new((r.x0 + r.x1) / 2.0, y),
            s.data.timeline.slices.depth[id as usize],
        )
    };
    let RowKind::Folded { from, .. } =
        harness.state().session().unwrap().timeline.layout.rows[folded].kind
    else {
        unreachable!()
    };
    assert!(from >= steplens_viewer::timeline::layout::FOLD_SHOWN);
    assert!(depth >= from);
    click_at(&mut harness, pos);
    let sel = harness.state().session().unwrap().view.selected.unwrap();
    let t = &harness.state().session().unwrap().data.timeline;
    assert!(t.slices.depth[sel as usize] >= from);
    // Click the thread's name to unfold it: every depth gets its row.
    let name_at = |h: &Harness<'_, ViewerApp>| {
        let s = h.state().session().unwrap();
        let row = s.timeline.layout.rows[s.timeline.layout.track_rows(host).start];
        Pos2::new(
            s.timeline.tracks_rect.left() - 100.0,
            s.timeline.tracks_rect.top() + row.y - s.view.scroll_y + row.h / 2.0,
        )
    };
    let pos = name_at(&harness);
    click_at(&mut harness, pos);
    {
        let s = harness.state().session().unwrap();
        let l = &s.timeline.layout;
        assert!(!l.is_folded(host));
        assert_eq!(
            l.track_rows(host).len(),
            s.data.timeline.tracks[host as usize].max_depth as usize + 1
        );
    }
    let pos = name_at(&harness);
    click_at(&mut harness, pos);
    assert!(
        harness
            .state()
            .session()
            .unwrap()
            .timeline
            .layout
            .is_folded(host)
    );
    // Where everything fits unfolded (a CPU trace in a tall window), nothing is folded.
    let tall = crate::harness(app(TORCH_SYNC), 1400.0, 1400.0);
    let s = tall.state().session().unwrap();
    let l = &s.timeline.layout;
    assert!(l.foldable.iter().any(|&f| f));
    assert!((0..l.foldable.len() as u32).all(|t| !l.is_folded(t)));
}

/// Item 7: no group is labelled by a bare pid or nothing: the Gaudi bridge's pid 9 is its
/// Synapse API thread, Kineto's pid -1 the profiler's overhead, the global async lane `async`.
#[test]
fn groups_get_names_from_their_metadata() {
    for (path, expected) in [
        (
            GAUDI,
            &["Synapse (pid 9)", "/device:HPU:0", "async: global"][..],
        ),
        (STACKS, &["overhead (pid -1)", "GPU 0", "async: global"][..]),
    ] {
        let harness = harness(app(path), 1000.0, 600.0);
        let names: Vec<String> = harness
            .state()
            .session()
            .unwrap()
            .timeline
            .layout
            .groups
            .iter()
            .map(|g| g.name.clone())
            .collect();
        for name in &names {
            assert!(
                !name.trim().is_empty() && name.trim().parse::<i64>().is_err(),
                "{path}: group {name:?} in {names:?}"
            );
        }
        for e in expected {
            assert!(
                names.iter().any(|n| n == e),
                "{path}: no {e:?} in {names:?}"
            );
        }
    }
}

/// Item 8: with four ranks loaded, each step starts at about the same time on every rank; the
/// ruler names it once instead of four overlapping times.
#[test]
fn step_labels_of_several_ranks_do_not_overlap() {
    let mut harness = harness(ranks_app(), 1400.0, 850.0);
    {
        let s = harness.state_mut().session_mut().unwrap();
        let steps = &s.data.timeline.steps;
        let (a, b) = (steps[2].start, steps[5].end());
        let (a, b) = (s.view.rel(a), s.view.rel(b));
        s.view.fit(a, b);
    }
    harness.run_steps(2);
    let s = harness.state().session().unwrap();
    let labels = s.timeline.step_labels();
    assert!(labels.len() >= 3, "{labels:?}");
    for w in labels.windows(2) {
        assert!(w[1].0.left() >= w[0].0.right(), "overlap: {labels:?}");
        assert_ne!(w[0].1, w[1].1, "a step named twice: {labels:?}");
    }
    // Issue 49: each names its rank, so no "step 3" appears twice in one view.
    let re = regex::Regex::new(r"^r[0-3] step \d+$").unwrap();
    assert!(labels.iter().all(|(_, l)| re.is_match(l)), "{labels:?}");
    let texts: std::collections::HashSet<&str> = labels.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(texts.len(), labels.len(), "{labels:?}");
    // With a slice of rank 2 selected, only rank 2's steps are named.
    let rank2 = {
        let t = &s.data.timeline;
        let source = t
            .sources
            .iter()
            .position(|src| src.path.contains("rank2"))
            .unwrap();
        t.steps
            .iter()
            .find(|st| st.source as usize == source)
            .unwrap()
            .slice
    };
    harness
        .state_mut()
        .session_mut()
        .unwrap()
        .select_slice(Some(rank2));
    harness.run_steps(2);
    let labels = harness.state().session().unwrap().timeline.step_labels();
    assert!(!labels.is_empty());
    assert!(
        labels.iter().all(|(_, l)| l.starts_with("r2 step ")),
        "{labels:?}"
    );
}

/// The 4-rank straggler run with the straggler finding clicked (docs/viewer-ranks.png).
#[test]
fn snapshot_ranks_straggler() {
    let mut harness = harness(ranks_app(), 1400.0, 850.0);
    let straggler = harness
        .state()
        .session()
        .unwrap()
        .data
        .report
        .findings
        .iter()
        .position(|f| f.kind == steplens_analysis::FindingKind::Straggler)
        .expect("a straggler finding");
    let group = harness
        .state()
        .session()
        .unwrap()
        .group_of(straggler)
        .unwrap();
    harness
        .get_by_label_contains(&format!("{}. ", group + 1))
        .click();
    harness.run_steps(2);
    harness.remove_cursor();
    harness.run_steps(2);
    snapshot(&mut harness, "ranks_straggler");
}

/// The 4-rank NCCL run of `samples/ranks/` (rank 2 the straggler): 25 findings, 24 of them the
/// same `aten::item` sync on every rank and step.
fn nccl_ranks_app() -> ViewerApp {
    let paths: Vec<PathBuf> = (0..4)
        .map(|r| {
            PathBuf::from(format!(
                "../samples/ranks/nccl_straggler/nccl_straggler_rank{r}.json.gz"
            ))
        })
        .collect();
    ViewerApp::with_loaded(load_now(&paths, None).expect("ranks load"))
}

/// The findings panel lists one entry per finding group (kind + place), ranked as the report
/// ranks groups, with the figures line the CLI's report writes; a group expands to its members,
/// a member click behaves as a finding click did, and a group click selects its largest member.
#[test]
fn findings_are_listed_once_per_group_and_a_group_expands_to_its_members() {
    let mut harness = harness(nccl_ranks_app(), 1400.0, 850.0);
    let (groups, findings, markdown) = {
        let s = harness.state().session().unwrap();
        (
            s.groups().to_vec(),
            s.data.report.findings.clone(),
            s.report_markdown(),
        )
    };
    assert_eq!(
        groups,
        s_groups(&harness),
        "the report's groups, in its order"
    );
    assert!(groups.len() >= 2 && groups.len() < findings.len());
    let sync_at = groups
        .iter()
        .position(|g| g.kind == steplens_analysis::FindingKind::SyncPoint)
        .unwrap();
    let sync = &groups[sync_at];
    assert!(sync.findings.len() >= 20 && sync.ranks == [0, 1, 2, 3]);
    // One entry, not one per step and rank.
    harness.get_by_label(&format!(
        "Findings ({} groups · {} findings)",
        groups.len(),
        findings.len()
    ));
    assert_eq!(
        harness
            .query_all_by_label_contains("host-device sync")
            .count(),
        1
    );
    harness.get_by_label(&format!(
        "{}. {}",
        sync_at + 1,
        findings[sync.findings[0]].title
    ));
    let straggler = groups
        .iter()
        .position(|g| g.kind == steplens_analysis::FindingKind::Straggler)
        .unwrap();
    let lone = &findings[groups[straggler].findings[0]];
    harness.get_by_label(&format!(
        "{}. {} - {}",
        straggler + 1,
        lone.title,
        lone.figures()
    ));
    // The figures line says what the CLI's report says of the group.
    let figures = sync.figures();
    assert!(figures.starts_with(&format!("in {} steps on ranks 0–3 · saves ", sync.steps)));
    assert!(markdown.contains(&format!("({figures})")), "{markdown}");
    let member = |i: usize| steplens_viewer::finding::member_label(&findings[sync.findings[i]]);
    assert!(harness.query_by_label(&member(2)).is_none(), "collapsed");

    // Expand and click the third member.
    harness.get_by_label(&format!("▸ {figures}")).click();
    harness.run_steps(2);
    harness.get_by_label(&format!("▾ {figures}"));
    harness.get_by_label(&member(0));
    harness.get_by_label(&member(2)).click();
    harness.run_steps(2);
    let s = harness.state().session().unwrap();
    let third = sync.findings[2];
    assert_eq!(s.active_finding, Some(third));
    let evidence = evidence_slices(&findings[third]);
    assert!(!evidence.is_empty());
    assert_eq!(s.view.highlight, Highlight::slices(evidence.clone()));
    assert_eq!(s.view.selected, Some(evidence[0]));
    assert_eq!(
        s.details().map(|d| d.id),
        Some(evidence[0]),
        "Details filled"
    );
    let t = &s.data.timeline;
    for &id in &evidence {
        let (a, b) = (
            s.view.rel(t.slices.start[id as usize]),
            s.view.rel(t.slices.end(id)),
        );
        assert!(s.view.visible.contains_range(a, b), "evidence in view");
    }

    // The group's own entry selects its largest member.
    harness
        .get_by_label(&format!(
            "{}. {}",
            sync_at + 1,
            findings[sync.findings[0]].title
        ))
        .click();
    harness.run_steps(2);
    assert_eq!(
        harness.state().session().unwrap().active_finding,
        Some(sync.findings[0])
    );
    // Collapsing hides the members again.
    harness.get_by_label(&format!("▾ {figures}")).click();
    harness.run_steps(2);
    assert!(harness.query_by_label(&member(2)).is_none());
}

fn s_groups(harness: &Harness<'_, ViewerApp>) -> Vec<steplens_analysis::finding::FindingGroup> {
    harness
        .state()
        .session()
        .unwrap()
        .data
        .report
        .groups()
        .into_owned()
}

/// The rank cell of the top row of the Steps tab (the label left of the top-most step name).
fn top_step_rank(harness: &Harness<'_, ViewerApp>) -> String {
    // A plain label's text is its accesskit value.
    let step = harness
        .query_all_by_label_contains("ProfilerStep#")
        .filter(|n| {
            n.accesskit_node()
                .label()
                .or_else(|| n.value())
                .is_some_and(|l| l.starts_with("ProfilerStep#"))
        })
        .map(|n| n.rect())
        .min_by(|a, b| a.top().total_cmp(&b.top()))
        .expect("a step row");
    (0..4)
        .map(|r| r.to_string())
        .find(|r| {
            harness.query_all_by_label(r).any(|n| {
                (n.rect().center().y - step.center().y).abs() < 2.0
                    && n.rect().right() <= step.left()
            })
        })
        .expect("a rank cell on the top row")
}

/// A multi-rank run's Steps tab has a rank column, rows grouped by rank then start (the
/// default order), sortable like the others; a single trace has none.
#[test]
fn the_steps_tab_has_a_rank_column_ordered_by_rank_then_start() {
    let mut harness = harness(nccl_ranks_app(), 1400.0, 850.0);
    harness.get_by_label("Steps").click();
    harness.run_steps(2);
    harness.get_by_label("rank ▴");
    let s = harness.state().session().unwrap();
    let steps = &s.data.report.steps;
    assert!(steps.iter().all(|st| st.rank.is_some()));
    let order = steplens_viewer::tables::steps_order(steps, s.tables.steps);
    let keys: Vec<(i64, i64)> = order
        .iter()
        .map(|&i| (steps[i].rank.unwrap(), steps[i].start_ns))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:?}");
    assert_eq!(keys.first().map(|k| k.0), Some(0));
    assert_eq!(keys.last().map(|k| k.0), Some(3));
    assert_eq!(top_step_rank(&harness), "0");
    harness.get_by_label("rank ▴").click();
    harness.run_steps(2);
    harness.get_by_label("rank ▾");
    assert_eq!(top_step_rank(&harness), "3");

    let mut single = crate::harness(app(TORCH_SYNC), 1200.0, 800.0);
    single.get_by_label("Steps").click();
    single.run_steps(2);
    single.get_by_label("step ▴");
    assert!(single.query_by_label_contains("rank").is_none());
}

/// The README's and docs/viewer.md's screenshots are the snapshots above, so they show the
/// viewer as it is: re-copy them when a snapshot changes.
#[test]
fn docs_screenshots_are_the_current_snapshots() {
    for (doc, snapshot) in [
        ("viewer-gaudi.png", "gaudi_main_view.png"),
        ("viewer-ranks.png", "ranks_straggler.png"),
    ] {
        let doc_bytes = std::fs::read(Path::new("../docs").join(doc)).unwrap();
        let snap_bytes = std::fs::read(Path::new("tests/snapshots").join(snapshot)).unwrap();
        assert!(
            doc_bytes == snap_bytes,
            "docs/{doc} differs from viewer/tests/snapshots/{snapshot}: cp viewer/tests/snapshots/{snapshot} docs/{doc}"
        );
    }
}

/// The rects of slices `ids` on screen: each one's row is its own (no fold hides it, its
/// group is open) and lies inside the track area, and its time inside the visible range.
fn assert_on_screen(harness: &Harness<'_, ViewerApp>, ids: &[u32]) {
    let s = harness.state().session().unwrap();
    let t = &s.data.timeline;
    let l = &s.timeline.layout;
    let area = s.timeline.tracks_rect;
    for &id in ids {
        let (track, depth) = (t.slices.track[id as usize], t.slices.depth[id as usize]);
        let r = l
            .lane_row(track, depth)
            .unwrap_or_else(|| panic!("slice {id}: its group is collapsed"));
        let row = l.rows[r];
        assert_eq!(
            row.kind,
            RowKind::Lane { track, depth },
            "slice {id} ({}) is in a folded row",
            t.slice_name(id)
        );
        let top = area.top() + row.y - s.view.scroll_y;
        assert!(
            top >= area.top() && top + row.h <= area.bottom(),
            "slice {id} ({}) row at {top}..{} outside the track area {area:?}",
            t.slice_name(id),
            top + row.h
        );
        let (a, b) = (
            s.view.rel(t.slices.start[id as usize]),
            s.view.rel(t.slices.end(id)),
        );
        assert!(s.view.visible.contains_range(a, b), "slice {id} in view");
    }
}

/// Issue 49: on the 4-rank straggler run each rank's main thread starts with outer Python
/// frames (`<module>`, `spawn_main`, `_main`, `_bootstrap`); they are folded into one row, and
/// a click on the straggler (the top finding) brings every evidence slice on screen, in a row
/// of its own.
#[test]
fn outer_python_frames_fold_and_the_straggler_evidence_comes_on_screen() {
    let mut harness = harness(ranks_app(), 1400.0, 850.0);
    {
        let s = harness.state().session().unwrap();
        let t = &s.data.timeline;
        let l = &s.timeline.layout;
        let mains: Vec<u32> = (0..t.tracks.len() as u32)
            .filter(|&k| l.outer[k as usize] > 0)
            .collect();
        assert_eq!(mains.len(), 4, "one main thread per rank");
        for &k in &mains {
            assert!(l.is_folded(k));
            let first = l.rows[l.track_rows(k).start].kind;
            assert_eq!(
                first,
                RowKind::Folded {
                    track: k,
                    from: 0,
                    to: l.outer[k as usize] - 1
                }
            );
            let outer: Vec<&str> = (0..l.outer[k as usize])
                .map(|d| t.slice_name(s.data.index.lane(k, d)[0]))
                .collect();
            assert!(outer.iter().any(|n| n.ends_with("<module>")), "{outer:?}");
            assert!(outer.iter().any(|n| n.ends_with("spawn_main")), "{outer:?}");
        }
    }
    harness.get_by_label_contains("1. ").click();
    harness.run_steps(2);
    let evidence = {
        let s = harness.state().session().unwrap();
        let f = &s.data.report.findings[s.active_finding.expect("a finding selected")];
        assert_eq!(f.kind, steplens_analysis::FindingKind::Straggler);
        evidence_slices(f)
    };
    assert!(!evidence.is_empty());
    assert_on_screen(&harness, &evidence);
}

/// A finding whose evidence sits in a folded row (the torch sample's syncs, deep in its Python
/// stack, in a window too short to unfold it) unfolds that track and scrolls to the rows.
#[test]
fn a_finding_click_unfolds_the_rows_that_hide_its_evidence() {
    let mut harness = harness(app(TORCH_SYNC), 1000.0, 640.0);
    let hidden = {
        let s = harness.state().session().unwrap();
        let f = &s.data.report.findings[s.groups()[0].findings[0]];
        let t = &s.data.timeline;
        let l = &s.timeline.layout;
        evidence_slices(f)
            .into_iter()
            .filter(|&id| {
                let r = l.lane_row(t.slices.track[id as usize], t.slices.depth[id as usize]);
                r.is_some_and(|r| matches!(l.rows[r].kind, RowKind::Folded { .. }))
            })
            .count()
    };
    assert!(hidden > 0, "the evidence starts in a folded row");
    harness.get_by_label_contains("1. ").click();
    harness.run_steps(2);
    let evidence = {
        let s = harness.state().session().unwrap();
        evidence_slices(&s.data.report.findings[s.active_finding.unwrap()])
    };
    assert_on_screen(&harness, &evidence);
}

/// Issue 49: a finding's title wraps in the list (no "…and com…"), and a second click on the
/// selected entry keeps it selected instead of landing on the entry before it.
#[test]
fn finding_titles_wrap_and_a_second_click_keeps_the_selection() {
    let mut harness = harness(ranks_app(), 1400.0, 850.0);
    let (first, second) = {
        let s = harness.state().session().unwrap();
        let groups = s.groups();
        (groups[0].findings[0], groups[1].findings[0])
    };
    let title = harness.state().session().unwrap().data.report.findings[first]
        .title
        .clone();
    let row_h = harness.get_by_label("Fit all").rect().height();
    let rect = harness.get_by_label_contains(&format!("1. {title}")).rect();
    assert!(
        rect.height() > 1.5 * row_h,
        "the long title wraps: {rect:?}"
    );
    assert!(rect.right() <= 1400.0, "inside the window: {rect:?}");
    // Select the first, then click the second twice at the same place.
    let one = harness.get_by_label_contains("1. ").rect().center();
    click_at(&mut harness, one);
    assert_eq!(
        harness.state().session().unwrap().active_finding,
        Some(first)
    );
    let at = harness.get_by_label_contains("2. ").rect().center();
    click_at(&mut harness, at);
    assert_eq!(
        harness.state().session().unwrap().active_finding,
        Some(second)
    );
    click_at(&mut harness, at);
    assert_eq!(
        harness.state().session().unwrap().active_finding,
        Some(second),
        "a second click keeps the finding selected"
    );
}

/// Issue 49's small ones: the ruler's last time label is not cut at the right edge, and counts
/// of one read "1 step", "1 match" in the singular.
#[test]
fn ruler_labels_fit_and_counts_of_one_are_singular() {
    let mut harness = harness(app(CUDA), 1400.0, 700.0);
    {
        let s = harness.state().session().unwrap();
        let area = s.timeline.tracks_rect;
        let labels = s.timeline.ruler_labels();
        assert!(labels.len() >= 3, "{labels:?}");
        for (rect, text) in labels {
            assert!(
                rect.left() >= area.left() - 0.5 && rect.right() <= area.right() + 0.5,
                "{text} at {rect:?} outside {area:?}"
            );
        }
        assert_eq!(s.data.report.steps.len(), 1);
    }
    harness.get_by_label_contains("· 1 step");
    assert!(harness.query_by_label_contains("1 steps").is_none());
    let name = {
        let s = harness.state_mut().session_mut().unwrap();
        let t = &s.data.timeline;
        // A name that occurs exactly once.
        let mut seen = std::collections::HashMap::new();
        for &n in &t.slices.name {
            *seen.entry(n).or_insert(0) += 1;
        }
        let once = t
            .slices
            .name
            .iter()
            .find(|n| seen[n] == 1)
            .copied()
            .unwrap();
        t.strings.get(once).to_owned()
    };
    {
        let s = harness.state_mut().session_mut().unwrap();
        s.search.query = regex::escape(&name);
        s.search.regex = true;
        s.run_search();
        assert_eq!(s.search.matches.len(), 1);
    }
    harness.run_steps(2);
    harness.get_by_label("1 match");
    assert_eq!(steplens_viewer::count(1usize, "step", "steps"), "1 step");
    assert_eq!(steplens_viewer::count(0u64, "step", "steps"), "0 steps");
}
