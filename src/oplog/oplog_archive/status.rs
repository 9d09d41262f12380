//! What an oplog archive directory holds right now, for `pitr status --archive`:
//! the manifest, the chunk being written (if any), and whether an archiver holds
//! the directory.

use std::fs;
use std::path::{Path, PathBuf};

use super::lock::{DirLock, ARCHIVER_LOCK};
use super::manifest::{Manifest, OplogArchiveError};
use super::{CHUNKS_DIR, MANIFEST_FILE};

/// The archive as `pitr status --archive` shows it.
#[derive(Clone, Debug)]
pub struct ArchiveStatus {
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// `.partial` chunk files (being written, or left by a crash) and their sizes.
    pub partial: Vec<(PathBuf, u64)>,
    /// An archiver holds the directory.
    pub archiver_running: bool,
}

pub fn status(dir: &Path) -> Result<ArchiveStatus, OplogArchiveError> {
    let manifest = Manifest::load(dir)?.ok_or_else(|| OplogArchiveError::BadManifest {
        path: dir.join(MANIFEST_FILE),
        detail: "there is none: not an oplog archive".into(),
    })?;
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
        partial,
        archiver_running,
    })
}
