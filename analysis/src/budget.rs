//! The budget file (`steplens.toml`): detector thresholds (`[thresholds]`) and the regression
//! check's limits (`[check]`). Unknown keys are errors, so a typo cannot turn a limit off.

use serde::Deserialize;

use crate::Thresholds;
use crate::check::CheckBudget;

/// A parsed budget file. Every table and key is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
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
    let budget: Budget = toml::from_str(text).map_err(|e| BudgetError {
        line: e
            .span()
            .and_then(|span| text.get(..span.start))
            .map(|before| line_of(text, before.len())),
        message: e.message().to_owned(),
    })?;
    // Finding kinds name limits: a misspelt kind would silently limit nothing.
    let kinds = budget
        .check
        .lost_time
        .keys()
        // `default` is the limit of every kind without a table of its own.
        .filter(|k| k.as_str() != crate::check::DEFAULT_KEY)
        .map(|k| (k, "check.lost_time"))
        .chain(
            budget
                .check
                .allow_new
                .iter()
                .map(|k| (k, "check.allow_new")),
        );
    for (kind, table) in kinds {
        if !crate::detect::FINDING_KINDS.contains(&kind.as_str()) {
            return Err(BudgetError {
                line: text.find(kind.as_str()).map(|at| line_of(text, at)),
                message: format!(
                    "unknown finding kind `{kind}` in {table} (known: {})",
                    crate::detect::FINDING_KINDS.join(", ")
                ),
            });
        }
    }
    Ok(budget)
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
