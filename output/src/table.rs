//! Aligned tables of strings, as text (ANSI color when asked) or Markdown, shared by every
//! renderer.

use std::io::{self, Write};

/// ANSI styling that turns into nothing when color is off.
#[derive(Clone, Copy)]
pub struct Style {
    /// Whether ANSI codes are written.
    pub color: bool,
}

impl Style {
    /// `text` in the ANSI style `code` (`"31;1"`).
    pub fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
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
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these `(header, right-aligned)` columns.
    pub fn new(columns: &[(&str, bool)]) -> Self {
        Self {
            header: columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
            right: columns.iter().map(|(_, r)| *r).collect(),
            rows: Vec::new(),
        }
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
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .chain([self.header[c].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut s = String::from("  ");
            for (c, w) in widths.iter().enumerate() {
                let cell = cells.get(c).map_or("", String::as_str);
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
        writeln!(out, "{}", style.dim(&line(&self.header)))?;
        for row in &self.rows {
            writeln!(out, "{}", line(row))?;
        }
        Ok(())
    }

    /// Writes the table as a Markdown table.
    ///
    /// # Errors
    /// When `out` cannot be written.
    pub fn markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        let escape = |s: &str| s.replace('|', "\\|");
        writeln!(
            out,
            "| {} |",
            self.header
                .iter()
                .map(|h| escape(h))
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
            writeln!(
                out,
                "| {} |",
                row.iter()
                    .map(|c| escape(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            )?;
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
