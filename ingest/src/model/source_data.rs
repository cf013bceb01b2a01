//! The bytes of one input, owned by the Timeline for as long as its args point into them.

use memmap2::Mmap;

/// The bytes of one input, kept alive for as long as the Timeline needs its args.
#[derive(Debug)]
pub enum SourceData {
    /// A read-only mapping of the file (page cache, not private memory).
    Mapped(Mmap),
    /// Bytes read or inflated into memory.
    Owned(Vec<u8>),
    /// A gzip input inflated into an anonymous mapping while it was parsed (`feed.rs`): its
    /// first `len` bytes.
    Inflated {
        /// The mapping, as large as the input was allowed to inflate to.
        map: Mmap,
        /// Bytes inflated.
        len: usize,
    },
}

impl SourceData {
    /// The bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        match self {
            Self::Mapped(map) => map,
            Self::Owned(vec) => vec,
            Self::Inflated { map, len } => map.get(..*len).unwrap_or_default(),
        }
    }

    /// Whether the bytes are a file mapping.
    #[must_use]
    pub fn is_mapped(&self) -> bool {
        matches!(self, Self::Mapped(_))
    }
}
