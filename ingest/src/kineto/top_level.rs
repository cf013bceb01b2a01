//! The document's top level: the object around `traceEvents`, its other keys kept as metadata
//! (`deviceProperties` and `distributedInfo` read), and what an object without events is.

use super::{KinetoReader, looks_like_trace};
use crate::error::IngestError;
use crate::json;
use crate::model::{Warning, WarningCode};

/// Top-level values longer than this are not kept as metadata text.
const MAX_TOP_LEVEL_VALUE: usize = 1 << 20;

impl<'a, 'b, 'p> KinetoReader<'a, 'b, 'p> {
    pub(super) fn object(&mut self) -> Result<(), IngestError> {
        self.cur.pos += 1;
        let mut saw_events = false;
        let result = self.object_members(&mut saw_events);
        if let Err(e) = result {
            if saw_events {
                // Damage after the events (e.g. a cut `traceName`) loses nothing that matters,
                // but is still worth a line.
                self.damaged(e)?;
                return Ok(());
            }
            if self.events == 0 && !looks_like_trace(self.cur.buf) {
                return Err(self.not_a_trace(format!(
                    "invalid JSON at byte {} (expected {}) and no trace events",
                    e.offset, e.expected
                )));
            }
            self.damaged(e)?;
            return Ok(());
        }
        if !saw_events {
            return Err(self.not_a_trace(self.what_object_is()));
        }
        Ok(())
    }

    fn object_members(&mut self, saw_events: &mut bool) -> json::Result<()> {
        if self.resumable(Self::next_byte)? == Some(b'}') {
            self.cur.pos += 1;
            self.wait_for_all();
            return Ok(());
        }
        loop {
            let (key, is_array) = self.resumable(|r| {
                let key = r.cur.string()?;
                r.cur.expect(b':', "':' after a key")?;
                Ok((key, r.next_byte()? == Some(b'[')))
            })?;
            if key == "traceEvents" && is_array {
                *saw_events = true;
                self.events_array()?;
            } else {
                let range = self.resumable(|r| r.cur.skip_value())?;
                self.top_level_value(&key, range);
            }
            if !self.resumable(|r| {
                r.cur
                    .next_member(b'}', "',' or '}' in the top-level object")
            })? {
                break;
            }
        }
        self.wait_for_all();
        if !self.cur.at_end() {
            self.warnings.push(Warning {
                code: WarningCode::TrailingData,
                offset: Some(self.cur.pos as u64),
                message: format!(
                    "ignored data after the end of the JSON at byte {}",
                    self.cur.pos
                ),
            });
        }
        Ok(())
    }

    /// What a top-level object without a `traceEvents` array is, from its keys: a steplens
    /// document (with or without its `schema` key), else the keys it has.
    fn what_object_is(&self) -> String {
        let has = |key: &str| self.top_keys.iter().any(|k| k == key);
        let schema = self
            .top_level
            .iter()
            .find(|(k, _)| k == "schema")
            .map(|(_, v)| v.trim().trim_matches('"').to_owned());
        if let Some(schema) = schema.filter(|s| s.starts_with("steplens.")) {
            return crate::documents::Document::refusal(&schema);
        }
        if has("sources") && has("summary") && has("findings") {
            return "a steplens report without its \"schema\" key (\"schema\": \
                    \"steplens.report/1\"): write it again with steplens report -f json, or \
                    give the traces it came from"
                .to_owned();
        }
        let mut keys: Vec<&str> = self.top_keys.iter().map(String::as_str).take(8).collect();
        if self.top_keys.len() > 8 {
            keys.push("…");
        }
        if keys.is_empty() {
            "an empty JSON object, no \"traceEvents\" array (expected a Chrome/Kineto trace)"
                .to_owned()
        } else {
            format!(
                "a JSON object with the keys {} and no \"traceEvents\" array (expected a \
                 Chrome/Kineto trace)",
                keys.join(", ")
            )
        }
    }

    fn top_level_value(&mut self, key: &str, range: std::ops::Range<usize>) {
        if self.top_keys.len() < 32 {
            // Only to be named in an error: a key of any length is cut to 40 characters.
            self.top_keys.push(match key.char_indices().nth(40) {
                Some((at, _)) => format!("{}…", &key[..at]),
                None => key.to_owned(),
            });
        }
        let Some(raw) = self.cur.buf.get(range) else {
            return;
        };
        match key {
            "deviceProperties" => self.device_properties(raw),
            "distributedInfo" => {
                if let Ok(info) = serde_json::from_slice::<serde_json::Value>(raw) {
                    self.rank = info.get("rank").and_then(serde_json::Value::as_i64);
                    self.world_size = info.get("world_size").and_then(serde_json::Value::as_i64);
                }
            }
            _ => {}
        }
        if raw.len() <= MAX_TOP_LEVEL_VALUE {
            self.top_level
                .push((key.to_owned(), String::from_utf8_lossy(raw).into_owned()));
        }
    }

    fn device_properties(&mut self, raw: &[u8]) {
        let Ok(serde_json::Value::Array(devices)) = serde_json::from_slice(raw) else {
            return;
        };
        let hints = self.builder.device_hints(self.source);
        hints.property_count = devices.len();
        for device in &devices {
            if hints.memory_bytes.is_none() {
                hints.memory_bytes = device
                    .get("totalGlobalMem")
                    .and_then(serde_json::Value::as_i64);
            }
            if hints.compute_capability.is_none() {
                let part = |key| device.get(key).and_then(serde_json::Value::as_i64);
                hints.compute_capability = part("computeMajor")
                    .map(|major| format!("{major}.{}", part("computeMinor").unwrap_or(0)));
            }
            if let Some(name) = device.get("name").and_then(serde_json::Value::as_str) {
                hints.names.push(name.to_owned());
                if name.contains("HPU") || name.contains("GAUDI") || name.contains("Gaudi") {
                    hints.saw_hpu = true;
                }
            }
            if device.get("maxSharedMemoryPerMultiProcessor").is_some()
                || device.get("gcnArchName").is_some()
            {
                hints.rocm_properties = true;
            }
        }
    }
}
