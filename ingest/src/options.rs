//! How inputs are read: [`LoadOptions`] and the rank a file name gives.

use crate::limits::Limits;

/// How inputs are read.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Map regular files instead of reading them (default). Turn off for files that may change
    /// while they are read.
    pub mmap: bool,
    /// Largest decompressed size accepted from a gzip input, bytes.
    pub max_inflated_bytes: u64,
    /// Caps on tracks, names, JSON nesting and the inflate ratio.
    pub limits: Limits,
    /// Map files even when they changed in the last few seconds. Off by default: a file that
    /// is still being written may shrink under the mapping and crash the process, so such
    /// files are read instead. Benchmarks that just wrote their input turn it on.
    pub map_fresh_files: bool,
    /// The rank of an input from its path: the first capture group of this pattern (the whole
    /// match without one); where it matches it wins over `distributedInfo` (two traces that
    /// both claim one rank are told apart this way). Without a pattern,
    /// the analysis reads `rank3`, `rank-3`, `_r3` from the file name.
    pub rank_regex: Option<regex::Regex>,
    /// The annotations that mark steps (`--step-marker`): names matching this pattern, on every
    /// input, instead of `ProfilerStep#N` (and the inference markers used without it).
    pub step_marker: Option<regex::Regex>,
}

/// Default cap on decompressed gzip input: 64 GiB.
pub const DEFAULT_MAX_INFLATED_BYTES: u64 = 64 << 30;

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            mmap: true,
            max_inflated_bytes: DEFAULT_MAX_INFLATED_BYTES,
            limits: Limits::default(),
            map_fresh_files: false,
            rank_regex: None,
            step_marker: None,
        }
    }
}

/// The rank `pattern` finds in `path`: its first capture group, else the whole match, as an
/// integer.
#[must_use]
pub fn rank_by_regex(pattern: &regex::Regex, path: &str) -> Option<i64> {
    let caps = pattern.captures(path)?;
    let text = caps.get(1).or_else(|| caps.get(0))?.as_str();
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    digits.parse().ok()
}
