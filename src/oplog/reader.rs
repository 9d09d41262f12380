//! Streaming reader for BSON oplog dumps.
//!
//! A dump is a plain concatenation of BSON documents. The reader keeps one buffer,
//! refills it from the source in large reads, and hands out zero-copy views
//! ([`Entry`]) that borrow from it: memory stays constant whatever the file size
//! (the buffer only grows to hold the largest single entry, at most
//! [`MAX_ENTRY_BYTES`]).
//!
//! Every malformed input is an error naming the source, the byte offset and the
//! entry number; nothing panics and nothing is silently skipped. A truncated last
//! entry can be tolerated with [`ReadOptions::allow_truncated`], and the reader then
//! records what it dropped ([`OplogReader::truncation`]) so the caller can say so.
//! A gzip source whose compressed data was cut ([`GzipTruncated`]) is the same case:
//! the complete entries it decompressed to are handed out, then the cut is a
//! truncation (an error, or recorded with `allow_truncated`), wherever in the
//! decompressed stream it fell.

use std::io::{self, Read};

use bson::RawDocument;

use super::entry::{Entry, EntryError};
use super::error::{GzipCut, ReadError, Truncation};
use super::oplog_archive::manifest::OplogArchiveError;
use crate::stream::gzip::GzipTruncated;
use crate::stream::sniff;
use crate::stream::{ByteCounter, CountingRead};

/// The largest entry the server writes: the 16 MiB BSON limit plus 16 KiB of oplog
/// slack (`BSONObjMaxInternalSize`). Anything larger is corruption.
pub const MAX_ENTRY_BYTES: usize = crate::stream::MAX_DOCUMENT_BYTES;

/// Smallest possible BSON document: a 4-byte length and the trailing NUL.
const MIN_DOC_BYTES: usize = 5;

/// How much we try to read from the source at once. Small enough that a chunk is
/// still in the core's L2 cache when the scan walks it right after `read()` copied
/// it (with 4 MiB reads every entry's first and last bytes were cache misses).
const READ_CHUNK: usize = 256 * 1024;

#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOptions {
    /// Stop quietly at an incomplete last entry instead of failing; the drop is
    /// recorded in [`OplogReader::truncation`].
    pub allow_truncated: bool,
}

/// A framed document with its stream offset and 0-based entry number.
pub type Positioned<'a, T> = (&'a T, u64, u64);

/// Where one framed document sits in the buffer.
struct Frame {
    start: usize,
    len: usize,
    offset: u64,
    index: u64,
}

/// Streams oplog entries out of any byte source.
pub struct OplogReader {
    name: String,
    src: Box<dyn Read + Send>,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    /// End of the valid bytes in `buf`.
    filled: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    /// Number of entries handed out so far.
    entries: u64,
    eof: bool,
    opts: ReadOptions,
    truncation: Option<Truncation>,
    /// Set when the source is gzip data cut inside a member: its end is a truncation.
    gzip_cut: Option<GzipTruncated>,
    /// Bytes taken from the underlying file (compressed bytes for `.gz`).
    counter: ByteCounter,
    /// Size of the underlying file when known (for progress).
    source_len: Option<u64>,
}

impl OplogReader {
    /// Wraps a byte source. `name` is how errors refer to it (a path, or `<stdin>`).
    pub fn new(
        name: impl Into<String>,
        src: impl Read + Send + 'static,
        opts: ReadOptions,
    ) -> Self {
        let counter = ByteCounter::default();
        Self::with_counter(
            name,
            Box::new(CountingRead::new(src, counter.clone())),
            opts,
            counter,
            None,
        )
    }

    pub(crate) fn with_counter(
        name: impl Into<String>,
        src: Box<dyn Read + Send>,
        opts: ReadOptions,
        counter: ByteCounter,
        source_len: Option<u64>,
    ) -> Self {
        OplogReader {
            name: name.into(),
            src,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
            base: 0,
            entries: 0,
            eof: false,
            opts,
            truncation: None,
            gzip_cut: None,
            counter,
            source_len,
        }
    }

    /// How errors name this source.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Entries handed out so far.
    pub fn entries_read(&self) -> u64 {
        self.entries
    }

    /// Stream offset just past the last entry handed out (decompressed bytes).
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes taken from the underlying file so far, and its size when known.
    pub fn progress(&self) -> (ByteCounter, Option<u64>) {
        (self.counter.clone(), self.source_len)
    }

    /// Set when the reader stopped at an incomplete last entry
    /// (only with [`ReadOptions::allow_truncated`]).
    pub fn truncation(&self) -> Option<&Truncation> {
        self.truncation.as_ref()
    }

    /// The next raw document, with its stream offset and entry number (0-based).
    /// Checks framing only: a plausible length prefix and the trailing NUL.
    pub fn next_raw(&mut self) -> Result<Option<Positioned<'_, RawDocument>>, ReadError> {
        match self.advance()? {
            None => Ok(None),
            Some(f) => Ok(Some((self.frame_doc(&f)?, f.offset, f.index))),
        }
    }

    /// The next document's bytes (framing checked: a plausible length prefix and
    /// the trailing NUL), with its stream offset and entry number. The cheapest way
    /// through a file, for scans that look at most entries only briefly.
    pub fn next_bytes(&mut self) -> Result<Option<Positioned<'_, [u8]>>, ReadError> {
        match self.advance()? {
            None => Ok(None),
            Some(f) => Ok(Some((
                &self.buf[f.start..f.start + f.len],
                f.offset,
                f.index,
            ))),
        }
    }

    /// The next entry as a typed view. A document without `ts` or `op` is an error
    /// naming its number and offset.
    pub fn next_entry(&mut self) -> Result<Option<Entry<'_>>, ReadError> {
        let Some(f) = self.advance()? else {
            return Ok(None);
        };
        let doc = self.frame_doc(&f)?;
        match Entry::parse(doc) {
            Ok(mut e) => {
                e.offset = f.offset;
                e.index = f.index;
                Ok(Some(e))
            }
            Err(err) => Err(not_an_entry(self.name.clone(), f.offset, f.index, err)),
        }
    }

    fn frame_doc(&self, f: &Frame) -> Result<&RawDocument, ReadError> {
        RawDocument::from_bytes(&self.buf[f.start..f.start + f.len]).map_err(|e| {
            ReadError::Malformed {
                name: self.name.clone(),
                offset: f.offset,
                index: f.index,
                detail: e.to_string(),
            }
        })
    }

    /// Frames the next document and consumes it; the bytes stay valid in `buf` until
    /// the next call.
    fn advance(&mut self) -> Result<Option<Frame>, ReadError> {
        if !self.ensure(4)? {
            return self.at_end();
        }
        let offset = self.offset();
        let index = self.entries;
        let head = &self.buf[self.pos..self.pos + 4];
        let declared = i32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        if declared < MIN_DOC_BYTES as i32 || declared as usize > MAX_ENTRY_BYTES {
            return Err(self.bad_length(offset, index, declared as i64));
        }
        let len = declared as usize;
        if !self.ensure(len)? {
            // Fewer than `len` bytes remain before the end of the stream.
            if offset == 0 {
                // The very first "length" runs past the end: most likely not BSON.
                if let Some(what) = sniff::clearly_not_bson(&self.buf[self.pos..self.filled]) {
                    return Err(ReadError::NotBson {
                        name: self.name.clone(),
                        looks_like: what,
                    });
                }
            }
            let remaining = (self.filled - self.pos) as u64;
            return self.truncated(offset, index, len as u64, remaining);
        }
        let start = self.pos;
        if self.buf[start + len - 1] != 0 {
            if offset == 0 {
                if let Some(what) = sniff::clearly_not_bson(&self.buf[start..start + len]) {
                    return Err(ReadError::NotBson {
                        name: self.name.clone(),
                        looks_like: what,
                    });
                }
            }
            return Err(ReadError::Malformed {
                name: self.name.clone(),
                offset,
                index,
                detail: format!(
                    "it declares {len} bytes but does not end with the NUL byte BSON requires"
                ),
            });
        }
        self.pos += len;
        self.entries += 1;
        Ok(Some(Frame {
            start,
            len,
            offset,
            index,
        }))
    }

    /// Ensures at least `need` unconsumed bytes are buffered. Returns `false` when the
    /// stream ends first.
    #[inline(always)]
    fn ensure(&mut self, need: usize) -> Result<bool, ReadError> {
        if self.filled - self.pos >= need {
            return Ok(true);
        }
        self.refill(need)
    }

    #[inline(never)]
    fn refill(&mut self, need: usize) -> Result<bool, ReadError> {
        while self.filled - self.pos < need {
            if self.eof {
                return Ok(false);
            }
            // Make room: move the unconsumed tail to the front, then grow if the
            // entry is bigger than the buffer.
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.filled, 0);
                self.base += self.pos as u64;
                self.filled -= self.pos;
                self.pos = 0;
            }
            let want = need.max(READ_CHUNK);
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            match self.src.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Cut gzip data: everything before the cut has been read; the end
                // of the stream is a truncation (see `at_end` and `truncated`).
                Err(e) if GzipTruncated::of(&e).is_some() => {
                    self.gzip_cut = GzipTruncated::of(&e).cloned();
                    self.eof = true;
                }
                // A missing or damaged chunk of an oplog archive: its own error, with
                // its hint (the byte offset in the stream of chunks means nothing).
                Err(e) if e.get_ref().is_some_and(|i| i.is::<OplogArchiveError>()) => {
                    let inner = e.into_inner().expect("checked above");
                    let err = inner
                        .downcast::<OplogArchiveError>()
                        .expect("checked above");
                    return Err(ReadError::OplogArchive(*err));
                }
                Err(e) => {
                    return Err(ReadError::Io {
                        name: self.name.clone(),
                        offset: self.base + self.filled as u64,
                        source: e,
                    })
                }
            }
        }
        Ok(true)
    }

    fn at_end(&mut self) -> Result<Option<Frame>, ReadError> {
        let remaining = (self.filled - self.pos) as u64;
        if remaining == 0 && self.gzip_cut.is_none() {
            return Ok(None);
        }
        // 1-3 stray bytes: not even a length prefix.
        let offset = self.offset();
        let index = self.entries;
        self.truncated(offset, index, 0, remaining)
    }

    fn truncated(
        &mut self,
        offset: u64,
        index: u64,
        declared: u64,
        remaining: u64,
    ) -> Result<Option<Frame>, ReadError> {
        let t = Truncation {
            name: self.name.clone(),
            offset,
            complete_entries: index,
            declared,
            remaining,
            gzip: self.gzip_cut.as_ref().map(|g| GzipCut {
                member: g.member,
                member_at: g.member_at,
                compressed_bytes: self.counter.get(),
            }),
        };
        if self.opts.allow_truncated {
            self.pos = self.filled;
            self.truncation = Some(t);
            Ok(None)
        } else {
            Err(ReadError::Truncated(t))
        }
    }

    fn bad_length(&self, offset: u64, index: u64, declared: i64) -> ReadError {
        if offset == 0 {
            let avail = &self.buf[self.pos..self.filled];
            if let Some(what) = sniff::looks_like(avail) {
                return ReadError::NotBson {
                    name: self.name.clone(),
                    looks_like: what,
                };
            }
        }
        ReadError::BadLength {
            name: self.name.clone(),
            offset,
            index,
            declared,
        }
    }
}

pub(crate) fn not_an_entry(name: String, offset: u64, index: u64, err: EntryError) -> ReadError {
    ReadError::NotAnEntry {
        name,
        offset,
        index,
        source: err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    fn entry_bytes(t: u32, i: u32) -> Vec<u8> {
        bson::to_vec(&doc! {
            "ts": Timestamp { time: t, increment: i },
            "t": 1i64, "v": 2i32, "op": "i", "ns": "shop.orders",
            "o": { "_id": i as i64, "qty": 3 },
        })
        .unwrap()
    }

    fn reader(bytes: Vec<u8>, allow_truncated: bool) -> OplogReader {
        OplogReader::new(
            "test.bson",
            io::Cursor::new(bytes),
            ReadOptions { allow_truncated },
        )
    }

    fn read_all(r: &mut OplogReader) -> Result<Vec<(u32, u32)>, ReadError> {
        let mut out = Vec::new();
        while let Some(e) = r.next_entry()? {
            out.push((e.ts.t, e.ts.i));
        }
        Ok(out)
    }

    #[test]
    fn empty_input_is_zero_entries() {
        let mut r = reader(vec![], false);
        assert_eq!(read_all(&mut r).unwrap(), vec![]);
    }

    #[test]
    fn reads_entries_in_order_with_offsets() {
        let mut bytes = Vec::new();
        for i in 1..=3 {
            bytes.extend(entry_bytes(100, i));
        }
        let one = entry_bytes(100, 1).len() as u64;
        let mut r = reader(bytes, false);
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!((e.offset, e.index), (0, 0));
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!((e.offset, e.index), (one, 1));
        assert_eq!(read_all(&mut r).unwrap(), vec![(100, 3)]);
        assert_eq!(r.entries_read(), 3);
    }

    #[test]
    fn entries_bigger_than_the_read_chunk_are_read_whole() {
        let big = "x".repeat(READ_CHUNK + 1000);
        let d = bson::to_vec(&doc! {
            "ts": Timestamp { time: 1, increment: 1 }, "op": "i", "ns": "a.b", "o": { "s": big },
        })
        .unwrap();
        let mut bytes = entry_bytes(1, 0);
        bytes.extend(&d);
        bytes.extend(entry_bytes(2, 0));
        let mut r = reader(bytes, false);
        assert_eq!(read_all(&mut r).unwrap(), vec![(1, 0), (1, 1), (2, 0)]);
    }

    #[test]
    fn truncated_last_entry_names_offset_and_count() {
        let mut bytes = entry_bytes(1, 1);
        let first = bytes.len() as u64;
        bytes.extend(entry_bytes(1, 2));
        bytes.truncate(bytes.len() - 7);
        let mut r = reader(bytes.clone(), false);
        r.next_entry().unwrap();
        let err = r.next_entry().unwrap_err();
        match &err {
            ReadError::Truncated(t) => {
                assert_eq!(t.offset, first);
                assert_eq!(t.complete_entries, 1);
                assert_eq!(t.remaining + 7, t.declared);
            }
            other => panic!("unexpected {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&format!("byte {first}")), "{msg}");

        let mut r = reader(bytes, true);
        assert_eq!(read_all(&mut r).unwrap(), vec![(1, 1)]);
        assert_eq!(r.truncation().unwrap().complete_entries, 1);
    }

    #[test]
    fn stray_trailing_bytes_are_a_truncation() {
        let mut bytes = entry_bytes(1, 1);
        bytes.extend([1, 2]);
        let mut r = reader(bytes, false);
        r.next_entry().unwrap();
        assert!(matches!(r.next_entry(), Err(ReadError::Truncated(_))));
    }

    #[test]
    fn impossible_lengths_are_rejected() {
        for declared in [0i32, 4, -1, (MAX_ENTRY_BYTES + 1) as i32] {
            let mut bytes = entry_bytes(1, 1);
            let mut bad = declared.to_le_bytes().to_vec();
            bad.extend([0u8; 16]);
            bytes.extend(bad);
            let mut r = reader(bytes, true);
            r.next_entry().unwrap();
            match r.next_entry() {
                Err(ReadError::BadLength {
                    declared: d,
                    index: 1,
                    ..
                }) => assert_eq!(d, declared as i64),
                other => panic!("declared {declared}: unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn length_past_end_of_file_is_truncation() {
        let mut bytes = entry_bytes(1, 1);
        bytes.extend(1000i32.to_le_bytes());
        bytes.extend([0u8; 20]);
        let mut r = reader(bytes, false);
        r.next_entry().unwrap();
        match r.next_entry() {
            Err(ReadError::Truncated(t)) => assert_eq!((t.declared, t.remaining), (1000, 24)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn missing_nul_is_malformed() {
        let mut bytes = entry_bytes(1, 1);
        let n = bytes.len();
        bytes[n - 1] = 7;
        bytes.extend(entry_bytes(1, 2));
        let mut r = reader(entry_bytes(1, 0).into_iter().chain(bytes).collect(), false);
        r.next_entry().unwrap();
        assert!(matches!(
            r.next_entry(),
            Err(ReadError::Malformed { index: 1, .. })
        ));
    }

    #[test]
    fn a_document_that_is_not_an_entry_is_named() {
        let mut bytes = entry_bytes(1, 1);
        let off = bytes.len() as u64;
        bytes.extend(bson::to_vec(&doc! { "_id": 1, "name": "not an oplog entry" }).unwrap());
        let mut r = reader(bytes, false);
        r.next_entry().unwrap();
        let err = r.next_entry().unwrap_err();
        assert!(matches!(err, ReadError::NotAnEntry { index: 1, offset, .. } if offset == off));
        let msg = err.to_string();
        assert!(
            msg.contains("entry 2") && msg.contains(&format!("byte {off}")),
            "{msg}"
        );
    }

    #[test]
    fn json_text_is_recognised() {
        let mut r = reader(
            br#"{"ts": {"$timestamp": {"t": 1, "i": 1}}, "op": "n"}"#.to_vec(),
            false,
        );
        match r.next_entry() {
            Err(ReadError::NotBson { looks_like, .. }) => {
                assert!(looks_like.contains("JSON"), "{looks_like}")
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn gzip_without_gz_suffix_is_recognised() {
        use flate2::{write::GzEncoder, Compression};
        use std::io::Write;
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(&entry_bytes(1, 1)).unwrap();
        let mut r = reader(enc.finish().unwrap(), false);
        match r.next_entry() {
            Err(ReadError::NotBson { looks_like, .. }) => {
                assert!(looks_like.contains("gzip"), "{looks_like}")
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
