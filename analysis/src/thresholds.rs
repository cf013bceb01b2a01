//! Every detector threshold with its default, in one table: the keys of a budget file's
//! `[thresholds]`. Which detector owns each is the registry's (`detect::registry`).

use serde::{Deserialize, Serialize};

/// Every detector threshold, with its default. Field names are the keys of the budget file's
/// `[thresholds]` table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// `dataloader_stall`: data wait (DataLoader time not covered by any op) must reach this
    /// share of the step, percent.
    pub dataloader_stall_min_pct: f64,
    /// `dataloader_stall`: … and at least this long, ns.
    pub dataloader_stall_min_ns: i64,
    /// `host_bound_gap`: a device-idle gap shorter than this is launch jitter, not a finding, ns.
    pub host_gap_min_ns: i64,
    /// `host_bound_gap`: the host-bound idle time of a step must reach this share of the step,
    /// percent.
    pub host_gap_min_pct: f64,
    /// Idle breakdown: a gap between kernels on a stream shorter than this, not caused by a
    /// late launch, is kernel-launch overhead ("kernel wait"), ns. HTA's default (30 µs).
    pub kernel_wait_max_ns: i64,
    /// `mme_idle_behind_tpc`: MME idle time behind TPC work per step must reach this, ns.
    pub mme_idle_min_ns: i64,
    /// `mme_idle_behind_tpc` without steps: device work separated by this long with every
    /// engine idle belongs to different graph launches, ns.
    pub graph_gap_ns: i64,
    /// `straggler`: the slowest rank's extra compute per step must reach this share of its
    /// step, percent.
    pub straggler_min_pct: f64,
    /// `straggler`: collectives matched across the ranks needed to name one, count.
    pub straggler_min_collectives: usize,
    /// `mme_idle_behind_tpc`: a stretch with less TPC work than this is node-to-node jitter,
    /// not counted, ns.
    pub mme_idle_stretch_min_ns: i64,
    /// `non_logical_transpose` on Gaudi device lanes: transpose kernels (`transpose_*`,
    /// `DmaTranspose`) are flagged when they take at least this share of the step, percent.
    pub device_transpose_min_pct: f64,
    /// Gaudi `recompile`: graph compiles in the first this many steps (or `mark_step` metric
    /// dumps) are warm-up.
    pub gaudi_warmup_steps: usize,
    /// `recompile`: compiles with an index below this are warm-up, not recompiles (`F/0` is the
    /// first compile of frame `F`).
    pub recompile_warmup_compiles: u32,
    /// Materiality: a finding with a measured cost must cost at least this share of its step
    /// (of the trace, without steps), percent …
    pub min_finding_pct: f64,
    /// … and at least this long, ns.
    pub min_finding_ns: i64,
    /// `memory_growth`: the allocated baseline must rise by at least this much over the run of
    /// steps, bytes.
    pub memory_growth_min_bytes: i64,
    /// `reserved_slack`: reserved − allocated at their peaks must reach this, bytes …
    pub reserved_slack_min_bytes: i64,
    /// … and this share of the peak reserved, percent.
    pub reserved_slack_min_pct: f64,
    /// `no_mixed_precision`: fp32 matrix kernels must take at least this share of the step,
    /// percent.
    pub fp32_compute_min_pct: f64,
    /// `unfused_pointwise`: a chain has at least this many elementwise ops …
    pub pointwise_chain_min_ops: usize,
    /// … over a tensor of at least this many elements.
    pub pointwise_min_elems: i64,
    /// `unfused_optimizer`: per-parameter math ops in one optimizer step before it counts as a
    /// loop.
    pub optimizer_loop_min_ops: usize,
    /// … and its estimated cost must reach this share of the step, percent.
    pub optimizer_loop_min_pct: f64,
    /// `fragmented_collectives`: collectives of one kind in one step before they count as
    /// fragmented …
    pub fragmented_min_per_step: usize,
    /// … and, where every call's size is recorded, more than this many times the all-reduces
    /// DDP's default 25 MiB buckets would need for the step's bytes.
    pub fragmented_over_needed: f64,
    /// `exposed_communication`: collective time with no compute beside it must reach this
    /// share of the step, percent.
    pub exposed_comm_min_pct: f64,
    /// `slow_gemm`: a GEMM signature whose rate is below this share of what the trace's
    /// well-shaped GEMMs of its dtype reach (or its memory roof) runs slow, percent.
    pub slow_gemm_max_pct: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            dataloader_stall_min_pct: 5.0,
            dataloader_stall_min_ns: 1_000_000,
            host_gap_min_ns: 50_000,
            host_gap_min_pct: 5.0,
            kernel_wait_max_ns: 30_000,
            mme_idle_min_ns: 20_000,
            mme_idle_stretch_min_ns: 10_000,
            graph_gap_ns: 100_000,
            straggler_min_pct: 5.0,
            straggler_min_collectives: 3,
            gaudi_warmup_steps: 2,
            device_transpose_min_pct: 2.0,
            recompile_warmup_compiles: 1,
            min_finding_pct: 1.0,
            min_finding_ns: 20_000,
            memory_growth_min_bytes: 1 << 20,
            reserved_slack_min_bytes: 256 << 20,
            reserved_slack_min_pct: 30.0,
            fp32_compute_min_pct: 10.0,
            pointwise_chain_min_ops: 4,
            pointwise_min_elems: 1024,
            optimizer_loop_min_ops: 8,
            optimizer_loop_min_pct: 5.0,
            fragmented_min_per_step: 8,
            exposed_comm_min_pct: 5.0,
            fragmented_over_needed: 2.0,
            slow_gemm_max_pct: 50.0,
        }
    }
}
