//! Writing archives exactly as mongodump does, one document at a time.
//!
//! mongodump's multiplexer (mongo-tools `common/archive/multiplexer.go` `Run`,
//! `formatBody`, `formatEOF`) writes a namespace header whenever the namespace of
//! the data changes, a terminator before each change, and ends a namespace in two
//! steps: `MuxIn.Close` first flushes its buffer as a body (possibly empty, which
//! still opens a segment when the namespace is not the current one), then
//! `formatEOF` writes a terminator if a segment is open, the EOF header with the
//! CRC-64, and a terminator. This writer does the same, single-threaded, which is
//! byte for byte what `mongodump --numParallelCollections=1` writes: one segment per
//! namespace in the order written, an empty collection as a header directly followed
//! by a terminator, then its EOF header.
//!
//! With parallel collections mongodump's layout depends on goroutine scheduling: the
//! flush and the EOF of a namespace are two events of the multiplexer's `select`,
//! so another namespace's segment, even its EOF, can come between them, leaving an
//! EOF header that no segment of its own namespace precedes. Readers accept both.
//!
//! With [`WriterOptions::gzip`] the whole stream is gzipped (mongodump.go
//! `getArchiveOut`), at the default level, as Go's `gzip.NewWriter`; the compressed
//! bytes differ from Go's (another deflate implementation), the content does not.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};

use flate2::write::GzEncoder;

use super::crc::Crc64;
use super::error::WriteError;
use super::format::{CollectionMetadata, Header, Namespace, NamespaceHeader, MAGIC, TERMINATOR};
use super::reader::MAX_DOCUMENT_BYTES;

#[derive(Clone, Copy, Debug, Default)]
pub struct WriterOptions {
    /// gzip the whole stream (`mongodump --archive --gzip`).
    pub gzip: bool,
}

enum Sink<W: Write> {
    Plain(W),
    // Boxed: the zlib-rs encoder state is large, and the plain variant is tiny.
    Gzip(Box<GzEncoder<W>>),
}

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
        }
    }
}

struct WState {
    ns: Namespace,
    label: String,
    crc: Crc64,
    documents: u64,
    ended: bool,
}

/// Streams an archive into a caller-provided writer. The caller handles where the
/// bytes go (e.g. a temporary name, then a rename once [`ArchiveWriter::finish`]
/// succeeded): after an error, or when dropped without `finish`, whatever was
/// buffered may still reach the writer, an archive without all its EOF headers that
/// readers and mongorestore refuse, and that must be discarded.
///
/// The oplog namespace ([`Namespace::oplog`]) can only be written once every other
/// namespace has ended, as mongodump does and mongorestore requires.
pub struct ArchiveWriter<W: Write> {
    out: BufWriter<Sink<W>>,
    states: Vec<WState>,
    by_name: HashMap<Namespace, usize>,
    /// The namespace whose segment is open (mongo-tools `Multiplexer.currentNamespace`).
    current: Option<usize>,
}

impl<W: Write> ArchiveWriter<W> {
    /// Writes the magic number, `header` and the prelude (prelude.go
    /// `Prelude.Write`). Documents may then be written for the data namespace of
    /// each prelude entry ([`CollectionMetadata::data_namespace`]).
    pub fn new(
        out: W,
        header: &Header,
        prelude: &[CollectionMetadata],
        opts: WriterOptions,
    ) -> Result<ArchiveWriter<W>, WriteError> {
        let sink = if opts.gzip {
            Sink::Gzip(Box::new(GzEncoder::new(
                out,
                flate2::Compression::default(),
            )))
        } else {
            Sink::Plain(out)
        };
        let mut w = ArchiveWriter {
            out: BufWriter::with_capacity(1 << 20, sink),
            states: Vec::new(),
            by_name: HashMap::new(),
            current: None,
        };
        w.out.write_all(&MAGIC)?;
        w.out.write_all(&header.to_bson())?;
        for m in prelude {
            w.out.write_all(&m.to_bson())?;
            let ns = m.data_namespace(header);
            if !w.by_name.contains_key(&ns) {
                w.by_name.insert(ns.clone(), w.states.len());
                w.states.push(WState {
                    label: ns.to_string(),
                    ns,
                    crc: Crc64::default(),
                    documents: 0,
                    ended: false,
                });
            }
        }
        w.out.write_all(&TERMINATOR)?;
        Ok(w)
    }

    fn index(&self, ns: &Namespace) -> Result<usize, WriteError> {
        // Fast path: the namespace of the open segment.
        if let Some(c) = self.current {
            if self.states[c].ns == *ns {
                return Ok(c);
            }
        }
        let i = *self
            .by_name
            .get(ns)
            .ok_or_else(|| WriteError::NotInPrelude(ns.to_string()))?;
        if self.states[i].ended {
            return Err(WriteError::AlreadyEnded(self.states[i].label.clone()));
        }
        if ns.is_oplog() {
            // mongodump writes the oplog after every collection has ended (mongodump.go
            // `Dump`, phase III). mongorestore depends on it: once the oplog appears its
            // prioritizer stops handing out namespaces (demultiplexer.go
            // `Prioritizer.Get`), and a collection whose data comes later fails with
            // "no demux consumer currently consuming namespace" (checked with
            // mongorestore 100.18: nothing is restored).
            let open: Vec<String> = self
                .states
                .iter()
                .filter(|s| !s.ended && !s.ns.is_oplog())
                .map(|s| s.label.clone())
                .collect();
            if !open.is_empty() {
                return Err(WriteError::OplogNotLast(open));
            }
        }
        Ok(i)
    }

    /// Makes `i` the namespace of the open segment (multiplexer.go `formatBody`).
    fn switch_to(&mut self, i: usize) -> io::Result<()> {
        if self.current == Some(i) {
            return Ok(());
        }
        if self.current.is_some() {
            self.out.write_all(&TERMINATOR)?;
        }
        let ns = &self.states[i].ns;
        let header = NamespaceHeader {
            db: ns.db.clone(),
            collection: ns.collection.clone(),
            eof: false,
            crc: 0,
        };
        self.out.write_all(&header.to_bson())?;
        self.current = Some(i);
        Ok(())
    }

    /// Appends one BSON document (its framing is checked) to namespace `ns`.
    pub fn write_document(&mut self, ns: &Namespace, doc: &[u8]) -> Result<(), WriteError> {
        let i = self.index(ns)?;
        let st = &self.states[i];
        if let Some(detail) = framing_problem(doc) {
            return Err(WriteError::BadDocument {
                namespace: st.label.clone(),
                index: st.documents,
                detail,
            });
        }
        self.switch_to(i)?;
        self.out.write_all(doc)?;
        let st = &mut self.states[i];
        st.crc.update(doc);
        st.documents += 1;
        Ok(())
    }

    /// Writes the EOF header of `ns` with the CRC-64 of its documents (multiplexer.go
    /// `MuxIn.Close`, `formatEOF`). A namespace without documents still gets its
    /// (empty) segment first, as mongodump writes it.
    pub fn end_namespace(&mut self, ns: &Namespace) -> Result<(), WriteError> {
        let i = self.index(ns)?;
        self.switch_to(i)?;
        self.out.write_all(&TERMINATOR)?;
        let st = &mut self.states[i];
        let eof = NamespaceHeader {
            db: st.ns.db.clone(),
            collection: st.ns.collection.clone(),
            eof: true,
            crc: st.crc.value(),
        };
        st.ended = true;
        self.out.write_all(&eof.to_bson())?;
        self.out.write_all(&TERMINATOR)?;
        self.current = None;
        Ok(())
    }

    /// Documents written to `ns` so far.
    pub fn documents(&self, ns: &Namespace) -> Option<u64> {
        self.by_name.get(ns).map(|&i| self.states[i].documents)
    }

    /// Checks that every namespace of the prelude was ended (mongorestore refuses an
    /// archive without all its EOF headers), flushes, finishes the gzip stream, and
    /// returns the writer.
    pub fn finish(self) -> Result<W, WriteError> {
        let unended: Vec<String> = self
            .states
            .iter()
            .filter(|s| !s.ended)
            .map(|s| s.label.clone())
            .collect();
        if !unended.is_empty() {
            return Err(WriteError::Unended(unended));
        }
        let sink = self.out.into_inner().map_err(|e| e.into_error())?;
        let mut out = match sink {
            Sink::Plain(w) => w,
            Sink::Gzip(g) => g.finish()?,
        };
        out.flush()?;
        Ok(out)
    }
}

fn framing_problem(doc: &[u8]) -> Option<String> {
    if doc.len() < 5 {
        return Some(format!(
            "{} bytes, shorter than any BSON document",
            doc.len()
        ));
    }
    if doc.len() > MAX_DOCUMENT_BYTES {
        return Some(format!(
            "{} bytes, over the {MAX_DOCUMENT_BYTES}-byte limit",
            doc.len()
        ));
    }
    let declared = u32::from_le_bytes(doc[..4].try_into().unwrap()) as usize;
    if declared != doc.len() {
        return Some(format!(
            "its length prefix says {declared} bytes, the slice has {}",
            doc.len()
        ));
    }
    if doc[doc.len() - 1] != 0 {
        return Some("it does not end with a NUL byte".into());
    }
    None
}
