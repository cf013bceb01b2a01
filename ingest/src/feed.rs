//! Bytes that arrive while they are read: one thread fills a [`Feed`] (a gzip input being
//! inflated) while another parses what is there so far, so a `.json.gz` costs about the
//! longer of the two rather than their sum.
//!
//! The buffer is an anonymous mapping of the largest size the input may inflate to (pages are
//! only backed once written), so it never moves: slices the reader took of the filled part
//! stay valid while the writer appends, and the finished buffer becomes the input's bytes
//! without a copy. The writer only ever writes past the filled length it has published; the
//! reader only ever reads below the filled length it has loaded.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use memmap2::{Mmap, MmapMut, MmapOptions};

/// Bytes the writer adds between two publications: small enough that the reader starts soon
/// after the writer, large enough that publishing costs nothing.
const CHUNK: usize = 256 << 10;

/// A buffer filled by one thread and read by others.
pub(crate) struct Feed {
    /// Owns the memory `base` points into; not touched again until [`Feed::finish`].
    map: MmapMut,
    base: *mut u8,
    capacity: usize,
    /// Bytes written and published.
    filled: AtomicUsize,
    done: AtomicBool,
    /// Set by the first [`Feed::fill`]: what makes a second writer impossible, so `fill` is
    /// sound to call from safe code.
    writer_taken: AtomicBool,
    /// What readers wait on for more bytes; `filled` and `done` change under it.
    lock: Mutex<()>,
    more: Condvar,
    /// The size the input is expected to have (progress only).
    expected: usize,
}

// SAFETY: `base` points into `map`, which the Feed owns and which never moves. There is one
// writer at most (`fill` claims `writer_taken` atomically; a second call writes nothing), and
// it writes only past the published `filled`; readers (`available`, `wait_beyond`) read only below it,
// and the Release store / Acquire load on `filled` orders the writes before the reads.
#[allow(unsafe_code)]
unsafe impl Sync for Feed {}

/// How [`Feed::fill`] ended.
#[derive(Debug)]
pub(crate) enum FillEnd {
    /// The source ran dry.
    Complete,
    /// The buffer is full and the source had more: the input is larger than allowed.
    Overflow,
    /// The source failed after the bytes filled so far.
    Failed(io::Error),
}

impl Feed {
    /// A feed of at most `capacity` bytes, `expected` of which are likely.
    ///
    /// # Errors
    /// When the address space for `capacity` bytes cannot be had.
    pub(crate) fn new(capacity: usize, expected: usize) -> io::Result<Self> {
        let mut map = MmapOptions::new()
            .len(capacity.max(1))
            .no_reserve_swap()
            .map_anon()?;
        let base = map.as_mut_ptr();
        Ok(Self {
            map,
            base,
            capacity,
            filled: AtomicUsize::new(0),
            done: AtomicBool::new(false),
            writer_taken: AtomicBool::new(false),
            lock: Mutex::new(()),
            more: Condvar::new(),
            expected,
        })
    }

    /// The bytes published so far.
    #[allow(unsafe_code)]
    pub(crate) fn available(&self) -> &[u8] {
        let filled = self.filled.load(Ordering::Acquire);
        // SAFETY: see `impl Sync for Feed`: below `filled`, the bytes are written and never
        // written again; the mapping lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.base, filled) }
    }

    /// Whether the writer has finished.
    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The size the input is expected to have, for progress.
    pub(crate) fn expected(&self) -> usize {
        self.expected.max(self.filled.load(Ordering::Relaxed))
    }

    /// Waits until more than `have` bytes are published or the writer is done, and returns
    /// the bytes published then (no longer than `have` only when the writer is done).
    pub(crate) fn wait_beyond(&self, have: usize) -> &[u8] {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while self.filled.load(Ordering::Acquire) <= have && !self.is_done() {
            guard = self
                .more
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(guard);
        self.available()
    }

    /// Fills the buffer from `read` (which writes into the slice it gets and returns how many
    /// bytes it wrote, 0 at the end), publishing as it goes, and marks the feed done. Only the
    /// first call fills; any later one, from any thread, fails at once and writes nothing.
    #[allow(unsafe_code)]
    pub(crate) fn fill(&self, mut read: impl FnMut(&mut [u8]) -> io::Result<usize>) -> FillEnd {
        if self.writer_taken.swap(true, Ordering::AcqRel) {
            return FillEnd::Failed(io::Error::other(
                "a feed has one writer: it was filled already",
            ));
        }
        let mut filled = 0;
        let end = loop {
            let room = (self.capacity - filled).min(CHUNK);
            if room == 0 {
                // Full: one more byte would be past what the input may hold.
                let mut probe = [0u8; 1];
                break match read(&mut probe) {
                    Ok(0) => FillEnd::Complete,
                    Ok(_) => FillEnd::Overflow,
                    Err(e) => FillEnd::Failed(e),
                };
            }
            // SAFETY: `[filled, filled + room)` lies in the mapping, past everything
            // published, and this call holds the one writer claim: no reader can see it yet
            // and no other writer exists.
            let tail = unsafe { std::slice::from_raw_parts_mut(self.base.add(filled), room) };
            match read(tail) {
                Ok(0) => break FillEnd::Complete,
                Ok(n) => {
                    filled += n.min(room);
                    self.publish(filled, false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break FillEnd::Failed(e),
            }
        };
        self.publish(filled, true);
        end
    }

    fn publish(&self, filled: usize, done: bool) {
        {
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.filled.store(filled, Ordering::Release);
            if done {
                self.done.store(true, Ordering::Release);
            }
        }
        self.more.notify_all();
    }

    /// The filled bytes, read-only, and how many there are. Call it after the writer is done.
    ///
    /// # Errors
    /// When the mapping cannot be made read-only.
    pub(crate) fn finish(self) -> io::Result<(Mmap, usize)> {
        let filled = self.filled.load(Ordering::Acquire);
        Ok((self.map.make_read_only()?, filled))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A reader following a writer that trickles bytes sees every byte in order, and the
    /// finished buffer holds them all.
    #[test]
    fn a_reader_follows_a_trickling_writer() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let feed = Feed::new(data.len() + 10, data.len()).unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut at = 0;
                let end = feed.fill(|out| {
                    let n = out.len().min(97).min(data.len() - at);
                    out[..n].copy_from_slice(&data[at..at + n]);
                    at += n;
                    Ok(n)
                });
                assert!(matches!(end, FillEnd::Complete));
            });
            let mut have = 0;
            loop {
                let now = feed.wait_beyond(have);
                assert_eq!(now, &data[..now.len()]);
                if now.len() == have {
                    break;
                }
                have = now.len();
            }
            assert!(feed.is_done());
        });
        let (map, len) = feed.finish().unwrap();
        assert_eq!(&map[..len], &data[..]);
    }

    #[test]
    fn more_than_the_capacity_is_an_overflow() {
        let feed = Feed::new(10, 10).unwrap();
        let end = feed.fill(|out| {
            out.fill(b'x');
            Ok(out.len())
        });
        assert!(matches!(end, FillEnd::Overflow));
        assert_eq!(feed.available().len(), 10);
        assert!(feed.is_done());
    }

    #[test]
    fn a_second_fill_writes_nothing() {
        let feed = Feed::new(16, 16).unwrap();
        let mut sent = false;
        let first = feed.fill(|out| {
            if sent {
                return Ok(0);
            }
            sent = true;
            out[..4].copy_from_slice(b"abcd");
            Ok(4)
        });
        assert!(matches!(first, FillEnd::Complete));
        let mut called = false;
        let second = feed.fill(|out| {
            called = true;
            out.fill(b'z');
            Ok(out.len())
        });
        assert!(matches!(second, FillEnd::Failed(_)));
        assert!(!called, "a second writer must never get the buffer");
        assert!(feed.available().starts_with(b"abcd"));
    }
}
