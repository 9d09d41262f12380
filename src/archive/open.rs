//! Turning what the user typed (a path, a directory, `-`, or any of them as an
//! `s3://`, `gs://`, `az://` URL, streamed through [`crate::storage`]) into an
//! [`ArchiveReader`].

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::error::ArchiveError;
use super::reader::{ArchiveReader, ReadOptions};
use crate::storage::{self, Found, Location};

/// The file names mongodump uses when `--archive` names a directory (mongodump.go
/// `getArchiveOut`; mongorestore's `getArchiveReader` reads the same).
pub const DIR_CANDIDATES: [&str; 2] = ["archive", "archive.gz"];

/// Opens `spec`: `-` for stdin, a file, or a directory holding `archive` or
/// `archive.gz`. Whether the content is gzipped is decided by its bytes, never by
/// the name.
pub fn open(spec: &str, opts: ReadOptions) -> Result<ArchiveReader, ArchiveError> {
    if spec == "-" {
        return ArchiveReader::with_source("<stdin>".into(), Box::new(io::stdin()), None, opts);
    }
    let loc = Location::parse(spec)?;
    if !loc.is_local() {
        let at = resolve_object(&loc)?;
        let r = storage::global().open_read(&at)?;
        let len = Some(r.size());
        return ArchiveReader::with_source(at.to_string(), Box::new(r), len, opts);
    }
    let path = resolve(loc.local_path().expect("local"))?;
    let file = File::open(&path).map_err(|source| ArchiveError::Open {
        path: path.clone(),
        source,
    })?;
    let len = file.metadata().ok().map(|m| m.len());
    ArchiveReader::with_source(path.display().to_string(), Box::new(file), len, opts)
}

fn resolve(path: &Path) -> Result<PathBuf, ArchiveError> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    DIR_CANDIDATES
        .iter()
        .map(|c| path.join(c))
        .find(|p| p.is_file())
        .ok_or_else(|| ArchiveError::NotAnArchive {
            name: path.display().to_string(),
            looks_like: format!(
                "a directory without an archive in it (looked for {})",
                DIR_CANDIDATES.map(|c| format!("`{c}`")).join(", ")
            ),
        })
}

/// [`resolve`] for a bucket: an object is the archive; a prefix (the "directory"
/// mongodump `--archive=DIR` wrote) holds `archive` or `archive.gz`.
fn resolve_object(loc: &Location) -> Result<Location, ArchiveError> {
    let listed = match storage::global().stat(loc)? {
        Found::Object(_) => return Ok(loc.clone()),
        Found::Nothing => return Err(storage::StorageError::not_found(loc).into()),
        Found::Prefix(listed) => listed,
    };
    for c in DIR_CANDIDATES {
        let at = loc.join(c);
        if listed.iter().any(|o| o.location == at) {
            return Ok(at);
        }
    }
    Err(ArchiveError::NotAnArchive {
        name: loc.to_string(),
        looks_like: format!(
            "a prefix without an archive in it (looked for {})",
            DIR_CANDIDATES.map(|c| format!("`{c}`")).join(", ")
        ),
    })
}
