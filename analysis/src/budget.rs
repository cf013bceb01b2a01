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
    toml::from_str(text).map_err(|e| BudgetError {
        line: e
            .span()
            .and_then(|span| text.get(..span.start))
            .map(|before| before.matches('\n').count() + 1),
        message: e.message().to_owned(),
    })
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
}
