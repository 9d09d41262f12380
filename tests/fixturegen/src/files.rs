//! Output files that appear complete or not at all.
//!
//! Every file is written under a temporary name (`.pitr-gen-...`) in its final
//! directory and renamed into place once complete; the backup directory is built
//! under a temporary name too and swapped in at the end; `truth.json` is removed
//! first and written last, so a `truth.json` always describes the files beside it.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::{NamedTempFile, TempDir};

use super::GenError;

/// Prefix of every temporary name the generator uses.
pub const TEMP_PREFIX: &str = ".pitr-gen-";

/// The entries a previous run leaves in an output directory.
const OWN_ENTRIES: [&str; 6] = [
    "backup",
    "oplog.bson",
    "truth.json",
    // The other layouts of the backup (`--layouts`, see `layout.rs`).
    "backup-gzip",
    "backup.archive",
    "backup-gzip.archive",
];

/// A temp file/dir builder; `mode` (unix) makes results look like normal output
/// (0o644 files, 0o755 directories) instead of tempfile's private 0o600/0o700.
fn builder(prefix: &str, mode: u32) -> tempfile::Builder<'_, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    b
}

/// A file written under a temporary name and renamed into place by
/// [`AtomicFile::commit`]; dropped uncommitted, the temporary file is removed.
pub struct AtomicFile {
    w: BufWriter<NamedTempFile>,
    dest: PathBuf,
}

impl AtomicFile {
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
        let dir = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!("{TEMP_PREFIX}{name}-");
        let tmp = builder(&prefix, 0o644).tempfile_in(dir)?;
        Ok(AtomicFile {
            w: BufWriter::with_capacity(1 << 20, tmp),
            dest: dest.to_path_buf(),
        })
    }

    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flushes and renames the file into place.
    pub fn commit(self) -> io::Result<()> {
        let tmp = self.w.into_inner().map_err(|e| e.into_error())?;
        tmp.persist(&self.dest).map_err(|e| e.error)?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.w.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

/// Writes `bytes` to `dest` atomically.
pub fn write_atomic(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(dest)?;
    f.write_all(bytes)?;
    f.commit()
}

/// The output directory of one run.
pub struct OutDir {
    pub root: PathBuf,
    /// Where the new backup directory is built.
    pub backup_tmp: TempDir,
}

fn io_err(what: &str, path: &Path, source: io::Error) -> GenError {
    GenError::Io {
        what: what.to_string(),
        path: path.to_path_buf(),
        source,
    }
}

impl OutDir {
    /// Creates `root` if needed. An existing directory must be empty or hold only a
    /// previous run's output (which is replaced); anything else is refused.
    pub fn prepare(root: &Path) -> Result<OutDir, GenError> {
        if root.exists() && !root.is_dir() {
            return Err(GenError::OutNotDir(root.to_path_buf()));
        }
        fs::create_dir_all(root)
            .map_err(|e| io_err("cannot create the output directory", root, e))?;
        let entries =
            fs::read_dir(root).map_err(|e| io_err("cannot list the output directory", root, e))?;
        let mut stale = Vec::new();
        for ent in entries {
            let ent = ent.map_err(|e| io_err("cannot list the output directory", root, e))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.starts_with(TEMP_PREFIX) {
                stale.push(ent.path());
            } else if !OWN_ENTRIES.contains(&name.as_str()) {
                return Err(GenError::OutNotEmpty {
                    dir: root.to_path_buf(),
                    entry: name,
                });
            }
        }
        // Left over by a run that was killed: never complete, safe to remove.
        for p in stale {
            let _ = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
        }
        let backup_tmp = builder(&format!("{TEMP_PREFIX}backup-"), 0o755)
            .tempdir_in(root)
            .map_err(|e| io_err("cannot create a temporary directory in", root, e))?;
        Ok(OutDir {
            root: root.to_path_buf(),
            backup_tmp,
        })
    }

    pub fn backup_dir(&self) -> &Path {
        self.backup_tmp.path()
    }

    /// Removes a previous run's `truth.json` (done before anything is replaced).
    pub fn retire_truth(&self) -> Result<(), GenError> {
        let p = self.root.join("truth.json");
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("cannot remove the previous", &p, e)),
        }
    }

    /// Moves the finished backup directory into place as `backup/`, replacing a
    /// previous one.
    pub fn install_backup(self) -> Result<(), GenError> {
        let dest = self.root.join("backup");
        let new = self.backup_tmp.keep();
        if dest.exists() {
            let old = builder(&format!("{TEMP_PREFIX}old-"), 0o755)
                .tempdir_in(&self.root)
                .map_err(|e| io_err("cannot create a temporary directory in", &self.root, e))?
                .keep();
            fs::rename(&dest, old.join("backup"))
                .map_err(|e| io_err("cannot move aside the previous", &dest, e))?;
            fs::rename(&new, &dest)
                .map_err(|e| io_err("cannot move the new backup into", &dest, e))?;
            fs::remove_dir_all(&old)
                .map_err(|e| io_err("cannot remove the previous backup at", &old, e))?;
        } else {
            fs::rename(&new, &dest)
                .map_err(|e| io_err("cannot move the new backup into", &dest, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncommitted_files_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x.bson");
        {
            let mut f = AtomicFile::create(&dest).unwrap();
            f.write_all(b"partial").unwrap();
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let mut f = AtomicFile::create(&dest).unwrap();
        f.write_all(b"done").unwrap();
        f.commit().unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"done");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn refuses_foreign_directories() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let err = OutDir::prepare(dir.path()).err().unwrap();
        assert!(matches!(err, GenError::OutNotEmpty { .. }), "{err}");
        let file = dir.path().join("notes.txt");
        assert!(matches!(
            OutDir::prepare(&file).err().unwrap(),
            GenError::OutNotDir(_)
        ));
    }

    #[test]
    fn replaces_a_previous_backup() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("backup/old")).unwrap();
        fs::create_dir_all(dir.path().join(".pitr-gen-backup-stale")).unwrap();
        let out = OutDir::prepare(dir.path()).unwrap();
        fs::write(out.backup_dir().join("new.bson"), b"").unwrap();
        out.install_backup().unwrap();
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["backup".to_string()]);
        assert!(dir.path().join("backup/new.bson").exists());
        assert!(!dir.path().join("backup/old").exists());
    }
}
