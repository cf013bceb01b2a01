//! Where a page goes as it renders: [`Html`], an [`io::Write`] seen as a [`fmt::Write`], so the
//! sections `write!` straight into a file or stdout and no page is held whole in memory (issue
//! 45); and [`page_string`], what the `String`-returning pages are on top of it.

use std::fmt;
use std::io;

/// The writer every section renders into. The first I/O error is kept and every later write
/// skipped; [`Html::finish`] returns it.
pub(super) struct Html<'w> {
    out: &'w mut dyn io::Write,
    error: Option<io::Error>,
}

impl<'w> Html<'w> {
    /// Renders into `out` (best a `BufWriter`: sections write many short pieces).
    pub(super) fn new(out: &'w mut dyn io::Write) -> Self {
        Self { out, error: None }
    }

    /// Writes `text` as it is (a failed write is kept for [`Html::finish`]).
    pub(super) fn push_str(&mut self, text: &str) {
        let _ = fmt::Write::write_str(self, text);
    }

    /// The first error the writer returned, if any.
    pub(super) fn finish(self) -> io::Result<()> {
        self.error.map_or(Ok(()), Err)
    }
}

impl fmt::Write for Html<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        if self.error.is_some() {
            return Err(fmt::Error);
        }
        self.out.write_all(text.as_bytes()).map_err(|e| {
            self.error = Some(e);
            fmt::Error
        })
    }
}

/// A page rendered into memory: `render` writes it into a `Vec<u8>`, which cannot fail, and the
/// page is UTF-8 as every piece of it is a `&str`.
pub(super) fn page_string(render: impl FnOnce(&mut dyn io::Write) -> io::Result<()>) -> String {
    let mut buf = Vec::new();
    let _ = render(&mut buf);
    String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
