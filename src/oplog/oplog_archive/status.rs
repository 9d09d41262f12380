//! What an oplog archive directory holds right now, for `pitr status --archive`:
//! the manifest, whether every chunk it lists is there and intact (size and CRC-64,
//! as readers check them), the chunk being written (if any), and whether an
//! archiver holds the directory.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::lock::{DirLock, ARCHIVER_LOCK};
use super::manifest::{ChunkRecord, Manifest, OplogArchiveError};
use super::{CHUNKS_DIR, MANIFEST_FILE};
use crate::oplog::Ts;
use crate::storage::{self, Location, StorageError};

/// The archive as `pitr status --archive` shows it.
#[derive(Clone, Debug)]
pub struct ArchiveStatus {
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// Chunks listed in the manifest that are missing or do not match it.
    pub damaged: Vec<ChunkDamage>,
    /// Whether the chunks' CRC-64 was checked (else only presence and size).
    pub crc_checked: bool,
    /// `.partial` chunk files (being written, or left by a crash) and their sizes.
    pub partial: Vec<(PathBuf, u64)>,
    /// An archiver holds the directory.
    pub archiver_running: bool,
}

/// A chunk the manifest lists that a reader would refuse.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChunkDamage {
    pub seq: u64,
    pub file: String,
    pub first: Ts,
    pub last: Ts,
    pub problem: ChunkProblem,
    /// In words, e.g. `its CRC-64 is ..., the manifest records ...`.
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkProblem {
    Missing,
    Unreadable,
    Size,
    Crc,
}

/// [`status`] for an archive anywhere. In a bucket: each chunk object by HEAD (size)
/// and, with `check_crc`, a streaming read of it (CRC-64); `partial` lists the chunk
/// objects the manifest does not name (uploads of a run that stopped before
/// recording them: never read, `pitr archive prune` removes them); an archiver is
/// running when the manifest's writer lease is live.
pub fn status_at(dir: &Location, check_crc: bool) -> Result<ArchiveStatus, OplogArchiveError> {
    if let Some(p) = dir.local_path() {
        return status(p, check_crc);
    }
    let load = || {
        Manifest::load_at(dir)?
            .map(|(m, _)| m)
            .ok_or_else(|| OplogArchiveError::BadManifest {
                path: dir.join(MANIFEST_FILE).display_path(),
                detail: "there is none: not an oplog archive".into(),
            })
    };
    let mut manifest = load()?;
    let check = |m: &Manifest| -> Vec<ChunkDamage> {
        m.chunks
            .iter()
            .filter_map(|c| {
                check_object(&dir.join(&c.file), c, check_crc).map(|(problem, detail)| {
                    ChunkDamage {
                        seq: c.seq,
                        file: c.file.clone(),
                        first: c.first,
                        last: c.last,
                        problem,
                        detail,
                    }
                })
            })
            .collect()
    };
    let mut damaged = check(&manifest);
    if !damaged.is_empty() {
        manifest = load()?;
        damaged.retain(|d| {
            manifest
                .chunks
                .iter()
                .any(|c| c.seq == d.seq && c.file == d.file)
        });
    }
    let base = dir.to_string();
    let mut partial = Vec::new();
    for o in storage::global().list(&dir.join(CHUNKS_DIR))? {
        let url = o.location.to_string();
        let rel = url
            .strip_prefix(&base)
            .unwrap_or(&url)
            .trim_start_matches('/');
        if !manifest.chunks.iter().any(|c| c.file == rel) {
            partial.push((PathBuf::from(url.clone()), o.size));
        }
    }
    let archiver_running = manifest.writer.as_ref().is_some_and(|w| w.is_live());
    Ok(ArchiveStatus {
        dir: dir.display_path(),
        manifest,
        damaged,
        crc_checked: check_crc,
        partial,
        archiver_running,
    })
}

fn check_object(loc: &Location, c: &ChunkRecord, crc: bool) -> Option<(ChunkProblem, String)> {
    let s = storage::global();
    let unreadable =
        |e: StorageError| Some((ChunkProblem::Unreadable, format!("it cannot be read: {e}")));
    let len = match s.head_opt(loc) {
        Ok(Some(i)) => i.size,
        Ok(None) => return Some((ChunkProblem::Missing, "the object is missing".into())),
        Err(e) => return unreadable(e),
    };
    if len != c.bytes {
        return Some((
            ChunkProblem::Size,
            format!("it holds {len} bytes, the manifest records {}", c.bytes),
        ));
    }
    if !crc {
        return None;
    }
    match s.open_read(loc) {
        Ok(mut r) => crc_problem(&mut r, c),
        Err(e) => unreadable(e),
    }
}

/// Reads `r` to its end and compares its CRC-64 with the record's.
fn crc_problem(r: &mut impl Read, c: &ChunkRecord) -> Option<(ChunkProblem, String)> {
    let Ok(expected) = u64::from_str_radix(&c.crc64, 16) else {
        return Some((
            ChunkProblem::Crc,
            format!("the manifest's crc64 `{}` is not hex", c.crc64),
        ));
    };
    let mut digest = crc64fast::Digest::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => digest.write(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Some((ChunkProblem::Unreadable, format!("it cannot be read: {e}"))),
        }
    }
    let got = digest.sum64();
    (got != expected).then(|| {
        (
            ChunkProblem::Crc,
            format!("its CRC-64 is {got:016x}, the manifest records {expected:016x}"),
        )
    })
}

/// Reads the archive's state; with `check_crc`, every chunk file is read whole to
/// check its CRC-64 (else only its presence and size).
pub fn status(dir: &Path, check_crc: bool) -> Result<ArchiveStatus, OplogArchiveError> {
    let load = || {
        Manifest::load(dir)?.ok_or_else(|| OplogArchiveError::BadManifest {
            path: dir.join(MANIFEST_FILE),
            detail: "there is none: not an oplog archive".into(),
        })
    };
    let mut manifest = load()?;
    let mut damaged = check_chunks(dir, &manifest.chunks, check_crc);
    if !damaged.is_empty() {
        // A `pitr archive prune` (or a rollback setting chunks aside) may have
        // removed chunks since the manifest was read: only chunks still listed count.
        manifest = load()?;
        damaged.retain(|d| {
            manifest
                .chunks
                .iter()
                .any(|c| c.seq == d.seq && c.file == d.file)
        });
    }
    let mut partial = Vec::new();
    if let Ok(rd) = fs::read_dir(dir.join(CHUNKS_DIR)) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".partial") {
                partial.push((e.path(), e.metadata().map(|m| m.len()).unwrap_or(0)));
            }
        }
    }
    partial.sort();
    // Taking the archiver's lock for an instant tells whether one holds it (the
    // lock file exists in every archive a run has opened).
    let archiver_running = dir.join(ARCHIVER_LOCK).exists()
        && matches!(
            DirLock::exclusive(dir, ARCHIVER_LOCK, false),
            Err(OplogArchiveError::Busy { .. })
        );
    Ok(ArchiveStatus {
        dir: dir.to_path_buf(),
        manifest,
        damaged,
        crc_checked: check_crc,
        partial,
        archiver_running,
    })
}

/// Checks each chunk's file against its record, as a reader would (see
/// [`super::read`]): there, the recorded size, and (with `crc`) the recorded CRC-64
/// of its bytes.
pub fn check_chunks(dir: &Path, chunks: &[ChunkRecord], crc: bool) -> Vec<ChunkDamage> {
    chunks
        .iter()
        .filter_map(|c| {
            check_chunk(&dir.join(&c.file), c, crc).map(|(problem, detail)| ChunkDamage {
                seq: c.seq,
                file: c.file.clone(),
                first: c.first,
                last: c.last,
                problem,
                detail,
            })
        })
        .collect()
}

fn check_chunk(path: &Path, c: &ChunkRecord, crc: bool) -> Option<(ChunkProblem, String)> {
    let unreadable =
        |e: io::Error| Some((ChunkProblem::Unreadable, format!("it cannot be read: {e}")));
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Some((ChunkProblem::Missing, "the file is missing".into()))
        }
        Err(e) => return unreadable(e),
    };
    let len = match f.metadata() {
        Ok(m) => m.len(),
        Err(e) => return unreadable(e),
    };
    if len != c.bytes {
        return Some((
            ChunkProblem::Size,
            format!("it holds {len} bytes, the manifest records {}", c.bytes),
        ));
    }
    if !crc {
        return None;
    }
    crc_problem(&mut f, c)
}
