//! The event array: read and dispatched element by element, on one thread or (a large array)
//! with its second part parsed on another ([`packed`](super::packed)), or behind a filling
//! feed; events counted and progress reported.

use std::borrow::Cow;
use std::sync::mpsc::Receiver;

use super::KinetoReader;
use super::event::{IGNORED_KEYS, parse_event};
use super::packed::{self, Parsed, parse_rest};
use crate::json;

/// How often (in events) progress is reported.
const PROGRESS_EVERY: u64 = 1 << 16;

/// How [`KinetoReader::events_until`] stopped.
enum Until {
    /// The array ended (its `]` was read).
    End,
    /// The next element starts at this offset, at or past the stop.
    Reached(usize),
}

impl<'a, 'b, 'p> KinetoReader<'a, 'b, 'p> {
    pub(super) fn events_array(&mut self) -> json::Result<()> {
        let empty = self.resumable(|r| {
            r.cur.expect(b'[', "'['")?;
            Ok(r.next_byte()? == Some(b']'))
        })?;
        if empty {
            self.cur.pos += 1;
            return Ok(());
        }
        if self.feed.is_some() {
            // Parse behind the inflater until it is done; then what is left may be split.
            if let Until::End = self.events_until(None)? {
                return Ok(());
            }
        }
        match self.split_point() {
            Some(split) => self.events_split(split),
            None => self.events_until(None).map(|_| ()),
        }
    }

    /// Reads and dispatches events from the cursor until the array ends, or until the next
    /// element starts at or past `stop`; with a feed, also when the feed is done.
    fn events_until(&mut self, stop: Option<usize>) -> json::Result<Until> {
        loop {
            self.cur.skip_ws();
            if stop.is_some_and(|stop| self.cur.pos >= stop) || self.feed_done() {
                return Ok(Until::Reached(self.cur.pos));
            }
            let parsed = self.resumable(|r| {
                if r.next_byte()? == Some(b'{') {
                    // Counted apart, so that a step run again does not count twice.
                    let mut ignored = [0; IGNORED_KEYS.len()];
                    Ok(Some((parse_event(&mut r.cur, &mut ignored)?, ignored)))
                } else {
                    // Not an event object (a stray number or null): skip it, it is no event.
                    r.cur.skip_value()?;
                    Ok(None)
                }
            })?;
            match parsed {
                Some((ev, ignored)) => {
                    for (total, n) in self.ignored_keys.iter_mut().zip(ignored) {
                        *total += n;
                    }
                    self.dispatch(&ev);
                    self.counted_event();
                }
                None => self.non_object(),
            }
            self.behind.reached(self.cur.pos);
            if !self.resumable(|r| r.cur.next_member(b']', "',' or ']' between events"))? {
                return Ok(Until::End);
            }
        }
    }

    /// Where a second thread may start parsing the rest of a large event array: the first
    /// `{` past [`SPLIT_FRACTION`](super::SPLIT_FRACTION) of the array that follows `}` and `,` (whitespace aside).
    /// Only a guess: a string may hold `}, {`, so [`Self::events_split`] checks it.
    fn split_point(&self) -> Option<usize> {
        let start = self.cur.pos;
        let remaining = self.cur.buf.len().saturating_sub(start);
        if remaining < self.split_min_bytes || !crate::spare_core() {
            return None;
        }
        let target = start + (remaining as f64 * self.split_fraction) as usize;
        let buf = self.cur.buf;
        let before = |mut at: usize| {
            while at > start {
                at -= 1;
                if !buf[at].is_ascii_whitespace() {
                    return Some((at, buf[at]));
                }
            }
            None
        };
        let mut from = target.max(start);
        while let Some(found) = buf.get(from..).and_then(|rest| memchr::memchr(b'{', rest)) {
            let at = from + found;
            if let Some((comma, b',')) = before(at)
                && let Some((_, b'}')) = before(comma)
            {
                return Some(at);
            }
            from = at + 1;
        }
        None
    }

    /// The event array on two threads: this one reads and dispatches events up to `split`
    /// while another parses the rest into [`PackedEvent`]s; when this thread arrives exactly
    /// at `split` (the guess was an element boundary), it dispatches the other's events in
    /// order, else it drops them and reads on alone. Either way the Timeline, the counts and
    /// the damage reported are the ones the single-threaded loop gives.
    fn events_split(&mut self, split: usize) -> json::Result<()> {
        let buf = self.cur.buf;
        let max_depth = self.cur.max_depth();
        let cancel = &std::sync::atomic::AtomicBool::new(false);
        let behind = self.behind.starting_at(split);
        let (sender, parsed) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let spawned = std::thread::Builder::new()
                .name("steplens-parse".into())
                .spawn_scoped(scope, move || {
                    parse_rest(buf, split, max_depth, cancel, behind, &sender);
                });
            let Ok(worker) = spawned else {
                // No second thread to be had: one thread reads it all.
                return self.events_until(None).map(|_| ());
            };
            let mine = self.events_until(Some(split));
            let aligned = matches!(mine, Ok(Until::Reached(at)) if at == split);
            let outcome = match mine {
                Ok(Until::Reached(_)) if aligned => self.replay(&parsed),
                Ok(Until::Reached(_)) => {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                    drop(parsed);
                    self.events_until(None).map(|_| ())
                }
                Ok(Until::End) => Ok(()),
                Err(e) => Err(e),
            };
            // Whatever is still parsing or queued is not wanted now.
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
            outcome
        })
    }

    /// Dispatches the batches [`parse_rest`] sends, in order, as they arrive, and takes over
    /// its end state.
    fn replay<'t>(&mut self, parsed: &Receiver<Parsed<'t>>) -> json::Result<()> {
        let mut texts: Vec<Cow<'t, str>> = Vec::new();
        // The sender goes only after `End`, unless the parse thread panicked (re-raised when
        // it is joined).
        while let Ok(message) = parsed.recv() {
            match message {
                Parsed::Batch {
                    events,
                    new_texts,
                    parsed_to,
                } => {
                    texts.extend(new_texts);
                    for event in &events {
                        if event.flags & packed::NON_OBJECT != 0 {
                            self.non_object();
                        } else {
                            let ev = event.unpack(&texts);
                            self.dispatch(&ev);
                            self.counted_event_at(parsed_to);
                        }
                    }
                }
                Parsed::End {
                    end,
                    result,
                    ignored_keys,
                } => {
                    for (total, n) in self.ignored_keys.iter_mut().zip(ignored_keys) {
                        *total += n;
                    }
                    self.cur.pos = end;
                    return result;
                }
            }
        }
        Ok(())
    }

    fn counted_event(&mut self) {
        let pos = self.cur.pos;
        self.counted_event_at(pos);
    }

    /// Counts one dispatched event and reports progress every [`PROGRESS_EVERY`], as of byte
    /// `pos`.
    fn counted_event_at(&mut self, pos: usize) {
        self.events += 1;
        if self.events.is_multiple_of(PROGRESS_EVERY) {
            let total = self.total_len() as u64;
            if let Some(progress) = self.progress.as_mut() {
                progress(pos as u64, total);
            }
        }
    }

    fn non_object(&mut self) {
        self.non_objects += 1;
        self.builder.count_malformed();
    }
}
