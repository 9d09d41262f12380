//! Cross-shard (prepared) transactions at one limit `L`, rule R2 of
//! shared/reference/sharded-pitr.md: a transaction committed by two-phase commit is
//! in the restore iff its `commitTimestamp` is before `L`, on every participant,
//! wherever each participant's own `commitTransaction` entry falls.
//!
//! Why that is the rule, from the server source:
//! - the coordinator chooses one `commitTimestamp` for every participant, one tick
//!   past the greatest prepare timestamp (`transaction_coordinator.cpp`,
//!   `makeDecisionFromPrepareVoteConsensus`: `maxPrepareTimestamp` with `inc + 1`), and sends it to each participant in
//!   `commitTransaction`;
//! - each participant writes its commit entry at an oplog time of its own, at or
//!   after that timestamp ("Commit oplog entry must be greater than or equal to
//!   commit timestamp", `transaction_participant.cpp`), so the commit entries of one
//!   transaction fall at different `ts` on different shards, and a per-shard
//!   `--oplogLimit` would apply it on some shards and not on others (the torn
//!   transaction of the research note's trap 2; PBM PR #633 for the same reason).
//!
//! The decisions come from every member's oplog read in full ([`TxnTable`]): a
//! participant's `commitTransaction` (with its `commitTimestamp`) or
//! `abortTransaction`, keyed by `lsid` + `txnNumber` (the router sends each shard the
//! client's session and transaction number), and the coordinator's decision document
//! (`config.transaction_coordinators`, [`super::coordinator`]), which the coordinator
//! writes before it tells any participant, so it decides a transaction whose
//! participants' entries are past the oplogs read. A transaction that none of them
//! decides is refused, asking for more oplog, never guessed.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::engine::walk::{txn_label, TxnDecision};
use crate::oplog::{Entry, Ts};
use crate::plan::PreparedAtLimit;

/// One participant's decision entry.
#[derive(Clone, Debug)]
pub struct DecisionEntry {
    pub key: Vec<u8>,
    pub label: String,
    pub decision: TxnDecision,
    /// The entry's own `ts` on its member.
    pub ts: Ts,
    /// The coordinator's decision document ([`super::coordinator`]), not a
    /// participant's `commitTransaction`/`abortTransaction`.
    pub coordinator: bool,
}

impl DecisionEntry {
    /// The decision `e` records, when it is a `commitTransaction` or
    /// `abortTransaction` of a transaction. A commit without a `commitTimestamp` is
    /// an error (an unprepared transaction commits with its last `applyOps`, never
    /// with `commitTransaction`: `transaction_participant.cpp`).
    pub fn of(e: &Entry<'_>) -> Result<Option<DecisionEntry>, String> {
        if let Some(d) = super::coordinator::decision_of(e)? {
            return Ok(Some(DecisionEntry {
                key: d.key,
                label: d.label,
                decision: d.decision,
                ts: e.ts,
                coordinator: true,
            }));
        }
        let name = match e.command_name() {
            Some(n @ ("commitTransaction" | "abortTransaction")) => n,
            _ => return Ok(None),
        };
        let Some(key) = e.transaction_key() else {
            return Ok(None);
        };
        let decision = if name == "abortTransaction" {
            TxnDecision::Abort
        } else {
            let ct =
                e.o.and_then(|o| o.get_timestamp("commitTimestamp").ok())
                    .ok_or_else(|| {
                        format!(
                            "the commitTransaction at {} has no commitTimestamp timestamp in `o`",
                            e.ts
                        )
                    })?;
            TxnDecision::Commit(Ts::new(ct.time, ct.increment))
        };
        Ok(Some(DecisionEntry {
            key,
            label: txn_label(e),
            decision,
            ts: e.ts,
            coordinator: false,
        }))
    }
}

/// Why the members' decisions cannot be one table.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    #[error("the transaction {txn} is decided two ways: {first}, {second}")]
    Conflict {
        txn: String,
        first: String,
        second: String,
    },
    #[error("member `{member}`: the prepared transaction {txn} commits at {commit_timestamp}, before the limit {limit}, and this member's commit entry is at {commit_entry}, but none of its prepared writes are in the member's backup oplog or oplog before the limit: restored, it would be on the other participants and not here")]
    Torn {
        member: String,
        txn: String,
        commit_timestamp: Ts,
        commit_entry: Ts,
        limit: Ts,
    },
}

impl crate::error::Hint for TxnError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            TxnError::Conflict { .. } => {
                "the members' oplogs cannot be of one cluster (check the cluster file's paths)".into()
            }
            TxnError::Torn { .. } => {
                "give that member's oplog from before the transaction's prepare (its backup's oplog starts after it), or \
                 choose a limit at or before the commitTimestamp"
                    .into()
            }
        })
    }
}

fn describe(d: TxnDecision) -> String {
    match d {
        TxnDecision::Commit(ct) => format!("commit at commitTimestamp {ct}"),
        TxnDecision::Abort => "abort".into(),
    }
}

/// One transaction's decision and where the members logged it.
#[derive(Clone, Debug)]
struct Known {
    decision: TxnDecision,
    label: String,
    /// Every participant's decision entry: member id, its ts.
    entries: Vec<(String, Ts)>,
    /// The coordinator's decision document: member id, its ts.
    coordinator: Vec<(String, Ts)>,
}

/// Every decision entry of every member, by transaction.
#[derive(Clone, Debug, Default)]
pub struct TxnTable {
    by_key: HashMap<Vec<u8>, Known>,
}

impl TxnTable {
    /// Adds one member's decision entries.
    pub fn add(&mut self, member: &str, entries: &[DecisionEntry]) -> Result<(), TxnError> {
        for d in entries {
            let slot = self.by_key.entry(d.key.clone()).or_insert_with(|| Known {
                decision: d.decision,
                label: d.label.clone(),
                entries: Vec::new(),
                coordinator: Vec::new(),
            });
            if slot.decision != d.decision {
                let (m0, t0) = slot
                    .entries
                    .first()
                    .or(slot.coordinator.first())
                    .cloned()
                    .unwrap_or_default();
                return Err(TxnError::Conflict {
                    txn: d.label.clone(),
                    first: format!("{} on member `{m0}` (at {t0})", describe(slot.decision)),
                    second: format!(
                        "{} on member `{member}` (at {})",
                        describe(d.decision),
                        d.ts
                    ),
                });
            }
            let list = if d.coordinator {
                &mut slot.coordinator
            } else {
                &mut slot.entries
            };
            list.push((member.to_string(), d.ts));
        }
        Ok(())
    }

    /// The decisions, for each member's plan ([`crate::plan::PlanRequest::decided`]).
    pub fn decisions(&self) -> Arc<HashMap<Vec<u8>, TxnDecision>> {
        Arc::new(
            self.by_key
                .iter()
                .map(|(k, known)| (k.clone(), known.decision))
                .collect(),
        )
    }

    /// The cross-member check (rule R2): every participant of a transaction committed
    /// before `limit` whose own commit entry is at or after `limit` must have applied
    /// it from the decision (its plan lists it as included); a participant that holds
    /// the commit entry but none of the prepared writes would tear it.
    pub fn check_member(
        &self,
        member: &str,
        prepared: &[PreparedAtLimit],
        limit: Ts,
    ) -> Result<(), TxnError> {
        for Known {
            decision,
            label,
            entries,
            ..
        } in self.by_key.values()
        {
            let TxnDecision::Commit(ct) = *decision else {
                continue;
            };
            if ct >= limit {
                continue;
            }
            for (m, ts) in entries {
                if m == member
                    && *ts >= limit
                    && !prepared.iter().any(|p| p.included && &p.txn == label)
                {
                    return Err(TxnError::Torn {
                        member: member.to_string(),
                        txn: label.clone(),
                        commit_timestamp: ct,
                        commit_entry: *ts,
                        limit,
                    });
                }
            }
        }
        Ok(())
    }

    /// `--engine mongod`: the transactions this member must commit past the limit
    /// (rule R2): each one open here at `limit` and included (its `commitTimestamp`
    /// before it), with this member's own `commitTransaction` entry at or after
    /// `limit`. mongorestore applies a prepared transaction's buffered writes only at
    /// its `commitTransaction` entry (mongo-tools `common/txn/meta.go` `IsCommit`:
    /// a `prepare: true` applyOps is never a commit by itself;
    /// `mongorestore/oplog.go` `HandleTxnOp`), so that entry must be in what it
    /// replays. Returns each one's key, label and this member's commit entry `ts`.
    pub fn commits_past_limit(
        &self,
        member: &str,
        prepared: &[PreparedAtLimit],
        limit: Ts,
    ) -> Vec<(Vec<u8>, String, Ts)> {
        let mut out = Vec::new();
        for (key, k) in &self.by_key {
            let TxnDecision::Commit(ct) = k.decision else {
                continue;
            };
            if ct >= limit || !prepared.iter().any(|p| p.included && p.txn == k.label) {
                continue;
            }
            for (m, ts) in &k.entries {
                if m == member && *ts >= limit {
                    out.push((key.clone(), k.label.clone(), *ts));
                }
            }
        }
        out.sort_by_key(|c| c.2);
        out
    }

    /// The transactions that cross `limit` (a participant's commit entry at or after
    /// it while another's prepare, or its own, is before it), for the report.
    pub fn at_limit(&self, members: &[(String, Vec<PreparedAtLimit>)]) -> Vec<CrossShardTxn> {
        let mut out: Vec<CrossShardTxn> = Vec::new();
        for (member, prepared) in members {
            for p in prepared {
                let t = match out.iter_mut().position(|t| t.txn == p.txn) {
                    Some(k) => &mut out[k],
                    None => {
                        let known = self.by_key.values().find(|k| k.label == p.txn);
                        let commit_entries = known.map(|k| k.entries.clone()).unwrap_or_default();
                        let coordinator = known
                            .and_then(|k| k.coordinator.first().cloned())
                            .map(|(member, ts)| DecisionAt { member, ts });
                        out.push(CrossShardTxn {
                            txn: p.txn.clone(),
                            decision: p.decision.clone(),
                            commit_timestamp: p.commit_timestamp,
                            included: p.included,
                            open_on: Vec::new(),
                            decision_entries: commit_entries
                                .into_iter()
                                .map(|(member, ts)| DecisionAt { member, ts })
                                .collect(),
                            coordinator_decision: coordinator,
                        });
                        out.last_mut().expect("pushed")
                    }
                };
                t.open_on.push(member.clone());
            }
        }
        out.sort_by(|a, b| a.txn.cmp(&b.txn));
        out
    }
}

/// A cross-shard transaction open at the limit on at least one member.
#[derive(Clone, Debug, Serialize)]
pub struct CrossShardTxn {
    pub txn: String,
    /// `commit`, `abort` or `undecided`.
    pub decision: String,
    pub commit_timestamp: Option<Ts>,
    /// In the restore on every participant (never on some only).
    pub included: bool,
    /// Members where it was prepared before the limit and not yet decided there.
    pub open_on: Vec<String>,
    /// Every participant's commit or abort entry in the oplogs read.
    pub decision_entries: Vec<DecisionAt>,
    /// The coordinator's decision document, when an oplog read holds it.
    pub coordinator_decision: Option<DecisionAt>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DecisionAt {
    pub member: String,
    pub ts: Ts,
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, spec::BinarySubtype, Binary, Bson, Timestamp};

    fn entry(ts: u32, o: bson::Document) -> Vec<u8> {
        bson::to_vec(&doc! {
            "lsid": { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] } },
            "txnNumber": 3i64, "op": "c", "ns": "admin.$cmd", "o": o,
            "ts": Bson::Timestamp(Timestamp { time: ts, increment: 1 }), "t": 1i64,
        })
        .unwrap()
    }

    fn decision(bytes: &[u8]) -> DecisionEntry {
        let raw = bson::RawDocument::from_bytes(bytes).unwrap();
        DecisionEntry::of(&Entry::parse(raw).unwrap())
            .unwrap()
            .expect("a decision")
    }

    #[test]
    fn one_decision_per_transaction_across_members() {
        let ct = Bson::Timestamp(Timestamp {
            time: 10,
            increment: 5,
        });
        let a = decision(&entry(
            11,
            doc! { "commitTransaction": 1, "commitTimestamp": ct.clone() },
        ));
        let b = decision(&entry(
            14,
            doc! { "commitTransaction": 1, "commitTimestamp": ct },
        ));
        assert_eq!(a.decision, TxnDecision::Commit(Ts::new(10, 5)));
        assert_eq!(a.key, b.key);
        let mut t = TxnTable::default();
        t.add("shard0", &[a]).unwrap();
        t.add("shard1", &[b]).unwrap();
        let d = t.decisions();
        assert_eq!(d.len(), 1);
        // shard1's commit entry (14) is past a limit at 12: it must have applied it.
        let limit = Ts::new(12, 0);
        let e = t.check_member("shard1", &[], limit).unwrap_err();
        assert!(e.to_string().contains("member `shard1`"), "{e}");
        let included = PreparedAtLimit {
            txn: "lsid 07070707070707070707070707070707, txnNumber 3".into(),
            first: Ts::new(9, 1),
            namespaces: vec![],
            decision: "commit".into(),
            commit_timestamp: Some(Ts::new(10, 5)),
            included: true,
        };
        t.check_member("shard1", &[included], limit).unwrap();
        // shard0 committed before the limit: nothing to check there.
        t.check_member("shard0", &[], limit).unwrap();
        // A limit at or before the commitTimestamp: left out everywhere.
        t.check_member("shard1", &[], Ts::new(10, 5)).unwrap();

        let abort = decision(&entry(15, doc! { "abortTransaction": 1 }));
        let e = t.add("shard2", &[abort]).unwrap_err();
        assert!(e.to_string().contains("decided two ways"), "{e}");
    }

    #[test]
    fn a_commit_without_commit_timestamp_is_an_error() {
        let bytes = entry(11, doc! { "commitTransaction": 1 });
        let raw = bson::RawDocument::from_bytes(&bytes).unwrap();
        let e = DecisionEntry::of(&Entry::parse(raw).unwrap()).unwrap_err();
        assert!(e.contains("commitTimestamp"), "{e}");
        let other = entry(11, doc! { "applyOps": [] });
        let raw = bson::RawDocument::from_bytes(&other).unwrap();
        assert!(DecisionEntry::of(&Entry::parse(raw).unwrap())
            .unwrap()
            .is_none());
    }
}
