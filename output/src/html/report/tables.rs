//! The report page's tables: ranks and their collectives, memory per device and what holds it at
//! the peak, and the steps, engines, per-stream idle and every op.

use std::fmt::Write as _;

use steplens_analysis::Report;
use steplens_analysis::memory::human_bytes;

use steplens_analysis::table_spec::{OP_COLUMNS, RANK_COLUMNS};

use crate::html::{Html, bytes_cell, esc, ns_cell, opt_ns_cell, spec_table, table, text_cell};

/// The ranks of a multi-rank run and the memory per device, when the report has them.
pub(super) fn ranks_and_memory(h: &mut Html<'_>, report: &Report) {
    if let Some(ranks) = &report.ranks {
        let _ = write!(
            h,
            "<h2>Ranks</h2><p>{}{}; {}</p>",
            crate::count::plural(ranks.world_size as u64, "rank"),
            ranks
                .backend
                .as_deref()
                .map(|b| format!(" ({})", esc(b)))
                .unwrap_or_default(),
            esc(&ranks.clock)
        );
        spec_table(h, "ranks", RANK_COLUMNS, &ranks.ranks);
        let rows: Vec<Vec<(String, Option<f64>)>> = ranks
            .collectives
            .iter()
            .map(|c| {
                vec![
                    text_cell(&c.name),
                    (c.count.to_string(), Some(c.count as f64)),
                    ns_cell(c.latency_p50_ns),
                    ns_cell(c.wait_p50_ns),
                    ns_cell(c.max_start_skew_ns),
                    c.bytes.map_or_else(|| text_cell(""), bytes_cell),
                    c.bus_gbps
                        .map_or_else(|| text_cell(""), |g| (format!("{g:.2}"), Some(g))),
                ]
            })
            .collect();
        table(
            h,
            "collectives",
            &[
                ("collective", false),
                ("count", true),
                ("latency p50", true),
                ("wait p50", true),
                ("max start skew", true),
                ("size", true),
                ("bus GB/s", true),
            ],
            &rows,
        );
    }
    if !report.memory.is_empty() {
        h.push_str("<h2>Memory</h2>");
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .memory
            .iter()
            .map(|m| {
                vec![
                    text_cell(&m.device),
                    bytes_cell(m.peak_allocated_bytes),
                    bytes_cell(m.peak_reserved_bytes),
                    bytes_cell(m.slack_at_peak_bytes),
                    (m.allocations.to_string(), Some(m.allocations as f64)),
                    (m.frees.to_string(), Some(m.frees as f64)),
                    bytes_cell(m.never_freed_bytes),
                    (
                        m.integrity_breaks.to_string(),
                        Some(m.integrity_breaks as f64),
                    ),
                ]
            })
            .collect();
        table(
            h,
            "memory",
            &[
                ("device", false),
                ("peak allocated", true),
                ("peak reserved", true),
                ("slack at peak", true),
                ("allocations", true),
                ("frees", true),
                ("never freed", true),
                ("lost events", true),
            ],
            &rows,
        );
        h.push_str("<p>Held at the allocated peak:</p>");
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .memory
            .iter()
            .flat_map(|m| {
                m.held_at_peak.iter().map(|hold| {
                    vec![
                        text_cell(&m.device),
                        text_cell(&hold.op),
                        text_cell(hold.call_site.as_deref().unwrap_or("")),
                        bytes_cell(hold.bytes),
                        (hold.count.to_string(), Some(hold.count as f64)),
                    ]
                })
            })
            .collect();
        table(
            h,
            "holders",
            &[
                ("device", false),
                ("op", false),
                ("call site", false),
                ("bytes", true),
                ("allocations", true),
            ],
            &rows,
        );
    }
}

pub(super) fn tables(h: &mut Html<'_>, report: &Report) {
    if !report.steps.is_empty() {
        h.push_str("<h2>Steps table</h2>");
        // Several inputs share step names: a rank (else input) column tells their rows apart.
        let multi = report.sources.len() > 1;
        let by_rank = multi && report.steps.iter().any(|s| s.rank.is_some());
        let rows: Vec<Vec<(String, Option<f64>)>> = crate::steps::steps_by_rank(report)
            .into_iter()
            .map(|s| {
                let whose = if by_rank {
                    s.rank
                        .map_or_else(|| text_cell("-"), |r| (r.to_string(), Some(r as f64)))
                } else {
                    (s.source.to_string(), Some(f64::from(s.source)))
                };
                multi
                    .then_some(whose)
                    .into_iter()
                    .chain([
                        text_cell(&s.name),
                        ns_cell(s.dur_ns),
                        ns_cell(s.host_busy_ns),
                        opt_ns_cell(s.device_busy_ns),
                        opt_ns_cell(s.device_launched_ns),
                        ns_cell(s.dataloader_ns),
                        s.memory_peak_bytes
                            .map_or_else(|| text_cell("-"), |b| (human_bytes(b), Some(b as f64))),
                    ])
                    .collect()
            })
            .collect();
        let whose = [(if by_rank { "rank" } else { "input" }, true)];
        let columns: Vec<(&str, bool)> = whose[..usize::from(multi)]
            .iter()
            .copied()
            .chain([
                ("step", false),
                ("duration", true),
                ("host busy", true),
                ("device busy", true),
                ("device launched", true),
                ("data loader", true),
                ("memory peak", true),
            ])
            .collect();
        table(h, "steps", &columns, &rows);
    }
    if !report.engines.is_empty() {
        h.push_str("<h2>Engines</h2>");
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .engines
            .iter()
            .map(|e| {
                vec![
                    text_cell(&e.class),
                    (e.engines.to_string(), Some(e.engines as f64)),
                    ns_cell(e.busy_ns),
                    (format!("{:.1}%", e.busy_pct), Some(e.busy_pct)),
                    (
                        format!("{:.1}%", e.mean_engine_utilization_pct),
                        Some(e.mean_engine_utilization_pct),
                    ),
                ]
            })
            .collect();
        table(
            h,
            "engines",
            &[
                ("class", false),
                ("engines", true),
                ("busy", true),
                ("% of trace", true),
                ("mean per engine", true),
            ],
            &rows,
        );
    }
    if !report.idle.is_empty() {
        let _ = write!(
            h,
            "<h2>{}</h2><p class=\"note\">{}</p>",
            esc(crate::text::STREAM_IDLE_HEADING),
            esc(crate::text::STREAM_IDLE_NOTE)
        );
        let rows: Vec<Vec<(String, Option<f64>)>> = report
            .idle
            .iter()
            .map(|i| {
                vec![
                    text_cell(&i.stream),
                    (i.kernels.to_string(), Some(i.kernels as f64)),
                    ns_cell(i.idle_ns),
                    ns_cell(i.host_wait_ns),
                    ns_cell(i.kernel_wait_ns),
                    ns_cell(i.other_ns),
                ]
            })
            .collect();
        table(
            h,
            "idle",
            &[
                ("stream", false),
                ("kernels", true),
                ("idle", true),
                ("host wait", true),
                ("kernel wait", true),
                ("other", true),
            ],
            &rows,
        );
    }
    h.push_str("<h2>Ops (all)</h2>");
    spec_table(h, "ops", OP_COLUMNS, &report.ops);
}
