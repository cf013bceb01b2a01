//! Hostile names: an output that names an input, control characters on the terminal, names that
//! would be tags, links or table rows in Markdown.

use super::*;

/// A small Kineto trace: two steps, each running the ops `names` one after another.
fn tiny_trace(names: &[&str]) -> Vec<u8> {
    let mut events = Vec::new();
    for step in 0..2_i64 {
        let start = step * 1000;
        events.push(serde_json::json!({"ph": "X", "cat": "user_annotation",
            "name": format!("ProfilerStep#{}", step + 1), "pid": 1, "tid": 1,
            "ts": start, "dur": 1000}));
        for (i, name) in names.iter().enumerate() {
            let i = i as i64;
            events.push(serde_json::json!({"ph": "X", "cat": "cpu_op", "name": name,
                "pid": 1, "tid": 1, "ts": start + 10 + i * 100, "dur": 50 + i * 10}));
        }
    }
    serde_json::to_vec(&serde_json::json!({ "traceEvents": events })).unwrap()
}

/// The names of the entries of `dir`, sorted.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn an_output_that_names_an_input_is_refused_and_the_input_kept() {
    let dir = TempDir::new().unwrap();
    let bytes = tiny_trace(&["aten::mm", "aten::add"]);
    let trace = temp_file(&dir, "t.json", &bytes);
    let other = temp_file(&dir, "u.json", &tiny_trace(&["aten::mm"]));
    let budget = temp_file(&dir, "b.toml", b"[thresholds]\n");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&trace, &link).unwrap();
    let p = |path: &std::path::Path| path.to_str().unwrap().to_owned();
    let (t, u, b, l) = (p(&trace), p(&other), p(&budget), p(&link));
    let respelled = format!("{}/sub/../t.json", dir.path().display());
    let d = p(dir.path());
    let before = entries(dir.path());
    // (arguments, the output as spelled, the input named)
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["report", &t, "-f", "json", "-o", &t], &t, &t),
        (vec!["report", &t, "-f", "md", "-o", &l], &l, &t),
        (vec!["report", &t, "-o", &respelled], &respelled, &t),
        (vec!["report", &d, "-o", &t], &t, &t),
        (vec!["report", &t, "--budget", &b, "-o", &b], &b, &b),
        (vec!["export", &t, "--perfetto", &t], &t, &t),
        (vec!["export", &t, "--perfetto", &l], &l, &t),
        (vec!["export", &t, "--tables", &d], &d, &t),
        (vec!["summarize", &t, "-o", &respelled], &respelled, &t),
        (vec!["diff", &t, &u, "-o", &u], &u, &u),
        (vec!["check", &t, "--baseline", &u, "--junit", &u], &u, &u),
        (vec!["check", &t, "--baseline", &u, "--html", &l], &l, &t),
        (
            vec!["check", &t, "--baseline", &u, "--summary-md", &t],
            &t,
            &t,
        ),
        (vec!["baseline", "update", &t, &d], &t, &t),
    ];
    for (args, output, input) in &cases {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        let out = run_with(&args, None);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("steplens: error: "), "{args:?}: {err}");
        assert!(err.contains(output), "{args:?}: {err} should name {output}");
        assert!(err.contains(input), "{args:?}: {err} should name {input}");
        assert!(err.contains("refusing to write"), "{args:?}: {err}");
        assert_eq!(std::fs::read(&trace).unwrap(), bytes, "{args:?}");
        assert_eq!(entries(dir.path()), before, "{args:?} left a file behind");
    }
    // Standard input redirected from the file that is also the output.
    let out = run_with(
        &["report", "-", "-o", &t].map(std::ffi::OsStr::new),
        Some(&trace),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("standard input"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&trace).unwrap(), bytes);

    // Another file is written whole, through a temporary file, and a link stays a link.
    let md = dir.path().join("sub/r.md");
    std::os::unix::fs::symlink(&md, dir.path().join("r.md")).unwrap();
    std::fs::write(&md, "earlier").unwrap();
    let r = p(&dir.path().join("r.md"));
    let out = run_with(
        &["report", &t, "-f", "md", "-o", &r].map(std::ffi::OsStr::new),
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(&md)
            .unwrap()
            .starts_with("# steplens report")
    );
    assert!(
        std::fs::symlink_metadata(&r)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(entries(&dir.path().join("sub")), ["r.md"]);
}

/// Whether `text` holds a character a terminal acts on: C0 other than the newline between
/// lines, DEL, C1.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| (c < ' ' && c != '\n') || ('\u{7f}'..='\u{9f}').contains(&c))
        .collect()
}

#[test]
fn control_characters_in_names_never_reach_the_terminal() {
    let dir = TempDir::new().unwrap();
    // An op that retitles the window, rings the bell, clears the screen, breaks the line and
    // sends a C1 CSI; a file whose name does the same.
    let evil = "x\u{1b}]0;owned\u{7}\u{1b}[2J\nnext\u{9b}31m\u{7f}\t\r";
    let trace = temp_file(
        &dir,
        "t\u{1b}[2J\nline.json",
        &tiny_trace(&[evil, "aten::mm"]),
    );
    let plain = temp_file(&dir, "plain.json", &tiny_trace(&["aten::mm"]));
    let t = trace.to_str().unwrap();
    let u = plain.to_str().unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["report", t],
        vec!["report", t, "--critical-path"],
        vec!["report", t, "--view", "operators,overview"],
        vec!["report", t, "-f", "md"],
        vec!["info", t, "--tracks"],
        vec!["diff", u, t],
        vec!["diff", u, t, "-f", "md"],
        vec!["check", t, "--baseline", u, "--github"],
    ];
    for args in &runs {
        let os: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        let out = run_with(&os, None);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            stderr(&out)
        );
        let text = stdout(&out);
        assert_eq!(raw_controls(&text), [], "{args:?}:\n{text}");
        assert_eq!(raw_controls(&stderr(&out)), [], "{args:?}");
        assert!(text.contains(r"\x1b"), "{args:?}:\n{text}");
        if args[0] == "report" && !args.contains(&"md") {
            // The op's name on one line, every control character visible.
            assert!(
                text.contains(r"x\x1b]0;owned\x07\x1b[2J\nnext\u{9b}31m\x7f\t\r"),
                "{args:?}:\n{text}"
            );
            // The header names the file on one line (the plugin's views have no header).
            if !args.contains(&"--view") {
                assert!(text.contains(r"t\x1b[2J\nline.json"), "{args:?}:\n{text}");
            }
        }
    }
    // An error line that names such a file is one line too.
    let missing = dir.path().join("gone\u{1b}[2J\n.json");
    let out = run_with(&[std::ffi::OsStr::new("report"), missing.as_os_str()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(raw_controls(&err), [], "{err}");
    assert!(err.contains(r"gone\x1b[2J\n.json"), "{err}");
}

/// What a CommonMark renderer makes of `md`: the raw HTML and links in it (none allowed), the
/// body rows of each table, and the document's text.
fn render_markdown(md: &str) -> (Vec<String>, Vec<usize>, String) {
    use pulldown_cmark::{Event, Options, Parser, Tag};
    let mut live = Vec::new();
    let mut rows = Vec::new();
    let mut text = String::new();
    let mut in_head = false;
    for event in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => live.push(format!("html {html}")),
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                live.push(format!("link {dest_url}"));
            }
            Event::Start(Tag::Table(_)) => rows.push(0),
            Event::Start(Tag::TableHead) => in_head = true,
            Event::End(pulldown_cmark::TagEnd::TableHead) => in_head = false,
            Event::Start(Tag::TableRow) if !in_head => {
                if let Some(n) = rows.last_mut() {
                    *n += 1;
                }
            }
            Event::Text(t) | Event::Code(t) => text.push_str(&t),
            _ => {}
        }
    }
    (live, rows, text)
}

#[test]
fn markdown_of_hostile_names_has_no_tag_link_or_extra_row() {
    let dir = TempDir::new().unwrap();
    let names = [
        "<b>bold</b><script>alert(1)</script>",
        "[x](javascript:alert(1)) ![i](http://e/i.png)",
        "a | b\n| c | d |\nnew row",
        "`code` \\| <img src=x onerror=alert(1)>",
        "aten::mm",
    ];
    let trace = temp_file(&dir, "t.json", &tiny_trace(&names));
    let other = temp_file(
        &dir,
        "b`<script>`[l](javascript:y)|.json",
        &tiny_trace(&["aten::mm", "<i>only in b</i>\n| x |"]),
    );
    let (t, o) = (trace.to_str().unwrap(), other.to_str().unwrap());

    let md = stdout(&steplens(&["report", t, "-f", "md"]));
    let (live, rows, text) = render_markdown(&md);
    assert_eq!(live, Vec::<String>::new(), "{md}");
    // Steps (two and their mean), then the op table: one row per op.
    assert_eq!(rows, [3, names.len()], "{md}");
    assert!(text.contains("<script>alert(1)</script>"), "{text}");
    assert!(text.contains("[x](javascript:alert(1))"), "{text}");

    let md = stdout(&steplens(&["diff", t, o, "-f", "md"]));
    let (live, rows, text) = render_markdown(&md);
    assert_eq!(live, Vec::<String>::new(), "{md}");
    let diff = json(&["diff", t, o, "-f", "json"]);
    let changed = diff["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|op| op["status"] != "same")
        .count();
    assert_eq!(rows.last().copied(), Some(changed), "{md}");
    assert!(text.contains("<i>only in b</i>"), "{text}");
    assert!(
        text.contains("b`<script>`[l](javascript:y)|.json"),
        "{text}"
    );
}
