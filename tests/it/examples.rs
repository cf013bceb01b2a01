//! The examples of the docs hold to the binary: every ```console block of `README.md` and
//! `docs/*.md` is run by trycmd. A `$ steplens …` line is a command (`> ` lines continue it), `? N`
//! under it its exit status, and the lines that follow its stdout and stderr together; `...` on a
//! line of its own stands for any lines, `[..]` for any part of a line. Blocks fenced as `sh`,
//! `text`, `toml` … are not run. After a deliberate change of output,
//! `TRYCMD=overwrite cargo test --test it examples` rewrites the blocks (keeping `...` and `[..]`
//! where it can); review the diff.
//!
//! The commands run in a scratch directory holding `samples` (a link to the repository's) and the
//! small inputs of `tests/cmd/` (a damaged trace, a file that is no trace, budget files with
//! typos), so they read as they would in a checkout, and the files they write (`export`,
//! `summarize -o`, `baseline update`) land outside the tree.
//!
//! trycmd passes over a page without a ```console block in silence; `NO_CONSOLE` names each such
//! page and why, and `every_page_is_run_or_says_why` fails on a page that is in neither. The
//! Python examples (```python blocks, and ```text blocks of `$ python -c …`) are run by
//! `python/tests/test_docs_examples.py`.
//!
//! Command lines shown as ```sh, which these tests do not run, and why:
//! - `README.md`: the build, install and test commands (`cargo run --release …`, `cargo install
//!   --locked --path .`, `cargo test --workspace`) take minutes and are the build itself; `.ci/run`
//!   runs the release report command and the workspace tests.
//! - `docs/ci.md`: `steplens report trace.json …` names the reader's own trace.
//! - `docs/export.md`: the `duckdb -c` query needs the DuckDB CLI; `.ci/run` runs the same query
//!   through DuckDB's Python package (`tests/duckdb/rank_table.py`).
//! - `docs/perfetto.md`: the decoder needs Perfetto's Python package; `.ci/run` runs it.
//! - `docs/ranks.md`: the job-script and Slurm lines name a cluster's paths (`/shared/job42/…`);
//!   the same `summarize` and `report --summaries` run on the samples in the page's console block.
//! - `docs/report.md`: `… -f json | jq …` is a pipe, which trycmd does not run; `tests/it/golden.rs`
//!   snapshots the JSON it reads, for every sample.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(unix)]
#[test]
fn examples_in_the_docs_match_the_binary() {
    use std::path::{Path, PathBuf};

    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo.join("samples"), scratch.path().join("samples")).unwrap();
    copy_dir(&repo.join("tests/cmd"), scratch.path());
    // trycmd runs a Markdown case in the test's working directory.
    std::env::set_current_dir(scratch.path()).unwrap();
    trycmd::TestCases::new()
        .register_bin("steplens", PathBuf::from(env!("CARGO_BIN_EXE_steplens")))
        .env("NO_COLOR", "1")
        .case(repo.join("README.md"))
        .case(repo.join("docs/*.md"))
        .run();
}

/// The pages trycmd has nothing to run on, and why.
const NO_CONSOLE: &[(&str, &str)] = &[
    (
        "docs/findings.md",
        "the finding kinds and their thresholds: no command examples",
    ),
    ("docs/formats.md", "the input formats: no command examples"),
    (
        "docs/hta.md",
        "its example is Python (python/tests/test_docs_examples.py)",
    ),
    (
        "docs/kineto-compat.md",
        "no command examples; tests/it/kineto_compat.rs reports every sample it lists",
    ),
    (
        "docs/perfetto.md",
        "its command decodes with Perfetto's Python package, which .ci/run installs and runs",
    ),
    (
        "docs/python.md",
        "Python only (python/tests/test_docs_examples.py)",
    ),
    (
        "docs/report-schema.md",
        "the JSON schema, no command examples; tests/it/golden.rs checks the JSON",
    ),
    (
        "docs/viewer.md",
        "`steplens view` opens a window: it needs a display and a GL or Vulkan driver; \
         viewer/tests/ui/ drives it headless and checks the page's screenshots",
    ),
];

/// Every page of `README.md` and `docs/*.md` either has a ```console block (which trycmd runs)
/// or is in `NO_CONSOLE` with the reason; a listed page that gains a console block must leave
/// the list.
#[test]
fn every_page_is_run_or_says_why() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![repo.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut wrong = Vec::new();
    for page in &pages {
        let name = page
            .strip_prefix(repo)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(page).unwrap();
        let has_console = text.lines().any(|l| l.trim_end() == "```console");
        let listed = NO_CONSOLE.iter().any(|(p, _)| *p == name);
        if has_console == listed {
            wrong.push(if listed {
                format!("{name}: has a ```console block now; take it out of NO_CONSOLE")
            } else {
                format!("{name}: no ```console block; add one, or a NO_CONSOLE line saying why")
            });
        }
    }
    for (page, _) in NO_CONSOLE {
        if !repo.join(page).exists() {
            wrong.push(format!("{page}: in NO_CONSOLE but gone"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Copies the files and folders of `from` into `to`.
#[cfg(unix)]
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}
