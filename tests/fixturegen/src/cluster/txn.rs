//! Cross-shard transactions through mongos, committed by two-phase commit, as the
//! members log them (server `src/mongo/db/s/README_sessions_and_transactions.md`,
//! `transaction_coordinator.cpp`, `transaction_participant.cpp`):
//!
//! 1. the router sends the statements to each participant (nothing is logged yet);
//! 2. the coordinator (the first participant) inserts its document into
//!    `config.transaction_coordinators` with the participant list;
//! 3. each participant, asked to prepare, logs one `applyOps` holding its writes with
//!    `prepare: true` (its `ts` is the prepare timestamp);
//! 4. the coordinator decides: commit at `commitTimestamp` = the greatest prepare
//!    timestamp with `inc + 1` (`makeDecisionFromPrepareVoteConsensus`), written into
//!    its document; or abort;
//! 5. each participant logs `commitTransaction` (with that `commitTimestamp`) or
//!    `abortTransaction` when the decision reaches it, at a `ts` of its own after the
//!    commit timestamp: the participants' commit entries fall at different times, and
//!    here deliberately seconds apart, so that a limit between them is a limit that a
//!    per-shard `--oplogLimit` would tear.
//!
//! The truth: the transaction's writes are in the logical content at
//! `commitTimestamp` (all or nothing), whatever each participant's commit entry.

use bson::{doc, Bson, Document};
use pitr::oplog::Ts;
use serde::Serialize;

use super::member::doc_key;
use super::sim::{document_key, uuid_bson, Cluster};
use super::truth::LogicalOp;

/// One write of a transaction: set `field` of the document `id` of `ns`.
#[derive(Clone, Debug)]
pub struct TxnWrite {
    pub ns: &'static str,
    pub id: i64,
    pub field: &'static str,
    pub value: Bson,
}

/// A decision sent to a participant later (step 5), run by the timeline when its
/// time comes, so that other members' writes fall in between.
pub struct PendingDecision {
    pub at_ms: i64,
    pub shard: usize,
    pub entry: Document,
    /// The cluster time the decision message carries.
    pub heard: Ts,
    /// The writes this participant applies on commit (key, ns, post-image).
    pub apply: Vec<(String, String, Document)>,
    /// Index into `Cluster::txns` of the transaction.
    pub txn: usize,
}

/// `truth.json`'s record of one cross-shard transaction.
#[derive(Clone, Debug, Serialize)]
pub struct TxnTruth {
    /// `lsid <id hex>, txnNumber N` (pitr's label).
    pub txn: String,
    pub decision: &'static str,
    pub commit_timestamp: Option<Ts>,
    pub participants: Vec<Participant>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Participant {
    pub member: String,
    pub prepare_ts: Ts,
    /// Its commitTransaction / abortTransaction entry (filled in when logged).
    pub decision_ts: Option<Ts>,
}

/// One write staged on a participant: the document's key, its namespace, its
/// post-image, and the `u` entry inside the prepare's `applyOps`.
struct Staged {
    key: String,
    ns: String,
    post: Document,
    op: Document,
}

fn session(lsid: &[u8; 16]) -> Document {
    doc! { "id": uuid_bson(lsid), "uid": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0x5a; 32] }) }
}

impl Cluster {
    /// Steps 1-4 of a cross-shard transaction started at `now_ms`; the decisions
    /// (step 5) reach the participants `delays_ms` after the decision (one delay per
    /// participant, in participant order) and are returned for the timeline to run.
    pub fn cross_shard_txn(
        &mut self,
        now_ms: i64,
        lsid: [u8; 16],
        txn_number: i64,
        writes: &[TxnWrite],
        commit: bool,
        delays_ms: &[i64],
    ) -> Vec<PendingDecision> {
        // The participants: the shards owning the documents, in the order written.
        let mut parts: Vec<(usize, Vec<Staged>)> = Vec::new();
        for w in writes {
            let si = self.sharded(w.ns);
            let s = &self.sharded[si];
            let (uuid, key) = (s.uuid, s.key);
            let shard = s.owner(w.id);
            let k = doc_key(&Bson::Int64(w.id));
            let mut post = self.shards[shard]
                .coll(w.ns)
                .docs
                .get(&k)
                .cloned()
                .unwrap_or_else(|| panic!("generator bug: {} has no _id {}", w.ns, w.id));
            post.insert(w.field, w.value.clone());
            let op = doc! { "op": "u", "ns": w.ns, "ui": uuid_bson(&uuid),
            "o": { "$v": 2, "diff": { "u": { w.field: w.value.clone() } } }, "o2": document_key(&post, key) };
            let staged = Staged {
                key: k,
                ns: w.ns.to_string(),
                post,
                op,
            };
            match parts.iter_mut().find(|(p, _)| *p == shard) {
                Some((_, v)) => v.push(staged),
                None => parts.push((shard, vec![staged])),
            }
        }
        let coordinator = parts[0].0;
        let session_doc = session(&lsid);
        let coord_id = doc! { "lsid": session_doc.clone(), "txnNumber": txn_number };
        let participants: Vec<String> = parts
            .iter()
            .map(|(s, _)| self.shards[*s].id.clone())
            .collect();
        let mut ct = self.router;
        ct = ct.max(self.shards[coordinator].log(
            now_ms + 20,
            ct,
            doc! { "op": "i", "ns": "config.transaction_coordinators", "ui": uuid_bson(&[15; 16]),
            "o": { "_id": coord_id.clone(), "participants": participants.clone() } },
        ));
        let mut truth = TxnTruth {
            txn: format!(
                "lsid {}, txnNumber {txn_number}",
                lsid.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ),
            decision: if commit { "commit" } else { "abort" },
            commit_timestamp: None,
            participants: Vec::new(),
        };
        let mut prepares = Vec::new();
        let mut max_prepare = Ts::ZERO;
        for (k, (shard, ops)) in parts.iter().enumerate() {
            let apply: Vec<Document> = ops.iter().map(|w| w.op.clone()).collect();
            let ts = self.shards[*shard].log(
                now_ms + 30 + k as i64 * 7,
                ct,
                doc! { "lsid": session_doc.clone(), "txnNumber": txn_number, "op": "c", "ns": "admin.$cmd",
                       "o": { "applyOps": apply, "prepare": true },
                       "prevOpTime": { "ts": Bson::Timestamp(bson::Timestamp { time: 0, increment: 0 }), "t": -1i64 } },
            );
            max_prepare = max_prepare.max(ts);
            prepares.push(ts);
            truth.participants.push(Participant {
                member: self.shards[*shard].id.clone(),
                prepare_ts: ts,
                decision_ts: None,
            });
        }
        ct = ct.max(max_prepare);
        let commit_ts = Ts::new(max_prepare.t, max_prepare.i + 1);
        let decision = if commit {
            truth.commit_timestamp = Some(commit_ts);
            ct = ct.max(commit_ts);
            doc! { "decision": "commit", "commitTimestamp": Bson::Timestamp(bson::Timestamp { time: commit_ts.t, increment: commit_ts.i }) }
        } else {
            doc! { "decision": "abort", "abortStatus": { "code": 251i32, "codeName": "NoSuchTransaction", "errmsg": "prepare timed out" } }
        };
        let decided_ms = now_ms + 30 + parts.len() as i64 * 7 + 10;
        ct = ct.max(self.shards[coordinator].log(
            decided_ms,
            ct,
            // The whole document as the update (`persistDecisionBlocking`: an upsert
            // whose `u` is the document), so the oplog holds a replacement.
            doc! { "op": "u", "ns": "config.transaction_coordinators", "ui": uuid_bson(&[15; 16]),
                   "o": { "_id": coord_id.clone(), "participants": participants.clone(), "decision": decision },
                   "o2": { "_id": coord_id } },
        ));
        self.router = self.router.max(ct);
        if commit {
            for w in parts.iter().flat_map(|(_, v)| v) {
                self.logical.ops.push((
                    commit_ts,
                    LogicalOp::Put {
                        ns: w.ns.clone(),
                        key: w.key.clone(),
                        doc: w.post.clone(),
                    },
                ));
            }
        }
        let index = self.txns.len();
        self.txns.push(truth);
        parts
            .into_iter()
            .zip(prepares)
            .enumerate()
            .map(|(k, ((shard, ops), prepare_ts))| {
                let o = if commit {
                    doc! { "commitTransaction": 1i32, "commitTimestamp": Bson::Timestamp(bson::Timestamp { time: commit_ts.t, increment: commit_ts.i }) }
                } else {
                    doc! { "abortTransaction": 1i32 }
                };
                let term = self.shards[shard].term;
                PendingDecision {
                    at_ms: decided_ms + delays_ms.get(k).copied().unwrap_or(50),
                    shard,
                    entry: doc! { "lsid": session_doc.clone(), "txnNumber": txn_number, "op": "c", "ns": "admin.$cmd", "o": o,
                                  "prevOpTime": { "ts": Bson::Timestamp(bson::Timestamp { time: prepare_ts.t, increment: prepare_ts.i }), "t": term } },
                    heard: ct,
                    apply: if commit {
                        ops.into_iter().map(|w| (w.key, w.ns, w.post)).collect()
                    } else {
                        Vec::new()
                    },
                    txn: index,
                }
            })
            .collect()
    }

    /// Step 5 for one participant (and, after the last one, step 6).
    pub fn deliver(&mut self, d: PendingDecision) {
        let ts = self.shards[d.shard].log(d.at_ms, d.heard, d.entry);
        self.router = self.router.max(ts);
        for (key, ns, post) in d.apply {
            self.shards[d.shard].coll(&ns).docs.insert(key, post);
        }
        let me = self.shards[d.shard].id.clone();
        let t = &mut self.txns[d.txn];
        if let Some(p) = t.participants.iter_mut().find(|p| p.member == me) {
            p.decision_ts = Some(ts);
        }
    }
}
