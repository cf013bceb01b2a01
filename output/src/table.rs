//! Aligned tables of strings, as text (ANSI color when asked) or Markdown, shared by every
//! renderer. Cells and styled texts are what a trace named (ops, kernels, files): the text
//! table and [`Style`] escape their control characters ([`crate::escape::terminal`]), the
//! Markdown table its markup ([`crate::escape::markdown`]).

use std::borrow::Cow;
use std::io::{self, Write};

use steplens_analysis::table_spec::{Cell, ColumnSpec, Unit, shown};

use crate::count::thousands;
use crate::escape;

/// How a text table from a [`ColumnSpec`] list writes its durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durations {
    /// As [`steplens_analysis::units::human_ns`] writes them (`1.25 ms`), the report's way.
    Human,
    /// In whole µs with thousands separators, the header saying so (`total µs`): the
    /// TensorBoard plugin's way, so its users compare figure for figure.
    Micros,
}

/// `ns` as whole µs, rounded to the nearest, with thousands separators.
#[must_use]
pub fn micros(ns: i64) -> String {
    let v = (ns as f64 / 1000.0).round() as i64;
    if v < 0 {
        format!("-{}", thousands(v.unsigned_abs()))
    } else {
        thousands(v as u64)
    }
}

/// A [`ColumnSpec`] cell as the rendered tables (text, Markdown, HTML) write it: counts with
/// thousands separators, the rest as [`Cell::display`] writes them.
pub(crate) fn cell_text(cell: Cell<'_>, missing: &str) -> String {
    match cell {
        Cell::Count(n) => thousands(n),
        _ => cell.display(missing),
    }
}

/// ANSI styling that turns into nothing when color is off.
#[derive(Clone, Copy)]
pub struct Style {
    /// Whether ANSI codes are written.
    pub color: bool,
}

impl Style {
    /// `text` in the ANSI style `code` (`"31;1"`), its own control characters escaped
    /// ([`escape::terminal`]): the only escape sequences written are the style's.
    pub fn paint(self, code: &str, text: &str) -> String {
        let text = escape::terminal(text);
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.into_owned()
        }
    }
    /// Bold.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
    /// Dim.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }
    /// Yellow.
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }
    /// Cyan.
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
}

/// A table of strings; numeric columns are right-aligned.
pub struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    /// Columns written as code spans in Markdown.
    code: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these `(header, right-aligned)` columns.
    pub fn new(columns: &[(&str, bool)]) -> Self {
        Self {
            header: columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
            right: columns.iter().map(|(_, r)| *r).collect(),
            code: vec![false; columns.len()],
            rows: Vec::new(),
        }
    }

    /// The columns of `spec` [`shown`] for `rows` (the compact ones) over those rows: text cut
    /// where the column says, counts with thousands separators, durations as `durations` says.
    pub fn from_spec<T>(spec: &[ColumnSpec<T>], rows: &[T], durations: Durations) -> Self {
        let columns = shown(spec, rows, true);
        let micros_header = |c: &ColumnSpec<T>| match (c.unit, durations) {
            (Unit::Ns, Durations::Micros) => Cow::Owned(format!("{} µs", c.header)),
            _ => Cow::Borrowed(c.header),
        };
        let headers: Vec<Cow<'_, str>> = columns.iter().map(|c| micros_header(c)).collect();
        let heads: Vec<(&str, bool)> = headers
            .iter()
            .zip(&columns)
            .map(|(h, c)| (h.as_ref(), !c.unit.is_text()))
            .collect();
        let mut table = Self::new(&heads);
        for row in rows {
            table.row(
                columns
                    .iter()
                    .map(|c| match (c.value)(row) {
                        Cell::Text(s) if c.cut > 0 => truncate(s, c.cut),
                        Cell::Ns(ns) if durations == Durations::Micros => micros(ns),
                        Cell::NsShare(ns, share) if durations == Durations::Micros => {
                            format!("{} ({share:.2}%)", micros(ns))
                        }
                        cell => cell_text(cell, c.missing),
                    })
                    .collect(),
            );
        }
        table
    }

    /// Writes column `column` as code spans in Markdown (a cell with a backtick, a backslash
    /// or a `|`, which a code span in a table cannot hold, as escaped text instead).
    #[must_use]
    pub fn markdown_code(mut self, column: usize) -> Self {
        if let Some(code) = self.code.get_mut(column) {
            *code = true;
        }
        self
    }

    /// Adds a row (one cell per column).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Writes the table aligned for a terminal.
    ///
    /// # Errors
    /// When `out` cannot be written.
    pub fn text(&self, out: &mut dyn Write, style: Style) -> io::Result<()> {
        // Every cell and heading as the terminal will show it, before measuring.
        fn shown(cells: &[String]) -> Vec<Cow<'_, str>> {
            cells.iter().map(|c| escape::terminal(c)).collect()
        }
        let header = shown(&self.header);
        let rows: Vec<Vec<Cow<'_, str>>> = self.rows.iter().map(|r| shown(r)).collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|c| {
                rows.iter()
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .chain([header[c].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[Cow<'_, str>]| {
            let mut s = String::from("  ");
            for (c, w) in widths.iter().enumerate() {
                let cell = cells.get(c).map_or("", |c| c.as_ref());
                let pad = w.saturating_sub(cell.chars().count());
                if c > 0 {
                    s.push_str("  ");
                }
                if self.right[c] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                } else {
                    s.push_str(cell);
                    if c + 1 < widths.len() {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            s.trim_end().to_owned()
        };
        writeln!(out, "{}", style.dim(&line(&header)))?;
        for row in &rows {
            writeln!(out, "{}", line(row))?;
        }
        Ok(())
    }

    /// Writes the table as a Markdown table.
    ///
    /// # Errors
    /// When `out` cannot be written.
    pub fn markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "| {} |",
            self.header
                .iter()
                .map(|h| escape::markdown(h))
                .collect::<Vec<_>>()
                .join(" | ")
        )?;
        let rule: Vec<&str> = self
            .right
            .iter()
            .map(|&r| if r { "---:" } else { "---" })
            .collect();
        writeln!(out, "| {} |", rule.join(" | "))?;
        for row in &self.rows {
            let cells: Vec<Cow<'_, str>> = row
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    let plain = !cell.contains(['`', '\\', '|']);
                    if self.code.get(c).copied().unwrap_or(false) && plain {
                        Cow::Owned(escape::markdown_code(cell))
                    } else {
                        escape::markdown(cell)
                    }
                })
                .collect();
            writeln!(out, "| {} |", cells.join(" | "))?;
        }
        Ok(())
    }
}

/// `s` cut to `max` characters, the last one an ellipsis when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}
