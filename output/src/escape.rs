//! What a trace wrote, made safe to show: op names, file names, titles and warnings come from
//! the input, and an input must never talk to the terminal (an `ESC ]0;…BEL` retitles the
//! window, `ESC[2J` clears it) nor to a Markdown renderer (`<script>`, `[x](javascript:…)`, a
//! newline that ends a table row). Every renderer in this crate passes the strings it did not
//! write itself through [`terminal`] (text) or [`markdown`] (Markdown); the table renderer
//! (`table::Table`) and `table::Style` do it for their cells and texts.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal raw: the C0 controls, DEL and the C1 controls (a C1
/// `U+009B` is a CSI to many terminals), and the bidirectional formatting characters that make
/// a terminal show text in another order than it is (the "Trojan source" characters).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `c` as visible text: `\n`, `\t`, `\r`, `\x1b` (C0, DEL), `\u{9b}` (C1 and the bidi
/// characters).
fn visible(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` for a terminal: every control character (C0, DEL, C1) and bidi override written as a
/// visible escape (`\x1b`, `\n`, `\u{9b}`); everything else, backslashes included, as it is.
/// Escaping twice changes nothing.
#[must_use]
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            visible(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The characters [`markdown`] puts a backslash before: those that start HTML (`<`, `>`),
/// links and images (`[`, `]`), table cells (`|`), code spans (`` ` ``), and the backslash
/// itself (so that a name ending in `\` cannot undo the escape of what follows).
const MARKDOWN_SPECIAL: &[char] = &['\\', '<', '>', '[', ']', '|', '`'];

/// `s` as literal Markdown text, inline (a table cell, a list item, a heading): line breaks
/// become spaces, other control characters visible escapes (as [`terminal`]), and
/// `\ < > [ ] | `` ` `` are backslash-escaped, so no tag, link, code span or table cell
/// comes out of it. Emphasis characters (`*`, `_`) are left alone: op names are full of
/// them, and they only change how text looks.
#[must_use]
pub fn markdown(s: &str) -> Cow<'_, str> {
    markdown_with(s, MARKDOWN_SPECIAL)
}

/// [`markdown`] for prose of steplens's own with names in it (a finding's recommendation):
/// the same, except that backticks are kept, so its code spans stay code. A name's backtick
/// can only open or close a code span, inside which nothing is markup.
#[must_use]
pub fn markdown_prose(s: &str) -> Cow<'_, str> {
    markdown_with(s, &MARKDOWN_SPECIAL[..6])
}

fn markdown_with<'s>(s: &'s str, special: &[char]) -> Cow<'s, str> {
    if !s.chars().any(|c| is_unsafe(c) || special.contains(&c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            c if is_unsafe(c) => {
                // `\x1b` with its backslash escaped: it reads `\x1b` once rendered.
                out.push('\\');
                visible(&mut out, c);
            }
            c if special.contains(&c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` as an inline Markdown code span: a fence of one backtick more than the longest run in
/// `s` (padded with spaces when `s` starts or ends with one), line breaks as spaces and other
/// control characters as visible escapes. Not for table cells (a `|` in a code span still
/// splits a GFM table row): [`markdown`] is.
#[must_use]
pub fn markdown_code(s: &str) -> String {
    let text: String = s
        .chars()
        .map(|c| match c {
            '\n' | '\r' => " ".to_owned(),
            c if is_unsafe(c) => {
                let mut v = String::new();
                visible(&mut v, c);
                v
            }
            c => c.to_string(),
        })
        .collect();
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_every_control_character_visibly() {
        assert_eq!(terminal("aten::mm"), "aten::mm");
        assert!(matches!(terminal("plain"), Cow::Borrowed(_)));
        assert_eq!(
            terminal("a\u{1b}]0;x\u{7}\u{1b}[2Jb"),
            "a\\x1b]0;x\\x07\\x1b[2Jb"
        );
        assert_eq!(terminal("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(terminal("\u{7f}\u{9b}\u{85}"), "\\x7f\\u{9b}\\u{85}");
        assert_eq!(terminal("x\u{202e}y"), "x\\u{202e}y");
        // Backslashes stay, so escaping twice changes nothing.
        assert_eq!(terminal(r"C:\traces\a.json"), r"C:\traces\a.json");
        let once = terminal("\u{1b}[31m").into_owned();
        assert_eq!(terminal(&once), once);
        // Not a control character.
        assert_eq!(terminal("µs ≤ ✓"), "µs ≤ ✓");
    }

    #[test]
    fn markdown_escapes_markup_and_line_breaks() {
        assert_eq!(markdown("aten::_to_copy"), "aten::_to_copy");
        assert_eq!(
            markdown("<b>x</b> [a](javascript:b) | `c`\nd\\"),
            r"\<b\>x\</b\> \[a\](javascript:b) \| \`c\` d\\"
        );
        assert_eq!(markdown("a\u{1b}[2J"), r"a\\x1b\[2J");
        assert_eq!(markdown_prose("use `x` <now>"), r"use `x` \<now\>");
    }

    #[test]
    fn code_spans_outgrow_the_backticks_inside() {
        assert_eq!(markdown_code("a.json"), "`a.json`");
        assert_eq!(markdown_code("a`b"), "``a`b``");
        assert_eq!(markdown_code("`a``"), "``` `a`` ```");
        assert_eq!(markdown_code("a\nb\u{7}"), "`a b\\x07`");
    }
}
