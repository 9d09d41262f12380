//! Why a plan cannot be made. Every variant names the offending value and, through
//! [`Hint`], says what to do. All of them exit with code 2.

use std::path::PathBuf;

use crate::backup::BackupError;
use crate::error::Hint;
use crate::oplog::{ReadError, Ts};

use super::coverage::CoverageError;

fn utc(ts: &Ts) -> String {
    ts.utc_string()
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Read(#[from] ReadError),

    #[error(transparent)]
    Coverage(#[from] CoverageError),

    #[error(transparent)]
    History(#[from] super::history::HistoryError),

    #[error(transparent)]
    Backup(#[from] BackupError),

    #[error(transparent)]
    Version(#[from] super::versions::BadVersion),

    #[error(transparent)]
    Replica(#[from] crate::engine::replica::ReplicaError),

    #[error("cannot read `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("the backup `{}` has no oplog of its own ({why}), so the position its data is complete up to is unknown", dir.display())]
    NoBackupEnd { dir: PathBuf, why: &'static str },

    #[error("--backup-end `{given}` conflicts with the backup's own oplog, which ends at {oplog_end} ({})", utc(oplog_end))]
    BackupEndConflict { given: String, oplog_end: Ts },

    #[error("`{glob}` is not a valid namespace pattern")]
    BadGlob {
        glob: String,
        #[source]
        source: globset::Error,
    },

    #[error(
        "--oplog `-` (stdin) cannot be planned from: pitr plan reads the oplog more than once"
    )]
    OplogStdin,

    #[error(
        "{flag} `{path}` is {kind}: pitr reads the {what} more than once, and {kind} only once"
    )]
    ReadOnce {
        flag: &'static str,
        what: &'static str,
        path: String,
        kind: &'static str,
    },

    #[error("--ns `{glob}` matches no namespace of the backup and none the oplog `{oplog}` acts on{closest}")]
    NsUnmatched {
        glob: String,
        oplog: String,
        closest: String,
    },

    #[error("--skip `{input}` is not an exact oplog position `t:i`")]
    SkipNotExact { input: String },

    #[error("--skip {ts}: no entry of `{oplog}` has this ts")]
    SkipUnmatched { ts: Ts, oplog: String },

    #[error("--skip {ts} ({}) is not after the backup's end {backup_end}: the backup's own data and oplog already contain it", utc(ts))]
    SkipInBackup { ts: Ts, backup_end: Ts },

    #[error("--skip {ts} is at or after the limit {limit}: entries from the limit on are not replayed anyway")]
    SkipAfterLimit { ts: Ts, limit: Ts },

    #[error("--until auto: no critical or high-severity destructive operation after the backup's end {backup_end} ({}) in {entries} entries of `{oplog}`", utc(backup_end))]
    NoIncident {
        backup_end: Ts,
        oplog: String,
        entries: u64,
        /// The oplog holds just the backup's own oplog ([`super::scan::OplogScan::is_the_backups_own`]).
        backups_own: bool,
    },

    #[error("--out `{}` exists and is not a directory", .0.display())]
    OutNotDir(PathBuf),

    #[error("refusing to write into `{}`: it holds `{entry}`, which pitr plan did not write", dir.display())]
    OutNotEmpty { dir: PathBuf, entry: String },

    #[error("writing `{}` failed", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{name}` changed while pitr was reading it ({what})")]
    Changed { name: String, what: String },

    #[error("a part of a cross-shard transaction prepared before the limit and committed before it cannot be applied: {0}")]
    PreparedPart(String),

    /// `PITR_APPLY_WRITERS` is not a number of writer threads.
    #[error("{0}")]
    Writers(String),

    /// The caller's check of the room an oplog out of order needs to be sorted
    /// ([`super::build::SortRoom`]) refused: its message and hint.
    #[error("{message}")]
    NoRoom { message: String, hint: String },
}

impl Hint for PlanError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            PlanError::Read(e) => return e.hint(),
            PlanError::Coverage(e) => return e.hint(),
            PlanError::History(e) => return e.hint(),
            PlanError::Backup(e) => return e.hint(),
            PlanError::Version(e) => return e.hint(),
            PlanError::Replica(e) => return e.hint(),
            PlanError::Io { .. } => "check the path and its permissions".into(),
            PlanError::Writers(_) => format!(
                "set {} to a whole number such as 2, or unset it",
                crate::engine::replica::partition::WRITERS_ENV
            ),
            PlanError::NoBackupEnd { .. } => {
                "pass --backup-end with the oplog position the backup is complete up to: for a dump made without --oplog, \
                 the time the dump STARTED (replaying from there is idempotent; from its end would miss writes made while it ran)"
                    .into()
            }
            PlanError::BackupEndConflict { .. } => {
                "drop --backup-end: the backup's own oplog says exactly where it ends".into()
            }
            PlanError::BadGlob { .. } => {
                "use `db.coll`, `db.*` or `*.coll` (`*` matches any characters, `?` one)".into()
            }
            PlanError::OplogStdin => "save the oplog to a file first and pass its path".into(),
            PlanError::ReadOnce { what, .. } => format!(
                "save the {what} to a file first and pass its path (a gzipped one is read as it is)"
            ),
            PlanError::NsUnmatched { .. } => {
                "check the spelling (`pitr plan` lists the backup's namespaces, `pitr oplog stats` the oplog's); a --ns \
                 that matches nothing is refused so that a typo cannot read as a restore of nothing"
                    .into()
            }
            PlanError::SkipNotExact { .. } => {
                "--skip takes the exact `t:i` of one oplog entry, e.g. from `pitr find-drop` or `pitr oplog cat`".into()
            }
            PlanError::SkipUnmatched { .. } => {
                "copy the exact ts from `pitr find-drop` or `pitr oplog cat`; a --skip that matches nothing is refused so a typo cannot go unnoticed".into()
            }
            PlanError::SkipInBackup { .. } => {
                "an operation that happened while the backup was taken may already be in its collection files; skipping it cannot undo it: use an older backup".into()
            }
            PlanError::SkipAfterLimit { .. } => {
                "to skip the bad operation and keep later writes, move --until past them (e.g. `--until end`)".into()
            }
            PlanError::NoIncident { backups_own: true, oplog, .. } => format!(
                "`{oplog}` holds exactly the backup's own oplog, which ends where the backup does: give as --oplog {}",
                crate::oplog::source::AFTER_THE_BACKUP
            ),
            PlanError::NoIncident { entries: 0, oplog, .. } => format!(
                "`{oplog}` holds no entries at all: check that it is the oplog you meant ({}); `pitr dump-oplog` dumps it",
                crate::oplog::source::NEVER_EMPTY
            ),
            PlanError::NoIncident { .. } => {
                "nothing to stop before: pass an explicit --until (a time, `t:i`, or `end` to replay the whole oplog); `pitr find-drop` lists every finding".into()
            }
            PlanError::OutNotDir(_) | PlanError::OutNotEmpty { .. } => {
                "pass a new or empty directory to --out (a previous plan's directory, holding only oplog.bson and plan.json, is replaced)".into()
            }
            PlanError::Write { .. } => "check the free disk space and the permissions of the output directory".into(),
            PlanError::NoRoom { hint, .. } => hint.clone(),
            PlanError::Changed { .. } => {
                "the file must not change while planning: copy it somewhere stable and plan from the copy".into()
            }
            PlanError::PreparedPart(_) => {
                "its prepare (an applyOps with prepare: true) holds an operation that is not an oplog entry; `pitr oplog cat` the member's oplog around the transaction's prepare to see it, or choose a limit at or before the prepare".into()
            }
        })
    }
}
