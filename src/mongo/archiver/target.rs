//! Where the archive lives: the one seam between the archiver's logic (chunks,
//! resume, gaps, rollbacks, all in the other files) and its storage.
//!
//! - **A local directory**: the chunk being written is `DIR/chunks/.N.partial`,
//!   renamed into place when complete; the manifest is replaced atomically under
//!   `.manifest.lock`; `.archiver.lock` (flock) keeps a second archiver out.
//! - **A bucket prefix** (`s3://`, `gs://`, `az://`): the chunk being written is a
//!   local file in a staging directory (a temporary directory of this run); when
//!   complete it is uploaded (multipart, bounded memory) under a unique name
//!   (`chunks/<seq>-<first>-<last>-<run>.bson.gz`: two runs never write one name)
//!   *before* the manifest names it; `manifest.json` is written last with a
//!   conditional put (create-if-absent the first time, then If-Match on the ETag read
//!   or written). No flock there: the manifest's writer record is a lease the
//!   archiver renews ([`WriterRecord`]), a second archiver refuses a live one, and a
//!   412 on a put means someone else wrote the manifest: re-read, and if the writer
//!   is no longer this run, stop (exit 2) naming the one that is. An upload cut by a
//!   kill is never in the manifest, so never read; `pitr archive prune` removes it.
//!   A SIGKILL loses the staged chunk: the next run resumes after the manifest's last
//!   entry, reading the lost entries from the server again (or recording the gap if
//!   they are gone from it). The killed run's staging directory is removed by the
//!   next run (see [`super::staging`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::chunk::{self, io_err, ChunkFacts};
use super::staging::Staging;
use super::ArchiveError;
use crate::mongo::blocking;
use crate::oplog::oplog_archive::lock::DirLock;
use crate::oplog::oplog_archive::manifest::{
    self, chunk_file_name, now_text, ChunkRecord, Manifest, OplogArchiveError, WriterRecord,
    LEASE_SECS,
};
use crate::oplog::oplog_archive::CHUNKS_DIR;
use crate::storage::{self, Location, StorageError, Version};

/// An archive open for writing.
pub(super) enum Target {
    Local { dir: PathBuf, _lock: DirLock },
    Bucket(Box<Bucket>),
}

pub(super) struct Bucket {
    pub at: Location,
    staging: Staging,
    /// The manifest as last read or written, with its version.
    known: Option<(Manifest, Version)>,
    pub me: WriterRecord,
    renewed: Instant,
}

/// Another archiver holds (or took) the archive.
fn other_writer(at: &Location, m: &Manifest) -> OplogArchiveError {
    OplogArchiveError::OtherWriter {
        dir: at.to_string(),
        writer: match &m.writer {
            Some(w) => w.describe(),
            None => {
                "the manifest was changed by another writer, which did not say who it is".into()
            }
        },
    }
}

fn is_conflict(e: &OplogArchiveError) -> bool {
    matches!(e, OplogArchiveError::Storage(s) if matches!(**s,
        StorageError::ChangedByAnotherWriter { .. } | StorageError::AlreadyExists { .. }))
}

impl Bucket {
    /// Claims the archive at `at` for this run: creates its manifest (if absent) or
    /// takes over one whose writer is not live, both by conditional put.
    /// `accept(m)` checks an existing manifest first (the replica set).
    pub(super) fn open(
        at: &Location,
        fresh: Manifest,
        accept: impl Fn(&Manifest) -> Result<(), ArchiveError>,
        notes: &mut Vec<String>,
    ) -> Result<(Bucket, Manifest), ArchiveError> {
        let s = storage::global();
        let me = WriterRecord::this_process();
        let staging = Staging::create_in(&std::env::temp_dir(), notes)?;
        let claimed = match Manifest::load_at(at)? {
            None => {
                if !s.list(at).map_err(OplogArchiveError::from)?.is_empty() {
                    return Err(ArchiveError::NotAnArchive {
                        dir: at.display_path(),
                    });
                }
                let mut m = fresh;
                m.writer = Some(me.clone());
                m.store_at(at, None).map(|v| (m, v))
            }
            Some((m, v)) => {
                accept(&m)?;
                if let Some(w) = m.writer.as_ref().filter(|w| w.is_live()) {
                    return Err(other_writer(
                        at,
                        &Manifest {
                            writer: Some(w.clone()),
                            ..m
                        },
                    )
                    .into());
                }
                if let Some(w) = &m.writer {
                    notes.push(format!(
                        "taking over from {}, which did not stop cleanly (its process is gone or its lease expired)",
                        w.describe()
                    ));
                }
                let mut m = m;
                m.writer = Some(me.clone());
                m.store_at(at, Some(&v)).map(|v| (m, v))
            }
        };
        let (m, v) = match claimed {
            Ok(x) => x,
            Err(e) if is_conflict(&e) => {
                // Another archiver created or claimed it between our read and put.
                let now = Manifest::load_at(at)?.map(|(m, _)| m);
                return Err(match now {
                    Some(m) => other_writer(at, &m),
                    None => e,
                }
                .into());
            }
            Err(e) => return Err(e.into()),
        };
        let b = Bucket {
            at: at.clone(),
            staging,
            known: Some((m.clone(), v)),
            me,
            renewed: Instant::now(),
        };
        Ok((b, m))
    }

    /// The conditional read-modify-write of the manifest, as this run (see
    /// [`manifest::update_at`]); the writer record is renewed with every put.
    fn update<T>(
        &mut self,
        mut f: impl FnMut(&mut Manifest) -> Result<(bool, T), ArchiveError>,
    ) -> Result<(Manifest, T), ArchiveError> {
        let at = self.at.clone();
        let run = self.me.run.clone();
        let mut me = self.me.clone();
        me.heartbeat = now_text();
        let check = |m: &Manifest| {
            if m.writer.as_ref().is_some_and(|w| w.run == run) {
                Ok(())
            } else {
                Err(other_writer(&at, m))
            }
        };
        let known = self.known.take();
        let (m, v, out) = blocking(|| {
            manifest::update_at(&self.at, known, check, |m| {
                // Always put: the put renews the lease.
                let (_, out) = f(m)?;
                m.writer = Some(me.clone());
                Ok::<_, ArchiveError>((true, out))
            })
        })?;
        self.known = Some((m.clone(), v));
        self.renewed = Instant::now();
        Ok((m, out))
    }
}

impl Target {
    /// For messages: the directory or the URL.
    pub fn display(&self) -> String {
        match self {
            Target::Local { dir, .. } => dir.display().to_string(),
            Target::Bucket(b) => b.at.to_string(),
        }
    }

    /// `rel` (a chunk file, a set-aside directory) inside the archive, for messages
    /// and for readers (an oplog source spec).
    pub fn inside(&self, rel: &str) -> String {
        match self {
            Target::Local { dir, .. } => dir.join(rel).display().to_string(),
            Target::Bucket(b) => b.at.join(rel).to_string(),
        }
    }

    /// The local directory whose `chunks/` holds the chunk being written.
    pub fn staging(&self) -> &Path {
        match self {
            Target::Local { dir, .. } => dir,
            Target::Bucket(b) => b.staging.path(),
        }
    }

    /// Puts the complete, synced chunk file `src` where the manifest will name it
    /// (renamed; or uploaded, then the staged file removed). Returns its record, not
    /// yet in the manifest.
    pub fn place(&mut self, src: &Path, f: ChunkFacts) -> Result<ChunkRecord, ArchiveError> {
        let b = match self {
            Target::Local { dir, .. } => return chunk::place(dir, src, f),
            Target::Bucket(b) => b,
        };
        let (bytes, crc) = chunk::checksum(src)?;
        let name = chunk_file_name(f.seq, f.first, f.last);
        let name = format!("{}-{}.bson.gz", name.trim_end_matches(".bson.gz"), b.me.run);
        let file = format!("{CHUNKS_DIR}/{name}");
        let to = b.at.join(&file);
        let sent = blocking(|| storage::global().upload_file(src, &to))
            .map_err(OplogArchiveError::from)?;
        debug_assert_eq!(sent, bytes);
        let _ = fs::remove_file(src);
        Ok(chunk::record_of(file, bytes, crc, &f))
    }

    /// [`manifest::update`] on the archive: under the manifest lock locally, by
    /// conditional put on a bucket (`f` may then run again on a fresher manifest).
    pub fn update<T>(
        &mut self,
        fresh: impl FnOnce() -> Manifest,
        f: impl FnMut(&mut Manifest) -> Result<(bool, T), ArchiveError>,
    ) -> Result<(Manifest, T), ArchiveError> {
        match self {
            Target::Local { dir, .. } => manifest::update(dir, fresh, f),
            Target::Bucket(b) => b.update(f),
        }
    }

    /// Whether the chunk file `rel` is there.
    pub fn exists(&self, rel: &str) -> Result<bool, ArchiveError> {
        match self {
            Target::Local { dir, .. } => Ok(dir.join(rel).exists()),
            Target::Bucket(b) => Ok(blocking(|| storage::global().head_opt(&b.at.join(rel)))
                .map_err(OplogArchiveError::from)?
                .is_some()),
        }
    }

    /// Moves the chunk file `rel` into the directory `to_dir` (both relative), to set
    /// it aside after a rollback (recorded in the manifest first).
    pub fn move_into(&mut self, rel: &str, to_dir: &str) -> Result<(), ArchiveError> {
        self.move_chunk(rel, to_dir)
            .map_err(|source| ArchiveError::SetAside {
                chunk: rel.to_string(),
                source: Box::new(source),
            })
    }

    fn move_chunk(&mut self, rel: &str, to_dir: &str) -> Result<(), ArchiveError> {
        let name = Path::new(rel)
            .file_name()
            .expect("chunk paths have a name")
            .to_string_lossy()
            .into_owned();
        match self {
            Target::Local { dir, .. } => {
                let (from, to) = (dir.join(rel), dir.join(to_dir));
                fs::create_dir_all(&to).map_err(io_err("create", &to))?;
                fs::rename(&from, to.join(&name)).map_err(io_err("move", &from))?;
                manifest::sync_dir(&to);
                manifest::sync_dir(&dir.join(CHUNKS_DIR));
                Ok(())
            }
            Target::Bucket(b) => {
                let (from, to) = (b.at.join(rel), b.at.join(to_dir).join(&name));
                blocking(|| storage::global().rename(&from, &to))
                    .map_err(|e| OplogArchiveError::from(e).into())
            }
        }
    }

    /// Renews the writer lease of a bucket archive when a quarter of it has passed
    /// (called after every batch, and while waiting to retry). A no-op locally.
    pub fn renew(&mut self) -> Result<(), ArchiveError> {
        match self {
            Target::Bucket(b)
                if b.renewed.elapsed() >= Duration::from_secs(LEASE_SECS as u64 / 4) =>
            {
                b.update(|_| Ok((false, ()))).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// A clean stop: a bucket archive's writer record is cleared, so the next run (on
    /// any host) starts at once. Locally the flock goes with the process.
    pub fn release(&mut self) -> Result<(), ArchiveError> {
        let Target::Bucket(b) = self else {
            return Ok(());
        };
        let at = b.at.clone();
        let run = b.me.run.clone();
        let known = b.known.take();
        let check = |m: &Manifest| {
            if m.writer.as_ref().is_some_and(|w| w.run == run) {
                Ok(())
            } else {
                Err(other_writer(&at, m))
            }
        };
        let (m, v, ()) = blocking(|| {
            manifest::update_at(&b.at, known, check, |m| {
                m.writer = None;
                Ok::<_, ArchiveError>((true, ()))
            })
        })?;
        b.known = Some((m, v));
        Ok(())
    }
}
