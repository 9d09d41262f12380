//! `truth.json`: what the generator planted, and what a correct tool must find.
//!
//! Schema (stable; every `ts`-like value is the string `"t:i"`):
//!
//! ```json
//! {
//!   "generator": "pitr-gen", "seed": 7, "scenario": "incident",
//!   "backup": {
//!     "dir": "backup",
//!     "oplog_first_ts": "t:i", "oplog_last_ts": "t:i", "oplog_entries": 12,
//!     "end_ts": "t:i",                   // = oplog_last_ts: the dump is consistent there
//!     "counts": { "shop.orders": 150, "admin.system.version": 1, ... }
//!   },                                   // counts: documents in each <db>/<coll>.bson
//!   "oplog": { "path": "oplog.bson", "first_ts": "t:i", "last_ts": "t:i",
//!              "entries": 12345, "sorted": true },
//!   "incidents": [ {
//!     "kind": "drop" | "dropDatabase" | "renameDropTarget" | "deleteBurst"
//!             | "dropIndexes" | "wipingUpdate",
//!     "ns": "shop.orders",               // dropDatabase: the database; rename: the TARGET
//!     "ts": "t:i",                       // first entry of the incident (see below)
//!     "last_ts": "t:i",                  // last entry of the incident
//!     "wall": "2026-11-21T01:05:03.123Z",// wall clock of the `ts` entry
//!     "oplog_limit": "t:i",              // exclusive --oplogLimit that stops just before it
//!     "count": 1,                        // drops: collections dropped; bursts: operations
//!     "num_records": 150,                // drops/renames: documents lost; else null
//!     "in_transaction": false,           // deletes applied by a committed transaction
//!     "collections": null,               // dropDatabase: namespaces in drop order
//!     "convert_to_capped": false         // the rename of a convertToCapped
//!   } ],
//!   "decoys": [ { "what": "fromMigrate deletes", "ns": "shop.clicks",
//!                 "first_ts": "t:i", "last_ts": "t:i", "count": 160,
//!                 "why_silent": "..." } ],
//!   "routine": [ { "kind": "renameDropTarget", "routine": "outReplace",
//!                  "ns": "reports.daily", "ts": "t:i", "last_ts": "t:i", "count": 5,
//!                  "what": "$out refreshing it every 300 s" } ],
//!   "expected_counts": [ { "oplog_limit": "t:i", "counts": { "shop.orders": 162, ... } } ]
//! }
//! ```
//!
//! Rules (the ones `pitr find-drop` implements):
//! - `drop`: ts = limit = the drop entry; `num_records` = documents in the collection
//!   then (also logged in the entry's `o2.numRecords`).
//! - `dropDatabase`: ts = limit = the first of the per-collection drops that precede
//!   the `dropDatabase` entry; `last_ts` = the `dropDatabase` entry; `count` =
//!   collections dropped; `num_records` = their sum.
//! - `renameDropTarget`: ts = limit = the rename; `ns` = the replaced target;
//!   `num_records` = documents the target had. `convert_to_capped` marks the rename
//!   that ends a `convertToCapped` (`tmpXXXXX.convertToCapped.<coll>`).
//! - `deleteBurst`: ts = limit = the first delete, `last_ts` = the last. Deletes in a
//!   transaction count at its committing entry, so there ts = limit = that entry and
//!   `in_transaction` is true. Batched deletes (one `applyOps` without `lsid`) count
//!   at that entry.
//! - `dropIndexes`: ts = limit = the entry; `count` 1.
//! - `wipingUpdate`: ts = limit = the first wiping update, `count` = updates.
//!
//! `expected_counts` has one item per incident, in the same order: the number of
//! documents in every existing user collection (not `admin`, `config`, `local`)
//! after restoring the backup and replaying every oplog entry with `ts < oplog_limit`
//! (a transaction counts at its commit entry; an aborted one never). Chunk-migration
//! deletes (`fromMigrate`) are real deletes on this replica set and are counted.
//!
//! In the `bench` scenario document counts are still exact (only the set of ids the
//! generator remembers is bounded), so `expected_counts` is present there too.

use std::collections::BTreeMap;

use serde::Serialize;

use pitr::oplog::Ts;

#[derive(Debug, Serialize)]
pub struct Truth {
    pub generator: &'static str,
    pub seed: u64,
    pub scenario: &'static str,
    pub backup: BackupTruth,
    pub oplog: OplogTruth,
    pub incidents: Vec<Incident>,
    pub decoys: Vec<Decoy>,
    pub routine: Vec<RoutineOp>,
    pub expected_counts: Vec<ExpectedCounts>,
}

#[derive(Debug, Serialize)]
pub struct BackupTruth {
    pub dir: &'static str,
    pub oplog_first_ts: Option<Ts>,
    pub oplog_last_ts: Option<Ts>,
    pub oplog_entries: u64,
    pub end_ts: Option<Ts>,
    pub counts: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
pub struct OplogTruth {
    pub path: &'static str,
    pub first_ts: Option<Ts>,
    pub last_ts: Option<Ts>,
    pub entries: u64,
    pub sorted: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Incident {
    pub kind: &'static str,
    pub ns: String,
    pub ts: Ts,
    pub last_ts: Ts,
    pub wall: String,
    pub oplog_limit: Ts,
    pub count: u64,
    pub num_records: Option<u64>,
    pub in_transaction: bool,
    pub collections: Option<Vec<String>>,
    pub convert_to_capped: bool,
    /// Counts just before `oplog_limit` (serialised in `expected_counts`).
    #[serde(skip)]
    pub counts: BTreeMap<String, u64>,
}

impl Incident {
    /// A one-entry incident at `ts` (limit = ts).
    pub fn at(
        kind: &'static str,
        ns: impl Into<String>,
        ts: Ts,
        counts: BTreeMap<String, u64>,
    ) -> Incident {
        Incident {
            kind,
            ns: ns.into(),
            ts,
            last_ts: ts,
            wall: String::new(),
            oplog_limit: ts,
            count: 1,
            num_records: None,
            in_transaction: false,
            collections: None,
            convert_to_capped: false,
            counts,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Decoy {
    pub what: &'static str,
    pub ns: String,
    pub first_ts: Ts,
    pub last_ts: Ts,
    pub count: u64,
    pub why_silent: &'static str,
}

/// A routine operation find-drop lists at severity `info` (see the module docs).
#[derive(Clone, Debug, Serialize)]
pub struct RoutineOp {
    pub kind: &'static str,
    pub routine: &'static str,
    pub ns: String,
    pub ts: Ts,
    pub last_ts: Ts,
    pub count: u64,
    pub what: String,
}

#[derive(Debug, Serialize)]
pub struct ExpectedCounts {
    pub oplog_limit: Ts,
    pub counts: BTreeMap<String, u64>,
}

/// `wall` milliseconds as RFC 3339 UTC with milliseconds.
pub fn wall_string(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

impl Truth {
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_ts_as_strings_and_nulls() {
        let i = Incident::at("drop", "shop.orders", Ts::new(5, 2), BTreeMap::new());
        let v = serde_json::to_value(&i).unwrap();
        assert_eq!(v["ts"], "5:2");
        assert_eq!(v["oplog_limit"], "5:2");
        assert!(v["num_records"].is_null());
        assert!(v["collections"].is_null());
        assert!(v.get("counts").is_none());
        assert_eq!(wall_string(1_795_000_000_007), "2026-11-18T11:06:40.007Z");
    }
}
