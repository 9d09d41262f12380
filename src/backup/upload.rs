//! A dump given to `--out s3://...`: [`DirUpload`] brackets the objects of a
//! directory dump, whether they are streamed there by their writer (the embedded
//! replay's and rehearse's dump, `replay --cluster`'s merged dump, `dump-oplog`) or
//! uploaded from local files by [`upload`] (`replay --engine mongod`, whose
//! mongodump writes the hand-over dump in the work dir first).
//!
//! All or nothing in the bucket: an archive is one object, visible only when its
//! multipart upload completes. A directory is many objects, so it is bracketed by two
//! markers ([`crate::backup::dir::UPLOAD_IN_PROGRESS`], created if absent before the
//! first object, so two uploads to one prefix cannot mix; and
//! [`crate::backup::dir::UPLOAD_MANIFEST`], written last, listing every object with
//! its size): pitr refuses to read a prefix whose upload is in progress or was cut
//! (the marker stays), and checks a finished one against its manifest. A failed
//! upload deletes what it wrote. Each object is itself a multipart upload with bounded
//! memory, aborted on failure (see [`crate::storage`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::backup::dir::{UPLOAD_IN_PROGRESS, UPLOAD_MANIFEST};
use crate::error::Failure;
use crate::storage::{self, Found, Location, StorageError};

/// The manifest's `format`.
pub const MANIFEST_FORMAT: &str = "pitr-dump-upload/1";

#[derive(Serialize)]
struct Manifest<'a> {
    format: &'static str,
    pitr_version: &'static str,
    objects: Vec<ManifestObject<'a>>,
}

#[derive(Serialize)]
struct ManifestObject<'a> {
    key: &'a str,
    bytes: u64,
}

/// What an upload wrote.
#[derive(Clone, Debug, Default)]
pub struct Uploaded {
    pub objects: u64,
    pub bytes: u64,
}

/// Where the dump for `url` is written before its upload: `<work>/upload/<name>`.
pub fn staging(work_root: &Path, url: &Location) -> PathBuf {
    let name = url.file_name();
    work_root
        .join("upload")
        .join(if name.is_empty() { "dump" } else { &name })
}

/// pitr never overwrites a dump: `url` must hold nothing yet (no object, nothing
/// under it). And the credentials must be allowed to write there
/// ([`storage::Storage::probe_write`]): a restore with read-only credentials used to
/// run to its end, then fail at its first write. Checked before any work.
pub fn check_new(url: &Location) -> Result<(), Failure> {
    // A dump is a prefix of its own: at a bucket's root, `<out>-destroyed` would be a
    // prefix inside it, and the whole bucket the dump.
    if let Location::Object { key, .. } = url {
        if key.is_empty() {
            return Err(Failure::new(format!(
                "`--out {url}` is a bucket's root: pitr writes a dump under a prefix of its own"
            ))
            .with_hint(format!(
                "give a prefix in the bucket, e.g. `{}`",
                url.join(&format!(
                    "restored/{}",
                    chrono::Utc::now().format("%Y-%m-%d")
                ))
            )));
        }
    }
    match storage::global().stat(url)? {
        Found::Nothing => {}
        _ => {
            return Err(Failure::new(format!(
                "`--out {url}` already holds a dump or other objects: pitr never overwrites one"
            ))
            .with_hint(
                "give a new prefix (e.g. with the date in it), or delete the old one first",
            ))
        }
    }
    storage::global().probe_write(url)?;
    Ok(())
}

/// Uploads the dump at `local` (an archive file, or a directory) to `url`. On an
/// error, what was written is deleted (best effort: the in-progress marker is the
/// last thing removed, so a cut cleanup still leaves the prefix refused).
pub fn upload(local: &Path, url: &Location) -> Result<Uploaded, StorageError> {
    if local.is_file() {
        let bytes = upload_file(local, url)?;
        return Ok(Uploaded { objects: 1, bytes });
    }
    let mut up = DirUpload::begin(url)?;
    up.add_tree(local, "")?;
    up.commit()
}

/// A directory dump being written to the objects under a prefix, one object at a
/// time, by [`upload`] (from local files) or by a writer streaming each object
/// ([`crate::engine::replica::dump`]): the in-progress marker first (created if
/// absent, so two dumps to one prefix cannot mix), the manifest last
/// ([`DirUpload::commit`]). Dropped before that, it deletes every object it
/// recorded, then the marker (best effort: a cut cleanup leaves the marker, and the
/// prefix refused).
pub struct DirUpload {
    url: Location,
    written: Vec<(String, u64)>,
    /// The manifest is pitr's (its put succeeded): deleted with the rest if the
    /// marker cannot be. One that was there already is someone else's, and stays.
    manifest_put: bool,
    committed: bool,
}

impl DirUpload {
    /// Creates the in-progress marker: fails when it is there already.
    pub fn begin(url: &Location) -> Result<DirUpload, StorageError> {
        storage::global().put_if_absent(
            &url.join(UPLOAD_IN_PROGRESS),
            format!(
                "pitr {} is uploading a dump here (pid {})\n",
                env!("CARGO_PKG_VERSION"),
                std::process::id()
            )
            .as_bytes(),
        )?;
        Ok(DirUpload {
            url: url.clone(),
            written: Vec::new(),
            manifest_put: false,
            committed: false,
        })
    }

    /// Where the object `key` (a path below the prefix, `/`-separated) goes.
    pub fn object(&self, key: &str) -> Location {
        self.url.join(key)
    }

    /// The object `key` is written (its upload finished): `bytes` in the manifest.
    pub fn record(&mut self, key: String, bytes: u64) {
        self.written.push((key, bytes));
    }

    /// Writes the small object `key` (a file that belongs with the dump, such as a
    /// cluster's `sharding.json`) in one put.
    pub fn put(&mut self, key: &str, bytes: &[u8]) -> Result<(), StorageError> {
        storage::global().put_if_absent(&self.object(key), bytes)?;
        self.record(key.to_string(), bytes.len() as u64);
        Ok(())
    }

    /// Uploads every file under the local directory `dir`, sorted, each to the
    /// object of its path relative to `dir` below `under` (`""`: the prefix itself).
    pub fn add_tree(&mut self, dir: &Path, under: &str) -> Result<(), StorageError> {
        let mut files = Vec::new();
        collect(dir, dir, &mut files).map_err(|source| StorageError::Io {
            url: dir.display().to_string(),
            op: storage::Op::Read,
            source,
        })?;
        files.sort();
        for rel in files {
            let key = match under {
                "" => rel.clone(),
                _ => format!("{}/{rel}", under.trim_end_matches('/')),
            };
            let bytes = upload_file(&dir.join(&rel), &self.object(&key))?;
            self.record(key, bytes);
        }
        Ok(())
    }

    /// The manifest, then the marker removed: the dump is readable from now on.
    pub fn commit(mut self) -> Result<Uploaded, StorageError> {
        let s = storage::global();
        let m = Manifest {
            format: MANIFEST_FORMAT,
            pitr_version: env!("CARGO_PKG_VERSION"),
            objects: self
                .written
                .iter()
                .map(|(key, bytes)| ManifestObject { key, bytes: *bytes })
                .collect(),
        };
        let text = serde_json::to_vec_pretty(&m).expect("a manifest encodes");
        s.put_if_absent(&self.url.join(UPLOAD_MANIFEST), &text)?;
        self.manifest_put = true;
        s.delete(&self.url.join(UPLOAD_IN_PROGRESS))?;
        self.committed = true;
        Ok(Uploaded {
            objects: self.written.len() as u64,
            bytes: self.written.iter().map(|(_, b)| b).sum(),
        })
    }
}

impl Drop for DirUpload {
    /// Deletes what was written, the marker last. At the first delete that fails
    /// (the store unreachable: each try waits out its retries) it stops, saying
    /// so: the marker left keeps every reader off the prefix.
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let s = storage::global();
        let manifest = self.manifest_put.then_some(UPLOAD_MANIFEST);
        let keys = self
            .written
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(manifest)
            .chain([UPLOAD_IN_PROGRESS]);
        for key in keys {
            if let Err(e) = s.delete(&self.url.join(key)) {
                eprintln!(
                    "note: the unfinished dump at {} could not be removed ({e}); its `{UPLOAD_IN_PROGRESS}` \
                     keeps pitr from reading it: delete the prefix once the store is reachable",
                    self.url
                );
                return;
            }
        }
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            collect(root, &p, out)?;
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

fn upload_file(file: &Path, to: &Location) -> Result<u64, StorageError> {
    storage::global().upload_file(file, to)
}
