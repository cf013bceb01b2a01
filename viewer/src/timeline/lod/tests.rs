//! Unit tests of `lod`, kept beside it so the module reads as its logic alone.
use super::frame::{walk_level, walk_slices};
use super::index::gallop;
use super::*;
use crate::timeline::layout::Layout;
use steplens_ingest::TimelineBuilder;
use steplens_ingest::model::{ArgsRef, LaneId, SliceId, Timeline};

/// One host track: 1,000 slices of 10 ns every 100 ns, then one wide slice.
fn timeline() -> Timeline {
    let mut b = TimelineBuilder::default();
    let track = b.track(0, LaneId::Int(1), LaneId::Int(1));
    let name = b.intern("op");
    let cat = b.intern_cat("cpu_op");
    for k in 0..1000 {
        b.push_slice(track, k * 100, 10, name, cat, ArgsRef::NONE);
    }
    b.push_slice(track, 100_000, 50_000, name, cat, ArgsRef::NONE);
    b.finish()
}

fn viewport(start: f64, end: f64, width: f32) -> Viewport {
    Viewport {
        origin: 0,
        start,
        end,
        x0: 0.0,
        width,
    }
}

fn frame(t: &Timeline, vp: &Viewport) -> Frame {
    let index = LaneIndex::new(t);
    let layout = Layout::new(t);
    let mut f = Frame::default();
    build_frame(t, &index, &layout, 0..layout.rows.len(), vp, &mut f);
    f
}

#[test]
fn index_lists_every_slice_once_in_start_order() {
    let t = timeline();
    let index = LaneIndex::new(&t);
    let lane = index.lane(0, 0);
    assert_eq!(lane.len(), 1001);
    assert!(
        lane.windows(2)
            .all(|w| t.slices.start[w[0] as usize] <= t.slices.start[w[1] as usize])
    );
    assert!(index.lane(0, 1).is_empty());
    assert!(index.lane(7, 0).is_empty());
}

#[test]
fn zoomed_out_slices_merge_into_one_run_and_the_wide_one_stays() {
    let t = timeline();
    // 150 µs on 150 px: 1 ns… each small slice is 0.01 px.
    let f = frame(&t, &viewport(0.0, 150_000.0, 150.0));
    let runs: Vec<_> = f
        .rects
        .iter()
        .filter(|r| matches!(r.kind, RectKind::Run { .. }))
        .collect();
    assert_eq!(runs.len(), 1, "{:?}", f.rects);
    let RectKind::Run { count, .. } = runs[0].kind else {
        unreachable!()
    };
    assert_eq!(count, 1000);
    assert!(
        f.rects
            .iter()
            .any(|r| r.kind == RectKind::Slice(1000) && (r.x1 - r.x0 - 50.0).abs() < 0.5)
    );
    assert!(f.steps <= 2 * 150 + 2, "steps {}", f.steps);
}

#[test]
fn zoomed_in_slices_are_their_own_rectangles_and_offscreen_ones_are_culled() {
    let t = timeline();
    let f = frame(&t, &viewport(1_000.0, 2_000.0, 1000.0));
    let ids: Vec<SliceId> = f
        .rects
        .iter()
        .map(|r| match r.kind {
            RectKind::Slice(id) => id,
            RectKind::Run { .. } => panic!("no run expected"),
        })
        .collect();
    assert_eq!(ids, (10..20).collect::<Vec<_>>());
}

#[test]
fn a_slice_reaching_into_the_view_from_the_left_is_drawn() {
    let t = timeline();
    let f = frame(&t, &viewport(120_000.0, 121_000.0, 100.0));
    assert_eq!(f.rects.len(), 1);
    assert_eq!(f.rects[0].kind, RectKind::Slice(1000));
    assert!(f.rects[0].x0 <= 0.0 && f.rects[0].x1 >= 100.0);
}

#[test]
fn the_coarse_search_agrees_with_a_plain_binary_search() {
    let t = timeline();
    let index = LaneIndex::new(&t);
    let lane = index.lane_ref(0, 0);
    let starts = &t.slices.start;
    for from in [0, 1, 31, 32, 33, 500, 999, 1000, 1001] {
        for target in [
            -5,
            0,
            1,
            99,
            100,
            3_150,
            50_000,
            99_901,
            100_000,
            100_001,
            1 << 40,
        ] {
            let want = from
                + lane.ids[from.min(lane.ids.len())..]
                    .partition_point(|&id| starts[id as usize] < target);
            assert_eq!(
                lane.first_at_or_after(from, target),
                want,
                "{from} {target}"
            );
        }
    }
    assert_eq!(gallop(&[], 3), 0);
    assert_eq!(gallop(&[1, 2, 3, 4, 5], 4), 3);
    assert_eq!(gallop(&[1, 2, 3, 4, 5], 9), 5);
}

#[test]
fn merged_levels_draw_what_the_slice_walk_draws() {
    // 20,000 disjoint slices, lengths from 5 ns to 2 ms, gaps from 0 to 50 µs.
    let mut b = TimelineBuilder::default();
    let track = b.track(0, LaneId::Int(1), LaneId::Int(1));
    let name = b.intern("op");
    let cat = b.intern_cat("cpu_op");
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut t = 0i64;
    for _ in 0..20_000 {
        let dur = if next(100) == 0 {
            5 + next(2_000_000)
        } else {
            5 + next(3_000)
        } as i64;
        b.push_slice(track, t, dur, name, cat, ArgsRef::NONE);
        t += dur + next(50_000) as i64 * i64::from(next(3) == 0);
    }
    let t = b.finish();
    let index = LaneIndex::new(&t);
    let lane = index.lane_ref(0, 0);
    assert!(!lane.levels.is_empty());
    let span = t.time_range().map(|(a, b)| (b - a) as f64).unwrap();
    for (zoom, offset) in [(1.0, 0.0), (0.3, 0.2), (0.05, 0.5), (0.01, 0.7)] {
        let vp = viewport(span * offset, span * (offset + zoom), 1000.0);
        let px_ns = 1.0 / vp.scale();
        let Some(level) = lane.levels.iter().rev().find(|l| l.res as f64 <= px_ns) else {
            continue;
        };
        let (mut a, mut b) = (Frame::default(), Frame::default());
        walk_level(lane, level, 0, &vp, &mut a);
        walk_slices(lane, 0, &vp, &mut b);
        let wide = |f: &Frame| -> Vec<SliceId> {
            f.rects
                .iter()
                .filter_map(|r| match r.kind {
                    RectKind::Slice(id) if r.x1 - r.x0 >= 1.0 => Some(id),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(wide(&a), wide(&b), "zoom {zoom}");
        let count = |f: &Frame| -> u32 {
            f.rects
                .iter()
                .map(|r| match r.kind {
                    RectKind::Slice(_) => 1,
                    RectKind::Run { count, .. } => count,
                })
                .sum()
        };
        let (ca, cb) = (count(&a), count(&b));
        assert!(ca.abs_diff(cb) <= 4, "zoom {zoom}: {ca} vs {cb}");
        assert!(a.rects.len() <= 8 * 1000 + 2);
    }
}

#[test]
fn instants_are_drawn_at_most_once_per_pixel_column() {
    let mut b = TimelineBuilder::default();
    let track = b.track(0, LaneId::Int(1), LaneId::Int(1));
    let name = b.intern("mark");
    let cat = b.intern_cat("cpu_op");
    b.push_slice(track, 0, 10_000, name, cat, ArgsRef::NONE);
    for k in 0..10_000 {
        b.push_instant(track, k, name, cat, b't', ArgsRef::NONE);
    }
    let t = b.finish();
    let f = frame(&t, &viewport(0.0, 10_000.0, 100.0));
    assert!(f.instants.len() <= 101, "{}", f.instants.len());
    assert!(f.instants.len() >= 99, "{}", f.instants.len());
    let zoomed = frame(&t, &viewport(0.0, 50.0, 100.0));
    assert_eq!(zoomed.instants.len(), 51);
}

#[test]
fn hit_finds_the_slice_under_the_pointer() {
    let t = timeline();
    let index = LaneIndex::new(&t);
    assert_eq!(hit(&t, index.lane(0, 0), 503, 507), Some(5));
    assert_eq!(hit(&t, index.lane(0, 0), 120_000, 120_001), Some(1000));
    assert_eq!(hit(&t, index.lane(0, 0), 50, 60), None);
}
