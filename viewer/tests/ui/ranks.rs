//! Finding groups across ranks, the Steps tab's rank column, the docs' screenshots, outer frames
//! folded and unfolded for a finding's evidence, wrapped finding titles, ruler labels.

use super::*;

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

/// A directory opens as the traces in it, as on the command line: the four ranks of
/// `samples/ranks/nccl_straggler/` (its README and truth file are skipped and said), and the load
/// options given to the app reach the load (a step marker no annotation matches leaves no step).
#[test]
fn a_directory_opens_as_its_traces_with_the_apps_load_options() {
    let dir = PathBuf::from("../samples/ranks/nccl_straggler");
    let files = load_now(std::slice::from_ref(&dir), None).expect("the directory loads");
    let by_files = nccl_ranks_app();
    let data = &by_files.session().unwrap().data;
    assert_eq!(files.timeline.sources.len(), 4);
    assert_eq!(files.report.steps, data.report.steps);
    assert_eq!(files.paths, std::slice::from_ref(&dir));
    let skipped = files.skipped.as_deref().unwrap_or_default();
    assert!(
        skipped.starts_with("skipped 2 file(s)") && skipped.contains("truth.json"),
        "{skipped}"
    );
    let no_steps = steplens_ingest::LoadOptions {
        step_marker: Some(regex::Regex::new("^no such annotation$").unwrap()),
        ..steplens_ingest::LoadOptions::default()
    };
    let marked = steplens_viewer::load_with(&[dir], &no_steps, None).expect("loads");
    assert!(marked.timeline.steps.is_empty());
    assert!(!files.timeline.steps.is_empty());
}
