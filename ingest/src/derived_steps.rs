//! Steps for runs that have no `ProfilerStep#N`: a Synapse-only Gaudi profile (TEF, HW CSV,
//! `.hltv`) records no torch annotations, but a training loop launches the same set of graphs
//! (recipes) every iteration, and that repetition is on the device timeline.
//!
//! The units are the host's graph launches (`synLaunch*` calls) where the input has host lanes,
//! else bursts of device work separated by at least [`BURST_GAP_NS`] with every engine idle.
//! Each unit is keyed by the recipe it ran (the first device slice at or after it: its
//! `recipe id` / `recipeId` / `graph name` / `recipeName` arg, else its name). The launch
//! sequence's period is the lag at which keys most often repeat; the launches are then aligned to
//! the loop's template repeated (an edit distance that wraps around), so a recompiled slot, a
//! new recipe added to one iteration (launched once or more) or a slot left out moves no
//! iteration boundary. Iteration `j` runs from the start of its first unit to the start of the
//! next iteration's; the last iteration the capture starts is not whole, and is no step. Such
//! steps are named `Iteration#j` and marked derived.

use rustc_hash::FxHashMap;

use crate::model::{EngineClass, SliceId, Step, Timeline, TrackId, TrackKind};

/// Device work separated by at least this long with every engine idle is another launch.
pub(crate) const BURST_GAP_NS: i64 = 100_000;

/// Recipe args, in the spellings of the Synapse TEF and the bridge.
const RECIPE_ARGS: &[&str] = &["recipe id", "recipeId", "graph name", "recipeName"];

/// One launch (or burst): where it starts, the slice that shows it, and its recipe key.
struct Unit {
    start: i64,
    slice: SliceId,
    track: TrackId,
    key: String,
}

/// Derived steps for every input on its own clock that has device work and no steps.
pub(crate) fn derive(t: &Timeline) -> Vec<Step> {
    let mut out = Vec::new();
    for source in 0..t.sources.len() as u16 {
        let own_clock = t.clock_of.get(source as usize).is_none_or(|&c| c == source);
        let has_steps = t
            .steps
            .iter()
            .any(|s| s.source == source || t.step_source(s.source) == source);
        if own_clock && !has_steps {
            out.extend(derive_for(t, source));
        }
    }
    out
}

fn is_graph_engine(class: &EngineClass) -> bool {
    matches!(
        class,
        EngineClass::Mme | EngineClass::Tpc | EngineClass::Dma | EngineClass::Rotator
    )
}

fn derive_for(t: &Timeline, source: u16) -> Vec<Step> {
    // Device work of this input: (start, end, slice, track), sorted by start.
    let mut device: Vec<(i64, i64, SliceId, TrackId)> = Vec::new();
    let mut launches: Vec<(i64, SliceId, TrackId)> = Vec::new();
    for (track_id, track) in t.tracks.iter().enumerate() {
        if track.source != source {
            continue;
        }
        match &track.kind {
            TrackKind::DeviceEngine { class, .. } if is_graph_engine(class) => {
                for i in track.slices.clone() {
                    if t.slice_class(i).is_device_work() {
                        let start = t.slices.start[i as usize];
                        device.push((start, t.slices.end(i), i, track_id as TrackId));
                    }
                }
            }
            TrackKind::HostThread => {
                for i in track.slices.clone() {
                    if t.slice_name(i).starts_with("synLaunch") {
                        launches.push((t.slices.start[i as usize], i, track_id as TrackId));
                    }
                }
            }
            _ => {}
        }
    }
    if device.is_empty() {
        return Vec::new();
    }
    device.sort_unstable();
    launches.sort_unstable();
    let launch_recipes: Vec<Option<String>> = launches
        .iter()
        .map(|&(_, slice, _)| recipe_arg(t, slice))
        .collect();
    let units = if launches.len() >= 2 && launch_recipes.iter().all(Option::is_some) {
        // The launch call names its recipe (Synapse TEF `recipe id` / `graph name`).
        launches
            .iter()
            .zip(launch_recipes)
            .map(|(&(start, slice, track), key)| Unit {
                start,
                slice,
                track,
                key: key.unwrap_or_default(),
            })
            .collect()
    } else {
        match recipe_runs(t, &device) {
            // The stream runs graphs in launch order: the k-th run is the k-th launch.
            Some(runs) if runs.len() == launches.len() => runs
                .into_iter()
                .zip(&launches)
                .map(|(run, &(start, slice, track))| Unit {
                    start,
                    slice,
                    track,
                    key: run.key,
                })
                .collect(),
            Some(runs) => runs,
            None => bursts(t, &device),
        }
    };
    let Some(boundaries) = loop_boundaries(&units) else {
        return Vec::new();
    };
    // Iteration j runs from boundary j to boundary j + 1: the last launch of the loop's first
    // recipe starts no iteration the capture shows whole.
    boundaries
        .windows(2)
        .enumerate()
        .map(|(j, w)| {
            let unit = &units[w[0]];
            let end = units[w[1]].start;
            Step {
                name: format!("Iteration#{j}"),
                number: Some(j as i64),
                start: unit.start,
                dur: end.saturating_sub(unit.start).max(0),
                track: unit.track,
                slice: unit.slice,
                source,
                derived: true,
            }
        })
        .collect()
}

/// The recipe a slice names in its args.
fn recipe_arg(t: &Timeline, slice: SliceId) -> Option<String> {
    RECIPE_ARGS
        .iter()
        .find_map(|key| t.arg_str(slice, key).filter(|v| !v.is_empty()))
}

/// The graph a Synapse node name belongs to (`g_2_l1_fc1_gemm_0` → `g_2`): the recipe, for
/// formats that keep no recipe per slice (the HW CSV).
fn graph_of(name: &str) -> Option<&str> {
    let local = graph_local_name(name);
    (local.len() < name.len()).then(|| &name[..name.len() - local.len() - 1])
}

/// Consecutive device slices (by start) of one recipe form one run of that recipe. The recipe is
/// the slice's recipe arg, else the graph prefix of its node name; `None` when the slices carry
/// neither.
fn recipe_runs(t: &Timeline, device: &[(i64, i64, SliceId, TrackId)]) -> Option<Vec<Unit>> {
    let mut runs: Vec<Unit> = Vec::new();
    for &(start, _, slice, track) in device {
        let Some(key) =
            recipe_arg(t, slice).or_else(|| graph_of(t.slice_name(slice)).map(str::to_owned))
        else {
            continue;
        };
        if runs.last().is_none_or(|r| r.key != key) {
            runs.push(Unit {
                start,
                slice,
                track,
                key,
            });
        }
    }
    (!runs.is_empty()).then_some(runs)
}

/// A Synapse node name without its graph prefix (`g_2_l1_fc1_gemm_0` → `l1_fc1_gemm_0`): a
/// recompiled graph renames its nodes with the new graph's index, and its burst is still the
/// same slot of the loop.
fn graph_local_name(name: &str) -> &str {
    name.strip_prefix("g_")
        .and_then(|rest| {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            (digits > 0).then(|| rest[digits..].strip_prefix('_'))?
        })
        .unwrap_or(name)
}

/// Bursts of device work separated by [`BURST_GAP_NS`] of all-idle time, keyed by the name of
/// their first slice without its graph prefix.
fn bursts(t: &Timeline, device: &[(i64, i64, SliceId, TrackId)]) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    let mut covered_to = i64::MIN;
    for &(start, end, slice, track) in device {
        if units.is_empty() || start.saturating_sub(covered_to) >= BURST_GAP_NS {
            units.push(Unit {
                start,
                slice,
                track,
                key: graph_local_name(t.slice_name(slice)).to_owned(),
            });
        }
        covered_to = covered_to.max(end);
    }
    units
}

/// The unit indexes where iterations start, and where the last one ends. The period `p` is
/// [`period_of`] the launch sequence; the loop's template is the most common run of `p` keys
/// that starts at the earliest launch of a loop recipe (a key launched at least half as often as
/// the most launched one). The launch sequence is then aligned to the template repeated
/// ([`align_to_loop`]): a recompiled slot (a recipe seen in no other slot) stands in for the
/// template's recipe there, a graph added in an iteration (fewer new launches in a row than the
/// template has slots) only makes that iteration longer, and a slot left out is a deletion, so
/// a recompile shifts no later iteration and merges none. `None` when no recipe repeats.
fn loop_boundaries(units: &[Unit]) -> Option<Vec<usize>> {
    let mut ids: FxHashMap<&str, usize> = FxHashMap::default();
    let keys: Vec<usize> = units
        .iter()
        .map(|u| {
            let next = ids.len();
            *ids.entry(u.key.as_str()).or_insert(next)
        })
        .collect();
    let mut counts = vec![0usize; ids.len()];
    for &k in &keys {
        counts[k] += 1;
    }
    let most = counts.iter().copied().max()?;
    // A key launched less than half as often as the most launched one is no slot of the loop:
    // a recompile's new recipe, or a graph added now and then.
    let sporadic: Vec<bool> = counts.iter().map(|&c| c == 1 || 2 * c < most).collect();
    let period = period_of(&keys, &sporadic)?;
    let anchor = keys.iter().position(|&k| counts[k] >= 2 && !sporadic[k])?;
    let template = template_of(&keys, keys[anchor], period)?;
    let boundaries = align_to_loop(&keys, &template);
    (boundaries.len() >= 2).then_some(boundaries)
}

/// The most common run of `period` keys starting at a launch of `first` (on a tie the earliest).
fn template_of(keys: &[usize], first: usize, period: usize) -> Option<Vec<usize>> {
    let mut seen: FxHashMap<&[usize], (usize, usize)> = FxHashMap::default();
    for (i, &k) in keys.iter().enumerate() {
        if k == first && i + period <= keys.len() {
            let e = seen.entry(&keys[i..i + period]).or_insert((0, i));
            e.0 += 1;
        }
    }
    seen.into_iter()
        .max_by_key(|&(_, (n, at))| (n, std::cmp::Reverse(at)))
        .map(|(w, _)| w.to_vec())
}

/// Most states (launches × (period + 1)) the alignment keeps a back pointer for; past it the
/// iterations start at the launches of the template's first recipe.
const MAX_ALIGN_STATES: usize = 1 << 24;

/// Costs of the alignment (in arbitrary units): a recipe launched where the template has
/// another that is no recipe of the template (a recompile in that slot), one that is, a launch
/// added to an iteration (a new recipe; a template recipe once more), a template slot with no
/// launch. Each iteration earns [`ITERATION_CREDIT_PER_SLOT`] × p + 3, so `p` new recipes in a
/// row (every slot recompiled) make an iteration of their own, and fewer are added launches.
const SUB_NEW: i64 = 15;
const SUB_OTHER: i64 = 30;
const ADD_NEW: i64 = 8;
const ADD_LOOP: i64 = 20;
const SKIP_SLOT: i64 = 20;
const ITERATION_CREDIT_PER_SLOT: i64 = SUB_NEW - ADD_NEW;

/// Back pointers of [`align_to_loop`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Move {
    None,
    Start,
    Wrap,
    Skip,
    Add,
    Take,
}

/// Aligns the key sequence to the template repeated (a wrap-around edit distance): state `(i, j)`
/// is "`i` launches read, `j` slots of the current iteration done"; a launch fills the next slot
/// (free when it is the slot's recipe) or is added to the iteration, a slot may be skipped, and
/// after the last slot the next iteration starts (at the next launch). The capture may start and
/// end inside an iteration. Returns the launches where iterations start; an iteration ends where
/// the next starts, so the last start bounds the last whole iteration.
fn align_to_loop(keys: &[usize], template: &[usize]) -> Vec<usize> {
    let n = keys.len();
    let p = template.len();
    if p == 0 || n.saturating_mul(p + 1) > MAX_ALIGN_STATES {
        return keys
            .iter()
            .enumerate()
            .filter(|&(_, &k)| Some(&k) == template.first())
            .map(|(i, _)| i)
            .collect();
    }
    let in_template = |k: usize| template.contains(&k);
    let credit = ITERATION_CREDIT_PER_SLOT * p as i64 + 3;
    let width = p + 1;
    let mut back = vec![Move::None; (n + 1) * width];
    let inf = i64::MAX / 4;
    let mut cur = vec![inf; width];
    for j in 1..=p {
        cur[j] = 0;
        back[j] = Move::Start;
    }
    let mut next = vec![inf; width];
    for i in 0..=n {
        let row = i * width;
        // Skips (j → j + 1) and the wrap (p → 0) within one column: the cycle costs p skips
        // less one credit, always positive, so two passes settle it.
        for _ in 0..2 {
            for j in 0..p {
                if cur[j] + SKIP_SLOT < cur[j + 1] {
                    cur[j + 1] = cur[j] + SKIP_SLOT;
                    back[row + j + 1] = Move::Skip;
                }
            }
            // On a tie the added launch stays in the iteration it follows.
            if i < n && cur[p] < inf && cur[p] - credit <= cur[0] && back[row] != Move::Wrap {
                cur[0] = cur[p] - credit;
                back[row] = Move::Wrap;
            }
        }
        if i == n {
            break;
        }
        let k = keys[i];
        let repeat = p >= 2 && i > 0 && keys[i - 1] == k;
        next.fill(inf);
        let nrow = row + width;
        for j in 0..=p {
            if cur[j] >= inf {
                continue;
            }
            let add = cur[j] + if in_template(k) { ADD_LOOP } else { ADD_NEW };
            if add < next[j] {
                next[j] = add;
                back[nrow + j] = Move::Add;
            }
            if j < p {
                let take = if k == template[j] {
                    0
                } else if in_template(k) || repeat {
                    SUB_OTHER
                } else {
                    SUB_NEW
                };
                if cur[j] + take < next[j + 1] {
                    next[j + 1] = cur[j] + take;
                    back[nrow + j + 1] = Move::Take;
                }
            }
        }
        std::mem::swap(&mut cur, &mut next);
    }
    let Some(mut j) = (0..=p).min_by_key(|&j| cur[j]) else {
        return Vec::new();
    };
    let mut i = n;
    let mut starts = Vec::new();
    loop {
        match back[i * width + j] {
            Move::Start | Move::None => break,
            Move::Wrap => {
                starts.push(i);
                j = p;
            }
            Move::Skip => j -= 1,
            Move::Add => i -= 1,
            Move::Take => {
                i -= 1;
                j -= 1;
            }
        }
    }
    starts.reverse();
    starts.dedup();
    starts
}

/// Most launches a period is looked for in (an iteration of more graph launches than this is
/// not a training step's).
const MAX_PERIOD: usize = 256;

/// The period (in units) of the launch sequence: the lag at which launches most often repeat
/// the launch one period earlier, counting a sporadic recipe (compiled anew, in a slot another
/// recipe held, or added now and then) as the same as any other, so a renamed slot keeps its
/// place; on a tie the shortest. One launch per period is a period. `None` when no recipe
/// repeats at any lag.
fn period_of(keys: &[usize], sporadic: &[bool]) -> Option<usize> {
    let wild: Vec<bool> = keys.iter().map(|&k| sporadic[k]).collect();
    let repeating = sporadic.iter().filter(|&&s| !s).count();
    let longest = (keys.len() / 2).min(MAX_PERIOD).min(repeating.max(1) * 2);
    let mut best: Option<(usize, usize, usize)> = None; // (period, matches, pairs)
    for lag in 1..=longest.max(1) {
        let pairs = keys.len().saturating_sub(lag);
        if pairs == 0 {
            break;
        }
        let mut matches = 0;
        let mut real = false;
        for i in 0..pairs {
            if wild[i] || wild[i + lag] {
                matches += 1;
            } else if keys[i] == keys[i + lag] {
                matches += 1;
                real = true;
            }
        }
        if !real {
            continue;
        }
        // matches / pairs, compared without division.
        let better = best.is_none_or(|(_, m, p)| matches * p > m * pairs);
        if better {
            best = Some((lag, matches, pairs));
        }
    }
    best.map(|(lag, _, _)| lag)
}

#[cfg(test)]
mod tests {
    use super::{Unit, loop_boundaries};

    fn units(keys: &[&str]) -> Vec<Unit> {
        keys.iter()
            .enumerate()
            .map(|(i, k)| Unit {
                start: i as i64 * 10,
                slice: i as u32,
                track: 0,
                key: (*k).to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_loop_is_the_repeating_recipe_set() {
        // Warm-up launch, then (fwd+bwd, optimizer) per iteration: 3 launches of A bound 2
        // iterations.
        let u = units(&["init", "A", "B", "A", "B", "A", "B"]);
        assert_eq!(loop_boundaries(&u), Some(vec![1, 3, 5]));
    }

    #[test]
    fn a_recompiled_recipe_keeps_its_slot() {
        let u = units(&["A", "B", "A", "B", "A2", "B", "A", "B"]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 4, 6]));
    }

    #[test]
    fn an_added_graph_lengthens_its_iteration() {
        let u = units(&["A", "B", "A", "B", "C", "A", "B", "A"]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 5, 7]));
    }

    #[test]
    fn the_loop_starts_with_its_first_recipe_even_when_renamed_once() {
        let u = units(&["g_0", "g_1", "g_2", "g_1", "g_0", "g_1"]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 4]));
    }

    #[test]
    fn graph_prefixes_are_dropped() {
        assert_eq!(
            super::graph_local_name("g_2_l1_fc1_gemm_0"),
            "l1_fc1_gemm_0"
        );
        assert_eq!(super::graph_local_name("g_x"), "g_x");
        assert_eq!(super::graph_local_name("gemm"), "gemm");
        assert_eq!(super::graph_of("g_12_conv_0"), Some("g_12"));
        assert_eq!(super::graph_of("conv_0"), None);
    }

    #[test]
    fn one_launch_per_step_with_renamed_recipes_keeps_every_step() {
        // One mark_step per step; recompiles rename the recipe in steps 3 and 5.
        let u = units(&["40962", "40962", "40963", "40962", "40964", "40962"]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 1, 2, 3, 4, 5]));
    }

    #[test]
    fn two_and_three_recipes_per_step_with_recompiles_in_one_and_two_slots() {
        // Two recipes per step, the first slot recompiled once.
        let u = units(&["A", "B", "A", "B", "A2", "B", "A", "B"]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 4, 6]));
        // Two recipes per step, both slots recompiled in one step.
        let u = units(&["A", "B", "A", "B", "A2", "B2", "A", "B", "A", "B"]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 4, 6, 8]));
        // Three recipes per step, one slot recompiled in one step and two in another.
        let u = units(&[
            "A", "B", "C", "A", "B2", "C", "A", "B", "C", "A3", "B", "C3", "A", "B", "C",
        ]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 3, 6, 9, 12]));
    }

    #[test]
    fn a_new_recipe_launched_twice_after_its_compile_merges_nothing() {
        // Iterations 3 and 5 compile a new recipe after A and launch it twice (issue 47, item 4:
        // the period was 5, and no iteration was found).
        let u = units(&[
            "A", "B", "A", "B", "A", "C", "C", "B", "A", "B", "A", "D", "D", "B", "A", "B", "A",
        ]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 4, 8, 10, 14, 16]));
        // The same new recipe compiled again later (an evicted recipe) is still an addition.
        let u = units(&[
            "A", "B", "A", "B", "A", "C", "B", "A", "B", "A", "C", "B", "A", "B", "A",
        ]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 4, 7, 9, 12, 14]));
    }

    #[test]
    fn recompiles_in_the_first_slot_keep_the_iteration_before_them() {
        // A replaced by a new recipe in one iteration and by another launched twice in a later one:
        // each recompiling iteration was merged into the one before it.
        let u = units(&[
            "A", "B", "A", "B", "A", "B", "C", "B", "A", "B", "D", "D", "B", "A",
        ]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 2, 4, 6, 8, 10, 13]));
    }

    #[test]
    fn a_shape_that_stays_recompiled_keeps_every_iteration() {
        // The new input shape persists: its recipe runs in the slot from then on.
        let u = units(&["A", "A", "A", "C", "C", "C", "D", "D", "D"]);
        assert_eq!(loop_boundaries(&u), Some(vec![0, 1, 2, 3, 4, 5, 6, 7, 8]));
    }

    #[test]
    fn no_repeat_no_steps() {
        assert_eq!(loop_boundaries(&units(&["A", "B", "C"])), None);
    }
}
