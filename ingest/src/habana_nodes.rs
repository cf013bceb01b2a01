//! Gaudi Trace Analyzer "Analyzed Nodes" table (`habana-analyzed-nodes`, habana-formats.md
//! §4): the CSV (`Unit,Unique node id,Node Name,…`, 52 columns) and the JSON variant (an
//! object whose `analyzer_metadata` array holds one object per node, with `(usec)` in some keys
//! where the CSV writes `(us)`).
//!
//! Each row becomes a slice named after the node on the lane `analyzed nodes` / `<Unit> nodes`
//! (category `analyzed_node`, class `Other`: it is not device work, so busy time is not counted
//! twice when the HW trace is loaded too), and a [`NodeMetrics`] row on the Timeline, which the
//! builder binds to the node's slice and to the HW-trace slices it describes.

use std::borrow::Cow;

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::builder::TimelineBuilder;
use crate::csv::{Records, is_missing};
use crate::error::IngestError;
use crate::format::{FormatId, first_line, first_non_space};
use crate::gaudi::CATEGORY;
use crate::json::micros_to_ns;
use crate::model::{ArgsRef, LaneId, NodeMetrics, Warning, WarningCode};
use crate::reader::{ReadInput, ReadSummary, Reader};

/// Text the CSV header contains, used by `sniff`.
pub(crate) const HEADER_MARK: &[u8] = b"Unit,Unique node id,Node Name";

/// The JSON key holding the rows, used by `sniff`.
pub(crate) const JSON_KEY: &[u8] = b"\"analyzer_metadata\"";

/// A column name with `(usec)` spelled `(us)`, trimmed.
fn normalise(key: &str) -> Cow<'_, str> {
    let key = key.trim();
    if key.contains("(usec)") {
        Cow::Owned(key.replace("(usec)", "(us)"))
    } else {
        Cow::Borrowed(key)
    }
}

/// One row as `column → cell text`.
type Row<'a> = FxHashMap<Cow<'a, str>, Cow<'a, str>>;

struct NodeLoader<'b> {
    builder: &'b mut TimelineBuilder,
    source: u16,
    pid: LaneId,
    events: u64,
    bad_rows: u64,
    first_bad: Option<String>,
}

impl<'b> NodeLoader<'b> {
    fn new(builder: &'b mut TimelineBuilder, source: u16) -> Self {
        let pid = LaneId::Str(builder.intern("analyzed nodes"));
        builder.process_meta(source, pid, Some("analyzed nodes".into()), None, None);
        Self {
            builder,
            source,
            pid,
            events: 0,
            bad_rows: 0,
            first_bad: None,
        }
    }

    fn bad(&mut self, at: String) {
        self.bad_rows += 1;
        self.first_bad.get_or_insert(at);
    }

    /// Adds one node; `false` when it lacks a name, unit, or readable start/end.
    fn row(&mut self, row: &Row<'_>) -> bool {
        let text = |key: &str| {
            row.get(key)
                .map(|v| v.trim())
                .filter(|v| !is_missing(v))
                .map(str::to_owned)
        };
        let number = |key: &str| {
            text(key)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite())
        };
        let time = |key: &str| text(key).and_then(|v| micros_to_ns(v.as_bytes()));
        let (Some(name), Some(unit), Some(start_ns), Some(end_ns)) = (
            text("Node Name"),
            text("Unit"),
            time("Start time of node"),
            time("End time of node"),
        ) else {
            return false;
        };
        let tid = LaneId::Str(self.builder.intern(&unit));
        self.builder.thread_meta(
            self.source,
            self.pid,
            tid,
            Some(format!("{unit} nodes")),
            Some(match unit.as_str() {
                "MME" => 0,
                "TPC" => 1,
                _ => 2,
            }),
        );
        let track = self.builder.track(self.source, self.pid, tid);
        let name_id = self.builder.intern(&name);
        let cat = self.builder.intern_cat(CATEGORY);
        self.builder.push_slice(
            track,
            start_ns,
            end_ns - start_ns,
            name_id,
            cat,
            ArgsRef::NONE,
        );
        self.builder.push_node_metrics(NodeMetrics {
            source: self.source,
            name,
            unit,
            op_type: text("Op Type"),
            start_ns,
            end_ns,
            duration_us: number("Duration (us)"),
            active_us: number("Active (us)"),
            num_activations: number("Num activations")
                .filter(|v| *v >= 0.0 && v.fract() == 0.0)
                .map(|v| v as u64),
            mme_utilization_pct: number("MME Compute Utilization (%)"),
            exposed_tpc_us: number("Exposed tpc (us)"),
            unexposed_tpc_us: number("Unexposed tpc (us)"),
            exposed_mme_us: number("Exposed mme (us)"),
            unexposed_mme_us: number("Unexposed mme (us)"),
            exposed_dma_us: number("Exposed dma (us)"),
            input_shapes: text("Input shapes"),
            input_dtypes: text("Input Datatype"),
            output_shapes: text("Output shapes"),
            output_dtypes: text("Output Datatype"),
            slice: None,
            hw_slices: Vec::new(),
        });
        self.events += 1;
        true
    }

    fn finish(self, mut warnings: Vec<Warning>) -> ReadSummary {
        if self.bad_rows > 0 {
            warnings.push(Warning {
                code: WarningCode::MalformedRow,
                offset: None,
                message: format!(
                    "skipped {} node rows without a name, unit or readable start/end time (first at {})",
                    self.bad_rows,
                    self.first_bad.unwrap_or_default()
                ),
            });
        }
        if self.events == 0 && warnings.iter().all(|w| w.code != WarningCode::Damaged) {
            warnings.push(Warning {
                code: WarningCode::Empty,
                offset: None,
                message: "the table has no nodes".into(),
            });
        }
        ReadSummary {
            events: self.events,
            by_phase: if self.events > 0 {
                vec![('X', self.events)]
            } else {
                Vec::new()
            },
            warnings,
            ..ReadSummary::default()
        }
    }
}

/// Reads an Analyzed Nodes table (CSV, or the JSON variant when it starts with `{`).
pub(crate) fn read_analyzed_nodes(
    bytes: &[u8],
    path: &str,
    builder: &mut TimelineBuilder,
    source: u16,
) -> Result<ReadSummary, IngestError> {
    // Only the Gaudi profiler writes this table.
    builder.device_hints(source).saw_hpu = true;
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return read_json(body, path, builder, source);
    }
    read_csv(bytes, path, builder, source)
}

fn read_csv(
    bytes: &[u8],
    path: &str,
    builder: &mut TimelineBuilder,
    source: u16,
) -> Result<ReadSummary, IngestError> {
    let mut records = Records::new(bytes);
    let header = records.header(path)?;
    let names: Vec<Cow<'_, str>> = header.fields.iter().map(|f| normalise(f)).collect();
    for needed in [
        "Unit",
        "Node Name",
        "Start time of node",
        "End time of node",
    ] {
        if !names.iter().any(|n| n == needed) {
            return Err(IngestError::NotATrace {
                path: path.to_owned(),
                reason: format!("the Analyzed Nodes CSV header has no `{needed}` column"),
            });
        }
    }
    let mut loader = NodeLoader::new(builder, source);
    let mut warnings = Vec::new();
    let mut records = records.peekable();
    while let Some(record) = records.next() {
        let last = records.peek().is_none();
        if record.fields.len() != names.len() || record.open_quote {
            if last && (record.open_quote || !record.terminated) {
                if loader.events == 0 {
                    return Err(IngestError::Damaged {
                        path: path.to_owned(),
                        offset: record.offset as u64,
                        reason: format!(
                            "the first data row (line {}) is cut short: {} of {} columns",
                            record.line,
                            record.fields.len(),
                            names.len()
                        ),
                    });
                }
                warnings.push(Warning {
                    code: WarningCode::Damaged,
                    offset: Some(record.offset as u64),
                    message: format!(
                        "table damaged at line {} (byte {}): the row is cut short ({} of {} columns); kept the {} rows before it",
                        record.line,
                        record.offset,
                        record.fields.len(),
                        names.len(),
                        loader.events
                    ),
                });
                break;
            }
            loader.bad(format!("line {}", record.line));
            continue;
        }
        let row: Row<'_> = names.iter().cloned().zip(record.fields).collect();
        if !loader.row(&row) {
            loader.bad(format!("line {}", record.line));
        }
    }
    Ok(loader.finish(warnings))
}

fn read_json(
    bytes: &[u8],
    path: &str,
    builder: &mut TimelineBuilder,
    source: u16,
) -> Result<ReadSummary, IngestError> {
    // `--max-json-depth` before serde (whose own guard is a fixed 128 levels).
    let max_depth = builder.limits().max_json_depth;
    let mut cur = crate::json::Cursor::with_max_depth(
        bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
        max_depth,
    );
    if let Err(e) = cur.skip_value()
        && e.depth_limit
    {
        return Err(IngestError::LimitExceeded {
            path: path.to_owned(),
            what: "JSON nesting depth",
            limit: format!("{max_depth} levels (at byte {})", e.offset),
            flag: "--max-json-depth",
        });
    }
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| IngestError::Damaged {
        path: path.to_owned(),
        offset: byte_offset(bytes, e.line(), e.column()),
        reason: format!("Analyzed Nodes JSON: {e}"),
    })?;
    let Some(rows) = doc.get("analyzer_metadata").and_then(Value::as_array) else {
        return Err(IngestError::NotATrace {
            path: path.to_owned(),
            reason: "the Analyzed Nodes JSON has no `analyzer_metadata` array".into(),
        });
    };
    let mut loader = NodeLoader::new(builder, source);
    for (i, item) in rows.iter().enumerate() {
        let Some(object) = item.as_object() else {
            loader.bad(format!("analyzer_metadata[{i}]"));
            continue;
        };
        let row: Row<'_> = object
            .iter()
            .map(|(k, v)| {
                let cell = match v {
                    Value::String(s) => Cow::Borrowed(s.as_str()),
                    Value::Null => Cow::Borrowed(""),
                    other => Cow::Owned(other.to_string()),
                };
                (normalise(k), cell)
            })
            .collect();
        if !loader.row(&row) {
            loader.bad(format!("analyzer_metadata[{i}]"));
        }
    }
    Ok(loader.finish(Vec::new()))
}

/// Byte offset of a 1-based line/column position.
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> u64 {
    let line_start = memchr::memchr_iter(b'\n', bytes)
        .nth(line.saturating_sub(2))
        .map_or(0, |i| i + 1);
    let start = if line <= 1 { 0 } else { line_start };
    (start + column.saturating_sub(1)) as u64
}

/// The Trace Analyzer's Analyzed Nodes table, CSV or JSON.
pub(crate) struct AnalyzedNodesReader;

impl Reader for AnalyzedNodesReader {
    fn id(&self) -> FormatId {
        FormatId::HabanaAnalyzedNodes
    }

    fn sniff(&self, body: &[u8]) -> bool {
        match first_non_space(body) {
            // A JSON object with `analyzer_metadata` in its first 64 KiB and no `traceEvents`
            // before it: `views/trace_analyzer.json`.
            Some(b'{') => {
                let head = &body[..body.len().min(64 << 10)];
                memchr::memmem::find(head, JSON_KEY).is_some_and(|at| {
                    memchr::memmem::find(&head[..at], b"\"traceEvents\"").is_none()
                })
            }
            Some(b'[') => false,
            _ => first_line(body)
                .windows(HEADER_MARK.len())
                .any(|w| w == HEADER_MARK),
        }
    }

    fn read(
        &self,
        input: ReadInput<'_, '_>,
        builder: &mut TimelineBuilder,
    ) -> Result<ReadSummary, IngestError> {
        read_analyzed_nodes(input.bytes(), input.path, builder, input.source)
    }
}

#[cfg(test)]
mod tests {
    use super::normalise;
    use crate::gaudi::base_node_name;

    #[test]
    fn iteration_suffix_and_usec_spelling() {
        assert_eq!(base_node_name("g_1_conv_0 iter 12"), "g_1_conv_0");
        assert_eq!(base_node_name("g_1_conv_0"), "g_1_conv_0");
        assert_eq!(base_node_name("a iter b"), "a iter b");
        assert_eq!(
            normalise("MME Origin Expected (usec)"),
            "MME Origin Expected (us)"
        );
    }
}
