//! What Gaudi tables and metric files add to the Timeline: Analyzed Nodes rows and bridge
//! metric dumps.

use serde::Serialize;

use super::SliceId;

/// One row of a Gaudi Trace Analyzer "Analyzed Nodes" table (`habana-analyzed-nodes`): a graph
/// node's execution with the analyzer's metrics. Missing cells (`nan`, `[]`, `[Error]`, empty)
/// are `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeMetrics {
    /// Input it came from.
    pub source: u16,
    /// `Node Name` as written (repeated executions carry ` iter N`).
    pub name: String,
    /// `Unit` (`MME`, `TPC`).
    pub unit: String,
    /// `Op Type` (TPC kernel GUID or op type).
    pub op_type: Option<String>,
    /// `Start time of node`, ns.
    pub start_ns: i64,
    /// `End time of node`, ns.
    pub end_ns: i64,
    /// `Duration (us)`.
    pub duration_us: Option<f64>,
    /// `Active (us)`.
    pub active_us: Option<f64>,
    /// `Num activations`: engine activations (HW-trace slices) of the node.
    pub num_activations: Option<u64>,
    /// `MME Compute Utilization (%)`.
    pub mme_utilization_pct: Option<f64>,
    /// `Exposed tpc (us)`.
    pub exposed_tpc_us: Option<f64>,
    /// `Unexposed tpc (us)`.
    pub unexposed_tpc_us: Option<f64>,
    /// `Exposed mme (us)`.
    pub exposed_mme_us: Option<f64>,
    /// `Unexposed mme (us)`.
    pub unexposed_mme_us: Option<f64>,
    /// `Exposed dma (us)`.
    pub exposed_dma_us: Option<f64>,
    /// `Input shapes` as written.
    pub input_shapes: Option<String>,
    /// `Input Datatype` as written.
    pub input_dtypes: Option<String>,
    /// `Output shapes` as written.
    pub output_shapes: Option<String>,
    /// `Output Datatype` as written.
    pub output_dtypes: Option<String>,
    /// The node's own slice on the analyzed-nodes lane.
    pub slice: Option<SliceId>,
    /// HW-trace slices (`habana-hw-csv`, loaded in the same Timeline) of the same node name
    /// (without the ` iter N` suffix) that overlap the node's time range, in slice order.
    pub hw_slices: Vec<SliceId>,
}

/// One dump of a Gaudi bridge metric (`graph_compilation`, `cpu_fallback`, `recipe_cache`,
/// `memory_defragmentation`), as written to `PT_HPU_METRICS_FILE`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDump {
    /// Input it came from.
    pub source: u16,
    /// Metric name.
    pub metric: String,
    /// What triggered the dump: `process_exit`, `mark_step`, `metric_change`, `user`.
    pub triggered_by: String,
    /// When it was written, as given.
    pub generated_on: String,
    /// The statistics object, as written (counts, µs/ms times, per-op or per-recipe maps).
    pub statistics: serde_json::Value,
}

impl MetricDump {
    /// Reads one dump; `None` when it has no `metric_name` or no `statistics` object.
    #[must_use]
    pub fn from_json(value: &serde_json::Value) -> Option<Self> {
        let text = |key: &str| match value.get(key) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let metric = value.get("metric_name")?.as_str()?.to_owned();
        let statistics = value.get("statistics").filter(|s| s.is_object())?.clone();
        Some(Self {
            source: 0,
            metric,
            triggered_by: text("triggered_by"),
            generated_on: text("generated_on"),
            statistics,
        })
    }

    /// A statistic as a number (also when written as a numeric string).
    #[must_use]
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.statistics.get(key)? {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}
