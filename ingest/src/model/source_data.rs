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

    /// Takes a mapped file's pages out of the process's resident set once the load has read
    /// them. They stay in the page cache: the args read later map them again (a minor fault per
    /// few pages). Without it, a trace read end to end counts whole in the resident set through
    /// the analysis, on top of the model.
    pub(crate) fn release_resident(&self) {
        self.release_behind().release(self.bytes().len());
    }

    /// A [`ReleaseBehind`] for a reader of [`Self::bytes`] (its offsets are theirs): it drops
    /// pages only when they are a file mapping.
    pub(crate) fn release_behind(&self) -> ReleaseBehind<'_> {
        ReleaseBehind {
            mapped: match self {
                Self::Mapped(map) => Some(map),
                Self::Owned(_) | Self::Inflated { .. } => None,
            },
            from: 0,
            next: RELEASE_STRETCH,
        }
    }

    /// Whether the bytes are a file mapping.
    #[must_use]
    pub fn is_mapped(&self) -> bool {
        matches!(self, Self::Mapped(_))
    }
}

/// Bytes a reader moves on between two [`ReleaseBehind`] releases.
const RELEASE_STRETCH: usize = 64 << 20;

/// Takes the pages of a mapped input out of the resident set behind a reader's cursor, a
/// stretch at a time (and [`SourceData::release_resident`], the whole input at the end of the
/// load): a file read end to end would otherwise be resident whole by the time the builder
/// finishes, on top of the model. Heap and anonymous bytes are never dropped (that would zero
/// them). Offsets are into [`SourceData::bytes`].
#[derive(Clone, Copy)]
pub(crate) struct ReleaseBehind<'a> {
    /// The mapping, when the bytes are one.
    mapped: Option<&'a Mmap>,
    from: usize,
    next: usize,
}

impl ReleaseBehind<'_> {
    /// One that never releases.
    pub(crate) fn none() -> Self {
        Self {
            mapped: None,
            from: 0,
            next: usize::MAX,
        }
    }

    /// The same, for a reader that starts at `from`.
    pub(crate) fn starting_at(self, from: usize) -> Self {
        Self {
            from,
            next: from.saturating_add(RELEASE_STRETCH),
            ..self
        }
    }

    /// The reader is at `pos`: what is a stretch or more behind it goes.
    #[inline]
    pub(crate) fn reached(&mut self, pos: usize) {
        if pos >= self.next {
            self.release(pos);
        }
    }

    fn release(&mut self, to: usize) {
        #[cfg(unix)]
        if let Some(map) = self.mapped {
            // Clamped to the map: madvise would reach past it into whatever is mapped next.
            let end = to.min(map.len());
            // SAFETY: a shared, read-only mapping of a file treated as immutable while mapped
            // (`source::map_file`): a dropped page reads the file's same bytes back on the next
            // access, so every borrow of the mapping sees what it saw. The range lies in the
            // map. Advice is a hint; its failure changes nothing.
            #[allow(unsafe_code)]
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.from.min(end),
                    end.saturating_sub(self.from),
                )
            };
        }
        self.from = to;
        self.next = to.saturating_add(RELEASE_STRETCH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_back_the_same_bytes_and_heap_bytes_are_never_released() {
        let bytes: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, &bytes).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: a private temporary file nothing else writes.
        let data = SourceData::Mapped(unsafe { Mmap::map(&file).unwrap() });
        let mut behind = data.release_behind();
        assert!(behind.mapped.is_some());
        behind.release(10);
        behind.starting_at(5).release(3 * 4096);
        // Past the end: clamped to the map.
        behind.starting_at(4096).release(usize::MAX);
        data.release_resident();
        assert_eq!(data.bytes(), &bytes[..]);

        let owned = SourceData::Owned(bytes.clone());
        assert!(owned.release_behind().mapped.is_none());
        owned.release_resident();
        assert_eq!(owned.bytes(), &bytes[..]);
    }
}
