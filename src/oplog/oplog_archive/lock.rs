//! Advisory locks on an archive directory (`flock`), released when dropped or when
//! the process dies (so a SIGKILLed archiver never leaves a stale lock behind).
//!
//! - [`ARCHIVER_LOCK`]: held by `pitr archive` for its whole run, so that two
//!   archivers never write the same directory.
//! - [`MANIFEST_LOCK`]: held for the few milliseconds of a manifest change
//!   ([`super::manifest::update`]), so that `pitr archive` and `pitr archive prune`
//!   can run at the same time.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

use super::manifest::OplogArchiveError;

pub const ARCHIVER_LOCK: &str = ".archiver.lock";
pub const MANIFEST_LOCK: &str = ".manifest.lock";

/// A held lock.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the exclusive lock `dir/name`; `wait` blocks until it is free, otherwise
    /// a held lock is [`OplogArchiveError::Busy`].
    pub fn exclusive(dir: &Path, name: &str, wait: bool) -> Result<DirLock, OplogArchiveError> {
        let path = dir.join(name);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(OplogArchiveError::io("open the lock file", &path))?;
        match flock(&file, wait) {
            Ok(true) => Ok(DirLock { _file: file }),
            Ok(false) => Err(OplogArchiveError::Busy {
                dir: dir.to_path_buf(),
                lock: path,
            }),
            Err(source) => Err(OplogArchiveError::Io {
                what: "lock",
                path,
                source,
            }),
        }
    }

    /// Takes the exclusive lock of the existing file `path` if no one holds it:
    /// `Ok(None)` when it is held. Never creates the file (a sweep of stale
    /// directories must not recreate a lock file in a directory being removed).
    pub fn existing_if_free(path: &Path) -> std::io::Result<Option<DirLock>> {
        let file = OpenOptions::new().write(true).open(path)?;
        Ok(flock(&file, false)?.then_some(DirLock { _file: file }))
    }
}

/// `flock(LOCK_EX)` on `file`, waiting or not: `Ok(false)` when another holds it.
fn flock(file: &File, wait: bool) -> std::io::Result<bool> {
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: flock on a file descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let d = tempfile::tempdir().unwrap();
        let a = DirLock::exclusive(d.path(), ARCHIVER_LOCK, false).unwrap();
        assert!(matches!(
            DirLock::exclusive(d.path(), ARCHIVER_LOCK, false),
            Err(OplogArchiveError::Busy { .. })
        ));
        drop(a);
        DirLock::exclusive(d.path(), ARCHIVER_LOCK, false).unwrap();
    }
}
