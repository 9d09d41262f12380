//! All-or-nothing writes: nothing is visible at the location until [`StorageWriter::finish`]
//! returns, and a writer dropped or failed before that leaves nothing behind.
//!
//! Objects: up to one part, a single PUT (atomic by itself); beyond, a multipart upload
//! whose parts go out while the caller keeps writing, at most `parts_in_flight` at once,
//! so memory stays at (`parts_in_flight` + 1) × part size. The object appears only when
//! the upload is completed; on failure or drop the upload is aborted (S3
//! AbortMultipartUpload; Azure's uncommitted blocks expire by themselves after 7 days).
//! A bucket lifecycle rule that aborts incomplete multipart uploads cleans up after a
//! process killed outright (docs/object-storage.md).
//!
//! Part size: S3 and GCS allow 10,000 parts of at least 5 MiB (the last may be smaller).
//! With the expected size known, parts are max(base, size × 1.5 / 10,000) as PBM's
//! `ComputePartSize` does (after PBM #417: 10 MiB parts failed past 97 GB). Unknown, they
//! double every 2,000 parts (8 MiB parts to 16 GiB, then 16 MiB, ...: 10,000 parts reach
//! 484 GiB), so memory grows only for objects that large.
//!
//! Local files: a temporary file beside the target, fsync, rename, fsync of the
//! directory: what PBM's and wal-g's filesystem storages do.

use std::collections::VecDeque;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload};
use tokio::task::JoinHandle;

use super::error::{Op, StorageError};
use super::{runtime, ObjectCtx, Version};

/// The most parts S3 and GCS accept in one upload.
pub const MAX_PARTS: usize = 10_000;
/// The largest part S3 accepts.
const MAX_PART_SIZE: usize = 5 * 1024 * 1024 * 1024;
/// Parts sent before the part size doubles, when the size is not known.
const PARTS_PER_STEP: usize = 2_000;

/// What a finished write produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub size: u64,
    pub version: Version,
}

/// A `Write` whose bytes become visible at its location only at [`finish`](Self::finish).
pub struct StorageWriter {
    inner: Inner,
}

enum Inner {
    Local(LocalWriter),
    Object(Box<ObjectWriter>),
    Done,
}

impl StorageWriter {
    pub(crate) fn local(w: LocalWriter) -> StorageWriter {
        StorageWriter {
            inner: Inner::Local(w),
        }
    }

    pub(crate) fn object(w: ObjectWriter) -> StorageWriter {
        StorageWriter {
            inner: Inner::Object(Box::new(w)),
        }
    }

    /// Makes everything written visible at the location, or fails and leaves nothing.
    pub fn finish(mut self) -> Result<Written, StorageError> {
        match std::mem::replace(&mut self.inner, Inner::Done) {
            Inner::Local(w) => w.finish(),
            Inner::Object(mut w) => w.finish(),
            Inner::Done => unreachable!("finish takes the writer"),
        }
    }

    /// Gives up: nothing becomes visible (also what dropping the writer does).
    pub fn abort(mut self) {
        if let Inner::Object(mut w) = std::mem::replace(&mut self.inner, Inner::Done) {
            w.abort();
        }
    }

    /// Bytes accepted so far.
    pub fn written(&self) -> u64 {
        match &self.inner {
            Inner::Local(w) => w.written,
            Inner::Object(w) => w.written,
            Inner::Done => 0,
        }
    }
}

impl std::fmt::Debug for StorageWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = match &self.inner {
            Inner::Local(w) => w.url.as_str(),
            Inner::Object(w) => w.ctx.url.as_str(),
            Inner::Done => "(finished)",
        };
        write!(f, "StorageWriter({url}, {} bytes)", self.written())
    }
}

impl Write for StorageWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Local(w) => w.write(buf),
            Inner::Object(w) => w.write(buf).map_err(io::Error::other),
            Inner::Done => Err(io::Error::other("write after finish")),
        }
    }

    /// A no-op for objects: parts go out when full, the rest at `finish`.
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Local(w) => w.file.flush(),
            _ => Ok(()),
        }
    }
}

impl Drop for StorageWriter {
    fn drop(&mut self) {
        if let Inner::Object(w) = &mut self.inner {
            w.abort();
        }
        // A local writer's temporary file removes itself (tempfile).
    }
}

/// The part size for part number `index` (0-based).
pub(crate) fn part_size_for(base: usize, expected: Option<u64>, index: usize) -> usize {
    match expected {
        Some(size) => {
            // PBM's ComputePartSize: room for 1.5 × the expected size in 10,000 parts.
            let needed = (size as f64 * 1.5 / MAX_PARTS as f64).ceil() as usize;
            base.max(needed.next_multiple_of(1024 * 1024))
        }
        None => base.saturating_mul(1 << (index / PARTS_PER_STEP).min(16)),
    }
    .min(MAX_PART_SIZE)
}

pub(crate) struct ObjectWriter {
    ctx: ObjectCtx,
    store: Arc<dyn ObjectStore>,
    path: Path,
    expected: Option<u64>,
    buf: Vec<u8>,
    parts: usize,
    written: u64,
    upload: Option<Box<dyn MultipartUpload>>,
    in_flight: VecDeque<JoinHandle<object_store::Result<()>>>,
    /// Once an error was returned, the writer only aborts.
    failed: bool,
}

impl ObjectWriter {
    pub(crate) fn new(
        ctx: ObjectCtx,
        store: Arc<dyn ObjectStore>,
        path: Path,
        expected: Option<u64>,
    ) -> ObjectWriter {
        ObjectWriter {
            ctx,
            store,
            path,
            expected,
            buf: Vec::new(),
            parts: 0,
            written: 0,
            upload: None,
            in_flight: VecDeque::new(),
            failed: false,
        }
    }

    fn part_size(&self) -> usize {
        part_size_for(self.ctx.tuning.part_size, self.expected, self.parts)
    }

    fn write(&mut self, mut data: &[u8]) -> Result<usize, StorageError> {
        if self.failed {
            return Err(self.ctx.other(Op::Write, "an earlier part failed"));
        }
        let n = data.len();
        while !data.is_empty() {
            let part = self.part_size();
            if self.buf.capacity() < part {
                self.buf.reserve_exact(part - self.buf.len());
            }
            let take = (part - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == part {
                if let Err(e) = self.send_part() {
                    self.failed = true;
                    return Err(e);
                }
            }
        }
        self.written += n as u64;
        Ok(n)
    }

    /// Sends the buffer as the next part, first waiting for room among the parts in flight.
    fn send_part(&mut self) -> Result<(), StorageError> {
        if self.parts >= MAX_PARTS {
            return Err(StorageError::TooManyParts {
                url: self.ctx.url.clone(),
                written: self.written,
                part_size: self.part_size(),
            });
        }
        if self.upload.is_none() {
            let store = Arc::clone(&self.store);
            let path = self.path.clone();
            let up = runtime::block_on(async move { store.put_multipart(&path).await })
                .map_err(|e| self.ctx.classify(e, Op::Write))?;
            self.upload = Some(up);
        }
        while self.in_flight.len() >= self.ctx.tuning.parts_in_flight.max(1) {
            self.wait_oldest()?;
        }
        let data = std::mem::take(&mut self.buf);
        let payload = PutPayload::from(Bytes::from(data));
        let fut = self
            .upload
            .as_mut()
            .expect("started above")
            .put_part(payload);
        self.in_flight.push_back(runtime::handle().spawn(fut));
        self.parts += 1;
        Ok(())
    }

    fn wait_oldest(&mut self) -> Result<(), StorageError> {
        let Some(h) = self.in_flight.pop_front() else {
            return Ok(());
        };
        match runtime::block_on(h) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.ctx.classify(e, Op::Write)),
            Err(join) => Err(self
                .ctx
                .other(Op::Write, &format!("a part upload failed: {join}"))),
        }
    }

    fn finish(&mut self) -> Result<Written, StorageError> {
        let r = self.try_finish();
        if r.is_err() {
            self.abort();
        }
        r
    }

    fn try_finish(&mut self) -> Result<Written, StorageError> {
        if self.failed {
            return Err(self.ctx.other(Op::Write, "an earlier part failed"));
        }
        if self.upload.is_none() {
            // Everything fits in one part: one PUT, atomic by itself.
            let store = Arc::clone(&self.store);
            let path = self.path.clone();
            let payload = PutPayload::from(Bytes::from(std::mem::take(&mut self.buf)));
            let r = runtime::block_on(async move { store.put(&path, payload).await })
                .map_err(|e| self.ctx.classify(e, Op::Write))?;
            return Ok(Written {
                size: self.written,
                version: Version::from_put(r),
            });
        }
        if !self.buf.is_empty() {
            self.send_part()?;
        }
        while !self.in_flight.is_empty() {
            self.wait_oldest()?;
        }
        let mut up = self.upload.take().expect("checked above");
        let (up, r) = runtime::block_on(async move {
            let r = up.complete().await;
            (up, r)
        });
        match r {
            Ok(r) => Ok(Written {
                size: self.written,
                version: Version::from_put(r),
            }),
            Err(e) => {
                self.upload = Some(up);
                Err(self.ctx.classify(e, Op::Write))
            }
        }
    }

    /// Aborts the upload; best effort, errors ignored (nothing was made visible either
    /// way). Parts in flight are waited for first: S3 says a part still uploading during
    /// AbortMultipartUpload may be stored after it (AbortMultipartUpload, API reference),
    /// and s3s-fs does keep it.
    fn abort(&mut self) {
        self.failed = true;
        self.buf = Vec::new();
        let in_flight: Vec<_> = self.in_flight.drain(..).collect();
        let upload = self.upload.take();
        if in_flight.is_empty() && upload.is_none() {
            return;
        }
        runtime::block_on(async move {
            for h in in_flight {
                let _ = h.await;
            }
            if let Some(mut up) = upload {
                let _ = up.abort().await;
            }
        });
    }
}

pub(crate) struct LocalWriter {
    url: String,
    target: PathBuf,
    file: BufWriter<tempfile::NamedTempFile>,
    written: u64,
}

impl LocalWriter {
    pub(crate) fn create(target: PathBuf, url: String) -> Result<LocalWriter, StorageError> {
        let io_err = |source| StorageError::Io {
            url: url.clone(),
            op: Op::Write,
            source,
        };
        let dir = parent_dir(&target);
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(super::local::TEMP_SUFFIX)
            .tempfile_in(dir)
            .map_err(io_err)?;
        Ok(LocalWriter {
            url,
            target,
            file: BufWriter::with_capacity(1 << 20, tmp),
            written: 0,
        })
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn finish(self) -> Result<Written, StorageError> {
        let url = self.url.clone();
        let io_err = |source| StorageError::Io {
            url: url.clone(),
            op: Op::Write,
            source,
        };
        let tmp = self.file.into_inner().map_err(|e| io_err(e.into_error()))?;
        tmp.as_file().sync_all().map_err(io_err)?;
        let version = super::local::version_of_file(tmp.path()).map_err(io_err)?;
        tmp.persist(&self.target).map_err(|e| io_err(e.error))?;
        super::local::sync_dir(parent_dir(&self.target)).map_err(io_err)?;
        Ok(Written {
            size: self.written,
            version,
        })
    }
}

/// The directory `p` goes into: its parent, or `.` for a bare file name (whose
/// `parent()` is the empty path, which no file system call accepts).
pub fn parent_dir(p: &std::path::Path) -> &std::path::Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn part_size_grows_so_10000_parts_reach_past_480_gib() {
        let base = 8 * MIB;
        assert_eq!(part_size_for(base, None, 0), base);
        assert_eq!(part_size_for(base, None, 1999), base);
        assert_eq!(part_size_for(base, None, 2000), 2 * base);
        let total: u64 = (0..MAX_PARTS)
            .map(|i| part_size_for(base, None, i) as u64)
            .sum();
        assert!(total > 480 * 1024 * MIB as u64, "{total}");
    }

    #[test]
    fn part_size_follows_pbm_when_the_size_is_known() {
        let base = 8 * MIB;
        assert_eq!(part_size_for(base, Some(1 << 30), 0), base);
        // 200 GB: 200e9 * 1.5 / 10000 = 30 MB, rounded up to whole MiB.
        let p = part_size_for(base, Some(200_000_000_000), 0);
        assert_eq!(p, 29 * MIB);
        assert!(p as u64 * MAX_PARTS as u64 >= 200_000_000_000);
        assert_eq!(part_size_for(base, Some(u64::MAX / 2), 0), MAX_PART_SIZE);
    }
}
