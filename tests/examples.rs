//! The examples of the docs hold to the binary: every ```console block of `README.md` and
//! `docs/*.md` is run by trycmd. A `$ steplens …` line is a command (`> ` lines continue it), `? N`
//! under it its exit status, and the lines that follow its stdout and stderr together; `...` on a
//! line of its own stands for any lines, `[..]` for any part of a line. Blocks fenced as `sh`,
//! `text`, `toml` … are not run. After a deliberate change of output,
//! `TRYCMD=overwrite cargo test --test examples` rewrites the blocks (keeping `...` and `[..]`
//! where it can); review the diff.
//!
//! The commands run in a scratch directory holding `samples` (a link to the repository's) and the
//! small inputs of `tests/cmd/` (a damaged trace, a file that is no trace, budget files with
//! typos), so they read as they would in a checkout, and the files they write (`export`,
//! `summarize -o`, `baseline update`) land outside the tree.

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
