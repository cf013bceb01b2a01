//! Resource limits on what an input may make the loader build, so a hostile or broken file
//! fails with a message naming the limit and its flag instead of exhausting memory or time.
//!
//! The gzip/ZIP size cap lives in `LoadOptions::max_inflated_bytes`; the rest are here.

/// Limits applied while loading. Every limit has a command-line flag that raises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Tracks (threads, streams, engine lanes, counters) over all inputs (`--max-tracks`).
    pub max_tracks: usize,
    /// Longest name, category or other interned string, bytes (`--max-name-bytes`).
    pub max_name_bytes: usize,
    /// Deepest nesting of JSON arrays and objects (event args), levels (`--max-json-depth`).
    pub max_json_depth: usize,
    /// Largest decompressed / compressed size ratio of a gzip input once it is past
    /// [`INFLATE_RATIO_FLOOR`] bytes (`--max-inflate-ratio`).
    pub max_inflate_ratio: u64,
}

/// Default [`Limits::max_tracks`]: far above the few thousand lanes of a large multi-rank run.
pub const DEFAULT_MAX_TRACKS: usize = 1_000_000;
/// Default [`Limits::max_name_bytes`]: 1 MiB (kernel names with templates run to a few KiB).
pub const DEFAULT_MAX_NAME_BYTES: usize = 1 << 20;
/// Default [`Limits::max_json_depth`].
pub const DEFAULT_MAX_JSON_DEPTH: usize = 1024;
/// Default [`Limits::max_inflate_ratio`]. Profiler JSON compresses 10–30×; DEFLATE cannot
/// exceed about 1032×, so only crafted input gets near it.
pub const DEFAULT_MAX_INFLATE_RATIO: u64 = 250;
/// Decompressed bytes a gzip input may always produce, whatever its ratio.
pub const INFLATE_RATIO_FLOOR: u64 = 256 << 20;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tracks: DEFAULT_MAX_TRACKS,
            max_name_bytes: DEFAULT_MAX_NAME_BYTES,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_inflate_ratio: DEFAULT_MAX_INFLATE_RATIO,
        }
    }
}

/// A limit the builder ran into; the loader turns it into `IngestError::LimitExceeded`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LimitHit {
    /// What grew too large.
    pub(crate) what: &'static str,
    /// The limit, in words.
    pub(crate) limit: String,
    /// The flag that raises it.
    pub(crate) flag: &'static str,
}
