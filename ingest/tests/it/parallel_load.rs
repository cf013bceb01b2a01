//! Several independent traces load in parallel (one per core) and are laid end to end; the
//! result must be the Timeline one builder makes from the same inputs in the same order. Names
//! and categories are compared as text (each part interns its own), and build-time repair
//! warnings are left out: they now stay with their own input rather than going to the first.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};

use steplens_ingest::builder::TimelineBuilder;
use steplens_ingest::model::Timeline;
use steplens_ingest::{LoadOptions, add_file, load_many};

fn sample(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples")
        .join(rel)
}

fn sequential(paths: &[&Path]) -> Timeline {
    let mut builder = TimelineBuilder::default();
    for p in paths {
        add_file(&mut builder, p, &LoadOptions::default(), None).unwrap();
    }
    builder.finish()
}

/// Everything a report reads, with ids resolved to text.
fn digest(t: &Timeline) -> Vec<String> {
    let mut out = Vec::new();
    for s in &t.sources {
        out.push(format!(
            "source {} {} {} {} {:?} {:?}",
            s.path, s.format, s.events, s.bytes, s.rank, s.world_size
        ));
    }
    for tr in &t.tracks {
        out.push(format!(
            "track {} {:?} {:?} {:?} {} {} {:?} {:?} {}",
            tr.source,
            tr.pid,
            tr.tid,
            tr.kind,
            tr.name,
            tr.process_name,
            tr.sort_key,
            tr.slices,
            tr.max_depth
        ));
    }
    let s = &t.slices;
    for i in 0..s.len() {
        out.push(format!(
            "slice {} {} {} {} {} {} {} {:?}",
            s.start[i],
            s.dur[i],
            s.track[i],
            t.strings.get(s.name[i]),
            t.categories.name(s.cat[i]),
            s.depth[i],
            s.parent[i],
            s.args[i]
        ));
    }
    for f in &t.flows {
        out.push(format!(
            "flow {} {} {} {}",
            f.id,
            t.categories.name(f.cat),
            f.from,
            f.to
        ));
    }
    for st in &t.steps {
        out.push(format!(
            "step {} {} {} {} {} {}",
            st.name, st.start, st.dur, st.track, st.slice, st.source
        ));
    }
    let i = &t.instants;
    for k in 0..i.len() {
        out.push(format!(
            "instant {} {} {}",
            i.ts[k],
            i.track[k],
            t.strings.get(i.name[k])
        ));
    }
    let c = &t.counters;
    for k in 0..c.len() {
        out.push(format!("counter {} {} {}", c.track[k], c.ts[k], c.value[k]));
    }
    out.push(format!("device {:?}", t.device));
    out.push(format!("clock {:?}", t.clock_of));
    out.push(format!("stats {:?}", t.stats));
    out
}

fn assert_same(rels: &[&str]) {
    let paths: Vec<PathBuf> = rels.iter().map(|r| sample(r)).collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let parallel = load_many(&refs, &LoadOptions::default(), None).unwrap();
    let one_builder = sequential(&refs);
    if let Err(e) = common::check_invariants(&parallel) {
        panic!("{rels:?}: {e}");
    }
    let (a, b) = (digest(&parallel), digest(&one_builder));
    if let Some((x, y)) = a.iter().zip(&b).find(|(x, y)| x != y) {
        panic!("{rels:?}: first difference\nparallel:    {x}\none builder: {y}");
    }
    assert_eq!(a.len(), b.len(), "{rels:?}");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y, "{rels:?}");
    }
}

#[test]
fn four_cpu_ranks_match_one_builder() {
    assert_same(&[
        "ci-aa/ddp_rank2.json.gz",
        "ci-aa/ddp_rank0.json.gz",
        "ci-aa/ddp_rank1.json.gz",
        "ci-aa/ddp_rank3.json.gz",
    ]);
}

#[test]
fn gpu_traces_with_flows_and_devices_match_one_builder() {
    assert_same(&[
        "kineto-compat/pt2_x.json.gz",
        "kineto-compat/pt1_8.json.gz",
        "advice/gpu_data_parallel.json.gz",
        "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    ]);
}

#[test]
fn inputs_that_bind_each_other_still_load_into_one_builder() {
    // A Synapse TEF capture is aligned to the bridge trace's clock: not independent.
    assert_same(&[
        "gaudi/train_hpu.bridge.json.gz",
        "gaudi/train_hpu.tef.json.gz",
    ]);
    assert_same(&["gaudi/train_hpu.bridge.json.gz", "gaudi/train_hpu.hw.csv"]);
}
