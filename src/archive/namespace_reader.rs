//! The documents of one namespace of an archive as a plain byte stream, so that a
//! reader of `.bson` files (e.g. [`crate::oplog::OplogReader`]) can read the oplog
//! straight out of `mongodump --archive --oplog` without unpacking it.

use std::io::{self, Read};

use super::error::ArchiveError;
use super::format::Namespace;
use super::reader::{ArchiveReader, Step};

/// `Read` over the concatenated documents of one namespace, skipping every other
/// namespace (their framing is still checked, their checksums are not computed).
///
/// The stream ends (`Ok(0)`) once the namespace's EOF header has been read and its
/// CRC-64 checked (when [`super::ReadOptions::verify_crc`] is on), and the rest of the
/// archive has been read to its end and found complete, so that a truncated archive
/// (a gzip stream without its trailer included) never reads as complete. mongodump
/// writes the oplog last, so for the oplog the rest is at most a few bytes; for
/// another namespace [`NamespaceReader::stop_at_namespace_end`] skips it. Every
/// problem (truncation, corruption, a CRC mismatch) is an [`io::Error`] whose source
/// is the [`ArchiveError`], and every later `read` fails too: the stream never just
/// stops short.
pub struct NamespaceReader {
    archive: ArchiveReader,
    target: usize,
    /// Bytes of the target's documents ready in `archive.buf`.
    pending: std::ops::Range<usize>,
    /// The target's EOF header has been read.
    target_ended: bool,
    /// Read the rest of the archive after the target's end (default).
    check_rest: bool,
    done: bool,
}

impl NamespaceReader {
    /// Fails with [`ArchiveError::NoSuchNamespace`] when the prelude does not list
    /// `ns`.
    ///
    /// The stream continues from where `archive` is: documents already handed out
    /// by [`ArchiveReader::next_event`] are not repeated.
    pub fn new(
        mut archive: ArchiveReader,
        ns: &Namespace,
    ) -> Result<NamespaceReader, ArchiveError> {
        let target = archive.index_of(ns)?;
        archive.verify_only(target);
        // A run of documents next_event had framed but not handed out yet.
        let pending = match archive.take_run() {
            Some((i, range)) if i == target => range,
            _ => 0..0,
        };
        Ok(NamespaceReader {
            archive,
            target,
            pending,
            target_ended: false,
            check_rest: true,
            done: false,
        })
    }

    /// Ends the stream right after the namespace's EOF header, without reading the
    /// rest of the archive (whose completeness then goes unchecked).
    pub fn stop_at_namespace_end(mut self) -> Self {
        self.check_rest = false;
        self
    }

    pub fn namespace(&self) -> &Namespace {
        self.archive.namespace_at(self.target)
    }

    /// The archive (name, header, prelude, progress).
    pub fn archive(&self) -> &ArchiveReader {
        &self.archive
    }

    /// Whether everything has been handed out: the namespace's EOF header was reached
    /// (its CRC checked) and, unless [`Self::stop_at_namespace_end`], the archive
    /// was read to its complete end.
    pub fn is_complete(&self) -> bool {
        self.done && self.pending.is_empty()
    }

    /// Documents of the namespace read from the archive so far.
    pub fn documents(&self) -> u64 {
        self.archive.documents_of(self.target)
    }
}

impl Read for NamespaceReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < out.len() {
            if !self.pending.is_empty() {
                let take = (out.len() - n).min(self.pending.len());
                let from = self.pending.start;
                out[n..n + take].copy_from_slice(&self.archive.buf[from..from + take]);
                self.pending.start += take;
                n += take;
                continue;
            }
            if self.done {
                break;
            }
            // Refill only at the start of a call, when `out` has room for the direct
            // path below; refilling `buf` with `out` nearly full would keep the next
            // calls copying out of `buf`.
            if n > 0 && self.archive.needs_input() {
                break;
            }
            // Straight into `out` while inside this namespace's data; returned at
            // once, so that the next call again has a large `out` to fill.
            if let Some(k) = self
                .archive
                .read_direct(self.target, &mut out[n..])
                .map_err(io::Error::other)?
            {
                if k > 0 {
                    return Ok(n + k);
                }
            }
            // `pending` is empty, so the buffer may move.
            match self
                .archive
                .step(out.len() - n, Some(self.target))
                .map_err(io::Error::other)?
            {
                Step::Docs { ns, start, len, .. } if ns == self.target => {
                    self.pending = start..start + len;
                }
                Step::End { ns, .. } if ns == self.target => {
                    self.target_ended = true;
                    self.done = !self.check_rest;
                }
                Step::Docs { .. } | Step::End { .. } => {}
                Step::Finished if self.target_ended => self.done = true,
                // Cannot happen: the reader only finishes once every namespace of
                // the prelude, this one included, has ended.
                Step::Finished => {
                    return Err(io::Error::other(ArchiveError::NoSuchNamespace {
                        name: self.archive.name().to_string(),
                        namespace: self.namespace().to_string(),
                        available: Vec::new(),
                    }))
                }
            }
        }
        Ok(n)
    }
}
