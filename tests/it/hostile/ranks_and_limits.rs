//! Hostile runs and limits: clocks an hour apart, two files claiming one rank, ranks with different
//! collective counts, saved reports with absurd figures, a million Perfetto tracks, a stream capped
//! by free memory, an arg over 16 MiB, a FIFO with no writer.

use super::*;

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
    // A saved report renders as the trace it was made from did.
    assert_eq!(
        stdout(&steplens(&["report", tagged.to_str().unwrap()])),
        stdout(&steplens(&["report", CLEAN]))
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
