//! Why the replica could not apply an entry, or could not keep its documents.

use crate::error::Hint;
use crate::oplog::Ts;

use super::disk::DiskError;

/// An entry the server would not apply (strict phase), or an entry pitr does not
/// model. Names the entry's `t:i`, namespace and why.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("cannot apply the `{op}` entry {ts} on `{ns}`: {why}")]
    Apply {
        ts: Ts,
        ns: String,
        op: String,
        why: String,
    },
    /// A `create` with a UUID over a collection of that name with another UUID:
    /// a secondary never moves the existing collection out of the way
    /// (`src/mongo/db/repl/oplog.cpp`, the `create` entry of `kOpsMap`:
    /// `allowRenameOutOfTheWay` is false in steady-state application, and
    /// `createCollectionForApplyOps` (`create_collection.cpp`) then stops on its
    /// invariant). Seen when a `--skip` keeps a dropped collection that the
    /// application re-created.
    #[error(
        "cannot apply the `c` entry {ts}: it creates `{ns}` (UUID {new_uuid}) while a `{ns}` with another UUID \
         ({existing_uuid}) still exists; a secondary does not move an existing collection out of the way, so a server \
         would stop here too"
    )]
    CreateOverExisting {
        ts: Ts,
        ns: String,
        existing_uuid: String,
        new_uuid: String,
    },
    #[error(
        "the entry {ts} on `{ns}` does something pitr's embedded engine does not model: {why}"
    )]
    Unsupported { ts: Ts, ns: String, why: String },
    #[error("the backup's document {index} of `{ns}` cannot be loaded: {why}")]
    Seed { ns: String, index: u64, why: String },
    /// A collection left in the backup's data file ([`super::cold`]) could not be
    /// read back.
    #[error("cannot read the backup's data file `{path}`: {why}")]
    BackupFile { path: String, why: String },
    /// The copy of such a collection into the dump (or its staging beside it)
    /// could not be written.
    #[error("cannot write `{path}`: {why}")]
    DumpFile { path: String, why: String },
    #[error(transparent)]
    Disk(#[from] DiskError),
    #[error("interrupted")]
    Interrupted,
}

impl Hint for ReplicaError {
    fn hint(&self) -> Option<String> {
        match self {
            ReplicaError::Apply { ts, .. } => Some(format!(
                "a server would fail on this entry too (the oplog and the backup disagree); inspect it with \
                 `pitr oplog cat`, then restore to before it (--until {ts}) or leave it out with --skip {ts}"
            )),
            ReplicaError::CreateOverExisting { ts, ns, .. } => Some(format!(
                "`{ns}` was dropped and re-created before {ts}, and the drop was left out (--skip?): restore the dropped \
                 collection on its own to just before its drop (`--until <the drop's t:i> --ns {ns}`), and everything \
                 else to the later point without the --skip"
            )),
            ReplicaError::Unsupported { ts, .. } => Some(format!(
                "use --engine mongod (a real server applies it), or leave the entry out with --skip {ts}"
            )),
            ReplicaError::Seed { .. } => {
                Some("the backup's data file is corrupt; inspect it with `bsondump`".into())
            }
            ReplicaError::BackupFile { .. } => Some(
                "the replay reads collections the oplog never touches from the backup until it writes them: \
                 leave the backup unchanged while pitr runs, then run again"
                    .into(),
            ),
            ReplicaError::DumpFile { .. } => Some(
                "check the free space and permissions where the dump is written (--out's directory; \
                 nothing was put at --out), then run again"
                    .into(),
            ),
            ReplicaError::Disk(e) => e.hint(),
            ReplicaError::Interrupted => None,
        }
    }
}
