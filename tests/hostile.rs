//! Hostile and broken inputs and outputs, end to end: bombs inside archives, endless streams,
//! one bad field, overlapping slices, a mapping that breaks, a full disk, stale table
//! partitions, budgets and baselines with impossible values. Each fails with one line and
//! exit 2, or loads what is readable with a warning that says what was dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use support::{fails, json, repo, stderr, stdout, steplens, temp_file};
use tempfile::TempDir;

const CLEAN: &str = "samples/torch-cpu/train_clean.json";

/// An archive member: its name and what writes its bytes.
type Member<'a> = (&'a str, &'a dyn Fn(&mut dyn Write));

/// A ZIP archive of `members`, deflated fast.
fn zip_of(dir: &TempDir, name: &str, members: &[Member<'_>]) -> String {
    let path = dir.path().join(name);
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(1))
        .large_file(true);
    for (member, write) in members {
        zip.start_file(*member, options).unwrap();
        write(&mut zip);
    }
    zip.finish().unwrap();
    path.to_str().unwrap().to_owned()
}

fn zeros(out: &mut dyn Write, bytes: usize) {
    let block = vec![0u8; 1 << 20];
    for _ in 0..bytes >> 20 {
        out.write_all(&block).unwrap();
    }
}

#[test]
fn an_archive_member_steplens_does_not_read_is_never_inflated() {
    let dir = TempDir::new().unwrap();
    let trace = std::fs::read(repo().join(CLEAN)).unwrap();
    // Four members of 256 MiB of zeros each (1 GiB together) beside one real trace.
    let bomb = |out: &mut dyn Write| zeros(out, 256 << 20);
    let real = |out: &mut dyn Write| out.write_all(&trace).unwrap();
    let members: Vec<Member<'_>> = vec![
        ("a.bin", &bomb),
        ("b.bin", &bomb),
        ("trace.json", &real),
        ("c.bin", &bomb),
        ("d.bin", &bomb),
    ];
    let archive = zip_of(&dir, "bomb.hltv", &members);
    let started = Instant::now();
    let out = steplens(&["report", "-f", "json", &archive]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Inflating the zeros would take seconds; sniffing their first bytes does not.
    assert!(started.elapsed() < Duration::from_secs(20));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(report["summary"]["steps"].as_u64().unwrap() > 0);
    let warnings = report["sources"].to_string();
    assert!(warnings.contains("skipped 4 archive members"), "{warnings}");
}

#[test]
fn an_archive_member_that_inflates_past_the_ratio_is_an_error() {
    let dir = TempDir::new().unwrap();
    // Looks like a trace from its first bytes, then 300 MiB of spaces.
    let spaces = |out: &mut dyn Write| {
        out.write_all(br#"{"traceEvents":["#).unwrap();
        let block = vec![b' '; 1 << 20];
        for _ in 0..300 {
            out.write_all(&block).unwrap();
        }
        out.write_all(b"]}").unwrap();
    };
    let members: Vec<Member<'_>> = vec![("trace.json", &spaces)];
    let archive = zip_of(&dir, "spaces.hltv", &members);
    // At 50:1 the few hundred KiB of the member may inflate to the 256 MiB floor only.
    let line = fails(
        &["report", "--max-inflate-ratio", "50", &archive],
        "spaces.hltv",
    );
    assert!(line.contains("--max-inflate-ratio"), "{line}");
}

#[test]
fn endless_streams_fail_at_once() {
    // A device: its first bytes are no format.
    let line = fails(&["report", "/dev/zero"], "/dev/zero");
    assert!(line.contains("not a trace"), "{line}");
    // stdin fed from /dev/zero.
    let out = Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(["report", "-"])
        .current_dir(repo())
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a trace"), "{err}");
    // A stream that starts like a trace and goes on: bounded by --max-inflated-bytes.
    let mut child = Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(["report", "--max-inflated-bytes", "1000000", "-"])
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(br#"{"traceEvents":["#);
        let block = vec![b' '; 1 << 16];
        // Until steplens stops reading (a broken pipe).
        for _ in 0..1000 {
            if stdin.write_all(&block).is_err() {
                break;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("--max-inflated-bytes"), "{err}");
}

#[test]
fn one_event_with_a_bad_field_costs_one_event() {
    let dir = TempDir::new().unwrap();
    let trace = temp_file(
        &dir,
        "bad_field.json",
        br#"{"traceEvents":[
        {"ph":"X","cat":"cpu_op","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":100},
        {"ph":"X","cat":"cpu_op","name":"a","pid":{"x":1},"tid":1,"ts":1,"dur":1},
        {"ph":"X","cat":"cpu_op","name":5,"pid":1,"tid":1,"ts":2,"dur":1},
        {"ph":"X","cat":"cpu_op","name":"ProfilerStep#2","pid":1,"tid":1,"ts":100,"dur":100}
    ]}"#,
    );
    let out = steplens(&["report", "-f", "json", trace.to_str().unwrap()]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["summary"]["steps"], 2);
    let warnings = report["sources"].to_string();
    assert!(warnings.contains("wrong_field_type"), "{warnings}");
    assert!(warnings.contains("`pid` on 1"), "{warnings}");
    assert!(!warnings.contains("dropped the rest"), "{warnings}");
}

#[test]
fn export_of_a_self_overlapping_track_keeps_every_slice() {
    let dir = TempDir::new().unwrap();
    // 200,000 kernels on one stream, each overlapping the next (none nests in another).
    let n = 200_000;
    let events: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{}.{:03},"dur":100000}}"#,
                i / 1000,
                i % 1000
            )
        })
        .collect();
    let trace = temp_file(
        &dir,
        "overlap.json",
        format!(r#"{{"traceEvents":[{}]}}"#, events.join(",")).as_bytes(),
    );
    let out_path = dir.path().join("overlap.pftrace");
    let started = Instant::now();
    let out = steplens(&[
        "export",
        "--perfetto",
        out_path.to_str().unwrap(),
        trace.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(60));
    let err = stderr(&out);
    assert!(err.contains("200,000 slices"), "{err}");
    assert!(!err.contains("left out"), "{err}");
    // The export read back holds what the trace holds: the report of each counts 200,000.
    let calls = |path: &str| -> u64 {
        let r: serde_json::Value =
            serde_json::from_str(&stdout(&steplens(&["report", "-f", "json", path]))).unwrap();
        r["ops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|op| op["name"] == "k")
            .map(|op| op["count"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(calls(trace.to_str().unwrap()), n);
    assert_eq!(calls(out_path.to_str().unwrap()), n);
}

#[cfg(unix)]
#[test]
fn a_mapping_that_breaks_is_one_error_line() {
    // SIGBUS is what a truncated mapping raises; sent by hand while steplens waits on stdin.
    let mut child = Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(["report", CLEAN, "-"])
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // The shell's own `kill`: no procps needed.
    let killed = Command::new("sh")
        .args(["-c", &format!("kill -s BUS {}", child.id())])
        .status()
        .unwrap();
    assert!(killed.success());
    let stdin = child.stdin.take();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("steplens: error: samples/torch-cpu/train_clean.json, -: the file changed while it was read"),
        "{err}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_names_the_file_with_code_io() {
    let line = fails(&["report", "-o", "/dev/full", CLEAN], "/dev/full");
    assert!(line.contains("cannot write /dev/full"), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
    // JSON errors carry the code; stdout is the full device, so the code is read from a run
    // whose output file is full instead.
    let out = steplens(&["report", "-f", "json", "-o", "/dev/full", CLEAN]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(doc["error"]["code"], "io");
    // stdout itself on a full device.
    let out = Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(["report", CLEAN])
        .current_dir(repo())
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot write standard output"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn table_export_replaces_what_it_wrote_before_and_refuses_other_files() {
    let dir = TempDir::new().unwrap();
    let tables = dir.path().join("tables");
    let tables = tables.to_str().unwrap();
    let rank = |r: usize| format!("samples/ranks/nccl_balanced/nccl_balanced_rank{r}.json.gz");
    let four: Vec<String> = (0..4).map(rank).collect();
    let mut args = vec!["export", "--tables", tables, "--format", "csv"];
    args.extend(four.iter().map(String::as_str));
    let out = steplens(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let ranks_in = |table: &str| {
        let mut found: Vec<String> = std::fs::read_dir(std::path::Path::new(tables).join(table))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        found.sort();
        found
    };
    assert_eq!(ranks_in("steps"), ["rank=0", "rank=1", "rank=2", "rank=3"]);
    let two: Vec<String> = (0..2).map(rank).collect();
    let mut args = vec!["export", "--tables", tables, "--format", "csv"];
    args.extend(two.iter().map(String::as_str));
    let out = steplens(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(ranks_in("steps"), ["rank=0", "rank=1"]);
    // A directory with someone else's files is refused, unless --force.
    std::fs::write(std::path::Path::new(tables).join("notes.txt"), "mine").unwrap();
    let line = fails(&args, "tables");
    assert!(
        line.contains("holds files steplens did not write (notes.txt)"),
        "{line}"
    );
    args.push("--force");
    let out = steplens(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::path::Path::new(tables).join("notes.txt").exists());
}

#[test]
fn budgets_and_baselines_with_impossible_values_are_refused() {
    let dir = TempDir::new().unwrap();
    let budget = temp_file(&dir, "b.toml", b"[check]\nconfidence = nan\n");
    let line = fails(
        &[
            "check",
            CLEAN,
            "--baseline",
            CLEAN,
            "--budget",
            budget.to_str().unwrap(),
        ],
        "b.toml",
    );
    assert!(
        line.contains("line 2: check.confidence = NaN is out of range"),
        "{line}"
    );

    // A saved report with a negative step.
    let saved = stdout(&steplens(&["report", "-f", "json", CLEAN]));
    let steps_at = saved.find("\"steps\": [").unwrap();
    let dur_at = steps_at + saved[steps_at..].find("\"dur_ns\": ").unwrap() + 10;
    let dur_end = dur_at + saved[dur_at..].find(',').unwrap();
    let text = format!("{}-5{}", &saved[..dur_at], &saved[dur_end..]);
    let bad = temp_file(&dir, "bad.json", text.as_bytes());
    let line = fails(
        &["check", CLEAN, "--baseline", bad.to_str().unwrap()],
        "bad.json",
    );
    assert!(line.contains("dur_ns is -5"), "{line}");

    // A steplens document of another kind says what it is.
    let other = temp_file(
        &dir,
        "verdict.json",
        br#"{"schema": "steplens.check/1", "verdict": "pass"}"#,
    );
    let line = fails(
        &["check", CLEAN, "--baseline", other.to_str().unwrap()],
        "verdict.json",
    );
    assert!(
        line.contains("a steplens.check/1 document, not a report"),
        "{line}"
    );
    assert!(line.contains("steplens.report/1"), "{line}");
}

#[test]
fn a_complete_gzip_with_junk_after_it_keeps_every_step() {
    let dir = TempDir::new().unwrap();
    let trace = std::fs::read(repo().join(CLEAN)).unwrap();
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(&trace).unwrap();
    let mut gz = enc.finish().unwrap();
    gz.extend_from_slice(b"junk after the gzip stream");
    let path = temp_file(&dir, "junk.json.gz", &gz);
    let full = steplens(&["report", "-f", "json", CLEAN]);
    let out = steplens(&["report", "-f", "json", path.to_str().unwrap()]);
    assert!(out.status.success());
    let a: serde_json::Value = serde_json::from_slice(&full.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["summary"]["steps"], b["summary"]["steps"]);
    assert!(b["sources"].to_string().contains("trailing_data"));
}

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

/// Runs `steplens ARGS` in the repository root with `NO_COLOR=1`, stdin from `stdin` (else
/// nothing).
fn run_with(args: &[&std::ffi::OsStr], stdin: Option<&std::path::Path>) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_steplens"));
    command
        .args(args)
        .current_dir(repo())
        .env("NO_COLOR", "1")
        .env_remove("CI");
    command.stdin(match stdin {
        Some(path) => Stdio::from(std::fs::File::open(path).unwrap()),
        None => Stdio::null(),
    });
    command.output().unwrap()
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

/// One rank's trace: `distributedInfo` with `rank` (none when `None`), four steps of 10 ms, in
/// each a collective ending at `end_us(step)` (µs) and lasting 1 ms; `seq`, when given, numbers
/// them (`record_param_comms`' `Seq` in process group `pg0`). `skip` leaves steps out.
fn rank_doc(rank: Option<i64>, end_us: &dyn Fn(i64) -> i64, seq: bool, skip: &[i64]) -> Vec<u8> {
    let mut events = Vec::new();
    for step in 0..4_i64 {
        let start = 1_000_000 + step * 10_000;
        events.push(serde_json::json!({"ph": "X", "cat": "user_annotation",
            "name": format!("ProfilerStep#{step}"), "pid": 1, "tid": 1, "ts": start, "dur": 9_000}));
        events.push(
            serde_json::json!({"ph": "X", "cat": "cpu_op", "name": "aten::mm",
            "pid": 1, "tid": 1, "ts": start + 100, "dur": 3_000}),
        );
        if skip.contains(&step) {
            continue;
        }
        let end = end_us(step);
        let mut args = serde_json::json!({});
        if seq {
            args = serde_json::json!({"Collective name": "allreduce", "Seq": step,
                "Process Group Name": "pg0"});
        }
        events.push(serde_json::json!({"ph": "X", "cat": "cpu_op",
            "name": if seq { "record_param_comms" } else { "gloo:all_reduce" },
            "pid": 1, "tid": 2, "ts": end - 1_000, "dur": 1_000, "args": args}));
    }
    let mut doc = serde_json::json!({ "traceEvents": events });
    if let Some(rank) = rank {
        doc["distributedInfo"] =
            serde_json::json!({"backend": "gloo", "rank": rank, "world_size": 2});
    }
    serde_json::to_vec(&doc).unwrap()
}

/// `steplens report -f json` of `files` (written into `dir`) with `extra` arguments.
fn report_of(dir: &TempDir, files: &[(&str, Vec<u8>)], extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<String> = vec!["report".into(), "-f".into(), "json".into()];
    for (name, bytes) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        args.push(path.to_str().unwrap().to_owned());
    }
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = steplens(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Every warning of every input, as (code, message).
fn all_warnings(report: &serde_json::Value) -> Vec<(String, String)> {
    report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["warnings"].as_array().unwrap().clone())
        .map(|w| {
            (
                w["code"].as_str().unwrap().to_owned(),
                w["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn clocks_an_hour_apart_are_aligned_with_a_warning_not_said_to_agree() {
    let dir = TempDir::new().unwrap();
    let hour_us = 3_600_000_000_i64;
    let end = |step: i64| 1_000_000 + step * 10_000 + 8_000;
    let later = |step: i64| end(step) + hour_us;
    let r = report_of(
        &dir,
        &[
            ("a.json", rank_doc(Some(0), &end, false, &[])),
            ("b.json", rank_doc(Some(1), &later, false, &[])),
        ],
        &[],
    );
    let ranks = &r["ranks"];
    let clock = ranks["clock"].as_str().unwrap();
    assert!(!clock.contains("agree"), "{clock}");
    assert!(
        clock.contains("past the tolerance of 10.0 ms") && clock.contains("3600 s"),
        "{clock}"
    );
    let warnings = all_warnings(&r);
    assert!(
        warnings
            .iter()
            .any(|(code, m)| code == "clocks_disagree"
                && m.contains("rank 1 is 3600 s ahead of rank 0")),
        "{warnings:?}"
    );
    // Aligned: rank 1 shifted back an hour, and no one waits an hour.
    let rows = ranks["ranks"].as_array().unwrap();
    assert_eq!(rows[1]["clock_offset_ns"], -hour_us * 1000);
    assert!(rows.iter().all(|row| row["wait_ns"].as_i64().unwrap() == 0));

    // Ends that no single shift lines up: the cross-rank figures are left out, said so.
    let jumpy = |step: i64| end(step) + [40_000, -40_000, 40_000, 100_000][step as usize];
    let r = report_of(
        &dir,
        &[
            ("c.json", rank_doc(Some(0), &end, false, &[])),
            ("d.json", rank_doc(Some(1), &jumpy, false, &[])),
        ],
        &[],
    );
    let clock = r["ranks"]["clock"].as_str().unwrap();
    assert!(clock.starts_with("not aligned"), "{clock}");
    assert!(r["ranks"]["collectives"].as_array().unwrap().is_empty());
    assert!(
        all_warnings(&r)
            .iter()
            .any(|(code, _)| code == "clocks_not_aligned")
    );
}

#[test]
fn two_files_claiming_one_rank_are_named_and_get_no_rank_analysis() {
    let dir = TempDir::new().unwrap();
    let end = |step: i64| 1_000_000 + step * 10_000 + 8_000;
    let files = [
        ("host-a-w0.json", rank_doc(Some(0), &end, false, &[])),
        ("host-b-w1.json", rank_doc(Some(0), &end, false, &[])),
    ];
    let r = report_of(&dir, &files, &[]);
    assert!(r.get("ranks").is_none(), "{}", r["ranks"]);
    let warnings = all_warnings(&r);
    let (_, message) = warnings
        .iter()
        .find(|(code, _)| code == "duplicate_rank")
        .unwrap_or_else(|| panic!("{warnings:?}"));
    assert!(
        message.contains("host-a-w0.json and ")
            && message.contains("host-b-w1.json both claim rank 0 (distributedInfo)")
            && message.contains("--rank-regex"),
        "{message}"
    );
    // The text report says it too, once.
    let text = run_with(
        &[
            "report".as_ref(),
            dir.path().join("host-a-w0.json").as_os_str(),
            dir.path().join("host-b-w1.json").as_os_str(),
        ],
        None,
    );
    assert_eq!(stdout(&text).matches("both claim rank 0").count(), 1);
    // Merged from rank summaries: refused in one line naming both traces.
    let mut summaries = Vec::new();
    for (name, _) in &files {
        let summary = dir.path().join(format!("{name}.summary.json"));
        let trace = dir.path().join(name);
        let out = steplens(&[
            "summarize",
            trace.to_str().unwrap(),
            "-o",
            summary.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        summaries.push(summary.to_str().unwrap().to_owned());
    }
    let line = fails(
        &["report", "--summaries", &summaries[0], &summaries[1]],
        "both claim rank 0",
    );
    assert!(line.contains("host-a-w0.json and "), "{line}");
    // --rank-regex tells them apart: ranks from the paths, no warning.
    let r = report_of(&dir, &files, &[r"--rank-regex=-w(\d+)\.json"]);
    let rows = r["ranks"]["ranks"].as_array().unwrap();
    let ids: Vec<i64> = rows.iter().map(|x| x["rank"].as_i64().unwrap()).collect();
    assert_eq!(ids, [0, 1]);
    // Rank 1 is read from its path; rank 0's path and distributedInfo agree.
    assert_eq!(rows[1]["rank_from"], "file name");
    assert!(all_warnings(&r).is_empty(), "{:?}", all_warnings(&r));
}

#[test]
fn ranks_with_different_collective_counts_are_named_and_matched_by_sequence_number() {
    let dir = TempDir::new().unwrap();
    let end = |step: i64| 1_000_000 + step * 10_000 + 8_000;
    // Without sequence numbers: matching by order would pair step 1's call on rank 0 with
    // step 2's on rank 1, so all_reduce is left out, and the ranks are named.
    let r = report_of(
        &dir,
        &[
            ("a.json", rank_doc(Some(0), &end, false, &[])),
            ("b.json", rank_doc(Some(1), &end, false, &[1])),
        ],
        &[],
    );
    let warnings = all_warnings(&r);
    let (_, message) = warnings
        .iter()
        .find(|(code, _)| code == "collective_counts_differ")
        .unwrap_or_else(|| panic!("{warnings:?}"));
    assert!(
        message.contains("all_reduce: 4 on rank 0, 3 on rank 1")
            && message.contains("no sequence number"),
        "{message}"
    );
    assert!(r["ranks"]["collectives"].as_array().unwrap().is_empty());
    // With `Seq` and `Process Group Name`: the three calls both ranks ran are matched.
    let r = report_of(
        &dir,
        &[
            ("c.json", rank_doc(Some(0), &end, true, &[])),
            ("d.json", rank_doc(Some(1), &end, true, &[1])),
        ],
        &[],
    );
    let warnings = all_warnings(&r);
    assert!(
        warnings
            .iter()
            .any(|(code, m)| code == "collective_counts_differ"
                && m.contains("matched by process group and sequence number")),
        "{warnings:?}"
    );
    let collectives = r["ranks"]["collectives"].as_array().unwrap();
    assert_eq!(collectives[0]["count"], 3, "{collectives:?}");
    assert_eq!(collectives[0]["max_end_skew_ns"], 0);
}

#[test]
fn saved_reports_with_absurd_figures_are_refused() {
    let dir = TempDir::new().unwrap();
    // A trace with steps, findings and ops; the saved copy is written with sorted keys, its
    // schema tag past the first 4 KiB, as a tool that rewrites the JSON leaves it.
    let trace = "samples/hta/cuda_event_sync.json.gz";
    let saved: serde_json::Value =
        serde_json::from_str(&stdout(&steplens(&["report", "-f", "json", trace]))).unwrap();
    let path = temp_file(&dir, "fine.json", &serde_json::to_vec(&saved).unwrap());
    let fine = steplens(&["diff", path.to_str().unwrap(), trace]);
    assert!(fine.status.success(), "{}", stderr(&fine));
    // Each edit makes one figure absurd; the check names the field (and exit 2), never
    // "pass, -100 %".
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 8] = [
        (
            "a finding counted 2^64-1 times",
            |r| r["findings"][0]["count"] = u64::MAX.into(),
            "count is 18446744073709551615, past the int64",
        ),
        (
            "steps of 2^63-1 ns",
            |r| {
                for s in r["steps"].as_array_mut().unwrap() {
                    s["dur_ns"] = i64::MAX.into();
                }
            },
            "dur_ns is 9223372036854775807, outside 0 to",
        ),
        (
            "a span of 2^63-1 ns",
            |r| r["summary"]["trace_ns"] = i64::MAX.into(),
            "summary.trace_ns is 9223372036854775807",
        ),
        (
            "a busy time past the span",
            |r| {
                let span = r["summary"]["trace_ns"].as_i64().unwrap();
                r["steps"][0]["host_busy_ns"] = (span + 1).into();
            },
            "host_busy_ns is",
        ),
        (
            "a finding losing 2^63-1 ns",
            |r| r["findings"][0]["lost_ns"] = i64::MAX.into(),
            "lost_ns is 9223372036854775807",
        ),
        (
            "an op counted 2^64-1 times",
            |r| r["ops"][0]["count"] = u64::MAX.into(),
            "count is 18446744073709551615, more than the",
        ),
        (
            "more steps counted than listed",
            |r| r["summary"]["steps"] = 1_000_000.into(),
            "summary.steps is 1000000 but",
        ),
        (
            "a busy share of 250 %",
            |r| r["summary"]["device_busy_pct"] = 250.0.into(),
            "device_busy_pct is 250, outside 0 to 100",
        ),
    ];
    for (what, edit, said) in cases {
        let mut report = saved.clone();
        edit(&mut report);
        let path = temp_file(&dir, "absurd.json", &serde_json::to_vec(&report).unwrap());
        let line = fails(
            &["check", trace, "--baseline", path.to_str().unwrap()],
            "absurd.json",
        );
        assert!(line.contains(said), "{what}: {line}");
        // diff reads saved reports the same way.
        let line = fails(&["diff", path.to_str().unwrap(), trace], "absurd.json");
        assert!(line.contains(said), "{what}: {line}");
    }
}

#[test]
fn a_report_without_its_schema_key_is_called_a_report_not_a_trace() {
    let dir = TempDir::new().unwrap();
    let mut saved: serde_json::Value =
        serde_json::from_str(&stdout(&steplens(&["report", "-f", "json", CLEAN]))).unwrap();
    let tagged = temp_file(&dir, "tagged.json", &serde_json::to_vec(&saved).unwrap());
    saved.as_object_mut().unwrap().remove("schema");
    let untagged = temp_file(&dir, "untagged.json", &serde_json::to_vec(&saved).unwrap());
    for args in [
        vec!["report", untagged.to_str().unwrap()],
        vec!["check", CLEAN, "--baseline", untagged.to_str().unwrap()],
    ] {
        let line = fails(&args, "untagged.json");
        assert!(
            line.contains("a steplens report without its \"schema\" key"),
            "{line}"
        );
    }
    // A saved report given where a trace is wanted says what it is.
    let line = fails(&["report", tagged.to_str().unwrap()], "tagged.json");
    assert!(
        line.contains("a steplens.report/1 document written by steplens"),
        "{line}"
    );
}

/// A protobuf varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[test]
fn a_million_perfetto_track_descriptors_hit_max_tracks() {
    // 1,000,001 TrackDescriptor packets (uuid, name "t"), no events: about 14 MB.
    let dir = TempDir::new().unwrap();
    let mut trace = Vec::with_capacity(14 << 20);
    for uuid in 1..=1_000_001_u64 {
        let mut descriptor = vec![0x08];
        varint(&mut descriptor, uuid);
        descriptor.extend_from_slice(&[0x12, 1, b't']);
        let mut packet = vec![0xe2, 0x03]; // field 60, length-delimited
        varint(&mut packet, descriptor.len() as u64);
        packet.extend_from_slice(&descriptor);
        trace.push(0x0a);
        varint(&mut trace, packet.len() as u64);
        trace.extend_from_slice(&packet);
    }
    let path = temp_file(&dir, "descriptors.pftrace", &trace);
    let started = Instant::now();
    let line = fails(&["report", path.to_str().unwrap()], "descriptors.pftrace");
    assert!(
        line.contains(
            "the number of Perfetto track descriptors exceeds the limit of 1000000 (raise it with --max-tracks)"
        ),
        "{line}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    // Under a lower cap it stops at once.
    let line = fails(
        &["report", path.to_str().unwrap(), "--max-tracks", "1000"],
        "descriptors.pftrace",
    );
    assert!(line.contains("exceeds the limit of 1000"), "{line}");
}

#[test]
fn a_stream_is_capped_by_free_memory_and_says_so() {
    // A stream that starts like JSON and goes on, with 2 MB of "free memory" (the test's stand-in
    // for MemAvailable): it stops there, and the line says why the cap is what it is.
    let mut child = Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(["report", "-"])
        .current_dir(repo())
        .env("STEPLENS_TEST_FREE_MEMORY", "2000000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(br#"{"traceEvents":["#);
        let block = vec![b' '; 1 << 16];
        for _ in 0..1000 {
            if stdin.write_all(&block).is_err() {
                break;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("exceeds the limit of 2000000 bytes, the free memory (1.9 MiB), less than the default of 16 GiB for a stream"),
        "{err}"
    );
    assert!(err.contains("--max-inflated-bytes"), "{err}");
}

#[test]
fn an_arg_over_16_mib_is_dropped_with_a_warning_by_the_perfetto_export() {
    let dir = TempDir::new().unwrap();
    let big = "x".repeat(17 << 20);
    let trace = format!(
        r#"{{"traceEvents":[{{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2,"args":{{"blob":"{big}"}}}},{{"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":5,"dur":2,"args":{{"n":1}}}}]}}"#
    );
    let path = temp_file(&dir, "big_arg.json", trace.as_bytes());
    let out_path = dir.path().join("big_arg.pftrace");
    let out = steplens(&[
        "export",
        "--perfetto",
        out_path.to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("steplens: warning: ")
            && err.contains("big_arg.json: dropped the args of 1 events, longer than the 16 MiB"),
        "{err}"
    );
    // The report says it too, as a load warning.
    let r: serde_json::Value = serde_json::from_str(&stdout(&steplens(&[
        "report",
        "-f",
        "json",
        path.to_str().unwrap(),
    ])))
    .unwrap();
    assert_eq!(r["sources"][0]["warnings"][0]["code"], "args_too_long");
}

#[cfg(unix)]
#[test]
fn a_fifo_with_no_writer_says_it_is_waiting() {
    let dir = TempDir::new().unwrap();
    let fifo = dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let child = Command::new(env!("CARGO_BIN_EXE_steplens"))
        .args(["report", "-f", "json"])
        .arg(&fifo)
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // No writer for two seconds, then one writes a trace.
    std::thread::sleep(Duration::from_secs(2));
    let trace = std::fs::read(repo().join(CLEAN)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .unwrap()
        .write_all(&trace)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("pipe: waiting for a writer (a FIFO no process has opened for writing yet)"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(r["summary"]["steps"].as_u64().unwrap() > 0);
}
