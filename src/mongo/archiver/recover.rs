//! Opening an archive directory for writing, and putting right whatever a crash
//! left behind, before anything is read from the server:
//!
//! - a set-aside whose manifest change was made but whose files were not all moved
//!   yet: the move is finished;
//! - a complete chunk file that was renamed into place but not yet recorded (a crash
//!   between the rename and the manifest change): recorded, when it continues the
//!   archive exactly;
//! - the `.partial` chunk of an interrupted run: its complete gzip members are kept
//!   as a chunk of their own (they may hold entries the server has since dropped),
//!   the member being written when the archiver died is cut;
//! - anything else that cannot be recorded is moved to `set-aside/unreferenced-*`,
//!   never deleted.

use std::fs;
use std::path::{Path, PathBuf};

use super::chunk::{
    self, gap_sidecar_path, place, read_gap_sidecar, record, seq_of_partial, ChunkFacts, Scanned,
};
use super::ArchiveError;
use crate::oplog::oplog_archive::lock::{DirLock, ARCHIVER_LOCK};
use crate::oplog::oplog_archive::manifest::{self, seq_of_file_name, Manifest, OplogArchiveError};
use crate::oplog::oplog_archive::{is_oplog_archive, CHUNKS_DIR, MANIFEST_FILE, SET_ASIDE_DIR};
use crate::oplog::Ts;

/// An archive directory ready for writing.
pub(super) struct Prepared {
    pub lock: DirLock,
    pub manifest: Manifest,
    /// The last archived entry: where reading resumes.
    pub last: Option<(Ts, Vec<u8>)>,
    /// What recovery did, for the log.
    pub notes: Vec<String>,
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError {
    let path = path.to_path_buf();
    move |source| ArchiveError::Io { what, path, source }
}

/// Opens (or creates) the archive `dir` for the replica set `replica_set`.
pub(super) fn prepare(
    dir: &Path,
    source: &str,
    replica_set: Option<&str>,
) -> Result<Prepared, ArchiveError> {
    if dir.exists() && !is_oplog_archive(dir) {
        let mut entries = fs::read_dir(dir).map_err(io_err("read", dir))?;
        if entries.next().is_some() {
            return Err(ArchiveError::NotAnArchive {
                dir: dir.to_path_buf(),
            });
        }
    }
    fs::create_dir_all(dir.join(CHUNKS_DIR)).map_err(io_err("create", dir))?;
    // A `pitr status --archive` may hold the lock for an instant to see whether an
    // archiver runs: try a few times before calling the directory busy.
    let mut tries = 0;
    let lock = loop {
        match DirLock::exclusive(dir, ARCHIVER_LOCK, false) {
            Err(OplogArchiveError::Busy { .. }) if tries < 10 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => break other?,
        }
    };
    let fresh = || Manifest::new(source.to_string(), replica_set.map(str::to_string));
    let (mut m, ()) = manifest::update(dir, fresh, |_m| {
        let new = !dir.join(MANIFEST_FILE).exists();
        Ok::<_, ArchiveError>((new, ()))
    })?;
    if m.replica_set.as_deref() != replica_set {
        return Err(ArchiveError::OtherSet {
            dir: dir.to_path_buf(),
            recorded: m.replica_set.clone(),
            now: replica_set.map(str::to_string),
        });
    }
    let mut notes = Vec::new();
    finish_set_aside_moves(dir, &m, &mut notes)?;
    m = adopt_orphans(dir, m, &mut notes)?;
    let last = match m.chunks.last() {
        Some(c) => {
            let s = chunk::scan(&dir.join(&c.file))?;
            if s.last != Some(c.last) || s.entries != c.entries {
                return Err(ArchiveError::Inconsistent {
                    detail: format!(
                        "the last chunk `{}` holds {} entries up to {:?}, the manifest says {} up to {}",
                        c.file, s.entries, s.last, c.entries, c.last
                    ),
                });
            }
            Some((c.last, s.last_entry))
        }
        None => None,
    };
    Ok(Prepared {
        lock,
        manifest: m,
        last,
        notes,
    })
}

fn finish_set_aside_moves(
    dir: &Path,
    m: &Manifest,
    notes: &mut Vec<String>,
) -> Result<(), ArchiveError> {
    for sa in &m.set_aside {
        for c in &sa.chunks {
            let from = dir.join(&c.file);
            if from.exists() {
                let to_dir = dir.join(&sa.dir);
                fs::create_dir_all(&to_dir).map_err(io_err("create", &to_dir))?;
                let name = Path::new(&c.file)
                    .file_name()
                    .expect("chunk paths have a name");
                fs::rename(&from, to_dir.join(name)).map_err(io_err("move", &from))?;
                notes.push(format!(
                    "finished setting aside `{}` into `{}` (interrupted earlier)",
                    c.file, sa.dir
                ));
            }
        }
    }
    Ok(())
}

/// Moves a file that cannot be recorded out of `chunks/`, keeping it.
fn unreference(
    dir: &Path,
    file: &Path,
    why: &str,
    notes: &mut Vec<String>,
) -> Result<(), ArchiveError> {
    let to_dir = dir
        .join(SET_ASIDE_DIR)
        .join(format!("unreferenced-{}", chrono::Utc::now().timestamp()));
    fs::create_dir_all(&to_dir).map_err(io_err("create", &to_dir))?;
    let name = file.file_name().expect("a file name");
    let to = to_dir.join(name.to_string_lossy().trim_start_matches('.'));
    fs::rename(file, &to).map_err(io_err("move", file))?;
    notes.push(format!(
        "moved `{}` to `{}`: {why}",
        file.display(),
        to.display()
    ));
    Ok(())
}

/// Records complete chunk files and salvaged partial chunks that continue the archive.
fn adopt_orphans(
    dir: &Path,
    mut m: Manifest,
    notes: &mut Vec<String>,
) -> Result<Manifest, ArchiveError> {
    let chunks_dir = dir.join(CHUNKS_DIR);
    let mut complete: Vec<(u64, PathBuf)> = Vec::new();
    let mut partial: Vec<(u64, PathBuf)> = Vec::new();
    for e in fs::read_dir(&chunks_dir).map_err(io_err("read", &chunks_dir))? {
        let e = e.map_err(io_err("read", &chunks_dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(seq) = seq_of_partial(&name) {
            partial.push((seq, e.path()));
        } else if let Some(seq) = seq_of_file_name(&name) {
            let rel = format!("{CHUNKS_DIR}/{name}");
            if m.chunks.iter().any(|c| c.file == rel) {
                continue;
            }
            if seq < m.next_seq {
                notes.push(format!(
                    "`{rel}` is not in the manifest (left over from an interrupted `pitr archive prune`?); prune removes it"
                ));
                continue;
            }
            complete.push((seq, e.path()));
        }
    }
    complete.sort();
    partial.sort();
    for (seq, path) in complete {
        let s = chunk::scan(&path)?;
        m = adopt(
            dir,
            m,
            seq,
            &path,
            s,
            "a complete chunk the manifest did not list yet",
            notes,
        )?;
    }
    for (seq, path) in partial {
        match chunk::salvage_partial(&path)? {
            None => {
                let _ = fs::remove_file(gap_sidecar_path(dir, seq));
                notes.push(format!(
                    "removed `{}`: an interrupted chunk with no complete entries",
                    path.display()
                ))
            }
            Some(s) => {
                m = adopt(
                    dir,
                    m,
                    seq,
                    &path,
                    s,
                    "the complete part of an interrupted chunk",
                    notes,
                )?
            }
        }
    }
    Ok(m)
}

fn adopt(
    dir: &Path,
    m: Manifest,
    seq: u64,
    path: &Path,
    s: Scanned,
    what: &str,
    notes: &mut Vec<String>,
) -> Result<Manifest, ArchiveError> {
    let sidecar = gap_sidecar_path(dir, seq);
    let gap = read_gap_sidecar(dir, seq)?;
    let (Some(first), Some(last)) = (s.first, s.last) else {
        unreference(dir, path, "it holds no entries", notes)?;
        let _ = fs::remove_file(&sidecar);
        return Ok(m);
    };
    let continues = m.last().is_none_or(|l| first > l) && s.increasing && seq >= m.next_seq;
    if !continues {
        unreference(
            dir,
            path,
            &format!(
                "{what} from {first} to {last} that does not continue the archive (which ends at {})",
                m.last().map_or_else(|| "nothing".to_string(), |l| l.to_string())
            ),
            notes,
        )?;
        if sidecar.exists() {
            unreference(dir, &sidecar, "the gap record of that chunk", notes)?;
        }
        return Ok(m);
    }
    let rec = place(
        dir,
        path,
        ChunkFacts {
            seq,
            first,
            last,
            entries: s.entries,
            bson_bytes: s.bson_bytes,
            first_wall: s.first_wall,
            last_wall: chunk::wall_of(&s.last_entry),
        },
    )?;
    notes.push(format!(
        "recorded `{}` ({what}): {} entries from {first} to {last}{}",
        rec.file,
        rec.entries,
        gap.as_ref()
            .map(|g| format!(", after a gap from {} (recorded)", g.after))
            .unwrap_or_default()
    ));
    let (m, _) = manifest::update(
        dir,
        || m.clone(),
        |mm| {
            record(mm, rec, gap)?;
            Ok::<_, ArchiveError>((true, ()))
        },
    )?;
    let _ = fs::remove_file(&sidecar);
    Ok(m)
}
