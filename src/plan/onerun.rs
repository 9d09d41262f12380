//! The backup as ONE mongorestore run sees it (see [`super::steps::RestoreSpec`]
//! for why one run):
//!
//! - a directory backup becomes `OUT/restore/`: a link to every entry of the backup
//!   directory except its root oplog, and an `oplog.bson` with the backup's own
//!   entries followed by the slice (uncompressed: the slice file itself, written
//!   with the backup's entries first and hard linked here, not copied),
//!   gzip-compressed when the backup is
//!   (`mongorestore --gzip` reads the root `oplog.bson` through gzip). mongorestore
//!   follows the links: it decides what a directory is with `os.Stat` (mongo-tools
//!   `mongorestore/filepath.go` `actualPath.IsDir`);
//! - an archive backup becomes `OUT/restore.archive`: the archive streamed through
//!   unchanged (header, prelude, every namespace), with the slice appended to its
//!   oplog namespace (which mongodump and mongorestore keep last), gzip-compressed
//!   when the backup is. mongorestore reads an archive's oplog only from the archive,
//!   so this is the one way to restore it in one run; it costs a copy of the backup
//!   on disk, written in one streaming pass.
//!
//! Written under a temporary name inside OUT and renamed into place with the rest
//! of the plan.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::build::{RESTORE_ARCHIVE, RESTORE_DIR};
use super::error::PlanError;
use crate::oplog::source::decompressed;

/// What [`write`] or [`write_archive`] produced, to [`install`] with the plan.
pub enum Written {
    Dir(TempDir),
    Archive(tempfile::NamedTempFile),
}

/// Where the one-run directory's `oplog.bson` comes from.
pub enum Oplog<'a> {
    /// A file in `out` that already holds the backup's entries then the slice: hard
    /// linked, not copied.
    Linked(&'a Path),
    /// Written: the backup's own entries (decompressed), then the slice,
    /// gzip-compressed when the backup is.
    Copied {
        backup_oplog: Option<&'a Path>,
        gzip: bool,
        slice: &'a Path,
    },
}

/// Writes the one-run directory into a temporary directory inside `out`.
pub fn write(out: &Path, backup_dir: &Path, oplog: Oplog<'_>) -> Result<Written, PlanError> {
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
    let dest = tmp.path().join("oplog.bson");
    match oplog {
        // A file system without hard links (some network or FAT mounts): copied.
        Oplog::Linked(file) => {
            if fs::hard_link(file, &dest).is_err() {
                fs::copy(file, &dest).map_err(err(&dest))?;
            }
        }
        Oplog::Copied {
            backup_oplog,
            gzip,
            slice,
        } => write_oplog(&dest, backup_oplog, gzip, slice)?,
    }
    set_readable(tmp.path()).map_err(err(tmp.path()))?;
    Ok(Written::Dir(tmp))
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

/// Streams the archive at `backup` into `OUT/restore.archive` (temporary name), the
/// slice appended to its oplog.
pub fn write_archive(out: &Path, backup: &Path, slice: &Path) -> Result<Written, PlanError> {
    let tmp = tempfile::Builder::new()
        .prefix(".pitr-restore-")
        .suffix(".archive.tmp")
        .tempfile_in(out)
        .map_err(|source| PlanError::Write {
            path: out.to_path_buf(),
            source,
        })?;
    let dest = tmp.path().to_path_buf();
    let werr = |source| PlanError::Write {
        path: dest.clone(),
        source,
    };
    let file = tmp.reopen().map_err(werr)?;
    let mut buf = BufWriter::with_capacity(1 << 20, file);
    stream_archive(
        &backup.to_string_lossy(),
        Some(slice),
        &mut buf,
        &dest.display().to_string(),
    )?;
    buf.flush().map_err(werr)?;
    buf.get_ref().sync_all().map_err(werr)?;
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o644)).map_err(werr)?;
    }
    Ok(Written::Archive(tmp))
}

/// The archive `backup` (a path or a URL, read as `archive::open` reads it)
/// re-encoded into `out` as it is read: header, prelude and every namespace
/// unchanged, gzip-compressed when the backup is, with the entries of `slice` (when
/// given) appended to its oplog namespace (which mongodump and mongorestore keep
/// last), or an oplog namespace added at the end for them. What `OUT/restore.archive`
/// holds, and what `pitr replay --engine mongod` feeds mongorestore's standard
/// input instead of writing that file. `dest` names `out` in errors.
pub fn stream_archive(
    backup: &str,
    slice: Option<&Path>,
    out: &mut dyn Write,
    dest: &str,
) -> Result<(), PlanError> {
    use crate::archive::{
        self, ArchiveWriter, CollectionMetadata, Event, Namespace, WriterOptions,
    };
    let read_err = |e: archive::ArchiveError| {
        PlanError::Backup(crate::backup::BackupError::Archive(Box::new(e)))
    };
    let werr = |e: archive::WriteError| PlanError::Write {
        path: PathBuf::from(dest),
        source: io::Error::other(e.to_string()),
    };
    let mut r = archive::open(backup, archive::ReadOptions::default()).map_err(read_err)?;
    let header = r.header().clone();
    let mut prelude = r.prelude().to_vec();
    let oplog = Namespace::oplog();
    let had_oplog = prelude
        .iter()
        .any(|m| Namespace::new(m.db.clone(), m.collection.clone()).is_oplog());
    if !had_oplog && slice.is_some() {
        prelude.push(CollectionMetadata::oplog());
    }
    let mut w = ArchiveWriter::new(out, &header, &prelude, WriterOptions { gzip: r.is_gzip() })
        .map_err(werr)?;
    let append_slice = |w: &mut ArchiveWriter<&mut dyn Write>| -> Result<(), PlanError> {
        if let Some(slice) = slice {
            let mut s = crate::oplog::OplogReader::new(
                slice.display().to_string(),
                File::open(slice).map_err(|source| PlanError::Io {
                    path: slice.to_path_buf(),
                    source,
                })?,
                crate::oplog::ReadOptions::default(),
            );
            while let Some((doc, _, _)) = s.next_bytes()? {
                w.write_document(&oplog, doc).map_err(werr)?;
            }
        }
        w.end_namespace(&oplog).map_err(werr)
    };
    while let Some(ev) = r.next_event().map_err(read_err)? {
        match ev {
            Event::Document(d) => w.write_document(d.namespace, d.bytes).map_err(werr)?,
            Event::End(e) if e.namespace.is_oplog() => append_slice(&mut w)?,
            Event::End(e) => w.end_namespace(e.namespace).map_err(werr)?,
        }
    }
    if !had_oplog && slice.is_some() {
        append_slice(&mut w)?;
    }
    let out = w.finish().map_err(werr)?;
    out.flush().map_err(|source| PlanError::Write {
        path: PathBuf::from(dest),
        source,
    })
}

/// Moves what was written into place (`OUT/restore/` or `OUT/restore.archive`),
/// replacing what an earlier plan left there (links and files, all pitr's), and
/// removes the other form if an earlier plan left it.
pub fn install(written: Written, out: &Path) -> Result<PathBuf, PlanError> {
    let dir = out.join(RESTORE_DIR);
    let archive = out.join(RESTORE_ARCHIVE);
    match written {
        Written::Dir(tmp) => {
            remove_file(&archive)?;
            install_dir(tmp, out)
        }
        Written::Archive(tmp) => {
            remove_dir(&dir)?;
            tmp.persist(&archive).map_err(|e| PlanError::Write {
                path: archive.clone(),
                source: e.error,
            })?;
            Ok(archive)
        }
    }
}

/// Removes an earlier plan's one-run outputs (a plan that needs none).
pub fn remove_stale(out: &Path) -> Result<(), PlanError> {
    remove_dir(&out.join(RESTORE_DIR))?;
    remove_file(&out.join(RESTORE_ARCHIVE))
}

/// Removes the file `p` of an earlier plan; already gone is fine.
pub(super) fn remove_file(p: &Path) -> Result<(), PlanError> {
    match fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(PlanError::Write {
            path: p.to_path_buf(),
            source,
        }),
    }
}

/// An earlier plan's `restore/`: links and files only; never follows a link into
/// the backup.
fn remove_dir(dest: &Path) -> Result<(), PlanError> {
    let err = |source| PlanError::Write {
        path: dest.to_path_buf(),
        source,
    };
    if fs::symlink_metadata(dest).is_err() {
        return Ok(());
    }
    for e in fs::read_dir(dest).map_err(err)? {
        let p = e.map_err(err)?.path();
        fs::remove_file(&p).map_err(err)?;
    }
    fs::remove_dir(dest).map_err(err)
}

fn install_dir(tmp: TempDir, out: &Path) -> Result<PathBuf, PlanError> {
    let dest = out.join(RESTORE_DIR);
    remove_dir(&dest)?;
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
