//! Why a backup cannot be read. Each variant names the path and, through [`Hint`],
//! what to do.

use std::path::PathBuf;

use crate::error::Hint;
use crate::oplog::ReadError;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(transparent)]
    Read(#[from] ReadError),

    #[error(transparent)]
    Archive(Box<crate::archive::ArchiveError>),

    /// A backup in a bucket that cannot be listed or read (credentials, a missing
    /// bucket, a URL with a secret): the storage room's error, with its hint.
    #[error(transparent)]
    Storage(Box<crate::storage::StorageError>),

    #[error("backup `{}` does not exist", .0.display())]
    Missing(PathBuf),

    #[error("backup `{}` holds no collection files and no oplog.bson: it is not a mongodump directory", .0.display())]
    Empty(PathBuf),

    #[error("backup `{}` is neither a mongodump directory nor a mongodump archive: it looks like {looks_like}", path.display())]
    NotABackup {
        path: PathBuf,
        looks_like: &'static str,
    },

    /// A copy of a mongod's data files given as a backup (issue 23): only a mongod
    /// can read them.
    #[error("backup `{}` is {}", .0.path.display(), .0.describe())]
    Snapshot(Box<super::snapshot::Snapshot>),

    #[error("cannot read `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("backup `{}` is not a complete upload: {detail}", path.display())]
    IncompleteUpload { path: PathBuf, detail: String },

    #[error("`{}` is not valid metadata JSON: {detail}", path.display())]
    Metadata { path: PathBuf, detail: String },
}

impl Hint for BackupError {
    fn hint(&self) -> Option<String> {
        match self {
            BackupError::Read(e) => e.hint(),
            BackupError::Archive(e) => e.hint(),
            BackupError::Storage(e) => e.hint(),
            BackupError::Missing(path) => Some(crate::storage::not_found_hint(
                path,
                "pass the directory `mongodump --out` wrote, or the file `mongodump --archive` wrote",
            )),
            BackupError::NotABackup { looks_like, .. } if *looks_like == super::OPLOG_FILE => Some(
                "give this file as --oplog; --backup takes the directory `mongodump --oplog --out DIR` wrote (or its \
                 `--archive` file)"
                    .into(),
            ),
            BackupError::Empty(_) | BackupError::NotABackup { .. } => Some(
                "pass the directory `mongodump --oplog --out DIR` wrote (with its <db>/<coll>.bson files and oplog.bson), \
                 or a `mongodump --archive` file"
                    .into(),
            ),
            BackupError::Snapshot(s) => Some(snapshot_hint(s)),
            BackupError::Io { .. } => Some("check the path and its permissions".into()),
            BackupError::IncompleteUpload { .. } => Some(
                "upload the dump again (`pitr replay ... --out` to a new prefix), or, if no upload is running, delete \
                 the prefix and its leftovers"
                    .into(),
            ),
            BackupError::Metadata { .. } => Some(
                "the metadata file is damaged; mongorestore would refuse it too: restore it from the original dump"
                    .into(),
            ),
        }
    }
}

/// What to do with data files: only a mongod reads them, so `replay --engine mongod`
/// restores them (src/replay/snapshot.rs); the hint also gives the server's own
/// procedure by hand and how pitr takes over from its dump.
fn snapshot_hint(s: &super::snapshot::Snapshot) -> String {
    let refusals = s.refusals();
    if !refusals.is_empty() {
        return format!(
            "these files cannot be recovered as they are: {}",
            refusals.join("; ")
        );
    }
    "only a mongod reads data files: `pitr replay --engine mongod` restores them (a spare recovers a copy; \
     --dry-run shows the steps); plan, find-drop and the embedded engine read mongodump backups. By hand, on a COPY \
     (never the snapshot itself): start `mongod --dbpath COPY --bind_ip 127.0.0.1 --setParameter \
     recoverFromOplogAsStandalone=true --setParameter takeUnstableCheckpointOnShutdown=true` (no --replSet), \
     note the newest local.oplog.rs `ts` (T: data and oplog agree after this recovery), shut it down cleanly, \
     start it again without those parameters, `mongodump --out DUMP` it, and run pitr with `--backup DUMP \
     --backup-end T`; see docs/backup-layouts.md"
        .into()
}

impl From<crate::storage::StorageError> for BackupError {
    fn from(e: crate::storage::StorageError) -> BackupError {
        BackupError::Storage(Box::new(e))
    }
}
