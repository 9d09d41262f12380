//! The streaming archive reader: magic, header and prelude at open, then one pass
//! over the interleaved namespace blocks, handing out each document and the end of
//! each namespace.
//!
//! Rules follow mongo-tools `common/archive/parser.go` (`readBSONOrTerminator`,
//! `ReadBlock`), `prelude.go` (`Prelude.Read`) and `demultiplexer.go`
//! (`HeaderBSON`, `BodyBSON`, `End`), which is what mongorestore runs.

use std::collections::HashMap;
use std::io::{self, Read};

use super::crc::Crc64;
use super::error::{ArchiveError, Block, Offset};
use super::format::{CollectionMetadata, Header, Namespace, NamespaceHeader, MAGIC, TERMINATOR};
use crate::stream::{ByteCounter, CountingRead};

/// The largest document accepted: the oplog's limit (16 MiB + 16 KiB,
/// [`crate::stream::MAX_DOCUMENT_BYTES`]). mongo-tools' parser stops at exactly 16 MiB
/// (`db.MaxBSONSize`), so this is slightly more lenient than mongorestore.
pub const MAX_DOCUMENT_BYTES: usize = crate::stream::MAX_DOCUMENT_BYTES;

/// Smallest BSON document: length prefix and trailing NUL (`archive.go` `minBSONSize`).
const MIN_DOC_BYTES: usize = 5;

/// How much is asked of the source at once.
const READ_CHUNK: usize = 4 * 1024 * 1024;

/// Bytes looked at to say what a non-archive file is.
const SNIFF_BYTES: usize = 512;

/// The most buffered bytes [`ArchiveReader::read_direct`] moves to the caller's
/// buffer before reading straight into it (normally the start of one document).
const MAX_CARRY: usize = 64 * 1024;

#[derive(Clone, Copy, Debug)]
pub struct ReadOptions {
    /// Compute each namespace's CRC-64 and fail on a mismatch with its EOF header
    /// (default). Without it the checksums are neither computed nor compared.
    pub verify_crc: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { verify_crc: true }
    }
}

/// How a namespace's checksum turned out. A mismatch is an error
/// ([`ArchiveError::CrcMismatch`]), so it never appears here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcCheck {
    /// The CRC-64 of the namespace's documents equals the one in its EOF header.
    Matched(u64),
    /// Not computed ([`ReadOptions::verify_crc`] off, or a namespace the
    /// [`super::NamespaceReader`] skips).
    NotChecked,
}

/// One item of the event stream.
#[derive(Debug)]
pub enum Event<'a> {
    Document(Document<'a>),
    End(NamespaceEnd<'a>),
}

/// A document of some namespace. Its framing is checked (length prefix, trailing
/// NUL), its content is not parsed.
#[derive(Debug)]
pub struct Document<'a> {
    pub namespace: &'a Namespace,
    pub bytes: &'a [u8],
    /// Offset of the document in the (decompressed) archive stream.
    pub offset: u64,
    /// 0-based number of the document within its namespace.
    pub index: u64,
}

/// The EOF header of a namespace: all its documents have been seen.
#[derive(Debug)]
pub struct NamespaceEnd<'a> {
    pub namespace: &'a Namespace,
    pub documents: u64,
    /// Total size of its documents.
    pub bytes: u64,
    pub crc: CrcCheck,
    /// Offset of the EOF header.
    pub offset: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Unopened,
    Open,
    Closed,
}

/// Per-namespace bookkeeping (mongo-tools `Demultiplexer.NamespaceStatus`, `outs`,
/// `lengths`).
struct NsState {
    ns: Namespace,
    label: String,
    status: Status,
    documents: u64,
    bytes: u64,
    crc: Crc64,
    verify: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cursor {
    /// A namespace header or EOF header comes next.
    BlockStart,
    /// Inside a segment of this namespace: documents or a terminator come next.
    Segment(usize),
    Done,
    Failed,
}

/// What one step of the reader produced. `Docs` is a run of whole, consecutive
/// documents of one namespace: `buf[start..start + len]`, valid until the next step.
pub(crate) enum Step {
    Docs {
        ns: usize,
        start: usize,
        len: usize,
        offset: u64,
        first_index: u64,
    },
    End {
        ns: usize,
        offset: u64,
        crc: CrcCheck,
    },
    Finished,
}

/// Reads a mongodump archive in one pass. See the [module docs](super).
pub struct ArchiveReader {
    name: String,
    src: Box<dyn Read + Send>,
    pub(crate) buf: Vec<u8>,
    pos: usize,
    filled: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    eof: bool,
    gzip: bool,
    header: Header,
    prelude: Vec<CollectionMetadata>,
    states: Vec<NsState>,
    by_name: HashMap<Namespace, usize>,
    cursor: Cursor,
    /// Documents of the last run not yet handed out by [`Self::next_event`]:
    /// (namespace, next document in `buf`, end of the run, its offset, its index).
    run: Option<(usize, usize, usize, u64, u64)>,
    counter: ByteCounter,
    source_len: Option<u64>,
}

impl ArchiveReader {
    /// Reads the magic number, header and prelude from `src`, which may be the
    /// archive or its gzip compression (recognised by its first bytes). `name` is how
    /// errors refer to the source.
    pub fn new(
        name: impl Into<String>,
        src: impl Read + Send + 'static,
        opts: ReadOptions,
    ) -> Result<ArchiveReader, ArchiveError> {
        Self::with_source(name.into(), Box::new(src), None, opts)
    }

    pub(crate) fn with_source(
        name: String,
        src: Box<dyn Read + Send>,
        source_len: Option<u64>,
        opts: ReadOptions,
    ) -> Result<ArchiveReader, ArchiveError> {
        let counter = ByteCounter::default();
        let mut counted: Box<dyn Read + Send> = Box::new(CountingRead::new(src, counter.clone()));
        let head = peek(&mut counted, 2).map_err(|source| ArchiveError::Io {
            name: name.clone(),
            at: Offset {
                offset: 0,
                gzip: false,
            },
            block: Block::Magic,
            source,
        })?;
        // gzip is recognised by its magic bytes, never by the file name.
        let gzip = head.starts_with(&[0x1f, 0x8b]);
        let chained = io::Cursor::new(head).chain(counted);
        let src: Box<dyn Read + Send> = if gzip {
            // mongorestore uses Go's gzip.Reader, which reads concatenated members;
            // so does pitr's one decoder of every gzip input.
            crate::stream::gzip::decoder(chained)
        } else {
            Box::new(chained)
        };
        let mut r = ArchiveReader {
            name,
            src,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
            base: 0,
            eof: false,
            gzip,
            header: Header::new("", "", 0),
            prelude: Vec::new(),
            states: Vec::new(),
            by_name: HashMap::new(),
            cursor: Cursor::BlockStart,
            run: None,
            counter,
            source_len,
        };
        r.read_prelude(opts)?;
        Ok(r)
    }

    /// How errors name this source (a path or `<stdin>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the archive was gzip-compressed (`mongodump --archive --gzip`).
    pub fn is_gzip(&self) -> bool {
        self.gzip
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The prelude entries, in archive order.
    pub fn prelude(&self) -> &[CollectionMetadata] {
        &self.prelude
    }

    /// The namespaces whose data the archive must hold (one per prelude entry;
    /// `system.buckets.<name>` for older time series).
    pub fn data_namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.states.iter().map(|s| &s.ns)
    }

    /// Offset just past what has been handed out, in the decompressed stream.
    pub fn offset(&self) -> u64 {
        match self.run {
            Some((_, _, _, next, _)) => next,
            None => self.stream_pos(),
        }
    }

    /// Offset of the next unread byte.
    fn stream_pos(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes taken from the underlying file so far (compressed bytes when gzipped),
    /// and its size when known, for progress bars.
    pub fn progress(&self) -> (ByteCounter, Option<u64>) {
        (self.counter.clone(), self.source_len)
    }

    /// The next document or namespace end; `None` once the whole archive has been
    /// read and found complete (every namespace of the prelude ended by its EOF
    /// header).
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, ArchiveError> {
        // Documents are framed and checksummed a run at a time (one CRC update per
        // run, not per document), then handed out one by one.
        if self.run.is_none() {
            match self.step(usize::MAX, None)? {
                Step::Finished => return Ok(None),
                Step::Docs {
                    ns,
                    start,
                    len,
                    offset,
                    first_index,
                } => self.run = Some((ns, start, start + len, offset, first_index)),
                Step::End { ns, offset, crc } => {
                    let st = &self.states[ns];
                    return Ok(Some(Event::End(NamespaceEnd {
                        namespace: &st.ns,
                        documents: st.documents,
                        bytes: st.bytes,
                        crc,
                        offset,
                    })));
                }
            }
        }
        let (ns, start, end, offset, index) = self.run.take().expect("a run was just set");
        // Framing was checked when the run was formed.
        let len = u32::from_le_bytes(self.buf[start..start + 4].try_into().unwrap()) as usize;
        if start + len < end {
            self.run = Some((ns, start + len, end, offset + len as u64, index + 1));
        }
        Ok(Some(Event::Document(Document {
            namespace: &self.states[ns].ns,
            bytes: &self.buf[start..start + len],
            offset,
            index,
        })))
    }

    pub(crate) fn index_of(&self, ns: &Namespace) -> Result<usize, ArchiveError> {
        self.by_name
            .get(ns)
            .copied()
            .ok_or_else(|| ArchiveError::NoSuchNamespace {
                name: self.name.clone(),
                namespace: ns.to_string(),
                available: self.states.iter().map(|s| s.label.clone()).collect(),
            })
    }

    pub(crate) fn namespace_at(&self, i: usize) -> &Namespace {
        &self.states[i].ns
    }

    pub(crate) fn documents_of(&self, i: usize) -> u64 {
        self.states[i].documents
    }

    /// Whether the next step has to read from the source: the buffer does not hold
    /// the next length prefix, or not the whole document it announces.
    pub(crate) fn needs_input(&self) -> bool {
        let avail = self.filled - self.pos;
        if avail < 4 {
            return !(self.eof && avail == 0 && self.cursor == Cursor::BlockStart);
        }
        let l = u32::from_le_bytes(self.buf[self.pos..self.pos + 4].try_into().unwrap());
        l != u32::MAX && l as usize > avail
    }

    /// Hands back the documents of a pending [`Self::next_event`] run:
    /// (namespace, range in `buf`).
    pub(crate) fn take_run(&mut self) -> Option<(usize, std::ops::Range<usize>)> {
        self.run
            .take()
            .map(|(ns, start, end, _, _)| (ns, start..end))
    }

    /// Reads whole documents of segment `target` straight into `out`, without going
    /// through `buf` (which saves a copy of every byte for [`super::NamespaceReader`]).
    /// Applies only inside a segment of `target` with at most [`MAX_CARRY`] bytes
    /// buffered (`None` otherwise): those go first into `out`, then one read of the
    /// source fills the rest; the documents are framed there and what follows the last
    /// whole one (part of a document, or the terminator and beyond) goes back into
    /// `buf` for the ordinary path, which reports any problem. Returns how many bytes
    /// of whole documents `out` starts with (possibly 0).
    pub(crate) fn read_direct(
        &mut self,
        target: usize,
        out: &mut [u8],
    ) -> Result<Option<usize>, ArchiveError> {
        let carried = self.filled - self.pos;
        if self.cursor != Cursor::Segment(target)
            || self.eof
            || carried > MAX_CARRY
            || out.len() < 2 * MAX_CARRY
        {
            return Ok(None);
        }
        let at = self.stream_pos();
        out[..carried].copy_from_slice(&self.buf[self.pos..self.filled]);
        let mut got = carried;
        loop {
            match self.src.read(&mut out[got..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(k) => {
                    got += k;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Nothing changed in `buf`: the carried bytes are still there.
                Err(source) => {
                    return Err(ArchiveError::Io {
                        name: self.name.clone(),
                        at: self.at(at + carried as u64),
                        block: Block::Namespace(self.states[target].label.clone()),
                        source,
                    })
                }
            }
        }
        // Whole, well-framed documents; anything else stops the walk.
        let mut end = 0;
        let mut count = 0;
        while got - end >= 4 {
            let l = u32::from_le_bytes(out[end..end + 4].try_into().unwrap()) as usize;
            if !(MIN_DOC_BYTES..=MAX_DOCUMENT_BYTES).contains(&l)
                || l > got - end
                || out[end + l - 1] != 0
            {
                break;
            }
            end += l;
            count += 1;
        }
        let rest = got - end;
        if self.buf.len() < rest {
            self.buf.resize(rest.max(READ_CHUNK), 0);
        }
        self.buf[..rest].copy_from_slice(&out[end..got]);
        self.base = at + end as u64;
        self.pos = 0;
        self.filled = rest;
        let st = &mut self.states[target];
        if st.verify {
            st.crc.update(&out[..end]);
        }
        st.documents += count;
        st.bytes += end as u64;
        Ok(Some(end))
    }

    /// Stops computing checksums for every namespace but `keep`.
    pub(crate) fn verify_only(&mut self, keep: usize) {
        for (i, s) in self.states.iter_mut().enumerate() {
            s.verify &= i == keep;
        }
    }

    /// Advances by one unit: a run of documents of the current segment, a namespace
    /// end, or the end of the archive. A run holds at least one document and, beyond
    /// the first, only whole documents already buffered that keep it within
    /// `max_run` bytes; runs of namespaces other than `limit_only` (when given) are
    /// not limited.
    pub(crate) fn step(
        &mut self,
        max_run: usize,
        limit_only: Option<usize>,
    ) -> Result<Step, ArchiveError> {
        loop {
            let r = match self.cursor {
                Cursor::Done => return Ok(Step::Finished),
                Cursor::Failed => {
                    return Err(ArchiveError::AfterError {
                        name: self.name.clone(),
                    })
                }
                Cursor::BlockStart => self.block_start(),
                Cursor::Segment(i) => {
                    let max = match limit_only {
                        Some(t) if t != i => usize::MAX,
                        _ => max_run,
                    };
                    self.segment_run(i, max)
                }
            };
            match r {
                Ok(Some(step)) => return Ok(step),
                Ok(None) => continue,
                Err(e) => {
                    self.cursor = Cursor::Failed;
                    return Err(e);
                }
            }
        }
    }

    fn read_prelude(&mut self, opts: ReadOptions) -> Result<(), ArchiveError> {
        // Magic number (prelude.go `Prelude.Read`).
        let magic_ok = self.need(4, &|_| Block::Magic)?;
        if !magic_ok || self.buf[..4] != MAGIC {
            let _ = self.ensure(SNIFF_BYTES);
            let head = &self.buf[..self.filled];
            let what = describe(head);
            return Err(ArchiveError::NotAnArchive {
                name: self.name.clone(),
                looks_like: if self.gzip {
                    format!("gzip-compressed data holding {what}")
                } else {
                    what
                },
            });
        }
        self.pos = 4;

        // The header, then metadata documents up to a terminator (parser.go
        // `ReadBlock` with prelude.go's `preludeParserConsumer`).
        let at = self.stream_pos();
        let (start, len) = match self.read_unit(&|_| Block::Header, "the header")? {
            Unit::Doc { start, len } => (start, len),
            Unit::Terminator => {
                return Err(self.corrupt(at, Block::Header, "a terminator instead of the header document (parser.go: consecutive terminators / headerless blocks are not allowed)".into()))
            }
        };
        self.header = Header::from_bson(&self.buf[start..start + len])
            .map_err(|e| self.corrupt(at, Block::Header, format!("not an archive header: {e}")))?;

        loop {
            let at = self.stream_pos();
            let n = self.prelude.len() + 1;
            let (start, len) =
                match self.read_unit(&|_| Block::Prelude, &format!("metadata entry {n}"))? {
                    Unit::Terminator => break,
                    Unit::Doc { start, len } => (start, len),
                };
            let m = CollectionMetadata::from_bson(&self.buf[start..start + len]).map_err(|e| {
                self.corrupt(
                    at,
                    Block::Prelude,
                    format!("metadata entry {n} is not collection metadata: {e}"),
                )
            })?;
            // The metadata is canonical extended JSON, i.e. JSON (the prelude of
            // mongo-tools' `bad-format.archive` fails here, as in mongorestore).
            if !m.metadata.is_empty() {
                if let Err(e) = serde_json::from_str::<serde_json::Value>(&m.metadata) {
                    return Err(ArchiveError::BadMetadata {
                        name: self.name.clone(),
                        namespace: Namespace::new(m.db.clone(), m.collection.clone()).to_string(),
                        at: self.at(at),
                        detail: e.to_string(),
                    });
                }
            }
            self.prelude.push(m);
        }

        // The namespaces mongorestore waits for (demultiplexer.go `CreateDemux`).
        for m in &self.prelude {
            let ns = m.data_namespace(&self.header);
            if self.by_name.contains_key(&ns) {
                continue;
            }
            self.by_name.insert(ns.clone(), self.states.len());
            self.states.push(NsState {
                label: ns.to_string(),
                ns,
                status: Status::Unopened,
                documents: 0,
                bytes: 0,
                crc: Crc64::default(),
                verify: opts.verify_crc,
            });
        }
        Ok(())
    }

    /// A namespace header or an EOF header (demultiplexer.go `HeaderBSON`), or the
    /// clean end of the archive (`End`).
    fn block_start(&mut self) -> Result<Option<Step>, ArchiveError> {
        let at = self.stream_pos();
        if !self.need(4, &|_| Block::BlockStart)? {
            let remaining = self.filled - self.pos;
            if remaining == 0 {
                return self.finish(at).map(Some);
            }
            return Err(self.truncated(
                at,
                Block::BlockStart,
                format!("{remaining} stray byte(s) where a namespace header should start"),
            ));
        }
        let (start, len) = match self.read_unit(&|_| Block::BlockStart, "the namespace header")? {
            Unit::Terminator => {
                return Err(self.corrupt(at, Block::BlockStart, "a terminator where a namespace header was expected (parser.go: consecutive terminators / headerless blocks are not allowed)".into()));
            }
            Unit::Doc { start, len } => (start, len),
        };
        let h = NamespaceHeader::from_bson(&self.buf[start..start + len]).map_err(|e| {
            self.corrupt(
                at,
                Block::BlockStart,
                format!("not a namespace header: {e}"),
            )
        })?;
        if h.collection.is_empty() {
            return Err(self.corrupt(
                at,
                Block::BlockStart,
                "a namespace header without a collection name".into(),
            ));
        }
        let ns = Namespace::new(h.db, h.collection);
        let Some(&i) = self.by_name.get(&ns) else {
            // mongorestore: "no intent for collection in archive".
            return Err(self.corrupt(
                at,
                Block::BlockStart,
                format!("namespace `{ns}` has a block but is not listed in the prelude"),
            ));
        };
        let status = self.states[i].status;
        if status == Status::Closed {
            // demultiplexer.go: "namespace header for already opened namespace".
            let what = if h.eof {
                "a second EOF header"
            } else {
                "data after its EOF header"
            };
            return Err(self.corrupt(at, Block::BlockStart, format!("`{ns}` has {what}")));
        }
        if !h.eof {
            // spec.md: `CRC` is always 0 in a segment header. mongorestore ignores it;
            // anything else here means damaged bytes, so it is refused.
            if h.crc != 0 {
                return Err(self.corrupt(
                    at,
                    Block::BlockStart,
                    format!(
                        "the segment header of `{ns}` has CRC {:#x} (always 0 in segment headers)",
                        h.crc
                    ),
                ));
            }
            self.states[i].status = Status::Open;
            self.cursor = Cursor::Segment(i);
            return Ok(None);
        }

        // EOF header: a terminator must follow (a document there is "collection data
        // without a collection header" in mongorestore).
        let eof_block = |s: &Self| Block::Eof(s.states[i].label.clone());
        let term_at = self.stream_pos();
        if !self.need(4, &eof_block)? {
            return Err(self.truncated(
                term_at,
                eof_block(self),
                "the stream ends before the terminator after the EOF header".into(),
            ));
        }
        if self.buf[self.pos..self.pos + 4] != TERMINATOR {
            return Err(self.corrupt(
                term_at,
                eof_block(self),
                "data follows the EOF header instead of a terminator".into(),
            ));
        }
        self.pos += 4;
        let st = &mut self.states[i];
        let crc = if st.verify {
            let computed = st.crc.value();
            if computed != h.crc {
                return Err(ArchiveError::CrcMismatch {
                    name: self.name.clone(),
                    namespace: st.label.clone(),
                    at: Offset {
                        offset: at,
                        gzip: self.gzip,
                    },
                    recorded: h.crc,
                    computed,
                    documents: st.documents,
                });
            }
            CrcCheck::Matched(computed)
        } else {
            CrcCheck::NotChecked
        };
        st.status = Status::Closed;
        self.cursor = Cursor::BlockStart;
        Ok(Some(Step::End {
            ns: i,
            offset: at,
            crc,
        }))
    }

    /// Documents of segment `i` up to its terminator (demultiplexer.go `BodyBSON`).
    fn segment_run(&mut self, i: usize, max_run: usize) -> Result<Option<Step>, ArchiveError> {
        let at = self.stream_pos();
        let block = |s: &Self| Block::Namespace(s.states[i].label.clone());
        if !self.need(4, &block)? {
            let remaining = self.filled - self.pos;
            let docs = self.states[i].documents;
            let detail = if remaining == 0 {
                format!("the stream ends inside the block, after document {docs} of the namespace (no terminator, no EOF header)")
            } else {
                format!("{remaining} stray byte(s) after document {docs} of the namespace")
            };
            return Err(self.truncated(at, block(self), detail));
        }
        let first = u32::from_le_bytes(self.buf[self.pos..self.pos + 4].try_into().unwrap());
        if first == u32::from_le_bytes(TERMINATOR) {
            self.pos += 4;
            self.cursor = Cursor::BlockStart;
            return Ok(None);
        }
        let what = format!("document {} of the namespace", self.states[i].documents + 1);
        let Unit::Doc { start, len } = self.read_unit(&block, &what)? else {
            unreachable!("a terminator was ruled out above")
        };
        // Extend the run over whole documents already in the buffer.
        let mut end = start + len;
        let mut count = 1;
        while end - start < max_run && self.filled - end >= 4 {
            let l = u32::from_le_bytes(self.buf[end..end + 4].try_into().unwrap()) as usize;
            // A terminator, or anything odd: the next step reports it with context.
            if !(MIN_DOC_BYTES..=MAX_DOCUMENT_BYTES).contains(&l)
                || self.filled - end < l
                || end - start + l > max_run
                || self.buf[end + l - 1] != 0
            {
                break;
            }
            end += l;
            count += 1;
        }
        self.pos = end;
        let st = &mut self.states[i];
        if st.verify {
            st.crc.update(&self.buf[start..end]);
        }
        let first_index = st.documents;
        st.documents += count;
        st.bytes += (end - start) as u64;
        Ok(Some(Step::Docs {
            ns: i,
            start,
            len: end - start,
            offset: at,
            first_index,
        }))
    }

    /// The end of the stream at a block boundary: complete only if every namespace
    /// was ended (demultiplexer.go `End`).
    fn finish(&mut self, at: u64) -> Result<Step, ArchiveError> {
        let labels = |status| {
            self.states
                .iter()
                .filter(|s| s.status == status)
                .map(|s| s.label.clone())
                .collect::<Vec<_>>()
        };
        let unfinished = labels(Status::Open);
        if !unfinished.is_empty() {
            return Err(ArchiveError::Unfinished {
                name: self.name.clone(),
                at: self.at(at),
                namespaces: unfinished,
            });
        }
        let missing = labels(Status::Unopened);
        if !missing.is_empty() {
            return Err(ArchiveError::MissingNamespaces {
                name: self.name.clone(),
                at: self.at(at),
                namespaces: missing,
            });
        }
        self.cursor = Cursor::Done;
        Ok(Step::Finished)
    }

    /// Reads a terminator or one whole document (parser.go `readBSONOrTerminator`)
    /// and consumes it; a document's bytes stay in `buf` until the next read.
    fn read_unit(
        &mut self,
        block: &dyn Fn(&Self) -> Block,
        what: &str,
    ) -> Result<Unit, ArchiveError> {
        let at = self.stream_pos();
        if !self.need(4, block)? {
            let remaining = self.filled - self.pos;
            let detail = if remaining == 0 {
                format!("the stream ends where {what} should start")
            } else {
                format!("{remaining} stray byte(s) where {what} should start")
            };
            return Err(self.truncated(at, block(self), detail));
        }
        let raw = u32::from_le_bytes(self.buf[self.pos..self.pos + 4].try_into().unwrap());
        if raw == u32::from_le_bytes(TERMINATOR) {
            self.pos += 4;
            return Ok(Unit::Terminator);
        }
        let len = raw as usize;
        if !(MIN_DOC_BYTES..=MAX_DOCUMENT_BYTES).contains(&len) {
            return Err(self.corrupt(
                at,
                block(self),
                format!("{what} declares a length of {raw} bytes: neither a BSON document nor a terminator"),
            ));
        }
        if !self.need(len, block)? {
            let remaining = self.filled - self.pos;
            return Err(self.truncated(
                at,
                block(self),
                format!("{what} declares {len} bytes, {remaining} remain"),
            ));
        }
        let start = self.pos;
        if self.buf[start + len - 1] != 0 {
            return Err(self.corrupt(
                at,
                block(self),
                format!(
                    "{what} declares {len} bytes but does not end with the NUL byte BSON requires"
                ),
            ));
        }
        self.pos += len;
        Ok(Unit::Doc { start, len })
    }

    /// [`Self::ensure`] with I/O errors turned into archive errors naming the block.
    fn need(&mut self, n: usize, block: &dyn Fn(&Self) -> Block) -> Result<bool, ArchiveError> {
        match self.ensure(n) {
            Ok(b) => Ok(b),
            Err(source) => Err(ArchiveError::Io {
                name: self.name.clone(),
                at: self.at(self.base + self.filled as u64),
                block: block(self),
                source,
            }),
        }
    }

    /// Ensures at least `need` unconsumed bytes are buffered; `false` when the stream
    /// ends first.
    fn ensure(&mut self, need: usize) -> io::Result<bool> {
        while self.filled - self.pos < need {
            if self.eof {
                return Ok(false);
            }
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
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn at(&self, offset: u64) -> Offset {
        Offset {
            offset,
            gzip: self.gzip,
        }
    }

    fn corrupt(&self, at: u64, block: Block, detail: String) -> ArchiveError {
        ArchiveError::Corrupt {
            name: self.name.clone(),
            at: self.at(at),
            block,
            detail,
        }
    }

    fn truncated(&self, at: u64, block: Block, detail: String) -> ArchiveError {
        ArchiveError::Truncated {
            name: self.name.clone(),
            at: self.at(at),
            block,
            detail,
        }
    }
}

enum Unit {
    Terminator,
    Doc { start: usize, len: usize },
}

/// Reads up to `n` bytes (fewer only at the end of the stream).
fn peek(src: &mut dyn Read, n: usize) -> io::Result<Vec<u8>> {
    let mut head = vec![0; n];
    let mut got = 0;
    while got < n {
        match src.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(got);
    Ok(head)
}

/// What a stream that does not start with the archive magic looks like.
fn describe(head: &[u8]) -> String {
    if head.is_empty() {
        return "an empty file".into();
    }
    if head.len() >= MIN_DOC_BYTES {
        let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
        let plausible = (MIN_DOC_BYTES..=MAX_DOCUMENT_BYTES).contains(&len);
        // Checked only when plausible: `len - 1` is then in range.
        let ends_right = plausible && (len > head.len() || head[len - 1] == 0);
        // The first element's type byte (or the NUL of an empty document).
        let typed = matches!(head[4], 0x00..=0x13 | 0x7f | 0xff);
        if ends_right && typed {
            return "a plain BSON file (a `.bson` collection or oplog dump)".into();
        }
    }
    match crate::stream::sniff::looks_like(head) {
        Some(w) if w.starts_with("random") => "random or corrupt bytes".into(),
        Some(w) => w.into(),
        None => "an empty file".into(),
    }
}
