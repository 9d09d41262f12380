//! The local staging directory of an archiver writing to a bucket
//! (`$TMPDIR/pitr-archive-staging-*`), where the chunk being written waits for its
//! upload.
//!
//! A run removes its own when it stops (even on SIGTERM or an error); a SIGKILL
//! cannot, and leaves one partial chunk (at most the chunk size) behind. An archiver
//! restarted in a loop after kills (the OOM killer, a supervisor) would pile them up
//! in the temp dir. So each run holds a lock (`flock`) on `.staging.lock` in its
//! directory for as long as it lives, and a starting run removes every staging
//! directory whose lock no one holds: the kernel drops a lock when its process dies,
//! so a free lock means a dead owner, whatever its pid has become since.
//!
//! The lock file is created and locked under another name, then renamed into place
//! (the lock goes with the file): a sweep never sees `.staging.lock` unlocked in the
//! directory of a run still starting. A directory without the lock file (made by a
//! pitr before this one) is left alone.

use std::fs;
use std::path::{Path, PathBuf};

use super::chunk::io_err;
use super::ArchiveError;
use crate::oplog::oplog_archive::lock::DirLock;
use crate::oplog::oplog_archive::CHUNKS_DIR;

const PREFIX: &str = "pitr-archive-staging-";
const LOCK: &str = ".staging.lock";

/// A run's staging directory, removed when dropped.
pub(super) struct Staging {
    // Dropped first: the lock is let go before the directory goes.
    _lock: DirLock,
    dir: tempfile::TempDir,
}

impl Staging {
    /// Removes the stale staging directories in `root` (each a line in `notes`), then
    /// creates this run's, locked, with its `chunks/`.
    pub fn create_in(root: &Path, notes: &mut Vec<String>) -> Result<Staging, ArchiveError> {
        sweep(root, notes);
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir_in(root)
            .map_err(io_err("create", root))?;
        let lock = DirLock::exclusive(dir.path(), ".staging.lock.new", false)?;
        fs::rename(dir.path().join(".staging.lock.new"), dir.path().join(LOCK))
            .map_err(io_err("rename", &dir.path().join(LOCK)))?;
        fs::create_dir_all(dir.path().join(CHUNKS_DIR)).map_err(io_err("create", dir.path()))?;
        Ok(Staging { _lock: lock, dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes every staging directory in `root` whose lock no one holds. Best effort:
/// a directory that cannot be read, locked or removed (another user's, one being
/// removed by another run's sweep) is left to the next run.
fn sweep(root: &Path, notes: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        // A directory itself, not a link to one, holding a lock file itself: in a
        // shared temp dir, nothing another user planted leads this sweep elsewhere.
        if !name.to_string_lossy().starts_with(PREFIX) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = e.path();
        let lock = dir.join(LOCK);
        if !fs::symlink_metadata(&lock).is_ok_and(|m| m.file_type().is_file()) {
            continue;
        }
        let Ok(Some(_held)) = DirLock::existing_if_free(&lock) else {
            continue;
        };
        let bytes = tree_bytes(&dir);
        if fs::remove_dir_all(&dir).is_ok() {
            notes.push(format!(
                "removed {}: the staging directory of an archiver that was killed ({} of a chunk never uploaded; its entries are read from the server again)",
                dir.display(),
                crate::size::human(bytes)
            ));
        }
    }
}

/// The bytes of the files under `dir`.
fn tree_bytes(dir: &Path) -> u64 {
    let mut todo: Vec<PathBuf> = vec![dir.to_path_buf()];
    let mut sum = 0;
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => todo.push(e.path()),
                Ok(m) => sum += m.len(),
                Err(_) => {}
            }
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staging_dirs(root: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(PREFIX))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_dead_runs_directory_is_removed_and_a_live_or_older_one_kept() {
        let root = tempfile::tempdir().unwrap();
        let mut notes = vec![];
        let live = Staging::create_in(root.path(), &mut notes).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert!(live.path().join(LOCK).is_file());
        assert!(live.path().join(CHUNKS_DIR).is_dir());

        // A killed run: its lock file is there, and no one holds it.
        let dead = root.path().join(format!("{PREFIX}dead"));
        fs::create_dir_all(dead.join(CHUNKS_DIR)).unwrap();
        fs::write(dead.join(LOCK), b"").unwrap();
        fs::write(dead.join(CHUNKS_DIR).join(".7.partial"), vec![1u8; 3000]).unwrap();
        // One from an older pitr (no lock file), and something else in the temp dir.
        let older = root.path().join(format!("{PREFIX}older"));
        fs::create_dir_all(&older).unwrap();
        fs::create_dir_all(root.path().join("someone-else")).unwrap();

        let second = Staging::create_in(root.path(), &mut notes).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains(&dead.display().to_string()) && notes[0].contains("2.9 KiB"),
            "{notes:?}"
        );
        assert!(!dead.exists());
        assert!(older.is_dir() && root.path().join("someone-else").is_dir());
        assert!(live.path().is_dir(), "a live run's directory is kept");
        assert!(second.path().is_dir());

        // Dropped: each run removes its own.
        let (a, b) = (live.path().to_path_buf(), second.path().to_path_buf());
        drop(live);
        drop(second);
        assert!(!a.exists() && !b.exists());
        assert_eq!(staging_dirs(root.path()), vec![format!("{PREFIX}older")]);
    }

    #[test]
    fn links_are_never_followed() {
        // A link named like a staging dir, to a directory holding a free lock file;
        // a staging dir whose lock file is a link: both left alone.
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        fs::write(elsewhere.path().join(LOCK), b"").unwrap();
        fs::write(elsewhere.path().join("precious"), b"x").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join(format!("{PREFIX}link")))
            .unwrap();
        let linked_lock = root.path().join(format!("{PREFIX}linked-lock"));
        fs::create_dir(&linked_lock).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(LOCK), linked_lock.join(LOCK)).unwrap();
        let mut notes = vec![];
        let _s = Staging::create_in(root.path(), &mut notes).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert!(elsewhere.path().join("precious").is_file());
        assert!(root.path().join(format!("{PREFIX}link")).exists() && linked_lock.is_dir());
    }

    #[test]
    fn a_run_still_starting_is_never_swept() {
        // A run between creating its directory and renaming its lock into place has
        // no `.staging.lock` yet: the sweep passes it by.
        let root = tempfile::tempdir().unwrap();
        let starting = root.path().join(format!("{PREFIX}starting"));
        fs::create_dir_all(&starting).unwrap();
        let _held = DirLock::exclusive(&starting, ".staging.lock.new", false).unwrap();
        let mut notes = vec![];
        let _s = Staging::create_in(root.path(), &mut notes).unwrap();
        assert!(notes.is_empty() && starting.is_dir());
    }
}
