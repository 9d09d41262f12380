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
//!   "transactions": [ { "txn": "lsid <hex>, txnNumber 1", "decision": "commit" | "abort",
//!                       "commit_timestamp": "t:i" | null,
//!                       "participants": [ { "member": "shard0", "prepare_ts": "t:i",
//!                                           "decision_ts": "t:i" } ] } ],
//!   "logical_content": null
//! }
//! ```
//!
//! `logical_content` is null: the truth of the cluster's logical data at a limit is
//! [`Logical::at`] on the generator's model ([`super::ClusterSummary::logical`]),
//! computed by the tests rather than written out.

use std::collections::BTreeMap;

use bson::Document;
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
    /// Cross-shard transactions: each participant's prepare and decision entry, the
    /// commitTimestamp (in the content at a limit iff it is before the limit).
    pub transactions: Vec<super::txn::TxnTruth>,
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

/// The cluster's logical content as an application sees it through `mongos`: the
/// documents of every user namespace, whichever shard holds them, changed only by
/// the routed writes at their cluster time (`ts`); migrations move documents between
/// shards and change nothing here. `truth(L)` for a restore at the exclusive limit
/// `L` is [`Logical::at`]: independent of the members' oplogs, backups and chunks,
/// so a restore that merges the shards wrongly (orphans, clones, a wrong owner)
/// differs from it.
#[derive(Clone, Debug, Default)]
pub struct Logical {
    /// Before the first backup (written without oplog entries): ns -> key -> document.
    pub initial: BTreeMap<String, BTreeMap<String, Document>>,
    /// Every routed write, in the order the simulation made them.
    pub ops: Vec<(Ts, LogicalOp)>,
}

/// One routed write.
#[derive(Clone, Debug)]
pub enum LogicalOp {
    /// An insert, or an update's post-image.
    Put {
        ns: String,
        key: String,
        doc: Document,
    },
    Delete {
        ns: String,
        key: String,
    },
    /// The collection dropped (at its first destructive entry; a limit inside the
    /// drop is refused by the restore, so any point of the drop would do).
    Drop {
        ns: String,
    },
    /// `from` renamed over `to` (dropping `to`), at the first destructive entry.
    Rename {
        from: String,
        to: String,
    },
}

impl Logical {
    /// The content at the exclusive limit `limit`: every write with `ts < limit`
    /// applied in `ts` order, per namespace the documents in key (`_id`) order.
    /// Namespaces that exist but are empty are kept (with no documents).
    pub fn at(&self, limit: Ts) -> BTreeMap<String, Vec<Document>> {
        let mut state = self.initial.clone();
        let mut ops: Vec<&(Ts, LogicalOp)> =
            self.ops.iter().filter(|(ts, _)| *ts < limit).collect();
        ops.sort_by_key(|(ts, _)| *ts);
        for (_, op) in ops {
            match op {
                LogicalOp::Put { ns, key, doc } => {
                    state
                        .entry(ns.clone())
                        .or_default()
                        .insert(key.clone(), doc.clone());
                }
                LogicalOp::Delete { ns, key } => {
                    if let Some(c) = state.get_mut(ns) {
                        c.remove(key);
                    }
                }
                LogicalOp::Drop { ns } => {
                    state.remove(ns);
                }
                LogicalOp::Rename { from, to } => {
                    state.remove(to);
                    if let Some(docs) = state.remove(from) {
                        state.insert(to.clone(), docs);
                    }
                }
            }
        }
        state
            .into_iter()
            .map(|(ns, docs)| (ns, docs.into_values().collect()))
            .collect()
    }
}
