//! Getting the bytes of an input: memory-mapped when it is a regular file, read otherwise
//! (pipes, stdin, `/proc`), and inflated when it is gzip.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;
use memmap2::Mmap;

use crate::error::IngestError;
use crate::options::LoadOptions;
use crate::warning::{Warning, WarningCode};

pub use crate::model::SourceData;

/// An input ready for parsing.
#[derive(Debug)]
pub struct Input {
    /// The (decompressed) bytes.
    pub data: SourceData,
    /// Size as stored.
    pub stored_bytes: u64,
    /// Whether it was gzip.
    pub compressed: bool,
    /// Problems met while reading (a truncated gzip stream).
    pub warnings: Vec<Warning>,
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Reads `path` (`-` = stdin) into memory or maps it, as stored (gzip is not inflated).
///
/// A stream's first bytes must be gzip or pass `known_format` (the readers' sniff, passed in so
/// this module needs no reader).
pub(crate) fn read_stored(
    path: &Path,
    options: &LoadOptions,
    known_format: fn(&[u8]) -> bool,
) -> Result<SourceData, IngestError> {
    let display = path.display().to_string();
    let io_err = |source: io::Error| IngestError::Io {
        path: display.clone(),
        source,
    };
    let raw = if path.as_os_str() == "-" {
        read_stream(io::stdin().lock(), &display, options, known_format)?
    } else {
        let mut file = open_input(path, &display).map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        if meta.is_dir() {
            return Err(IngestError::NotATrace {
                path: display,
                reason: "is a directory".into(),
            });
        }
        let mappable = meta.is_file()
            && meta.len() > 0
            && options.mmap
            && (options.map_fresh_files || !recently_written(&meta));
        match mappable.then(|| map_file(&file)) {
            Some(Ok(map)) => SourceData::Mapped(map),
            // Pipes, FIFOs and devices have no size to check first: read with a bound.
            None if !meta.is_file() => read_stream(file, &display, options, known_format)?,
            // Mapping can fail on some file systems; reading always works.
            Some(Err(_)) | None => {
                let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
                file.read_to_end(&mut buf).map_err(io_err)?;
                SourceData::Owned(buf)
            }
        }
    };
    Ok(raw)
}

/// What a caller does with a notice given while a load waits (a FIFO with no writer).
static NOTICE: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Sets what is done with a notice given while a load waits on something outside it (a FIFO
/// no process writes to): the binary prints it on stderr. Unset, nothing is said. The first
/// call wins.
pub fn on_notice(hook: fn(&str)) {
    let _ = NOTICE.set(hook);
}

/// Opens an input. Opening a FIFO waits for a process to open it for writing: that wait runs
/// on a helper thread, and after a second steplens says on stderr that it is waiting for a
/// writer ([`on_notice`]) instead of hanging silently.
fn open_input(path: &Path, display: &str) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
        if fifo {
            let (tx, rx) = std::sync::mpsc::channel();
            let owned = path.to_owned();
            std::thread::spawn(move || {
                // The receiver may be gone (the load ended): nothing to tell then.
                let _ = tx.send(File::open(owned));
            });
            let gone = || io::Error::other("the FIFO could not be opened");
            return match rx.recv_timeout(std::time::Duration::from_secs(1)) {
                Ok(opened) => opened,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(notice) = NOTICE.get() {
                        notice(&format!(
                            "{display}: waiting for a writer (a FIFO no process has opened for writing yet)"
                        ));
                    }
                    rx.recv().map_err(|_| gone())?
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(gone()),
            };
        }
    }
    let _ = display;
    File::open(path)
}

/// Bytes of a stream looked at before the rest is read: enough for every format's sniff.
const STREAM_HEAD: u64 = 64 << 10;

/// Reads a stream (stdin, a FIFO, a device) that has no size to check first: its first bytes
/// must be gzip or a format steplens reads, and it may be no longer than
/// `--max-inflated-bytes`, so `/dev/zero` or an endless pipe fails at once, not out of memory.
fn read_stream(
    mut stream: impl Read,
    display: &str,
    options: &LoadOptions,
    known_format: fn(&[u8]) -> bool,
) -> Result<SourceData, IngestError> {
    let io_err = |source: io::Error| IngestError::Io {
        path: display.to_owned(),
        source,
    };
    let mut buf = Vec::new();
    (&mut stream)
        .take(STREAM_HEAD)
        .read_to_end(&mut buf)
        .map_err(io_err)?;
    if !buf.is_empty() && !is_gzip(&buf) && !known_format(&buf) {
        return Err(IngestError::NotATrace {
            path: display.to_owned(),
            reason: format!(
                "its first {} bytes are no format steplens reads (expected Trace Event JSON, a Gaudi CSV, a Perfetto trace, gzip or ZIP)",
                buf.len()
            ),
        });
    }
    let (limit, why) = stream_limit(options.max_inflated_bytes, free_memory());
    stream
        .take(limit.saturating_add(1).saturating_sub(buf.len() as u64))
        .read_to_end(&mut buf)
        .map_err(io_err)?;
    if buf.len() as u64 > limit {
        return Err(IngestError::LimitExceeded {
            path: display.to_owned(),
            what: "the size of a stream input",
            limit: format!("{limit} bytes{why}"),
            flag: "--max-inflated-bytes",
        });
    }
    Ok(SourceData::Owned(buf))
}

/// The most a stream may hold by default: 16 GiB, or the free memory when that is less.
pub const DEFAULT_MAX_STREAM_BYTES: u64 = 16 << 30;

/// The cap on a stream's size and what it is, in words: `--max-inflated-bytes` where given
/// (anything but its default), else the smaller of [`DEFAULT_MAX_STREAM_BYTES`] and `free`
/// (the memory available), since a stream is held in memory whole.
pub(crate) fn stream_limit(flag: u64, free: Option<u64>) -> (u64, String) {
    if flag != crate::options::DEFAULT_MAX_INFLATED_BYTES {
        return (flag, String::new());
    }
    match free {
        Some(free) if free < DEFAULT_MAX_STREAM_BYTES => (
            free,
            format!(
                ", the free memory ({}), less than the default of 16 GiB for a stream",
                gib(free)
            ),
        ),
        _ => (
            DEFAULT_MAX_STREAM_BYTES,
            ", the default for a stream: 16 GiB, or the free memory when less".to_owned(),
        ),
    }
}

fn gib(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    } else {
        format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
    }
}

/// The memory available to this process (`MemAvailable` of `/proc/meminfo`), when known.
/// `STEPLENS_TEST_FREE_MEMORY` (bytes) stands in for it in tests.
fn free_memory() -> Option<u64> {
    if let Some(bytes) = std::env::var("STEPLENS_TEST_FREE_MEMORY")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return Some(bytes);
    }
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Whether `bytes` are gzip.
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&GZIP_MAGIC)
}

/// Inflates gzip and describes the input: the part of reading shared by files and bytes.
pub(crate) fn finish_input(
    raw: SourceData,
    display: &str,
    options: &LoadOptions,
) -> Result<Input, IngestError> {
    let stored_bytes = raw.bytes().len() as u64;
    if is_gzip(raw.bytes()) {
        let mut warnings = Vec::new();
        let inflated = inflate(raw.bytes(), display, options, &mut warnings)?;
        return Ok(Input {
            data: SourceData::Owned(inflated),
            stored_bytes,
            compressed: true,
            warnings,
        });
    }
    Ok(Input {
        data: raw,
        stored_bytes,
        compressed: false,
        warnings: Vec::new(),
    })
}

/// How recently a file must have been modified to be read rather than mapped.
const STILL_WRITTEN: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the file changed in the last few seconds: a profiler may still be writing it, and a
/// mapping of a file that shrinks under it crashes the process (SIGBUS), so it is read instead.
fn recently_written(meta: &std::fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age < STILL_WRITTEN)
}

/// Maps `file` read-only.
///
/// The mapping is only sound while no other process truncates or rewrites the file; profiler
/// output is written once and then read, which is the case this serves. Users who analyse a
/// file still being written pass `--no-mmap`.
#[allow(unsafe_code)]
fn map_file(file: &File) -> io::Result<Mmap> {
    // SAFETY: see the function documentation: the file is treated as immutable while mapped.
    let map = unsafe { Mmap::map(file)? };
    #[cfg(unix)]
    {
        // Advice is a hint; failing to give it changes nothing.
        let _ = map.advise(memmap2::Advice::Sequential);
    }
    Ok(map)
}

/// The most bytes a gzip input of `compressed_len` bytes may inflate to: the size cap,
/// tightened by the ratio cap once past its floor.
pub(crate) fn inflate_limit(compressed_len: usize, options: &LoadOptions) -> u64 {
    let by_ratio = (compressed_len as u64)
        .saturating_mul(options.limits.max_inflate_ratio)
        .max(crate::limits::INFLATE_RATIO_FLOOR);
    options.max_inflated_bytes.min(by_ratio)
}

/// ISIZE (last 4 bytes): the size mod 2^32 of the last member, a size hint only.
pub(crate) fn gzip_size_hint(compressed: &[u8]) -> usize {
    compressed
        .len()
        .checked_sub(4)
        .and_then(|at| compressed.get(at..))
        .and_then(|tail| <[u8; 4]>::try_from(tail).ok())
        .map_or(0, |b| u32::from_le_bytes(b) as usize)
}

/// The error for a gzip input that inflates past `limit`.
pub(crate) fn inflated_too_large(
    path: &str,
    compressed_len: usize,
    limit: u64,
    options: &LoadOptions,
) -> IngestError {
    let (what, limit, flag) = if limit < options.max_inflated_bytes {
        (
            "decompression ratio",
            format!(
                "{}:1 past {} MiB ({compressed_len} compressed bytes inflate to more than {limit})",
                options.limits.max_inflate_ratio,
                crate::limits::INFLATE_RATIO_FLOOR >> 20,
            ),
            "--max-inflate-ratio",
        )
    } else {
        (
            "decompressed size",
            format!("{limit} bytes"),
            "--max-inflated-bytes",
        )
    };
    IngestError::LimitExceeded {
        path: path.to_owned(),
        what,
        limit,
        flag,
    }
}

/// What to do when a gzip stream fails after `inflated` bytes: keep those with a warning, or
/// fail when there are none.
pub(crate) fn damaged_gzip(
    path: &str,
    inflated: usize,
    error: &io::Error,
) -> Result<Warning, IngestError> {
    if inflated == 0 {
        return Err(IngestError::Gzip {
            path: path.to_owned(),
            offset: 0,
            reason: error.to_string(),
        });
    }
    // A half-copied .gz still holds a readable prefix: keep it and say so.
    Ok(Warning {
        code: WarningCode::DamagedGzip,
        offset: Some(inflated as u64),
        message: format!(
            "gzip stream damaged after {inflated} decompressed bytes ({error}); reading what came before"
        ),
    })
}

fn inflate(
    compressed: &[u8],
    path: &str,
    options: &LoadOptions,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<u8>, IngestError> {
    let limit = inflate_limit(compressed.len(), options);
    let hint = gzip_size_hint(compressed)
        .max(compressed.len().saturating_mul(4))
        .min(limit as usize);
    let mut out = Vec::with_capacity(hint);
    let mut decoder = MultiGzDecoder::new(compressed).take(limit.saturating_add(1));
    if let Err(e) = decoder.read_to_end(&mut out) {
        warnings.push(damaged_gzip(path, out.len(), &e)?);
        return Ok(out);
    }
    if out.len() as u64 > limit {
        return Err(inflated_too_large(path, compressed.len(), limit, options));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_MAX_STREAM_BYTES, stream_limit};
    use crate::options::DEFAULT_MAX_INFLATED_BYTES;

    #[test]
    fn a_stream_is_capped_by_free_memory_and_16_gib_unless_the_flag_says() {
        let (limit, why) = stream_limit(DEFAULT_MAX_INFLATED_BYTES, Some(3 << 30));
        assert_eq!(limit, 3 << 30);
        assert!(why.contains("the free memory (3.0 GiB)"), "{why}");
        let (limit, why) = stream_limit(DEFAULT_MAX_INFLATED_BYTES, Some(200 << 30));
        assert_eq!(limit, DEFAULT_MAX_STREAM_BYTES);
        assert!(why.contains("16 GiB"), "{why}");
        assert_eq!(stream_limit(DEFAULT_MAX_INFLATED_BYTES, None).0, 16 << 30);
        assert_eq!(stream_limit(1000, Some(3 << 30)), (1000, String::new()));
    }
}
