//! The findings' and details panels' text and sizes, the keys and their help, deep Python stacks
//! folded, groups' names and step labels, the ranks snapshot.

use super::*;

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
