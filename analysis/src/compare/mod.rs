//! Comparing runs: what `check`, `diff` and `steplens-bench whatif` compute from two
//! (or more) runs' reports, never from a Timeline.
//!
//! - [`figures`]: the figures a run is compared on ([`figures::RunFigures`]), taken from a
//!   `Report`, and several runs pooled into one side;
//! - [`check`]: the regression check, rule by rule, under the budget's limits;
//! - [`budget`]: the budget file (`steplens.toml`): thresholds and the check's limits;
//! - [`diff`]: two runs side by side, with [`op_rows`], the op rows and their join;
//! - [`whatif`]: savings estimates against fixed runs (fix pairs).

pub mod budget;
pub mod check;
pub mod diff;
pub mod figures;
pub mod op_rows;
pub mod whatif;
