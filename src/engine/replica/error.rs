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
    #[error(
        "the entry {ts} on `{ns}` does something pitr's embedded engine does not model: {why}"
    )]
    Unsupported { ts: Ts, ns: String, why: String },
    #[error("the backup's document {index} of `{ns}` cannot be loaded: {why}")]
    Seed { ns: String, index: u64, why: String },
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
            ReplicaError::Unsupported { ts, .. } => Some(format!(
                "use --engine mongod (a real server applies it), or leave the entry out with --skip {ts}"
            )),
            ReplicaError::Seed { .. } => {
                Some("the backup's data file is corrupt; inspect it with `bsondump`".into())
            }
            ReplicaError::Disk(e) => e.hint(),
            ReplicaError::Interrupted => None,
        }
    }
}
