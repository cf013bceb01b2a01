//! Every detector threshold in one typed table: the keys of a budget file's `[thresholds]`.
//! Each threshold's owner, default and meaning are declared by its detector in the registry
//! (`detect::registry`); `Default` for this table is implemented there, from the declarations.

use serde::{Deserialize, Serialize};

/// Every detector threshold. Field names are the keys of the budget file's `[thresholds]`
/// table; what each means is its registry entry's `doc` (and `docs/findings.md`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// Owned by `dataloader_stall` (its registry entry gives the default and meaning).
    pub dataloader_stall_min_pct: f64,
    /// Owned by `dataloader_stall` (its registry entry gives the default and meaning).
    pub dataloader_stall_min_ns: i64,
    /// Owned by `host_bound_gap` (its registry entry gives the default and meaning).
    pub host_gap_min_ns: i64,
    /// Owned by `host_bound_gap` (its registry entry gives the default and meaning).
    pub host_gap_min_pct: f64,
    /// Read by the report itself (`REPORT_THRESHOLDS` gives the default and meaning).
    pub kernel_wait_max_ns: i64,
    /// Owned by `mme_idle` (its registry entry gives the default and meaning).
    pub mme_idle_min_ns: i64,
    /// Owned by `mme_idle` (its registry entry gives the default and meaning).
    pub graph_gap_ns: i64,
    /// Owned by `straggler` (its registry entry gives the default and meaning).
    pub straggler_min_pct: f64,
    /// Owned by `straggler` (its registry entry gives the default and meaning).
    pub straggler_min_collectives: usize,
    /// Owned by `mme_idle` (its registry entry gives the default and meaning).
    pub mme_idle_stretch_min_ns: i64,
    /// Owned by `non_logical_transpose` (its registry entry gives the default and meaning).
    pub device_transpose_min_pct: f64,
    /// Owned by `gaudi` (its registry entry gives the default and meaning).
    pub gaudi_warmup_steps: usize,
    /// Owned by `recompile` (its registry entry gives the default and meaning).
    pub recompile_warmup_compiles: u32,
    /// Read by the report itself (`REPORT_THRESHOLDS` gives the default and meaning).
    pub min_finding_pct: f64,
    /// Read by the report itself (`REPORT_THRESHOLDS` gives the default and meaning).
    pub min_finding_ns: i64,
    /// Owned by `memory` (its registry entry gives the default and meaning).
    pub memory_growth_min_bytes: i64,
    /// Owned by `memory` (its registry entry gives the default and meaning).
    pub reserved_slack_min_bytes: i64,
    /// Owned by `memory` (its registry entry gives the default and meaning).
    pub reserved_slack_min_pct: f64,
    /// Owned by `precision` (its registry entry gives the default and meaning).
    pub fp32_compute_min_pct: f64,
    /// Owned by `pointwise` (its registry entry gives the default and meaning).
    pub pointwise_chain_min_ops: usize,
    /// Owned by `pointwise` (its registry entry gives the default and meaning).
    pub pointwise_min_elems: i64,
    /// Owned by `optimizer` (its registry entry gives the default and meaning).
    pub optimizer_loop_min_ops: usize,
    /// Owned by `optimizer` (its registry entry gives the default and meaning).
    pub optimizer_loop_min_pct: f64,
    /// Owned by `collectives` (its registry entry gives the default and meaning).
    pub fragmented_min_per_step: usize,
    /// Owned by `collectives` (its registry entry gives the default and meaning).
    pub fragmented_over_needed: f64,
    /// Owned by `exposed_comm` (its registry entry gives the default and meaning).
    pub exposed_comm_min_pct: f64,
    /// Owned by `slow_gemm` (its registry entry gives the default and meaning).
    pub slow_gemm_max_pct: f64,
}
