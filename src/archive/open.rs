//! Turning what the user typed (a path, a directory, `-`) into an [`ArchiveReader`].

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::error::ArchiveError;
use super::reader::{ArchiveReader, ReadOptions};

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
    let path = resolve(Path::new(spec))?;
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
