//! Errors from reading oplog dumps. Each names the source, and where it applies the
//! byte offset and the 1-based entry number, so the user can find the spot with
//! `dd`/`bsondump`.

use std::path::PathBuf;

use crate::error::Hint;

use super::entry::EntryError;

/// An incomplete last entry: where it starts and how much of it is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub name: String,
    /// Byte offset where the incomplete entry starts (in the decompressed stream).
    pub offset: u64,
    /// Complete entries before it.
    pub complete_entries: u64,
    /// Length the entry declares (0 when not even the 4-byte prefix is there).
    pub declared: u64,
    /// Bytes actually present from `offset` to the end.
    pub remaining: u64,
    /// Set when the source is gzip whose compressed data was cut inside a member
    /// (then `declared` and `remaining` may both be 0: the cut fell between entries
    /// of the decompressed stream).
    pub gzip: Option<GzipCut>,
}

/// Where a gzip source's compressed data was cut (see
/// [`crate::stream::gzip::GzipTruncated`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GzipCut {
    /// The member the data ends in (1-based) and its compressed offset.
    pub member: u64,
    pub member_at: u64,
    /// Compressed bytes read, to the cut.
    pub compressed_bytes: u64,
}

/// `1 complete entry`, `2 complete entries`.
fn complete(n: u64) -> String {
    format!("{n} complete {}", if n == 1 { "entry" } else { "entries" })
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(g) = &self.gzip {
            write!(
                f,
                "`{}` is a truncated gzip stream: its compressed data ({} bytes) ends inside gzip member {} \
                 (which starts at compressed byte {}); {} ({} bytes of BSON) read before the cut",
                self.name,
                g.compressed_bytes,
                g.member,
                g.member_at,
                complete(self.complete_entries),
                self.offset
            )?;
            return if self.declared > 0 {
                write!(
                    f,
                    "; entry {} is incomplete (it declares {} bytes, {} are there)",
                    self.complete_entries + 1,
                    self.declared,
                    self.remaining
                )
            } else if self.remaining > 0 {
                write!(f, ", then {} stray byte(s)", self.remaining)
            } else {
                Ok(())
            };
        }
        if self.declared == 0 {
            write!(
                f,
                "`{}` is truncated at byte {}: {} stray byte(s) after {}",
                self.name,
                self.offset,
                self.remaining,
                complete(self.complete_entries)
            )
        } else {
            write!(
                f,
                "`{}` is truncated at byte {} (entry {} declares {} bytes, {} remain; {} before it)",
                self.name,
                self.offset,
                self.complete_entries + 1,
                self.declared,
                self.remaining,
                complete(self.complete_entries)
            )
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot open `{}`", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{}` is a directory without an oplog (looked for {})", dir.display(), looked.join(", "))]
    NoOplogInDir { dir: PathBuf, looked: Vec<String> },

    #[error("reading `{name}` failed at byte {offset}")]
    Io {
        name: String,
        offset: u64,
        #[source]
        source: std::io::Error,
    },

    #[error("{0}")]
    Truncated(Truncation),

    #[error(transparent)]
    Archive(Box<crate::archive::ArchiveError>),

    #[error("`{name}` is corrupt at byte {offset}: entry {} declares an impossible length of {declared} bytes", index + 1)]
    BadLength {
        name: String,
        offset: u64,
        /// 0-based entry number.
        index: u64,
        declared: i64,
    },

    #[error("`{name}` is not a BSON oplog dump: it looks like {looks_like}")]
    NotBson {
        name: String,
        looks_like: &'static str,
    },

    #[error("`{name}` is corrupt at byte {offset} (entry {}): {detail}", index + 1)]
    Malformed {
        name: String,
        offset: u64,
        index: u64,
        detail: String,
    },

    #[error(transparent)]
    OplogArchive(#[from] super::oplog_archive::manifest::OplogArchiveError),

    /// Opening a location failed (a URL that cannot be used, credentials, a missing
    /// bucket or object): the storage room's error, with its hint.
    #[error(transparent)]
    Storage(Box<crate::storage::StorageError>),

    #[error("entry {} at byte {offset} of `{name}` is not an oplog entry: {source}", index + 1)]
    NotAnEntry {
        name: String,
        offset: u64,
        index: u64,
        #[source]
        source: EntryError,
    },
}

impl ReadError {
    /// The source name this error is about.
    pub fn source_name(&self) -> String {
        match self {
            ReadError::Open { path, .. } => path.display().to_string(),
            ReadError::NoOplogInDir { dir, .. } => dir.display().to_string(),
            ReadError::Truncated(t) => t.name.clone(),
            ReadError::OplogArchive(e) => e.path().display().to_string(),
            ReadError::Io { name, .. }
            | ReadError::BadLength { name, .. }
            | ReadError::NotBson { name, .. }
            | ReadError::Malformed { name, .. }
            | ReadError::NotAnEntry { name, .. } => name.clone(),
            ReadError::Archive(e) => e.source_name(),
            ReadError::Storage(e) => e.url().to_string(),
        }
    }
}

impl Hint for ReadError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            ReadError::Open { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                crate::storage::not_found_hint(
                    path,
                    "check the path; pass a `.bson` or `.bson.gz` file, a mongodump directory, or `-` for stdin",
                )
            }
            // A read from a store that broke: the store's own hint.
            ReadError::Open { source, .. } | ReadError::Io { source, .. } => {
                return crate::storage::storage_error(source).and_then(|e| e.hint())
            }
            ReadError::Storage(e) => return e.hint(),
            ReadError::Archive(e) => return e.hint(),
            ReadError::OplogArchive(e) => return e.hint(),
            ReadError::NoOplogInDir { .. } => {
                "pass the oplog file itself, or a dump made with `mongodump --oplog` (root `oplog.bson`) or `mongodump -d local -c oplog.rs` (`local/oplog.rs.bson`)".into()
            }
            ReadError::Truncated(t) if t.gzip.is_some() => {
                "the dump was probably interrupted (e.g. `mongodump --oplog --gzip` or `pitr dump-oplog --gzip` stopped, or the copy is partial); re-run the dump, or pass `--allow-truncated` to use the complete entries before the cut".into()
            }
            ReadError::Truncated(_) => {
                "the dump was probably interrupted; re-run the dump, or pass `--allow-truncated` to use the complete entries before this point".into()
            }
            ReadError::BadLength { .. } | ReadError::Malformed { .. } => {
                "the file is damaged at this point; re-run the dump, or cut the file before this offset (e.g. `head -c OFFSET`) to use what precedes it".into()
            }
            ReadError::NotBson { looks_like, .. } => {
                if looks_like.contains("gzip") {
                    "pitr decompresses gzip files and stdin by their content; this gzip data sits inside something else: decompress it with `gunzip -c` first".into()
                } else if looks_like.contains("JSON") {
                    // bsondump only turns BSON into JSON (it has no inverse), and
                    // mongorestore --oplogReplay reads BSON only: the way back is a new dump.
                    "pitr, like mongorestore --oplogReplay, reads the BSON that mongodump writes, and no MongoDB tool turns JSON (bsondump's or mongoexport's output) back into an oplog dump; dump the oplog again as BSON: `pitr dump-oplog --uri URI --out DIR` or `mongodump -d local -c oplog.rs`".into()
                } else if looks_like.contains("archive") {
                    "unpack the archive into a directory first: `mongorestore --archive=FILE --dir=OUT --dryRun` does not; use `mongodump --out DIR` instead of `--archive`".into()
                } else {
                    "pass the `oplog.bson` written by `mongodump --oplog`, or `local/oplog.rs.bson` from `mongodump -d local -c oplog.rs`".into()
                }
            }
            ReadError::NotAnEntry { .. } => {
                "this looks like a collection dump, not an oplog; pass the oplog file (`oplog.bson` or `local/oplog.rs.bson`)".into()
            }
        })
    }
}

impl From<crate::storage::StorageError> for ReadError {
    fn from(e: crate::storage::StorageError) -> ReadError {
        ReadError::Storage(Box::new(e))
    }
}
