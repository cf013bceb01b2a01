//! Navigation, selection, search, loading and errors, folding a group, the PNG snapshots of the
//! main views, flows, a kernel's figures, rank groups and the Report menu.

use super::*;

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
