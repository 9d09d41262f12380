//! Errors from reading and writing archives. Reading errors name the source, the
//! byte offset (in the decompressed stream when the archive is gzipped) and the
//! block being read: the header, the prelude, or the namespace (`db.collection`).

use std::path::PathBuf;

use crate::error::Hint;

/// Which part of the archive was being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// The four magic bytes.
    Magic,
    /// The archive header document.
    Header,
    /// The collection-metadata documents after the header.
    Prelude,
    /// Between blocks, where a namespace header or an EOF header is expected.
    BlockStart,
    /// A data segment of this namespace (`db.collection`).
    Namespace(String),
    /// The EOF header of this namespace and the terminator after it.
    Eof(String),
}

impl std::fmt::Display for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Block::Magic => f.write_str("in the magic number"),
            Block::Header => f.write_str("in the archive header"),
            Block::Prelude => f.write_str("in the prelude (collection metadata)"),
            Block::BlockStart => f.write_str("where a namespace header was expected"),
            Block::Namespace(ns) => write!(f, "in the namespace block `{ns}`"),
            Block::Eof(ns) => write!(f, "in the EOF header of `{ns}`"),
        }
    }
}

/// A byte offset, saying whether it counts decompressed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    pub offset: u64,
    pub gzip: bool,
}

impl std::fmt::Display for Offset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.gzip {
            write!(f, "byte {} of the decompressed stream", self.offset)
        } else {
            write!(f, "byte {}", self.offset)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// An archive in a bucket that cannot be opened (credentials, a missing bucket or
    /// object, a URL with a secret): the storage room's error, with its hint.
    #[error(transparent)]
    Storage(Box<crate::storage::StorageError>),

    #[error("cannot open `{}`", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{name}` is not a mongodump archive: it looks like {looks_like}")]
    NotAnArchive { name: String, looks_like: String },

    #[error("reading `{name}` failed at {at} {block}")]
    Io {
        name: String,
        at: Offset,
        block: Block,
        #[source]
        source: std::io::Error,
    },

    #[error("`{name}` is truncated at {at} {block}: {detail}")]
    Truncated {
        name: String,
        at: Offset,
        block: Block,
        detail: String,
    },

    #[error("`{name}` is corrupt at {at} {block}: {detail}")]
    Corrupt {
        name: String,
        at: Offset,
        block: Block,
        detail: String,
    },

    #[error("`{name}`: the data of `{namespace}` does not match its checksum (EOF header at {at}): recorded CRC-64 {recorded:#018x}, computed {computed:#018x} over {documents} documents")]
    CrcMismatch {
        name: String,
        namespace: String,
        at: Offset,
        recorded: u64,
        computed: u64,
        documents: u64,
    },

    #[error("`{name}` ends at {at} before the end of {}", quote_list(namespaces))]
    Unfinished {
        name: String,
        at: Offset,
        /// Namespaces whose data had started but whose EOF header never came.
        namespaces: Vec<String>,
    },

    #[error(
        "`{name}` ends at {at} without any data block for {}, listed in its prelude",
        quote_list(namespaces)
    )]
    MissingNamespaces {
        name: String,
        at: Offset,
        namespaces: Vec<String>,
    },

    #[error("`{name}`: the metadata of `{namespace}` in the prelude (at {at}) is not valid extended JSON: {detail}")]
    BadMetadata {
        name: String,
        namespace: String,
        at: Offset,
        detail: String,
    },

    #[error("`{name}` holds no namespace `{namespace}` (its prelude lists {})", if available.is_empty() { "nothing".to_string() } else { quote_list(available) })]
    NoSuchNamespace {
        name: String,
        namespace: String,
        available: Vec<String>,
    },

    #[error("`{name}` cannot be read further: an earlier error stopped the reader")]
    AfterError { name: String },
}

pub(crate) fn quote_list(items: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut s = items
        .iter()
        .take(SHOWN)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    s
}

impl ArchiveError {
    /// The source (path or `<stdin>`) the error is about.
    pub fn source_name(&self) -> String {
        match self {
            ArchiveError::Open { path, .. } => path.display().to_string(),
            ArchiveError::Storage(e) => e.url().to_string(),
            ArchiveError::NotAnArchive { name, .. }
            | ArchiveError::Io { name, .. }
            | ArchiveError::Truncated { name, .. }
            | ArchiveError::Corrupt { name, .. }
            | ArchiveError::CrcMismatch { name, .. }
            | ArchiveError::Unfinished { name, .. }
            | ArchiveError::MissingNamespaces { name, .. }
            | ArchiveError::BadMetadata { name, .. }
            | ArchiveError::NoSuchNamespace { name, .. }
            | ArchiveError::AfterError { name } => name.clone(),
        }
    }

    /// Whether the archive ended early (as opposed to holding wrong bytes).
    pub fn is_truncation(&self) -> bool {
        matches!(
            self,
            ArchiveError::Truncated { .. }
                | ArchiveError::Unfinished { .. }
                | ArchiveError::MissingNamespaces { .. }
        )
    }
}

impl Hint for ArchiveError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            ArchiveError::Storage(e) => return e.hint(),
            ArchiveError::Open { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                crate::storage::not_found_hint(
                    path,
                    "check the path; pass the file written by `mongodump --archive=FILE` (with or without `--gzip`), or `-` for stdin",
                )
            }
            ArchiveError::Open { .. } | ArchiveError::AfterError { .. } => return None,
            ArchiveError::NotAnArchive { looks_like, .. } => {
                if looks_like.contains("BSON") {
                    "this is a plain BSON file, not an archive: pass it where a `.bson` dump or oplog file is expected".into()
                } else if looks_like.contains("directory") {
                    "pass the archive file itself (mongodump `--archive=DIR` writes `DIR/archive`, or `DIR/archive.gz` with `--gzip`)".into()
                } else {
                    "pass a file written by `mongodump --archive=FILE` (gzip-compressed or not)".into()
                }
            }
            ArchiveError::Io { at, .. } if at.gzip => {
                "the gzip data is damaged or cut short here; copy the archive again or re-run `mongodump --archive --gzip`".into()
            }
            ArchiveError::Io { .. } => return None,
            ArchiveError::Truncated { .. }
            | ArchiveError::Unfinished { .. }
            | ArchiveError::MissingNamespaces { .. } => {
                "the archive was cut short (mongodump interrupted, disk full, or an incomplete copy); mongorestore refuses it too: copy it again or take a new dump".into()
            }
            ArchiveError::Corrupt { .. } | ArchiveError::CrcMismatch { .. } => {
                "the archive is damaged at this point; copy it again from the original, or take a new dump".into()
            }
            ArchiveError::BadMetadata { .. } => {
                "mongorestore refuses this archive too; it was not written by a working mongodump: take a new dump".into()
            }
            ArchiveError::NoSuchNamespace { namespace, .. } => {
                if namespace == "oplog" {
                    "this archive has no oplog: it must come from `mongodump --archive --oplog` (a replica set is required)".into()
                } else {
                    "check the namespace against the archive's prelude".into()
                }
            }
        })
    }
}

/// Errors from [`super::ArchiveWriter`].
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("writing the archive failed")]
    Io(#[from] std::io::Error),

    #[error("namespace `{0}` is not in the archive's prelude")]
    NotInPrelude(String),

    #[error("namespace `{0}` was already ended; its EOF header is written")]
    AlreadyEnded(String),

    #[error("document {} of `{namespace}` is not a BSON document: {detail}", index + 1)]
    BadDocument {
        namespace: String,
        index: u64,
        detail: String,
    },

    #[error("the archive is not complete: {} never ended", quote_list(.0))]
    Unended(Vec<String>),

    #[error("the oplog must come after every other namespace, but {} has not ended", quote_list(.0))]
    OplogNotLast(Vec<String>),
}

impl Hint for WriteError {
    fn hint(&self) -> Option<String> {
        match self {
            WriteError::Io(_) => Some("check free space and permissions where the archive is written".into()),
            WriteError::Unended(_) => Some("every namespace of the prelude needs `end_namespace` (mongorestore refuses archives without all EOF headers)".into()),
            WriteError::OplogNotLast(_) => Some("end every collection before writing the oplog: mongorestore restores nothing that comes after it".into()),
            _ => None,
        }
    }
}

impl From<crate::storage::StorageError> for ArchiveError {
    fn from(e: crate::storage::StorageError) -> ArchiveError {
        ArchiveError::Storage(Box::new(e))
    }
}
