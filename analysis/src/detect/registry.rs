//! The detector registry: every detector in one list ([`DETECTORS`], in `detect`), each declared in its own
//! file with the finding kinds it raises and what fixing each saves, the thresholds it owns,
//! its advice in one line and its `detect` function. The report runs them from this list; the
//! savings read the saving model from it; `steplens report --help` and `docs/findings.md`'s
//! threshold table are checked against it.

use super::DETECTORS;
use crate::context::Context;
use crate::finding::{FindingKind, Raised};
use crate::thresholds::Thresholds;

/// What fixing a finding of a kind takes off the step's critical path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saves {
    /// Host-side waste (a sync, a copy, a gap, data loading, a compile): only the path's host,
    /// launch, gap and wait stretches shorten; a host thread that waits while the device
    /// computes costs the step nothing. A kind whose fix also removes device work the step
    /// waited for names those ranges itself (`Cost::device_ranges`).
    HostTime,
    /// Device work the fix removes (a transpose copy, an unfused chain, fp32 matrix work): the
    /// path's device stretches shorten too.
    DeviceWork,
    /// Not step time: memory, or a straggler whose per-rank figure the rank matching gives.
    NotStepTime,
}

/// One kind a detector raises, and what fixing it saves.
#[derive(Debug, Clone, Copy)]
pub struct Raises {
    /// The finding kind.
    pub kind: FindingKind,
    /// What fixing it saves.
    pub saves: Saves,
}

impl Raises {
    /// Kind `kind`, saving `saves`.
    #[must_use]
    pub const fn new(kind: FindingKind, saves: Saves) -> Self {
        Self { kind, saves }
    }
}

/// A threshold's default: whole (ns, bytes, counts) or not (percentages, ratios).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Preset {
    /// A whole number.
    Int(i64),
    /// A fraction.
    Float(f64),
}

/// A threshold: its budget-file key (a [`Thresholds`] field), its default and what it means.
#[derive(Debug, Clone, Copy)]
pub struct Threshold {
    /// The key, as the budget file's `[thresholds]` table and [`Thresholds`] spell it.
    pub key: &'static str,
    /// Its value when no budget file sets it.
    pub default: Preset,
    /// What it bounds, with its unit, in one sentence.
    pub doc: &'static str,
}

impl Threshold {
    /// A whole-number threshold (ns, bytes, a count).
    #[must_use]
    pub const fn int(key: &'static str, default: i64, doc: &'static str) -> Self {
        Self {
            key,
            default: Preset::Int(default),
            doc,
        }
    }

    /// A fractional threshold (a percentage, a ratio).
    #[must_use]
    pub const fn float(key: &'static str, default: f64, doc: &'static str) -> Self {
        Self {
            key,
            default: Preset::Float(default),
            doc,
        }
    }

    /// The default as a number.
    #[must_use]
    pub fn value(&self) -> f64 {
        match self.default {
            Preset::Int(v) => v as f64,
            Preset::Float(v) => v,
        }
    }
}

/// A detector: one file, one entry of [`DETECTORS`].
pub struct Detector {
    /// Its name (the ledger's `detector <name>` line; the file under `detect/`).
    pub name: &'static str,
    /// The kinds it raises.
    pub raises: &'static [Raises],
    /// The thresholds it owns: the [`Thresholds`] fields (budget-file keys) with their defaults
    /// and meaning; `Thresholds::default()` reads its defaults from here.
    pub thresholds: &'static [Threshold],
    /// What to change, in one line.
    pub advice: &'static str,
    /// Looks for its problem in one analysis.
    pub detect: fn(&Context<'_>, &super::Shared) -> Vec<Raised>,
}

/// Thresholds no one detector owns: the report's own passes read them (the threshold, what
/// reads it).
pub const REPORT_THRESHOLDS: &[(Threshold, &str)] = &[
    (
        Threshold::int(
            "kernel_wait_max_ns",
            30_000,
            "a gap between kernels on a stream shorter than this, not caused by a late launch, \
             is kernel-launch overhead (\"kernel wait\"), ns; HTA's default.",
        ),
        "the report's per-stream idle breakdown",
    ),
    (
        Threshold::float(
            "min_finding_pct",
            1.0,
            "a finding with a measured cost must cost at least this share of its step (of the \
             trace, without steps), percent.",
        ),
        "materiality of every measured finding",
    ),
    (
        Threshold::int(
            "min_finding_ns",
            20_000,
            "a finding with a measured cost must also cost at least this long, ns.",
        ),
        "materiality of every measured finding",
    ),
];

/// Every threshold: each detector's, then the report's own.
pub fn all_thresholds() -> impl Iterator<Item = &'static Threshold> {
    DETECTORS
        .iter()
        .flat_map(|d| d.thresholds.iter())
        .chain(REPORT_THRESHOLDS.iter().map(|(t, _)| t))
}

/// Threshold `key`'s declaration, if there is one.
#[must_use]
pub fn threshold(key: &str) -> Option<&'static Threshold> {
    all_thresholds().find(|t| t.key == key)
}

/// What fixing a finding of `kind` saves (the first detector that raises it says).
#[must_use]
pub fn saves(kind: FindingKind) -> Saves {
    DETECTORS
        .iter()
        .flat_map(|d| d.raises)
        .find(|r| r.kind == kind)
        .map_or(Saves::HostTime, |r| r.saves)
}

/// The detector that owns threshold `key`, if one does.
#[must_use]
pub fn owner_of_threshold(key: &str) -> Option<&'static Detector> {
    DETECTORS
        .iter()
        .copied()
        .find(|d| d.thresholds.iter().any(|t| t.key == key))
}

/// Threshold `key`'s default as the registry declares it (0 for a key it lacks: a test checks
/// that every field is declared).
fn preset(key: &str) -> Preset {
    threshold(key).map_or(Preset::Int(0), |t| t.default)
}

fn int(key: &str) -> i64 {
    match preset(key) {
        Preset::Int(v) => v,
        Preset::Float(v) => v as i64,
    }
}

fn float(key: &str) -> f64 {
    match preset(key) {
        Preset::Int(v) => v as f64,
        Preset::Float(v) => v,
    }
}

fn count(key: &str) -> usize {
    usize::try_from(int(key)).unwrap_or(0)
}

fn small(key: &str) -> u32 {
    u32::try_from(int(key)).unwrap_or(0)
}

impl Default for Thresholds {
    /// The registry's defaults ([`crate::detect::registry::Threshold`]).
    fn default() -> Self {
        Self {
            dataloader_stall_min_pct: float("dataloader_stall_min_pct"),
            dataloader_stall_min_ns: int("dataloader_stall_min_ns"),
            host_gap_min_ns: int("host_gap_min_ns"),
            host_gap_min_pct: float("host_gap_min_pct"),
            kernel_wait_max_ns: int("kernel_wait_max_ns"),
            mme_idle_min_ns: int("mme_idle_min_ns"),
            graph_gap_ns: int("graph_gap_ns"),
            straggler_min_pct: float("straggler_min_pct"),
            straggler_min_collectives: count("straggler_min_collectives"),
            mme_idle_stretch_min_ns: int("mme_idle_stretch_min_ns"),
            device_transpose_min_pct: float("device_transpose_min_pct"),
            gaudi_warmup_steps: count("gaudi_warmup_steps"),
            recompile_warmup_compiles: small("recompile_warmup_compiles"),
            min_finding_pct: float("min_finding_pct"),
            min_finding_ns: int("min_finding_ns"),
            memory_growth_min_bytes: int("memory_growth_min_bytes"),
            reserved_slack_min_bytes: int("reserved_slack_min_bytes"),
            reserved_slack_min_pct: float("reserved_slack_min_pct"),
            fp32_compute_min_pct: float("fp32_compute_min_pct"),
            pointwise_chain_min_ops: count("pointwise_chain_min_ops"),
            pointwise_min_elems: int("pointwise_min_elems"),
            optimizer_loop_min_ops: count("optimizer_loop_min_ops"),
            optimizer_loop_min_pct: float("optimizer_loop_min_pct"),
            fragmented_min_per_step: count("fragmented_min_per_step"),
            fragmented_over_needed: float("fragmented_over_needed"),
            exposed_comm_min_pct: float("exposed_comm_min_pct"),
            slow_gemm_max_pct: float("slow_gemm_max_pct"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{REPORT_THRESHOLDS, Saves, saves};
    use crate::detect::DETECTORS;
    use crate::finding::FindingKind;
    use crate::thresholds::Thresholds;

    /// Threshold `key`'s value in `thresholds`, as a number (`None` for an unknown key).
    fn threshold_value(thresholds: &Thresholds, key: &str) -> Option<f64> {
        serde_json::to_value(thresholds).ok()?.get(key)?.as_f64()
    }

    #[test]
    fn every_kind_is_raised_and_every_raiser_agrees_on_its_saving() {
        for &kind in FindingKind::ALL {
            let raisers: Vec<Saves> = DETECTORS
                .iter()
                .flat_map(|d| d.raises)
                .filter(|r| r.kind == kind)
                .map(|r| r.saves)
                .collect();
            assert!(!raisers.is_empty(), "{kind} is raised by no detector");
            assert!(
                raisers.iter().all(|&s| s == saves(kind)),
                "the detectors raising {kind} disagree on what fixing it saves"
            );
        }
    }

    #[test]
    fn every_threshold_has_exactly_one_owner() {
        let fields: BTreeSet<String> = serde_json::to_value(Thresholds::default())
            .unwrap_or_default()
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let mut declared: Vec<&str> = super::all_thresholds().map(|t| t.key).collect();
        declared.sort_unstable();
        let unique: BTreeSet<String> = declared.iter().map(|k| (*k).to_owned()).collect();
        assert_eq!(declared.len(), unique.len(), "a threshold has two owners");
        assert_eq!(unique, fields);
    }

    /// `Thresholds::default()` is the registry's defaults, field by field, and each
    /// threshold's meaning is one sentence with its unit or what it counts.
    #[test]
    fn the_defaults_are_the_registrys() {
        let defaults = Thresholds::default();
        for t in super::all_thresholds() {
            assert_eq!(
                threshold_value(&defaults, t.key),
                Some(t.value()),
                "{}",
                t.key
            );
            assert!(
                t.doc.ends_with('.') && !t.doc.contains('…'),
                "{}: {}",
                t.key,
                t.doc
            );
        }
    }

    #[test]
    fn detector_names_are_unique_and_advice_is_one_line() {
        let names: BTreeSet<&str> = DETECTORS.iter().map(|d| d.name).collect();
        assert_eq!(names.len(), DETECTORS.len());
        for d in DETECTORS {
            assert!(
                !d.advice.is_empty() && !d.advice.contains('\n'),
                "{}",
                d.name
            );
        }
    }

    /// A table cell's leading quantity in the threshold's own unit: `5.0 % of the step` → 5,
    /// `1 ms` → 1e6 (ns), `256 MiB` → 2^28 (bytes), `2 × …` → 2.
    fn quantity(cell: &str) -> Option<f64> {
        let mut words = cell.split_whitespace();
        let number: f64 = words.next()?.parse().ok()?;
        let scale = match words.next() {
            Some("ns") => 1.0,
            Some("µs") => 1e3,
            Some("ms") => 1e6,
            Some("s") => 1e9,
            Some("KiB") => 1024.0,
            Some("MiB") => 1024.0 * 1024.0,
            Some("GiB") => 1024.0 * 1024.0 * 1024.0,
            _ => 1.0,
        };
        Some(number * scale)
    }

    /// `docs/findings.md`'s threshold table is the registry's: one row per threshold, its
    /// default the code's, and its "used by" naming a kind its owner raises (or what reads a
    /// report-wide threshold).
    #[test]
    fn findings_md_threshold_table_is_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/findings.md");
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        let start = doc
            .find("| threshold | default | used by |")
            .unwrap_or(doc.len());
        let rows: Vec<Vec<&str>> = doc[start..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
            .collect();
        let defaults = Thresholds::default();
        let mut documented = BTreeSet::new();
        for row in &rows {
            let [key, default, used_by] = row[..] else {
                panic!("a threshold row has three cells: {row:?}");
            };
            let key = key.trim_matches('`');
            documented.insert(key.to_owned());
            let value = threshold_value(&defaults, key);
            assert!(value.is_some(), "{key} is no threshold");
            assert_eq!(quantity(default), value, "{key}'s documented default");
            match super::owner_of_threshold(key) {
                Some(d) => assert!(
                    d.raises
                        .iter()
                        .any(|r| used_by.contains(&format!("`{}`", r.kind.as_str()))),
                    "{key}: '{used_by}' names no kind of detector {}",
                    d.name
                ),
                None => {
                    let reader = REPORT_THRESHOLDS.iter().find(|(t, _)| t.key == key);
                    assert!(
                        reader.is_some_and(|(_, what)| used_by.contains(what)),
                        "{key}: no owner, and '{used_by}' is not what the registry says reads it"
                    );
                }
            }
        }
        let declared: BTreeSet<String> =
            super::all_thresholds().map(|t| t.key.to_owned()).collect();
        assert_eq!(documented, declared);
    }
}
