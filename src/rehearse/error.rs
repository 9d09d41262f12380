//! Why a rehearsal could not run (exit 2), each with what to do about it. A rehearsal
//! that ran and found differences is not an error: that is its verdict (exit 1).

use std::path::PathBuf;

use crate::error::Hint;
use crate::mongo::error::MINIMAL_ROLE;
use crate::mongo::{DriverError, MongoError};
use crate::oplog::Ts;
use crate::plan::PlanError;

/// The role `pitr rehearse` needs, for hints (docs/rehearse.md explains it).
pub const REHEARSE_ROLE: &str = "db.getSiblingDB(\"admin\").createRole({role: \"pitrRehearse\", privileges: [\
{resource: {db: \"local\", collection: \"oplog.rs\"}, actions: [\"find\", \"collStats\"]}, \
{resource: {cluster: true}, actions: [\"listDatabases\", \"getParameter\"]}, \
{resource: {db: \"\", collection: \"\"}, actions: [\"find\", \"listCollections\", \"listIndexes\"]}, \
{resource: {db: \"\", system_buckets: \"\"}, actions: [\"find\"]}], roles: []})";

#[derive(Debug, thiserror::Error)]
pub enum RehearseError {
    #[error("`{target}` is a mongos: a rehearsal reads one replica set as of one cluster time")]
    Mongos { target: String },

    #[error("`{target}` is a standalone mongod: reading as of a cluster time (readConcern snapshot) needs a replica set member")]
    Standalone { target: String },

    #[error("`{target}` runs MongoDB {version}: reading as of a cluster time outside a transaction (readConcern snapshot with atClusterTime) needs 5.0 or later")]
    TooOld { target: String, version: String },

    #[error("`{target}` refused to read as of a cluster time: {source}")]
    SnapshotRefused {
        target: String,
        #[source]
        source: DriverError,
    },

    #[error("the server no longer holds history for {at} ({}): {source}", at.utc_string())]
    SnapshotTooOld {
        at: Ts,
        window_secs: u64,
        #[source]
        source: DriverError,
    },

    #[error(
        "{at} ({}) is older than the server keeps history for: its newest majority-committed write is {newest} ({}), and minSnapshotHistoryWindowInSeconds is {window_secs} s",
        at.utc_string(), newest.utc_string()
    )]
    BeforeWindow {
        at: Ts,
        newest: Ts,
        window_secs: u64,
    },

    #[error("--at {at} ({}) is after the newest majority-committed write {newest} ({}): production has no such state yet", at.utc_string(), newest.utc_string())]
    AfterNewest { at: Ts, newest: Ts },

    #[error("the point to rehearse, {at} ({}), is before the backup's end {backup_end} ({})", at.utc_string(), backup_end.utc_string())]
    BeforeBackup { at: Ts, backup_end: Ts },

    #[error("the rehearsal would outlive the server's history: {what} needs about {needs_secs} s, but {at} stays readable for about {left_secs} s more (minSnapshotHistoryWindowInSeconds = {window_secs})")]
    WouldOutlive {
        what: String,
        at: Ts,
        needs_secs: u64,
        left_secs: u64,
        window_secs: u64,
    },

    #[error("{}", ns_nothing_message(globs, in_production))]
    NsMatchesNothing {
        globs: Vec<String>,
        /// Some namespaces there are (production's).
        known: Vec<String>,
        /// Production's namespaces that match though the rebuild has none.
        in_production: Vec<String>,
    },

    #[error("reading production failed: {what} on `{target}`")]
    Read {
        what: String,
        target: String,
        #[source]
        source: DriverError,
    },

    #[error("reading the oplog from `{target}` to rebuild from failed")]
    Oplog {
        target: String,
        #[source]
        source: Box<crate::mongo::dump::DumpError>,
    },

    #[error("the backup and the oplog cannot rebuild the state at {at}")]
    Rebuild {
        at: Ts,
        #[source]
        source: PlanError,
    },

    #[error("cannot read the backup's oplog in `{}`", backup.display())]
    BackupOplog {
        backup: PathBuf,
        #[source]
        source: crate::oplog::ReadError,
    },

    #[error(transparent)]
    Backup(#[from] crate::backup::BackupError),

    #[error("the backup `{}` has no oplog.bson, so where its data ends is unknown", backup.display())]
    NoBackupEnd { backup: PathBuf },

    #[error("cannot read the oplog `{oplog}`")]
    OplogSource {
        oplog: String,
        #[source]
        source: crate::oplog::ReadError,
    },

    #[error("the oplog `{oplog}` is empty")]
    EmptyOplogSource { oplog: String },

    #[error(transparent)]
    Mongo(#[from] MongoError),

    #[error("the rebuilt state cannot be read")]
    Replica(#[from] crate::engine::replica::ReplicaError),

    #[error("cannot write the rebuilt state to --out")]
    Out(#[source] crate::engine::replica::dump::DumpError),

    #[error("cannot {what} `{}`", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn ns_nothing_message(globs: &[String], in_production: &[String]) -> String {
    let globs = globs
        .iter()
        .map(|g| format!("`{g}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if in_production.is_empty() {
        format!("--ns {globs} matches no namespace of the rebuild or of production: nothing would be compared")
    } else {
        format!(
            "--ns {globs} matches nothing the backup and the oplog rebuild, but production has {}: a restore from this chain would not give it back",
            in_production.join(", ")
        )
    }
}

impl Hint for RehearseError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            RehearseError::Mongos { .. } => "rehearse each shard's replica set on its own (`--uri` naming the shard's members: \
                `pitr cluster discover --uri MONGOS` lists them with their URIs); a rehearsal of the whole cluster at one \
                cluster time is not there yet".into(),
            RehearseError::Standalone { .. } => "point --uri at a replica set member (a secondary is best: secondaryPreferred is the default)".into(),
            RehearseError::TooOld { .. } => "upgrade to MongoDB 5.0 or later; meanwhile `pitr replay --engine mongod` restores \
                the chain onto a spare mongod and `pitr verify` checks it".into(),
            RehearseError::SnapshotRefused { source, .. } => match source.code {
                Some(246) => "the collection's catalog changed after the point, or it is capped; rehearse a later point (`--at now`), \
                    or leave the namespace out with --ns".into(),
                _ => "reads as of a cluster time need MongoDB 5.0+ on a replica set member with majority read concern enabled".into(),
            },
            RehearseError::SnapshotTooOld { window_secs, .. } => format!(
                "the point fell out of the server's snapshot history (minSnapshotHistoryWindowInSeconds = {window_secs} s) while the \
                 rehearsal ran: rerun with `--at now`, use --sample or --max-read-rate less strictly, or raise the window \
                 (`db.adminCommand({{setParameter: 1, minSnapshotHistoryWindowInSeconds: {}}})`; it costs cache and disk on the server)",
                window_secs * 2
            ),
            RehearseError::BeforeWindow { window_secs, .. } => format!(
                "choose a point within the last {window_secs} s (`--at now` does), or raise minSnapshotHistoryWindowInSeconds on the server"
            ),
            RehearseError::AfterNewest { .. } => "use `--at now` (the newest majority-committed write, less --margin)".into(),
            RehearseError::BeforeBackup { .. } => "the rehearsal rebuilds from the backup forward: pass a newer point, or an older backup".into(),
            RehearseError::WouldOutlive { needs_secs, window_secs, .. } => format!(
                "compare a sample (`--sample N`, the default) instead of --full, or raise the server's history window to at least {} s \
                 (`db.adminCommand({{setParameter: 1, minSnapshotHistoryWindowInSeconds: {}}})`) for the night's run",
                needs_secs + window_secs, needs_secs + window_secs
            ),
            RehearseError::NsMatchesNothing { in_production, .. } if !in_production.is_empty() => {
                "check that the backup is of this replica set and that the oplog covers the namespace's creation; `pitr plan` lists the backup's namespaces".into()
            }
            RehearseError::NsMatchesNothing { known, .. } => format!(
                "a glob matches `db.collection` names (`shop.orders`, `shop.*`, `*.events`); {}",
                if known.is_empty() {
                    "production has no user namespace at all".to_string()
                } else {
                    format!("production has {}", known.join(", "))
                }
            ),
            RehearseError::Read { source, .. } => match source.code {
                Some(13) => format!("the rehearsal needs `find`, `listCollections` and `listIndexes` on the user databases as well as the oplog reader's \
                    `find` on local.oplog.rs; e.g. {REHEARSE_ROLE}"),
                Some(code) => format!(
                    "the server answered code {code}, which is not one that goes away by trying again (pitr retries dropped \
                     connections, elections, shutdowns and lost cursors); fix its cause and run the rehearsal again"
                ),
                None => return None,
            },
            RehearseError::Oplog { source, .. } => match source.as_ref() {
                crate::mongo::dump::DumpError::Source(MongoError::SinceRolledOff { .. }) => format!(
                    "the server's oplog no longer reaches back to the backup's end: keep the oplog with `pitr archive` and pass that \
                     directory as --oplog, or take a newer backup; {}",
                    source.hint().unwrap_or_default()
                ),
                crate::mongo::dump::DumpError::Source(MongoError::Unauthorized { .. }) => format!(
                    "reading the oplog needs `find` on local.oplog.rs: {MINIMAL_ROLE}"
                ),
                other => return other.hint(),
            },
            RehearseError::Rebuild { source, .. } => {
                let own = source.hint().unwrap_or_default();
                format!(
                    "{own}{}the chain (backup, then oplog) does not restore production: a restore from it today would fail the same way",
                    if own.is_empty() { "" } else { "; " }
                )
            }
            RehearseError::BackupOplog { .. } => "the backup's oplog.bson is damaged: take a new backup with `mongodump --oplog`".into(),
            RehearseError::NoBackupEnd { .. } => "pass --backup-end with the time the dump STARTED (a dump without --oplog is complete only up to then)".into(),
            RehearseError::OplogSource { source, .. } => return source.hint(),
            RehearseError::EmptyOplogSource { .. } => "pass the oplog that continues the backup (a `pitr archive` directory, `pitr dump-oplog` output), or leave --oplog out to read it from the server".into(),
            RehearseError::Backup(e) => return e.hint(),
            RehearseError::Mongo(e) => return e.hint(),
            RehearseError::Replica(e) => return e.hint(),
            RehearseError::Out(e) => return e.hint(),
            RehearseError::Io { .. } => "check free space and permissions of --work-dir".into(),
        })
    }
}
