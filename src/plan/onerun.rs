//! `OUT/restore/`: the backup as ONE mongorestore run sees it (see
//! [`super::steps::RestoreSpec`] for why one run). It holds a link to every entry of
//! the backup directory except its root oplog, and an `oplog.bson` with the
//! backup's own entries followed by the slice, gzip-compressed when the backup is
//! (`mongorestore --gzip` reads the root `oplog.bson` through gzip). mongorestore
//! follows the links: it decides what a directory is with `os.Stat` (mongo-tools
//! `mongorestore/filepath.go` `actualPath.IsDir`).
//!
//! Written under a temporary name inside OUT and renamed into place with the rest
//! of the plan.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::build::RESTORE_DIR;
use super::error::PlanError;
use crate::oplog::source::decompressed;

/// Writes the one-run directory into a temporary directory inside `out`.
pub fn write(
    out: &Path,
    backup_dir: &Path,
    backup_oplog: Option<&Path>,
    gzip: bool,
    slice: &Path,
) -> Result<TempDir, PlanError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PlanError::Write { path, source }
    };
    let tmp = tempfile::Builder::new()
        .prefix(".pitr-restore-")
        .tempdir_in(out)
        .map_err(err(out))?;
    let backup_abs = fs::canonicalize(backup_dir).map_err(|source| PlanError::Io {
        path: backup_dir.to_path_buf(),
        source,
    })?;
    let entries = fs::read_dir(&backup_abs).map_err(|source| PlanError::Io {
        path: backup_abs.clone(),
        source,
    })?;
    for e in entries {
        let e = e.map_err(|source| PlanError::Io {
            path: backup_abs.clone(),
            source,
        })?;
        let name = e.file_name();
        let n = name.to_string_lossy();
        if n.starts_with('.') || n == "oplog.bson" || n == "oplog.bson.gz" {
            continue;
        }
        let link = tmp.path().join(&name);
        std::os::unix::fs::symlink(e.path(), &link).map_err(err(&link))?;
    }
    let oplog = tmp.path().join("oplog.bson");
    write_oplog(&oplog, backup_oplog, gzip, slice)?;
    set_readable(tmp.path()).map_err(err(tmp.path()))?;
    Ok(tmp)
}

/// The backup's own entries (decompressed, in file order), then the slice.
fn write_oplog(
    path: &Path,
    backup_oplog: Option<&Path>,
    gzip: bool,
    slice: &Path,
) -> Result<(), PlanError> {
    let err = |source| PlanError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(err)?;
    let buffered = BufWriter::with_capacity(1 << 20, file);
    let mut w: Box<dyn Write> = if gzip {
        Box::new(flate2::write::GzEncoder::new(
            buffered,
            flate2::Compression::fast(),
        ))
    } else {
        Box::new(buffered)
    };
    if let Some(p) = backup_oplog {
        let f = File::open(p).map_err(|source| PlanError::Io {
            path: p.to_path_buf(),
            source,
        })?;
        let (mut r, _) = decompressed(&p.display().to_string(), f)?;
        io::copy(&mut r, &mut w).map_err(|source| PlanError::Io {
            path: p.to_path_buf(),
            source,
        })?;
    }
    let mut s = File::open(slice).map_err(|source| PlanError::Io {
        path: slice.to_path_buf(),
        source,
    })?;
    io::copy(&mut s, &mut w).map_err(err)?;
    w.flush().map_err(err)?;
    drop(w);
    File::open(path).and_then(|f| f.sync_all()).map_err(err)?;
    Ok(())
}

/// A plain directory, readable like anything mongodump writes (tempdir makes 0700).
fn set_readable(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
    fs::set_permissions(dir.join("oplog.bson"), fs::Permissions::from_mode(0o644))
}

/// Moves the written directory to `OUT/restore`, replacing what an earlier plan
/// left there (only links and an `oplog.bson`, all pitr's).
pub fn install(tmp: TempDir, out: &Path) -> Result<PathBuf, PlanError> {
    let dest = out.join(RESTORE_DIR);
    let err = |source| PlanError::Write {
        path: dest.clone(),
        source,
    };
    if fs::symlink_metadata(&dest).is_ok() {
        for e in fs::read_dir(&dest).map_err(err)? {
            let p = e.map_err(err)?.path();
            // Links and files only: never follow a link into the backup.
            fs::remove_file(&p).map_err(err)?;
        }
        fs::remove_dir(&dest).map_err(err)?;
    }
    let kept = tmp.keep();
    fs::rename(&kept, &dest).map_err(|source| {
        let _ = fs::remove_dir_all(&kept);
        PlanError::Write {
            path: dest.clone(),
            source,
        }
    })?;
    Ok(dest)
}
