//! What find-drop reports: one [`Finding`] per destructive operation.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::oplog::Ts;

use super::routine::Routine;

/// The kinds of destructive operation, with the JSON names used in `--json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "camelCase")]
#[value(rename_all = "camelCase")]
pub enum Kind {
    Drop,
    DropDatabase,
    RenameDropTarget,
    DropIndexes,
    Emptycapped,
    DeleteBurst,
    WipingUpdate,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Drop => "drop",
            Kind::DropDatabase => "dropDatabase",
            Kind::RenameDropTarget => "renameDropTarget",
            Kind::DropIndexes => "dropIndexes",
            Kind::Emptycapped => "emptycapped",
            Kind::DeleteBurst => "deleteBurst",
            Kind::WipingUpdate => "wipingUpdate",
        }
    }

    /// How bad this kind is by default.
    pub fn severity(self) -> Severity {
        match self {
            Kind::Drop | Kind::DropDatabase | Kind::RenameDropTarget | Kind::Emptycapped => {
                Severity::Critical
            }
            Kind::DeleteBurst | Kind::WipingUpdate => Severity::High,
            // Data intact, indexes lost: slow queries and missing unique constraints.
            Kind::DropIndexes => Severity::Low,
        }
    }
}

/// Ordered: `Info < Low < High < Critical`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A routine operation (see [`Routine`]): listed only with `--include-routine`,
    /// never a restore target.
    Info,
    Low,
    High,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

/// One destructive operation found in the oplog.
///
/// JSON schema (`pitr find-drop --json`, documented in docs/find-drop.md): `kind`,
/// `severity`, `ns` (`db.coll`; the database for dropDatabase), `ts` (`"t:i"` of the
/// first entry of the incident), `last_ts`, `wall` (RFC 3339 UTC or null),
/// `oplog_limit` (`"t:i"`, exclusive: pass it to `mongorestore --oplogLimit`),
/// `count`, `num_records` (number or null), `in_transaction`, `collections`
/// (dropDatabase: the namespaces dropped, else empty), `details`, `routine` (why a
/// routine operation is routine, e.g. `"ttlExpiry"`, else null; routine findings
/// have severity `info`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub severity: Severity,
    pub ns: String,
    pub ts: Ts,
    pub last_ts: Ts,
    #[serde(serialize_with = "wall_rfc3339")]
    pub wall: Option<DateTime<Utc>>,
    pub oplog_limit: Ts,
    pub count: u64,
    pub num_records: Option<i64>,
    pub in_transaction: bool,
    pub collections: Vec<String>,
    pub details: String,
    pub routine: Option<Routine>,
    /// Written by a shard as a participant of a sharded DDL (`fromMigrate: true` on a
    /// drop, dropDatabase or rename: 7.0+ non-primary shards). Only a cluster member's
    /// scan ([`super::Scanner::cluster_member`]) keeps such entries; not in the JSON
    /// of a single replica set's findings.
    #[serde(skip)]
    pub from_migrate: bool,
    /// The collection uuid (`ui`) of a drop or rename entry, as 32 hex digits: the
    /// same on every shard for one sharded collection, so it ties their drops together.
    #[serde(skip)]
    pub uuid: Option<String>,
    /// A rename over a target: the collection renamed (`o.renameCollection`). A
    /// cluster's config server deletes that name's `config.collections` document as
    /// it re-keys it under the target's name: the rename's metadata, not a drop.
    #[serde(skip)]
    pub renamed_from: Option<String>,
}

impl Finding {
    pub(crate) fn new(kind: Kind, ns: impl Into<String>, ts: Ts, wall_ms: Option<i64>) -> Finding {
        Finding {
            kind,
            severity: kind.severity(),
            ns: ns.into(),
            ts,
            last_ts: ts,
            wall: wall_ms.and_then(DateTime::from_timestamp_millis),
            // Exclusive limit: mongorestore applies entries with ts < limit, so the
            // first entry of the incident itself is the limit.
            oplog_limit: ts,
            count: 1,
            num_records: None,
            in_transaction: false,
            collections: Vec::new(),
            details: String::new(),
            routine: None,
            from_migrate: false,
            uuid: None,
            renamed_from: None,
        }
    }

    /// Marks the finding routine: severity `info`.
    pub(crate) fn make_routine(&mut self, r: Routine) {
        self.routine = Some(r);
        self.severity = Severity::Info;
    }

    pub fn is_routine(&self) -> bool {
        self.routine.is_some()
    }
}

/// `wall` as RFC 3339 UTC with milliseconds (`2026-11-21T03:12:00.123Z`), or null.
fn wall_rfc3339<S: serde::Serializer>(w: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match w {
        Some(w) => s.serialize_str(&w.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        None => s.serialize_none(),
    }
}
