//! The roofline on the HTML report: `op_perf[]` as a log-log chart (arithmetic intensity against
//! achieved TFLOP/s, one point per op signature sized by its kernel time, the device's roofs
//! drawn where it is known), the op signatures as a sortable table, and the summary by family.

use std::fmt::Write as _;

use steplens_analysis::Report;
use steplens_analysis::device_rates::DeviceClass;
use steplens_analysis::op_perf::{Family, OpPerf, by_family};
use steplens_analysis::table_spec::{FAMILY_COLUMNS, OP_PERF_COLUMNS};
use steplens_analysis::units::human_ns;

use super::{Html, PALETTE, esc, legend, spec_table};

/// Rows in the signature table (the JSON has them all).
const MAX_ROWS: usize = 500;

const FAMILIES: [Family; 8] = [
    Family::Gemm,
    Family::Conv,
    Family::Attention,
    Family::Norm,
    Family::Elementwise,
    Family::Reduce,
    Family::Communication,
    Family::Other,
];

fn colour(f: Family) -> &'static str {
    let i = FAMILIES.iter().position(|&x| x == f).unwrap_or(7);
    PALETTE[[4, 5, 6, 2, 1, 0, 3, 7][i]]
}

/// Writes the section when the report has op signatures.
pub(super) fn roofline(h: &mut Html<'_>, report: &Report) {
    let rows = &report.op_perf;
    if rows.is_empty() {
        return;
    }
    let class = report
        .device
        .name
        .as_deref()
        .and_then(steplens_analysis::device_rates::device_class);
    h.push_str("<h2 id=\"roofline\">Roofline</h2>");
    let device = class.map_or_else(
        || "The device is not one steplens has peaks for: achieved rates only.".to_owned(),
        |c| {
            format!(
                "{}: dense peak {:.0} TFLOP/s fp32, {:.0} bf16/fp16; memory {:.2} TB/s. % of peak is \
                 against the peak of the op's own dtype.",
                c.name, c.peak.fp32, c.peak.bf16, c.memory_tbps
            )
        },
    );
    let _ = write!(
        h,
        "<p class=\"note\">Each op signature (name, input shapes, dtypes) at its FLOPs per byte moved \
         and the TFLOP/s its kernels achieved (all calls' FLOPs over their kernel time), sized by \
         kernel time; hover for its figures. Formulas per op family: docs/roofline.md. {}</p>",
        esc(&device)
    );
    chart(h, rows, class);
    h.push_str("<h3>By family</h3>");
    spec_table(h, "roofline-families", FAMILY_COLUMNS, &by_family(rows));
    let _ = write!(
        h,
        "<h3>Op signatures ({} by kernel time{})</h3>",
        rows.len(),
        if rows.len() > MAX_ROWS {
            format!(", the first {MAX_ROWS}")
        } else {
            String::new()
        }
    );
    spec_table(
        h,
        "roofline-ops",
        OP_PERF_COLUMNS,
        &rows[..rows.len().min(MAX_ROWS)],
    );
}

/// Decades covering `lo..=hi` (both > 0).
fn decades(lo: f64, hi: f64) -> (f64, f64) {
    (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    )
}

fn chart(h: &mut Html<'_>, rows: &[OpPerf], class: Option<&DeviceClass>) {
    // Points: (intensity, TFLOP/s, row).
    let points: Vec<(f64, f64, &OpPerf)> = rows
        .iter()
        .filter_map(|r| {
            let ai = r.flops_per_byte.filter(|v| *v > 0.0)?;
            let rate = r.tflops_per_s.filter(|v| *v > 0.0)?;
            Some((ai, rate, r))
        })
        .collect();
    if points.is_empty() {
        h.push_str(
            "<p class=\"muted\">No op signature has both FLOPs and bytes (shapes are needed: \
             record_shapes=True).</p>",
        );
        return;
    }
    let roofs: Vec<(&str, f64)> = class
        .map(|c| vec![("fp32", c.peak.fp32), ("bf16/fp16", c.peak.bf16)])
        .unwrap_or_default();
    let bw = class.map(|c| c.memory_tbps);
    let (mut x_lo, mut x_hi) = (f64::MAX, f64::MIN);
    let (mut y_lo, mut y_hi) = (f64::MAX, f64::MIN);
    for &(ai, rate, _) in &points {
        x_lo = x_lo.min(ai);
        x_hi = x_hi.max(ai);
        y_lo = y_lo.min(rate);
        y_hi = y_hi.max(rate);
    }
    for &(_, peak) in &roofs {
        y_hi = y_hi.max(peak);
        if let Some(bw) = bw {
            x_hi = x_hi.max(peak / bw * 2.0);
        }
    }
    let (xd0, xd1) = decades(x_lo, x_hi);
    let (yd0, yd1) = decades(y_lo, y_hi);
    let (w, ht, left, bottom, top, right) = (1100.0, 420.0, 70.0, 40.0, 24.0, 20.0);
    let sx = |ai: f64| left + (ai.log10() - xd0) / (xd1 - xd0) * (w - left - right);
    let sy = |v: f64| ht - bottom - (v.log10() - yd0) / (yd1 - yd0) * (ht - bottom - top);
    let present: Vec<(&str, &str, f64)> = FAMILIES
        .iter()
        .map(|&f| {
            let n = points.iter().filter(|p| p.2.family == f).count();
            (f.as_str(), colour(f), n as f64)
        })
        .collect();
    legend(h, &present);
    let _ = write!(
        h,
        "<svg width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"roofline: arithmetic intensity against achieved TFLOP/s\">"
    );
    // Decade grid and labels.
    for d in (xd0 as i64)..=(xd1 as i64) {
        let x = sx(10f64.powi(d as i32));
        let _ = write!(
            h,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"#eee\"/><text class=\"tick\" data-axis=\"log-x\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            ht - bottom,
            ht - bottom + 14.0,
            tick(d)
        );
    }
    for d in (yd0 as i64)..=(yd1 as i64) {
        let y = sy(10f64.powi(d as i32));
        let _ = write!(
            h,
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text class=\"tick\" data-axis=\"log-y\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - right,
            left - 4.0,
            y + 4.0,
            tick(d)
        );
    }
    let _ = write!(
        h,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte)</text><text x=\"14\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.1})\">achieved TFLOP/s</text>",
        (left + w - right) / 2.0,
        ht - 6.0,
        (ht - bottom) / 2.0,
        (ht - bottom) / 2.0,
    );
    // The roofs: bandwidth × intensity up to the dtype's peak.
    if let Some(bw) = bw {
        for (i, &(name, peak)) in roofs.iter().enumerate() {
            let x0 = 10f64.powf(xd0);
            let ridge = peak / bw;
            let x1 = 10f64.powf(xd1);
            let y0 = (x0 * bw).max(10f64.powf(yd0));
            let x_start = y0 / bw;
            let _ = write!(
                h,
                "<polyline fill=\"none\" stroke=\"#444\" stroke-width=\"1.5\" stroke-dasharray=\"{}\" points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\"><title>{} roof: {:.0} TFLOP/s, {:.2} TB/s, ridge at {:.0} FLOP/B</title></polyline><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} peak {:.0}</text>",
                if i == 0 { "5,3" } else { "none" },
                sx(x_start),
                sy(y0),
                sx(ridge),
                sy(peak),
                sx(x1),
                sy(peak),
                esc(name),
                peak,
                bw,
                ridge,
                w - right - 4.0,
                sy(peak) - 4.0,
                esc(name),
                peak,
            );
        }
    }
    let max_ns = points
        .iter()
        .map(|p| p.2.kernel_ns)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    // Largest first, so small points stay visible on top.
    let mut order: Vec<&(f64, f64, &OpPerf)> = points.iter().collect();
    order.sort_by_key(|p| std::cmp::Reverse(p.2.kernel_ns));
    for &&(ai, rate, r) in &order {
        let radius = 3.0 + 12.0 * (r.kernel_ns as f64 / max_ns).sqrt();
        let peak = r
            .pct_of_peak_compute
            .map_or_else(String::new, |p| format!(", {p:.1} % of peak"));
        let _ = write!(
            h,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{radius:.1}\" fill=\"{}\" fill-opacity=\"0.6\" stroke=\"#333\" stroke-width=\"0.5\"><title>{} {} ({}) · {} · {} · {} of kernels · {:.3} GFLOP/call · {:.1} FLOP/B · {:.2} TFLOP/s{peak}{}</title></circle>",
            sx(ai),
            sy(rate),
            colour(r.family),
            esc(&r.name),
            esc(&r.input_shape),
            esc(&r.dtype),
            r.family.as_str(),
            crate::count::plural(r.calls, "call"),
            human_ns(r.kernel_ns),
            r.flops_per_call.unwrap_or(0.0) / 1e9,
            ai,
            rate,
            r.bound
                .as_deref()
                .map_or_else(String::new, |b| format!(" · {b}-bound")),
        );
    }
    h.push_str("</svg>");
}

/// `10^d` as a tick label: 0.01, 0.1, 1, 10, 100, 1k, 10k.
fn tick(d: i64) -> String {
    match d {
        ..0 => format!("{}", 10f64.powi(d as i32)),
        0..=2 => format!("{}", 10i64.pow(d as u32)),
        3..=5 => format!("{}k", 10i64.pow(d as u32 - 3)),
        _ => format!("1e{d}"),
    }
}
