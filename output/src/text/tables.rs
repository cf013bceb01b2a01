//! The report's tables as [`Table`]s, shared by the terminal and the Markdown report: steps
//! (with their mean), ranks and collectives, memory and what holds it at the peak, ops, engines,
//! per-stream idle and the critical path.

use steplens_analysis::Report;
use steplens_analysis::ops::OpStats;
use steplens_analysis::steps::StepStats;
use steplens_analysis::table_spec::{OP_COLUMNS, RANK_COLUMNS};

use crate::table::Durations;

use super::{Table, human_ns, pct, runs_ahead, thousands, truncate};

fn engine_names(steps: &[StepStats]) -> Vec<String> {
    let mut names: Vec<String> = steps
        .iter()
        .flat_map(|s| s.engines.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

pub(super) fn step_table(report: &Report) -> Table {
    let has_device = report.steps.iter().any(|s| s.device_busy_ns.is_some());
    let engines = if has_device {
        engine_names(&report.steps)
    } else {
        Vec::new()
    };
    // The device work a step launched differs from its window's busy time when kernels spill
    // over step boundaries; the column is shown only then.
    let show_launched = report.steps.iter().any(|s| {
        s.device_launched_ns
            .is_some_and(|l| Some(l) != s.device_busy_ns)
    });
    let show_host_range = runs_ahead(report);
    let multi_source = report.sources.len() > 1;
    // Several inputs are told apart by rank where the report knows them, else by input number.
    let by_rank = multi_source && report.steps.iter().any(|s| s.rank.is_some());
    let mut columns: Vec<(String, bool)> = Vec::new();
    if multi_source {
        columns.push((if by_rank { "rank" } else { "source" }.into(), false));
    }
    columns.extend([("step".into(), false), ("duration".into(), true)]);
    if show_host_range {
        columns.push(("host step".into(), true));
    }
    columns.extend([("host busy".into(), true), ("%".into(), true)]);
    if has_device {
        columns.extend([
            ("device busy".into(), true),
            ("%".into(), true),
            ("device idle".into(), true),
        ]);
    }
    if show_launched {
        columns.push(("device launched".into(), true));
    }
    columns.extend([("data loader".into(), true), ("%".into(), true)]);
    let show_compile = report.steps.iter().any(|s| s.compile_ns > 0);
    if show_compile {
        columns.push(("compile".into(), true));
    }
    // Per-engine columns only help when there is more than one engine class.
    if engines.len() > 1 {
        columns.extend(engines.iter().map(|e| (e.clone(), true)));
    }
    let refs: Vec<(&str, bool)> = columns.iter().map(|(h, r)| (h.as_str(), *r)).collect();
    let mut table = Table::new(&refs);
    let mut add = |name: String, source: Option<(u16, Option<i64>)>, s: &StepLike| {
        let mut row = Vec::new();
        if multi_source {
            row.push(match source {
                Some((_, Some(rank))) if by_rank => rank.to_string(),
                // An input without a known rank in a rank column.
                Some(_) if by_rank => "–".to_owned(),
                Some((source, _)) => source.to_string(),
                None => String::new(),
            });
        }
        row.extend([name, human_ns(s.dur)]);
        if show_host_range {
            row.push(human_ns(s.host_range));
        }
        row.extend([human_ns(s.host), pct(s.host, s.dur)]);
        if has_device {
            row.extend([
                human_ns(s.device),
                pct(s.device, s.dur),
                human_ns(s.dur - s.device),
            ]);
        }
        if show_launched {
            row.push(human_ns(s.launched));
        }
        row.extend([human_ns(s.dataloader), pct(s.dataloader, s.dur)]);
        if show_compile {
            row.push(human_ns(s.compile));
        }
        if engines.len() > 1 {
            row.extend(
                engines
                    .iter()
                    .map(|e| human_ns(s.engines.get(e).copied().unwrap_or(0))),
            );
        }
        table.row(row);
    };
    for s in crate::steps::steps_by_rank(report) {
        add(s.name.clone(), Some((s.source, s.rank)), &StepLike::from(s));
    }
    if report.steps.len() > 1 {
        let n = report.steps.len() as i64;
        let mut mean = StepLike::default();
        for s in &report.steps {
            let one = StepLike::from(s);
            mean.dur += one.dur;
            mean.host_range += one.host_range;
            mean.host += one.host;
            mean.device += one.device;
            mean.launched += one.launched;
            mean.dataloader += one.dataloader;
            mean.compile += one.compile;
            for (k, v) in one.engines {
                *mean.engines.entry(k).or_insert(0) += v;
            }
        }
        mean.dur /= n;
        mean.host_range /= n;
        mean.host /= n;
        mean.device /= n;
        mean.launched /= n;
        mean.dataloader /= n;
        mean.compile /= n;
        for v in mean.engines.values_mut() {
            *v /= n;
        }
        add("mean".into(), None, &mean);
    }
    table
}

#[derive(Default)]
struct StepLike {
    dur: i64,
    host_range: i64,
    host: i64,
    device: i64,
    launched: i64,
    dataloader: i64,
    compile: i64,
    engines: std::collections::BTreeMap<String, i64>,
}

impl From<&StepStats> for StepLike {
    fn from(s: &StepStats) -> Self {
        Self {
            dur: s.dur_ns,
            host_range: s.host_dur_ns.unwrap_or(s.dur_ns),
            host: s.host_busy_ns,
            device: s.device_busy_ns.unwrap_or(0),
            launched: s.device_launched_ns.unwrap_or(0),
            dataloader: s.dataloader_ns,
            compile: s.compile_ns,
            engines: s.engines.clone(),
        }
    }
}

/// The rank table of a multi-rank report.
pub fn ranks_table(ranks: &steplens_analysis::ranks::RanksReport) -> Table {
    Table::from_spec(RANK_COLUMNS, &ranks.ranks, Durations::Human)
}

/// The collectives matched across ranks.
pub fn collectives_table(ranks: &steplens_analysis::ranks::RanksReport) -> Table {
    let mut table = Table::new(&[
        ("collective", false),
        ("count", true),
        ("latency p50", true),
        ("wait p50", true),
        ("max start skew", true),
        ("size", true),
        ("bus GB/s", true),
    ]);
    for c in &ranks.collectives {
        table.row(vec![
            c.name.clone(),
            thousands(c.count as u64),
            human_ns(c.latency_p50_ns),
            human_ns(c.wait_p50_ns),
            human_ns(c.max_start_skew_ns),
            c.bytes
                .map_or_else(String::new, steplens_analysis::memory::human_bytes),
            c.bus_gbps.map_or_else(String::new, |g| format!("{g:.2}")),
        ]);
    }
    table
}

pub(super) fn memory_table(report: &Report) -> Table {
    use steplens_analysis::memory::human_bytes;
    let mut table = Table::new(&[
        ("device", false),
        ("peak allocated", true),
        ("at", true),
        ("peak reserved", true),
        ("slack at peak", true),
        ("of device", true),
        ("allocs", true),
        ("frees", true),
        ("never freed", true),
        ("lost events", true),
    ]);
    let origin = report.steps.first().map_or(0, |s| s.start_ns);
    for m in &report.memory {
        table.row(vec![
            m.device.clone(),
            human_bytes(m.peak_allocated_bytes),
            human_ns(m.peak_allocated_ns - origin),
            human_bytes(m.peak_reserved_bytes),
            human_bytes(m.slack_at_peak_bytes),
            m.device_total_bytes
                .filter(|&t| t > 0)
                .map_or_else(String::new, |t| pct(m.peak_allocated_bytes, t)),
            thousands(m.allocations),
            thousands(m.frees),
            human_bytes(m.never_freed_bytes),
            thousands(m.integrity_breaks),
        ]);
    }
    table
}

pub(super) fn holders_table(report: &Report) -> Table {
    let mut table = Table::new(&[
        ("device", false),
        ("op", false),
        ("call site", false),
        ("bytes", true),
        ("allocs", true),
    ]);
    for m in &report.memory {
        for h in &m.held_at_peak {
            table.row(vec![
                m.device.clone(),
                truncate(&h.op, 60),
                h.call_site.clone().unwrap_or_default(),
                steplens_analysis::memory::human_bytes(h.bytes),
                thousands(h.count),
            ]);
        }
    }
    table
}

pub(super) fn op_table(ops: &[OpStats], top: usize) -> Table {
    Table::from_spec(OP_COLUMNS, &ops[..top.min(ops.len())], Durations::Human)
}

pub(super) fn engine_table(report: &Report) -> Table {
    let mut table = Table::new(&[
        ("engine class", false),
        ("engines", true),
        ("busy (any)", true),
        ("% of trace", true),
        ("mean per engine", true),
    ]);
    for e in &report.engines {
        table.row(vec![
            e.class.clone(),
            e.engines.to_string(),
            human_ns(e.busy_ns),
            format!("{:.1}%", e.busy_pct),
            format!("{:.1}%", e.mean_engine_utilization_pct),
        ]);
    }
    table
}

pub(super) fn idle_table(report: &Report) -> Table {
    let mut table = Table::new(&[
        ("stream", false),
        ("kernels", true),
        ("idle", true),
        ("host wait", true),
        ("kernel wait", true),
        ("other", true),
    ]);
    for s in &report.idle {
        let device = s
            .device
            .map_or_else(String::new, |d| format!("device {d} "));
        table.row(vec![
            format!("{device}{}", s.stream),
            thousands(s.kernels),
            human_ns(s.idle_ns),
            human_ns(s.host_wait_ns),
            human_ns(s.kernel_wait_ns),
            human_ns(s.other_ns),
        ]);
    }
    table
}

/// The critical path table: per step (or for the whole trace), the path's time by what bounds
/// it, with the event that holds the most of it.
pub(super) fn critical_path_table(report: &Report) -> Option<Table> {
    use steplens_analysis::critical_path::{Bound, CriticalPath};
    let rows: Vec<(String, &CriticalPath)> = if report.steps.is_empty() {
        report
            .critical_path
            .iter()
            .map(|p| ("whole trace".to_owned(), p))
            .collect()
    } else {
        let multi_source = report.sources.len() > 1;
        crate::steps::steps_by_rank(report)
            .into_iter()
            .filter_map(|s| {
                let name = crate::steps::step_label(&s.name, s.source, s.rank, multi_source);
                s.critical_path.as_ref().map(|p| (name, p))
            })
            .collect()
    };
    if rows.is_empty() {
        return None;
    }
    let bounds: Vec<Bound> = Bound::ALL
        .into_iter()
        .filter(|b| {
            rows.iter()
                .any(|(_, p)| p.by_bound.get(b).is_some_and(|&v| v > 0))
        })
        .collect();
    let mut columns: Vec<(&str, bool)> = vec![("step", false), ("path", true)];
    columns.extend(bounds.iter().map(|b| (b.as_str(), true)));
    columns.push(("most on the path", false));
    let mut table = Table::new(&columns);
    for (name, path) in rows {
        let mut row = vec![name, human_ns(path.total_ns)];
        for b in &bounds {
            let ns = path.by_bound.get(b).copied().unwrap_or(0);
            row.push(format!("{} {}", human_ns(ns), pct(ns, path.total_ns)));
        }
        row.push(path.top.first().map_or_else(String::new, |c| {
            format!(
                "{} ({}, {})",
                truncate(&c.name, 48),
                c.bound.as_str(),
                human_ns(c.ns)
            )
        }));
        table.row(row);
    }
    Some(table)
}
