//! Storage: one way to read and write local paths and object-storage URLs (`s3://`,
//! `gs://`, `az://`, `file://`), used by every reader and writer.
//!
//! This room owns: parsing what the user typed into a [`Location`] (refusing
//! credentials in URLs); the clients for S3, GCS and Azure built on `object_store`
//! from the environment's credential chains ([`Settings`]); streaming reads with
//! bounded memory that resume a broken connection with a ranged GET (`read.rs`);
//! all-or-nothing writes (multipart uploads with bounded memory, aborted on failure;
//! temp + fsync + rename for local files) (`write.rs`); conditional puts for small
//! manifests (create-if-absent, then if-match on the ETag); and errors that name the
//! location and say what to check ([`StorageError`]).
//!
//! The interface is synchronous, for pitr's synchronous readers; the object_store
//! clients are async and run on the room's own runtime (`runtime.rs`). Its calls block
//! the calling thread, so async code calls them from `spawn_blocking`, never from a
//! task. It knows nothing of oplogs, dumps or manifests' contents: it moves bytes.
//! docs/object-storage.md says what was measured and tested.
//!
//! Where the behaviour comes from: the reference notes on PBM and wal-g
//! (`shared/reference/object-storage.md`), and the S3 API documentation for ranged
//! GETs, multipart uploads and conditional writes (`If-None-Match: *`, `If-Match`,
//! 412 Precondition Failed).

mod error;
mod local;
mod location;
mod read;
mod runtime;
mod settings;
mod write;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

pub use error::{Op, StorageError};
pub use local::{did_you_mean, free_bytes, free_space, not_found_hint, size_on_disk};
pub use location::{mask_url, Location, Scheme};
pub use read::ObjectReader;
pub use settings::{Settings, Tuning};
pub use write::{parent_dir, StorageWriter, Written, MAX_PARTS};

use settings::Clients;

/// The key under a prefix that [`Storage::probe_write`] starts an upload to (and
/// aborts): it never becomes an object.
pub const WRITE_PROBE: &str = ".pitr-write-probe";

/// What identifies one version of an object, for conditional updates: its ETag (and,
/// where the store keeps versions, the version id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Version {
    pub etag: Option<String>,
    pub version: Option<String>,
}

impl Version {
    pub(crate) fn etag(etag: String) -> Version {
        Version {
            etag: Some(etag),
            version: None,
        }
    }

    fn from_put(r: object_store::PutResult) -> Version {
        Version {
            etag: r.e_tag,
            version: r.version,
        }
    }
}

/// What a listing or a HEAD says about an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    pub location: Location,
    pub size: u64,
    pub last_modified: Option<chrono::DateTime<chrono::Utc>>,
    pub etag: Option<String>,
}

/// What a location names ([`Storage::stat`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// One object (or file).
    Object(ObjectInfo),
    /// A prefix (or directory) and every object under it, sorted by key.
    Prefix(Vec<ObjectInfo>),
    /// Neither.
    Nothing,
}

/// An open read: a local file or an object's stream. `Send`, so a reader thread can
/// own it.
pub enum StorageReader {
    Local { file: File, size: u64 },
    Object(ObjectReader),
}

impl StorageReader {
    /// The whole length, known when the read was opened.
    pub fn size(&self) -> u64 {
        match self {
            StorageReader::Local { size, .. } => *size,
            StorageReader::Object(r) => r.size(),
        }
    }

    /// How many times a broken connection was resumed (0 for local files).
    pub fn resumes(&self) -> u32 {
        match self {
            StorageReader::Local { .. } => 0,
            StorageReader::Object(r) => r.resumes(),
        }
    }
}

impl std::fmt::Debug for StorageReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageReader::Local { size, .. } => write!(f, "StorageReader::Local({size} bytes)"),
            StorageReader::Object(r) => r.fmt(f),
        }
    }
}

impl Read for StorageReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            StorageReader::Local { file, .. } => file.read(buf),
            StorageReader::Object(r) => r.read(buf),
        }
    }
}

/// Everything an object operation needs to name itself in errors.
#[derive(Clone)]
pub(crate) struct ObjectCtx {
    pub url: String,
    pub scheme: Scheme,
    pub bucket: String,
    pub settings: Arc<Settings>,
    pub tuning: Arc<Tuning>,
}

impl ObjectCtx {
    pub(crate) fn classify(&self, e: object_store::Error, op: Op) -> StorageError {
        error::classify(e, op, &self.url, self.scheme, &self.bucket, &self.settings)
    }

    pub(crate) fn other(&self, op: Op, what: &str) -> StorageError {
        StorageError::Other {
            url: self.url.clone(),
            op,
            source: error::Cause::of(&io::Error::other(what.to_string())),
        }
    }
}

/// The storage error inside an `io::Error` returned by a [`StorageReader`] or a
/// [`StorageWriter`], so a caller can show its hint.
pub fn storage_error(e: &io::Error) -> Option<&StorageError> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<StorageError>())
}

/// The storage error inside an `io::Error` (as [`storage_error`] finds it), taken
/// out whole; else the `io::Error` as it was.
pub fn into_storage_error(e: io::Error) -> Result<StorageError, io::Error> {
    if storage_error(&e).is_none() {
        return Err(e);
    }
    let kind = e.kind();
    match e.into_inner() {
        Some(inner) => inner
            .downcast::<StorageError>()
            .map(|b| *b)
            .map_err(|other| io::Error::new(kind, other)),
        None => Err(io::Error::from(kind)),
    }
}

/// An error of a local file operation, as the local helpers name it.
fn local_error(url: &str, op: Op, source: io::Error) -> StorageError {
    local::io_err(url, op)(source)
}

/// A 416 for a range of an empty object.
fn is_range_not_satisfiable(e: &object_store::Error) -> bool {
    let t = e.to_string();
    t.contains("416") || t.contains("InvalidRange") || t.contains("Range Not Satisfiable")
}

/// The largest object [`Storage::read_versioned`] reads whole (a manifest).
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024 * 1024;

/// The entry point: settings, tuning, and the clients built so far (one pair per
/// bucket, reused: connections are pooled per client).
pub struct Storage {
    settings: Arc<Settings>,
    tuning: Arc<Tuning>,
    clients: Mutex<HashMap<(Scheme, String), Clients>>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// The process's storage, configured from its environment.
pub fn global() -> &'static Storage {
    static S: OnceLock<Storage> = OnceLock::new();
    S.get_or_init(Storage::from_env)
}

impl Storage {
    pub fn from_env() -> Storage {
        Storage::new(Settings::from_env(), Tuning::from_env())
    }

    pub fn new(settings: Settings, tuning: Tuning) -> Storage {
        Storage {
            settings: Arc::new(settings),
            tuning: Arc::new(tuning),
            clients: Mutex::new(HashMap::new()),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The clients, context and object path for an object location.
    fn object(
        &self,
        loc: &Location,
    ) -> Result<Option<(Clients, ObjectCtx, ObjectPath)>, StorageError> {
        let Location::Object {
            scheme,
            bucket,
            key,
        } = loc
        else {
            return Ok(None);
        };
        let clients = {
            let mut map = self.clients.lock().unwrap_or_else(|p| p.into_inner());
            match map.get(&(*scheme, bucket.clone())) {
                Some(c) => c.clone(),
                None => {
                    let c = settings::build_clients(*scheme, bucket, &self.settings, &self.tuning)?;
                    map.insert((*scheme, bucket.clone()), c.clone());
                    c
                }
            }
        };
        let path = ObjectPath::parse(key).map_err(|e| StorageError::InvalidLocation {
            input: loc.to_string(),
            reason: e.to_string(),
        })?;
        let ctx = ObjectCtx {
            url: loc.to_string(),
            scheme: *scheme,
            bucket: bucket.clone(),
            settings: Arc::clone(&self.settings),
            tuning: Arc::clone(&self.tuning),
        };
        Ok(Some((clients, ctx, path)))
    }

    /// A 404 for an object can mean the bucket is missing: HEAD answers 404 without a
    /// body either way, and some servers say NoSuchKey. One list request tells.
    fn not_found_or_no_bucket(
        &self,
        err: StorageError,
        op: Op,
        store: &Arc<dyn ObjectStore>,
        ctx: &ObjectCtx,
        path: &ObjectPath,
    ) -> StorageError {
        if !matches!(err, StorageError::NotFound { .. }) {
            return err;
        }
        let store = Arc::clone(store);
        let prefix = path.clone();
        let probe = runtime::block_on(async move {
            use futures_util::StreamExt;
            store.list(Some(&prefix)).next().await
        });
        match probe {
            Some(Err(e)) => match ctx.classify(e, Op::List) {
                StorageError::NoSuchBucket {
                    word,
                    bucket,
                    source,
                    ..
                } => StorageError::NoSuchBucket {
                    url: ctx.url.clone(),
                    op,
                    word,
                    bucket,
                    source,
                },
                _ => err,
            },
            _ => err,
        }
    }

    /// Opens `loc` for a streaming read. Errors (missing, denied, unreachable) come
    /// here rather than at the first `read`.
    pub fn open_read(&self, loc: &Location) -> Result<StorageReader, StorageError> {
        let Some((clients, ctx, path)) = self.object(loc)? else {
            let p = loc.local_path().expect("not an object, so local");
            let url = p.display().to_string();
            let err = local::io_err(&url, Op::Read);
            let file = File::open(p).map_err(&err)?;
            let size = file.metadata().map_err(&err)?.len();
            return Ok(StorageReader::Local { file, size });
        };
        let store = Arc::clone(&clients.stream);
        let p = path.clone();
        let range = ObjectReader::first_range(&ctx);
        let first = runtime::block_on(async move {
            let opts = object_store::GetOptions {
                range,
                ..Default::default()
            };
            match store.get_opts(&p, opts).await {
                // An empty object has no byte 0 to serve (416): ask for all of it.
                Err(e) if is_range_not_satisfiable(&e) => store.get(&p).await,
                r => r,
            }
        })
        .map_err(|e| {
            self.not_found_or_no_bucket(
                ctx.classify(e, Op::Read),
                Op::Read,
                &clients.request,
                &ctx,
                &path,
            )
        })?;
        Ok(StorageReader::Object(ObjectReader::start(
            ctx,
            clients.stream,
            path,
            first,
        )))
    }

    /// Size, time and ETag of one object or file.
    pub fn head(&self, loc: &Location) -> Result<ObjectInfo, StorageError> {
        let Some((clients, ctx, path)) = self.object(loc)? else {
            return local::head(loc.local_path().expect("local"));
        };
        let store = Arc::clone(&clients.request);
        let p = path.clone();
        let meta = runtime::block_on(async move { store.head(&p).await }).map_err(|e| {
            self.not_found_or_no_bucket(
                ctx.classify(e, Op::Head),
                Op::Head,
                &clients.request,
                &ctx,
                &path,
            )
        })?;
        Ok(ObjectInfo {
            location: loc.clone(),
            size: meta.size,
            last_modified: Some(meta.last_modified),
            etag: meta.e_tag,
        })
    }

    /// Every object under the prefix `loc` (whole path segments: `s3://b/a` lists
    /// `a/x` and `a/y/z`, not `ab`), sorted by key. An empty or missing prefix lists as
    /// empty; a missing bucket is an error.
    pub fn list(&self, loc: &Location) -> Result<Vec<ObjectInfo>, StorageError> {
        let Some((clients, ctx, path)) = self.object(loc)? else {
            return local::list(loc.local_path().expect("local"));
        };
        let store = clients.request;
        let prefix = (!path.as_ref().is_empty()).then_some(path);
        let metas: Vec<object_store::ObjectMeta> =
            runtime::block_on(async move { store.list(prefix.as_ref()).try_collect().await })
                .map_err(|e| ctx.classify(e, Op::List))?;
        let Location::Object { scheme, bucket, .. } = loc else {
            unreachable!("an object location")
        };
        let mut out: Vec<ObjectInfo> = metas
            .into_iter()
            .map(|m| ObjectInfo {
                location: Location::Object {
                    scheme: *scheme,
                    bucket: bucket.clone(),
                    key: m.location.to_string(),
                },
                size: m.size,
                last_modified: Some(m.last_modified),
                etag: m.e_tag,
            })
            .collect();
        out.sort_by_key(|o| o.location.to_string());
        Ok(out)
    }

    /// A writer whose bytes appear at `loc` only when [`StorageWriter::finish`]
    /// succeeds. An existing object or file is replaced then.
    pub fn create_all_or_nothing(&self, loc: &Location) -> Result<StorageWriter, StorageError> {
        self.create_all_or_nothing_sized(loc, None)
    }

    /// The same, with the expected size, so that parts are sized for it (objects past
    /// 10,000 parts of the base size).
    pub fn create_all_or_nothing_sized(
        &self,
        loc: &Location,
        expected: Option<u64>,
    ) -> Result<StorageWriter, StorageError> {
        match self.object(loc)? {
            None => {
                let p = loc.local_path().expect("local").to_path_buf();
                let url = p.display().to_string();
                Ok(StorageWriter::local(write::LocalWriter::create(p, url)?))
            }
            Some((clients, ctx, path)) => Ok(StorageWriter::object(write::ObjectWriter::new(
                ctx,
                clients.request,
                path,
                expected,
            ))),
        }
    }

    /// Copies the local file `file` to `to`, all or nothing (a multipart upload sized
    /// for it, with bounded memory); returns its size.
    pub fn upload_file(&self, file: &std::path::Path, to: &Location) -> Result<u64, StorageError> {
        let url = file.display().to_string();
        let io = |source| local_error(&url, Op::Read, source);
        let mut f = File::open(file).map_err(io)?;
        let size = f.metadata().map_err(io)?.len();
        let mut w = self.create_all_or_nothing_sized(to, Some(size))?;
        io::copy(&mut f, &mut w).map_err(|e| {
            // A failed write carries the store's error (with its hint): take it out.
            if storage_error(&e).is_none() {
                return io(e);
            }
            match e.into_inner().map(|i| i.downcast::<StorageError>()) {
                Some(Ok(se)) => *se,
                Some(Err(other)) => io(io::Error::other(other)),
                None => io(io::Error::other("the write failed")),
            }
        })?;
        w.finish()?;
        Ok(size)
    }

    /// Writes `data` (a manifest) only if nothing is at `loc` yet. A second writer gets
    /// [`StorageError::AlreadyExists`].
    pub fn put_if_absent(&self, loc: &Location, data: &[u8]) -> Result<Version, StorageError> {
        self.put_conditional(loc, data, PutMode::Create)
    }

    /// Replaces `loc` with `data` only if it is still the version `expected` (read with
    /// [`read_versioned`](Self::read_versioned) or returned by the last put). Another
    /// writer in between gives [`StorageError::ChangedByAnotherWriter`].
    pub fn put_if_match(
        &self,
        loc: &Location,
        data: &[u8],
        expected: &Version,
    ) -> Result<Version, StorageError> {
        self.put_conditional(
            loc,
            data,
            PutMode::Update(UpdateVersion {
                e_tag: expected.etag.clone(),
                version: expected.version.clone(),
            }),
        )
    }

    fn put_conditional(
        &self,
        loc: &Location,
        data: &[u8],
        mode: PutMode,
    ) -> Result<Version, StorageError> {
        let Some((clients, ctx, path)) = self.object(loc)? else {
            let p = loc.local_path().expect("local");
            return match &mode {
                PutMode::Update(v) => local::put_if_match(
                    p,
                    data,
                    &Version {
                        etag: v.e_tag.clone(),
                        version: v.version.clone(),
                    },
                ),
                _ => local::put_if_absent(p, data),
            };
        };
        let store = clients.request;
        let payload = PutPayload::from(data.to_vec());
        let r = runtime::block_on(async move {
            store.put_opts(&path, payload, PutOptions::from(mode)).await
        })
        .map_err(|e| ctx.classify(e, Op::Write))?;
        Ok(Version::from_put(r))
    }

    /// Reads a small object whole with its version, for a read-modify-write with
    /// [`put_if_match`](Self::put_if_match). Refuses objects over [`MAX_MANIFEST_BYTES`].
    pub fn read_versioned(&self, loc: &Location) -> Result<(Vec<u8>, Version), StorageError> {
        let Some((clients, ctx, path)) = self.object(loc)? else {
            return local::read_versioned(loc.local_path().expect("local"), MAX_MANIFEST_BYTES);
        };
        let store = Arc::clone(&clients.request);
        let p = path.clone();
        let r = runtime::block_on(async move {
            let r = store.get(&p).await?;
            let meta = r.meta.clone();
            if meta.size > MAX_MANIFEST_BYTES {
                return Ok((Err(meta.size), meta));
            }
            Ok((Ok(r.bytes().await?), meta))
        })
        .map_err(|e| {
            self.not_found_or_no_bucket(
                ctx.classify(e, Op::Read),
                Op::Read,
                &clients.request,
                &ctx,
                &path,
            )
        })?;
        match r {
            (Ok(bytes), meta) => Ok((
                bytes.to_vec(),
                Version {
                    etag: meta.e_tag,
                    version: meta.version,
                },
            )),
            (Err(size), _) => Err(StorageError::TooLarge {
                url: ctx.url,
                size,
                limit: MAX_MANIFEST_BYTES,
            }),
        }
    }

    /// The first `n` bytes of `loc` (fewer if it is shorter): one ranged GET for an
    /// object, so that sniffing a format by its first bytes costs no more than that
    /// (a streaming GET dropped early would cut its connection).
    pub fn read_head(&self, loc: &Location, n: usize) -> Result<Vec<u8>, StorageError> {
        let Some((clients, ctx, path)) = self.object(loc)? else {
            let p = loc.local_path().expect("local");
            let url = p.display().to_string();
            let f = File::open(p).map_err(|source| local_error(&url, Op::Read, source))?;
            let mut out = Vec::with_capacity(n);
            f.take(n as u64)
                .read_to_end(&mut out)
                .map_err(|source| local_error(&url, Op::Read, source))?;
            return Ok(out);
        };
        if n == 0 {
            return Ok(Vec::new());
        }
        let store = Arc::clone(&clients.request);
        let p = path.clone();
        let opts = object_store::GetOptions {
            range: Some(object_store::GetRange::Bounded(0..n as u64)),
            ..Default::default()
        };
        let r = runtime::block_on(async move {
            match store.get_opts(&p, opts).await {
                Ok(r) => r.bytes().await.map(|b| b.to_vec()),
                // An empty object has no byte 0 to serve: 416 Range Not Satisfiable.
                Err(object_store::Error::NotModified { .. }) => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        });
        match r {
            Ok(b) => Ok(b),
            Err(e) if is_range_not_satisfiable(&e) => Ok(Vec::new()),
            Err(e) => Err(self.not_found_or_no_bucket(
                ctx.classify(e, Op::Read),
                Op::Read,
                &clients.request,
                &ctx,
                &path,
            )),
        }
    }

    /// What `loc` names: a prefix with objects under it (a "directory", listed: the
    /// listing is returned, since callers walk it), else one object (HEAD), else
    /// nothing. The listing comes first because stores differ on a HEAD of a
    /// "directory" name: S3 answers 404, s3s-fs and some S3-compatible stores an
    /// error. A local path is a directory, a file or nothing.
    pub fn stat(&self, loc: &Location) -> Result<Found, StorageError> {
        if let Some(p) = loc.local_path() {
            if p.is_dir() {
                return Ok(Found::Prefix(self.list(loc)?));
            }
            return Ok(match self.head_opt(loc)? {
                Some(i) => Found::Object(i),
                None => Found::Nothing,
            });
        }
        let listed = self.list(loc)?;
        if !listed.is_empty() {
            return Ok(Found::Prefix(listed));
        }
        Ok(match self.head_opt(loc)? {
            Some(i) => Found::Object(i),
            None => Found::Nothing,
        })
    }

    /// [`head`](Self::head), with "not there" as `None` (a missing bucket stays an
    /// error: it is a mistake in the location, not an absent object).
    pub fn head_opt(&self, loc: &Location) -> Result<Option<ObjectInfo>, StorageError> {
        match self.head(loc) {
            Ok(i) => Ok(Some(i)),
            Err(StorageError::NotFound { .. }) => Ok(None),
            // A local directory is not an object.
            Err(StorageError::Io { source, .. })
                if loc.is_local() && source.kind() == io::ErrorKind::IsADirectory =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Moves `from` to `to` (a rename for local files; a server-side copy, then a
    /// delete, for objects: not atomic, so callers record what they move first).
    pub fn rename(&self, from: &Location, to: &Location) -> Result<(), StorageError> {
        match (self.object(from)?, self.object(to)?) {
            (None, None) => {
                let (f, t) = (
                    from.local_path().expect("local"),
                    to.local_path().expect("local"),
                );
                let url = f.display().to_string();
                if let Some(d) = t.parent() {
                    std::fs::create_dir_all(d)
                        .map_err(|source| local_error(&url, Op::Write, source))?;
                }
                std::fs::rename(f, t).map_err(|source| local_error(&url, Op::Write, source))
            }
            (Some((clients, from_ctx, fp)), Some((_, to_ctx, tp))) => {
                // Two requests, each failure named for what it was: the copy reads
                // `from` and writes `to` (a missing source is named as such), the
                // delete removes `from` (a role allowed to write but not to delete
                // fails at the second, and must be told s3:DeleteObject).
                let store = clients.request;
                runtime::block_on(async move { store.copy(&fp, &tp).await }).map_err(
                    |e| match e {
                        object_store::Error::NotFound { .. } => from_ctx.classify(e, Op::Read),
                        e => to_ctx.classify(e, Op::Copy),
                    },
                )?;
                self.delete(from)
            }
            _ => Err(StorageError::InvalidLocation {
                input: to.to_string(),
                reason: format!("`{from}` cannot be moved to another kind of storage"),
            }),
        }
    }

    /// Whether these credentials may write under `loc`, asked before a long job that
    /// writes there only at its end (a restore's dump): a multipart upload of one
    /// small part to the probe key [`WRITE_PROBE`] under it, started and aborted
    /// (S3 and GCS: CreateMultipartUpload, UploadPart and AbortMultipartUpload, the
    /// permissions every dump's write needs; Azure: one uncommitted block, never
    /// listed, which the service discards by itself). Nothing is left. A local
    /// location is not probed here (the commands check its directory).
    pub fn probe_write(&self, loc: &Location) -> Result<(), StorageError> {
        let Some((_, ctx, _)) = self.object(loc)? else {
            return Ok(());
        };
        let Some((clients, _, path)) = self.object(&loc.join(WRITE_PROBE))? else {
            return Ok(());
        };
        let store = clients.request;
        runtime::block_on(async move {
            let mut up = store.put_multipart(&path).await?;
            let part = up.put_part(PutPayload::from_static(b"pitr")).await;
            let aborted = up.abort().await;
            part.and(aborted)
        })
        .map_err(|e| ctx.classify(e, Op::Write))
    }

    /// Deletes `loc`; deleting what is not there succeeds (as S3's DELETE does).
    pub fn delete(&self, loc: &Location) -> Result<(), StorageError> {
        let Some((clients, ctx, path)) = self.object(loc)? else {
            return local::delete(loc.local_path().expect("local"));
        };
        let store = clients.request;
        match runtime::block_on(async move { store.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(ctx.classify(e, Op::Delete)),
        }
    }
}
