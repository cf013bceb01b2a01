//! Steps for runs that have no `ProfilerStep#N`: a Synapse-only Gaudi profile (TEF, HW CSV,
//! `.hltv`) records no torch annotations, but a training loop launches the same set of graphs
//! (recipes) every iteration, and that repetition is on the device timeline.
//!
//! The units are the host's graph launches (`synLaunch*` calls) where the input has host lanes,
//! else bursts of device work separated by at least [`BURST_GAP_NS`] with every engine idle.
//! Each unit is keyed by the recipe it ran (the first device slice at or after it: its
//! `recipe id` / `recipeId` / `graph name` / `recipeName` arg, else its name). The most frequent
//! key marks the loop; the most common distance (in units) between its launches is the period,
//! so an iteration that ran a recompiled recipe in the same slot keeps its place. Iteration `j`
//! runs from the start of unit `anchor + j·period` to the start of the next one; the last runs to
//! the end of the input's device work. Such steps are named `Iteration#j` and marked derived.

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

/// The unit indexes where iterations start, and where the last one ends: the launches of the
/// loop's first recipe. The period `p` is [`period_of`] the launch sequence; the loop's first
/// recipe is the earliest one that recurs `p`
/// units later. Where its launches are `2p` or more apart, a recompile replaced it in that slot
/// (a renamed graph), and the slot's start is filled in every `p` units; a launch added in an
/// iteration (a new graph run beside the usual ones) only makes that iteration longer. `None`
/// when no recipe repeats.
fn loop_boundaries(units: &[Unit]) -> Option<Vec<usize>> {
    let mut positions: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (i, u) in units.iter().enumerate() {
        positions.entry(u.key.as_str()).or_default().push(i);
    }
    let period = period_of(units, &positions)?;
    // A recipe renamed by a recompile in some slot recurs at multiples of the period.
    let first = positions
        .values()
        .filter(|p| p.len() >= 2 && p.windows(2).all(|w| (w[1] - w[0]) % period == 0))
        .min_by_key(|p| p[0])
        .or_else(|| {
            positions
                .values()
                .filter(|p| p.windows(2).any(|w| w[1] - w[0] == period))
                .min_by_key(|p| p[0])
        })?;
    let mut boundaries = vec![first[0]];
    for w in first.windows(2) {
        let mut at = w[0] + period;
        while at + period <= w[1] {
            boundaries.push(at);
            at += period;
        }
        boundaries.push(w[1]);
    }
    Some(boundaries)
}

/// Most launches a period is looked for in (an iteration of more graph launches than this is
/// not a training step's).
const MAX_PERIOD: usize = 256;

/// The period (in units) of the launch sequence: the lag at which launches most often repeat
/// the launch one period earlier, counting a recipe launched only once (compiled anew, in a slot
/// another recipe held) as the same as any other, so a renamed slot keeps its place; on a tie
/// the shortest. One launch per period is a period. `None` when no recipe repeats at any lag.
fn period_of(units: &[Unit], positions: &FxHashMap<&str, Vec<usize>>) -> Option<usize> {
    let once: Vec<bool> = units
        .iter()
        .map(|u| positions.get(u.key.as_str()).is_some_and(|p| p.len() == 1))
        .collect();
    let repeating = positions.values().filter(|p| p.len() >= 2).count();
    let longest = (units.len() / 2).min(MAX_PERIOD).min(repeating.max(1) * 2);
    let mut best: Option<(usize, usize, usize)> = None; // (period, matches, pairs)
    for lag in 1..=longest.max(1) {
        let pairs = units.len().saturating_sub(lag);
        if pairs == 0 {
            break;
        }
        let mut matches = 0;
        let mut real = false;
        for i in 0..pairs {
            if once[i] || once[i + lag] {
                matches += 1;
            } else if units[i].key == units[i + lag].key {
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
    fn no_repeat_no_steps() {
        assert_eq!(loop_boundaries(&units(&["A", "B", "C"])), None);
    }
}
