//! `manifest.json`: what an oplog archive holds, and the only way to find its chunks.
//!
//! ```json
//! {
//!   "format": "pitr-oplog-archive",
//!   "version": 1,
//!   "source": "mongodb://backup:<redacted>@db1,db2/?replicaSet=rs0",
//!   "replica_set": "rs0",
//!   "created": "2026-11-21T03:00:00Z",
//!   "next_seq": 43,
//!   "pruned_through": "1795100000:12",
//!   "chunks": [{"seq": 42, "file": "chunks/00000042-1795741200.1-1795741800.17.bson.gz",
//!               "first": "1795741200:1", "last": "1795741800:17", "entries": 81234,
//!               "bson_bytes": 67108912, "bytes": 9123456, "crc64": "995dc9bbdf1939fa",
//!               "first_wall": "2026-...Z", "last_wall": "2026-...Z", "written": "2026-...Z"}],
//!   "gaps": [{"after": "1795740000:3", "before": "1795741200:1", "detected": "...", "cause": "..."}],
//!   "set_aside": [{"dir": "set-aside/1795741790.2-1795741900", "diverged_at": "1795741790:2",
//!                  "through": "1795741800:17", "detected": "...", "detail": "...",
//!                  "chunks": [...], "gaps": [...]}]
//! }
//! ```
//!
//! Positions are `"t:i"` strings. `crc64` is CRC-64/XZ (the checksum mongodump
//! archives use, see [`crate::archive::crc`]) of the chunk file's bytes as stored,
//! 16 hex digits. `bson_bytes` counts the entries' BSON, `bytes` the file.
//! A gap means: entries strictly between `after` (the last entry archived before
//! it) and `before` (the first archived after it) were lost from the server's oplog
//! before they were read; there may have been none, nobody can tell.
//! `next_seq` only grows: a sequence number is never reused, so a chunk file that a
//! crash left outside the manifest can be told apart from the manifest's chunks.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lock::DirLock;
use super::MANIFEST_FILE;
use crate::error::Hint;
use crate::oplog::Ts;
use crate::storage::{self, Location, StorageError, Version};

/// The `format` value.
pub const FORMAT: &str = "pitr-oplog-archive";
/// The manifest version this pitr writes and reads.
pub const VERSION: u32 = 1;

/// `Ts` as `"t:i"` in the manifest.
use crate::oplog::ts_json as ts_text;

pub use crate::oplog::ts_json::parse as parse_ts;

/// One complete chunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRecord {
    pub seq: u64,
    /// Relative to the archive directory.
    pub file: String,
    #[serde(deserialize_with = "ts_text::de")]
    pub first: Ts,
    #[serde(deserialize_with = "ts_text::de")]
    pub last: Ts,
    pub entries: u64,
    pub bson_bytes: u64,
    /// Size of the file.
    pub bytes: u64,
    /// CRC-64/XZ of the file, 16 lowercase hex digits.
    pub crc64: String,
    /// Wall clock of the first and last entry (RFC 3339), when they have one.
    #[serde(default)]
    pub first_wall: Option<String>,
    #[serde(default)]
    pub last_wall: Option<String>,
    /// When the chunk was completed.
    pub written: String,
}

/// Entries may have been lost between `after` and `before` (both exclusive).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapRecord {
    /// The last entry archived before the gap.
    #[serde(deserialize_with = "ts_text::de")]
    pub after: Ts,
    /// The first entry archived after it.
    #[serde(deserialize_with = "ts_text::de")]
    pub before: Ts,
    pub detected: String,
    /// What the archiver saw (the oplog's oldest entry, a lost cursor position).
    pub cause: String,
}

impl GapRecord {
    /// Whether entries strictly between `after` and `before` (the open range a
    /// reader needs) could lie in this gap.
    pub fn overlaps(&self, after: Ts, before: Ts) -> bool {
        self.after.max(after).successor() < self.before.min(before)
    }
}

/// Chunks moved out of the archive because the server's history diverged from
/// them (a rollback): never read as history again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAsideRecord {
    /// Where the files went, relative to the archive directory.
    pub dir: String,
    /// The first archived entry the server does not have (absent, or different).
    #[serde(deserialize_with = "ts_text::de")]
    pub diverged_at: Ts,
    /// The last entry those chunks hold.
    #[serde(deserialize_with = "ts_text::de")]
    pub through: Ts,
    pub detected: String,
    pub detail: String,
    pub chunks: Vec<ChunkRecord>,
    #[serde(default)]
    pub gaps: Vec<GapRecord>,
}

/// The whole manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    /// The redacted connection string of the run that created the archive (for
    /// people; never used to connect).
    pub source: String,
    pub replica_set: Option<String>,
    pub created: String,
    pub next_seq: u64,
    /// The last entry of the newest chunk `prune` deleted.
    #[serde(default, deserialize_with = "ts_text::de_opt")]
    pub pruned_through: Option<Ts>,
    pub chunks: Vec<ChunkRecord>,
    #[serde(default)]
    pub gaps: Vec<GapRecord>,
    #[serde(default)]
    pub set_aside: Vec<SetAsideRecord>,
    /// The archiver writing an archive in a bucket, where there is no `flock`: a lease
    /// it renews while it runs and clears when it stops ([`WriterRecord`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<WriterRecord>,
}

/// Who writes an archive in a bucket. A second archiver refuses to start while the
/// record is live; the writer renews `heartbeat` every [`LEASE_SECS`] / 4 with a
/// conditional put, so a manifest changed by anyone else in between fails its put
/// (412) and tells it that it lost the archive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterRecord {
    pub host: String,
    pub pid: u32,
    /// Unique per run: the suffix of the chunk objects it uploads.
    pub run: String,
    pub started: String,
    pub heartbeat: String,
}

/// How long a writer record stays live without a renewal.
pub const LEASE_SECS: i64 = 60;

impl WriterRecord {
    /// This process, starting now.
    pub fn this_process() -> WriterRecord {
        let now = now_text();
        WriterRecord {
            host: host_name(),
            pid: std::process::id(),
            run: format!("{:016x}", rand_run_id()),
            started: now.clone(),
            heartbeat: now,
        }
    }

    /// Whether the writer may still be running: renewed within the lease, and (on
    /// this host) its process is alive. A SIGKILLed archiver restarted on the same
    /// host therefore takes over at once; on another host, once the lease expired.
    pub fn is_live(&self) -> bool {
        let age = chrono::DateTime::parse_from_rfc3339(&self.heartbeat)
            .map(|h| chrono::Utc::now().timestamp() - h.timestamp())
            .unwrap_or(i64::MAX);
        if !(-LEASE_SECS..=LEASE_SECS).contains(&age) {
            return false;
        }
        if self.host == host_name() && self.pid != std::process::id() {
            return process_alive(self.pid);
        }
        true
    }

    /// For messages: `pitr archive pid 1234 on db-backup-1 (run ..., started ...,
    /// last renewed ...)`.
    pub fn describe(&self) -> String {
        format!(
            "`pitr archive` pid {} on host `{}` (run {}, started {}, lease last renewed {})",
            self.pid, self.host, self.run, self.started, self.heartbeat
        )
    }
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer and its length are ours; gethostname writes at most that.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn rand_run_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_i64(chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0));
    h.finish()
}

/// Now, RFC 3339 UTC to the second (manifest times).
pub fn now_text() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Manifest {
    pub fn new(source: String, replica_set: Option<String>) -> Manifest {
        Manifest {
            format: FORMAT.to_string(),
            version: VERSION,
            source,
            replica_set,
            created: now_text(),
            next_seq: 1,
            pruned_through: None,
            chunks: Vec::new(),
            gaps: Vec::new(),
            set_aside: Vec::new(),
            writer: None,
        }
    }

    pub fn first(&self) -> Option<Ts> {
        self.chunks.first().map(|c| c.first)
    }

    pub fn last(&self) -> Option<Ts> {
        self.chunks.last().map(|c| c.last)
    }

    pub fn entries(&self) -> u64 {
        self.chunks.iter().map(|c| c.entries).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.bytes).sum()
    }

    /// Gaps with entries possibly missing strictly between `after` and `before`.
    pub fn gaps_within(&self, after: Ts, before: Ts) -> Vec<&GapRecord> {
        self.gaps
            .iter()
            .filter(|g| g.overlaps(after, before))
            .collect()
    }

    /// Checks what a reader relies on: chunks in order without overlap, gaps
    /// between chunks. `path` names the manifest in errors.
    fn check(&self, path: &Path) -> Result<(), OplogArchiveError> {
        let bad = |detail: String| OplogArchiveError::BadManifest {
            path: path.to_path_buf(),
            detail,
        };
        if self.format != FORMAT {
            return Err(bad(format!(
                "`format` is `{}`, not `{FORMAT}`",
                self.format
            )));
        }
        if self.version != VERSION {
            return Err(OplogArchiveError::Version {
                path: path.to_path_buf(),
                version: self.version,
            });
        }
        let mut prev: Option<&ChunkRecord> = None;
        for c in &self.chunks {
            if c.first > c.last || c.entries == 0 {
                return Err(bad(format!(
                    "chunk {} (`{}`) runs from {} to {} with {} entries",
                    c.seq, c.file, c.first, c.last, c.entries
                )));
            }
            if c.seq >= self.next_seq {
                return Err(bad(format!(
                    "chunk {} is not below next_seq {}",
                    c.seq, self.next_seq
                )));
            }
            if !is_chunk_path(&c.file) {
                return Err(bad(format!("chunk {} has file `{}`", c.seq, c.file)));
            }
            if let Some(p) = prev {
                if c.first <= p.last || c.seq <= p.seq {
                    return Err(bad(format!(
                        "chunk {} (from {}) does not follow chunk {} (to {})",
                        c.seq, c.first, p.seq, p.last
                    )));
                }
            }
            prev = Some(c);
        }
        Ok(())
    }

    /// Reads `dir/manifest.json`; `None` when there is none.
    pub fn load(dir: &Path) -> Result<Option<Manifest>, OplogArchiveError> {
        let path = dir.join(MANIFEST_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(OplogArchiveError::Io {
                    what: "read",
                    path,
                    source,
                })
            }
        };
        let m: Manifest =
            serde_json::from_str(&text).map_err(|e| OplogArchiveError::BadManifest {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        m.check(&path)?;
        Ok(Some(m))
    }

    /// [`load`](Self::load) for an archive anywhere, with the version read (the
    /// ETag a conditional update of an object must match).
    pub fn load_at(dir: &Location) -> Result<Option<(Manifest, Version)>, OplogArchiveError> {
        let loc = dir.join(MANIFEST_FILE);
        let (bytes, version) = match storage::global().read_versioned(&loc) {
            Ok(x) => x,
            Err(StorageError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let path = loc.display_path();
        let m: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| OplogArchiveError::BadManifest {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        m.check(&path)?;
        Ok(Some((m, version)))
    }

    /// The manifest's text as stored.
    fn encoded(&self, path: &Path) -> Result<String, OplogArchiveError> {
        self.check(path)?;
        let mut text = serde_json::to_string_pretty(self).map_err(|e| OplogArchiveError::Io {
            what: "encode",
            path: path.to_path_buf(),
            source: io::Error::other(e),
        })?;
        text.push('\n');
        Ok(text)
    }

    /// Writes `dir/manifest.json` with a conditional put: only if there is none yet
    /// (`expected` None), or only if it is still the version `expected`. Another
    /// writer in between gives [`StorageError::AlreadyExists`] or
    /// [`StorageError::ChangedByAnotherWriter`] (inside [`OplogArchiveError::Storage`]).
    pub fn store_at(
        &self,
        dir: &Location,
        expected: Option<&Version>,
    ) -> Result<Version, OplogArchiveError> {
        let loc = dir.join(MANIFEST_FILE);
        let text = self.encoded(&loc.display_path())?;
        let s = storage::global();
        Ok(match expected {
            None => s.put_if_absent(&loc, text.as_bytes())?,
            Some(v) => s.put_if_match(&loc, text.as_bytes(), v)?,
        })
    }

    /// Replaces `dir/manifest.json` atomically: a temporary file, synced, renamed
    /// over the old one, then the directory synced. Callers hold `.manifest.lock`
    /// (see [`update`]).
    pub fn store(&self, dir: &Path) -> Result<(), OplogArchiveError> {
        let path = dir.join(MANIFEST_FILE);
        let tmp = dir.join(format!(".{MANIFEST_FILE}.{}.tmp", std::process::id()));
        let io_err = OplogArchiveError::io;
        let text = self.encoded(&path)?;
        let mut f = File::create(&tmp).map_err(io_err("create", &tmp))?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(io_err("write", &tmp))?;
        drop(f);
        fs::rename(&tmp, &path).map_err(io_err("rename", &tmp))?;
        sync_dir(dir);
        Ok(())
    }
}

/// Re-reads the manifest under `.manifest.lock`, applies `f`, and stores the result
/// when `f` returns `Ok(true)`. Every writer changes the manifest this way, so that
/// `pitr archive` and a `pitr archive prune` from cron never lose each other's
/// changes. `fresh` makes the manifest of a new archive.
pub fn update<T, E: From<OplogArchiveError>>(
    dir: &Path,
    fresh: impl FnOnce() -> Manifest,
    f: impl FnOnce(&mut Manifest) -> Result<(bool, T), E>,
) -> Result<(Manifest, T), E> {
    let _lock = DirLock::exclusive(dir, super::lock::MANIFEST_LOCK, true)?;
    let mut m = match Manifest::load(dir)? {
        Some(m) => m,
        None => fresh(),
    };
    let (changed, out) = f(&mut m)?;
    if changed {
        m.store(dir)?;
    }
    Ok((m, out))
}

/// The bucket counterpart of [`update`] (no lock there): the manifest as last read or
/// written (`known`, else read now) with its version; `check` says whether this
/// writer may change it (e.g. it still holds the writer lease); `f` changes it; the
/// result is put only if the manifest is still that version. When another writer
/// changed it in between (412), it is read again, checked again, and `f` applied
/// again: so a `pitr archive prune` and an archiver never lose each other's changes,
/// and an archiver that lost its lease finds out through `check`.
pub fn update_at<T, E: From<OplogArchiveError>>(
    dir: &Location,
    mut known: Option<(Manifest, Version)>,
    check: impl Fn(&Manifest) -> Result<(), OplogArchiveError>,
    mut f: impl FnMut(&mut Manifest) -> Result<(bool, T), E>,
) -> Result<(Manifest, Version, T), E> {
    let loc = dir.join(MANIFEST_FILE);
    for _ in 0..8 {
        let (mut m, v) = match known.take() {
            Some(x) => x,
            None => Manifest::load_at(dir)?.ok_or_else(|| OplogArchiveError::BadManifest {
                path: loc.display_path(),
                detail: "there is none (deleted while pitr was writing the archive)".into(),
            })?,
        };
        check(&m)?;
        let (changed, out) = f(&mut m)?;
        if !changed {
            return Ok((m, v, out));
        }
        match m.store_at(dir, Some(&v)) {
            Ok(nv) => return Ok((m, nv, out)),
            Err(OplogArchiveError::Storage(e))
                if matches!(
                    *e,
                    StorageError::ChangedByAnotherWriter { .. }
                        | StorageError::AlreadyExists { .. }
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(OplogArchiveError::OtherWriter {
        dir: dir.to_string(),
        writer: "the manifest changed under every one of 8 conditional puts in a row".into(),
    }
    .into())
}

/// Syncs a directory so that renames in it survive a crash (best effort).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// `chunks/<name>` with a plain file name (no `..`, no hidden file).
fn is_chunk_path(file: &str) -> bool {
    match file.split_once('/') {
        Some((super::CHUNKS_DIR, name)) => {
            !name.is_empty() && !name.starts_with('.') && !name.contains('/')
        }
        _ => false,
    }
}

/// The file name of a chunk: sequence number, first and last position.
pub fn chunk_file_name(seq: u64, first: Ts, last: Ts) -> String {
    format!(
        "{seq:08}-{}.{}-{}.{}.bson.gz",
        first.t, first.i, last.t, last.i
    )
}

/// The sequence number at the start of a chunk file name (`00000042-...`).
pub fn seq_of_file_name(name: &str) -> Option<u64> {
    let (seq, rest) = name.split_once('-')?;
    if seq.len() != 8 || !rest.ends_with(".bson.gz") || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    seq.parse().ok()
}

/// What can go wrong with an oplog archive directory itself.
#[derive(Debug, thiserror::Error)]
pub enum OplogArchiveError {
    #[error("cannot {what} `{}`", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("`{}` is not a valid oplog archive manifest: {detail}", path.display())]
    BadManifest { path: PathBuf, detail: String },

    #[error("`{}` is an oplog archive manifest of version {version}; this pitr reads version {VERSION}", path.display())]
    Version { path: PathBuf, version: u32 },

    #[error("another `pitr archive` is writing to `{}` (it holds `{}`)", dir.display(), lock.display())]
    Busy { dir: PathBuf, lock: PathBuf },

    #[error("chunk {seq} of the oplog archive `{}` ({first} to {last}) is missing: `{file}`; this command needs it", dir.display())]
    ChunkMissing {
        dir: PathBuf,
        seq: u64,
        file: String,
        first: Ts,
        last: Ts,
    },

    #[error("chunk `{}` does not match the oplog archive's manifest: {detail}", path.display())]
    ChunkMismatch { path: PathBuf, detail: String },

    /// Another `pitr archive` writes the same prefix of a bucket (found by its live
    /// lease, or by a conditional put of the manifest that failed).
    #[error("another `pitr archive` is writing to `{dir}`: {writer}")]
    OtherWriter { dir: String, writer: String },

    /// The store refused or failed (credentials, a missing bucket, a conditional put).
    #[error(transparent)]
    Storage(Box<crate::storage::StorageError>),
}

impl OplogArchiveError {
    /// The file or directory the error is about.
    pub fn path(&self) -> &Path {
        match self {
            OplogArchiveError::Io { path, .. }
            | OplogArchiveError::BadManifest { path, .. }
            | OplogArchiveError::Version { path, .. }
            | OplogArchiveError::ChunkMismatch { path, .. } => path,
            OplogArchiveError::Busy { dir, .. } | OplogArchiveError::ChunkMissing { dir, .. } => {
                dir
            }
            OplogArchiveError::OtherWriter { dir, .. } => Path::new(dir),
            OplogArchiveError::Storage(e) => Path::new(e.url()),
        }
    }
}

impl OplogArchiveError {
    /// `map_err` for an I/O failure: what was being done, and to which path.
    pub(crate) fn io(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| OplogArchiveError::Io { what, path, source }
    }
}

impl Hint for OplogArchiveError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            OplogArchiveError::Io { .. } => {
                "check the archive directory's permissions and free space".into()
            }
            OplogArchiveError::BadManifest { .. } => {
                "the manifest is damaged or was edited; restore it from a copy of the archive (pitr replaces it atomically, so a crash does not do this)".into()
            }
            OplogArchiveError::Version { .. } => "use the pitr release that wrote the archive, or a newer one".into(),
            OplogArchiveError::Busy { .. } => {
                "only one archiver may write an archive directory; stop the other one (`systemctl stop pitr-archive`), or give another --dir".into()
            }
            OplogArchiveError::ChunkMissing { .. } => {
                "a chunk was deleted behind pitr's back (or by a `pitr archive prune` running right now); restore it from a copy, or read a range that does not need it (`pitr status --archive DIR` lists every missing or damaged chunk)".into()
            }
            OplogArchiveError::OtherWriter { .. } => {
                "only one archiver may write an archive; stop the other one (the line above names its host and \
                 process), or give this one another prefix. `pitr status --archive` shows what the archive holds"
                    .into()
            }
            OplogArchiveError::Storage(e) => return e.hint(),
            OplogArchiveError::ChunkMismatch { .. } => {
                "the chunk file was damaged or replaced after it was written; restore it from a copy of the archive (`pitr status --archive DIR` checks every chunk)".into()
            }
        })
    }
}

#[cfg(test)]
impl ChunkRecord {
    /// The record of chunk `seq` holding `first`..=`last`, under its usual file name,
    /// with sizes of 1 and a zero CRC: for tests of what reads a manifest (no file is
    /// written).
    pub(crate) fn placeholder(seq: u64, first: Ts, last: Ts) -> ChunkRecord {
        ChunkRecord {
            seq,
            file: format!("chunks/{}", chunk_file_name(seq, first, last)),
            first,
            last,
            entries: 1,
            bson_bytes: 1,
            bytes: 1,
            crc64: "0".repeat(16),
            first_wall: None,
            last_wall: None,
            written: now_text(),
        }
    }
}

impl From<crate::storage::StorageError> for OplogArchiveError {
    fn from(e: crate::storage::StorageError) -> OplogArchiveError {
        OplogArchiveError::Storage(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(seq: u64, first: Ts, last: Ts) -> ChunkRecord {
        ChunkRecord {
            entries: 3,
            bson_bytes: 300,
            bytes: 100,
            ..ChunkRecord::placeholder(seq, first, last)
        }
    }

    #[test]
    fn round_trips_and_checks_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = Manifest::new("mongodb://h/".into(), Some("rs0".into()));
        m.chunks.push(chunk(1, Ts::new(10, 1), Ts::new(20, 1)));
        m.chunks.push(chunk(2, Ts::new(20, 2), Ts::new(30, 1)));
        m.next_seq = 3;
        m.gaps.push(GapRecord {
            after: Ts::new(20, 1),
            before: Ts::new(20, 2),
            detected: now_text(),
            cause: "test".into(),
        });
        m.store(dir.path()).unwrap();
        let back = Manifest::load(dir.path()).unwrap().unwrap();
        assert_eq!(back, m);
        let text = fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(text.contains("\"first\": \"10:1\""), "{text}");

        // Overlapping chunks are refused, on load and on store.
        let mut bad = m.clone();
        bad.chunks[1].first = Ts::new(20, 1);
        assert!(bad.store(dir.path()).is_err());
        let mut bad = m.clone();
        bad.chunks[1].file = "../etc/passwd".into();
        assert!(bad.store(dir.path()).is_err());
        let mut bad = m.clone();
        bad.next_seq = 2;
        assert!(bad.store(dir.path()).is_err());
        fs::write(dir.path().join(MANIFEST_FILE), "{\"format\": \"x\"}").unwrap();
        assert!(matches!(
            Manifest::load(dir.path()),
            Err(OplogArchiveError::BadManifest { .. })
        ));
        assert!(Manifest::load(&dir.path().join("nope")).unwrap().is_none());
    }

    #[test]
    fn gaps_overlap_only_where_entries_could_hide() {
        let g = GapRecord {
            after: Ts::new(100, 5),
            before: Ts::new(200, 1),
            detected: String::new(),
            cause: String::new(),
        };
        assert!(g.overlaps(Ts::new(50, 1), Ts::new(150, 0)));
        assert!(g.overlaps(Ts::new(150, 0), Ts::new(300, 0)));
        // Needed range ends right after the gap starts: nothing can lie in between.
        assert!(!g.overlaps(Ts::new(50, 1), Ts::new(100, 6)));
        assert!(g.overlaps(Ts::new(50, 1), Ts::new(100, 7)));
        // Needed range starts at the gap's end.
        assert!(!g.overlaps(Ts::new(200, 1), Ts::new(300, 0)));
        assert!(!g.overlaps(Ts::new(200, 0), Ts::new(300, 0)));
        assert!(g.overlaps(Ts::new(199, 9), Ts::new(300, 0)));
        // A "gap" between adjacent positions hides nothing.
        let none = GapRecord {
            after: Ts::new(1, 1),
            before: Ts::new(1, 2),
            ..g
        };
        assert!(!none.overlaps(Ts::ZERO, Ts::MAX));
    }

    #[test]
    fn chunk_names() {
        let n = chunk_file_name(42, Ts::new(1795741200, 1), Ts::new(1795741800, 17));
        assert_eq!(n, "00000042-1795741200.1-1795741800.17.bson.gz");
        assert_eq!(seq_of_file_name(&n), Some(42));
        assert_eq!(seq_of_file_name(".00000043.partial"), None);
        assert!(is_chunk_path(&format!("chunks/{n}")));
        assert!(!is_chunk_path("chunks/.x"));
        assert!(!is_chunk_path("chunks/a/b"));
    }
}
