//! What a backup is: a `mongodump` directory (plain or `--gzip`) or a `mongodump
//! --archive` file (plain or gzip), read the way mongorestore reads it.
//!
//! [`open`] recognises the layout, lists the namespaces with their parsed metadata
//! and says how mongorestore will treat each one ([`NsKind`]), where the backup's
//! own oplog is, and every [`Problem`] that would make mongorestore skip a file or
//! fail. Compression is decided by each file's bytes, never by its name; names
//! still matter because mongorestore's `--gzip` only looks at `.gz` names (mongo-tools
//! `mongorestore/filepath.go` `getInfoFromFile`), so a mismatch is a problem.
//! [`Backup::for_each_document`] streams every document of every namespace with
//! constant memory.
//!
//! Files: [`dir`] (directories), [`archive`] (mongodump archives), [`metadata`]
//! (`<coll>.metadata.json`), [`error`].

pub mod archive;
pub mod dir;
pub mod error;
pub mod metadata;
pub mod snapshot;
pub mod upload;

use std::path::{Path, PathBuf};

use bson::RawDocument;
use serde::{Deserialize, Serialize};

pub use error::BackupError;
pub use metadata::Metadata;

use crate::oplog::source::{compression_at, Compression};
use crate::oplog::{self, ReadError, ReadOptions};
use crate::storage::{self, Location};

/// How the backup is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `mongodump --out DIR`: `<db>/<coll>.bson[.gz]` and `.metadata.json[.gz]`.
    Directory,
    /// `mongodump --archive=FILE`: one stream of all namespaces.
    Archive,
}

/// How mongorestore treats a namespace of the backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NsKind {
    /// A collection: restored with its documents.
    Collection,
    /// A time-series collection: restored by creating it from its metadata and
    /// inserting its buckets (`db.system.buckets.X`); pitr counts buckets.
    Timeseries,
    /// A view (metadata only): restored as a definition, no documents.
    View,
    /// Users, roles and the auth schema version (`admin.system.users`, `roles`,
    /// `version`, and the `$admin.system.*` files of single-database dumps):
    /// mongorestore merges them into the server's own; not counted.
    Auth,
    /// Legacy `system.indexes.bson`: index definitions of old dumps, not a collection.
    IndexCatalog,
    /// `local.*`: mongorestore restores them into the spare's `local` database like
    /// any collection; pitr does not verify them.
    Local,
    /// Never restored (`system.profile`).
    NotRestored,
}

impl NsKind {
    /// How the plan's tables name it.
    pub fn label(self, capped: bool) -> &'static str {
        match self {
            NsKind::Collection if capped => "capped",
            NsKind::Collection => "collection",
            NsKind::Timeseries => "time-series (buckets counted)",
            NsKind::View => "view",
            NsKind::Auth => "users/roles (merged, not counted)",
            NsKind::IndexCatalog => "index catalog (not restored)",
            NsKind::Local => "local (restored, not verified)",
            NsKind::NotRestored => "not restored",
        }
    }
}

/// One namespace of the backup.
#[derive(Clone, Debug)]
pub struct NsEntry {
    /// `db.coll` as users know it (`db.X` for a time-series collection).
    pub ns: String,
    pub kind: NsKind,
    /// The namespace whose documents the data holds: `db.system.buckets.X` for a
    /// time-series collection, else `ns`. None when there is no data.
    pub data_ns: Option<String>,
    /// Directory layout: the data file.
    pub data_file: Option<PathBuf>,
    /// Directory layout: the metadata file.
    pub metadata_file: Option<PathBuf>,
    pub metadata: Option<Metadata>,
}

impl NsEntry {
    pub fn capped(&self) -> bool {
        self.metadata.as_ref().is_some_and(Metadata::is_capped)
    }
}

/// Something in the backup that mongorestore would skip or fail on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The file (relative to the backup directory) or namespace concerned.
    pub file: String,
    pub message: String,
}

/// Versions a dump records about itself (`prelude.json` of directory dumps written
/// by mongodump 100.18+, the header of an archive).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prelude {
    pub server_version: Option<String>,
    pub tool_version: Option<String>,
}

/// A backup, as [`open`] found it.
#[derive(Clone, Debug)]
pub struct Backup {
    pub path: PathBuf,
    pub layout: Layout,
    /// Compressed: mongorestore needs `--gzip`.
    pub gzip: bool,
    pub prelude: Option<Prelude>,
    /// Sorted by `ns`.
    pub namespaces: Vec<NsEntry>,
    /// What [`crate::oplog::open`] reads the backup's own oplog from (the root
    /// `oplog.bson` of a directory), when it has one.
    pub oplog: Option<PathBuf>,
    pub problems: Vec<Problem>,
    /// Files mongorestore does not know what to do with (relative paths).
    pub ignored_files: Vec<String>,
}

/// Opens a backup: a directory, or (by content) an archive file; either may be a
/// URL (`s3://bucket/prefix`: see [`open_object`]).
pub fn open(path: &Path) -> Result<Backup, BackupError> {
    let loc = Location::of_path(path)?;
    if !loc.is_local() {
        return open_object(&loc);
    }
    if path.is_dir() {
        if let Some(s) = snapshot::in_dir(path)? {
            return Err(BackupError::Snapshot(Box::new(s)));
        }
        return dir::open(path);
    }
    if !path.exists() {
        return Err(BackupError::Missing(path.to_path_buf()));
    }
    if is_archive(path)? {
        return archive::open(path);
    }
    if let Some(s) = snapshot::in_tar(path)? {
        return Err(BackupError::Snapshot(Box::new(s)));
    }
    let head = head_of(path)?;
    Err(BackupError::NotABackup {
        path: path.to_path_buf(),
        looks_like: bson_kind(&head)
            .or_else(|| crate::stream::sniff::looks_like(&head))
            .unwrap_or("an empty file"),
    })
}

/// A backup in a bucket, read in place (nothing is downloaded): an object is an
/// archive (or not a backup, said as for a file); a prefix is a directory backup,
/// walked by listing it, each file then read object by object. The backup's paths
/// are the objects' URLs ([`Location::display_path`]); everything that reads them
/// goes through [`open_file`] or [`crate::oplog::open`], which take them back as URLs.
fn open_object(loc: &Location) -> Result<Backup, BackupError> {
    let s = storage::global();
    match s.stat(loc)? {
        storage::Found::Nothing => return Err(BackupError::Missing(loc.display_path())),
        storage::Found::Prefix(listed) => return dir::open_listed(loc, &listed),
        storage::Found::Object(_) => {}
    }
    // Enough for the first document of a BSON file (an oplog entry can be long).
    let head = s.read_head(loc, 64 << 10)?;
    if starts_as_archive(&loc.to_string(), std::io::Cursor::new(head.clone()))? {
        return archive::open(&loc.display_path());
    }
    Err(BackupError::NotABackup {
        path: loc.display_path(),
        looks_like: bson_kind(&head)
            .or_else(|| crate::stream::sniff::looks_like(&head))
            .unwrap_or("an empty file"),
    })
}

/// Opens a file of a backup for reading: a local file, or an object streamed when
/// `path` is the URL of one (see [`open_object`]).
pub(crate) fn open_file(path: &Path) -> Result<Box<dyn std::io::Read + Send>, BackupError> {
    match Location::of_path(path)? {
        Location::Local(p) => match std::fs::File::open(&p) {
            Ok(f) => Ok(Box::new(f)),
            Err(source) => Err(BackupError::Io { path: p, source }),
        },
        loc => Ok(Box::new(storage::global().open_read(&loc)?)),
    }
}

/// How a file of a backup is compressed, by its first bytes (one ranged GET for an
/// object).
pub(crate) fn compression(path: &Path) -> Result<Compression, BackupError> {
    Ok(compression_at(&Location::of_path(path)?)?)
}

/// What a plain BSON file is, from its first document: an oplog (`ts`, `op`, `ns`:
/// the usual mix-up of `--backup` and `--oplog`) or a collection's data file.
fn bson_kind(head: &[u8]) -> Option<&'static str> {
    let len = u32::from_le_bytes(head.get(..4)?.try_into().ok()?) as usize;
    let doc = bson::RawDocument::from_bytes(head.get(..len)?).ok()?;
    let has = |k: &str| doc.get(k).ok().flatten().is_some();
    Some(if has("ts") && has("op") && has("ns") {
        OPLOG_FILE
    } else {
        "a plain BSON file (one collection's data, e.g. <db>/<coll>.bson of a dump), not a whole backup"
    })
}

/// [`BackupError::NotABackup`]'s description of an oplog file.
pub const OPLOG_FILE: &str = "an oplog (BSON entries with ts, op and ns), not a backup";

/// Whether `path` holds a mongodump archive, plain or gzip (by its first bytes).
fn is_archive(path: &Path) -> Result<bool, BackupError> {
    let f = std::fs::File::open(path).map_err(|source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    starts_as_archive(&path.display().to_string(), f)
}

/// Whether `raw`, decompressed if it is gzip, starts with the archive's magic bytes.
fn starts_as_archive(
    name: &str,
    raw: impl std::io::Read + Send + 'static,
) -> Result<bool, BackupError> {
    use std::io::Read;
    let (mut r, _) = crate::oplog::source::decompressed(name, raw)?;
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Not even decompressible: certainly not an archive; say what it is below.
            Err(_) => return Ok(false),
        }
    }
    Ok(got == 4 && head == crate::archive::MAGIC)
}

/// How mongorestore treats `db.coll` (`coll` without the buckets prefix), from its
/// name and metadata: mongo-tools `common/intents/intent.go` (`IsUsers`, `IsRoles`,
/// `IsAuthVersion`, `IsSystemIndexes`), `mongorestore/filepath.go` (TOOLS-717:
/// never `system.profile`).
pub(crate) fn kind_of(db: &str, coll: &str, buckets: bool, meta: Option<&Metadata>) -> NsKind {
    if buckets || meta.is_some_and(Metadata::is_timeseries) {
        NsKind::Timeseries
    } else if coll == "system.indexes" {
        NsKind::IndexCatalog
    } else if coll == "system.profile" {
        NsKind::NotRestored
    } else if (db == "admin" && matches!(coll, "system.users" | "system.roles" | "system.version"))
        || matches!(
            coll,
            "$admin.system.users" | "$admin.system.roles" | "$admin.system.version"
        )
    {
        NsKind::Auth
    } else if db == "local" {
        NsKind::Local
    } else if meta.is_some_and(Metadata::is_view) {
        NsKind::View
    } else {
        NsKind::Collection
    }
}

fn head_of(path: &Path) -> Result<Vec<u8>, BackupError> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Enough for the first document of a BSON file (an oplog entry can be long).
    let mut head = vec![0u8; 64 << 10];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(BackupError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    head.truncate(got);
    Ok(head)
}

impl Backup {
    /// Streams every document of every namespace with data, in storage order
    /// (directories: file by file in namespace order), with its byte offset in the
    /// (decompressed) data and its 0-based number.
    pub fn for_each_document<E: From<BackupError>>(
        &self,
        f: impl FnMut(&NsEntry, &RawDocument, u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        self.for_each_document_where(&|_| true, f)
    }

    /// [`Backup::for_each_document`] of the namespaces `keep` selects (a
    /// directory's other files are not read).
    pub fn for_each_document_where<E: From<BackupError>>(
        &self,
        keep: &dyn Fn(&NsEntry) -> bool,
        mut f: impl FnMut(&NsEntry, &RawDocument, u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.layout == Layout::Archive {
            return archive::for_each_document(self, |n, doc, offset, index| {
                if keep(n) {
                    f(n, doc, offset, index)
                } else {
                    Ok(())
                }
            });
        }
        for n in self.namespaces.iter().filter(|n| keep(n)) {
            let Some(file) = &n.data_file else { continue };
            let mut r = oplog::open(&file.to_string_lossy(), ReadOptions::default())
                .map_err(|e| E::from(BackupError::Read(e)))?;
            while let Some((doc, offset, index)) =
                r.next_raw().map_err(|e| E::from(BackupError::Read(e)))?
            {
                f(n, doc, offset, index)?;
            }
        }
        Ok(())
    }

    /// The namespace entry named `ns` (its user-facing name).
    pub fn get(&self, ns: &str) -> Option<&NsEntry> {
        self.namespaces.iter().find(|n| n.ns == ns)
    }

    /// A path relative to the backup, for messages and the plan.
    pub fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.path)
            .unwrap_or(p)
            .display()
            .to_string()
    }
}

/// Names a malformed document of a data file.
pub(crate) fn malformed(name: &str, offset: u64, index: u64, detail: String) -> ReadError {
    ReadError::Malformed {
        name: name.to_string(),
        offset,
        index,
        detail,
    }
}
