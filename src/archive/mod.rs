//! Reading and writing mongodump archives (`mongodump --archive[=FILE] [--gzip]
//! [--oplog]`), streaming, in constant memory.
//!
//! # The format
//!
//! Written from mongo-tools 100.11/100.18 `common/archive/` (`spec.md`, `parser.go`,
//! `prelude.go`, `demultiplexer.go`, `multiplexer.go`, `archive.go`) and mongodump /
//! mongorestore's use of it, and checked on real archives (mongo-tools' test data
//! and archives written by the real mongodump):
//!
//! ```text
//! 6d e2 99 81                        magic (uint32 0x8199e26d, little-endian)
//! {concurrent_collections: int32, version: "0.1", server_version, tool_version}
//! {db, collection, metadata: <metadata.json text>, size: int32, type}   x N
//! ff ff ff ff                        end of the prelude
//! then, interleaved in any order:
//!   {db, collection, EOF: false, CRC: 0}  document*  ff ff ff ff      a segment
//!   {db, collection, EOF: true,  CRC: crc64}  ff ff ff ff             a namespace's end
//! ```
//!
//! * A namespace's documents may be split over several segments, interleaved with
//!   other namespaces' (mongodump dumps 4 collections in parallel by default and
//!   flushes each one's 16 MiB buffer as it fills). Empty collections and views get
//!   one segment with no documents. The EOF header usually follows the namespace's
//!   last segment, but with parallel dumps other blocks can come in between
//!   ([`writer`] explains why).
//! * The EOF header's `CRC` is Go's `crc64.ECMA` (CRC-64/XZ, see [`crc`]) over all
//!   the namespace's documents, stored as the raw bit pattern of an int64.
//! * `--oplog` puts the oplog in namespace `{db: "", collection: "oplog"}`, listed in
//!   the prelude with empty metadata ([`Namespace::oplog`]). It comes last, after
//!   every collection has ended, and mongorestore depends on that: with the oplog
//!   first it restores nothing ([`ArchiveWriter`] enforces the order).
//! * Time series (before 8.3) have their prelude entry under the collection name and
//!   their data under `system.buckets.<name>` ([`CollectionMetadata::data_namespace`]).
//! * `--gzip` with `--archive` gzips the whole stream (mongodump.go `getArchiveOut`),
//!   not each document or namespace. mongorestore only gunzips when told `--gzip`
//!   (otherwise: "stream or file does not appear to be a mongodump archive"); this
//!   module decides by the bytes.
//! * `size` is never set by mongodump 100.x (always 0), and prelude order is Go map
//!   order (random); tools before 100.x wrote no `type` field.
//!
//! # What is checked
//!
//! As mongorestore does: the magic number; every length prefix (5 bytes to
//! [`MAX_DOCUMENT_BYTES`], or the terminator) and every document's trailing NUL;
//! that the header and the namespace headers are what they claim (a namespace
//! header with unknown fields, a wrong type or no collection name is refused, like
//! Go's `NamespaceHeader.UnmarshalBSON`; a segment header whose `CRC` is not 0 too,
//! which mongorestore ignores); that each prelude entry's metadata is
//! JSON (mongo-tools' `bad-format.archive` fails there); that every block names a
//! namespace of the prelude, never reopened after its EOF header; that a terminator
//! follows each EOF header; each namespace's CRC-64 ([`ReadOptions::verify_crc`]).
//! The archive is complete only if it ends at a block boundary after the EOF header
//! of every namespace of the prelude (demultiplexer.go `End`): a namespace whose
//! data started but never ended ([`ArchiveError::Unfinished`]) or one that never
//! appeared ([`ArchiveError::MissingNamespaces`]) makes the end of the stream an
//! error, so a truncated archive is never read as complete. Errors name the source,
//! the byte offset (in the decompressed stream for gzip) and the block being read
//! (header, prelude, or the namespace `db.collection`). Document contents are not
//! parsed. Nothing protects the header and prelude strings: a damaged version
//! string or metadata text that is still valid JSON goes unnoticed, as in
//! mongorestore. Documents may be up to 16 MiB + 16 KiB, the oplog's limit
//! (mongorestore's parser stops at exactly 16 MiB).
//!
//! # Memory
//!
//! One buffer of 4 MiB, grown only to hold the largest single document (at most
//! [`MAX_DOCUMENT_BYTES`], 16 MiB + 16 KiB); plus the prelude and a small record per
//! namespace. Nothing is unpacked into memory or to disk whole.
//!
//! # API
//!
//! * [`open()`] (path, directory holding `archive`/`archive.gz`, or `-`) or
//!   [`ArchiveReader::new`] (any `Read`): gzip recognised by its magic bytes, then the
//!   archive magic checked ([`ArchiveError::NotAnArchive`] says what the bytes look
//!   like). [`ArchiveReader::is_gzip`], [`ArchiveReader::header`],
//!   [`ArchiveReader::prelude`].
//! * [`ArchiveReader::next_event`]: one pass over every [`Document`] (namespace,
//!   bytes, offset) and every [`NamespaceEnd`] (document count, CRC checked).
//! * [`NamespaceReader`]: `Read + Send` over the documents of one namespace, e.g.
//!   `OplogReader::new(name, NamespaceReader::new(archive, &Namespace::oplog())?, opts)`.
//!   It checks that namespace's CRC, skips the others' blocks whole (block framing
//!   checked; their documents are neither parsed nor CRC-checked) and reads on to the end of the archive before its last `Ok(0)`, so a
//!   cut archive is an error there too. Errors come as `io::Error`s whose source is
//!   the [`ArchiveError`].
//! * [`ArchiveWriter`]: writes what mongodump writes, gzipped or not.
//! * [`prelude_json`]: the `prelude.json` of directory dumps.

pub mod crc;
pub mod error;
pub mod format;
pub mod namespace_reader;
pub mod open;
pub mod prelude_json;
pub mod reader;
pub mod writer;

pub use error::{ArchiveError, Block, Offset, WriteError};
pub use format::{CollectionMetadata, CollectionType, Header, Namespace, MAGIC};
pub use namespace_reader::NamespaceReader;
pub use open::open;
pub use reader::{
    ArchiveReader, CrcCheck, Document, Event, NamespaceEnd, ReadOptions, MAX_DOCUMENT_BYTES,
};
pub use writer::{ArchiveWriter, WriterOptions};
