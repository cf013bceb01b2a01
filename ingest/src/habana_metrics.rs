//! `habana-metrics`: the Gaudi PyTorch bridge's `PT_HPU_METRICS_FILE` JSON — a top-level array of
//! metric dumps `{metric_name, triggered_by, generated_on, statistics}` (graph_compilation,
//! cpu_fallback, recipe_cache, memory_defragmentation). The bridge writes it incrementally, so a
//! crashed run leaves the array unterminated: every complete dump before the damage is kept.

use crate::builder::TimelineBuilder;
use crate::error::IngestError;
use crate::json::Cursor;
use crate::model::{MetricDump, Warning};

/// What reading a metrics file produced.
pub(crate) struct MetricsSummary {
    pub(crate) events: u64,
    pub(crate) warnings: Vec<Warning>,
}

/// Whether a JSON document looks like a metrics file: an array whose first element has a
/// `metric_name` key and no trace-event `ph`.
pub(crate) fn looks_like_metrics(body: &[u8]) -> bool {
    let head = &body[..body.len().min(4096)];
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    first == Some(b'[')
        && memchr::memmem::find(head, b"\"metric_name\"").is_some()
        && memchr::memmem::find(head, b"\"ph\"").is_none()
}

pub(crate) fn read_metrics(
    bytes: &[u8],
    path: &str,
    builder: &mut TimelineBuilder,
    source: u16,
) -> Result<MetricsSummary, IngestError> {
    builder.device.saw_hpu = true;
    let mut cur = Cursor::new(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes));
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
        if events == 0 {
            return Err(IngestError::Damaged {
                path: path.to_owned(),
                offset: e.offset as u64,
                reason: format!("expected {} before the first metric dump", e.expected),
            });
        }
        warnings.push(Warning {
            code: "damaged",
            offset: Some(e.offset as u64),
            message: format!(
                "metrics file ends early or is damaged at byte {} (expected {}): kept the {events} dumps before it",
                e.offset, e.expected
            ),
        });
    }
    if skipped > 0 {
        warnings.push(Warning {
            code: "malformed_event",
            offset: None,
            message: format!("skipped {skipped} entries without metric_name/statistics"),
        });
    }
    Ok(MetricsSummary { events, warnings })
}
