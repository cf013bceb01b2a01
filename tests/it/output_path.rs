//! The CLI's output files (`steplens::output_path`): written whole or not at all, through links,
//! and never over an input.

use std::fs;
use std::io::Write;

use anyhow::{Result, bail};
use steplens::output_path::{check_not_an_input, write_atomically};

#[test]
fn a_failed_write_leaves_the_earlier_file_and_no_temporary_file() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("out.json");
    fs::write(&path, "before").unwrap();
    let failed: Result<()> = write_atomically(&path, |w| {
        w.write_all(b"half")?;
        bail!("the renderer failed")
    });
    assert!(failed.is_err());
    assert_eq!(fs::read_to_string(&path).unwrap(), "before");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    write_atomically(&path, |w| Ok(w.write_all(b"after")?)).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "after");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    // A read-only file is not replaced.
    let mut readonly = fs::metadata(&path).unwrap().permissions();
    readonly.set_readonly(true);
    fs::set_permissions(&path, readonly).unwrap();
    let refused = write_atomically(&path, |w| Ok(w.write_all(b"again")?));
    assert!(refused.is_err());
    assert_eq!(fs::read_to_string(&path).unwrap(), "after");
}

#[cfg(unix)]
#[test]
fn a_link_stays_a_link() {
    let dir = tempfile::TempDir::new().unwrap();
    let file = dir.path().join("real.md");
    let link = dir.path().join("link.md");
    fs::write(&file, "old").unwrap();
    std::os::unix::fs::symlink(&file, &link).unwrap();
    write_atomically(&link, |w| Ok(w.write_all(b"new")?)).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "new");
}

#[test]
fn an_output_that_is_an_input_is_refused_and_a_new_one_is_not() {
    let dir = tempfile::TempDir::new().unwrap();
    let input = dir.path().join("t.json");
    fs::write(&input, "{}").unwrap();
    let other = dir.path().join("sub/../t.json");
    fs::create_dir(dir.path().join("sub")).unwrap();
    let err = check_not_an_input(&other, std::slice::from_ref(&input)).unwrap_err();
    assert!(err.to_string().contains("is the input"), "{err}");
    check_not_an_input(&dir.path().join("new.json"), &[input]).unwrap();
}
