//! The cluster scenario's `truth.json`: which incidents were planted at which cluster
//! time, on which members, and which decoys must stay silent.
//!
//! Schema (every `ts`-like value is the string `"t:i"`):
//!
//! ```json
//! {
//!   "generator": "pitr-gen", "seed": 7, "scenario": "cluster", "ddl_shape": "v7",
//!   "members": [ { "id": "config", "role": "config", "backup": "config/backup",
//!                  "backup_end_ts": "t:i", "oplog": "config/oplog.bson",
//!                  "oplog_first_ts": "t:i", "oplog_last_ts": "t:i", "entries": 123 } ],
//!   "incidents": [ {
//!     "kind": "drop" | "deleteBurst",
//!     "ns": "shop.orders",
//!     "cluster_limit": "t:i",      // the first destructive entry across all members
//!     "last_ts": "t:i",            // the last destructive entry of the incident on any member
//!     "count": 250,                // deleteBurst: deletes on all shards; drop: 1
//!     "num_records": 412,          // drop: documents on all shards then (o2.numRecords summed)
//!     "members": [ { "member": "config", "ts": "t:i", "last_ts": "t:i",
//!                    "what": "config.collections delete (applyOps)", "from_migrate": false,
//!                    "count": null, "num_records": null } ]
//!   } ],
//!   "decoys": [ { "what": "...", "member": "shard1", "ns": "shop.events",
//!                 "first_ts": "t:i", "last_ts": "t:i", "count": 200, "why_silent": "..." } ],
//!   "logical_content": null
//! }
//! ```
//!
//! `logical_content` is null: the truth of the cluster's logical data at a limit (the
//! documents each shard owns then) comes with the cluster replay (issue 19, phase B).

use serde::Serialize;

use pitr::oplog::Ts;

#[derive(Debug, Serialize)]
pub struct ClusterTruth {
    pub generator: &'static str,
    pub seed: u64,
    pub scenario: &'static str,
    pub ddl_shape: &'static str,
    pub members: Vec<MemberTruth>,
    pub incidents: Vec<Incident>,
    pub decoys: Vec<Decoy>,
    pub logical_content: Option<()>,
}

#[derive(Debug, Serialize)]
pub struct MemberTruth {
    pub id: String,
    pub role: &'static str,
    pub backup: String,
    pub backup_end_ts: Option<Ts>,
    pub oplog: String,
    pub oplog_first_ts: Option<Ts>,
    pub oplog_last_ts: Option<Ts>,
    pub entries: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Incident {
    pub kind: &'static str,
    pub ns: String,
    pub cluster_limit: Ts,
    pub last_ts: Ts,
    pub count: u64,
    pub num_records: Option<u64>,
    pub members: Vec<MemberEntry>,
}

/// One member's part of an incident.
#[derive(Clone, Debug, Serialize)]
pub struct MemberEntry {
    pub member: String,
    pub ts: Ts,
    pub last_ts: Ts,
    pub what: String,
    pub from_migrate: bool,
    pub count: Option<u64>,
    pub num_records: Option<u64>,
}

impl MemberEntry {
    pub fn new(member: &str, ts: Ts, last_ts: Ts, what: impl Into<String>) -> MemberEntry {
        MemberEntry {
            member: member.to_string(),
            ts,
            last_ts,
            what: what.into(),
            from_migrate: false,
            count: None,
            num_records: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Decoy {
    pub what: &'static str,
    pub member: String,
    pub ns: String,
    pub first_ts: Ts,
    pub last_ts: Ts,
    pub count: u64,
    pub why_silent: &'static str,
}

impl ClusterTruth {
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }
}
