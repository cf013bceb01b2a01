//! The columns: slices (struct of arrays), instants, counter samples, flows, and the lazy
//! reference from a slice to its args in the source bytes.

use std::ops::Range;

use super::{CatId, SliceId, StrId, TrackId};

/// Reference to a slice's args in its source: byte offset and length packed in a `u64`
/// (40 bits of offset, 24 of length). Zero means "no args".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArgsRef(u64);

impl ArgsRef {
    /// No args.
    pub const NONE: Self = Self(0);
    const LEN_BITS: u32 = 24;
    const MAX_LEN: usize = (1 << Self::LEN_BITS) - 1;
    const MAX_OFFSET: usize = (1 << (64 - Self::LEN_BITS)) - 1;

    /// A reference to `range` of the source bytes, or `None` when it cannot be packed
    /// (args longer than 16 MiB or beyond the first TiB of the source).
    #[must_use]
    pub fn new(range: Range<usize>) -> Option<Self> {
        let len = range.end.checked_sub(range.start)?;
        if len == 0 || len > Self::MAX_LEN || range.start > Self::MAX_OFFSET {
            return None;
        }
        Some(Self(((range.start as u64) << Self::LEN_BITS) | len as u64))
    }

    /// The byte range, or `None` for [`ArgsRef::NONE`].
    #[must_use]
    pub fn range(self) -> Option<Range<usize>> {
        if self.0 == 0 {
            return None;
        }
        let start = (self.0 >> Self::LEN_BITS) as usize;
        let len = (self.0 & Self::MAX_LEN as u64) as usize;
        Some(start..start + len)
    }
}

/// All slices, struct-of-arrays, sorted by `(track, start, longer first)`.
#[derive(Debug, Default, Clone)]
pub struct Slices {
    /// Start, ns.
    pub start: Vec<i64>,
    /// Duration, ns (never negative).
    pub dur: Vec<i64>,
    /// Owning track.
    pub track: Vec<TrackId>,
    /// Interned name.
    pub name: Vec<StrId>,
    /// Interned category.
    pub cat: Vec<CatId>,
    /// Nesting depth on its track (0 = top level).
    pub depth: Vec<u16>,
    /// Enclosing slice, or [`NO_PARENT`].
    pub parent: Vec<SliceId>,
    /// Where the args are in the source.
    pub args: Vec<ArgsRef>,
}

impl Slices {
    /// Bytes one slice occupies in the columns (args excluded: they stay in the source).
    pub const BYTES_PER_SLICE: usize = size_of::<i64>() * 2
        + size_of::<TrackId>()
        + size_of::<StrId>()
        + size_of::<CatId>()
        + size_of::<u16>()
        + size_of::<SliceId>()
        + size_of::<ArgsRef>();

    /// Number of slices.
    #[must_use]
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// End (start + dur) of slice `i`.
    #[must_use]
    pub fn end(&self, i: SliceId) -> i64 {
        let i = i as usize;
        // The builder clamps every duration so that this cannot overflow; saturate anyway.
        self.start[i].saturating_add(self.dur[i])
    }

    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            start: Vec::with_capacity(n),
            dur: Vec::with_capacity(n),
            track: Vec::with_capacity(n),
            name: Vec::with_capacity(n),
            cat: Vec::with_capacity(n),
            depth: Vec::with_capacity(n),
            parent: Vec::with_capacity(n),
            args: Vec::with_capacity(n),
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.start.capacity() * 8
            + self.dur.capacity() * 8
            + self.track.capacity() * 4
            + self.name.capacity() * 4
            + self.cat.capacity() * 2
            + self.depth.capacity() * 2
            + self.parent.capacity() * 4
            + self.args.capacity() * 8
    }
}

/// Instant events (`i`/`I`), struct-of-arrays sorted by `(track, ts)`.
#[derive(Debug, Default, Clone)]
pub struct Instants {
    /// Time, ns.
    pub ts: Vec<i64>,
    /// Track.
    pub track: Vec<TrackId>,
    /// Name.
    pub name: Vec<StrId>,
    /// Category.
    pub cat: Vec<CatId>,
    /// Scope as written (`t`, `p`, `g`), `t` when absent.
    pub scope: Vec<u8>,
    /// Args.
    pub args: Vec<ArgsRef>,
}

impl Instants {
    /// Number of instants.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// Counter samples (`C`), sorted by `(track, ts)`; each counter series is its own track.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// Counter track.
    pub track: Vec<TrackId>,
    /// Time, ns.
    pub ts: Vec<i64>,
    /// Value.
    pub value: Vec<f64>,
}

impl Counters {
    /// Number of samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// Whether there is none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }
}

/// A flow arrow between two slices (host launch → device work, forward → backward).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Flow id as written (the correlation id for `ac2g`).
    pub id: u64,
    /// Flow category (`ac2g`, `fwdbwd`, …).
    pub cat: CatId,
    /// Slice the flow leaves.
    pub from: SliceId,
    /// Slice the flow arrives at.
    pub to: SliceId,
}
