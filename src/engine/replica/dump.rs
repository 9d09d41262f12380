//! Writing the replica as mongodump writes a dump, so that the real mongorestore
//! restores it as is (also with `--nsFrom/--nsTo`).
//!
//! - Directory (mongo-tools `mongodump/prepare.go` `NewIntentFromOptions`,
//!   `outputPath`): `<db>/<coll>.bson` (documents) and `<db>/<coll>.metadata.json`;
//!   a time-series collection `X` as `<db>/system.buckets.X.bson` with its metadata
//!   under `X.metadata.json`; a view as metadata only. Collection names are
//!   `url.QueryEscape`d. With `--gzip` every file is gzip content named `.gz`.
//! - Archive: [`crate::archive::ArchiveWriter`] (the prelude carries the same
//!   metadata), optionally gzipped whole.
//! - Metadata (`mongodump/metadata_dump.go` `dumpMetadata`): canonical extended JSON
//!   of `{options (omitted when empty), indexes, uuid (omitted when unknown),
//!   collectionName, type}`, in that key order.
//!
//! Documents are written in `_id` order. What is dumped: every namespace except the
//! `local` and `config` databases (mongodump skips them in a full dump), optionally
//! restricted by a predicate (the plan's `--ns`).
//!
//! Everything is written under a temporary name beside the destination ([`prepare`])
//! and renamed into place when complete ([`Pending::commit`]); a Ctrl-C or an error
//! before that leaves nothing at the destination.
//!
//! A destination in a bucket (`s3://`, `gs://`, `az://`) is written there directly,
//! each object streamed by a multipart upload as its documents are read, with no
//! copy on local disk: a directory dump as [`DirUpload`] writes one (the
//! in-progress marker first, the manifest at [`Pending::commit`]; dropped before,
//! every object written is deleted), an archive as one object whose upload is
//! completed only at [`Pending::commit`] (dropped before, it is aborted).

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::backup::upload::DirUpload;
use crate::storage::{self, Found, Location, StorageError, StorageWriter};

use bson::{Bson, Document};

use super::catalog::{uuid_hex, CollInfo, CollKind};
use super::listing::listing;
pub use super::listing::Item;
use super::{Meter, Replica, ReplicaError};
use crate::archive::{
    ArchiveWriter, CollectionMetadata, CollectionType, Header, Namespace, WriterOptions,
};

/// The dump's form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpFormat {
    Directory { gzip: bool },
    Archive { gzip: bool },
}

/// Why the dump could not be written.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error("cannot write `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the archive `{path}`: {detail}")]
    Archive { path: PathBuf, detail: String },
    #[error("`{out}` already exists; pitr never overwrites a dump")]
    Exists { out: PathBuf },
    #[error("the collection name `{name}` is too long for a dump file name (mongodump truncates and hashes it; pitr does not)")]
    NameTooLong { name: String },
    #[error("cannot move `{from}` to `{to}`: {source}")]
    Move {
        from: PathBuf,
        to: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl crate::error::Hint for DumpError {
    fn hint(&self) -> Option<String> {
        match self {
            DumpError::Exists { .. } => Some("choose another --out, or remove the old one".into()),
            DumpError::Replica(e) => e.hint(),
            DumpError::Storage(e) => e.hint(),
            DumpError::Move { .. } => Some("give --workdir on the file system of --out".into()),
            _ => Some("check the disk space and permissions of the --out directory".into()),
        }
    }
}

/// One dumped namespace.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Dumped {
    /// As users know it (`db.X` for a time-series collection).
    pub ns: String,
    pub kind: &'static str,
    pub documents: u64,
}

/// `url.QueryEscape` (Go): unreserved bytes kept, space as `+`, the rest `%XX`.
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The `<coll>.metadata.json` text.
pub fn metadata_json(coll_name: &str, kind: &str, c: &CollInfo) -> String {
    let mut d = Document::new();
    if !c.options.is_empty() {
        d.insert("options", c.options.clone());
    }
    d.insert(
        "indexes",
        Bson::Array(c.indexes.iter().cloned().map(Bson::Document).collect()),
    );
    if let Some(u) = &c.uuid {
        d.insert("uuid", uuid_hex(u));
    }
    d.insert("collectionName", coll_name);
    d.insert("type", kind);
    let mut s = String::new();
    super::extjson::write_canonical(&Bson::Document(d), &mut s);
    s
}

/// The namespaces a dump of the replica holds, as mongodump lists them, that
/// `include` keeps (it sees each [`Item`]: the user-facing `db`/`coll`, and where
/// the documents live).
pub fn select(r: &Replica, include: &dyn Fn(&Item) -> bool) -> Result<Vec<Item>, ReplicaError> {
    Ok(listing(r)?.into_iter().filter(|it| include(it)).collect())
}

/// The documents a dump of `items` writes (the total of its progress).
pub fn documents(r: &Replica, items: &[Item]) -> u64 {
    items
        .iter()
        .filter_map(|it| it.data_ns.as_deref())
        .map(|ns| r.count(ns))
        .sum()
}

/// A dump written in full under a temporary name beside its destination, not yet
/// in place: [`Pending::commit`] renames it there; dropped, it is removed. Two
/// dumps that must appear together (the state and the destroyed documents) are
/// both written before either is committed.
pub struct Pending {
    /// The temporary directory beside `out` (removed on drop).
    tmp: Option<tempfile::TempDir>,
    /// What is renamed to `out`: `tmp` itself (a directory dump) or the archive in it.
    archive: bool,
    out: PathBuf,
    pub dumped: Vec<Dumped>,
    /// A dump written to a bucket, to be made readable at commit.
    bucket: Option<InBucket>,
}

/// A dump written to a bucket and not readable yet.
enum InBucket {
    /// Every object written, the manifest not.
    Dir(DirUpload),
    /// The archive's upload, not completed.
    Archive(StorageWriter),
}

impl Pending {
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Adds the file `name` holding `bytes` to a directory dump, beside its own
    /// files (a cluster's `sharding.json`), before [`Pending::commit`].
    pub fn add_file(&mut self, name: &str, bytes: &[u8]) -> Result<(), DumpError> {
        let dir = self.dir().map(Path::to_path_buf);
        match (&mut self.bucket, dir) {
            (Some(InBucket::Dir(up)), _) => Ok(up.put(name, bytes)?),
            (None, Some(dir)) => {
                let path = dir.join(name);
                fs::write(&path, bytes).map_err(io_err(&path))
            }
            _ => Err(self.not_a_directory(name)),
        }
    }

    /// Moves the local directory `from` into a directory dump as its subdirectory
    /// `name` (the members' own dumps of a cluster), before [`Pending::commit`]:
    /// renamed into a local dump (so `from` must be on its file system); uploaded
    /// into a bucket's, then removed.
    pub fn add_tree(&mut self, from: &Path, name: &str) -> Result<(), DumpError> {
        let dir = self.dir().map(Path::to_path_buf);
        match (&mut self.bucket, dir) {
            (Some(InBucket::Dir(up)), _) => {
                up.add_tree(from, name)?;
                // A copy of what is uploaded: one left behind only costs room.
                let _ = fs::remove_dir_all(from);
                Ok(())
            }
            (None, Some(dir)) => {
                let to = dir.join(name);
                fs::rename(from, &to).map_err(|source| DumpError::Move {
                    from: from.to_path_buf(),
                    to,
                    source,
                })
            }
            _ => Err(self.not_a_directory(name)),
        }
    }

    /// A local directory dump's temporary directory.
    fn dir(&self) -> Option<&Path> {
        match (&self.tmp, self.archive) {
            (Some(t), false) => Some(t.path()),
            _ => None,
        }
    }

    fn not_a_directory(&self, name: &str) -> DumpError {
        DumpError::Archive {
            path: self.out.clone(),
            detail: format!("`{name}` cannot be added to an archive dump"),
        }
    }

    /// Renames the dump into place; refused when something appeared at `out`
    /// meanwhile (pitr never overwrites a dump).
    pub fn commit(mut self) -> Result<Vec<Dumped>, DumpError> {
        match self.bucket.take() {
            Some(InBucket::Dir(up)) => {
                up.commit()?;
                return Ok(std::mem::take(&mut self.dumped));
            }
            Some(InBucket::Archive(w)) => {
                // Completing the upload would replace what appeared meanwhile.
                check_new(&self.out, DumpFormat::Archive { gzip: false })?;
                w.finish()?;
                return Ok(std::mem::take(&mut self.dumped));
            }
            None => {}
        }
        if taken(&self.out, self.archive) {
            return Err(DumpError::Exists {
                out: self.out.clone(),
            });
        }
        let tmp = self.tmp.take().expect("a pending dump is committed once");
        if self.archive {
            persist(&tmp.path().join("archive"), &self.out)?;
        } else {
            let dir = tmp.keep();
            persist(&dir, &self.out).inspect_err(|_| {
                let _ = fs::remove_dir_all(&dir);
            })?;
        }
        Ok(std::mem::take(&mut self.dumped))
    }
}

/// Something is at `out` that a dump may not replace: anything but an empty
/// directory, which a directory dump is renamed over (rename(2) replaces an empty
/// directory; an archive is one file).
fn taken(out: &Path, archive: bool) -> bool {
    let empty_dir = !archive
        && out.symlink_metadata().is_ok_and(|m| m.is_dir())
        && fs::read_dir(out).is_ok_and(|mut d| d.next().is_none());
    out.symlink_metadata().is_ok() && !empty_dir
}

/// Refuses an existing `out` (pitr never overwrites a dump; an empty directory may
/// be named for a directory dump): checked before the work starts, and again when
/// the dump is put in place.
pub fn check_new(out: &Path, format: DumpFormat) -> Result<(), DumpError> {
    if let Some(url) = Location::in_bucket(out) {
        return match storage::global().stat(&url)? {
            Found::Nothing => Ok(()),
            _ => Err(DumpError::Exists {
                out: out.to_path_buf(),
            }),
        };
    }
    if taken(out, matches!(format, DumpFormat::Archive { .. })) {
        return Err(DumpError::Exists {
            out: out.to_path_buf(),
        });
    }
    Ok(())
}

/// Where a dump at `out` goes and its name there, for temporary names beside it
/// (`.NAME.pitr-…`): the current directory for a bare name, `dump` for a path
/// without one.
pub fn beside(out: &Path) -> (&Path, String) {
    let parent = crate::storage::parent_dir(out);
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dump".into());
    (parent, name)
}

/// Writes `items` of the replica (from [`select`]) under a temporary name beside
/// `out`, advancing `meter` by the documents written; stops on Ctrl-C (the
/// temporary name is removed).
pub fn prepare(
    r: &mut Replica,
    out: &Path,
    format: DumpFormat,
    items: &[Item],
    server_version: &str,
    meter: &Meter,
) -> Result<Pending, DumpError> {
    r.flush()?;
    prepare_flushed(r, out, format, items, server_version, meter)
}

/// [`prepare`] from a replica whose pending writes were flushed
/// ([`Replica::flush`]): it only reads, so other threads may read it meanwhile (the
/// embedded engine hashes while it writes the dump).
pub fn prepare_flushed(
    r: &Replica,
    out: &Path,
    format: DumpFormat,
    items: &[Item],
    server_version: &str,
    meter: &Meter,
) -> Result<Pending, DumpError> {
    check_new(out, format)?;
    if let Some(url) = Location::in_bucket(out) {
        return prepare_in_bucket(r, (out, &url), format, items, server_version, meter);
    }
    let (parent, name) = beside(out);
    fs::create_dir_all(parent).map_err(|source| DumpError::Io {
        path: parent.to_path_buf(),
        source,
    })?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.pitr-"))
        .tempdir_in(parent)
        .map_err(|source| DumpError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    let (dumped, archive) = match format {
        DumpFormat::Directory { gzip } => (
            write_dir(r, &mut Dest::Dir(tmp.path()), items, gzip, meter)?,
            false,
        ),
        DumpFormat::Archive { gzip } => {
            let path = tmp.path().join("archive");
            let file = fs::File::create(&path).map_err(io_err(&path))?;
            let (dumped, file) =
                write_archive(r, (file, &path), items, gzip, server_version, meter)?;
            file.sync_all().map_err(io_err(&path))?;
            (dumped, true)
        }
    };
    Ok(Pending {
        tmp: Some(tmp),
        archive,
        out: out.to_path_buf(),
        dumped,
        bucket: None,
    })
}

/// [`prepare_flushed`] to a bucket (`out` is `url`): streamed there, readable at
/// [`Pending::commit`].
fn prepare_in_bucket(
    r: &Replica,
    (out, url): (&Path, &Location),
    format: DumpFormat,
    items: &[Item],
    server_version: &str,
    meter: &Meter,
) -> Result<Pending, DumpError> {
    let (dumped, bucket) = match format {
        DumpFormat::Directory { gzip } => {
            let mut up = DirUpload::begin(url)?;
            let dumped = write_dir(r, &mut Dest::Bucket(&mut up), items, gzip, meter)?;
            (dumped, InBucket::Dir(up))
        }
        DumpFormat::Archive { gzip } => {
            let w = storage::global().create_all_or_nothing(url)?;
            let (dumped, w) = write_archive(r, (w, out), items, gzip, server_version, meter)?;
            (dumped, InBucket::Archive(w))
        }
    };
    Ok(Pending {
        tmp: None,
        archive: matches!(format, DumpFormat::Archive { .. }),
        out: out.to_path_buf(),
        dumped,
        bucket: Some(bucket),
    })
}

/// Writes the namespaces `include` keeps to `out` at once ([`prepare`], then
/// [`Pending::commit`]).
pub fn write(
    r: &mut Replica,
    out: &Path,
    format: DumpFormat,
    include: &dyn Fn(&Item) -> bool,
    server_version: &str,
) -> Result<Vec<Dumped>, DumpError> {
    let items = select(r, include)?;
    prepare(r, out, format, &items, server_version, &Meter::new())?.commit()
}

fn persist(from: &Path, to: &Path) -> Result<(), DumpError> {
    fs::rename(from, to).map_err(|source| DumpError::Io {
        path: to.to_path_buf(),
        source,
    })
}

/// Counts written documents into `meter` a batch at a time.
struct Batch<'a> {
    meter: &'a Meter,
    pending: u64,
}

impl Batch<'_> {
    fn one(&mut self) {
        self.pending += 1;
        if self.pending == 1024 {
            self.meter.add(self.pending);
            self.pending = 0;
        }
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.meter.add(self.pending);
    }
}

/// An I/O error writing `path`; one from an object's upload is that storage error
/// itself (it names the object, and has its own hint).
fn io_err(path: &Path) -> impl Fn(std::io::Error) -> DumpError + '_ {
    move |e| match storage::into_storage_error(e) {
        Ok(se) => DumpError::Storage(se),
        Err(source) => DumpError::Io {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// A writer, plain or gzip, over `w` (a file, or an object's upload).
fn buffered<W: FinishWrite + 'static>(w: W, gzip: bool) -> Box<dyn FinishWrite> {
    let w = BufWriter::with_capacity(1 << 20, w);
    if gzip {
        Box::new(flate2::write::GzEncoder::new(
            w,
            flate2::Compression::default(),
        ))
    } else {
        Box::new(w)
    }
}

/// A writer that ends with the bytes it put at its destination.
trait FinishWrite: Write {
    fn finish_write(self: Box<Self>) -> std::io::Result<u64>;
}

impl FinishWrite for fs::File {
    fn finish_write(self: Box<Self>) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

/// An object being uploaded: complete (readable) once finished.
impl FinishWrite for StorageWriter {
    fn finish_write(self: Box<Self>) -> std::io::Result<u64> {
        (*self)
            .finish()
            .map(|w| w.size)
            .map_err(std::io::Error::other)
    }
}

impl<W: FinishWrite> FinishWrite for BufWriter<W> {
    fn finish_write(self: Box<Self>) -> std::io::Result<u64> {
        let inner = (*self).into_inner().map_err(|e| e.into_error())?;
        Box::new(inner).finish_write()
    }
}

impl<W: FinishWrite> FinishWrite for flate2::write::GzEncoder<W> {
    fn finish_write(self: Box<Self>) -> std::io::Result<u64> {
        Box::new((*self).finish()?).finish_write()
    }
}

/// A writer that keeps its first error for the caller (the one it returns says
/// only that it failed).
struct Kept<W> {
    w: W,
    failed: Option<std::io::Error>,
}

impl<W: Write> Write for Kept<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.w.write(buf).map_err(|e| {
            let kind = e.kind();
            self.failed.get_or_insert(e);
            std::io::Error::new(kind, "the write failed (its error is reported)")
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// Where a directory dump's files go: a local directory, or the objects under a
/// prefix.
enum Dest<'a> {
    Dir(&'a Path),
    Bucket(&'a mut DirUpload),
}

impl Dest<'_> {
    /// How errors name the file `rel` (a `/`-separated path below the dump).
    fn shown(&self, rel: &str) -> PathBuf {
        match self {
            Dest::Dir(root) => root.join(rel),
            Dest::Bucket(up) => up.object(rel).display_path(),
        }
    }

    /// A writer of the file `rel`.
    fn create(&mut self, rel: &str, gzip: bool) -> Result<Box<dyn FinishWrite>, DumpError> {
        match self {
            Dest::Dir(root) => {
                let path = root.join(rel);
                let f = fs::File::create(&path).map_err(io_err(&path))?;
                Ok(buffered(f, gzip))
            }
            Dest::Bucket(up) => {
                let w = storage::global().create_all_or_nothing(&up.object(rel))?;
                Ok(buffered(w, gzip))
            }
        }
    }

    /// Ends the file `rel` that `w` writes.
    fn finish(&mut self, rel: &str, w: Box<dyn FinishWrite>) -> Result<(), DumpError> {
        let bytes = w.finish_write().map_err(io_err(&self.shown(rel)))?;
        if let Dest::Bucket(up) = self {
            up.record(rel.to_string(), bytes);
        }
        Ok(())
    }

    /// The documents of a collection left in the backup's file (`d`), copied as
    /// they are into the file `rel`.
    fn copy_cold(
        &mut self,
        d: &super::cold::ColdDocs,
        rel: &str,
        meter: &Meter,
    ) -> Result<(), DumpError> {
        let mut shown = super::cold::DocsShown::new(d, meter);
        match self {
            Dest::Dir(root) => d.copy_to(&root.join(rel), &mut |bytes| shown.at(bytes))?,
            Dest::Bucket(up) => {
                let at = up.object(rel);
                let w = storage::global().create_all_or_nothing_sized(&at, Some(d.bytes()))?;
                // A failed write is the upload's error, not the backup file's.
                let mut w = Kept { w, failed: None };
                let copied =
                    d.copy_to_writer(&mut w, &at.display_path(), &mut |bytes| shown.at(bytes));
                if let Some(e) = w.failed.take() {
                    return Err(io_err(&at.display_path())(e));
                }
                copied?;
                let bytes = w.w.finish()?.size;
                up.record(rel.to_string(), bytes);
            }
        }
        shown.finish(d.count);
        Ok(())
    }
}

fn write_dir(
    r: &Replica,
    dest: &mut Dest<'_>,
    list: &[Item],
    gzip: bool,
    meter: &Meter,
) -> Result<Vec<Dumped>, DumpError> {
    let gz = if gzip { ".gz" } else { "" };
    let mut out = Vec::new();
    let mut batch = Batch { meter, pending: 0 };
    for Item {
        data_ns,
        db,
        coll,
        kind,
        info: c,
    } in list
    {
        if let Dest::Dir(root) = dest {
            let dir = root.join(db);
            fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        }
        let escaped = query_escape(coll);
        if escaped.len() > 238 {
            return Err(DumpError::NameTooLong { name: coll.clone() });
        }
        let meta = format!("{db}/{escaped}.metadata.json{gz}");
        let mut m = dest.create(&meta, gzip)?;
        m.write_all(metadata_json(coll, kind, c).as_bytes())
            .map_err(io_err(&dest.shown(&meta)))?;
        dest.finish(&meta, m)?;
        let mut documents = 0;
        if let Some(ns) = data_ns {
            let data_name = if c.kind == CollKind::TimeseriesBuckets {
                format!("system.buckets.{escaped}")
            } else {
                escaped.clone()
            };
            let data = format!("{db}/{data_name}.bson{gz}");
            if let Some(d) = r.cold(ns).filter(|_| !gzip) {
                // The data file's bytes are the documents in `_id` order.
                dest.copy_cold(d, &data, meter)?;
                documents = d.count;
            } else {
                write_documents(r, ns, (dest, &data), gzip, (&mut documents, &mut batch))?;
            }
        }
        out.push(Dumped {
            ns: format!("{db}.{coll}"),
            kind,
            documents,
        });
    }
    Ok(out)
}

/// The documents of `ns` in `_id` order, written to the file `rel` of `dest`.
fn write_documents(
    r: &Replica,
    ns: &str,
    (dest, rel): (&mut Dest<'_>, &str),
    gzip: bool,
    (documents, batch): (&mut u64, &mut Batch<'_>),
) -> Result<(), DumpError> {
    let mut w = dest.create(rel, gzip)?;
    let mut failed = None;
    r.for_each_document(ns, &mut |doc| {
        *documents += 1;
        batch.one();
        if let Err(e) = w.write_all(doc) {
            failed = Some(e);
            return Err(ReplicaError::Disk(super::disk::DiskError::Stopped));
        }
        Ok(())
    })
    .map_err(|e| match failed.take() {
        Some(io) => io_err(&dest.shown(rel))(io),
        None => DumpError::from(e),
    })?;
    dest.finish(rel, w)
}

/// The archive written to `w` (shown as `path`), which is handed back unsynced
/// (a file) or unfinished (an object's upload).
fn write_archive<W: Write>(
    r: &Replica,
    (w, path): (W, &Path),
    list: &[Item],
    gzip: bool,
    server_version: &str,
    meter: &Meter,
) -> Result<(Vec<Dumped>, W), DumpError> {
    let mut batch = Batch { meter, pending: 0 };
    let aerr = |e: crate::archive::WriteError| DumpError::Archive {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let header = Header::new(
        server_version,
        format!("pitr {}", env!("CARGO_PKG_VERSION")),
        1,
    );
    let prelude: Vec<CollectionMetadata> = list
        .iter()
        .map(|it| {
            CollectionMetadata::new(
                it.db.clone(),
                it.coll.clone(),
                metadata_json(&it.coll, it.kind, &it.info),
                match it.kind {
                    "timeseries" => CollectionType::Timeseries,
                    "view" => CollectionType::View,
                    _ => CollectionType::Collection,
                },
            )
        })
        .collect();
    let mut w = ArchiveWriter::new(w, &header, &prelude, WriterOptions { gzip }).map_err(aerr)?;
    let mut out = Vec::new();
    for (it, meta) in list.iter().zip(&prelude) {
        let (db, coll, kind) = (&it.db, &it.coll, it.kind);
        let mut documents = 0;
        if let Some(ns) = &it.data_ns {
            let data = meta.data_namespace(&header);
            let mut failed = None;
            r.for_each_document(ns, &mut |doc| {
                documents += 1;
                batch.one();
                if let Err(e) = w.write_document(&data, doc) {
                    failed = Some(e);
                    return Err(ReplicaError::Disk(super::disk::DiskError::Stopped));
                }
                Ok(())
            })
            .map_err(|e| match failed.take() {
                Some(we) => aerr(we),
                None => DumpError::from(e),
            })?;
            w.end_namespace(&data).map_err(aerr)?;
        } else {
            // A namespace without data (a view) has an EOF block only when the
            // prelude gave it a data namespace; a write error is never ignored.
            let data = Namespace::new(db.clone(), coll.clone());
            if w.documents(&data).is_some() {
                w.end_namespace(&data).map_err(aerr)?;
            }
        }
        out.push(Dumped {
            ns: format!("{db}.{coll}"),
            kind,
            documents,
        });
    }
    let w = w.finish().map_err(aerr)?;
    Ok((out, w))
}
