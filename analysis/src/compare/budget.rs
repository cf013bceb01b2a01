//! The budget file (`steplens.toml`): detector thresholds (`[thresholds]`) and the regression
//! check's limits (`[check]`, its tables and limit types). Unknown keys and unknown finding
//! kinds are errors with their line, so a typo cannot turn a limit off.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::finding::FindingKind;
use crate::thresholds::Thresholds;

/// A parsed budget file. Every table and key is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// The annotations that mark steps (a regex), where the command line gives no
    /// `--step-marker`: an inference server's engine step, say.
    pub step_marker: Option<String>,
    /// Detector thresholds (docs/findings.md).
    pub thresholds: Thresholds,
    /// Limits of `steplens check`.
    pub check: CheckBudget,
}

/// Why a budget file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct BudgetError {
    /// 1-based line of the problem, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// Parses the text of a budget file.
///
/// # Errors
/// On TOML syntax errors, unknown keys and values of the wrong type, with the line.
pub fn parse_budget(text: &str) -> Result<Budget, BudgetError> {
    let syntax = |e: toml::de::Error| BudgetError {
        line: e
            .span()
            .and_then(|span| text.get(..span.start))
            .map(|before| line_of(text, before.len())),
        message: e.message().to_owned(),
    };
    let table: toml::Table = toml::from_str(text).map_err(syntax)?;
    check_ranges(text, &table, &mut Vec::new())?;
    toml::from_str(text).map_err(syntax)
}

/// Every number of a budget is finite and not negative; shares and confidences have tighter
/// ranges. A value out of range is an error with its line, never a limit that cannot fire.
fn check_ranges(
    text: &str,
    table: &toml::Table,
    path: &mut Vec<String>,
) -> Result<(), BudgetError> {
    for (key, value) in table {
        let number = match value {
            toml::Value::Table(inner) => {
                path.push(key.clone());
                check_ranges(text, inner, path)?;
                path.pop();
                continue;
            }
            toml::Value::Float(v) => *v,
            toml::Value::Integer(v) => *v as f64,
            _ => continue,
        };
        let (low, high, unit) = match key.as_str() {
            "confidence" => (0.5, 0.9999, ""),
            "noise_floor_pct" | "min_pct" | "max_pct" => (0.0, 100.0, " %"),
            _ => (0.0, f64::INFINITY, ""),
        };
        if !(low..=high).contains(&number) || !number.is_finite() {
            let allowed = if high.is_finite() {
                format!("{low} to {high}{unit}")
            } else {
                "a finite number, 0 or more".to_owned()
            };
            let name = path
                .iter()
                .chain(std::iter::once(key))
                .cloned()
                .collect::<Vec<_>>()
                .join(".");
            return Err(BudgetError {
                line: key_line(text, path, key),
                message: format!("{name} = {number} is out of range (allowed: {allowed})"),
            });
        }
    }
    Ok(())
}

/// The line of `key =` under the table `path` (`[check]`, `[check.lost_time.default]`), or its
/// first occurrence anywhere (dotted keys, inline tables).
fn key_line(text: &str, path: &[String], key: &str) -> Option<usize> {
    let header = format!("[{}]", path.join("."));
    let assigns = |line: &str| {
        line.trim_start()
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    };
    let mut in_table = path.is_empty();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_table = trimmed.replace(' ', "") == header;
            continue;
        }
        if in_table && assigns(line) {
            return Some(i + 1);
        }
    }
    text.lines()
        .position(|line| line.contains(key))
        .map(|i| i + 1)
}

/// Tolerances for a time figure (step time, lost time per step, op time per step).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeLimit {
    /// Largest accepted increase over the baseline, percent.
    pub max_increase_pct: Option<f64>,
    /// Largest accepted increase over the baseline, milliseconds.
    pub max_increase_ms: Option<f64>,
    /// Ceiling for the current value, milliseconds, whatever the baseline.
    pub max_ms: Option<f64>,
}

impl TimeLimit {
    pub(crate) const fn new(pct: f64, ms: f64) -> Self {
        Self {
            max_increase_pct: Some(pct),
            max_increase_ms: Some(ms),
            max_ms: None,
        }
    }

    /// Fields set here override those of `base`.
    pub(crate) fn over(self, base: Self) -> Self {
        Self {
            max_increase_pct: self.max_increase_pct.or(base.max_increase_pct),
            max_increase_ms: self.max_increase_ms.or(base.max_increase_ms),
            max_ms: self.max_ms.or(base.max_ms),
        }
    }

    pub(crate) fn describe(self) -> String {
        let mut parts = Vec::new();
        match (self.max_increase_pct, self.max_increase_ms) {
            (Some(p), Some(ms)) => parts.push(format!("+{p}% and +{ms} ms")),
            (Some(p), None) => parts.push(format!("+{p}%")),
            (None, Some(ms)) => parts.push(format!("+{ms} ms")),
            (None, None) => {}
        }
        if let Some(max) = self.max_ms {
            parts.push(format!("max {max} ms"));
        }
        if parts.is_empty() {
            "no limit".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// Tolerances for a utilization figure (device busy, engine utilization), in percent of the step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PctLimit {
    /// Largest accepted drop below the baseline, percentage points.
    pub max_drop_points: Option<f64>,
    /// Floor for the current value, percent, whatever the baseline.
    pub min_pct: Option<f64>,
}

/// A limit on a spread that should not grow: how far above the baseline, and a ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SpreadLimit {
    /// Largest accepted rise over the baseline, percentage points.
    pub max_increase_points: Option<f64>,
    /// Ceiling for the current value, percent, whatever the baseline.
    pub max_pct: Option<f64>,
}

impl PctLimit {
    pub(crate) fn over(self, base: Self) -> Self {
        Self {
            max_drop_points: self.max_drop_points.or(base.max_drop_points),
            min_pct: self.min_pct.or(base.min_pct),
        }
    }

    pub(crate) fn describe(self) -> String {
        let mut parts = Vec::new();
        if let Some(d) = self.max_drop_points {
            parts.push(format!("-{d} points"));
        }
        if let Some(min) = self.min_pct {
            parts.push(format!("min {min}%"));
        }
        if parts.is_empty() {
            "no limit".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// The `[check]` table of a budget file. Every field has a default, so an empty table (or no
/// budget file) gives the default check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckBudget {
    /// Steps left out at the start of each input.
    pub warmup_steps: usize,
    /// How many ops (the largest self time per step in either run) get an op rule.
    pub top_ops: usize,
    /// Finding kinds that may appear without failing the check (their lost time is still held
    /// to `lost_time`).
    pub allow_new: Vec<FindingKind>,
    /// Median step time.
    pub step_time: TimeLimit,
    /// Mean step time.
    pub step_time_mean: TimeLimit,
    /// Median device busy share of the step.
    pub device_busy: PctLimit,
    /// Engine utilization: `default` and per engine class (`MME`, `TPC`, `stream 7`, …).
    pub engine_utilization: BTreeMap<String, PctLimit>,
    /// Lost time per step: `default` and per finding kind.
    pub lost_time: BTreeMap<KindKey, TimeLimit>,
    /// Op self time per step: `default` and per op name (device ops end in ` [device]`).
    pub op_self_time: BTreeMap<String, TimeLimit>,
    /// Confidence of the intervals the per-step rules use (0.5–0.9999).
    pub confidence: f64,
    /// Fewest measured steps on each side for a per-step rule to fail; with fewer, a change
    /// past the tolerance is inconclusive.
    pub min_steps: usize,
    /// Op self-time rules fail the check (by default they only warn: op time is noisier than
    /// step time, and an op that got slower without moving the step costs nothing).
    pub fail_on_op_rules: bool,
    /// Several ranks: the spread of their compute per step (slowest − fastest rank, points of
    /// the median step) may grow by at most this many points.
    pub rank_spread: SpreadLimit,
    /// Several ranks: the median exposed communication per step (collective time not hidden
    /// behind compute).
    pub exposed_comm: TimeLimit,
    /// Run-to-run noise of the step time assumed with a single baseline run, percent: a step
    /// rule fails only when its change reaches it (and its interval excludes no change). With
    /// several baseline runs the spread between their medians is measured instead (at least
    /// 2 %). The default, 8 %, is above the largest change measured between runs of identical
    /// work on a shared 2-core machine (6.8 % in the median, 7.5 % in the mean) and below the
    /// 10 % regression the gate must catch.
    pub noise_floor_pct: f64,
}

/// Key of the fallback entry in the per-name limit tables.
pub const DEFAULT_KEY: &str = "default";

/// A key of the `lost_time` table: `default` or a finding kind. Any other name is an error, so
/// a misspelt kind cannot silently limit nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KindKey {
    /// The limit of every kind without a table of its own.
    Default,
    /// One kind's limit.
    Kind(FindingKind),
}

impl Serialize for KindKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Default => serializer.serialize_str(DEFAULT_KEY),
            Self::Kind(kind) => kind.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for KindKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        if name == DEFAULT_KEY {
            return Ok(Self::Default);
        }
        name.parse()
            .map(Self::Kind)
            .map_err(serde::de::Error::custom)
    }
}

impl Default for CheckBudget {
    fn default() -> Self {
        Self {
            warmup_steps: 1,
            top_ops: 10,
            allow_new: Vec::new(),
            step_time: TimeLimit::new(5.0, 0.1),
            step_time_mean: TimeLimit::new(10.0, 0.1),
            device_busy: PctLimit {
                max_drop_points: Some(5.0),
                min_pct: None,
            },
            engine_utilization: BTreeMap::new(),
            lost_time: BTreeMap::new(),
            op_self_time: BTreeMap::new(),
            confidence: 0.99,
            min_steps: 3,
            fail_on_op_rules: false,
            rank_spread: SpreadLimit {
                max_increase_points: Some(10.0),
                max_pct: None,
            },
            exposed_comm: TimeLimit::new(10.0, 0.5),
            noise_floor_pct: 8.0,
        }
    }
}

/// A limit that can fill the fields it leaves unset from another.
trait Layered: Copy {
    fn over(self, base: Self) -> Self;
}

impl Layered for TimeLimit {
    fn over(self, base: Self) -> Self {
        TimeLimit::over(self, base)
    }
}

impl Layered for PctLimit {
    fn over(self, base: Self) -> Self {
        PctLimit::over(self, base)
    }
}

/// The limit for `name`: its own entry over the table's `default` entry over `builtin`.
fn layered<K: Ord, L: Layered>(table: &BTreeMap<K, L>, default_key: &K, name: &K, builtin: L) -> L {
    let default = table.get(default_key).map_or(builtin, |l| l.over(builtin));
    table.get(name).map_or(default, |l| l.over(default))
}

impl CheckBudget {
    pub(crate) fn engine_limit(&self, class: &str) -> PctLimit {
        let builtin = PctLimit {
            max_drop_points: Some(10.0),
            min_pct: None,
        };
        layered(
            &self.engine_utilization,
            &DEFAULT_KEY.to_owned(),
            &class.to_owned(),
            builtin,
        )
    }

    pub(crate) fn lost_limit(&self, kind: FindingKind) -> TimeLimit {
        layered(
            &self.lost_time,
            &KindKey::Default,
            &KindKey::Kind(kind),
            TimeLimit::new(10.0, 0.5),
        )
    }

    pub(crate) fn op_limit(&self, op: &str) -> TimeLimit {
        layered(
            &self.op_self_time,
            &DEFAULT_KEY.to_owned(),
            &op.to_owned(),
            TimeLimit::new(20.0, 0.2),
        )
    }
}

/// The 1-based line of byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at)
        .map_or(1, |before| before.matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_is_the_default_budget() {
        assert_eq!(parse_budget("").unwrap(), Budget::default());
    }

    #[test]
    fn values_out_of_range_are_errors_with_their_line() {
        for (text, line, needle) in [
            (
                "[check]\nconfidence = nan\n",
                2,
                "check.confidence = NaN is out of range (allowed: 0.5 to 0.9999)",
            ),
            (
                "[check]\nconfidence = 5.0\n",
                2,
                "check.confidence = 5 is out of range",
            ),
            (
                "[check]\nconfidence = 0.0\n",
                2,
                "check.confidence = 0 is out of range",
            ),
            (
                "[check]\nmin_steps = 3\nnoise_floor_pct = -50\n",
                3,
                "check.noise_floor_pct = -50 is out of range (allowed: 0 to 100 %)",
            ),
            (
                "[check]\nnoise_floor_pct = inf\n",
                2,
                "check.noise_floor_pct = inf is out of range",
            ),
            (
                "[check.step_time]\nmax_increase_pct = -5\n",
                2,
                "check.step_time.max_increase_pct = -5 is out of range (allowed: a finite number, 0 or more)",
            ),
            (
                "[thresholds]\nhost_gap_min_ns = -1\n",
                2,
                "thresholds.host_gap_min_ns = -1 is out of range",
            ),
        ] {
            let err = parse_budget(text).unwrap_err();
            assert_eq!(err.line, Some(line), "{text}: {err}");
            assert!(err.message.contains(needle), "{text}: {err}");
        }
        assert!(parse_budget("[check]\nconfidence = 0.95\nnoise_floor_pct = 5\n").is_ok());
    }

    #[test]
    fn errors_name_the_line() {
        let err = parse_budget("[check]\nwarmup_steps = 1\nwarmup_stepz = 2\n").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(
            err.to_string().starts_with("line 3: unknown field"),
            "{err}"
        );
        let err = parse_budget("[check.step_time]\nmax_ms = \"fast\"\n").unwrap_err();
        assert_eq!(err.line, Some(2));
    }

    #[test]
    fn a_misspelt_finding_kind_is_an_error_with_its_line() {
        let err = parse_budget(
            "[check]\nwarmup_steps = 1\n\n[check.lost_time.sync_pont]\nmax_ms = 5.0\n",
        )
        .unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(
            err.message.contains("unknown finding kind `sync_pont`"),
            "{err}"
        );
        let err =
            parse_budget("[check]\nallow_new = [\"recompile\", \"sync_pont\"]\n").unwrap_err();
        assert_eq!(err.line, Some(2), "{err}");
        assert!(
            parse_budget(
                "[check]\nallow_new = [\"sync_point\"]\n[check.lost_time.recompile]\n[check.lost_time.default]\n"
            )
            .is_ok()
        );
    }
}
