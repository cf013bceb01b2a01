//! HTML pages: `steplens report -f html` ([`report_page`]: one self-contained page, inline
//! CSS, JS and SVG, no network, with the overview, the charts, the ranked findings with a small
//! evidence timeline each, and sortable, filterable tables), and the diff and check pages
//! ([`diff_page`], [`check_page`]). This module holds what the pages share: escaping, the page
//! frame, legends, bar charts and tables.
//!
//! Built by hand rather than with a template engine: the page is a handful of fixed sections,
//! and every string from a trace goes through [`esc`] (one function, tested with a kernel named
//! `<script>`), so a template engine would add a build-time dependency to the CLI and nothing
//! the escaping does not already give. Charts are SVG written here for the same reason; hovering
//! shows values through SVG `<title>` tooltips, which every browser renders natively. Colours
//! are the Okabe–Ito palette (colour-blind safe).

use std::fmt::Write as _;

use steplens_analysis::memory::human_bytes;
use steplens_analysis::units::human_ns;

mod compare;
mod report;
mod roofline;
mod sink;
mod views;

pub use compare::{check_page, diff_page, write_check_page, write_diff_page};
pub use report::{report_page, write_report_page};
use sink::Html;

/// Okabe–Ito: orange, sky blue, bluish green, yellow, blue, vermillion, reddish purple, grey.
const PALETTE: [&str; 8] = [
    "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999",
];

/// Escapes text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;padding:16px 24px;color:#222}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.headline{font-size:17px;background:#f4f7fb;border-left:4px solid #0072B2;padding:8px 12px}
.muted{color:#666}.warn{color:#a05a00}.note{color:#555;font-size:13px;margin:4px 0 8px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}th,td{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}th{cursor:pointer;background:#fafafa;position:sticky;top:0}
.finding{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:10px 0}
.sev-critical{border-left:5px solid #D55E00}.sev-warning{border-left:5px solid #E69F00}.sev-info{border-left:5px solid #56B4E9}
.kind{font-weight:600}.advice{margin:4px 0 0;color:#333}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
input.filter{margin:4px 0;padding:3px 6px;width:280px}
svg text{font:11px system-ui,sans-serif;fill:#333}
@media print{th{position:static}.noprint{display:none}}
"#;

const SCRIPT: &str = r#"
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,col){
    th.addEventListener('click',function(){
      var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
      var asc=th.dataset.dir!=='asc';th.dataset.dir=asc?'asc':'desc';
      rows.sort(function(a,b){
        var x=a.cells[col].dataset.v,y=b.cells[col].dataset.v;
        if(x!==undefined&&y!==undefined){return asc?x-y:y-x;}
        x=a.cells[col].textContent;y=b.cells[col].textContent;
        return asc?x.localeCompare(y):y.localeCompare(x);});
      rows.forEach(function(r){body.appendChild(r);});});});});
document.querySelectorAll('input.filter').forEach(function(inp){
  inp.addEventListener('input',function(){
    var q=inp.value.toLowerCase(),t=document.getElementById(inp.dataset.table);
    Array.prototype.forEach.call(t.tBodies[0].rows,function(r){
      r.style.display=r.textContent.toLowerCase().indexOf(q)>=0?'':'none';});});});
var kinds=document.getElementById('kind-filter');
if(kinds){kinds.addEventListener('change',function(){
  document.querySelectorAll('.finding').forEach(function(f){
    f.style.display=(!kinds.value||f.dataset.kind===kinds.value)?'':'none';});});}
"#;

/// The page's head, its styles and its first heading.
fn open_page(h: &mut Html<'_>, title: &str, heading: &str) {
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    let _ = write!(
        h,
        "<title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1>",
        esc(title),
        esc(heading)
    );
}

/// The page's script (sorting, filtering) and its end.
fn close_page(h: &mut Html<'_>) {
    let _ = writeln!(h, "<script>{SCRIPT}</script></body></html>");
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        part as f64 * 100.0 / whole as f64
    } else {
        0.0
    }
}

/// A chart's legend: `(name, colour, value)` per series, listing only the series with a nonzero
/// value in the chart (a category the chart does not draw is not named).
fn legend(h: &mut Html<'_>, items: &[(&str, &str, f64)]) {
    let shown: Vec<&(&str, &str, f64)> = items.iter().filter(|(_, _, v)| *v != 0.0).collect();
    if shown.is_empty() {
        return;
    }
    h.push_str("<div class=\"legend\">");
    for (name, colour, _) in shown {
        let _ = write!(
            h,
            "<span><i style=\"background:{colour}\"></i>{}</span>",
            esc(name)
        );
    }
    h.push_str("</div>");
}

/// Round ticks for an axis from 0 to at least `max` (in ns, or any integer unit): a step of 1, 2
/// or 5 × 10^k, the smallest that needs at most [`Ticks::MAX_INTERVALS`] intervals, and `top`, the
/// first tick at or above `max` (what the chart scales to, so the highest tick is its top).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticks {
    /// Between two ticks.
    pub(crate) step: i64,
    /// The highest tick: the smallest multiple of `step` at or above the largest value.
    pub(crate) top: i64,
}

impl Ticks {
    /// At most this many intervals (so at least three, as the step grows at most 2.5-fold).
    pub(crate) const MAX_INTERVALS: i64 = 6;

    /// Ticks for values from 0 to `max` (a `max` of 0 or less reads as 1).
    #[must_use]
    pub(crate) fn new(max: i64) -> Self {
        let max = max.max(1);
        let mut power: i64 = 1;
        loop {
            for digit in [1, 2, 5] {
                let Some(step) = power.checked_mul(digit) else {
                    return Self {
                        step: max,
                        top: max,
                    };
                };
                if step.saturating_mul(Self::MAX_INTERVALS) >= max {
                    let top = (max / step + i64::from(max % step != 0)).saturating_mul(step);
                    return Self { step, top };
                }
            }
            match power.checked_mul(10) {
                Some(p) => power = p,
                None => {
                    return Self {
                        step: max,
                        top: max,
                    };
                }
            }
        }
    }

    /// The ticks, from 0 to `top`.
    pub(crate) fn values(self) -> impl Iterator<Item = i64> {
        let step = self.step.max(1);
        (0..=self.top / step).map(move |k| k * step)
    }

    /// A tick's label in one unit for the whole axis (the top's), with as many decimals as the
    /// step needs: `0`, `0.5 s`, `1.0 s`, `1.5 s`; `0`, `100 ms`, `200 ms`.
    #[must_use]
    pub(crate) fn time_label(self, ns: i64) -> String {
        if ns == 0 {
            return "0".to_owned();
        }
        let (unit, name) = match self.top.unsigned_abs() {
            ..1_000 => (1, "ns"),
            1_000..1_000_000 => (1_000, "µs"),
            1_000_000..1_000_000_000 => (1_000_000, "ms"),
            _ => (1_000_000_000, "s"),
        };
        let mut decimals = 0usize;
        let mut scaled = i128::from(self.step);
        while scaled % i128::from(unit) != 0 && decimals < 9 {
            scaled *= 10;
            decimals += 1;
        }
        format!("{:.decimals$} {name}", ns as f64 / f64::from(unit))
    }
}

/// A y axis with round ticks in time units (see [`Ticks`]); the chart scales its bars to the
/// returned top.
fn axis_y(h: &mut Html<'_>, left: f64, base: f64, max: i64) -> f64 {
    let ticks = Ticks::new(max);
    let _ = write!(
        h,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"10\" y2=\"{base}\" stroke=\"#999\"/>"
    );
    let top = ticks.top as f64;
    for v in ticks.values() {
        let y = base - (base - 10.0) * v as f64 / top;
        let _ = write!(
            h,
            "<text class=\"tick\" data-axis=\"y\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><line x1=\"{left}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>",
            left - 4.0,
            y + 4.0,
            ticks.time_label(v),
            left + 1040.0
        );
    }
    top
}

/// Horizontal bars with a label, a value shown as text and a tooltip.
fn hbars(h: &mut Html<'_>, rows: &[(String, i64, &str)]) {
    let max = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1) as f64;
    let (w, left, row_h) = (1100.0, 360.0, 20.0);
    let ht = rows.len() as f64 * row_h + 10.0;
    let _ = write!(h, "<svg width=\"{w}\" height=\"{ht}\" role=\"img\">");
    for (i, (label, v, colour)) in rows.iter().enumerate() {
        let y = i as f64 * row_h + 4.0;
        let bw = *v as f64 / max * (w - left - 90.0);
        // What fits left of the bars at the page's font; the full name is in the tooltip.
        let short: String = if label.chars().count() > 48 {
            label.chars().take(47).chain(['…']).collect()
        } else {
            label.clone()
        };
        let _ = write!(
            h,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}<title>{}</title></text><rect x=\"{left}\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{colour}\" data-ns=\"{v}\"><title>{}: {}</title></rect><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            left - 6.0,
            y + 12.0,
            esc(&short),
            esc(label),
            row_h - 5.0,
            esc(label),
            human_ns(*v),
            left + bw + 4.0,
            y + 12.0,
            human_ns(*v)
        );
    }
    h.push_str("</svg>");
}

/// A sortable, filterable table: `cells` are (shown text, sort value for numbers).
fn table(h: &mut Html<'_>, id: &str, heads: &[(&str, bool)], rows: &[Vec<(String, Option<f64>)>]) {
    let _ = write!(
        h,
        "<input class=\"filter noprint\" data-table=\"{id}\" placeholder=\"filter rows…\"><table class=\"sortable\" id=\"{id}\"><thead><tr>"
    );
    for (name, numeric) in heads {
        let _ = write!(
            h,
            "<th{}>{}</th>",
            if *numeric { " class=\"n\"" } else { "" },
            esc(name)
        );
    }
    h.push_str("</tr></thead><tbody>");
    for row in rows {
        h.push_str("<tr>");
        for (text, value) in row {
            match value {
                Some(v) => {
                    let _ = write!(h, "<td class=\"n\" data-v=\"{v}\">{}</td>", esc(text));
                }
                None => {
                    let _ = write!(h, "<td>{}</td>", esc(text));
                }
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>");
}

fn ns_cell(ns: i64) -> (String, Option<f64>) {
    (human_ns(ns), Some(ns as f64))
}

fn text_cell(s: &str) -> (String, Option<f64>) {
    (s.to_owned(), None)
}

fn opt_ns_cell(v: Option<i64>) -> (String, Option<f64>) {
    v.map_or_else(|| text_cell("-"), ns_cell)
}

/// A [`steplens_analysis::table_spec`] table over `rows` as the page writes it: every column
/// [`shown`](steplens_analysis::table_spec::shown), counts with thousands separators, numbers
/// sortable by value.
fn spec_table<T>(
    h: &mut Html<'_>,
    id: &str,
    spec: &[steplens_analysis::table_spec::ColumnSpec<T>],
    rows: &[T],
) {
    let columns = steplens_analysis::table_spec::shown(spec, rows, false);
    let cells: Vec<Vec<(String, Option<f64>)>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| {
                    let cell = (c.value)(row);
                    (crate::table::cell_text(cell, c.missing), cell.number())
                })
                .collect()
        })
        .collect();
    let heads: Vec<(&str, bool)> = columns
        .iter()
        .map(|c| (c.header, !c.unit.is_text()))
        .collect();
    table(h, id, &heads, &cells);
}

fn bytes_cell(b: i64) -> (String, Option<f64>) {
    (human_bytes(b), Some(b as f64))
}

#[cfg(test)]
mod tests {
    use super::sink::{Html, page_string};
    use super::{Ticks, esc, legend};

    /// What `legend` writes for `items`.
    fn legend_of(items: &[(&str, &str, f64)]) -> String {
        page_string(|out| {
            let mut h = Html::new(out);
            legend(&mut h, items);
            h.finish()
        })
    }

    /// 1, 2 or 5 × 10^k.
    fn round(v: i64) -> bool {
        let mut v = v;
        while v >= 10 && v % 10 == 0 {
            v /= 10;
        }
        matches!(v, 1 | 2 | 5)
    }

    #[test]
    fn ticks_are_round_and_cover_the_largest_value() {
        // 266 ms (the issue's 266/133/66.6 ms axis) ticks at 0, 50 .. 300 ms.
        let t = Ticks::new(266_000_000);
        assert_eq!((t.step, t.top), (50_000_000, 300_000_000));
        let labels: Vec<String> = t.values().map(|v| t.time_label(v)).collect();
        assert_eq!(
            labels,
            [
                "0", "50 ms", "100 ms", "150 ms", "200 ms", "250 ms", "300 ms"
            ]
        );
        let t = Ticks::new(1_400_000_000);
        let labels: Vec<String> = t.values().map(|v| t.time_label(v)).collect();
        assert_eq!(labels, ["0", "0.5 s", "1.0 s", "1.5 s"]);
        for max in [
            1,
            7,
            999,
            1_000,
            1_001,
            35_600_000,
            155_000_000,
            9_999_999_999,
        ] {
            let t = Ticks::new(max);
            assert!(round(t.step), "{max}: step {}", t.step);
            assert!(t.top >= max && t.top % t.step == 0, "{max}: {t:?}");
            let intervals = t.top / t.step;
            assert!(
                (1..=Ticks::MAX_INTERVALS).contains(&intervals),
                "{max}: {intervals} intervals"
            );
            if max >= 10 {
                assert!(intervals >= 3, "{max}: {intervals} intervals");
            }
        }
        assert_eq!(Ticks::new(0), Ticks::new(1));
        // Past what i64 holds the top saturates rather than overflows.
        assert!(Ticks::new(i64::MAX).values().count() <= 7);
    }

    #[test]
    fn a_legend_names_only_what_the_chart_draws() {
        let h = legend_of(&[
            ("busy", "#000", 3.0),
            ("compile", "#111", 0.0),
            ("idle", "#222", 1.0),
        ]);
        assert!(h.contains("busy") && h.contains("idle"));
        assert!(!h.contains("compile"), "{h}");
        let h = legend_of(&[("compile", "#111", 0.0)]);
        assert!(
            h.is_empty(),
            "no legend for a chart that draws nothing: {h}"
        );
    }

    #[test]
    fn trace_text_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }
}
