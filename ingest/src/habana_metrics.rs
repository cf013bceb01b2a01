//! `habana-metrics`: the Gaudi PyTorch bridge's `PT_HPU_METRICS_FILE` JSON — a top-level array of
//! metric dumps `{metric_name, triggered_by, generated_on, statistics}` (graph_compilation,
//! cpu_fallback, recipe_cache, memory_defragmentation). The bridge writes it incrementally, so a
//! crashed run leaves the array unterminated: every complete dump before the damage is kept.

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::format::FormatId;
use crate::json::Cursor;
use crate::model::{MetricDump, Warning, WarningCode};
use crate::reader::{ReadInput, ReadSummary, Reader};

/// Whether a JSON document looks like a metrics file: an array whose first element has a
/// `metric_name` key and no trace-event `ph`.
pub(crate) fn looks_like_metrics(body: &[u8]) -> bool {
    let head = &body[..body.len().min(4096)];
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    first == Some(b'[')
        && memchr::memmem::find(head, b"\"metric_name\"").is_some()
        && memchr::memmem::find(head, b"\"ph\"").is_none()
}

/// The rank in a per-rank metrics file name: the bridge writes `<base>-rank<N><ext>`.
pub(crate) fn rank_from_path(path: &str) -> Option<i64> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let at = name.rfind("-rank")?;
    let digits: String = name[at + "-rank".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

pub(crate) fn read_metrics(
    bytes: &[u8],
    path: &str,
    builder: &mut TimelineBuilder,
    source: u16,
) -> Result<ReadSummary, IngestError> {
    builder.device_hints(source).saw_hpu = true;
    let max_depth = builder.limits().max_json_depth;
    let mut cur = Cursor::with_max_depth(
        bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
        max_depth,
    );
    let mut warnings = Vec::new();
    let mut events = 0u64;
    let mut skipped = 0u64;
    let damage = (|| -> crate::json::Result<()> {
        cur.expect(b'[', "'['")?;
        if cur.peek() == Some(b']') {
            return Ok(());
        }
        loop {
            let range = cur.skip_value()?;
            let parsed: Option<serde_json::Value> = cur
                .buf
                .get(range)
                .and_then(|raw| serde_json::from_slice(raw).ok());
            match parsed.as_ref().and_then(MetricDump::from_json) {
                Some(mut dump) => {
                    dump.source = source;
                    builder.push_metric(dump);
                    events += 1;
                }
                None => skipped += 1,
            }
            if !cur.next_member(b']', "',' or ']' between metric dumps")? {
                return Ok(());
            }
        }
    })();
    if let Err(e) = damage {
        if e.depth_limit {
            return Err(IngestError::LimitExceeded {
                path: path.to_owned(),
                what: "JSON nesting depth",
                limit: format!("{max_depth} levels (at byte {})", e.offset),
                flag: "--max-json-depth",
            });
        }
        if events == 0 {
            return Err(IngestError::Damaged {
                path: path.to_owned(),
                offset: e.offset as u64,
                reason: format!("expected {} before the first metric dump", e.expected),
            });
        }
        warnings.push(Warning {
            code: WarningCode::Damaged,
            offset: Some(e.offset as u64),
            message: format!(
                "metrics file ends early or is damaged at byte {} (expected {}): kept the {events} dumps before it",
                e.offset, e.expected
            ),
        });
    }
    if skipped > 0 {
        warnings.push(Warning {
            code: WarningCode::MalformedEvent,
            offset: None,
            message: format!("skipped {skipped} entries without metric_name/statistics"),
        });
    }
    Ok(ReadSummary {
        events,
        warnings,
        rank: rank_from_path(path),
        ..ReadSummary::default()
    })
}

/// The Gaudi bridge's metrics file.
pub(crate) struct MetricsReader;

impl Reader for MetricsReader {
    fn id(&self) -> FormatId {
        FormatId::HabanaMetrics
    }

    fn sniff(&self, body: &[u8]) -> bool {
        looks_like_metrics(body)
    }

    fn read(
        &self,
        input: ReadInput<'_, '_>,
        builder: &mut TimelineBuilder,
    ) -> Result<ReadSummary, IngestError> {
        read_metrics(input.bytes(), input.path, builder, input.source)
    }
}

#[cfg(test)]
mod tests {
    use super::rank_from_path;

    #[test]
    fn ranks_from_file_names() {
        assert_eq!(rank_from_path("/runs/metrics-rank3.json"), Some(3));
        assert_eq!(rank_from_path("metrics-rank12.json.1"), Some(12));
        assert_eq!(rank_from_path("metrics.json"), None);
    }
}
