//! Hostile inputs and outputs: bombs inside archives, endless streams, one bad field, overlapping
//! slices, a mapping that breaks, a full disk, stale table partitions, impossible budgets and
//! baselines, a gzip with junk after it.

use super::*;

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
