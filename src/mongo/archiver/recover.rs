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
    self, gap_sidecar_path, io_err, place, read_gap_sidecar, record, seq_of_partial, ChunkFacts,
    Scanned,
};
use super::target::{Bucket, Target};
use super::ArchiveError;
use crate::oplog::oplog_archive::lock::{DirLock, ARCHIVER_LOCK, MANIFEST_LOCK};
use crate::oplog::oplog_archive::manifest::{self, seq_of_file_name, Manifest, OplogArchiveError};
use crate::oplog::oplog_archive::{is_oplog_archive, CHUNKS_DIR, MANIFEST_FILE, SET_ASIDE_DIR};
use crate::oplog::Ts;
use crate::storage::Location;

/// An archive ready for writing.
pub(super) struct Prepared {
    pub target: Target,
    pub manifest: Manifest,
    /// The last archived entry: where reading resumes.
    pub last: Option<(Ts, Vec<u8>)>,
    /// What recovery did, for the log.
    pub notes: Vec<String>,
}

/// Opens (or creates) the archive at `at` (a local directory or a bucket prefix)
/// for the replica set `replica_set`.
pub(super) fn prepare(
    at: &Location,
    source: &str,
    replica_set: Option<&str>,
) -> Result<Prepared, ArchiveError> {
    let fresh = Manifest::new(source.to_string(), replica_set.map(str::to_string));
    let same_set = |m: &Manifest| {
        if m.replica_set.as_deref() != replica_set {
            return Err(ArchiveError::OtherSet {
                dir: at.display_path(),
                recorded: m.replica_set.clone(),
                now: replica_set.map(str::to_string),
            });
        }
        Ok(())
    };
    let mut notes = Vec::new();
    let (mut target, m) = match at.local_path() {
        Some(dir) => {
            let (lock, m) = open_local(dir, fresh)?;
            same_set(&m)?;
            let target = Target::Local {
                dir: dir.to_path_buf(),
                _lock: lock,
            };
            (target, m)
        }
        None => {
            let (b, m) = Bucket::open(at, fresh, same_set, &mut notes)?;
            (Target::Bucket(Box::new(b)), m)
        }
    };
    finish_set_aside_moves(&mut target, &m, &mut notes)?;
    let m = match &target {
        Target::Local { dir, .. } => adopt_orphans(dir, m, &mut notes)?,
        Target::Bucket(b) => {
            note_leftovers(&b.at, &m, &mut notes)?;
            m
        }
    };
    let last = match m.chunks.last() {
        Some(c) => {
            let s = chunk::scan(&target.inside(&c.file))?;
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
        target,
        manifest: m,
        last,
        notes,
    })
}

/// Takes the archiver's lock on a local directory and reads (or creates) its manifest.
fn open_local(dir: &Path, fresh: Manifest) -> Result<(DirLock, Manifest), ArchiveError> {
    if dir.exists() && !is_oplog_archive(dir) && !only_our_leftovers(dir)? {
        return Err(ArchiveError::NotAnArchive {
            dir: dir.to_path_buf(),
        });
    }
    fs::create_dir_all(dir).map_err(io_err("create", dir))?;
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
    let (m, ()) = manifest::update(
        dir,
        || fresh,
        |_m| {
            let new = !dir.join(MANIFEST_FILE).exists();
            Ok::<_, ArchiveError>((new, ()))
        },
    )?;
    fs::create_dir_all(dir.join(CHUNKS_DIR)).map_err(io_err("create", dir))?;
    Ok((lock, m))
}

/// Chunk objects in a bucket that the manifest does not name: uploads of a run
/// killed before it recorded them (or of an archiver that lost a race). Never read;
/// `pitr archive prune` deletes them.
fn note_leftovers(
    at: &Location,
    m: &Manifest,
    notes: &mut Vec<String>,
) -> Result<(), ArchiveError> {
    let listed = crate::storage::global()
        .list(&at.join(CHUNKS_DIR))
        .map_err(OplogArchiveError::from)?;
    let base = at.to_string();
    for o in listed {
        let url = o.location.to_string();
        let rel = url
            .strip_prefix(&base)
            .unwrap_or(&url)
            .trim_start_matches('/');
        if !m.chunks.iter().any(|c| c.file == rel) {
            notes.push(format!(
                "`{url}` is not in the manifest (an upload whose run stopped before recording it); never read, `pitr archive prune` removes it"
            ));
        }
    }
    Ok(())
}

/// A directory without a manifest that holds nothing but what a first run leaves
/// before its manifest exists (the lock files, an empty `chunks/`): a new archive.
fn only_our_leftovers(dir: &Path) -> Result<bool, ArchiveError> {
    for e in fs::read_dir(dir).map_err(io_err("read", dir))? {
        let e = e.map_err(io_err("read", dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let ok = match name.as_str() {
            ARCHIVER_LOCK | MANIFEST_LOCK => true,
            CHUNKS_DIR => fs::read_dir(e.path())
                .map(|mut d| d.next().is_none())
                .unwrap_or(false),
            _ => false,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn finish_set_aside_moves(
    target: &mut Target,
    m: &Manifest,
    notes: &mut Vec<String>,
) -> Result<(), ArchiveError> {
    for sa in &m.set_aside {
        for c in &sa.chunks {
            if target.exists(&c.file)? {
                target.move_into(&c.file, &sa.dir)?;
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
        let s = chunk::scan(&path.display().to_string())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mongo::archiver::chunk::{gap_sidecar_path, partial_path, ChunkWriter};
    use crate::oplog::oplog_archive::{ChunkRecord, GapRecord};

    fn entry(k: u32, pad: usize) -> (Ts, Vec<u8>) {
        let ts = Ts::new(1_800_000_000 + k / 100, k % 100 + 1);
        let b = bson::to_vec(&bson::doc! {
            "op": "i", "ns": "a.b", "o": {"_id": k as i64, "pad": "x".repeat(pad)},
            "ts": bson::Timestamp::from(ts), "t": 1i64,
        })
        .unwrap();
        (ts, b)
    }

    #[test]
    fn new_archives_only_in_empty_or_leftover_directories() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let p = prepare(&Location::Local(a.clone()), "mongodb://h/", Some("rs0")).unwrap();
        assert!(p.manifest.chunks.is_empty() && p.last.is_none());
        assert!(a.join(MANIFEST_FILE).is_file() && a.join(CHUNKS_DIR).is_dir());
        // A second archiver is refused while the first holds the directory.
        assert!(matches!(
            prepare(&Location::Local(a.clone()), "mongodb://h/", Some("rs0")),
            Err(ArchiveError::Archive(OplogArchiveError::Busy { .. }))
        ));
        drop(p);
        // Another replica set's archive.
        assert!(matches!(
            prepare(&Location::Local(a.clone()), "mongodb://h/", Some("rs1")),
            Err(ArchiveError::OtherSet { .. })
        ));
        // Someone else's directory.
        let b = d.path().join("b");
        fs::create_dir_all(&b).unwrap();
        fs::write(b.join("notes.txt"), "mine").unwrap();
        assert!(matches!(
            prepare(&Location::Local(b.clone()), "mongodb://h/", None),
            Err(ArchiveError::NotAnArchive { .. })
        ));
        // What a first run leaves before its manifest exists.
        let c = d.path().join("c");
        fs::create_dir_all(c.join(CHUNKS_DIR)).unwrap();
        fs::write(c.join(ARCHIVER_LOCK), "").unwrap();
        prepare(&Location::Local(c.clone()), "mongodb://h/", None).unwrap();
    }

    /// A crash in the middle of a chunk: its complete gzip members become a chunk,
    /// with the gap recorded beside it, and reading resumes after their last entry.
    #[test]
    fn an_interrupted_chunk_keeps_its_complete_members_and_its_gap() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        drop(prepare(&Location::Local(a.clone()), "mongodb://h/", None).unwrap());
        let gap = GapRecord {
            after: Ts::new(1_700_000_000, 1),
            before: Ts::ZERO,
            detected: "now".into(),
            cause: "test".into(),
        };
        let mut w = ChunkWriter::create(&a, 1, Some(gap)).unwrap();
        let es: Vec<(Ts, Vec<u8>)> = (0..400).map(|k| entry(k, 2000)).collect();
        for (t, b) in &es {
            w.write(b, *t).unwrap();
        }
        w.flush().unwrap();
        // The process dies: the member being built never reaches the file, and a
        // torn write leaves half a member behind.
        std::mem::forget(w);
        let partial = partial_path(&a, 1);
        let on_disk = fs::metadata(&partial).unwrap().len();
        assert!(on_disk > 0);
        let mut f = fs::OpenOptions::new().append(true).open(&partial).unwrap();
        std::io::Write::write_all(&mut f, &[0x1f, 0x8b, 8, 0, 0, 0]).unwrap();
        drop(f);

        let p = prepare(&Location::Local(a.clone()), "mongodb://h/", None).unwrap();
        assert_eq!(p.manifest.chunks.len(), 1, "{:?}", p.notes);
        let c = &p.manifest.chunks[0];
        let kept = c.entries as usize;
        assert!(kept > 0 && kept < es.len(), "{kept}");
        assert_eq!(c.first, es[0].0);
        assert_eq!(c.last, es[kept - 1].0);
        assert_eq!(p.last.as_ref().unwrap().1, es[kept - 1].1);
        assert_eq!(p.manifest.gaps.len(), 1);
        assert_eq!(p.manifest.gaps[0].before, es[0].0);
        assert!(!partial.exists() && !gap_sidecar_path(&a, 1).exists());
        assert!(
            p.notes.iter().any(|n| n.contains("interrupted chunk")),
            "{:?}",
            p.notes
        );
        // The recorded chunk reads back (size and CRC checked) as those entries.
        let mut r = crate::oplog::open(a.to_str().unwrap(), Default::default()).unwrap();
        let mut n = 0;
        while let Some(e) = r.next_entry().unwrap() {
            assert_eq!(e.raw.as_bytes(), es[n].1.as_slice());
            n += 1;
        }
        assert_eq!(n, kept);
    }

    /// A crash between a chunk's rename and the manifest change: the chunk is
    /// recorded at the next start; one that does not continue the archive is moved
    /// aside, not deleted.
    #[test]
    fn a_renamed_but_unrecorded_chunk_is_recorded_or_moved_aside() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        drop(prepare(&Location::Local(a.clone()), "mongodb://h/", None).unwrap());
        let mut w = ChunkWriter::create(&a, 1, None).unwrap();
        for k in 0..10 {
            let (t, b) = entry(k, 10);
            w.write(&b, t).unwrap();
        }
        let mut target = Target::Local {
            dir: a.clone(),
            _lock: DirLock::exclusive(&a, ".test.lock", false).unwrap(),
        };
        let (rec, _) = w.finish_file(&mut target).unwrap().unwrap();
        // And a stray chunk from before (a lower, "older" history) with seq 2.
        let mut w = ChunkWriter::create(&a, 2, None).unwrap();
        let (t, b) = entry(5, 10);
        w.write(&b, t).unwrap();
        let (stray, _) = w.finish_file(&mut target).unwrap().unwrap();
        drop(target);
        let p = prepare(&Location::Local(a.clone()), "mongodb://h/", None).unwrap();
        assert_eq!(
            p.manifest.chunks,
            vec![ChunkRecord {
                written: p.manifest.chunks[0].written.clone(),
                ..rec
            }]
        );
        assert!(!a.join(&stray.file).exists());
        assert!(
            p.notes.iter().any(|n| n.contains("does not continue")),
            "{:?}",
            p.notes
        );
        assert!(a.join(SET_ASIDE_DIR).read_dir().unwrap().next().is_some());
    }
}
