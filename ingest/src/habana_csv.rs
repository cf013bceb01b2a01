//! Gaudi HW-trace CSV (`habana-hw-csv`, habana-formats.md §3): one row per hardware event of
//! the Gaudi profiler, 23 columns found by name.
//!
//! - every `Engine` (`[HD3] TPC 5`, `[HD0] MME`) becomes a device engine track of the process
//!   named after `Device` (`accel0`, labelled `HPU 0`), ordered MME, TPC, other, then by die and
//!   index;
//! - `BEGIN`/`END` rows pair per (`Engine`, `Context ID`) into slices named after the node
//!   (`Name`), category `Kernel` (device work); an `END` without `BEGIN` is counted, a `BEGIN`
//!   left open is closed by the builder at the last time seen on its track;
//! - `INSTANT` rows are instants named after `HW Event description`, category `hw_event`;
//! - `COUNTER` rows (SPMU) are counter samples, one series per engine and `Name`; the u64
//!   value is stored as written (wrapped "negative" values such as `18446744073709551415` stay
//!   huge and are counted in a warning);
//! - `Operation` / `Data Type` per node and the recipes (`Recipe ID`, `Recipe name`,
//!   `recipeHandle`) go to the source's `top_level` as JSON text (`nodes`, `recipes`).
//!
//! A last row with fewer columns (a file cut short) keeps the rows before it with a `damaged`
//! warning naming its line and byte offset.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value, json};

use crate::builder::TimelineBuilder;
use crate::csv::{Record, Records};
use crate::error::IngestError;
use crate::format::FormatId;
use crate::gaudi::engine_class as gaudi_engine_class;
use crate::json::micros_to_ns;
use crate::model::{ArgsRef, CatId, EngineClass, LaneId, StrId, TrackId, Warning, WarningCode};
use crate::reader::{ReadInput, ReadSummary, Reader};

/// The header's first columns, used by `sniff`.
pub(crate) const HEADER_PREFIX: &[u8] = b"Name,Trace Source,Engine,Event type";

/// Columns the reader needs, by name.
const REQUIRED: [&str; 8] = [
    "Name",
    "Engine",
    "Event type",
    "Timestamp[usec]",
    "Context ID",
    "Device",
    "HW Event description",
    "SPMU value",
];

/// Columns read when present.
const OPTIONAL: [&str; 5] = [
    "Operation",
    "Data Type",
    "Recipe ID",
    "Recipe name",
    "recipeHandle",
];

/// Column indexes by role.
struct Columns {
    count: usize,
    name: usize,
    engine: usize,
    event: usize,
    ts: usize,
    context: usize,
    device: usize,
    description: usize,
    spmu: usize,
    operation: Option<usize>,
    dtype: Option<usize>,
    recipe_id: Option<usize>,
    recipe_name: Option<usize>,
    recipe_handle: Option<usize>,
}

impl Columns {
    fn from_header(header: &Record<'_>, path: &str) -> Result<Self, IngestError> {
        let find = |name: &str| header.fields.iter().position(|f| f.trim() == name);
        let mut required = [0usize; REQUIRED.len()];
        for (slot, name) in required.iter_mut().zip(REQUIRED) {
            *slot = find(name).ok_or_else(|| IngestError::NotATrace {
                path: path.to_owned(),
                reason: format!(
                    "the Gaudi HW-trace CSV header has no `{name}` column (found {} columns: {})",
                    header.fields.len(),
                    header.fields.join(",")
                ),
            })?;
        }
        let [name, engine, event, ts, context, device, description, spmu] = required;
        let [operation, dtype, recipe_id, recipe_name, recipe_handle] = OPTIONAL.map(find);
        Ok(Self {
            count: header.fields.len(),
            name,
            engine,
            event,
            ts,
            context,
            device,
            description,
            spmu,
            operation,
            dtype,
            recipe_id,
            recipe_name,
            recipe_handle,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct OpenHw {
    start: i64,
    name: StrId,
}

/// Reads a HW-trace CSV into `builder`.
pub(crate) fn read_hw_csv(
    bytes: &[u8],
    path: &str,
    builder: &mut TimelineBuilder,
    source: u16,
) -> Result<ReadSummary, IngestError> {
    let mut records = Records::new(bytes);
    let header = records.header(path)?;
    let cols = Columns::from_header(&header, path)?;
    builder.device_hints(source).saw_hpu = true;
    let kernel = builder.intern_cat("Kernel");
    let hw_event = builder.intern_cat("hw_event");

    let mut reader = HwReader {
        builder,
        source,
        kernel,
        hw_event,
        lanes: FxHashMap::default(),
        open: FxHashMap::default(),
        phases: [0; 4],
        wrapped: 0,
        first_wrapped: None,
        bad_rows: 0,
        first_bad: None,
        nodes: Map::new(),
        recipes: Vec::new(),
    };
    let mut summary = ReadSummary::default();
    let mut events = 0u64;
    let mut records = records.peekable();
    while let Some(record) = records.next() {
        let last = records.peek().is_none();
        if record.fields.len() != cols.count || record.open_quote {
            if last && (record.open_quote || !record.terminated) {
                if events == 0 {
                    return Err(IngestError::Damaged {
                        path: path.to_owned(),
                        offset: record.offset as u64,
                        reason: format!(
                            "the first data row (line {}) is cut short: {} of {} columns",
                            record.line,
                            record.fields.len(),
                            cols.count
                        ),
                    });
                }
                summary.warnings.push(Warning {
                    code: WarningCode::Damaged,
                    offset: Some(record.offset as u64),
                    message: format!(
                        "trace damaged at line {} (byte {}): the row is cut short ({} of {} columns); kept the {events} rows before it",
                        record.line,
                        record.offset,
                        record.fields.len(),
                        cols.count
                    ),
                });
                break;
            }
            reader.bad_row(record.line);
            continue;
        }
        if reader.row(&cols, &record) {
            events += 1;
        } else {
            reader.bad_row(record.line);
        }
    }
    reader.close_open();
    summary.events = events;
    summary.by_phase = ['B', 'C', 'E', 'i']
        .into_iter()
        .zip([
            reader.phases[0],
            reader.phases[3],
            reader.phases[1],
            reader.phases[2],
        ])
        .filter(|(_, n)| *n > 0)
        .collect();
    if reader.bad_rows > 0 {
        summary.warnings.push(Warning {
            code: WarningCode::MalformedRow,
            offset: None,
            message: format!(
                "skipped {} rows with a wrong number of columns, an unknown event type or an unreadable timestamp (first at line {})",
                reader.bad_rows,
                reader.first_bad.unwrap_or(0)
            ),
        });
    }
    if reader.wrapped > 0 {
        summary.warnings.push(Warning {
            code: WarningCode::SpmuWrapped,
            offset: None,
            message: format!(
                "{} SPMU counter values are above 2^63 (wrapped negative u64 such as {}); kept as written",
                reader.wrapped,
                reader.first_wrapped.unwrap_or(0)
            ),
        });
    }
    if events == 0
        && summary
            .warnings
            .iter()
            .all(|w| w.code != WarningCode::Damaged)
    {
        summary.warnings.push(Warning {
            code: WarningCode::Empty,
            offset: None,
            message: "the trace has no events".into(),
        });
    }
    if !reader.nodes.is_empty() {
        summary
            .top_level
            .push(("nodes".into(), Value::Object(reader.nodes).to_string()));
    }
    if !reader.recipes.is_empty() {
        summary
            .top_level
            .push(("recipes".into(), Value::Array(reader.recipes).to_string()));
    }
    Ok(summary)
}

struct HwReader<'b> {
    builder: &'b mut TimelineBuilder,
    source: u16,
    kernel: CatId,
    hw_event: CatId,
    /// (device, engine) → (pid, track).
    lanes: FxHashMap<(StrId, StrId), (LaneId, TrackId)>,
    /// (track, context id) → open BEGINs.
    open: FxHashMap<(TrackId, StrId), Vec<OpenHw>>,
    /// Rows per type: BEGIN, END, INSTANT, COUNTER.
    phases: [u64; 4],
    wrapped: u64,
    first_wrapped: Option<u64>,
    bad_rows: u64,
    first_bad: Option<usize>,
    nodes: Map<String, Value>,
    recipes: Vec<Value>,
}

impl HwReader<'_> {
    fn bad_row(&mut self, line: usize) {
        self.bad_rows += 1;
        self.first_bad.get_or_insert(line);
    }

    /// The engine's track, creating it (and its lane metadata) on first use.
    fn lane(&mut self, device: &str, engine: &str) -> (LaneId, TrackId) {
        let device_id = self.builder.intern(device);
        let engine_id = self.builder.intern(engine);
        if let Some(&lane) = self.lanes.get(&(device_id, engine_id)) {
            return lane;
        }
        let pid = LaneId::Str(device_id);
        let tid = LaneId::Str(engine_id);
        let ordinal: i64 = device
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(0);
        self.builder.process_meta(
            self.source,
            pid,
            Some(device.to_owned()),
            Some(format!("HPU {ordinal}")),
            Some(ordinal),
        );
        self.builder.thread_meta(
            self.source,
            pid,
            tid,
            Some(engine.to_owned()),
            Some(engine_sort_index(engine)),
        );
        let track = self.builder.track(self.source, pid, tid);
        self.lanes.insert((device_id, engine_id), (pid, track));
        (pid, track)
    }

    /// Reads one data row; `false` when it cannot be used.
    fn row(&mut self, cols: &Columns, record: &Record<'_>) -> bool {
        let f = |i: usize| record.fields.get(i).map_or("", |s| s.trim());
        let Some(ts) = micros_to_ns(f(cols.ts).as_bytes()) else {
            return false;
        };
        let engine = f(cols.engine);
        let device = f(cols.device);
        let name = f(cols.name);
        let kind = match f(cols.event) {
            "BEGIN" => 0,
            "END" => 1,
            "INSTANT" => 2,
            "COUNTER" => 3,
            _ => return false,
        };
        if engine.is_empty() {
            return false;
        }
        if kind == 3 {
            let raw = f(cols.spmu);
            let Ok(value) = raw.parse::<u64>() else {
                return false;
            };
            if value > i64::MAX as u64 {
                self.wrapped += 1;
                self.first_wrapped.get_or_insert(value);
            }
            let pid = LaneId::Str(self.builder.intern(device));
            self.builder.push_counter(
                self.source,
                pid,
                &format!("{engine}: {name}"),
                ts,
                value as f64,
            );
            self.phases[3] += 1;
            return true;
        }
        let (_, track) = self.lane(device, engine);
        self.note_node(cols, record, name);
        match kind {
            0 => {
                let context = self.builder.intern(f(cols.context));
                let name = self.builder.intern(name);
                self.open
                    .entry((track, context))
                    .or_default()
                    .push(OpenHw { start: ts, name });
            }
            1 => {
                let context = self.builder.intern(f(cols.context));
                match self.open.get_mut(&(track, context)).and_then(Vec::pop) {
                    Some(open) => self.builder.push_slice(
                        track,
                        open.start,
                        ts - open.start,
                        open.name,
                        self.kernel,
                        ArgsRef::NONE,
                    ),
                    // Nothing open on the track in the builder: counted as an unmatched end.
                    None => self.builder.count_unmatched_end(),
                }
            }
            _ => {
                let description = f(cols.description);
                let label = self.builder.intern(if description.is_empty() {
                    name
                } else {
                    description
                });
                self.builder
                    .push_instant(track, ts, label, self.hw_event, b't', ArgsRef::NONE);
            }
        }
        self.phases[kind] += 1;
        true
    }

    /// Records the node's operation and data type, and the recipe, once each.
    fn note_node(&mut self, cols: &Columns, record: &Record<'_>, name: &str) {
        let f = |i: Option<usize>| {
            i.and_then(|i| record.fields.get(i))
                .map_or("", |s| s.trim())
                .to_owned()
        };
        if !name.is_empty() && !self.nodes.contains_key(name) {
            self.nodes.insert(
                name.to_owned(),
                json!({ "Operation": f(cols.operation), "Data Type": f(cols.dtype) }),
            );
        }
        let (id, recipe, handle) = (
            f(cols.recipe_id),
            f(cols.recipe_name),
            f(cols.recipe_handle),
        );
        if id.is_empty() && recipe.is_empty() {
            return;
        }
        let entry = json!({ "Recipe ID": id, "Recipe name": recipe, "recipeHandle": handle });
        if !self.recipes.contains(&entry) {
            self.recipes.push(entry);
        }
    }

    /// Hands BEGINs left open to the builder, which closes them at the last time seen on their
    /// track and counts them in its `unclosed_begin` warning.
    fn close_open(&mut self) {
        let mut open: Vec<((TrackId, StrId), Vec<OpenHw>)> = self.open.drain().collect();
        open.sort_by_key(|(k, _)| *k);
        for ((track, _), stack) in open {
            for o in stack {
                self.builder
                    .push_begin(track, o.start, o.name, self.kernel, ArgsRef::NONE);
            }
        }
    }
}

/// Display order of an engine lane: MME, TPC, DMA, NIC, ROTATOR, others; then die (`[HD3]`,
/// `[D0]`), then the engine index (`TPC 5`).
fn engine_sort_index(engine: &str) -> i64 {
    let class_rank = match gaudi_engine_class(engine) {
        Some(EngineClass::Mme) => 0,
        Some(EngineClass::Tpc) => 1,
        Some(EngineClass::Dma) => 2,
        Some(EngineClass::Nic) => 3,
        Some(EngineClass::Rotator) => 4,
        _ => 5,
    };
    let die = engine
        .trim()
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .and_then(|(die, _)| {
            die.trim_start_matches(|c: char| !c.is_ascii_digit())
                .parse::<i64>()
                .ok()
        })
        .unwrap_or(0);
    let index = engine
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|d| d.parse::<i64>().ok())
        .unwrap_or(0);
    class_rank * 1_000_000 + die.min(999) * 1_000 + index.min(999)
}

/// The Gaudi HW-trace CSV.
pub(crate) struct HwCsvReader;

impl Reader for HwCsvReader {
    fn id(&self) -> FormatId {
        FormatId::HabanaHwCsv
    }

    fn sniff(&self, body: &[u8]) -> bool {
        body.starts_with(HEADER_PREFIX)
    }

    fn read(
        &self,
        input: ReadInput<'_, '_>,
        builder: &mut TimelineBuilder,
    ) -> Result<ReadSummary, IngestError> {
        read_hw_csv(input.bytes(), input.path, builder, input.source)
    }
}

#[cfg(test)]
mod tests {
    use super::engine_sort_index;

    #[test]
    fn engines_order_mme_then_tpc_by_die_and_index() {
        let mut names = [
            "[HD1] TPC 0",
            "[HD0] TPC 5",
            "[HD7] MME",
            "[HD0] MME",
            "[HD0] TPC 1",
        ];
        names.sort_by_key(|n| engine_sort_index(n));
        assert_eq!(
            names,
            [
                "[HD0] MME",
                "[HD7] MME",
                "[HD0] TPC 1",
                "[HD0] TPC 5",
                "[HD1] TPC 0"
            ]
        );
    }
}
