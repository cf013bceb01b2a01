//! A small RFC 4180 CSV record splitter for the Gaudi CSV formats: fields separated by commas,
//! records by LF or CRLF, `"quoted"` fields that may hold commas, line breaks and `""` escapes.
//! It never fails: a quoted field that runs to the end of the input is reported as
//! [`Record::open_quote`], and a last record without a line break as not [`Record::terminated`],
//! so a reader can tell a file cut in the middle of a row.

use std::borrow::Cow;

/// One CSV record.
#[derive(Debug)]
pub(crate) struct Record<'a> {
    /// The fields, unquoted (invalid UTF-8 replaced).
    pub(crate) fields: Vec<Cow<'a, str>>,
    /// Byte offset of the record's first byte.
    pub(crate) offset: usize,
    /// 1-based line number of the record's first line.
    pub(crate) line: usize,
    /// Whether the record ended with a line break (the last record of a file may not).
    pub(crate) terminated: bool,
    /// Whether a quoted field was still open at the end of the input.
    pub(crate) open_quote: bool,
}

/// Iterates over the records of `buf`, skipping blank lines.
pub(crate) struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Records<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        let pos = if buf.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        Self { buf, pos, line: 1 }
    }

    /// The header row; a file without one is "not a trace" of `path`.
    pub(crate) fn header(&mut self, path: &str) -> Result<Record<'a>, crate::error::IngestError> {
        self.next()
            .ok_or_else(|| crate::error::IngestError::NotATrace {
                path: path.to_owned(),
                reason: "the file is empty".into(),
            })
    }

    fn text(bytes: &'a [u8]) -> Cow<'a, str> {
        String::from_utf8_lossy(bytes)
    }

    /// Reads one field starting at `self.pos`; returns it and whether a quote stayed open.
    fn field(&mut self) -> (Cow<'a, str>, bool) {
        let b = self.buf;
        if b.get(self.pos) != Some(&b'"') {
            let rest = &b[self.pos..];
            let end = memchr::memchr2(b',', b'\n', rest).map_or(b.len(), |i| self.pos + i);
            let mut raw = &b[self.pos..end];
            if b.get(end) == Some(&b'\n') {
                raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            }
            self.pos = end;
            return (Self::text(raw), false);
        }
        // Quoted: up to the next quote that is not doubled.
        let content = self.pos + 1;
        let mut i = content;
        let mut escaped = false;
        loop {
            let Some(q) = memchr::memchr(b'"', &b[i..]).map(|q| i + q) else {
                self.line += memchr::memchr_iter(b'\n', &b[content..]).count();
                self.pos = b.len();
                return (Self::text(&b[content..]), true);
            };
            if b.get(q + 1) == Some(&b'"') {
                escaped = true;
                i = q + 2;
                continue;
            }
            let raw = &b[content..q];
            self.line += memchr::memchr_iter(b'\n', raw).count();
            let mut value = if escaped {
                Cow::Owned(String::from_utf8_lossy(raw).replace("\"\"", "\""))
            } else {
                Self::text(raw)
            };
            // Lenient like Python's csv: text between the closing quote and the delimiter is
            // kept as part of the field.
            let after = q + 1;
            let end = memchr::memchr2(b',', b'\n', &b[after..]).map_or(b.len(), |j| after + j);
            let mut tail = &b[after..end];
            if b.get(end) == Some(&b'\n') {
                tail = tail.strip_suffix(b"\r").unwrap_or(tail);
            }
            if !tail.is_empty() {
                value = Cow::Owned(format!("{value}{}", String::from_utf8_lossy(tail)));
            }
            self.pos = end;
            return (value, false);
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        // Skip blank lines.
        loop {
            let rest = self.buf.get(self.pos..)?;
            if rest.is_empty() {
                return None;
            }
            let line_end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            if rest[..line_end].iter().all(|&c| c == b'\r' || c == b' ') {
                if line_end == rest.len() {
                    self.pos = self.buf.len();
                    return None;
                }
                self.pos += line_end + 1;
                self.line += 1;
                continue;
            }
            break;
        }
        let offset = self.pos;
        let line = self.line;
        let mut fields = Vec::new();
        loop {
            let (value, open_quote) = self.field();
            fields.push(value);
            if open_quote {
                return Some(Record {
                    fields,
                    offset,
                    line,
                    terminated: false,
                    open_quote: true,
                });
            }
            match self.buf.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(_) => {
                    // A line break.
                    self.pos += 1;
                    self.line += 1;
                    return Some(Record {
                        fields,
                        offset,
                        line,
                        terminated: true,
                        open_quote: false,
                    });
                }
                None => {
                    return Some(Record {
                        fields,
                        offset,
                        line,
                        terminated: false,
                        open_quote: false,
                    });
                }
            }
        }
    }
}

/// A cell that means "no value": empty, `nan`, `[]`, `[Error]`.
pub(crate) fn is_missing(cell: &str) -> bool {
    let c = cell.trim();
    c.is_empty() || c.eq_ignore_ascii_case("nan") || c == "[]" || c == "[Error]"
}

#[cfg(test)]
mod tests {
    use super::Records;

    fn all(text: &str) -> Vec<(Vec<String>, usize, bool, bool)> {
        Records::new(text.as_bytes())
            .map(|r| {
                (
                    r.fields.iter().map(|f| f.to_string()).collect(),
                    r.line,
                    r.terminated,
                    r.open_quote,
                )
            })
            .collect()
    }

    #[test]
    fn splits_plain_and_quoted_fields() {
        let got = all("a,b,c\r\n\"x,y\",\"he said \"\"hi\"\"\",\n\"multi\nline\",2,3\n\n4,5");
        assert_eq!(
            got,
            vec![
                (vec!["a".into(), "b".into(), "c".into()], 1, true, false),
                (
                    vec!["x,y".into(), "he said \"hi\"".into(), String::new()],
                    2,
                    true,
                    false
                ),
                (
                    vec!["multi\nline".into(), "2".into(), "3".into()],
                    3,
                    true,
                    false
                ),
                (vec!["4".into(), "5".into()], 6, false, false),
            ]
        );
    }

    #[test]
    fn an_open_quote_at_the_end_is_reported() {
        let got = all("a,b\n1,\"cut here");
        assert_eq!(
            got[1],
            (vec!["1".into(), "cut here".into()], 2, false, true)
        );
    }

    #[test]
    fn bom_and_empty_input() {
        assert!(all("").is_empty());
        assert_eq!(all("\u{feff}a\n")[0].0, vec!["a".to_owned()]);
    }
}
