//! Every file the command line writes goes through here: never over one of the run's inputs
//! ([`check_not_an_input`], [`check_dir_holds_no_input`]), and never half written
//! ([`write_atomically`]: a temporary file beside the destination, renamed over it once
//! complete).

use std::fs::{self, File, Metadata};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result, bail};
use steplens_ingest::open::expand_inputs;

/// Where the temporary files begin their names (hidden, and skipped by `export --tables`).
pub const TEMP_PREFIX: &str = ".steplens-tmp-";

/// An input the run reads, as given and as the file system knows it.
struct Input {
    /// What to call it in a message: `the input t.json`.
    name: String,
    /// The path as given or found in a directory (none for standard input).
    path: Option<PathBuf>,
    /// Its metadata (following links), when it exists.
    meta: Option<Metadata>,
    /// Its path with every link resolved, when it exists.
    real: Option<PathBuf>,
}

/// Every file the run reads: each path as given, and for a directory every trace in it (as
/// loading expands it); `-` is what standard input is redirected from, when that is a file.
fn inputs(paths: &[PathBuf]) -> Vec<Input> {
    let mut out = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            if let Some(meta) = stdin_file() {
                out.push(Input {
                    name: "the file standard input reads".to_owned(),
                    path: None,
                    meta: Some(meta),
                    real: None,
                });
            }
            continue;
        }
        let mut files = vec![path.clone()];
        if path.is_dir()
            && let Ok(found) = expand_inputs(std::slice::from_ref(path))
        {
            files.extend(found.paths);
        }
        out.extend(files.into_iter().map(|file| Input {
            name: format!("the input {}", file.display()),
            meta: fs::metadata(&file).ok(),
            real: fs::canonicalize(&file).ok(),
            path: Some(file),
        }));
    }
    out
}

/// The regular file standard input reads from (`steplens report - < t.json`), if any.
#[cfg(unix)]
fn stdin_file() -> Option<Metadata> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let meta = File::from(fd).metadata().ok()?;
    meta.is_file().then_some(meta)
}

#[cfg(not(unix))]
fn stdin_file() -> Option<Metadata> {
    None
}

/// Whether two files are one: the same device and inode (a hard link, a link, another
/// spelling), else the same resolved path.
fn same_file(a: &Metadata, b: &Metadata) -> Option<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(a.dev() == b.dev() && a.ino() == b.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        None
    }
}

/// An error when writing `out` would replace one of `inputs` (files, directories of traces,
/// `-`): through a link, a hard link or another spelling of the path. A path that does not
/// exist yet is no input.
///
/// # Errors
/// The one line that names the output and the input.
pub fn check_not_an_input(out: &Path, inputs_given: &[PathBuf]) -> Result<()> {
    let Ok(out_meta) = fs::metadata(out) else {
        return Ok(());
    };
    let out_real = fs::canonicalize(out).ok();
    let found: Vec<Input> = inputs(inputs_given)
        .into_iter()
        .filter(|input| {
            let by_inode = input
                .meta
                .as_ref()
                .and_then(|meta| same_file(&out_meta, meta));
            let by_path = out_real.is_some() && input.real.is_some() && out_real == input.real;
            by_inode == Some(true) || by_path
        })
        .collect();
    // Of several names for the file (a directory's link and its target), the one spelled
    // like the output.
    let named = found
        .iter()
        .find(|i| i.path.as_deref().and_then(Path::file_name) == out.file_name())
        .or(found.first());
    if let Some(input) = named {
        bail!(
            "{}: is {}; refusing to write over it (name another output file)",
            out.display(),
            input.name
        );
    }
    Ok(())
}

/// An error when the directory `dir` is one of `inputs`, or holds one at any depth (an
/// output directory whose entries are replaced).
///
/// # Errors
/// The one line that names the directory and the input.
pub fn check_dir_holds_no_input(dir: &Path, inputs_given: &[PathBuf]) -> Result<()> {
    let Ok(dir_real) = fs::canonicalize(dir) else {
        return Ok(());
    };
    for input in inputs(inputs_given) {
        // Where the input is, and, for a link, where the link itself is.
        let link_dir = input
            .path
            .as_deref()
            .and_then(Path::parent)
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .and_then(|p| fs::canonicalize(p).ok());
        let inside = input
            .real
            .as_ref()
            .is_some_and(|r| r.starts_with(&dir_real))
            || link_dir.is_some_and(|d| d.starts_with(&dir_real));
        if inside {
            bail!(
                "{}: holds {}; refusing to write the tables into it (name another directory)",
                dir.display(),
                input.name
            );
        }
    }
    Ok(())
}

/// Writes `path` with `write`: into a temporary file in the same directory, renamed over
/// `path` once `write` succeeded, so that a failed or interrupted run never leaves half a file
/// (and an earlier file stays as it was). A link is followed (the file it names is replaced,
/// the link kept), an existing file keeps its permissions (a read-only one is refused), and a
/// path that is not a regular file (`/dev/stdout`, a FIFO, a device) is written directly.
/// Every error names `path` (as `cannot write PATH: …`).
///
/// # Errors
/// When the file cannot be created, written or renamed, or `write` fails.
pub fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<T> {
    let context = || format!("cannot write {}", path.display());
    let existing = fs::metadata(path).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        let file = File::create(path).with_context(context)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let value = write(&mut out).with_context(context)?;
        out.flush().with_context(context)?;
        return Ok(value);
    }
    // A file made read-only stays as it is, as it did when it was opened for writing.
    if existing
        .as_ref()
        .is_some_and(|m| m.permissions().readonly())
    {
        return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
            .with_context(context);
    }
    // The file a link names, so that the link stays a link.
    let target = fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (temp, file) = TempFile::create(&dir, &name).with_context(context)?;
    if let Some(meta) = &existing {
        // Best effort: a file the user made readable to others stays so.
        let _ = fs::set_permissions(&temp.path, meta.permissions());
    }
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let value = write(&mut out).with_context(context)?;
    let file = out
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(context)?;
    file.sync_all().with_context(context)?;
    drop(file);
    temp.persist(&target).with_context(context)?;
    Ok(value)
}

/// A temporary file beside its destination, removed unless it was renamed into place.
struct TempFile {
    path: PathBuf,
    kept: bool,
}

impl TempFile {
    fn create(dir: &Path, name: &str) -> std::io::Result<(Self, File)> {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{TEMP_PREFIX}{}-{n}.{name}", std::process::id()));
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok((Self { path, kept: false }, file))
    }

    fn persist(mut self, to: &Path) -> std::io::Result<()> {
        fs::rename(&self.path, to)?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.kept {
            let _ = fs::remove_file(&self.path);
        }
    }
}
