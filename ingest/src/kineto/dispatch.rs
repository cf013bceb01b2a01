//! One event into the builder, by phase: complete and begin/end slices, instants, flows,
//! nestable async events, counters and metadata; what the events say about the device.

use std::borrow::Cow;

use super::event::{RawEvent, RawLane};
use super::flow_v2::{FlowV2End, V2Slice};
use super::memory::MemorySample;
use super::{Flavor, KinetoReader};
use crate::builder::{FlowPhase, TimelineBuilder};
use crate::json::{self, Cursor};
use crate::model::{ArgsRef, CategoryClass, LaneId};

impl<'a, 'b, 'p> KinetoReader<'a, 'b, 'p> {
    /// The builder's id of a pid or tid.
    fn lane(&mut self, lane: &RawLane<'_>) -> LaneId {
        match lane {
            RawLane::Int(v) => LaneId::Int(*v),
            RawLane::Str(s) => LaneId::Str(self.builder.intern(s)),
        }
    }

    pub(super) fn dispatch(&mut self, ev: &RawEvent<'_>) {
        if ev.bad_field != 0 {
            if let Some(n) = self.wrong_types.get_mut(usize::from(ev.bad_field) - 1) {
                *n += 1;
            }
            return;
        }
        if let Some(slot) = self.by_phase.get_mut(usize::from(ev.ph)) {
            *slot += 1;
        }
        let source = self.source;
        let pid = ev.pid.as_ref().map_or(LaneId::Int(0), |p| self.lane(p));
        // Perfetto puts an event without a tid on the thread whose id is its pid.
        let tid = ev.tid.as_ref().map_or(pid, |t| self.lane(t));
        let args = match ev.args.clone() {
            Some(range) => ArgsRef::new(range.clone()).unwrap_or_else(|| {
                // Too long for a slice's args reference: kept out, and said.
                if !range.is_empty() {
                    self.args_too_long.0 += 1;
                    self.args_too_long.1 = self.args_too_long.1.max(range.len());
                }
                ArgsRef::NONE
            }),
            None => ArgsRef::NONE,
        };
        match ev.ph {
            b'X' | b'B' | b'i' | b'I' | b'R' | b's' | b't' | b'f' => {
                let Some(ts) = ev.ts else {
                    self.builder.count_malformed();
                    return;
                };
                let b = &mut *self.builder;
                let mut cat = b.intern_cat(ev.cat.as_deref().unwrap_or(""));
                if self.flavor == Flavor::SynapseTef
                    && matches!(ev.ph, b'X' | b'B')
                    && b.cat_class(cat) == CategoryClass::Other
                {
                    // Synapse's own categories say nothing steplens can use: an event on an
                    // engine-type process is an engine execution, one on `***Host` an API call.
                    let host = self.tef_host_pids.contains(&pid);
                    cat = b.intern_cat(if host { "Runtime" } else { "Kernel" });
                }
                if matches!(ev.ph, b'X' | b'B')
                    && b.cat_class(cat) == CategoryClass::CpuOp
                    && ev.cat.as_deref().is_some_and(is_legacy_annotation_category)
                    && ev.name.as_deref().is_some_and(is_profiler_annotation)
                {
                    // PyTorch 1.8–1.9 wrote `record_function` ranges as `Operator`s; read them as
                    // the annotations newer traces call them, so steps and ops come out the same.
                    cat = b.intern_cat("user_annotation");
                }
                let track = b.track(source, pid, tid);
                match ev.ph {
                    b'X' => {
                        let Some(dur) = ev.dur else {
                            b.count_malformed();
                            return;
                        };
                        let name = ev.name.as_deref().unwrap_or("");
                        note_device_hints(b, source, b.cat_class(cat), name, ev.cat.as_deref());
                        let name = b.intern(name);
                        let index = b.slice_count();
                        b.push_slice(track, ts, dur, name, cat, args);
                        if let Some(id) = ev.bind_id
                            && b.slice_count() > index
                            && (ev.flow_in || ev.flow_out)
                        {
                            self.flow_v2.push(FlowV2End {
                                id,
                                slice: V2Slice::Index(index),
                                track,
                                ts,
                                flow_in: ev.flow_in,
                                flow_out: ev.flow_out,
                            });
                        }
                    }
                    b'B' => {
                        let name = b.intern(ev.name.as_deref().unwrap_or(""));
                        b.push_begin(track, ts, name, cat, args);
                        if let Some(id) = ev.bind_id
                            && (ev.flow_in || ev.flow_out)
                        {
                            self.flow_v2.push(FlowV2End {
                                id,
                                slice: V2Slice::Begin(track, ts),
                                track,
                                ts,
                                flow_in: ev.flow_in,
                                flow_out: ev.flow_out,
                            });
                        }
                    }
                    b's' | b't' | b'f' => {
                        let Some(id) = ev.id else {
                            b.count_malformed();
                            return;
                        };
                        let phase = match ev.ph {
                            b's' => FlowPhase::Start,
                            b't' => FlowPhase::Step,
                            _ => FlowPhase::Finish,
                        };
                        b.push_flow(cat, id, phase, track, ts, ev.bind_enclosing);
                    }
                    _ => {
                        let name_text = ev.name.as_deref().unwrap_or("");
                        if name_text == "[memory]"
                            && let Some(sample) = ev
                                .args
                                .clone()
                                .and_then(|r| self.cur.buf.get(r))
                                .and_then(MemorySample::parse)
                        {
                            self.memory.push((pid, ts, sample));
                        }
                        let name = b.intern(name_text);
                        b.push_instant(track, ts, name, cat, ev.scope, args);
                    }
                }
            }
            b'E' => {
                let Some(ts) = ev.ts else {
                    self.builder.count_malformed();
                    return;
                };
                let track = self.builder.track(source, pid, tid);
                self.builder.push_end(track, ts);
            }
            b'b' | b'e' | b'n' => self.async_event(ev, pid, args),
            b'C' => self.counter(ev, pid),
            b'M' => self.metadata(ev, pid, tid),
            _ => self.builder.count_unsupported(),
        }
    }

    /// Nestable async events (`b`/`e`/`n`) of one category and id share an async track, as
    /// Perfetto draws them: `b`/`e` pairs become slices, `n` instants. An `id` (or
    /// `id2: {"global": …}`) names a track of the whole trace (`async`), an
    /// `id2: {"local": …}` one of the process (`<pid> async`).
    fn async_event(&mut self, ev: &RawEvent<'_>, pid: LaneId, args: ArgsRef) {
        let (Some(ts), Some(id)) = (ev.ts, ev.id) else {
            self.builder.count_malformed();
            return;
        };
        let b = &mut *self.builder;
        let cat_text = ev.cat.as_deref().unwrap_or("");
        let process = match pid {
            _ if !ev.id_local => "async".to_owned(),
            LaneId::Int(v) => format!("{v} async"),
            LaneId::Str(s) => format!("{} async", b.string(s)),
        };
        let lane = if cat_text.is_empty() {
            format!("{id:#x}")
        } else {
            format!("{cat_text} {id:#x}")
        };
        let (process, lane) = (
            LaneId::Str(b.intern(&process)),
            LaneId::Str(b.intern(&lane)),
        );
        let track = b.track(self.source, process, lane);
        let cat = b.intern_cat(cat_text);
        let name = b.intern(ev.name.as_deref().unwrap_or(""));
        match ev.ph {
            b'b' => b.push_begin(track, ts, name, cat, args),
            b'e' => b.push_end(track, ts),
            _ => b.push_instant(track, ts, name, cat, b't', args),
        }
    }

    fn counter(&mut self, ev: &RawEvent<'_>, pid: LaneId) {
        let (Some(ts), Some(range)) = (ev.ts, ev.args.clone()) else {
            self.builder.count_malformed();
            return;
        };
        let name = ev.name.as_deref().unwrap_or("");
        let mut cur = Cursor::new(self.cur.buf.get(range).unwrap_or(b"{}"));
        let mut series = Vec::new();
        let _ = (|| -> json::Result<()> {
            cur.expect(b'{', "{")?;
            if cur.peek() == Some(b'}') {
                return Ok(());
            }
            loop {
                let key = cur.string()?;
                cur.expect(b':', ":")?;
                let value = if matches!(cur.peek(), Some(b'{' | b'[')) {
                    cur.skip_value()?;
                    None
                } else {
                    let text = if cur.peek() == Some(b'"') {
                        cur.raw_string()?.0
                    } else {
                        cur.scalar_text()?
                    };
                    std::str::from_utf8(text)
                        .ok()
                        .and_then(|t| t.parse::<f64>().ok())
                };
                if let Some(v) = value {
                    series.push((key.into_owned(), v));
                }
                if !cur.next_member(b'}', ",")? {
                    return Ok(());
                }
            }
        })();
        for (key, value) in series {
            let label = if key == name || name.is_empty() {
                key
            } else {
                format!("{name} {key}")
            };
            self.builder
                .push_counter(self.source, pid, &label, ts, value);
        }
    }

    fn metadata(&mut self, ev: &RawEvent<'_>, pid: LaneId, tid: LaneId) {
        let Some(args) = ev.args.clone().and_then(|r| self.cur.buf.get(r)) else {
            return;
        };
        let text = |key: &[u8]| -> Option<String> {
            let raw = json::find_key(args, key)?;
            let mut cur = Cursor::new(raw);
            cur.string().ok().map(Cow::into_owned)
        };
        let int = |key: &[u8]| json::find_key(args, key).and_then(json::lenient_int);
        let source = self.source;
        match ev.name.as_deref().unwrap_or("") {
            "process_name" => {
                let name = text(b"name");
                if let Some(n) = name.as_deref() {
                    if n.contains("HPU") {
                        self.builder.device_hints(self.source).saw_hpu = true;
                        self.flavor = self.flavor.max(Flavor::HabanaBridge);
                    }
                    // Synapse names its processes after engine types: `***Host`, `*MME `….
                    if n.starts_with('*') && crate::gaudi::engine_class(n).is_some()
                        || n.trim() == "***Host"
                    {
                        self.builder.device_hints(self.source).saw_hpu = true;
                        self.flavor = Flavor::SynapseTef;
                    }
                    if n.trim() == "***Host" && !self.tef_host_pids.contains(&pid) {
                        self.tef_host_pids.push(pid);
                    }
                }
                self.builder.process_meta(source, pid, name, None, None);
            }
            "process_labels" => {
                let labels = text(b"labels");
                if labels.as_deref().is_some_and(|l| l.starts_with("MTIA")) {
                    self.builder.device_hints(self.source).saw_mtia = true;
                }
                self.builder.process_meta(source, pid, None, labels, None);
            }
            "process_sort_index" => {
                self.builder
                    .process_meta(source, pid, None, None, int(b"sort_index"));
            }
            "thread_name" => self
                .builder
                .thread_meta(source, pid, tid, text(b"name"), None),
            "thread_sort_index" => {
                self.builder
                    .thread_meta(source, pid, tid, None, int(b"sort_index"));
            }
            _ => {}
        }
    }
}

/// Categories under which old PyTorch versions wrote annotations along with ops.
fn is_legacy_annotation_category(cat: &str) -> bool {
    cat.eq_ignore_ascii_case("operator") || cat == "cpu_op"
}

/// The `record_function` ranges PyTorch itself opens (`ProfilerStep#3`,
/// `enumerate(DataLoader)#…`, `Optimizer.step#SGD.step`, `Optimizer.zero_grad#…`): a `#` and
/// no `::` (ATen and c10d ops always have a namespace).
fn is_profiler_annotation(name: &str) -> bool {
    name.contains('#') && !name.contains("::")
}

fn note_device_hints(
    b: &mut TimelineBuilder,
    source: u16,
    class: CategoryClass,
    name: &str,
    cat: Option<&str>,
) {
    let hints = b.device_hints(source);
    match class {
        CategoryClass::Runtime | CategoryClass::Driver => {
            if name.starts_with("hip") {
                hints.saw_hip = true;
            } else if name.starts_with("syn") {
                hints.saw_hpu = true;
            } else if name.starts_with("cu") {
                hints.saw_cuda = true;
            }
            match cat {
                Some("privateuse1_runtime") => hints.saw_hpu = true,
                Some("mtia_runtime") => hints.saw_mtia = true,
                _ => {}
            }
        }
        CategoryClass::Kernel if cat == Some("mtia_ccp_events") => hints.saw_mtia = true,
        CategoryClass::CpuOp if cat == Some("hpu_op") => hints.saw_hpu = true,
        _ => {}
    }
}
